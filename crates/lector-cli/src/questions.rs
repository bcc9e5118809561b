//! `lector generate-questions`: a test set from the documents of an index
//! ([`lector_pipeline::questions`]): questions proposed by rule or by a language model, kept when
//! the reader recovers the answer and retrieval finds the passage, written as SQuAD v1.1 JSON.

use crate::generate::GeneratorArgs;
use crate::index::IndexDir;
use crate::search::{RerankOptions, RetrievalOptions};
use crate::table::print_table;
use anyhow::{Context, Result};
use clap::Args;
use lector_pipeline::questions::{self, Method, Options};
use lector_pipeline::Built;
use std::path::PathBuf;

#[derive(Args)]
pub struct GenerateQuestionsArgs {
    #[command(flatten)]
    dir: IndexDir,
    /// Write the questions that pass here, as SQuAD v1.1 JSON (each with its source passage).
    #[arg(long, value_name = "SET.json")]
    out: PathBuf,
    /// How questions are written: rules (from the answer's sentence) or llm (the generator).
    #[arg(long, default_value = "rules", value_parser = ["rules", "llm"])]
    method: String,
    /// Candidate answers tried per passage (dates, numbers, names; one per sentence).
    #[arg(value_parser = crate::values::at_least_one, long, default_value_t = 3, value_name = "N")]
    per_passage: usize,
    /// Only the first N passages, in the index's order.
    #[arg(long, value_name = "N")]
    limit_passages: Option<usize>,
    /// The reader's answer must reach this F1 against the candidate (1: the same answer).
    #[arg(value_parser = crate::values::unit_interval, long, default_value_t = 1.0)]
    min_f1: f64,
    /// The passage must be among the top K retrieved for its question.
    #[arg(value_parser = crate::values::at_least_one, long, default_value_t = 5)]
    k: usize,
    #[command(flatten)]
    retrieval: RetrievalOptions,
    #[command(flatten)]
    rerank: RerankOptions,
    /// Reader checkpoint directory [default: the shipped reader].
    #[arg(long, value_name = "DIR")]
    model: Option<PathBuf>,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    generator: GeneratorArgs,
}

pub fn run(args: GenerateQuestionsArgs) -> Result<()> {
    let Built {
        pipeline, search, ..
    } = crate::ask::open_pipeline(
        &args.dir.path(),
        args.model.as_deref(),
        &args.retrieval,
        &args.rerank,
    )?;
    let method = match args.method.as_str() {
        "llm" => Method::Llm,
        _ => Method::Rules,
    };
    let llm = match method {
        Method::Llm => Some(args.generator.load()?),
        Method::Rules => None,
    };
    let options = Options {
        method,
        per_passage: args.per_passage,
        min_f1: args.min_f1,
        k: args.k,
        search,
    };
    let passages = questions::passages_of(pipeline.store(), args.limit_passages);
    let bar = crate::eval::odqa::progress_bar(passages.len() as u64);
    let (found, report) = questions::generate(
        &pipeline,
        &passages,
        &options,
        llm.as_deref(),
        &mut |step, done, total| {
            bar.set_message(step.to_string());
            bar.set_length(total as u64);
            bar.set_position(done as u64);
        },
    )?;
    bar.finish_and_clear();
    let text = serde_json::to_string_pretty(&questions::to_squad(&found))?;
    std::fs::write(&args.out, text)
        .with_context(|| format!("cannot write {}", args.out.display()))?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(());
    }
    let rows = vec![
        vec!["passages".into(), report.passages.to_string()],
        vec!["candidate answers".into(), report.candidates.to_string()],
        vec!["questions proposed".into(), report.proposed.to_string()],
        vec![
            "reader recovered the answer".into(),
            report.reader_passed.to_string(),
        ],
        vec![
            "retrieval found the passage".into(),
            report.retrieval_passed.to_string(),
        ],
        vec!["repeats dropped".into(), report.duplicates.to_string()],
        vec!["kept".into(), report.kept.to_string()],
        vec![
            "round-trip pass rate".into(),
            format!("{:.3}", report.round_trip_rate),
        ],
    ];
    print_table(&["step", "questions"], &rows);
    println!("wrote {} questions to {}", report.kept, args.out.display());
    Ok(())
}
