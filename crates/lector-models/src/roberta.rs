//! RoBERTa and XLM-RoBERTa encoders (`model_type: roberta` / `xlm-roberta`).
//!
//! The network is BERT's; only the position ids differ: they start after `padding_idx`
//! (= `pad_token_id`) and padding tokens get `padding_idx` itself, as in
//! `create_position_ids_from_input_ids` of transformers.

use crate::bert::Bert;
use crate::config::Config;
use crate::encoder::Packed;
use crate::Inputs;
use candle_core::Result;
use candle_nn::VarBuilder;

/// The RoBERTa stack; `vb` is rooted where `embeddings.` and `encoder.` live.
pub struct Roberta {
    bert: Bert,
    padding_idx: u32,
}

impl Roberta {
    pub(crate) fn load(vb: &VarBuilder, cfg: &Config) -> Result<Self> {
        Ok(Self {
            bert: Bert::load(vb, cfg)?,
            padding_idx: cfg.pad_token_id,
        })
    }

    /// Packed hidden states of the real tokens.
    pub(crate) fn hidden(&self, inputs: &Inputs) -> Result<Packed> {
        self.hidden_upto(inputs, self.bert.depth())
    }

    /// [`Roberta::hidden`] after the first `depth` layers only (0: the embedding output).
    pub(crate) fn hidden_upto(&self, inputs: &Inputs, depth: usize) -> Result<Packed> {
        let positions = position_ids(&inputs.mask, inputs.seq_len, self.padding_idx);
        // transformers does not feed RoBERTa's tokenizers' token_type_ids to the model: all zero.
        let types = vec![0; inputs.ids.len()];
        self.bert.hidden_with(inputs, &positions, &types, depth)
    }
}

/// Running count of attended tokens, offset by `padding_idx`; padding keeps `padding_idx`.
fn position_ids(mask: &[u32], seq_len: usize, padding_idx: u32) -> Vec<u32> {
    mask.chunks(seq_len)
        .flat_map(|row| {
            let mut count = 0;
            row.iter().map(move |&m| {
                count += m;
                if m == 0 {
                    padding_idx
                } else {
                    padding_idx + count
                }
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn positions_skip_padding() {
        assert_eq!(
            super::position_ids(&[1, 1, 1, 0, 1, 0, 0, 0], 4, 1),
            vec![2, 3, 4, 1, 2, 1, 1, 1]
        );
    }
}
