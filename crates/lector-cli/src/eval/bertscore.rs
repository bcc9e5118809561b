//! `lector eval bertscore`: BERTScore of candidates against references with a local encoder,
//! identical to the `bert-score` package (0.3.13) for the same model, layer and settings.
//! The scoring is `lector_models::bertscore`'s; this chooses the layer, shows progress and
//! prints.

use super::{write_jsonl, BootstrapArgs};
use crate::table::print_table;
use anyhow::{bail, Context, Result};
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use lector_eval::bertscore::{self, Baseline, Item, Prf};
use lector_eval::stats::{self, Interval};
use lector_models::bertscore::{
    model_name, package_default_layer, BertScorer, ScoreOptions, Scored,
};
use lector_models::TokenEncoder;
use serde_json::{json, Map, Value};
use std::path::{Path, PathBuf};

#[derive(Args)]
pub struct BertscoreArgs {
    /// JSON lines `{"id"?: .., "candidate": "...", "references": ["...", ..]}` (or
    /// `"reference": "..."`); a candidate scores its best reference, per metric, as the package.
    items: PathBuf,
    /// Encoder checkpoint directory (BERT, RoBERTa, DistilBERT or XLM-RoBERTa: config.json,
    /// weights, tokenizer.json); a task head is ignored.
    #[arg(long, value_name = "DIR")]
    model: PathBuf,
    /// The hidden layer whose token states are matched: 0 is the embedding output, the model's
    /// layer count its last layer [default: the package's tuned layer when the directory name or
    /// config.json's `_name_or_path` is a model it knows (roberta-large: 17), else the last layer].
    #[arg(long, value_name = "N")]
    layer: Option<usize>,
    /// Weight tokens by their idf over all the items' references (the package's `idf=True`);
    /// without it every token weighs 1 and [CLS]/[SEP] (<s>/</s>) 0.
    #[arg(long)]
    idf: bool,
    /// Rescale P, R and F1 with the baselines of this file, the row of the layer used
    /// (the package's `rescale_baseline/<lang>/<model>.tsv` format: `LAYER,P,R,F`).
    #[arg(long, value_name = "FILE")]
    baseline: Option<PathBuf>,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
    /// Write one JSON line per item: `{"id", "precision", "recall", "f1"}` (for `eval compare`).
    #[arg(long, value_name = "FILE")]
    per_item: Option<PathBuf>,
    #[command(flatten)]
    bootstrap: BootstrapArgs,
}

/// The settings a score depends on, printed with every result: scores from different models,
/// layers, weightings or baselines do not compare.
struct Setting {
    model: String,
    layer: usize,
    layers: usize,
    layer_source: &'static str,
    idf: bool,
    baseline: Option<PathBuf>,
    /// bfloat16 products (`--precision bf16` on a CPU with AVX512-BF16): near, not equal to,
    /// the package's float32 scores.
    bf16: bool,
}

pub fn run(args: &BertscoreArgs) -> Result<()> {
    let items = bertscore::read_items(&args.items)?;
    if items.is_empty() {
        bail!("{}: no items", args.items.display());
    }
    let encoder = TokenEncoder::load(&args.model)
        .with_context(|| format!("cannot load the encoder in {}", args.model.display()))?;
    let setting = setting(args, &encoder);
    let scorer = BertScorer::new(encoder, setting.layer)
        .with_context(|| format!("layer {} ({})", setting.layer, setting.layer_source))?;
    let options = ScoreOptions {
        idf: args.idf,
        baseline: match &args.baseline {
            Some(path) => Some(Baseline::read(path)?.at_layer(setting.layer)?),
            None => None,
        },
    };
    let bar = progress_bar();
    let scored = scorer.score(&items, &options, &mut |done, total| {
        bar.set_length(total as u64);
        bar.set_position(done as u64);
    })?;
    bar.finish_and_clear();
    warn_about_degenerate_items(&scored);
    if let Some(path) = &args.per_item {
        write_per_item(path, &items, &scored.scores)?;
    }
    report(args, &setting, &scored.scores)
}

