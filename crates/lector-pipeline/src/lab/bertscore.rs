//! `lector eval bertscore` as a run: BERTScore of candidates against references with a local
//! encoder, identical to the `bert-score` package (0.3.13) for the same model, layer and
//! settings (`lector_models::bertscore` scores), with bootstrap intervals.

use crate::{Error, Result};
use lector_eval::bertscore::{Baseline, Item, Prf};
use lector_eval::stats::{self, Bootstrap, Interval};
use lector_models::bertscore::{model_name, package_default_layer, BertScorer, ScoreOptions};
use lector_models::TokenEncoder;
use serde::Serialize;
use std::path::PathBuf;

/// What a BERTScore run uses.
#[derive(Debug, Clone)]
pub struct Options {
    /// Encoder checkpoint directory (BERT, RoBERTa, DistilBERT or XLM-RoBERTa).
    pub model: PathBuf,
    /// The hidden layer matched (0: the embedding output); `None`: the package's tuned layer
    /// for a model it knows, else the last.
    pub layer: Option<usize>,
    /// Weight tokens by idf over all the items' references.
    pub idf: bool,
    /// Rescale with the baselines of this file (the package's `LAYER,P,R,F` rows).
    pub baseline: Option<PathBuf>,
    /// The intervals' resampling.
    pub bootstrap: Bootstrap,
}

/// A run's report: the settings a score depends on (scores of other models, layers,
/// weightings or baselines do not compare), the means with intervals, and every item's scores.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub items: usize,
    pub model: String,
    pub layer: usize,
    pub layers: usize,
    /// Why this layer: `--layer`, the package's default for the model, or the last layer.
    #[serde(skip)]
    pub layer_source: &'static str,
    pub idf: bool,
    pub baseline: Option<String>,
    /// The arithmetic of the encoder's products: `f32`, `bf16` or `int8` (the last two near, not
    /// equal to, the package's scores).
    pub products: &'static str,
    pub confidence: f64,
    pub precision: Interval,
    pub recall: Interval,
    pub f1: Interval,
    /// Candidates that were empty (they score 0, as in the package).
    #[serde(skip)]
    pub empty_candidates: usize,
    /// Items with an empty reference (they score 0).
    #[serde(skip)]
    pub empty_references: usize,
    /// Items whose precision or recall is NaN (every token weighs 0).
    #[serde(skip)]
    pub nan_items: usize,
    /// Every item's scores, in order.
    #[serde(skip)]
    pub scores: Vec<Prf>,
}

/// Scores `items`; `progress` gets (texts embedded, texts).
pub fn run(
    items: &[Item],
    options: &Options,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<Report> {
    if items.is_empty() {
        return Err(Error::Options("BERTScore needs at least one item".into()));
    }
    let model_error = |e: lector_models::Error| Error::Model {
        what: "BERTScore encoder",
        path: options.model.clone(),
        message: e.to_string(),
    };
    let encoder = TokenEncoder::load(&options.model).map_err(model_error)?;
    let layers = encoder.layers();
    let (layer, layer_source) = match options.layer {
        Some(layer) => (layer, "--layer"),
        None => match package_default_layer(&options.model) {
            Some(layer) => (layer, "the package's default for this model"),
            None => (layers, "the last layer"),
        },
    };
    let scorer = BertScorer::new(encoder, layer)
        .map_err(|e| Error::Options(format!("layer {layer} ({layer_source}): {e}")))?;
    let baseline = match &options.baseline {
        Some(path) => Some(Baseline::read(path)?.at_layer(layer)?),
        None => None,
    };
    let scored = scorer
        .score(
            items,
            &ScoreOptions {
                idf: options.idf,
                baseline,
            },
            progress,
        )
        .map_err(model_error)?;
    let metric = |pick: fn(&Prf) -> f64| -> Interval {
        let values: Vec<f64> = scored.scores.iter().map(pick).collect();
        stats::bootstrap_mean(&values, &options.bootstrap)
    };
    Ok(Report {
        items: items.len(),
        model: model_name(&options.model),
        layer,
        layers,
        layer_source,
        idf: options.idf,
        baseline: options.baseline.as_ref().map(|p| p.display().to_string()),
        products: match lector_models::active_precision() {
            lector_models::Precision::F32 => "f32",
            lector_models::Precision::Bf16 => "bf16",
            lector_models::Precision::Int8 => "int8",
        },
        confidence: options.bootstrap.confidence,
        precision: metric(|s| s.precision),
        recall: metric(|s| s.recall),
        f1: metric(|s| s.f1),
        empty_candidates: scored.empty_candidates,
        empty_references: scored.empty_references,
        nan_items: scored.nan_items(),
        scores: scored.scores,
    })
}

impl Report {
    /// One record per item, `{"id", "precision", "recall", "f1"}` (for `eval compare`).
    pub fn per_item(&self, items: &[Item]) -> Vec<serde_json::Value> {
        items
            .iter()
            .zip(&self.scores)
            .map(|(item, s)| {
                serde_json::json!({"id": item.id, "precision": s.precision, "recall": s.recall, "f1": s.f1})
            })
            .collect()
    }
}
