//! `lector eval hotpot`: multi-hop questions end to end on a HotpotQA file, scored with the
//! official HotpotQA metrics (`lector_eval::hotpot`), both-gold-paragraph recall, and the
//! breakdown by question type.

use super::{write_jsonl, OutputArgs};
use crate::ask::open_pipeline;
use crate::hops::HopArgs;
use crate::search::{RerankOptions, RetrievalOptions};
use crate::table::print_table;
use anyhow::{bail, Context, Result};
use clap::{Args, ValueEnum};
use indicatif::{ProgressBar, ProgressStyle};
use lector_eval::hotpot::{self, Paragraph, Predictions, Question, SupportingFact};
use lector_eval::stats;
use lector_index::{Document, Embedder, Index, IndexSettings, IndexWriter, SearchOptions};
use lector_pipeline::multihop;
use lector_pipeline::{AskOptions, Pipeline, Response};
use serde::Serialize;
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

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

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "snake_case")]
enum Setting {
    Distractor,
    Open,
}

/// The cutoffs of both-gold-paragraph recall.
const BOTH_KS: [usize; 4] = [2, 5, 10, 20];

/// One question's outcome.
#[derive(Serialize)]
struct Row {
    id: String,
    #[serde(rename = "type")]
    kind: &'static str,
    question: String,
    gold: String,
    prediction: String,
    em: f64,
    f1: f64,
    sp_em: f64,
    sp_f1: f64,
    joint_em: f64,
    joint_f1: f64,
    #[serde(flatten)]
    both: BTreeMap<String, f64>,
    hops: usize,
    stopped: bool,
    /// Confidence of hop 1's answer (what --stop-confidence compares).
    first_confidence: f64,
    hop_ms: Vec<f64>,
}

pub fn run(args: &HotpotArgs) -> Result<()> {
    if args.hops.decompose == lector_pipeline::multihop::Decomposition::Llm {
        bail!("--decompose llm is for `lector ask` (a language model per question is too slow for a whole file here)");
    }
    let all = hotpot::read_dataset(&args.data)?;
    let end = args
        .limit
        .map_or(all.len(), |n| (args.offset + n).min(all.len()));
    if args.offset >= end {
        bail!(
            "{}: no questions in --offset {} --limit {:?} of {}",
            args.data.display(),
            args.offset,
            args.limit,
            all.len()
        );
    }
    let questions = &all[args.offset..end];
    let embedder = dense_embedder(&args.retrieval)?;
    let temp = tempfile::tempdir().context("creating a temporary index directory")?;
    let responses = match args.setting {
        Setting::Open => {
            let dir = args
                .index
                .clone()
                .unwrap_or_else(|| temp.path().join("index"));
            index_paragraphs(&dir, unique_paragraphs(&all), embedder, true)?;
            let (pipeline, search) = open(&dir, args)?;
            // One pipeline for every question: its title index is built once.
            ask_each(questions, args, &search, &pipeline, |_| Ok(None))?
        }
        Setting::Distractor => {
            if args.index.is_some() {
                bail!("--index is for --setting open (the distractor setting indexes each question's own paragraphs)");
            }
            let first = temp.path().join("first");
            index_paragraphs(&first, questions[0].context.iter(), embedder.clone(), false)?;
            let (pipeline, search) = open(&first, args)?;
            ask_each(questions, args, &search, &pipeline, |q| {
                let dir = temp.path().join(format!("q{}", q.id));
                index_paragraphs(&dir, q.context.iter(), embedder.clone(), false)?;
                Ok(Some(pipeline.with_store(Index::open(&dir)?)))
            })?
        }
    };
    report(questions, &responses, args)
}

/// The pipeline over the index in `dir`, and the retrieval the options ask for.
fn open(dir: &Path, args: &HotpotArgs) -> Result<(Pipeline, SearchOptions)> {
    let built = open_pipeline(dir, args.model.as_deref(), &args.retrieval, &args.rerank)?;
    Ok((built.pipeline, built.search))
}

