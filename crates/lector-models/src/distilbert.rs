//! DistilBERT encoder (`model_type: distilbert`): no token types, its own weight names.

use crate::config::Config;
use crate::encoder::{self, Packed};
use crate::layers::{embed, Embedding, LayerNames, LayerNorm, TransformerLayer};
use crate::Inputs;
use candle_core::Result;
use candle_nn::VarBuilder;

pub(crate) const LAYER_NAMES: LayerNames = LayerNames {
    query: "attention.q_lin",
    key: "attention.k_lin",
    value: "attention.v_lin",
    attn_out: "attention.out_lin",
    attn_norm: "sa_layer_norm",
    ffn_in: "ffn.lin1",
    ffn_out: "ffn.lin2",
    ffn_norm: "output_layer_norm",
};

/// The DistilBERT stack; `vb` is rooted where `embeddings.` and `transformer.` live.
pub struct DistilBert {
    word: Embedding,
    position: Embedding,
    norm: LayerNorm,
    layers: Vec<TransformerLayer>,
}

impl DistilBert {
    pub(crate) fn load(vb: &VarBuilder, cfg: &Config) -> Result<Self> {
        let emb = vb.pp("embeddings");
        let h = cfg.hidden_size;
        let layers = vb.pp("transformer.layer");
        Ok(Self {
            word: Embedding::load(&emb, "word_embeddings", cfg.vocab_size, h)?,
            position: Embedding::load(&emb, "position_embeddings", cfg.max_position_embeddings, h)?,
            norm: LayerNorm::load(&emb, "LayerNorm", h, 1e-12)?,
            layers: (0..cfg.num_layers)
                .map(|i| TransformerLayer::load(&layers.pp(i), &LAYER_NAMES, cfg))
                .collect::<Result<_>>()?,
        })
    }

    /// Packed hidden states of the real tokens.
    pub(crate) fn hidden(&self, inputs: &Inputs) -> Result<Packed> {
        self.hidden_upto(inputs, self.layers.len())
    }

    /// [`DistilBert::hidden`] after the first `depth` layers only (0: the embedding output).
    pub(crate) fn hidden_upto(&self, inputs: &Inputs, depth: usize) -> Result<Packed> {
        let Some(layers) = self.layers.get(..depth) else {
            candle_core::bail!(
                "layer {depth} asked of a {}-layer encoder",
                self.layers.len()
            );
        };
        let positions: Vec<u32> = (0..inputs.batch)
            .flat_map(|_| 0..inputs.seq_len as u32)
            .collect();
        let tables = [
            (&self.word, inputs.ids.as_slice()),
            (&self.position, &positions),
        ];
        let mut xs = embed(&tables, inputs, &self.norm)?;
        encoder::run(layers, &mut xs);
        Ok(xs)
    }
}
