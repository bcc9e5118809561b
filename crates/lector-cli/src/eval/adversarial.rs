//! `lector eval adversarial`: the reader with and without AddSent/AddAny-style distractors.

use super::{write_jsonl, OutputArgs};
use crate::eval::odqa::progress_bar;
use crate::table::{fmt2, print_table};
use anyhow::{Context, Result};
use clap::Args;
use lector_eval::adversarial::{Kind, Position};
use lector_pipeline::adversarial::{self, Options};
use lector_reader::{ReadParams, Reader};
use std::path::PathBuf;

#[derive(Args)]
pub struct AdversarialArgs {
    /// SQuAD (or MRQA) dataset; its answerable questions are read with and without distractors.
    data: PathBuf,
    /// Only the first N questions.
    #[arg(long, value_name = "N")]
    limit: Option<usize>,
    /// Distractors: `addsent` (the question turned into a statement with a fake answer of the
    /// right kind) and/or `addany` (ten words from the question and common words).
    #[arg(long, value_delimiter = ',', default_value = "addsent,addany")]
    kind: Vec<Kind>,
    /// Where the sentence goes: `start`, `end`, `random` (between two sentences, by the seed).
    #[arg(long, value_delimiter = ',', default_value = "start,end,random")]
    position: Vec<Position>,
    /// AddAny candidates per question and position; the reader's worst is kept.
    #[arg(value_parser = crate::values::at_least_one, long, default_value_t = 4)]
    candidates: usize,
    /// Seed of the distractors and positions (the bootstrap has its own, --seed).
    #[arg(long, default_value_t = 0)]
    distractor_seed: u64,
    /// Reader checkpoint directory [default: $LECTOR_READER, else the shipped models/reader-minilm-squad].
    #[arg(long, value_name = "DIR")]
    model: Option<PathBuf>,
    /// Write one JSON line per question and distractor: the sentence, both answers, both F1s,
    /// whether the answer came from the sentence.
    #[arg(long, value_name = "FILE")]
    per_question: Option<PathBuf>,
    #[command(flatten)]
    output: OutputArgs,
}

pub fn run(args: &AdversarialArgs) -> Result<()> {
    let dataset = lector_eval::squad::read_dataset(&args.data)?;
    let dir = lector_models::registry::resolve_reader(args.model.as_deref())?;
    let reader =
        Reader::load(&dir).with_context(|| format!("loading the reader from {}", dir.display()))?;
    let options = Options {
        kinds: args.kind.clone(),
        positions: args.position.clone(),
        candidates: args.candidates,
        seed: args.distractor_seed,
        limit: args.limit,
    };
    let settings = args.output.bootstrap.settings();
    let bar = progress_bar(0);
    let (report, records) = adversarial::evaluate(
        &reader,
        &dataset,
        &options,
        &ReadParams::default(),
        &settings,
        &mut |p| super::odqa::show_progress(&bar, p),
    )?;
    bar.finish_and_clear();
    if let Some(path) = &args.per_question {
        write_jsonl(path, &records)?;
    }
    if let Some(path) = &args.output.html {
        report.html(&args.data, settings.confidence).write(path)?;
    }
    if args.output.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(());
    }
    println!(
        "{} questions ({} unanswerable left out): EM {} F1 {} without distractors; {:.1} s",
        report.questions,
        report.unanswerable,
        fmt2(report.original_exact_match.mean),
        fmt2(report.original_f1.mean),
        report.seconds
    );
    print_table(&adversarial::HEADER, &adversarial::rows(&report.variants));
    Ok(())
}
