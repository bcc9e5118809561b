//! An encoder with the extractive question-answering head of transformers'
//! `*ForQuestionAnswering`: `qa_outputs = Linear(hidden, 2)` giving start and end logits per token.

use crate::bert::Bert;
use crate::config::{Architecture, Config};
use crate::distilbert::DistilBert;
use crate::encoder::Packed;
use crate::error::{Error, Result};
use crate::layers::Linear;
use crate::matmul::Threads;
use crate::roberta::Roberta;
use candle_core::{DType, Device};
use candle_nn::VarBuilder;
use std::path::Path;

/// A right-padded batch of token sequences, row-major `(batch, seq_len)`.
#[derive(Debug, Clone, Default)]
pub struct Inputs {
    pub ids: Vec<u32>,
    pub type_ids: Vec<u32>,
    /// 1 for real tokens, 0 for padding.
    pub mask: Vec<u32>,
    pub batch: usize,
    pub seq_len: usize,
}

impl Inputs {
    /// A right-padded batch of `(token ids, token type ids)` rows.
    pub(crate) fn right_padded(rows: &[(&[u32], &[u32])], pad_id: u32) -> Inputs {
        let seq_len = rows.iter().map(|(ids, _)| ids.len()).max().unwrap_or(0);
        let mut inputs = Inputs {
            batch: rows.len(),
            seq_len,
            ..Inputs::default()
        };
        for (ids, types) in rows {
            let padding = seq_len - ids.len();
            inputs.ids.extend_from_slice(ids);
            inputs.ids.extend(std::iter::repeat_n(pad_id, padding));
            inputs.type_ids.extend_from_slice(types);
            inputs.type_ids.extend(std::iter::repeat_n(0, padding));
            inputs.mask.extend(std::iter::repeat_n(1, ids.len()));
            inputs.mask.extend(std::iter::repeat_n(0, padding));
        }
        inputs
    }

    /// Real tokens per row (padding is on the right).
    pub fn lengths(&self) -> Vec<usize> {
        self.mask
            .chunks(self.seq_len.max(1))
            .map(|row| row.iter().filter(|&&m| m != 0).count())
            .collect()
    }
}

/// Start and end logits, row-major `(batch, seq_len)`, float32 as the model computes them.
#[derive(Debug, Clone)]
pub struct QaLogits {
    pub start: Vec<f32>,
    pub end: Vec<f32>,
    pub seq_len: usize,
}

impl QaLogits {
    /// The start and end logits of row `i` (padding included).
    pub fn row(&self, i: usize) -> (&[f32], &[f32]) {
        let range = i * self.seq_len..(i + 1) * self.seq_len;
        (&self.start[range.clone()], &self.end[range])
    }
}

/// One of the encoder stacks, without a task head.
pub(crate) enum Encoder {
    Bert(Bert),
    DistilBert(DistilBert),
    Roberta(Roberta),
}

impl Encoder {
    /// Loads `cfg`'s architecture from `vb` (rooted at the checkpoint), with or without the
    /// architecture's name prefix; `weights` names the file in errors.
    pub(crate) fn load(vb: &VarBuilder, cfg: &Config, weights: &Path) -> Result<Self> {
        let wrap = |error| Error::Weights {
            path: weights.to_path_buf(),
            error,
        };
        let body = encoder_root(vb, cfg.architecture);
        Ok(match cfg.architecture {
            Architecture::Bert => Encoder::Bert(Bert::load(&body, cfg).map_err(wrap)?),
            Architecture::DistilBert => {
                Encoder::DistilBert(DistilBert::load(&body, cfg).map_err(wrap)?)
            }
            Architecture::Roberta => Encoder::Roberta(Roberta::load(&body, cfg).map_err(wrap)?),
        })
    }

    /// Packed hidden states of the real tokens of `inputs` (padding is never computed).
    pub(crate) fn hidden(&self, inputs: &Inputs) -> candle_core::Result<Packed> {
        match self {
            Encoder::Bert(m) => m.hidden(inputs),
            Encoder::DistilBert(m) => m.hidden(inputs),
            Encoder::Roberta(m) => m.hidden(inputs),
        }
    }