/// The embedder passages are indexed with, for dense and hybrid retrieval.
fn dense_embedder(retrieval: &RetrievalOptions) -> Result<Option<Arc<dyn Embedder>>> {
    if !retrieval.mode.is_some_and(lector_index::Mode::is_dense) {
        return Ok(None);
    }
    let embedder = lector_pipeline::config::load_embedder(
        retrieval.embedder.as_deref(),
        &crate::search::notify,
    )?;
    Ok(Some(Arc::new(embedder)))
}

/// Every paragraph of the file once, by title (the first one seen of a title wins).
fn unique_paragraphs(questions: &[Question]) -> impl Iterator<Item = &Paragraph> {
    let mut seen = std::collections::HashSet::new();
    questions
        .iter()
        .flat_map(|q| q.context.iter())
        .filter(move |p| seen.insert(p.title.as_str()))
}

/// Indexes paragraphs as documents (id and title: the paragraph's title; text: its sentences
/// joined as HotpotQA joins them, so sentence offsets carry over).
fn index_paragraphs<'a>(
    dir: &Path,
    paragraphs: impl Iterator<Item = &'a Paragraph>,
    embedder: Option<Arc<dyn Embedder>>,
    show_progress: bool,
) -> Result<()> {
    let mut writer = IndexWriter::open_or_create(dir, IndexSettings::default())?;
    if let Some(embedder) = embedder {
        writer.set_embedder(embedder)?;
    }
    for p in paragraphs {
        let mut doc = Document::new(p.title.clone(), p.text());
        doc.title = Some(p.title.clone());
        writer.add(doc);
    }
    let bar = if show_progress {
        bar("passages embedded")
    } else {
        ProgressBar::hidden()
    };
    writer.commit_with_progress(&mut |done, total| {
        bar.set_length(total as u64);
        bar.set_position(done as u64);
    })?;
    bar.finish_and_clear();
    Ok(())
}

/// A question's response and the supporting facts predicted from it.
struct Answered {
    response: Response,
    facts: Vec<SupportingFact>,
}

/// Asks every question through the pipeline `own_pipeline` gives it, else through `shared`.
fn ask_each(
    questions: &[Question],
    args: &HotpotArgs,
    search: &SearchOptions,
    shared: &Pipeline,
    mut own_pipeline: impl FnMut(&Question) -> Result<Option<Pipeline>>,
) -> Result<Vec<Answered>> {
    let options = AskOptions {
        k: args.k,
        search: Some(search.clone()),
        ..AskOptions::default()
    };
    let hops = args.hops.options();
    let decomposer = args.hops.decompose.decomposer(None);
    let bar = bar("questions");
    bar.set_length(questions.len() as u64);
    let mut responses = Vec::with_capacity(questions.len());
    for q in questions {
        let own = own_pipeline(q)?;
        let pipeline = own.as_ref().unwrap_or(shared);
        let response = pipeline
            .ask_hops_with(&q.question, &options, &hops, decomposer)
            .with_context(|| format!("question {}", q.id))?;
        let trace = response
            .hops
            .as_ref()
            .context("ask_hops returns its trace")?;
        let facts = multihop::supporting_facts(trace, q, pipeline.index());
        responses.push(Answered { response, facts });
        bar.inc(1);
    }
    bar.finish_and_clear();
    Ok(responses)
}

fn bar(what: &'static str) -> ProgressBar {
    let bar = ProgressBar::new(0);
    bar.set_style(
        ProgressStyle::with_template(
            "{bar:40} {pos}/{len} {msg} [{elapsed_precise}<{eta_precise}]",
        )
        .expect("valid template"),
    );
    bar.set_message(what);
    bar
}

/// The answer: the pipeline's, or when it abstains its best candidate (every HotpotQA question
/// has an answer, so abstaining only loses points).
fn answer_text(response: &Response) -> String {
    response
        .answer
        .as_ref()
        .or(response.candidates.first())
        .map_or(String::new(), |c| c.text.clone())
}

