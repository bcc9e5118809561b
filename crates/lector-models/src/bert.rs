//! BERT encoder (`model_type: bert`): word + position + token-type embeddings, post-LN layers.

use crate::config::Config;
use crate::layers::{embed, LayerNames, LayerNorm, TransformerLayer};
use crate::Inputs;
use candle_core::{Result, Tensor};
use candle_nn::VarBuilder;

/// Weight names inside `encoder.layer.N`, shared with RoBERTa.
pub(crate) const LAYER_NAMES: LayerNames = LayerNames {
    query: "attention.self.query",
    key: "attention.self.key",
    value: "attention.self.value",
    attn_out: "attention.output.dense",
    attn_norm: "attention.output.LayerNorm",
    ffn_in: "intermediate.dense",
    ffn_out: "output.dense",
    ffn_norm: "output.LayerNorm",
};

/// The BERT stack; `vb` is rooted where `embeddings.` and `encoder.` live.
pub struct Bert {
    word: Tensor,
    position: Tensor,
    token_type: Tensor,
    norm: LayerNorm,
    layers: Vec<TransformerLayer>,
}

impl Bert {
    pub(crate) fn load(vb: &VarBuilder, cfg: &Config) -> Result<Self> {
        let emb = vb.pp("embeddings");
        let h = cfg.hidden_size;
        Ok(Self {
            word: emb.get((cfg.vocab_size, h), "word_embeddings.weight")?,
            position: emb.get(
                (cfg.max_position_embeddings, h),
                "position_embeddings.weight",
            )?,
            token_type: emb.get(
                (cfg.type_vocab_size.max(1), h),
                "token_type_embeddings.weight",
            )?,
            norm: LayerNorm::load(&emb, "LayerNorm", h, cfg.layer_norm_eps)?,
            layers: load_layers(&vb.pp("encoder.layer"), cfg)?,
        })
    }

    /// Hidden states `(batch * seq, hidden)` for explicit position and token-type ids (flattened).
    pub(crate) fn forward_with(
        &self,
        inputs: &Inputs,
        positions: &[u32],
        types: &[u32],
    ) -> Result<Tensor> {
        let device = self.word.device();
        let ids = Tensor::new(inputs.ids.as_slice(), device)?;
        let positions = Tensor::new(positions, device)?;
        let types = Tensor::new(types, device)?;
        let xs = embed(
            (&self.word, &ids),
            &[(&self.position, &positions), (&self.token_type, &types)],
            &self.norm,
        )?;
        run_layers(&self.layers, xs, inputs)
    }

    /// Hidden states `(batch * seq, hidden)` with positions 0, 1, 2, ... in every row.
    pub(crate) fn forward(&self, inputs: &Inputs) -> Result<Tensor> {
        let positions: Vec<u32> = (0..inputs.batch)
            .flat_map(|_| 0..inputs.seq_len as u32)
            .collect();
        self.forward_with(inputs, &positions, &inputs.type_ids)
    }
}

pub(crate) fn load_layers(vb: &VarBuilder, cfg: &Config) -> Result<Vec<TransformerLayer>> {
    (0..cfg.num_layers)
        .map(|i| TransformerLayer::load(&vb.pp(i), &LAYER_NAMES, cfg))
        .collect()
}

/// Runs `layers` over embedded inputs, masking padding.
pub(crate) fn run_layers(
    layers: &[TransformerLayer],
    mut xs: Tensor,
    inputs: &Inputs,
) -> Result<Tensor> {
    let lengths = inputs.lengths();
    for layer in layers {
        xs = layer.forward(&xs, &lengths)?;
    }
    Ok(xs)
}
