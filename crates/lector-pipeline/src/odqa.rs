//! Open-domain evaluation: the whole pipeline on a question set, and where answers are lost
//! (`lector eval odqa`).
//!
//! Every question is asked end to end (retrieve k passages, read, aggregate) and classified:
//! - **correct**: the final answer matches a gold answer exactly (SQuAD EM);
//! - **retrieval miss**: otherwise, when no retrieved passage contains a gold answer (DPR answer
//!   containment), so the reader never had a chance;
//! - **ranking miss**: a retrieved passage's best span is a gold answer, but aggregation chose
//!   another answer or abstained;
//! - **reading miss**: a retrieved passage holds an answer, and the reader's best span in no
//!   passage is one.
//!
//! Unanswerable questions (SQuAD v2.0's, and questions whose answer the corpus does not hold:
//! [`withhold_articles`]) are kept and classified too:
//! - **correct abstention**: the pipeline abstained;
//! - **false answer**: it answered anyway.
//!
//! The outcomes add up to the number of questions; abstention precision (abstentions that were
//! on unanswerable questions) and recall (unanswerable questions abstained on) summarise how well
//! the pipeline knows what it does not know. With SQuAD data the reader is also scored on each
//! answerable question's gold paragraph alone, which bounds what perfect retrieval would give.
//!
//! Answers flagged ambiguous (the documents disagree: [`crate::ambiguity`]) are counted, and the
//! exact match of flagged and of unflagged answers is reported separately (answered questions
//! only): the flag is useful when flagged answers are right less often.

use crate::{
    AskOptions, Error, PassageReading, Pipeline, Progress, Response, Result, RetrievalConfig,
};
use lector_eval::normalize::normalize_answer;
use lector_eval::report::{Metric, Report};
use lector_eval::retrieval::{self, AnswerItem, AnswerRecall, Passage};
use lector_eval::squad::{self, Dataset, NoAnswer, Question, QuestionScore, SquadVersion};
use lector_eval::stats::{self, Bootstrap};
use lector_eval::summary::Intervals;
use lector_index::{DocumentStore, Embedder, IndexSettings, IndexWriter, Mode};
use lector_reader::{Query, ReadParams, Reader};
use serde::Serialize;
use serde_json::{json, Map, Value};
use std::collections::HashSet;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

/// Where a question's answer was won or lost.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
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
    /// An unanswerable question, abstained on.
    CorrectAbstention,
    /// An unanswerable question, answered.
    FalseAnswer,
}

impl Outcome {
    /// Whether this is an outcome of an answerable question.
    pub fn of_answerable(self) -> bool {
        !matches!(self, Outcome::CorrectAbstention | Outcome::FalseAnswer)
    }
}

/// The outcomes with their names, in report order.
pub const OUTCOMES: [(Outcome, &str); 6] = [
    (Outcome::Correct, "correct"),
    (Outcome::RetrievalMiss, "retrieval miss"),
    (Outcome::RankingMiss, "ranking miss"),
    (Outcome::ReadingMiss, "reading miss"),
    (Outcome::CorrectAbstention, "correct abstention"),
    (Outcome::FalseAnswer, "false answer"),
];

/// Everything measured on one question set.
pub struct OdqaResults {
    pub dataset: Dataset,
    pub responses: Vec<Response>,
    /// Answer recall of the answerable questions (in dataset order, unanswerable ones skipped).
    pub recall: AnswerRecall,
    /// For each question, its entry in `recall.queries` (`None`: unanswerable).
    pub recall_index: Vec<Option<usize>>,
    /// Answerable questions of withheld articles that became unanswerable ([`withhold_articles`]).
    pub withheld: usize,
    pub end_to_end: Vec<QuestionScore>,
    /// The reader alone on the gold paragraph of each answerable question (SQuAD input only).
    pub gold: Option<Vec<Option<QuestionScore>>>,
    pub outcomes: Vec<Outcome>,
    pub documents: usize,
    pub passages: usize,
    pub seconds: f64,
    /// The retrieval mode used.
    pub mode: Mode,
    /// Passages read per question.
    pub k: usize,
}

