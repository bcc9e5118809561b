//! `lector eval hotpot` as a run: multi-hop questions end to end on a HotpotQA file, scored with
//! the official HotpotQA metrics (`lector_eval::hotpot`), both-gold-paragraph recall, and the
//! breakdown by question type.

use crate::multihop::{self, Decomposition, HopOptions};
use crate::{AskOptions, Error, Pipeline, PipelineConfig, Response, Result};
use lector_eval::hotpot::{self, Paragraph, Predictions, Question};
use lector_eval::report::{Metric, Report as HtmlReport};
use lector_eval::stats::{self, Bootstrap, Interval, LatencySummary};
use lector_index::{Document, Embedder, Index, IndexSettings, IndexWriter, SearchOptions};
use serde::Serialize;
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Where each question's passages are searched.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Setting {
    /// Among the question's own 10 paragraphs.
    Distractor,
    /// Among every paragraph of the file, deduplicated by title.
    Open,
}

impl std::str::FromStr for Setting {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "distractor" => Ok(Setting::Distractor),
            "open" => Ok(Setting::Open),
            _ => Err(format!("unknown setting `{s}` (distractor or open)")),
        }
    }
}

impl Setting {
    /// The setting's name.
    pub fn name(self) -> &'static str {
        match self {
            Setting::Distractor => "distractor",
            Setting::Open => "open",
        }
    }
}

/// How a HotpotQA run asks and scores.
#[derive(Debug, Clone)]
pub struct Options {
    pub setting: Setting,
    /// With the open setting: the index the paragraphs are added to (kept, and reused when run
    /// again); `None`: one in the work directory.
    pub index: Option<PathBuf>,
    /// Passages read by the first hop.
    pub k: usize,
    /// Questions skipped first.
    pub offset: usize,
    /// Only this many questions (after `offset`).
    pub limit: Option<usize>,
    /// The hops (1 or 2) and how the second searches.
    pub hops: HopOptions,
    /// How bridge questions are split (`llm` is refused: a model call per question is too slow
    /// for a whole file).
    pub decompose: Decomposition,
    /// The intervals' resampling.
    pub bootstrap: Bootstrap,
}

/// What a run is busy with, for progress.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Passages of the open setting's index embedded.
    Embed,
    /// Questions asked.
    Ask,
}

/// The cutoffs of both-gold-paragraph recall.
pub const BOTH_KS: [usize; 4] = [2, 5, 10, 20];

/// The question types of the breakdown.
pub const TYPES: [&str; 3] = ["bridge", "comparison", "yes/no"];

/// One question's outcome.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    pub id: String,
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub question: String,
    pub gold: String,
    pub prediction: String,
    pub em: f64,
    pub f1: f64,
    pub sp_em: f64,
    pub sp_f1: f64,
    pub joint_em: f64,
    pub joint_f1: f64,
    /// `both@K`: both gold paragraphs among the first K ranked passages (1 or 0).
    #[serde(flatten)]
    pub both: BTreeMap<String, f64>,
    pub hops: usize,
    pub stopped: bool,
    /// Confidence of hop 1's answer (what the stop confidence compares).
    pub first_confidence: f64,
    pub hop_ms: Vec<f64>,
}

/// A run's report: every question's row, the official metrics, intervals, and the predictions in
/// the official format.
#[derive(Debug, Clone)]
pub struct Report {
    pub setting: Setting,
    pub hops: usize,
    pub rows: Vec<Row>,
    /// The official script's metrics (fractions).
    pub metrics: BTreeMap<String, f64>,
    pub confidence: f64,
    /// Each metric's mean with its bootstrap interval (fractions).
    pub intervals: Vec<(String, Interval)>,
    /// `{"answer": .., "sp": ..}` as `hotpot_evaluate_v1.py` reads them.
    pub predictions: Predictions,
}

