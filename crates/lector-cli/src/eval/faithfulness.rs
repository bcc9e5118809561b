//! `lector eval faithfulness SET.jsonl`: how well the claim checker tells supported claims from
//! unsupported ones, beside today's word-overlap support score.
//!
//! The set is JSON lines `{"id", "passage", "claim", "label": "supported"|"unsupported", "kind"}`
//! (`bench/faithfulness_set.py` builds one from SQuAD). Each claim is checked against its passage
//! by the lexical claim checker (`lector_generate::claims::check_text`) and scored by the word
//! overlap of `grounded::support`. Reported: the AUROC of each score for "unsupported" (ranking
//! by one minus the score), the accuracy of each checker at its own threshold, and per kind of
//! claim the accuracy of both and the checker's most frequent failure. With `--judge`, an LLM
//! judge (the generator options: a local GGUF or an OpenAI-compatible endpoint) also decides
//! each claim against its passage, reported as a third checker.

use crate::table::print_table;
use anyhow::{bail, Context, Result};
use clap::Args;
use lector_generate::claims::COVERAGE_THRESHOLD;
use lector_generate::grounded::SUPPORT_THRESHOLD;
use lector_pipeline::lab::faithfulness::{self, Item, Report};
use std::path::PathBuf;

#[derive(Args)]
pub struct FaithfulnessArgs {
    /// Claim set: JSON lines {"id", "passage", "claim", "label": "supported"|"unsupported", "kind"}.
    set: PathBuf,
    /// Write one JSON line per claim: both scores, verdicts and the checker's failures.
    #[arg(long, value_name = "FILE")]
    per_claim: Option<PathBuf>,
    /// Print JSON instead of tables.
    #[arg(long)]
    json: bool,
    /// Also let an LLM judge decide each claim (the model given by the generator options, as
    /// `lector eval judge` takes it).
    #[arg(long)]
    judge: bool,
    #[command(flatten)]
    generator: crate::generate::GeneratorArgs,
}

pub fn run(args: &FaithfulnessArgs) -> Result<()> {
    let items: Vec<Item> = lector_eval::input::read_jsonl(&args.set)?;
    if items.is_empty() {
        bail!("{}: no claims", args.set.display());
    }
    let report = match args.judge {
        false => faithfulness::run(items, None, &mut || {})?,
        true => {
            let options = args.generator.options()?;
            let generator = args.generator.load()?;
            let judge = lector_generate::judge::Judge::new(generator.as_ref(), options)?;
            let bar = super::odqa::progress_bar(items.len() as u64);
            bar.set_message("claims judged");
            let report =
                faithfulness::run(items, Some((&judge, judge.model())), &mut || bar.inc(1))
                    .with_context(|| args.set.display().to_string())?;
            bar.finish_and_clear();
            report
        }
    };
    if let Some(path) = &args.per_claim {
        super::write_jsonl(path, &report.per_claim)?;
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(());
    }
    print_report(&args.set, &report);
    if let Some(q) = &report.checkers.judge {
        let auroc = q.auroc.map_or("-".to_string(), |v| format!("{v:.4}"));
        println!(
            "\njudge {}: auroc_unsupported {auroc}, accuracy {:.2}% (a verdict, so the AUROC \
             ranks two levels)",
            q.model.as_deref().unwrap_or_default(),
            q.accuracy
        );
    }
    Ok(())
}

fn print_report(set: &std::path::Path, report: &Report) {
    let (checker, overlap, kinds) = (
        &report.checkers.claims,
        &report.checkers.word_overlap,
        &report.kinds,
    );
    println!(
        "{} claims ({} unsupported) from {}",
        report.claims,
        report.unsupported,
        set.display()
    );
    let opt = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.4}"));
    let rows = vec![
        vec![
            "claims (lexical)".to_string(),
            opt(checker.auroc),
            format!("{:.2}", checker.accuracy),
            format!("{COVERAGE_THRESHOLD:.2}"),
        ],
        vec![
            "word overlap".to_string(),
            opt(overlap.auroc),
            format!("{:.2}", overlap.accuracy),
            format!("{SUPPORT_THRESHOLD:.2}"),
        ],
    ];
    print_table(
        &["checker", "auroc_unsupported", "accuracy_%", "threshold"],
        &rows,
    );
    println!();
    let rows: Vec<Vec<String>> = kinds
        .iter()
        .map(|k| {
            vec![
                k["kind"].as_str().unwrap_or_default().to_string(),
                k["label"].as_str().unwrap_or_default().to_string(),
                k["claims"].to_string(),
                format!("{:.2}", k["claims_accuracy"].as_f64().unwrap_or(0.0)),
                format!("{:.2}", k["overlap_accuracy"].as_f64().unwrap_or(0.0)),
                format!("{:.3}", k["mean_score"].as_f64().unwrap_or(0.0)),
                k["top_failure"].as_str().unwrap_or("-").to_string(),
            ]
        })
        .collect();
    print_table(
        &[
            "kind",
            "label",
            "claims",
            "claims_acc_%",
            "overlap_acc_%",
            "mean_score",
            "top_failure",
        ],
        &rows,
    );
}
