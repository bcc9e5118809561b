//! lector-pipeline: open-domain question answering over a lector index, with its evidence.
//!
//! A question goes through three stages, each timed:
//!
//! 1. **retrieve** the top `k` passages (BM25, dense or hybrid); with a reranker
//!    ([`Pipeline::with_reranker`]), retrieve its depth and keep the `k` the reranker scores best
//!    ([`lector_index::rerank`]);
//! 2. **read** them in one batch with the extractive reader (one reader query per passage);
//! 3. **aggregate** the passages' answers into ranked candidates ([`aggregate::aggregate`]):
//!    answers that normalise to the same text (SQuAD normalisation) are one candidate, scored by
//!    their best span (against its passage's no-answer score, weighted by retrieval rank) or,
//!    with voting, by the sum of their spans; then abstain when the
//!    no-answer probability is above the threshold — the calibrated one stored with the index
//!    ([`calibration`]), else 0.5, the reader's rule "the null score beats the best span".
//!
//! The answer carries its evidence: document id, title and date, the passage, and the answer's
//! character offsets in the passage and in the document; and, when the index's calibration has a
//! confidence map, the probability that it is right (`confidence`, see [`calibration`]).
//!
//! When documents disagree — a runner-up from another document gives a different answer nearly
//! as likely to be right — the response says so (`ambiguous`) and names the readings with their
//! evidence ([`ambiguity`]).
//!
//! ```no_run
//! # fn main() -> Result<(), lector_pipeline::Error> {
//! use lector_pipeline::{AskOptions, Pipeline};
//! use std::path::Path;
//! let pipeline = Pipeline::open(Path::new("lector-index"), Path::new("models/reader-minilm-squad"))?;
//! let response = pipeline.ask("Who won Super Bowl 50?", &AskOptions::default())?;
//! if let Some(answer) = &response.answer {
//!     println!("{} ({} chars {}..{})", answer.text, answer.evidence.doc_id, answer.evidence.start, answer.evidence.end);
//! }
//! # Ok(()) }
//! ```

pub mod adversarial;
pub mod aggregate;
pub mod ambiguity;
pub mod calibrate;
pub mod calibration;
pub mod config;
pub mod error;
pub mod generative;
pub mod lab;
pub mod multihop;
pub mod odqa;
pub mod prompting;
pub mod questions;
pub mod ranking;

pub use aggregate::{
    answer_score, Abstention, Aggregation, Candidate, Evidence, PassageReading, DEFAULT_RANK_PRIOR,
};
pub use ambiguity::DEFAULT_AMBIGUITY_ODDS;
pub use calibration::{Calibration, DEFAULT_THRESHOLD};
pub use config::{Built, PipelineConfig, RerankConfig, RetrievalConfig};
pub use error::{Error, Result};
pub use multihop::{Decomposer, HopOptions, HopTrace, SecondHop};

use lector_index::{
    DocumentStore, Embedder, Hit, Index, Mode, PassageScorer, Retriever, SearchOptions,
};
use lector_reader::{Query, ReadParams, Reader, WindowProbabilities};
use serde::Serialize;
use std::path::Path;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

/// How a question is answered.
#[derive(Debug, Clone)]
pub struct AskOptions {
    /// Retrieval; `None`: the index's defaults (hybrid for an index with passage vectors, BM25
    /// otherwise; see [`default_search`]).
    pub search: Option<SearchOptions>,
    /// Passages to retrieve and read.
    pub k: usize,
    /// Add up the scores of answers that normalise to the same text.
    pub vote: bool,
    /// Break near-ties ([`aggregate::NEAR_TIE_LOG_ODDS`]) toward the newest dated document.
    pub prefer_recent: bool,
    /// Exponent of the retrieval-rank prior ([`Aggregation::rank_prior`]).
    pub rank_prior: f64,
    /// Reader settings; `top_k` is the number of answers kept per passage (the runner-ups).
    pub read: ReadParams,
    /// Flag the answer as ambiguous while it is at most this many times as likely to be right as
    /// a runner-up from another document that disagrees with it ([`ambiguity`]; at least 1).
    pub ambiguity_odds: f64,
}

/// The most passages one question may retrieve and read.
pub const MAX_K: usize = 1000;

