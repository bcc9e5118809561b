//! BERT encoder (`model_type: bert`): word + position + token-type embeddings, post-LN layers.

use crate::config::Config;
use crate::encoder::{self, Packed};
use crate::layers::{embed, Embedding, LayerNames, LayerNorm, TransformerLayer};
use crate::Inputs;
use candle_core::Result;
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
    word: Embedding,
    position: Embedding,
    token_type: Embedding,
    norm: LayerNorm,
    layers: Vec<TransformerLayer>,
}

impl Bert {
    pub(crate) fn load(vb: &VarBuilder, cfg: &Config) -> Result<Self> {
        let emb = vb.pp("embeddings");
        let h = cfg.hidden_size;
        Ok(Self {
            word: Embedding::load(&emb, "word_embeddings", cfg.vocab_size, h)?,
            position: Embedding::load(&emb, "position_embeddings", cfg.max_position_embeddings, h)?,
            token_type: Embedding::load(
                &emb,
                "token_type_embeddings",
                cfg.type_vocab_size.max(1),
                h,
            )?,
            norm: LayerNorm::load(&emb, "LayerNorm", h, cfg.layer_norm_eps)?,
            layers: load_layers(&vb.pp("encoder.layer"), cfg)?,
        })
    }

    /// Packed hidden states of the real tokens after the first `depth` layers (0: the
    /// embedding output), for explicit position and token-type ids (flattened like `inputs.ids`).
    pub(crate) fn hidden_with(
        &self,
        inputs: &Inputs,
        positions: &[u32],
        types: &[u32],
        depth: usize,
    ) -> Result<Packed> {
        let Some(layers) = self.layers.get(..depth) else {
            candle_core::bail!("layer {depth} asked of a {}-layer encoder", self.depth());
        };
        // transformers' order of summation: word + token type, then + position.
        let tables = [
            (&self.word, inputs.ids.as_slice()),
            (&self.token_type, types),
            (&self.position, positions),
        ];
        let mut xs = embed(&tables, inputs, &self.norm)?;
        encoder::run(layers, &mut xs);
        Ok(xs)
    }

    /// Packed hidden states with positions 0, 1, 2, ... in every row.
    pub(crate) fn hidden(&self, inputs: &Inputs) -> Result<Packed> {
        self.hidden_upto(inputs, self.depth())
    }

    /// [`Bert::hidden`] after the first `depth` layers only (BERTScore reads an inner layer).
    pub(crate) fn hidden_upto(&self, inputs: &Inputs, depth: usize) -> Result<Packed> {
        let positions: Vec<u32> = (0..inputs.batch)
            .flat_map(|_| 0..inputs.seq_len as u32)
            .collect();
        self.hidden_with(inputs, &positions, &inputs.type_ids, depth)
    }

    /// The number of transformer layers.
    pub(crate) fn depth(&self) -> usize {
        self.layers.len()
    }
}

pub(crate) fn load_layers(vb: &VarBuilder, cfg: &Config) -> Result<Vec<TransformerLayer>> {
    (0..cfg.num_layers)
        .map(|i| TransformerLayer::load(&vb.pp(i), &LAYER_NAMES, cfg))
        .collect()
}
