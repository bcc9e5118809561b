//! `lector eval odqa`: the whole pipeline on a question set, and where answers are lost (the
//! evaluation itself is `lector_pipeline::odqa`).

use super::{write_jsonl, OutputArgs};
use crate::ask::{open_pipeline, open_pipeline_over};
use crate::search::{RerankOptions, RetrievalOptions};
use crate::table::{fmt2, print_table};
use anyhow::{bail, Context, Result};
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use lector_eval::breakdown;
use lector_eval::squad::Dataset;
use lector_index::{DocumentStore, SearchOptions};
use lector_pipeline::odqa::{self, OdqaResults};
use lector_pipeline::{AskOptions, Built, Pipeline, Progress, Stage};
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

#[derive(Args)]
pub struct OdqaArgs {
    /// SQuAD dataset: its paragraphs are indexed (one document per paragraph, titled by its
    /// article) and its questions asked, unanswerable (v2.0) ones included.
    #[arg(
        long,
        required_unless_present = "questions",
        conflicts_with = "questions"
    )]
    squad: Option<PathBuf>,
    /// Questions without gold paragraphs, asked against --index: JSON lines
    /// `{"question": .., "answer": [..]}` (NQ-open; `answers`, `id` also read).
    #[arg(long, requires = "index")]
    questions: Option<PathBuf>,
    /// Index directory. With --squad the paragraphs are added there (kept afterwards) instead
    /// of a temporary directory; with --questions it must already hold the corpus, and may be a
    /// Redis store (`--store redis://HOST:PORT/NAME`).
    #[arg(long, visible_alias = "store")]
    index: Option<PathBuf>,
    /// Retrieval options (with --squad, dense and hybrid embed the paragraphs).
    #[command(flatten)]
    retrieval: RetrievalOptions,
    #[command(flatten)]
    rerank: RerankOptions,
    /// With --squad: keep the paragraphs of every N-th article out of the index, so that their
    /// questions ask for what the corpus does not hold (unanswerable, unless a gold answer
    /// appears in an indexed paragraph).
    #[arg(long, value_name = "N", requires = "squad", value_parser = crate::values::at_least_one)]
    withhold_every: Option<usize>,
    /// Passages retrieved and read per question.
    #[arg(value_parser = crate::values::at_least_one, long, default_value_t = 5)]
    k: usize,
    /// Only the first N questions.
    #[arg(long, value_name = "N")]
    limit: Option<usize>,
    /// Add up the scores of answers that normalise to the same text across passages.
    #[arg(long)]
    vote: bool,
    /// Retrieval-rank prior: a span from the passage at rank r has its odds against "no answer"
    /// divided by r^A (0: all passages alike).
    #[arg(value_parser = crate::values::non_negative, long, value_name = "A", default_value_t = lector_pipeline::DEFAULT_RANK_PRIOR)]
    rank_prior: f64,
    /// Flag an answer as ambiguous while it is at most N times as likely to be right as a
    /// runner-up from another document that disagrees with it (as `lector ask`).
    #[arg(value_parser = crate::ask::at_least_one_odds, long, value_name = "N", default_value_t = lector_pipeline::DEFAULT_AMBIGUITY_ODDS)]
    ambiguity_odds: f64,
    /// Reader checkpoint directory [default: $LECTOR_READER, else the shipped models/reader-minilm-squad].
    #[arg(long, value_name = "DIR")]
    model: Option<PathBuf>,
    /// Write one JSON line per question: answers, scores, first hit rank, outcome, whether the
    /// answer is ambiguous and its readings.
    #[arg(long, value_name = "FILE")]
    per_question: Option<PathBuf>,
    #[command(flatten)]
    breakdown: super::BreakdownArgs,
    #[command(flatten)]
    output: OutputArgs,
}

pub fn run(args: &OdqaArgs) -> Result<()> {
    let mut withheld = 0;
    let (dataset, source, _temp) = match (&args.squad, &args.questions) {
        (Some(_), _) if args.index.as_deref().is_some_and(crate::store::is_url) => {
            bail!("--squad builds an index directory; to evaluate a Redis store, add the paragraphs with `lector index add DATA.json --store URL` and give --questions DATA.json --store URL")
        }
        (Some(path), _) => {
            let (dataset, changed, titles) =
                odqa::squad_with_withheld(path, args.limit, args.withhold_every)?;
            withheld = changed;
            let (index_dir, temp) = squad_index_dir(args.index.as_deref())?;
            index_paragraphs(path, &index_dir, &args.retrieval, &titles)?;
            (dataset, index_dir, temp)
        }
        (None, Some(path)) => {
            let dir = args
                .index
                .clone()
                .context("--questions needs --index DIR")?;
            (open_questions(path, args.limit)?, dir, None)
        }
        (None, None) => bail!("give --squad DATA.json, or --questions FILE --index DIR"),
    };
    let input = args
        .squad
        .as_ref()
        .or(args.questions.as_ref())
        .expect("one input");
    match crate::store::open_if_url(&source)? {
        Some(store) => {
            let Built {
                pipeline, search, ..
            } = open_pipeline_over(store, args.model.as_deref(), &args.retrieval, &args.rerank)?;
            evaluate(args, &pipeline, search, dataset, withheld, input)
        }
        None => {
            let Built {
                pipeline, search, ..
            } = open_pipeline(
                &source,
                args.model.as_deref(),
                &args.retrieval,
                &args.rerank,
            )?;
            evaluate(args, &pipeline, search, dataset, withheld, input)
        }
    }
}