/// The most answers kept per passage ([`AskOptions::read`]'s `top_k`).
pub const MAX_ANSWERS_PER_PASSAGE: usize = 20;

/// The largest [`AskOptions::rank_prior`] (8: the passage at rank 2 already weighs 1/256).
pub const MAX_RANK_PRIOR: f64 = 8.0;

impl AskOptions {
    /// Checks every option against its bounds ([`MAX_K`], [`MAX_ANSWERS_PER_PASSAGE`],
    /// [`MAX_RANK_PRIOR`], `ambiguity_odds` at least 1, the BM25 parameters): the one place the
    /// CLI, the server and Python are checked. NaN is out of every bound.
    pub fn validate(&self) -> Result<()> {
        let bad = |message: String| Err(Error::Options(message));
        if !(1..=MAX_K).contains(&self.k) {
            return bad(format!("k must be between 1 and {MAX_K}, not {}", self.k));
        }
        let answers = self.read.top_k;
        if !(1..=MAX_ANSWERS_PER_PASSAGE).contains(&answers) {
            return bad(format!(
                "answers_per_passage must be between 1 and {MAX_ANSWERS_PER_PASSAGE}, not {answers}"
            ));
        }
        if !(0.0..=MAX_RANK_PRIOR).contains(&self.rank_prior) {
            return bad(format!(
                "rank_prior must be between 0 and {MAX_RANK_PRIOR}, not {}",
                self.rank_prior
            ));
        }
        if self.ambiguity_odds.is_nan() || self.ambiguity_odds < 1.0 {
            return bad(format!(
                "ambiguity_odds must be at least 1, not {}",
                self.ambiguity_odds
            ));
        }
        if let Some(search) = &self.search {
            search.bm25.validate().map_err(Error::Options)?;
        }
        Ok(())
    }
}

impl Default for AskOptions {
    fn default() -> Self {
        AskOptions {
            search: None,
            k: 5,
            vote: false,
            prefer_recent: false,
            rank_prior: DEFAULT_RANK_PRIOR,
            read: ReadParams {
                top_k: 3,
                ..ReadParams::default()
            },
            ambiguity_odds: DEFAULT_AMBIGUITY_ODDS,
        }
    }
}

/// Wall-clock time of each stage, in milliseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Timings {
    pub retrieve_ms: f64,
    /// 0 without a reranker.
    pub rerank_ms: f64,
    pub read_ms: f64,
    pub aggregate_ms: f64,
}

/// The pipeline's answer to one question.
#[derive(Debug, Clone, Serialize)]
pub struct Response {
    /// The question as asked.
    pub question: String,
    /// The answer with its evidence; `None` when the pipeline abstains.
    pub answer: Option<Candidate>,
    /// Why there is no answer.
    pub abstention: Option<Abstention>,
    /// The no-answer probability of the top candidate (see [`aggregate::aggregate`]).
    pub na_prob: f64,
    /// The threshold `na_prob` was compared with.
    pub threshold: f64,
    /// Whether the threshold comes from a calibration.
    pub calibrated: bool,
    /// Every candidate, best first: the answer, then the runner-ups (also when abstaining).
    pub candidates: Vec<Candidate>,
    /// The documents disagree: a runner-up from another document gives a different answer
    /// nearly as likely to be right ([`ambiguity`]). Always false when abstaining, without a
    /// confidence map, and for multi-hop answers ([`Pipeline::ask_hops`]).
    pub ambiguous: bool,
    /// When `ambiguous`, the readings as indices into `candidates`: the answer (0), then each
    /// disagreeing runner-up, best first (their evidence is the candidates'); else empty.
    pub readings: Vec<usize>,
    /// The recency tie-break changed the answer.
    pub reordered_by_date: bool,
    /// The retrieved passages with what the reader found in each, in retrieval order.
    pub passages: Vec<PassageReading>,
    /// Time per stage. In [`Pipeline::ask_many`], reading is one batch for all questions and
    /// each question is charged an equal share of it. With [`Pipeline::ask_hops`], hop 1's
    /// stages (each hop's total is in `hops`).
    pub timings: Timings,
    /// How a multi-hop answer was found ([`Pipeline::ask_hops`] only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hops: Option<HopTrace>,
}