/// Asks the questions of the HotpotQA file `data` through pipelines `config` builds, and scores
/// them. Indexes go under `work_dir` (a directory the caller removes); `notify` hears of models
/// being fetched and of warnings; `progress` gets (step, done, total).
pub fn run(
    data: &Path,
    config: &PipelineConfig,
    options: &Options,
    work_dir: &Path,
    notify: &dyn Fn(&str),
    progress: &mut dyn FnMut(Step, usize, usize),
) -> Result<Report> {
    if options.decompose == Decomposition::Llm {
        return Err(Error::Options("the llm decomposition is for single questions (a language model per question is too slow for a whole file)".into()));
    }
    if options.k == 0 {
        return Err(Error::Options("k must be at least 1".into()));
    }
    options.bootstrap.check().map_err(Error::Options)?;
    if options.setting == Setting::Distractor && options.index.is_some() {
        return Err(Error::Options("an index is for the open setting (the distractor setting indexes each question's own paragraphs)".into()));
    }
    let all = hotpot::read_dataset(data)?;
    let end = options
        .limit
        .map_or(all.len(), |n| (options.offset + n).min(all.len()));
    if options.offset >= end {
        return Err(Error::Options(format!(
            "{}: no questions at offset {} (limit {:?}) of {}",
            data.display(),
            options.offset,
            options.limit,
            all.len()
        )));
    }
    let questions = &all[options.offset..end];
    let embedder = config.retrieval.indexing_embedder(notify)?;
    let answered = match options.setting {
        Setting::Open => {
            let dir = options
                .index
                .clone()
                .unwrap_or_else(|| work_dir.join("index"));
            let mut embedded = |done, total| progress(Step::Embed, done, total);
            index_paragraphs(&dir, unique_paragraphs(&all), embedder, &mut embedded)?;
            let (pipeline, search) = open(&dir, config, notify)?;
            // One pipeline for every question: its title index is built once.
            ask_each(questions, options, &search, &pipeline, progress, |_| {
                Ok(None)
            })?
        }
        Setting::Distractor => {
            let first = work_dir.join("first");
            let quiet = &mut |_, _| {};
            index_paragraphs(&first, questions[0].context.iter(), embedder.clone(), quiet)?;
            let (pipeline, search) = open(&first, config, notify)?;
            ask_each(questions, options, &search, &pipeline, progress, |q| {
                let dir = work_dir.join(format!("q{}", q.id));
                index_paragraphs(&dir, q.context.iter(), embedder.clone(), &mut |_, _| {})?;
                Ok(Some(pipeline.with_store(Index::open(&dir)?)))
            })?
        }
    };
    Ok(score(questions, answered, options))
}

/// The pipeline over the index in `dir`, and the retrieval `config` asks for.
fn open(
    dir: &Path,
    config: &PipelineConfig,
    notify: &dyn Fn(&str),
) -> Result<(Pipeline, SearchOptions)> {
    let built = config.open(dir, notify)?;
    for warning in &built.warnings {
        notify(&format!("warning: {warning}"));
    }
    Ok((built.pipeline, built.search))
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
    progress: &mut dyn FnMut(usize, usize),
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
    writer.commit_with_progress(progress)?;
    Ok(())
}

/// A question's response and the supporting facts predicted from it.
struct Answered {
    response: Response,
    facts: Vec<hotpot::SupportingFact>,
}

