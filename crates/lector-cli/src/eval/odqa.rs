//! `lector eval odqa`: the whole pipeline on a question set, and where answers are lost.
//!
//! Every question is asked end to end (retrieve k passages, read, aggregate) and classified:
//! - **correct**: the final answer matches a gold answer exactly (SQuAD EM);
//! - **retrieval miss**: otherwise, when no retrieved passage contains a gold answer (DPR answer
//!   containment), so the reader never had a chance;
//! - **reading miss**: otherwise: a retrieved passage holds an answer, but the pipeline answered
//!   wrongly or abstained.
//!
//! The three add up to the number of questions. With SQuAD data the reader is also scored on
//! each question's gold paragraph alone, which bounds what perfect retrieval would give.

use super::{write_jsonl, Intervals, OutputArgs};
use crate::ask::open_pipeline;
use crate::read::{gold_queries, run_with_progress};
use crate::reranker::RerankOptions;
use crate::search::RetrievalOptions;
use crate::table::{fmt2, print_table};
use anyhow::{bail, Context, Result};
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use lector_eval::normalize::normalize_answer;
use lector_eval::report::{Metric, Report};
use lector_eval::retrieval::{self, AnswerItem, AnswerRecall, Passage};
use lector_eval::squad::{self, Dataset, NoAnswer, Question, QuestionScore, SquadVersion};
use lector_eval::stats::{self, Bootstrap};
use lector_index::ingest::{self, IngestOptions, Item};
use lector_index::{IndexSettings, IndexWriter, Mode, SearchOptions};
use lector_pipeline::{AskOptions, PassageReading, Pipeline, Response, Stage};
use lector_reader::ReadParams;
use serde::Serialize;
use serde_json::{json, Map, Value};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

#[derive(Args)]
pub struct OdqaArgs {
    /// SQuAD dataset: its paragraphs are indexed (one document per paragraph, titled by its
    /// article) and its answerable questions asked.
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
    /// of a temporary directory; with --questions it must already hold the corpus.
    #[arg(long)]
    index: Option<PathBuf>,
    /// Retrieval options (with --squad, dense and hybrid embed the paragraphs).
    #[command(flatten)]
    retrieval: RetrievalOptions,
    #[command(flatten)]
    rerank: RerankOptions,
    /// Passages retrieved and read per question.
    #[arg(long, default_value_t = 5)]
    k: usize,
    /// Only the first N questions.
    #[arg(long, value_name = "N")]
    limit: Option<usize>,
    /// Add up the scores of answers that normalise to the same text across passages.
    #[arg(long)]
    vote: bool,
    /// Retrieval-rank prior: a span from the passage at rank r has its odds against "no answer"
    /// divided by r^A (0: all passages alike).
    #[arg(long, value_name = "A", default_value_t = lector_pipeline::DEFAULT_RANK_PRIOR)]
    rank_prior: f64,
    /// Reader checkpoint directory [default: $LECTOR_READER, else the shipped models/reader-minilm-squad].
    #[arg(long, value_name = "DIR")]
    model: Option<PathBuf>,
    /// Write one JSON line per question: answers, scores, first hit rank, outcome.
    #[arg(long, value_name = "FILE")]
    per_question: Option<PathBuf>,
    #[command(flatten)]
    output: OutputArgs,
}

/// Where a question's answer was won or lost.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
enum Outcome {
    /// The final answer matches a gold answer.
    Correct,
    /// No retrieved passage contains a gold answer.
    RetrievalMiss,
    /// The reader's best answer in some retrieved passage is a gold answer, but an answer from
    /// another passage ranked first, or the pipeline abstained: lost in aggregation.
    RankingMiss,
    /// A retrieved passage contains a gold answer, and the reader's best answer in no passage is
    /// one.
    ReadingMiss,
}

const OUTCOMES: [(Outcome, &str); 4] = [
    (Outcome::Correct, "correct"),
    (Outcome::RetrievalMiss, "retrieval miss"),
    (Outcome::RankingMiss, "ranking miss"),
    (Outcome::ReadingMiss, "reading miss"),
];