    /// [`Encoder::hidden`] after the first `depth` layers only (0: the embedding output), as
    /// `output_hidden_states[depth]` of transformers.
    pub(crate) fn hidden_upto(&self, inputs: &Inputs, depth: usize) -> candle_core::Result<Packed> {
        match self {
            Encoder::Bert(m) => m.hidden_upto(inputs, depth),
            Encoder::DistilBert(m) => m.hidden_upto(inputs, depth),
            Encoder::Roberta(m) => m.hidden_upto(inputs, depth),
        }
    }
}

/// A question-answering model: encoder + `qa_outputs`.
pub struct QaModel {
    encoder: Encoder,
    qa_outputs: Linear,
}

impl QaModel {
    /// Loads the weights of `cfg`'s architecture from `weights` (safetensors or a PyTorch pickle),
    /// accepting names with or without the `bert.` / `distilbert.` / `roberta.` prefix.
    pub fn load(weights: &Path, cfg: &Config) -> Result<Self> {
        let vb = open_weights(weights)?;
        let wrap = |error| Error::Weights {
            path: weights.to_path_buf(),
            error,
        };
        let encoder = Encoder::load(&vb, cfg, weights)?;
        if !vb.contains_tensor("qa_outputs.weight") {
            return Err(Error::NoQaHead {
                path: weights.to_path_buf(),
            });
        }
        let qa_outputs = Linear::load(&vb, "qa_outputs", cfg.hidden_size, 2).map_err(wrap)?;
        Ok(Self {
            encoder,
            qa_outputs,
        })
    }

    /// Start and end logits for every token of `inputs`; padding positions get 0 (the encoder
    /// only runs the real tokens).
    pub fn forward(&self, inputs: &Inputs) -> Result<QaLogits> {
        let hidden = self.encoder.hidden(inputs)?;
        let mut pairs = vec![0f32; hidden.tokens() * 2];
        self.qa_outputs
            .forward(&hidden.data, &mut pairs, Threads::One);
        let size = inputs.batch * inputs.seq_len;
        let (mut start, mut end) = (vec![0f32; size], vec![0f32; size]);
        let mut pairs = pairs.chunks_exact(2);
        for (w, &len) in hidden.lengths.iter().enumerate() {
            let row = w * inputs.seq_len..w * inputs.seq_len + len;
            for ((s, e), pair) in start[row.clone()]
                .iter_mut()
                .zip(&mut end[row])
                .zip(&mut pairs)
            {
                (*s, *e) = (pair[0], pair[1]);
            }
        }
        Ok(QaLogits {
            start,
            end,
            seq_len: inputs.seq_len,
        })
    }
}

/// Weights are converted to float32 on load, whatever their stored type (f32, f16, bf16).
pub(crate) fn open_weights(path: &Path) -> Result<VarBuilder<'static>> {
    let device = Device::Cpu;
    let is_pickle = path
        .extension()
        .is_some_and(|e| e == "bin" || e == "pt" || e == "pth");
    let vb = if is_pickle {
        VarBuilder::from_pth(path, DType::F32, &device)
    } else {
        // SAFETY: the file is memory-mapped read-only; lector never writes checkpoint files, and a
        // concurrent writer would be a misuse we cannot guard against (the same contract as candle's examples).
        unsafe { VarBuilder::from_mmaped_safetensors(&[path], DType::F32, &device) }
    };
    vb.map_err(|error| Error::Weights {
        path: path.to_path_buf(),
        error,
    })
}

/// Task-model checkpoints nest the encoder under a prefix; bare encoders do not.
pub(crate) fn encoder_root<'a>(vb: &VarBuilder<'a>, arch: Architecture) -> VarBuilder<'a> {
    let prefix = match arch {
        Architecture::Bert => "bert",
        Architecture::DistilBert => "distilbert",
        Architecture::Roberta => "roberta",
    };
    if vb.contains_tensor(&format!("{prefix}.embeddings.word_embeddings.weight")) {
        vb.pp(prefix)
    } else {
        vb.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_keep_their_type_ids_and_pad_on_the_right() {
        let inputs = Inputs::right_padded(&[(&[1, 2, 3], &[0, 0, 1]), (&[4], &[0])], 0);
        assert_eq!(inputs.ids, [1, 2, 3, 4, 0, 0]);
        assert_eq!(inputs.type_ids, [0, 0, 1, 0, 0, 0]);
        assert_eq!(inputs.mask, [1, 1, 1, 1, 0, 0]);
        assert_eq!(inputs.lengths(), [3, 1]);
    }
}
