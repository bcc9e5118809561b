//! DistilBERT encoder (`model_type: distilbert`): no token types, its own weight names.

use crate::bert::run_layers;
use crate::config::Config;
use crate::layers::{embed, LayerNames, LayerNorm, TransformerLayer};
use crate::Inputs;
use candle_core::{Result, Tensor};
use candle_nn::VarBuilder;

const LAYER_NAMES: LayerNames = LayerNames {
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
    word: Tensor,
    position: Tensor,
    norm: LayerNorm,
    layers: Vec<TransformerLayer>,
}

impl DistilBert {
    pub(crate) fn load(vb: &VarBuilder, cfg: &Config) -> Result<Self> {
        let emb = vb.pp("embeddings");
        let h = cfg.hidden_size;
        let layers = vb.pp("transformer.layer");
        Ok(Self {
            word: emb.get((cfg.vocab_size, h), "word_embeddings.weight")?,
            position: emb.get(
                (cfg.max_position_embeddings, h),
                "position_embeddings.weight",
            )?,
            norm: LayerNorm::load(&emb, "LayerNorm", h, 1e-12)?,
            layers: (0..cfg.num_layers)
                .map(|i| TransformerLayer::load(&layers.pp(i), &LAYER_NAMES, cfg))
                .collect::<Result<_>>()?,
        })
    }

    /// Hidden states `(batch * seq, hidden)`.
    pub(crate) fn forward(&self, inputs: &Inputs) -> Result<Tensor> {
        let device = self.word.device();
        let ids = Tensor::new(inputs.ids.as_slice(), device)?;
        let positions: Vec<u32> = (0..inputs.batch)
            .flat_map(|_| 0..inputs.seq_len as u32)
            .collect();
        let positions = Tensor::new(positions.as_slice(), device)?;
        let xs = embed(
            (&self.word, &ids),
            &[(&self.position, &positions)],
            &self.norm,
        )?;
        run_layers(&self.layers, xs, inputs)
    }
}