/// One JSON line per item, `{"id", "precision", "recall", "f1"}` (NaN written as null).
fn write_per_item(path: &Path, items: &[Item], scores: &[Prf]) -> Result<()> {
    let rows: Vec<Value> = items
        .iter()
        .zip(scores)
        .map(|(item, s)| {
            json!({"id": item.id, "precision": s.precision, "recall": s.recall, "f1": s.f1})
        })
        .collect();
    write_jsonl(path, &rows)
}

/// The layer to use (checked against the model by `BertScorer::new`) and the model's name.
fn setting(args: &BertscoreArgs, encoder: &TokenEncoder) -> Setting {
    let layers = encoder.layers();
    let (layer, layer_source) = match args.layer {
        Some(layer) => (layer, "--layer"),
        None => match package_default_layer(&args.model) {
            Some(layer) => (layer, "the package's default for this model"),
            None => (layers, "the last layer"),
        },
    };
    Setting {
        model: model_name(&args.model),
        layer,
        layers,
        layer_source,
        idf: args.idf,
        baseline: args.baseline.clone(),
        bf16: lector_models::bf16_active(),
    }
}

fn progress_bar() -> ProgressBar {
    let bar = ProgressBar::new(0);
    let style =
        ProgressStyle::with_template("embedding {wide_bar} {pos}/{len} texts ({per_sec}, {eta})")
            .expect("valid template");
    bar.set_style(style);
    bar
}

/// Says what the package would say about empty texts, and where scores are NaN.
fn warn_about_degenerate_items(scored: &Scored) {
    if scored.empty_candidates > 0 {
        eprintln!(
            "warning: {} empty candidates score P = R = F1 = 0",
            scored.empty_candidates
        );
    }
    if scored.empty_references > 0 {
        eprintln!(
            "warning: {} items have an empty reference, which scores P = R = F1 = 0",
            scored.empty_references
        );
    }
    let nan = scored.nan_items();
    if nan > 0 {
        eprintln!(
            "warning: {nan} items have a NaN precision or recall: every token of a text weighs 0 \
             (with --idf, a text made only of tokens found in every reference), as in the package"
        );
    }
}

fn report(args: &BertscoreArgs, setting: &Setting, scores: &[Prf]) -> Result<()> {
    let settings = args.bootstrap.settings();
    let metric = |pick: fn(&Prf) -> f64| -> Interval {
        let values: Vec<f64> = scores.iter().map(pick).collect();
        stats::bootstrap_mean(&values, &settings)
    };
    let intervals = [
        ("precision", metric(|s| s.precision)),
        ("recall", metric(|s| s.recall)),
        ("f1", metric(|s| s.f1)),
    ];
    if args.json {
        let mut out = Map::new();
        out.insert("items".into(), scores.len().into());
        out.insert("model".into(), setting.model.clone().into());
        out.insert("layer".into(), setting.layer.into());
        out.insert("layers".into(), setting.layers.into());
        out.insert("idf".into(), setting.idf.into());
        let baseline = setting.baseline.as_ref().map(|p| p.display().to_string());
        out.insert("baseline".into(), baseline.into());
        // The arithmetic of the encoder's products (`--precision`).
        let products = if setting.bf16 { "bf16" } else { "f32" };
        out.insert("products".into(), products.into());
        out.insert("confidence".into(), settings.confidence.into());
        for (name, interval) in intervals {
            out.insert(name.into(), serde_json::to_value(interval)?);
        }
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(());
    }
    let on_off = |on: bool| if on { "on" } else { "off" };
    let baseline = match &setting.baseline {
        Some(path) => format!("on ({})", path.display()),
        None => "off".into(),
    };
    println!(
        "{} items; model {}, layer {} of {} ({}), idf {}, baseline {}{}",
        scores.len(),
        setting.model,
        setting.layer,
        setting.layers,
        setting.layer_source,
        on_off(setting.idf),
        baseline,
        if setting.bf16 { ", bf16 products" } else { "" }
    );
    println!("(scores from different models, layers, idf or baseline settings do not compare)");
    let rows: Vec<Vec<String>> = intervals
        .iter()
        .map(|(name, i)| {
            vec![
                name.to_string(),
                format!("{:.4}", i.mean),
                format!("[{:.4}, {:.4}]", i.low, i.high),
            ]
        })
        .collect();
    let ci = format!("{:.0}% CI", settings.confidence * 100.0);
    print_table(&["metric", "mean", &ci], &rows);
    Ok(())
}