/// Asks every question through the pipeline `own_pipeline` gives it, else through `shared`.
fn ask_each(
    questions: &[Question],
    options: &Options,
    search: &SearchOptions,
    shared: &Pipeline,
    progress: &mut dyn FnMut(Step, usize, usize),
    mut own_pipeline: impl FnMut(&Question) -> Result<Option<Pipeline>>,
) -> Result<Vec<Answered>> {
    let ask = AskOptions {
        k: options.k,
        search: Some(search.clone()),
        ..AskOptions::default()
    };
    let decomposer = options.decompose.decomposer(None);
    let mut answered = Vec::with_capacity(questions.len());
    for (i, q) in questions.iter().enumerate() {
        let own = own_pipeline(q)?;
        let pipeline = own.as_ref().unwrap_or(shared);
        let response = pipeline
            .ask_hops_with(&q.question, &ask, &options.hops, decomposer)
            .map_err(|e| Error::Question {
                id: q.id.clone(),
                source: Box::new(e),
            })?;
        let trace = response.hops.as_ref().expect("ask_hops returns its trace");
        let facts = multihop::supporting_facts(trace, q, pipeline.index());
        answered.push(Answered { response, facts });
        progress(Step::Ask, i + 1, questions.len());
    }
    Ok(answered)
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

fn score(questions: &[Question], answered: Vec<Answered>, options: &Options) -> Report {
    let mut predictions = Predictions::default();
    for (q, a) in questions.iter().zip(&answered) {
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
        .zip(&answered)
        .zip(&scores.questions)
        .map(|((q, a), s)| row(q, &a.response, s, &predictions))
        .collect();
    let all: Vec<&Row> = rows.iter().collect();
    let intervals = columns(&all)
        .into_iter()
        .map(|(name, values)| (name, stats::bootstrap_mean(&values, &options.bootstrap)))
        .collect();
    Report {
        setting: options.setting,
        hops: options.hops.hops,
        rows,
        metrics: scores.metrics,
        confidence: options.bootstrap.confidence,
        intervals,
        predictions,
    }
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
pub const TYPE_HEADER: [&str; 8] = [
    "type",
    "questions",
    "EM",
    "F1",
    "sp F1",
    "joint F1",
    "both@2",
    "both@5",
];

impl Report {
    /// The rows of each question type, in [`TYPES`] order.
    pub fn by_type(&self) -> Vec<(&'static str, Vec<&Row>)> {
        TYPES
            .iter()
            .map(|t| (*t, self.rows.iter().filter(|r| r.kind == *t).collect()))
            .collect()
    }

    /// Median and 95th-percentile time of hop 1 and hop 2 (`None`: no question took it).
    pub fn latency(&self) -> [Option<LatencySummary>; 2] {
        let hop_ms = |hop: usize| -> Vec<f64> {
            self.rows
                .iter()
                .filter_map(|r| r.hop_ms.get(hop).copied())
                .collect()
        };
        [
            stats::latency_summary(&hop_ms(0)),
            stats::latency_summary(&hop_ms(1)),
        ]
    }

    /// Questions that stopped after hop 1.
    pub fn stopped(&self) -> usize {
        self.rows.iter().filter(|r| r.stopped).count()
    }

    /// One row per question type: its questions and mean metrics (in percent; "-" for a type
    /// without questions), under [`TYPE_HEADER`].
    pub fn type_table(&self) -> Vec<Vec<String>> {
        self.by_type()
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

    /// The report as `lector eval hotpot --json` prints it.
    pub fn to_json(&self) -> Value {
        let mut types = Map::new();
        for (name, group) in self.by_type() {
            let means: Map<String, Value> = columns(&group)
                .into_iter()
                .map(|(metric, values)| (metric, stats::mean(&values).into()))
                .collect();
            types.insert(
                name.to_string(),
                json!({"questions": group.len(), "metrics": means}),
            );
        }
        let latency = self.latency();
        json!({
            "questions": self.rows.len(),
            "setting": self.setting,
            "hops": self.hops,
            "metrics": self.metrics,
            "confidence": self.confidence,
            "intervals": self.intervals.iter().map(|(n, i)| (n.clone(), json!(i))).collect::<Map<String, Value>>(),
            "by_type": types,
            "stopped_after_hop_1": self.stopped(),
            "hop_ms": {"hop_1": latency[0], "hop_2": latency[1]},
        })
    }

    /// The self-contained HTML report titled after `data`: headline metrics with intervals, the
    /// both-paragraphs recall curve, and the breakdown by type.
    pub fn html(&self, data: &Path) -> HtmlReport {
        let mut report = HtmlReport::new(format!("HotpotQA: {}", data.display()));
        let metrics: Vec<Metric> = self
            .intervals
            .iter()
            .map(|(name, i)| Metric::with_interval(name.clone(), *i))
            .collect();
        report.metrics("Headline metrics", &metrics, self.confidence);
        let curve: Vec<(f64, f64)> = BOTH_KS
            .iter()
            .map(|&k| {
                let name = format!("both@{k}");
                let values: Vec<f64> = self.rows.iter().map(|r| r.both[&name]).collect();
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
        report.table("By question type", &TYPE_HEADER, &self.type_table());
        report.note(&format!(
            "{} questions, {} hop(s). Answer, supporting-fact and joint metrics as hotpot_evaluate_v1.py computes them.",
            self.rows.len(),
            self.hops
        ));
        report
    }
}