impl Response {
    /// The readings of an ambiguous answer, the answer first, as (text, index into `passages`
    /// of the passage that says it); empty when the answer is not ambiguous.
    pub fn reading_passages(&self) -> Vec<(String, usize)> {
        self.readings
            .iter()
            .map(|&i| {
                let c = &self.candidates[i];
                (c.text.clone(), c.evidence.rank - 1)
            })
            .collect()
    }
}

/// The slow stages of [`Pipeline::ask_many`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// Retrieving and reranking, question by question (reported with a reranker only).
    Rerank,
    /// Reading every passage in one batch.
    Read,
    /// Reading each question's gold paragraph alone ([`odqa::evaluate`]).
    ReadGold,
}

/// Progress of [`Pipeline::ask_many`]: `done` of `total` questions reranked or passages read.
#[derive(Debug, Clone, Copy)]
pub struct Progress {
    pub stage: Stage,
    pub done: usize,
    pub total: usize,
}

/// A document store (the embedded [`Index`] unless told otherwise), a reader, the abstention
/// threshold, the embedder of a dense store, and an optional reranker. The models are shared
/// (`Arc`), so [`Pipeline::with_store`] makes a pipeline over another index snapshot without
/// loading or copying them. Multi-hop asks need the embedded index (they follow titles through
/// every document); everything else works over any [`DocumentStore`].
pub struct Pipeline<S = Index> {
    index: S,
    reader: Arc<Reader>,
    calibration: Option<Calibration>,
    embedder: Option<Arc<dyn Embedder>>,
    /// The reranker and how many passages it chooses from.
    reranker: Option<(Arc<dyn PassageScorer>, usize)>,
    /// Documents by title, for multi-hop links; built on first use.
    titles: OnceLock<multihop::TitleIndex>,
}

/// The store's default retrieval mode: hybrid when it embeds its passages itself, else BM25
/// (vectors made outside lector need the query's vector too).
pub fn default_mode(index: &(impl DocumentStore + ?Sized)) -> Mode {
    match index.dense_meta() {
        Some(meta) if !meta.external => Mode::Hybrid,
        _ => Mode::Bm25,
    }
}

/// The store's default retrieval ([`default_mode`]).
pub fn default_search(index: &(impl DocumentStore + ?Sized)) -> SearchOptions {
    SearchOptions::for_index(index, default_mode(index))
}

impl<S: DocumentStore> Pipeline<S> {
    /// A pipeline without calibration (threshold [`DEFAULT_THRESHOLD`]).
    pub fn new(index: S, reader: Reader) -> Self {
        Pipeline {
            index,
            reader: Arc::new(reader),
            calibration: None,
            embedder: None,
            reranker: None,
            titles: OnceLock::new(),
        }
    }

    /// Sets the embedder dense and hybrid retrieval use for questions (the index's model).
    pub fn with_embedder(mut self, embedder: Arc<dyn Embedder>) -> Self {
        self.embedder = Some(embedder);
        self
    }

    /// Sets a reranker: questions then retrieve `depth` passages (at least `k`) and read the `k`
    /// it scores best.
    pub fn with_reranker(mut self, reranker: Box<dyn PassageScorer>, depth: usize) -> Self {
        self.reranker = Some((Arc::from(reranker), depth));
        self
    }

    /// Replaces the calibration.
    pub fn with_calibration(mut self, calibration: Option<Calibration>) -> Self {
        self.calibration = calibration;
        self
    }

    /// The document store.
    pub fn store(&self) -> &S {
        &self.index
    }

    /// The reader.
    pub fn reader(&self) -> &Reader {
        &self.reader
    }

    /// The calibration in use, if any.
    pub fn calibration(&self) -> Option<&Calibration> {
        self.calibration.as_ref()
    }

    /// The abstention threshold: the calibrated one, else [`DEFAULT_THRESHOLD`].
    pub fn threshold(&self) -> f64 {
        self.calibration
            .as_ref()
            .map_or(DEFAULT_THRESHOLD, |c| c.threshold)
    }

    /// Answers one question.
    pub fn ask(&self, question: &str, options: &AskOptions) -> Result<Response> {
        let mut responses = self.ask_many(&[question], options, &mut |_| {})?;
        Ok(responses.remove(0))
    }