/// Everything measured on one question set.
struct Results {
    dataset: Dataset,
    responses: Vec<Response>,
    recall: AnswerRecall,
    end_to_end: Vec<QuestionScore>,
    /// The reader alone on the gold paragraph (SQuAD input only).
    gold: Option<Vec<QuestionScore>>,
    outcomes: Vec<Outcome>,
    documents: usize,
    passages: usize,
    seconds: f64,
    /// The retrieval mode used.
    mode: Mode,
}

pub fn run(args: &OdqaArgs) -> Result<()> {
    let (dataset, source, _temp) = match (&args.squad, &args.questions) {
        (Some(path), _) => {
            let (index_dir, temp) = squad_index_dir(args.index.as_deref())?;
            index_paragraphs(path, &index_dir, &args.retrieval)?;
            (squad_questions(path, args.limit)?, index_dir, temp)
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
    let (pipeline, search) = open_pipeline(
        &source,
        args.model.as_deref(),
        &args.retrieval,
        &args.rerank,
    )?;
    let results = evaluate(&pipeline, dataset, &search, args)?;
    report(&results, input, args)
}

/// `--index`, or a temporary directory removed when the returned guard drops.
fn squad_index_dir(index: Option<&Path>) -> Result<(PathBuf, Option<tempfile::TempDir>)> {
    match index {
        Some(dir) => Ok((dir.to_path_buf(), None)),
        None => {
            let temp = tempfile::tempdir().context("creating a temporary index directory")?;
            Ok((temp.path().join("index"), Some(temp)))
        }
    }
}

/// Adds the paragraphs of a SQuAD file to the index at `dir` (unchanged ones are skipped).
fn index_paragraphs(path: &Path, dir: &Path, retrieval: &RetrievalOptions) -> Result<()> {
    let walk = ingest::walk(&[path.to_path_buf()]);
    if let Some(err) = walk.errors.into_iter().next() {
        return Err(err.into());
    }
    let mut writer = IndexWriter::open_or_create(dir, IndexSettings::default())?;
    if retrieval.mode.is_some_and(Mode::is_dense) {
        let embedder = crate::embedder::load(retrieval.embedder.as_deref())?;
        writer.set_embedder(Arc::new(embedder))?;
    }
    for file in &walk.files {
        ingest::read_file(file, &IngestOptions::default(), &mut |item, _| match item {
            Item::Document(doc) => {
                writer.add(doc);
                Ok(())
            }
            Item::Invalid(err) => Err(err),
        })?;
    }
    let info = writer.commit()?;
    eprintln!(
        "index {}: {} documents, {} passages",
        dir.display(),
        info.documents,
        writer.committed().stats().passages
    );
    Ok(())
}

/// The answerable questions of a SQuAD file (unanswerable v2.0 questions have nothing to find).
pub(super) fn squad_questions(path: &Path, limit: Option<usize>) -> Result<Dataset> {
    let mut dataset = squad::read_dataset(path)?;
    let total = dataset.questions.len();
    dataset.questions.retain(Question::has_answer);
    if dataset.questions.len() < total {
        eprintln!(
            "note: {} unanswerable questions are left out",
            total - dataset.questions.len()
        );
    }
    dataset.questions.truncate(limit.unwrap_or(usize::MAX));
    check_questions(path, &dataset)?;
    Ok(dataset)
}

/// Questions with answers and no paragraph, scored with the SQuAD v1.1 rules.
pub(super) fn open_questions(path: &Path, limit: Option<usize>) -> Result<Dataset> {
    let queries = super::with_index::read_queries(path)?;
    let empty: Arc<str> = Arc::from("");
    let mut questions: Vec<Question> = queries
        .into_iter()
        .map(|q| Question {
            id: q.id,
            question: q.text,
            answers: q.answers,
            context: Arc::clone(&empty),
            title: Arc::clone(&empty),
        })
        .collect();
    let total = questions.len();
    questions.retain(Question::has_answer);
    if questions.len() < total {
        eprintln!(
            "warning: {} questions without an answer are left out",
            total - questions.len()
        );
    }
    questions.truncate(limit.unwrap_or(usize::MAX));
    let dataset = Dataset {
        version: SquadVersion::V1_1,
        questions,
    };
    check_questions(path, &dataset)?;
    Ok(dataset)
}

fn check_questions(path: &Path, dataset: &Dataset) -> Result<()> {
    if dataset.questions.is_empty() {
        bail!("{}: no answerable questions", path.display());
    }
    if let Some(q) = dataset
        .questions
        .iter()
        .find(|q| q.question.trim().is_empty())
    {
        bail!("{}: question `{}` is empty", path.display(), q.id);
    }
    Ok(())
}

fn evaluate(
    pipeline: &Pipeline,
    dataset: Dataset,
    search: &SearchOptions,
    args: &OdqaArgs,
) -> Result<Results> {
    let options = AskOptions {
        search: Some(search.clone()),
        k: args.k,
        vote: args.vote,
        rank_prior: args.rank_prior,
        ..AskOptions::default()
    };
    let start = Instant::now();
    let questions: Vec<&str> = dataset
        .questions
        .iter()
        .map(|q| q.question.as_str())
        .collect();
    let bar = progress_bar();
    let responses = pipeline.ask_many(&questions, &options, &mut |p| {
        bar.set_message(match p.stage {
            Stage::Rerank => "questions reranked",
            Stage::Read => "passages read",
        });
        bar.set_length(p.total as u64);
        bar.set_position(p.done as u64);
    })?;
    bar.finish_and_clear();
    let seconds = start.elapsed().as_secs_f64();
    let predictions: squad::Predictions = dataset
        .questions
        .iter()
        .zip(&responses)
        .map(|(q, r)| {
            (
                q.id.clone(),
                r.answer.as_ref().map_or(String::new(), |a| a.text.clone()),
            )
        })
        .collect();
    let end_to_end = squad::evaluate(&dataset, &predictions, &NoAnswer::default())?.questions;
    let recall = retrieval::answer_recall(&answer_items(&dataset, &responses), args.k);
    let gold = match args.squad {
        Some(_) => Some(read_gold(pipeline, &dataset)?),
        None => None,
    };
    let outcomes = recall
        .queries
        .iter()
        .zip(&end_to_end)
        .zip(dataset.questions.iter().zip(&responses))
        .map(|((r, s), (q, response))| {
            if s.em == 1.0 {
                Outcome::Correct
            } else if r.first_hit.is_none() {
                Outcome::RetrievalMiss
            } else if read_right_somewhere(response, &q.answers) {
                Outcome::RankingMiss
            } else {
                Outcome::ReadingMiss
            }
        })
        .collect();
    let stats = pipeline.index().stats();
    Ok(Results {
        dataset,
        responses,
        recall,
        end_to_end,
        gold,
        outcomes,
        documents: stats.documents,
        passages: stats.passages,
        seconds,
        mode: search.mode,
    })
}

fn answer_items(dataset: &Dataset, responses: &[Response]) -> Vec<AnswerItem> {
    dataset
        .questions
        .iter()
        .zip(responses)
        .map(|(q, r)| AnswerItem {
            qid: q.id.clone(),
            answers: q.answers.clone(),
            passages: r
                .passages
                .iter()
                .map(|p| Passage {
                    id: format!("{}#p{}", p.hit.doc_id, p.hit.passage),
                    text: p.hit.text.clone(),
                })
                .collect(),
        })
        .collect()
}

/// Whether the reader's best answer in any passage of `response` is a gold answer after SQuAD
/// normalisation.
fn read_right_somewhere(response: &Response, answers: &[String]) -> bool {
    let golds: Vec<String> = answers.iter().map(|a| normalize_answer(a)).collect();
    response
        .passages
        .iter()
        .filter_map(|p| p.answers.first())
        .any(|a| golds.contains(&normalize_answer(&a.answer)))
}

/// The reader alone on each question's gold paragraph, as `lector read` answers it.
fn read_gold(pipeline: &Pipeline, dataset: &Dataset) -> Result<Vec<QuestionScore>> {
    eprintln!("reading the gold paragraphs");
    let queries = gold_queries(dataset);
    let predictions = run_with_progress(pipeline.reader(), &queries, &ReadParams::default())?;
    let answers: squad::Predictions = dataset
        .questions
        .iter()
        .zip(&predictions)
        .map(|(q, p)| {
            (
                q.id.clone(),
                p.answers
                    .first()
                    .map_or(String::new(), |a| a.answer.clone()),
            )
        })
        .collect();
    Ok(squad::evaluate(dataset, &answers, &NoAnswer::default())?.questions)
}

fn progress_bar() -> ProgressBar {
    let bar = ProgressBar::new(0);
    bar.set_style(
        ProgressStyle::with_template(
            "{bar:40} {pos}/{len} {msg} [{elapsed_precise}<{eta_precise}]",
        )
        .expect("valid template"),
    );
    bar
}

/// Headline metrics with intervals, in percent.
fn intervals(results: &Results, k: usize, settings: &Bootstrap) -> Intervals {
    let percent = |values: Vec<f64>| stats::bootstrap_mean(&values, settings).scaled(100.0);
    let hits = results
        .recall
        .queries
        .iter()
        .map(|q| f64::from(u8::from(q.hit_at(k))))
        .collect();
    let mut out = vec![(format!("recall@{k}"), percent(hits))];
    if let Some(gold) = &results.gold {
        out.push((
            "reader_exact_match".into(),
            percent(gold.iter().map(|s| s.em).collect()),
        ));
        out.push((
            "reader_f1".into(),
            percent(gold.iter().map(|s| s.f1).collect()),
        ));
    }
    let e2e = &results.end_to_end;
    out.push((
        "exact_match".into(),
        percent(e2e.iter().map(|s| s.em).collect()),
    ));
    out.push(("f1".into(), percent(e2e.iter().map(|s| s.f1).collect())));
    for (outcome, name) in OUTCOMES {
        let share = results
            .outcomes
            .iter()
            .map(|&o| f64::from(u8::from(o == outcome)))
            .collect();
        out.push((name.replace(' ', "_"), percent(share)));
    }
    out
}

fn report(results: &Results, input: &Path, args: &OdqaArgs) -> Result<()> {
    let settings = args.output.bootstrap.settings();
    let intervals = intervals(results, args.k, &settings);
    if let Some(path) = &args.per_question {
        write_jsonl(path, &per_question(results))?;
    }
    if let Some(path) = &args.output.html {
        html_report(results, input, args, &intervals, settings.confidence).write(path)?;
    }
    let n = results.dataset.questions.len();
    let abstained = results
        .responses
        .iter()
        .filter(|r| r.answer.is_none())
        .count();
    if args.output.json {
        let mut out = Map::new();
        out.insert("questions".into(), n.into());
        out.insert("documents".into(), results.documents.into());
        out.insert("passages".into(), results.passages.into());
        out.insert("mode".into(), results.mode.name().into());
        out.insert("k".into(), args.k.into());
        out.insert("abstained".into(), abstained.into());
        out.insert("outcomes".into(), outcome_counts(results));
        out.insert(
            "recall_curve".into(),
            serde_json::to_value(&results.recall.recall)?,
        );
        out.insert("seconds".into(), results.seconds.into());
        out.insert("mean_timings_ms".into(), mean_timings(&results.responses));
        out.insert("confidence".into(), settings.confidence.into());
        for (name, interval) in &intervals {
            out.insert(name.clone(), serde_json::to_value(interval)?);
        }
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(());
    }
    println!(
        "{n} questions over {} documents ({} passages); {}, k = {}; {} abstained; {:.1} s",
        results.documents,
        results.passages,
        results.mode.name(),
        args.k,
        abstained,
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
        &outcome_rows(results),
    );
    Ok(())
}

fn outcome_rows(results: &Results) -> Vec<Vec<String>> {
    let n = results.outcomes.len().max(1) as f64;
    OUTCOMES
        .iter()
        .map(|&(outcome, name)| {
            let count = results.outcomes.iter().filter(|&&o| o == outcome).count();
            vec![
                name.to_string(),
                count.to_string(),
                fmt2(100.0 * count as f64 / n),
            ]
        })
        .collect()
}

fn outcome_counts(results: &Results) -> Value {
    let mut out = Map::new();
    for (outcome, name) in OUTCOMES {
        let count = results.outcomes.iter().filter(|&&o| o == outcome).count();
        out.insert(name.replace(' ', "_"), count.into());
    }
    Value::Object(out)
}

fn mean_timings(responses: &[Response]) -> Value {
    let n = responses.len().max(1) as f64;
    let mean = |f: fn(&Response) -> f64| responses.iter().map(f).sum::<f64>() / n;
    json!({
        "retrieve": mean(|r| r.timings.retrieve_ms),
        "read": mean(|r| r.timings.read_ms),
        "aggregate": mean(|r| r.timings.aggregate_ms),
    })
}

fn per_question(results: &Results) -> Vec<Value> {
    let q = &results.dataset.questions;
    (0..q.len())
        .map(|i| {
            let r = &results.responses[i];
            let e2e = &results.end_to_end[i];
            let mut row = json!({
                "id": q[i].id,
                "question": q[i].question,
                "answers": q[i].answers,
                "prediction": r.answer.as_ref().map(|a| a.text.as_str()),
                "doc_id": r.answer.as_ref().map(|a| a.evidence.doc_id.as_str()),
                "na_prob": r.na_prob,
                "em": e2e.em,
                "f1": e2e.f1,
                "first_hit": results.recall.queries[i].first_hit,
                "outcome": results.outcomes[i],
                "passages": r.passages.iter().map(passage_summary).collect::<Vec<_>>(),
            });
            if let Some(gold) = &results.gold {
                row["reader_prediction"] = gold[i].prediction.clone().into();
                row["reader_em"] = gold[i].em.into();
                row["reader_f1"] = gold[i].f1.into();
            }
            row
        })
        .collect()
}

/// A read passage without its text: where it lies in its document (characters), where it ranked,
/// how retrieval and the reader scored it.
fn passage_summary(reading: &PassageReading) -> Value {
    json!({
        "doc_id": reading.hit.doc_id,
        "passage": reading.hit.passage,
        "char_start": reading.hit.span.char_start,
        "char_end": reading.hit.span.char_end,
        "retrieval_score": reading.hit.score,
        "sources": reading.hit.sources,
        "null_score": reading.null_score,
        "na_prob": reading.na_prob,
        "answers": reading.answers,
    })
}

fn html_report(
    results: &Results,
    input: &Path,
    args: &OdqaArgs,
    intervals: &Intervals,
    confidence: f64,
) -> Report {
    let mut report = Report::new(format!("Open-domain QA: {}", input.display()));
    let headline: Vec<Metric> = intervals
        .iter()
        .map(|(name, i)| Metric::with_interval(name.clone(), *i))
        .collect();
    report.metrics("Headline metrics (%)", &headline, confidence);
    report.table(
        "Where answers are lost",
        &["outcome", "questions", "share (%)"],
        &outcome_rows(results),
    );
    let curve: Vec<(f64, f64)> = results
        .recall
        .recall
        .iter()
        .enumerate()
        .map(|(i, r)| ((i + 1) as f64, *r))
        .collect();
    report.curve("Answer recall@k", &curve, 1.0, "k", "recall");
    let f1: Vec<f64> = results.end_to_end.iter().map(|s| s.f1).collect();
    report.histogram("End-to-end F1 per question", &f1, (0.0, 1.0), 20, "F1");
    report.note(&format!(
        "{} questions over {} documents ({} passages), {} retrieval, k = {}. Correct: exact match of the \
         final answer; retrieval miss: no retrieved passage contains a gold answer; reading miss: one \
         does, but the answer is wrong or missing. Intervals: percentile bootstrap over questions.",
        results.dataset.questions.len(),
        results.documents,
        results.passages,
        results.mode.name(),
        args.k
    ));
    report
}