/// Every question of a SQuAD file (the first `limit`, unanswerable ones kept), with the articles
/// `withhold_every` keeps out of the index ([`withheld_titles`], [`withhold_articles`]): the
/// questions, how many of them became unanswerable, and the withheld titles.
pub fn squad_with_withheld(
    path: &Path,
    limit: Option<usize>,
    withhold_every: Option<usize>,
) -> Result<(Dataset, usize, HashSet<Arc<str>>)> {
    let (mut dataset, _) = squad_questions(path, limit, true)?;
    let Some(every) = withhold_every else {
        return Ok((dataset, 0, HashSet::new()));
    };
    let file = squad::read_dataset(path)?;
    let titles = withheld_titles(&file, every);
    let withheld = withhold_articles(&mut dataset, &file, &titles);
    Ok((dataset, withheld, titles))
}

/// The questions of a SQuAD file, the first `limit`; unanswerable v2.0 questions are kept with
/// `keep_unanswerable`, else left out and counted (the second value).
pub fn squad_questions(
    path: &Path,
    limit: Option<usize>,
    keep_unanswerable: bool,
) -> Result<(Dataset, usize)> {
    let mut dataset = squad::read_dataset(path)?;
    let total = dataset.questions.len();
    if !keep_unanswerable {
        dataset.questions.retain(Question::has_answer);
    }
    let left_out = total - dataset.questions.len();
    dataset.questions.truncate(limit.unwrap_or(usize::MAX));
    check_questions(path, &dataset)?;
    Ok((dataset, left_out))
}

/// The titles of every `every`-th article of `dataset` (the `every`-th, `2 * every`-th, ... in
/// file order): articles to keep out of the index, so that their questions ask for what the
/// corpus does not hold. `every` must be at least 1 (1 withholds all).
pub fn withheld_titles(dataset: &Dataset, every: usize) -> HashSet<Arc<str>> {
    let mut seen: Vec<&Arc<str>> = Vec::new();
    for q in &dataset.questions {
        if seen.last() != Some(&&q.title) && !seen.contains(&&q.title) {
            seen.push(&q.title);
        }
    }
    seen.into_iter()
        .enumerate()
        .filter(|(i, _)| (i + 1) % every.max(1) == 0)
        .map(|(_, t)| Arc::clone(t))
        .collect()
}

/// Makes the answerable questions of the `withheld` articles unanswerable, unless one of their
/// gold answers appears in a paragraph of `file` (the whole SQuAD file `dataset` was taken from)
/// that stays in the corpus (SQuAD normalisation, whole words): the corpus then still holds it.
/// The dataset becomes v2.0 (so that an abstention scores 1 on these questions). Returns how
/// many questions changed.
pub fn withhold_articles(
    dataset: &mut Dataset,
    file: &Dataset,
    withheld: &HashSet<Arc<str>>,
) -> usize {
    let mut kept: Vec<&Arc<str>> = Vec::new();
    for q in file
        .questions
        .iter()
        .filter(|q| !withheld.contains(&q.title))
    {
        if !kept.iter().any(|c| Arc::ptr_eq(c, &q.context)) {
            kept.push(&q.context);
        }
    }
    let corpus: Vec<String> = kept
        .iter()
        .map(|c| format!(" {} ", normalize_answer(c)))
        .collect();
    let held = |answer: &String| {
        let needle = format!(" {} ", normalize_answer(answer));
        needle.trim().is_empty() || corpus.iter().any(|c| c.contains(&needle))
    };
    let changed: Vec<usize> = dataset
        .questions
        .iter()
        .enumerate()
        .filter(|(_, q)| withheld.contains(&q.title) && q.has_answer())
        .filter(|(_, q)| !q.answers.iter().any(held))
        .map(|(i, _)| i)
        .collect();
    for &i in &changed {
        dataset.questions[i].answers.clear();
    }
    if !changed.is_empty() {
        dataset.version = SquadVersion::V2_0;
    }
    changed.len()
}

/// Questions with answers and no paragraph (NQ-open lines), scored with the SQuAD v1.1 rules;
/// and how many were left out for having no answer.
pub fn open_questions(path: &Path, limit: Option<usize>) -> Result<(Dataset, usize)> {
    let queries = retrieval::read_queries(path)?;
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
    let left_out = total - questions.len();
    questions.truncate(limit.unwrap_or(usize::MAX));
    let dataset = Dataset {
        version: SquadVersion::V1_1,
        questions,
    };
    check_questions(path, &dataset)?;
    Ok((dataset, left_out))
}

fn check_questions(path: &Path, dataset: &Dataset) -> Result<()> {
    let invalid = |message: String| {
        Error::Eval(lector_eval::Error::Invalid {
            path: path.to_path_buf(),
            message,
        })
    };
    if dataset.questions.is_empty() {
        return Err(invalid("no questions to ask".into()));
    }
    match dataset
        .questions
        .iter()
        .find(|q| q.question.trim().is_empty())
    {
        Some(q) => Err(invalid(format!("question `{}` is empty", q.id))),
        None => Ok(()),
    }
}