    /// Answers many questions, reading all their passages in one batch (much faster than one
    /// [`Pipeline::ask`] per question); `progress` follows the reading.
    pub fn ask_many(
        &self,
        questions: &[&str],
        options: &AskOptions,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<Vec<Response>> {
        options.validate()?;
        if questions.iter().any(|q| q.trim().is_empty()) {
            return Err(Error::EmptyQuestion);
        }
        let search = options
            .search
            .clone()
            .unwrap_or_else(|| default_search(&self.index));
        let retriever = self.index.retriever(&search, self.embedder.as_deref())?;
        let mut retrieved = Vec::with_capacity(questions.len());
        for (i, question) in questions.iter().enumerate() {
            retrieved.push(self.retrieve_with(retriever.as_ref(), question, options.k)?);
            if self.reranker.is_some() {
                progress(Progress {
                    stage: Stage::Rerank,
                    done: i + 1,
                    total: questions.len(),
                });
            }
        }
        self.read_retrieved(questions, retrieved, options, progress)
    }

    /// Reads `hits`, the passages retrieved for `question` by another retriever, best first (a
    /// Haystack pipeline's documents), and aggregates their answers as [`Pipeline::ask`] does.
    pub fn answer_passages(
        &self,
        question: &str,
        hits: Vec<Hit>,
        options: &AskOptions,
    ) -> Result<Response> {
        options.validate()?;
        if question.trim().is_empty() {
            return Err(Error::EmptyQuestion);
        }
        let retrieved = vec![(hits, Duration::ZERO, Duration::ZERO)];
        let mut responses = self.read_retrieved(&[question], retrieved, options, &mut |_| {})?;
        Ok(responses.remove(0))
    }

    /// Reads every question's retrieved passages in one batch and aggregates each question's.
    fn read_retrieved(
        &self,
        questions: &[&str],
        retrieved: Vec<(Vec<Hit>, Duration, Duration)>,
        options: &AskOptions,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<Vec<Response>> {
        let queries: Vec<Query> = questions
            .iter()
            .zip(&retrieved)
            .flat_map(|(question, (hits, _, _))| {
                hits.iter().map(move |h| Query {
                    question,
                    context: &h.text,
                })
            })
            .collect();
        let total = queries.len();
        let start = Instant::now();
        let mut predictions = self
            .reader
            .answer_batch(&queries, &options.read, &mut |read| {
                progress(Progress {
                    stage: Stage::Read,
                    done: read,
                    total,
                })
            })?
            .into_iter();
        let read_share = start.elapsed() / questions.len().max(1) as u32;
        let how = Aggregation {
            vote: options.vote,
            prefer_recent: options.prefer_recent,
            threshold: self.threshold(),
            rank_prior: options.rank_prior,
        };
        questions
            .iter()
            .zip(retrieved)
            .map(|(question, (hits, retrieve_time, rerank_time))| {
                let start = Instant::now();
                let dates = self.dates_of(&hits)?;
                let readings: Vec<PassageReading> = hits
                    .into_iter()
                    .zip(dates)
                    .map(|(hit, date)| {
                        let prediction = predictions.next().expect("one prediction per passage");
                        PassageReading::new(hit, date, prediction)
                    })
                    .collect();
                let mut response = self.respond(question, readings, &how);
                flag_disagreement(&mut response, options.ambiguity_odds);
                response.timings = Timings {
                    retrieve_ms: ms(retrieve_time),
                    rerank_ms: ms(rerank_time),
                    read_ms: ms(read_share),
                    aggregate_ms: ms(start.elapsed()),
                };
                Ok(response)
            })
            .collect()
    }

    /// The passages a question is read in: the retriever's best `k`, or, with a reranker, the
    /// `k` it scores best among the retriever's best [`Pipeline::with_reranker`] depth.
    pub fn retrieve(&self, question: &str, search: &SearchOptions, k: usize) -> Result<Vec<Hit>> {
        let retriever = self.index.retriever(search, self.embedder.as_deref())?;
        Ok(self.retrieve_with(retriever.as_ref(), question, k)?.0)
    }

    /// [`Pipeline::retrieve`] with a retriever, and the time spent retrieving and reranking.
    fn retrieve_with(
        &self,
        retriever: &dyn Retriever,
        question: &str,
        k: usize,
    ) -> Result<(Vec<Hit>, Duration, Duration)> {
        let start = Instant::now();
        let Some((reranker, depth)) = &self.reranker else {
            return Ok((
                retriever.retrieve(question, k)?,
                start.elapsed(),
                Duration::ZERO,
            ));
        };
        let hits = retriever.retrieve(question, k.max(*depth))?;
        let retrieve_time = start.elapsed();
        let hits = lector_index::rerank(reranker.as_ref(), question, hits, k)?;
        Ok((hits, retrieve_time, start.elapsed() - retrieve_time))
    }

    /// The start and end probabilities of the reader over the tokens of `passage`, per window
    /// (for explaining an answer; see [`Reader::token_probabilities`]).
    pub fn token_probabilities(
        &self,
        question: &str,
        passage: &str,
        options: &AskOptions,
    ) -> Result<Vec<WindowProbabilities>> {
        Ok(self
            .reader
            .token_probabilities(question, passage, &options.read)?)
    }

    /// The dates of the documents of `hits`, in order.
    fn dates_of(&self, hits: &[Hit]) -> Result<Vec<Option<String>>> {
        hits.iter()
            .map(|h| Ok(self.index.document_date(&h.doc_id)?))
            .collect()
    }

    fn respond(
        &self,
        question: &str,
        passages: Vec<PassageReading>,
        how: &Aggregation,
    ) -> Response {
        let mut verdict = aggregate::aggregate(&passages, how);
        // The one place the confidence map is applied.
        if let Some(calibration) = &self.calibration {
            for candidate in &mut verdict.candidates {
                candidate.confidence = calibration.confidence_for(candidate.log_odds);
            }
        }
        let answer = match verdict.abstention {
            None => verdict.candidates.first().cloned(),
            Some(_) => None,
        };
        Response {
            question: question.to_string(),
            answer,
            abstention: verdict.abstention,
            na_prob: verdict.na_prob,
            threshold: how.threshold,
            calibrated: self.calibration.is_some(),
            candidates: verdict.candidates,
            ambiguous: false,
            readings: Vec::new(),
            reordered_by_date: verdict.reordered_by_date,
            passages,
            timings: Timings::default(),
            hops: None,
        }
    }
}

impl Pipeline<Index> {
    /// Opens the index in `index_dir` with its calibration, if it has one, and loads the reader.
    pub fn open(index_dir: &Path, reader_dir: &Path) -> Result<Self> {
        let index = Index::open(index_dir)?;
        let calibration = Calibration::load(index_dir)?;
        let reader = Reader::load(reader_dir)?;
        Ok(Pipeline::new(index, reader).with_calibration(calibration))
    }

    /// The index.
    pub fn index(&self) -> &Index {
        &self.index
    }
}

impl<S: DocumentStore> Pipeline<S> {
    /// Whether the title index of multi-hop asks ([`Pipeline::titles`]) is built already.
    pub fn titles_built(&self) -> bool {
        self.titles.get().is_some()
    }

    /// A pipeline over another store or snapshot of it (e.g. a writer's new commit) with this
    /// one's reader, calibration, embedder and reranker, shared rather than loaded again: a
    /// server builds the next snapshot while questions keep reading the current one.
    pub fn with_store<T: DocumentStore>(&self, store: T) -> Pipeline<T> {
        Pipeline {
            index: store,
            reader: self.reader.clone(),
            calibration: self.calibration.clone(),
            embedder: self.embedder.clone(),
            reranker: self.reranker.clone(),
            titles: OnceLock::new(),
        }
    }

    /// This pipeline over `f(store)` (e.g. the store boxed or shared).
    pub fn map_store<T: DocumentStore>(self, f: impl FnOnce(S) -> T) -> Pipeline<T> {
        Pipeline {
            index: f(self.index),
            reader: self.reader,
            calibration: self.calibration,
            embedder: self.embedder,
            reranker: self.reranker,
            titles: self.titles,
        }
    }
}

/// Marks an answer whose documents disagree (not an abstention), with its readings.
fn flag_disagreement(response: &mut Response, odds: f64) {
    if response.answer.is_none() {
        return;
    }
    response.readings = ambiguity::disagreeing_readings(
        &response.candidates,
        &response.passages,
        odds,
        response.threshold,
    );
    response.ambiguous = !response.readings.is_empty();
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}