/// Asks every question of `dataset` through `pipeline` and reports the results.
fn evaluate<S: DocumentStore>(
    args: &OdqaArgs,
    pipeline: &Pipeline<S>,
    search: SearchOptions,
    dataset: Dataset,
    withheld: usize,
    input: &Path,
) -> Result<()> {
    let options = AskOptions {
        search: Some(search),
        k: args.k,
        vote: args.vote,
        rank_prior: args.rank_prior,
        ambiguity_odds: args.ambiguity_odds,
        ..AskOptions::default()
    };
    let bar = progress_bar(0);
    let mut results = odqa::evaluate(
        pipeline,
        dataset,
        &options,
        args.squad.is_some(),
        &mut |p| show_progress(&bar, p),
    )?;
    bar.finish_and_clear();
    results.withheld = withheld;
    report(&results, input, args)
}

/// `--index`, or a temporary directory removed when the returned guard drops.
pub(super) fn squad_index_dir(
    index: Option<&Path>,
) -> Result<(PathBuf, Option<tempfile::TempDir>)> {
    match index {
        Some(dir) => Ok((dir.to_path_buf(), None)),
        None => {
            let temp = tempfile::tempdir().context("creating a temporary index directory")?;
            Ok((temp.path().join("index"), Some(temp)))
        }
    }
}

/// Adds the paragraphs of a SQuAD file to the index at `dir` (but those of the `withheld`
/// articles), as `retrieval` searches them, and says how many there are.
fn index_paragraphs(
    path: &Path,
    dir: &Path,
    retrieval: &RetrievalOptions,
    withheld: &HashSet<Arc<str>>,
) -> Result<()> {
    let (documents, passages) = odqa::index_squad_for(
        path,
        dir,
        &retrieval.config(),
        withheld,
        &crate::search::notify,
    )?;
    eprintln!(
        "index {}: {documents} documents, {passages} passages",
        dir.display()
    );
    Ok(())
}

/// The answerable questions of a SQuAD file.
pub(super) fn squad_questions(path: &Path, limit: Option<usize>) -> Result<Dataset> {
    let (dataset, left_out) = odqa::squad_questions(path, limit, false)?;
    if left_out > 0 {
        eprintln!("note: {left_out} unanswerable questions are left out");
    }
    Ok(dataset)
}

/// Questions with answers and no paragraph.
pub(super) fn open_questions(path: &Path, limit: Option<usize>) -> Result<Dataset> {
    let (dataset, left_out) = odqa::open_questions(path, limit)?;
    if left_out > 0 {
        eprintln!("warning: {left_out} questions without an answer are left out");
    }
    Ok(dataset)
}

/// Shows a pipeline's progress (reranking, reading retrieved passages or gold paragraphs) on `bar`.
pub(crate) fn show_progress(bar: &ProgressBar, p: Progress) {
    bar.set_message(match p.stage {
        Stage::Rerank => "questions reranked",
        Stage::Read => "passages read",
        Stage::ReadGold => "gold paragraphs read",
    });
    bar.set_length(p.total as u64);
    bar.set_position(p.done as u64);
}

/// A bar of `{pos}/{len}` with the message and an ETA (shared by the eval subcommands).
pub(crate) fn progress_bar(total: u64) -> ProgressBar {
    let bar = ProgressBar::new(total);
    bar.set_style(
        ProgressStyle::with_template(
            "{bar:40} {pos}/{len} {msg} [{elapsed_precise}<{eta_precise}]",
        )
        .expect("valid template"),
    );
    bar
}

fn report(results: &OdqaResults, input: &Path, args: &OdqaArgs) -> Result<()> {
    let settings = args.output.bootstrap.settings();
    let intervals = results.intervals(&settings);
    let breakdowns =
        args.breakdown
            .compute(&results.dataset.questions, &results.end_to_end, &settings)?;
    if let Some(path) = &args.per_question {
        write_jsonl(path, &results.per_question())?;
    }
    if let Some(path) = &args.output.html {
        let mut report = results.html_report(input, &intervals, settings.confidence);
        breakdowns.iter().for_each(|b| b.add_to(&mut report));
        report.write(path)?;
    }
    if args.output.json {
        let mut out = results.summary_json(&intervals, settings.confidence);
        if !breakdowns.is_empty() {
            out.insert("breakdowns".into(), breakdown::to_json(&breakdowns));
        }
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(());
    }
    println!(
        "{} questions ({} unanswerable, {} of them withheld from the index) over {} documents \
         ({} passages); {}, k = {}; {} abstained; {} of the answers ambiguous; {:.1} s",
        results.dataset.questions.len(),
        results.unanswerable(),
        results.withheld,
        results.documents,
        results.passages,
        results.mode.name(),
        args.k,
        results.abstained(),
        results.ambiguous(),
        results.seconds
    );
    let ci = format!("{:.0}% CI", settings.confidence * 100.0);
    let rows: Vec<Vec<String>> = intervals
        .iter()
        .map(|(name, i)| {
            vec![
                name.clone(),
                fmt2(i.mean),
                format!("[{}, {}]", fmt2(i.low), fmt2(i.high)),
            ]
        })
        .collect();
    print_table(&["metric (%)", "value", &ci], &rows);
    println!();
    print_table(
        &["outcome", "questions", "share (%)"],
        &results.outcome_rows(),
    );
    super::print_breakdowns(&breakdowns);
    Ok(())
}
