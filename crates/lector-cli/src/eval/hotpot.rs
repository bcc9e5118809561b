//! `lector eval hotpot`: multi-hop questions end to end on a HotpotQA file, scored with the
//! official HotpotQA metrics. The run is `lector_pipeline::lab::hotpot`'s; this parses the
//! arguments and renders the report.

use super::{write_jsonl, OutputArgs};
use crate::hops::HopArgs;
use crate::search::{notify, pipeline_config, RerankOptions, RetrievalOptions};
use crate::table::print_table;
use anyhow::{Context, Result};
use clap::{Args, ValueEnum};
use lector_pipeline::lab::hotpot::{self, Report, Step, TYPE_HEADER};
use std::path::PathBuf;

#[derive(Args)]
pub struct HotpotArgs {
    /// HotpotQA file in the official distractor format (questions with their 10 paragraphs).
    data: PathBuf,
    /// distractor: each question is searched among its own 10 paragraphs; open: among every
    /// paragraph of the file, deduplicated by title.
    #[arg(long, value_enum, default_value_t = Setting::Distractor)]
    setting: Setting,
    /// With --setting open: add the paragraphs to this index (kept, and reused when run again)
    /// instead of a temporary one.
    #[arg(long)]
    index: Option<PathBuf>,
    #[command(flatten)]
    retrieval: RetrievalOptions,
    #[command(flatten)]
    rerank: RerankOptions,
    #[command(flatten)]
    hops: HopArgs,
    /// Passages read by the first hop.
    #[arg(value_parser = crate::values::at_least_one, long, default_value_t = 5)]
    k: usize,
    /// Skip the first N questions (with --limit, a slice: choose settings on one part, report on another).
    #[arg(long, default_value_t = 0, value_name = "N")]
    offset: usize,
    /// Only N questions.
    #[arg(long, value_name = "N")]
    limit: Option<usize>,
    /// Reader checkpoint directory [default: $LECTOR_READER, else the shipped models/reader-minilm-squad].
    #[arg(long, value_name = "DIR")]
    model: Option<PathBuf>,
    /// Write one JSON line per question (answer, scores, both@k, hop times) for `eval compare`.
    #[arg(long, value_name = "FILE")]
    per_question: Option<PathBuf>,
    /// Write the predictions in the official format ({"answer": .., "sp": ..}).
    #[arg(long, value_name = "FILE")]
    predictions: Option<PathBuf>,
    #[command(flatten)]
    output: OutputArgs,
}

/// `--setting`.
#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Setting {
    Distractor,
    Open,
}

impl From<Setting> for hotpot::Setting {
    fn from(s: Setting) -> Self {
        match s {
            Setting::Distractor => hotpot::Setting::Distractor,
            Setting::Open => hotpot::Setting::Open,
        }
    }
}

pub fn run(args: &HotpotArgs) -> Result<()> {
    let options = hotpot::Options {
        setting: args.setting.into(),
        index: args.index.clone(),
        k: args.k,
        offset: args.offset,
        limit: args.limit,
        hops: args.hops.options(),
        decompose: args.hops.decompose,
        bootstrap: args.output.bootstrap.settings(),
    };
    let config = pipeline_config(args.model.as_deref(), &args.retrieval, &args.rerank);
    let work = tempfile::tempdir().context("creating a temporary index directory")?;
    let bar = super::odqa::progress_bar(0);
    let report = hotpot::run(
        &args.data,
        &config,
        &options,
        work.path(),
        &notify,
        &mut |step, done, total| {
            bar.set_message(match step {
                Step::Embed => "passages embedded",
                Step::Ask => "questions",
            });
            bar.set_length(total as u64);
            bar.set_position(done as u64);
        },
    )?;
    bar.finish_and_clear();
    if let Some(path) = &args.predictions {
        report.predictions.write(path)?;
    }
    if let Some(path) = &args.per_question {
        write_jsonl(path, &report.rows)?;
    }
    if let Some(path) = &args.output.html {
        report.html(&args.data).write(path)?;
    }
    if args.output.json {
        println!("{}", serde_json::to_string_pretty(&report.to_json())?);
        return Ok(());
    }
    print_report(&report)
}

fn print_report(report: &Report) -> Result<()> {
    println!(
        "{} questions, {} setting, {} hop(s)",
        report.rows.len(),
        report.setting.name(),
        report.hops
    );
    let table: Vec<Vec<String>> = report
        .intervals
        .iter()
        .map(|(name, i)| {
            vec![
                name.clone(),
                format!("{:.2}", 100.0 * i.mean),
                format!("[{:.2}, {:.2}]", 100.0 * i.low, 100.0 * i.high),
            ]
        })
        .collect();
    print_table(
        &[
            "metric",
            "mean",
            &format!("{:.0}% CI", report.confidence * 100.0),
        ],
        &table,
    );
    println!();
    print_table(&TYPE_HEADER, &report.type_table());
    println!();
    for (hop, summary) in report.latency().iter().enumerate() {
        if let Some(l) = summary {
            println!(
                "time: hop {} median {:.1} ms, p95 {:.1} ms ({} questions)",
                hop + 1,
                l.p50,
                l.p95,
                l.count
            );
        }
    }
    if report.hops == 2 {
        println!(
            "stopped after hop 1: {} of {}",
            report.stopped(),
            report.rows.len()
        );
    }
    Ok(())
}