/// Adds the paragraphs of a SQuAD file to the index at `dir` (one document per paragraph,
/// unchanged ones skipped; created with `settings` when new), except those of the `withheld`
/// articles, embedding them when `embedder` is given; returns the committed document and
/// passage counts.
pub fn index_squad(
    path: &Path,
    dir: &Path,
    settings: IndexSettings,
    embedder: Option<Arc<dyn Embedder>>,
    withheld: &HashSet<Arc<str>>,
) -> Result<(usize, usize)> {
    let walk = lector_ingest::walk(&[path.to_path_buf()]);
    if let Some(err) = walk.errors.into_iter().next() {
        return Err(Error::Ingest(err));
    }
    let mut writer = IndexWriter::open_or_create(dir, settings)?;
    if let Some(embedder) = embedder {
        writer.set_embedder(embedder)?;
    }
    for file in &walk.files {
        lector_ingest::read_file(
            file,
            &lector_ingest::IngestOptions::default(),
            &mut |item, _| match item {
                lector_ingest::Item::Document(doc) => {
                    if !withheld.contains(article_of(&doc.id)) {
                        writer.add(doc);
                    }
                    Ok(())
                }
                lector_ingest::Item::Invalid(err) => Err(err),
            },
        )
        .map_err(Error::Ingest)?;
    }
    let info = writer.commit()?;
    Ok((info.documents, writer.committed().stats().passages))
}

/// [`index_squad`] with what `retrieval` searches by: the paragraphs embedded (by its embedder)
/// for dense and hybrid modes, and a new index created with TF-IDF's n-gram postings for TF-IDF.
pub fn index_squad_for(
    path: &Path,
    dir: &Path,
    retrieval: &RetrievalConfig,
    withheld: &HashSet<Arc<str>>,
    notify: &dyn Fn(&str),
) -> Result<(usize, usize)> {
    let embedder = retrieval.indexing_embedder(notify)?;
    let settings = IndexSettings {
        tfidf: retrieval.mode == Some(Mode::Tfidf),
        ..Default::default()
    };
    index_squad(path, dir, settings, embedder, withheld)
}

/// The article title in a SQuAD paragraph's document id (`<title>#<paragraph>`).
fn article_of(doc_id: &str) -> &str {
    doc_id.rsplit_once('#').map_or(doc_id, |(title, _)| title)
}