fn report(questions: &[Question], answered: &[Answered], args: &HotpotArgs) -> Result<()> {
    let mut predictions = Predictions::default();
    for (q, a) in questions.iter().zip(answered) {
        predictions
            .answers
            .insert(q.id.clone(), answer_text(&a.response));
        predictions
            .supporting_facts
            .insert(q.id.clone(), a.facts.clone());
    }
    let scores = hotpot::evaluate(questions, &predictions);
    let rows: Vec<Row> = questions
        .iter()
        .zip(answered)
        .zip(&scores.questions)
        .map(|((q, a), s)| row(q, &a.response, s, &predictions))
        .collect();
    if let Some(path) = &args.predictions {
        predictions.write(path)?;
    }
    if let Some(path) = &args.per_question {
        write_jsonl(path, &rows)?;
    }
    print_report(&rows, &scores.metrics, args)
}

fn row(
    q: &Question,
    response: &Response,
    s: &hotpot::QuestionScores,
    predictions: &Predictions,
) -> Row {
    let trace = response.hops.as_ref().expect("ask_hops returns its trace");
    let ranked: Vec<&str> = trace.ranking.iter().map(|p| p.doc_id.as_str()).collect();
    let gold = q.gold_titles();
    let both = BOTH_KS
        .iter()
        .map(|&k| (format!("both@{k}"), hotpot::both_found(&gold, &ranked, k)))
        .collect();
    Row {
        id: q.id.clone(),
        kind: q.breakdown_type(),
        question: q.question.clone(),
        gold: q.answer.clone(),
        prediction: predictions.answers[&q.id].clone(),
        em: s.em,
        f1: s.f1,
        sp_em: s.sp_em,
        sp_f1: s.sp_f1,
        joint_em: s.joint_em,
        joint_f1: s.joint_f1,
        both,
        hops: trace.hops,
        stopped: trace.stopped,
        first_confidence: trace.first_confidence,
        hop_ms: trace.hop_ms.clone(),
    }
}

/// The metrics reported, as (name, per-question values).
fn columns(rows: &[&Row]) -> Vec<(String, Vec<f64>)> {
    let mut out: Vec<(String, Vec<f64>)> = [
        ("em", (|r: &Row| r.em) as fn(&Row) -> f64),
        ("f1", |r| r.f1),
        ("sp_em", |r| r.sp_em),
        ("sp_f1", |r| r.sp_f1),
        ("joint_em", |r| r.joint_em),
        ("joint_f1", |r| r.joint_f1),
    ]
    .into_iter()
    .map(|(name, value)| (name.to_string(), rows.iter().map(|r| value(r)).collect()))
    .collect();
    for k in BOTH_KS {
        let name = format!("both@{k}");
        let values = rows.iter().map(|r| r.both[&name]).collect();
        out.push((name, values));
    }
    out
}

/// The columns of the breakdown by question type.
const TYPE_HEADER: [&str; 8] = [
    "type",
    "questions",
    "EM",
    "F1",
    "sp F1",
    "joint F1",
    "both@2",
    "both@5",
];

/// One row per question type: its questions and mean metrics (in percent; "-" for a type
/// without questions).
fn type_table(by_type: &[(&str, Vec<&Row>)]) -> Vec<Vec<String>> {
    by_type
        .iter()
        .map(|(name, group)| {
            let mean = |f: fn(&Row) -> f64| {
                let values: Vec<f64> = group.iter().map(|r| f(r)).collect();
                match values.is_empty() {
                    true => "-".to_string(),
                    false => format!("{:.2}", 100.0 * stats::mean(&values)),
                }
            };
            vec![
                name.to_string(),
                group.len().to_string(),
                mean(|r| r.em),
                mean(|r| r.f1),
                mean(|r| r.sp_f1),
                mean(|r| r.joint_f1),
                mean(|r| r.both["both@2"]),
                mean(|r| r.both["both@5"]),
            ]
        })
        .collect()
}