/// Asks every question of `dataset` end to end with `options`, scores the answers, and (with
/// `read_gold`) the reader alone on each gold paragraph. `progress` follows both readings.
pub fn evaluate<S: DocumentStore>(
    pipeline: &Pipeline<S>,
    dataset: Dataset,
    options: &AskOptions,
    read_gold: bool,
    progress: &mut dyn FnMut(Progress),
) -> Result<OdqaResults> {
    let start = Instant::now();
    let questions = dataset.question_texts();
    let responses = pipeline.ask_many(&questions, options, progress)?;
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
    let (items, recall_index) = answer_items(&dataset, &responses);
    let recall = retrieval::answer_recall(&items, options.k);
    let gold = match read_gold {
        true => Some(gold_paragraph_scores(pipeline, &dataset, progress)?),
        false => None,
    };
    let outcomes = (0..responses.len())
        .map(|i| {
            let (q, response) = (&dataset.questions[i], &responses[i]);
            let Some(r) = recall_index[i].map(|r| &recall.queries[r]) else {
                return match response.answer {
                    None => Outcome::CorrectAbstention,
                    Some(_) => Outcome::FalseAnswer,
                };
            };
            if end_to_end[i].em == 1.0 {
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
    let stats = pipeline.store().counts()?;
    let mode = options
        .search
        .as_ref()
        .map_or_else(|| crate::default_search(pipeline.store()).mode, |s| s.mode);
    Ok(OdqaResults {
        dataset,
        responses,
        recall,
        recall_index,
        withheld: 0,
        end_to_end,
        gold,
        outcomes,
        documents: stats.documents,
        passages: stats.passages,
        seconds,
        mode,
        k: options.k,
    })
}

/// The answerable questions as answer-recall items, and each question's item (`None`:
/// unanswerable).
fn answer_items(
    dataset: &Dataset,
    responses: &[Response],
) -> (Vec<AnswerItem>, Vec<Option<usize>>) {
    let mut index = Vec::with_capacity(responses.len());
    let mut next = 0;
    for q in &dataset.questions {
        index.push(q.has_answer().then(|| {
            next += 1;
            next - 1
        }));
    }
    let items = dataset
        .questions
        .iter()
        .zip(responses)
        .filter(|(q, _)| q.has_answer())
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
        .collect();
    (items, index)
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

/// Every question of `dataset` with its gold paragraph as context.
pub fn gold_queries(dataset: &Dataset) -> Vec<Query<'_>> {
    dataset
        .questions
        .iter()
        .map(|q| Query {
            question: &q.question,
            context: &q.context,
        })
        .collect()
}

/// The reader alone on each question's gold paragraph, as `lector read` answers it: its answers
/// and their scores. `progress` gets the number of questions read.
pub fn read_gold(
    reader: &Reader,
    dataset: &Dataset,
    progress: &mut dyn FnMut(usize),
) -> Result<(Vec<String>, Vec<QuestionScore>)> {
    let queries = gold_queries(dataset);
    let predictions = reader.answer_batch(&queries, &ReadParams::default(), progress)?;
    let answers: Vec<String> = predictions
        .iter()
        .map(|p| {
            p.answers
                .first()
                .map_or(String::new(), |a| a.answer.clone())
        })
        .collect();
    let map: squad::Predictions = dataset
        .questions
        .iter()
        .zip(&answers)
        .map(|(q, a)| (q.id.clone(), a.clone()))
        .collect();
    let scores = squad::evaluate(dataset, &map, &NoAnswer::default())?.questions;
    Ok((answers, scores))
}

/// The reader alone on the gold paragraph of each answerable question (`None` for the others).
fn gold_paragraph_scores<S: DocumentStore>(
    pipeline: &Pipeline<S>,
    dataset: &Dataset,
    progress: &mut dyn FnMut(Progress),
) -> Result<Vec<Option<QuestionScore>>> {
    let answerable = Dataset {
        version: dataset.version,
        questions: dataset
            .questions
            .iter()
            .filter(|q| q.has_answer())
            .cloned()
            .collect(),
    };
    let total = answerable.questions.len();
    let (_, scores) = read_gold(pipeline.reader(), &answerable, &mut |done| {
        progress(Progress {
            stage: crate::Stage::ReadGold,
            done,
            total,
        })
    })?;
    let mut scores = scores.into_iter();
    Ok(dataset
        .questions
        .iter()
        .map(|q| q.has_answer().then(|| scores.next()).flatten())
        .collect())
}

impl OdqaResults {
    /// Questions the pipeline abstained on.
    pub fn abstained(&self) -> usize {
        self.responses.iter().filter(|r| r.answer.is_none()).count()
    }

    /// Answers flagged ambiguous (the documents disagree).
    pub fn ambiguous(&self) -> usize {
        self.responses.iter().filter(|r| r.ambiguous).count()
    }

    /// Exact match (0 or 1) of the answered questions, split into those flagged ambiguous and
    /// the others.
    fn exact_match_by_flag(&self) -> (Vec<f64>, Vec<f64>) {
        let answered = self
            .responses
            .iter()
            .zip(&self.end_to_end)
            .filter(|(r, _)| r.answer.is_some());
        let (flagged, unflagged): (Vec<_>, Vec<_>) = answered.partition(|(r, _)| r.ambiguous);
        let em =
            |pairs: Vec<(&Response, &QuestionScore)>| pairs.iter().map(|(_, s)| s.em).collect();
        (em(flagged), em(unflagged))
    }

    /// Questions per outcome, in [`OUTCOMES`] order.
    /// (Without unanswerable questions, their two outcomes are left out.)
    pub fn outcome_counts(&self) -> Vec<(&'static str, usize)> {
        let unanswerable = self.unanswerable() > 0;
        OUTCOMES
            .iter()
            .filter(|(outcome, _)| unanswerable || outcome.of_answerable())
            .map(|&(outcome, name)| {
                (
                    name,
                    self.outcomes.iter().filter(|&&o| o == outcome).count(),
                )
            })
            .collect()
    }

    /// Headline metrics with bootstrap intervals, in percent.
    pub fn intervals(&self, settings: &Bootstrap) -> Intervals {
        let percent = |values: Vec<f64>| stats::bootstrap_mean(&values, settings).scaled(100.0);
        let k = self.k;
        let hits: Vec<f64> = self
            .recall
            .queries
            .iter()
            .map(|q| f64::from(u8::from(q.hit_at(k))))
            .collect();
        let mut out = Vec::new();
        if !hits.is_empty() {
            out.push((format!("recall@{k}"), percent(hits)));
        }
        if let Some(gold) = &self.gold {
            let read: Vec<&QuestionScore> = gold.iter().flatten().collect();
            out.push((
                "reader_exact_match".into(),
                percent(read.iter().map(|s| s.em).collect()),
            ));
            out.push((
                "reader_f1".into(),
                percent(read.iter().map(|s| s.f1).collect()),
            ));
        }
        let e2e = &self.end_to_end;
        out.push((
            "exact_match".into(),
            percent(e2e.iter().map(|s| s.em).collect()),
        ));
        out.push(("f1".into(), percent(e2e.iter().map(|s| s.f1).collect())));
        let unanswerable = self.unanswerable();
        for (outcome, name) in OUTCOMES {
            if !outcome.of_answerable() && unanswerable == 0 {
                continue;
            }
            let share = self
                .outcomes
                .iter()
                .map(|&o| f64::from(u8::from(o == outcome)))
                .collect();
            out.push((name.replace(' ', "_"), percent(share)));
        }
        let (precision, recall) = self.abstention_indicators();
        if !precision.is_empty() {
            out.push(("abstention_precision".into(), percent(precision)));
        }
        if !recall.is_empty() {
            out.push(("abstention_recall".into(), percent(recall)));
        }
        let (flagged, unflagged) = self.exact_match_by_flag();
        if !flagged.is_empty() || !unflagged.is_empty() {
            let share = flagged
                .iter()
                .map(|_| 1.0)
                .chain(unflagged.iter().map(|_| 0.0))
                .collect();
            out.push(("ambiguous".into(), percent(share)));
        }
        if !flagged.is_empty() {
            out.push(("exact_match_ambiguous".into(), percent(flagged)));
        }
        if !unflagged.is_empty() {
            out.push(("exact_match_unambiguous".into(), percent(unflagged)));
        }
        out
    }

    /// Unanswerable questions (SQuAD v2.0's and withheld ones).
    pub fn unanswerable(&self) -> usize {
        self.dataset
            .questions
            .iter()
            .filter(|q| !q.has_answer())
            .count()
    }

    /// Per-question indicators whose means are the abstention precision (over abstentions: was
    /// the question unanswerable?) and recall (over unanswerable questions: did it abstain?).
    fn abstention_indicators(&self) -> (Vec<f64>, Vec<f64>) {
        let one = |b: bool| f64::from(u8::from(b));
        let pairs = || {
            self.dataset
                .questions
                .iter()
                .zip(&self.responses)
                .map(|(q, r)| (!q.has_answer(), r.answer.is_none()))
        };
        let precision = pairs()
            .filter(|&(_, abstained)| abstained)
            .map(|(u, _)| one(u))
            .collect();
        let recall = pairs().filter(|&(u, _)| u).map(|(_, a)| one(a)).collect();
        (precision, recall)
    }

    /// The machine-readable summary (`eval odqa --json`).
    pub fn summary_json(&self, intervals: &Intervals, confidence: f64) -> Map<String, Value> {
        let mut out = Map::new();
        out.insert("questions".into(), self.dataset.questions.len().into());
        out.insert("documents".into(), self.documents.into());
        out.insert("passages".into(), self.passages.into());
        out.insert("mode".into(), self.mode.name().into());
        out.insert("k".into(), self.k.into());
        out.insert("abstained".into(), self.abstained().into());
        out.insert("ambiguous_answers".into(), self.ambiguous().into());
        out.insert("unanswerable".into(), self.unanswerable().into());
        out.insert("withheld".into(), self.withheld.into());
        let counts: Map<String, Value> = self
            .outcome_counts()
            .into_iter()
            .map(|(name, n)| (name.replace(' ', "_"), n.into()))
            .collect();
        out.insert("outcomes".into(), Value::Object(counts));
        out.insert("recall_curve".into(), json!(self.recall.recall));
        out.insert("seconds".into(), self.seconds.into());
        out.insert("mean_timings_ms".into(), self.mean_timings());
        out.insert("confidence".into(), confidence.into());
        for (name, interval) in intervals {
            out.insert(name.clone(), json!(interval));
        }
        out
    }

    fn mean_timings(&self) -> Value {
        let n = self.responses.len().max(1) as f64;
        let mean = |f: fn(&Response) -> f64| self.responses.iter().map(f).sum::<f64>() / n;
        json!({
            "retrieve": mean(|r| r.timings.retrieve_ms),
            "read": mean(|r| r.timings.read_ms),
            "aggregate": mean(|r| r.timings.aggregate_ms),
        })
    }

    /// One row per question: answers, scores, first hit rank, outcome, the passages read.
    pub fn per_question(&self) -> Vec<Value> {
        let q = &self.dataset.questions;
        (0..q.len())
            .map(|i| {
                let r = &self.responses[i];
                let e2e = &self.end_to_end[i];
                let mut row = json!({
                    "id": q[i].id,
                    "question": q[i].question,
                    "answers": q[i].answers,
                    "prediction": r.answer.as_ref().map(|a| a.text.as_str()),
                    "doc_id": r.answer.as_ref().map(|a| a.evidence.doc_id.as_str()),
                    "na_prob": r.na_prob,
                    "em": e2e.em,
                    "f1": e2e.f1,
                    "has_answer": q[i].has_answer(),
                    "first_hit": self.recall_index[i].and_then(|r| self.recall.queries[r].first_hit),
                    "outcome": self.outcomes[i],
                    "ambiguous": r.ambiguous,
                    "readings": r.readings.iter().map(|&c| r.candidates[c].text.as_str()).collect::<Vec<_>>(),
                    "passages": r.passages.iter().map(passage_summary).collect::<Vec<_>>(),
                });
                if let Some(gold) = self.gold.as_ref().and_then(|g| g[i].as_ref()) {
                    row["reader_prediction"] = gold.prediction.clone().into();
                    row["reader_em"] = gold.em.into();
                    row["reader_f1"] = gold.f1.into();
                }
                row
            })
            .collect()
    }

    /// The HTML report: headline metrics, where answers are lost, the recall curve, the F1
    /// histogram.
    pub fn html_report(&self, input: &Path, intervals: &Intervals, confidence: f64) -> Report {
        let mut report = Report::new(format!("Open-domain QA: {}", input.display()));
        let headline: Vec<Metric> = intervals
            .iter()
            .map(|(name, i)| Metric::with_interval(name.clone(), *i))
            .collect();
        report.metrics("Headline metrics (%)", &headline, confidence);
        report.table(
            "Where answers are lost",
            &["outcome", "questions", "share (%)"],
            &self.outcome_rows(),
        );
        let curve: Vec<(f64, f64)> = self
            .recall
            .recall
            .iter()
            .enumerate()
            .map(|(i, r)| ((i + 1) as f64, *r))
            .collect();
        report.curve("Answer recall@k", &curve, 1.0, "k", "recall");
        let f1: Vec<f64> = self.end_to_end.iter().map(|s| s.f1).collect();
        report.histogram("End-to-end F1 per question", &f1, (0.0, 1.0), 20, "F1");
        report.note(&format!(
            "{} questions over {} documents ({} passages), {} retrieval, k = {}. Correct: exact match of the \
             final answer; retrieval miss: no retrieved passage contains a gold answer; ranking miss: a \
             passage's best span is a gold answer but another answer was chosen; reading miss: a passage \
             contains a gold answer but the reader's best span in none is one. Unanswerable questions \
             ({} of them, {} from withheld articles): correct abstention or false answer; abstention \
             precision is the share of abstentions on unanswerable questions, recall the share of \
             unanswerable questions abstained on. Recall@k and the reader on gold paragraphs count \
             answerable questions only. Ambiguous: the share of answers ({} of {}) flagged because a \
             runner-up from another document disagrees and is nearly as likely to be right; \
             exact_match_ambiguous and exact_match_unambiguous: exact match of the flagged and of the \
             other answers (answered questions only). Intervals: percentile bootstrap over questions.",
            self.dataset.questions.len(),
            self.documents,
            self.passages,
            self.mode.name(),
            self.k,
            self.unanswerable(),
            self.withheld,
            self.ambiguous(),
            self.responses.len() - self.abstained()
        ));
        report
    }

    /// (outcome, questions, share in percent with two decimals) rows.
    pub fn outcome_rows(&self) -> Vec<Vec<String>> {
        let n = self.outcomes.len().max(1) as f64;
        self.outcome_counts()
            .into_iter()
            .map(|(name, count)| {
                vec![
                    name.to_string(),
                    count.to_string(),
                    format!("{:.2}", 100.0 * count as f64 / n),
                ]
            })
            .collect()
    }
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