/// The self-contained HTML report: headline metrics with intervals, the both-paragraphs
/// recall curve, and the breakdown by type.
fn html_report(
    path: &Path,
    rows: &[Row],
    intervals: &[(String, stats::Interval)],
    by_type: &[(&str, Vec<&Row>)],
    args: &HotpotArgs,
) -> Result<()> {
    use lector_eval::report::{Metric, Report};
    let mut report = Report::new(format!("HotpotQA: {}", args.data.display()));
    let metrics: Vec<Metric> = intervals
        .iter()
        .map(|(name, i)| Metric::with_interval(name.clone(), *i))
        .collect();
    let confidence = args.output.bootstrap.settings().confidence;
    report.metrics("Headline metrics", &metrics, confidence);
    let curve: Vec<(f64, f64)> = BOTH_KS
        .iter()
        .map(|&k| {
            let name = format!("both@{k}");
            let values: Vec<f64> = rows.iter().map(|r| r.both[&name]).collect();
            (k as f64, stats::mean(&values))
        })
        .collect();
    report.curve(
        "Both gold paragraphs in the first k passages",
        &curve,
        1.0,
        "k",
        "recall",
    );
    report.table("By question type", &TYPE_HEADER, &type_table(by_type));
    report.note(&format!(
        "{} questions, {} hop(s). Answer, supporting-fact and joint metrics as hotpot_evaluate_v1.py computes them.",
        rows.len(),
        args.hops.hops
    ));
    Ok(report.write(path)?)
}

fn print_report(rows: &[Row], official: &BTreeMap<String, f64>, args: &HotpotArgs) -> Result<()> {
    let settings = args.output.bootstrap.settings();
    let all: Vec<&Row> = rows.iter().collect();
    let intervals: Vec<(String, stats::Interval)> = columns(&all)
        .into_iter()
        .map(|(name, values)| (name, stats::bootstrap_mean(&values, &settings)))
        .collect();
    let types = ["bridge", "comparison", "yes/no"];
    let by_type: Vec<(&str, Vec<&Row>)> = types
        .iter()
        .map(|t| (*t, rows.iter().filter(|r| r.kind == *t).collect()))
        .collect();
    let hop_ms = |hop: usize| -> Vec<f64> {
        rows.iter()
            .filter_map(|r| r.hop_ms.get(hop).copied())
            .collect()
    };
    let latency = [
        stats::latency_summary(&hop_ms(0)),
        stats::latency_summary(&hop_ms(1)),
    ];
    let stopped = rows.iter().filter(|r| r.stopped).count();
    if let Some(path) = &args.output.html {
        html_report(path, rows, &intervals, &by_type, args)?;
    }
    if args.output.json {
        let mut types_out = Map::new();
        for (name, group) in &by_type {
            let means: Map<String, Value> = columns(group)
                .into_iter()
                .map(|(metric, values)| (metric, stats::mean(&values).into()))
                .collect();
            types_out.insert(
                name.to_string(),
                json!({"questions": group.len(), "metrics": means}),
            );
        }
        let out = json!({
            "questions": rows.len(),
            "setting": args.setting,
            "hops": args.hops.hops,
            "metrics": official,
            "confidence": settings.confidence,
            "intervals": intervals.iter().map(|(n, i)| (n.clone(), serde_json::to_value(i).unwrap_or_default())).collect::<Map<String, Value>>(),
            "by_type": types_out,
            "stopped_after_hop_1": stopped,
            "hop_ms": {"hop_1": latency[0], "hop_2": latency[1]},
        });
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(());
    }
    let setting = match args.setting {
        Setting::Distractor => "distractor",
        Setting::Open => "open",
    };
    println!(
        "{} questions, {setting} setting, {} hop(s)",
        rows.len(),
        args.hops.hops
    );
    let table: Vec<Vec<String>> = intervals
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
            &format!("{:.0}% CI", settings.confidence * 100.0),
        ],
        &table,
    );
    println!();
    print_table(&TYPE_HEADER, &type_table(&by_type));
    println!();
    for (hop, summary) in latency.iter().enumerate() {
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
    if args.hops.hops == 2 {
        println!("stopped after hop 1: {stopped} of {}", rows.len());
    }
    Ok(())
}
