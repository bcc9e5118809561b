//! Multi-hop questions: iterative retrieval over passage pairs, and comparison and yes/no
//! questions answered from sub-answers.
//!
//! [`Pipeline::ask_hops`] answers in up to two hops:
//!
//! 1. **Hop 1** retrieves for the question and reads the best `k` passages, as [`Pipeline::ask`]
//!    does. When its answer is confident enough ([`HopOptions::stop_confidence`]) and the
//!    question is a bridge question, it stops there.
//! 2. **Hop 2** expands each of the best [`HopOptions::beam`] first-hop passages: it searches
//!    again with the question and that passage together ([`SecondHop`]: BM25, the embedder as
//!    multi-hop dense retrieval does, or both), with the question plus each bridge the reader
//!    found in the passage, and follows the titles the passage names ([`TitleIndex`]). Every
//!    pair of passages is scored as a whole ([`PathWeights`]) and the best
//!    [`HopOptions::paths`] pairs are read, each pair as one context, bridge passage first.
//!
//! Comparison questions ("..., X or Y?") and yes/no questions ([`question::analyse`]) are
//! then decided from sub-answers: a year or number read from each option's passage, or an
//! attribute asked of each entity ("What is the nationality of X?") and compared, or whether
//! each passage says what the question asks. Bridge questions are split into sub-questions
//! ([`Decomposer`]: by rule, [`RuleDecomposer`], or by a language model, [`LlmDecomposer`])
//! answered in turn; their answers join the second hop's bridges. The chain of sub-questions,
//! answers and passages is returned as the evidence ([`HopTrace`]), from which
//! [`supporting_facts`] predicts HotpotQA's supporting sentences.

mod decompose;
mod paths;
pub mod question;
mod supporting;
mod titles;

pub use decompose::{
    parse_sub_questions, Decomposer, Decomposition, LlmDecomposer, RuleDecomposer,
};
pub use paths::PathWeights;
pub use question::{Analysis, Order, QuestionKind};
pub use supporting::supporting_facts;
pub use titles::TitleIndex;

use crate::aggregate::{Aggregation, Candidate, Evidence, PassageReading};
use crate::{default_search, ms, Error, Pipeline, Response, Result};
use lector_eval::normalize::normalized_tokens;
use lector_index::{
    filter::FilterInput, DocumentStore, Filter, Hit, Index, Mode, Retriever, SearchOptions,
};
use lector_reader::{Prediction, Query, ReadParams};
use paths::{score_paths, Expansion, FirstHop, ScoredPath};
use serde::Serialize;
use std::collections::HashMap;
use std::time::Instant;

/// How the second hop searches from a first-hop passage.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SecondHop {
    /// BM25 over the question and the passage's title and text.
    Lexical,
    /// The index's embedder over the same text (needs passage vectors).
    Dense,
    /// Both, each passage at its better rank.
    Both,
}

impl std::str::FromStr for SecondHop {
    type Err = String;

    fn from_str(text: &str) -> std::result::Result<Self, String> {
        match text {
            "lexical" => Ok(SecondHop::Lexical),
            "dense" => Ok(SecondHop::Dense),
            "both" => Ok(SecondHop::Both),
            other => Err(format!(
                "unknown second hop `{other}`: use lexical, dense or both"
            )),
        }
    }
}

/// Multi-hop settings ([`Pipeline::ask_hops`]).
#[derive(Debug, Clone)]
pub struct HopOptions {
    /// 1: retrieve and read once; 2: a second hop from the first.
    pub hops: usize,
    /// Passages the first hop retrieves and ranks (at least `k` and `beam`).
    pub first_depth: usize,
    /// First-hop passages expanded by the second hop.
    pub beam: usize,
    /// Passages each second-hop search returns.
    pub second_depth: usize,
    /// Passage pairs read.
    pub paths: usize,
    /// How the second hop searches.
    pub second_hop: SecondHop,
    /// Stop after hop 1 when its answer's confidence (1 - no-answer probability) reaches this;
    /// `None` always takes the second hop.
    pub stop_confidence: Option<f64>,
    /// How a pair of passages is scored.
    pub weights: PathWeights,
}

impl Default for HopOptions {
    fn default() -> Self {
        HopOptions {
            hops: 2,
            first_depth: 20,
            beam: 5,
            second_depth: 5,
            paths: 3,
            second_hop: SecondHop::Lexical,
            stop_confidence: None,
            weights: PathWeights::default(),
        }
    }
}

/// A passage named by where it is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PassageId {
    pub doc_id: String,
    pub title: Option<String>,
    pub passage: usize,
}

impl PassageId {
    fn of(hit: &Hit) -> Self {
        PassageId {
            doc_id: hit.doc_id.clone(),
            title: hit.title.clone(),
            passage: hit.passage,
        }
    }
}

/// A pair of passages and its score.
#[derive(Debug, Clone, Serialize)]
pub struct PathView {
    pub first: PassageId,
    pub second: PassageId,
    pub score: f64,
    /// The first passage names the second's title.
    pub linked: bool,
}

/// One step of the reasoning: a sub-question, its answer, and where it was found.
#[derive(Debug, Clone, Serialize)]
pub struct Step {
    pub question: String,
    pub answer: String,
    pub passage: PassageId,
    /// Character offsets of the answer in the passage text.
    pub start: usize,
    pub end: usize,
    pub score: f64,
}

/// A span an answer rests on: character offsets in a passage's text.
#[derive(Debug, Clone, Serialize)]
pub struct Support {
    pub passage: PassageId,
    pub start: usize,
    pub end: usize,
}

/// How a multi-hop answer was found.
#[derive(Debug, Clone, Serialize)]
pub struct HopTrace {
    /// The question type the rules read.
    pub kind: QuestionKind,
    /// Hops run (1 when hop 1 was confident enough or one hop was asked).
    pub hops: usize,
    /// Hop 1's answer was confident enough to stop.
    pub stopped: bool,
    /// Confidence of hop 1's answer (1 - its no-answer probability).
    pub first_confidence: f64,
    /// The passages in ranking order: the pairs' passages best pair first, then the rest of the
    /// first hop's ranking (with one hop: the first hop's ranking).
    pub ranking: Vec<PassageId>,
    /// The pairs read, best first.
    pub paths: Vec<PathView>,
    /// Sub-questions and their answers (comparison and yes/no questions).
    pub chain: Vec<Step>,
    /// The spans the answer rests on.
    pub support: Vec<Support>,
    /// Wall-clock time of each hop, in milliseconds.
    pub hop_ms: Vec<f64>,
}

/// The pool of passages a question's hops have seen; paths index into it.
#[derive(Default)]
struct Pool {
    hits: Vec<Hit>,
    at: HashMap<(String, usize), usize>,
}

impl Pool {
    fn add(&mut self, hit: &Hit) -> usize {
        let key = (hit.doc_id.clone(), hit.passage);
        if let Some(&i) = self.at.get(&key) {
            return i;
        }
        self.hits.push(hit.clone());
        self.at.insert(key, self.hits.len() - 1);
        self.hits.len() - 1
    }
}

/// Between the two passages of a pair read as one context.
const PAIR_SEPARATOR: &str = "\n\n";

impl<S: DocumentStore> Pipeline<S> {
    /// Answers a question in up to `hops.hops` hops (see the [module documentation](self)).
    pub fn ask_hops(
        &self,
        question: &str,
        options: &crate::AskOptions,
        hops: &HopOptions,
    ) -> Result<Response> {
        self.ask_hops_with(question, options, hops, Some(&RuleDecomposer))
    }

    /// [`Pipeline::ask_hops`] with another decomposer for bridge questions, or none (`None`: the
    /// passage pairs alone answer them). Each sub-question is
    /// answered in turn (one hop each, `#n` replaced by the n-th answer), the first answer joins
    /// the second hop's bridges, and with two hops the last sub-answer is the answer.
    pub fn ask_hops_with(
        &self,
        question: &str,
        options: &crate::AskOptions,
        hops: &HopOptions,
        decomposer: Option<&dyn Decomposer>,
    ) -> Result<Response> {
        check_hop_options(hops)?;
        let analysis = question::analyse(question);
        let chain = match (decomposer, analysis.kind, hops.hops) {
            (Some(d), QuestionKind::Bridge, 2) => self.answer_chain(question, d, options)?,
            _ => Vec::new(),
        };
        let search = options
            .search
            .clone()
            .unwrap_or_else(|| default_search(&self.index));
        let retriever = self.index.retriever(&search, self.embedder.as_deref())?;
        let hop1_start = Instant::now();
        let depth = hops.first_depth.max(options.k).max(hops.beam);
        let (first, retrieve_time, rerank_time) =
            self.retrieve_with(retriever.as_ref(), question, depth)?;
        let read_start = Instant::now();
        let read_first = &first[..options.k.min(first.len())];
        let predictions = self.read(question, read_first, &options.read)?;
        let first_read_time = read_start.elapsed();
        let readings: Vec<PassageReading> = read_first
            .iter()
            .zip(predictions)
            .map(|(hit, p)| PassageReading::new(hit.clone(), self.date_of(&hit.doc_id), p))
            .collect();
        let sub_answers: Vec<String> = chain.iter().map(|(s, _)| s.answer.clone()).collect();
        let bridges: Vec<Vec<String>> = readings
            .iter()
            .map(|r| {
                let read = r.answers.iter().map(|a| a.answer.clone());
                read.chain(sub_answers.iter().cloned()).collect()
            })
            .collect();
        let mut response = self.respond(question, readings, &aggregation(self, options));
        response.timings.retrieve_ms = ms(retrieve_time);
        response.timings.rerank_ms = ms(rerank_time);
        response.timings.read_ms = ms(first_read_time);
        let first_confidence = match response.answer {
            Some(_) => 1.0 - response.na_prob,
            None => 0.0,
        };
        let stopped = analysis.kind == QuestionKind::Bridge
            && hops.stop_confidence.is_some_and(|c| first_confidence >= c);
        let mut trace = HopTrace {
            kind: analysis.kind,
            hops: 1,
            stopped,
            first_confidence,
            ranking: first.iter().map(PassageId::of).collect(),
            paths: Vec::new(),
            chain: Vec::new(),
            support: response
                .answer
                .as_ref()
                .map(support_of)
                .into_iter()
                .collect(),
            hop_ms: vec![ms(hop1_start.elapsed())],
        };
        if hops.hops == 1 || stopped {
            response.hops = Some(trace);
            return Ok(response);
        }
        let hop2_start = Instant::now();
        let mut pool = Pool::default();
        let scored = self.second_hop(question, &first, &bridges, hops, &search, &mut pool)?;
        let top: Vec<ScoredPath> = scored.iter().take(hops.paths).copied().collect();
        let mut answered = self.read_paths(question, &top, &pool, options)?;
        // The stage timings are hop 1's; each hop's total is in the trace.
        answered.timings = response.timings;
        trace.hops = 2;
        trace.ranking = ranking(&scored, &first, &pool);
        trace.paths = top.iter().map(|p| view(p, &pool)).collect();
        trace.support = answer_support(&answered, &top, &pool);
        let chain_answers = decomposer.is_some_and(|d| d.answers());
        if let Some((_, last)) = chain.last().filter(|_| chain_answers) {
            if let Some(answer) = &last.answer {
                answered.answer = Some(answer.clone());
                answered.candidates.insert(0, answer.clone());
                answered.abstention = None;
                answered.na_prob = last.na_prob;
                trace.support = chain
                    .iter()
                    .filter_map(|(s, _)| support_of_step(s))
                    .collect();
            }
        }
        trace.chain = chain.into_iter().map(|(s, _)| s).collect();
        match analysis.kind {
            QuestionKind::Bridge => {}
            QuestionKind::Comparison | QuestionKind::YesNo => self.decide(
                question,
                &analysis,
                &top,
                &pool,
                options,
                &mut answered,
                &mut trace,
            )?,
        }
        trace.hop_ms.push(ms(hop2_start.elapsed()));
        answered.hops = Some(trace);
        Ok(answered)
    }

    /// Answers a decomposer's sub-questions in turn, each in one hop, `#n` in a later one
    /// replaced by the n-th answer; each step with its response. Fewer than two sub-questions:
    /// no chain.
    fn answer_chain(
        &self,
        question: &str,
        decomposer: &dyn Decomposer,
        options: &crate::AskOptions,
    ) -> Result<Vec<(Step, Response)>> {
        let subs = decomposer.decompose(question).map_err(Error::Decompose)?;
        if subs.len() < 2 {
            return Ok(Vec::new());
        }
        let mut chain: Vec<(Step, Response)> = Vec::new();
        for sub in subs {
            let mut asked = sub.clone();
            for (n, (step, _)) in chain.iter().enumerate() {
                asked = asked.replace(&format!("#{}", n + 1), &step.answer);
            }
            let response = self.ask(&asked, options)?;
            let best = response.answer.as_ref().or(response.candidates.first());
            let step = Step {
                question: asked,
                answer: best.map_or(String::new(), |c| c.text.clone()),
                passage: best.map_or_else(
                    || PassageId {
                        doc_id: String::new(),
                        title: None,
                        passage: 0,
                    },
                    |c| PassageId {
                        doc_id: c.evidence.doc_id.clone(),
                        title: c.evidence.title.clone(),
                        passage: c.evidence.passage,
                    },
                ),
                start: best.map_or(0, |c| c.evidence.passage_start),
                end: best.map_or(0, |c| c.evidence.passage_end),
                score: best.map_or(0.0, |c| c.score),
            };
            chain.push((step, response));
        }
        Ok(chain)
    }

    /// The title index of the store's documents, built on first use (every title is read
    /// once: a server builds it with each snapshot, outside requests).
    pub fn titles(&self) -> Result<&TitleIndex> {
        if let Some(titles) = self.titles.get() {
            return Ok(titles);
        }
        let built = TitleIndex::build(&self.index.titles()?);
        Ok(self.titles.get_or_init(|| built))
    }

    /// The date of document `doc_id` (an external store that fails here has failed the
    /// retrieval before: the date is then left out).
    fn date_of(&self, doc_id: &str) -> Option<String> {
        self.index.document_date(doc_id).ok().flatten()
    }

    /// Reads `hits` for `question` in one batch.
    fn read(&self, question: &str, hits: &[Hit], read: &ReadParams) -> Result<Vec<Prediction>> {
        let queries: Vec<Query> = hits
            .iter()
            .map(|h| Query {
                question,
                context: &h.text,
            })
            .collect();
        Ok(self.reader.answer_batch(&queries, read, &mut |_| {})?)
    }

    /// Expands the best first-hop passages and scores every pair; `pool` receives the passages.
    fn second_hop(
        &self,
        question: &str,
        first: &[Hit],
        bridges: &[Vec<String>],
        hops: &HopOptions,
        search: &SearchOptions,
        pool: &mut Pool,
    ) -> Result<Vec<ScoredPath>> {
        let filter = search.filter.as_ref();
        let searches = self.second_hop_retrievers(hops.second_hop, search)?;
        let mut ranks = HashMap::new();
        for (rank, hit) in first.iter().enumerate() {
            ranks.insert(pool.add(hit), rank + 1);
        }
        let titles = self.titles()?;
        // Only titles of documents the ask may read: another tenant's longer title must not
        // hide one's own, nor its documents count as named.
        let allowed = |id: &str| self.first_passage(id, filter).ok().flatten().is_some();
        let mut expansions = Vec::new();
        for (i, hit) in first.iter().take(hops.beam).enumerate() {
            let mut expansion = Expansion {
                first: pool.add(hit),
                ..Expansion::default()
            };
            let title = hit.title.as_deref().unwrap_or("");
            let together = format!("{question} {title} {}", hit.text);
            let mut queries = vec![together];
            for bridge in bridges.get(i).into_iter().flatten() {
                queries.push(format!("{question} {bridge}"));
            }
            for retriever in &searches {
                for query in &queries {
                    let found = retriever.retrieve(query, hops.second_depth + 1)?;
                    let found = found.iter().filter(|h| h.doc_id != hit.doc_id);
                    for (rank, h) in found.take(hops.second_depth).enumerate() {
                        note_rank(&mut expansion.found, pool.add(h), rank + 1);
                    }
                }
            }
            for doc_id in titles.mentions_where(&hit.text, &allowed) {
                if doc_id != hit.doc_id {
                    if let Some(linked) = self.first_passage(doc_id, filter)? {
                        expansion.linked.push(pool.add(&linked));
                    }
                }
            }
            expansions.push(expansion);
        }
        let named_docs = titles.mentions_where(question, &allowed);
        for doc_id in &named_docs {
            if let Some(hit) = self.first_passage(doc_id, filter)? {
                pool.add(&hit);
            }
        }
        let named: Vec<bool> = pool
            .hits
            .iter()
            .map(|h| named_docs.contains(&h.doc_id.as_str()))
            .collect();
        let hop1 = FirstHop {
            ranks: &ranks,
            named: &named,
        };
        Ok(score_paths(&expansions, &hop1, &hops.weights))
    }

    /// The retrievers of the second hop.
    fn second_hop_retrievers(
        &self,
        how: SecondHop,
        asked: &SearchOptions,
    ) -> Result<Vec<Box<dyn Retriever + '_>>> {
        let mut out = Vec::new();
        let mut search = SearchOptions::for_index(&self.index, Mode::Bm25);
        // The ask's filter (and a tenant's own statistics), with the second hop's own ranking.
        search.filter = asked.filter.clone();
        search.statistics_within_filter = asked.statistics_within_filter;
        if how != SecondHop::Dense {
            out.push(self.index.retriever(&search, None)?);
        }
        if how != SecondHop::Lexical {
            search.mode = Mode::Dense;
            out.push(self.index.retriever(&search, self.embedder.as_deref())?);
        }
        Ok(out)
    }

    /// The first passage of a document that passes `filter`, as a hit with no retrieval score.
    fn first_passage(&self, doc_id: &str, filter: Option<&Filter>) -> Result<Option<Hit>> {
        let Some(index) = self.index.as_index() else {
            return self.stored_first_passage(doc_id, filter);
        };
        Ok(first_indexed_passage(index, doc_id, filter))
    }

    /// [`Self::first_passage`] from an external store.
    fn stored_first_passage(&self, doc_id: &str, filter: Option<&Filter>) -> Result<Option<Hit>> {
        let Some(hit) = self.index.passages(doc_id)?.into_iter().next() else {
            return Ok(None);
        };
        let passes = match filter {
            None => true,
            Some(filter) => filter.matches(&FilterInput {
                id: &hit.doc_id,
                title: hit.title.as_deref(),
                date: self.index.document_date(doc_id)?.as_deref(),
                metadata: hit.metadata.as_ref(),
            }),
        };
        Ok(passes.then_some(hit))
    }

    /// Reads each pair as one context (first passage, separator, second) and aggregates the
    /// answers, each mapped back to the passage it lies in. A pair's no-answer score is
    /// weighted by the pair's rank as a passage's is by its rank in one-hop answering.
    fn read_paths(
        &self,
        question: &str,
        top: &[ScoredPath],
        pool: &Pool,
        options: &crate::AskOptions,
    ) -> Result<Response> {
        let contexts: Vec<String> = top
            .iter()
            .map(|p| {
                format!(
                    "{}{PAIR_SEPARATOR}{}",
                    pool.hits[p.first].text, pool.hits[p.second].text
                )
            })
            .collect();
        let queries: Vec<Query> = contexts
            .iter()
            .map(|context| Query { question, context })
            .collect();
        let predictions = self
            .reader
            .answer_batch(&queries, &options.read, &mut |_| {})?;
        let mut readings = Vec::new();
        for (rank, (path, prediction)) in top.iter().zip(predictions).enumerate() {
            let prior = ((rank + 1) as f64).powf(options.rank_prior);
            for (hit, answers) in split_answers(path, pool, prediction.answers) {
                readings.push(PassageReading {
                    date: self.date_of(&hit.doc_id),
                    hit: hit.clone(),
                    answers,
                    null_score: prediction.null_score * prior,
                    na_prob: prediction.na_prob,
                });
            }
        }
        let how = Aggregation {
            rank_prior: 0.0,
            ..aggregation(self, options)
        };
        Ok(self.respond(question, readings, &how))
    }
}

fn aggregation(
    pipeline: &Pipeline<impl DocumentStore>,
    options: &crate::AskOptions,
) -> Aggregation {
    Aggregation {
        vote: options.vote,
        prefer_recent: options.prefer_recent,
        threshold: pipeline.threshold(),
        rank_prior: options.rank_prior,
    }
}

fn check_hop_options(hops: &HopOptions) -> Result<()> {
    if !(1..=2).contains(&hops.hops) {
        return Err(Error::Options(format!(
            "hops must be 1 or 2, not {}",
            hops.hops
        )));
    }
    if hops.beam == 0 || hops.paths == 0 || hops.second_depth == 0 {
        return Err(Error::Options(
            "beam, paths and second-hop depth must be at least 1".into(),
        ));
    }
    Ok(())
}

/// Keeps the best (smallest) rank of a passage found by several searches.
fn note_rank(found: &mut Vec<(usize, usize)>, passage: usize, rank: usize) {
    match found.iter_mut().find(|(p, _)| *p == passage) {
        Some((_, kept)) => *kept = (*kept).min(rank),
        None => found.push((passage, rank)),
    }
}

/// A pair's answers split by the passage they lie in, offsets made relative to it; a span
/// across the separator is dropped.
fn split_answers<'a>(
    path: &ScoredPath,
    pool: &'a Pool,
    answers: Vec<lector_reader::Answer>,
) -> [(&'a Hit, Vec<lector_reader::Answer>); 2] {
    let first = &pool.hits[path.first];
    let second = &pool.hits[path.second];
    let first_len = first.text.chars().count();
    let second_at = first_len + PAIR_SEPARATOR.chars().count();
    let mut in_first = Vec::new();
    let mut in_second = Vec::new();
    for mut answer in answers {
        if answer.end <= first_len {
            in_first.push(answer);
        } else if answer.start >= second_at {
            answer.start -= second_at;
            answer.end -= second_at;
            in_second.push(answer);
        }
    }
    [(first, in_first), (second, in_second)]
}

/// Every passage of the pairs, best pair first, then the rest of the first hop's ranking.
fn ranking(scored: &[ScoredPath], first: &[Hit], pool: &Pool) -> Vec<PassageId> {
    let mut order: Vec<PassageId> = paths::passage_order(scored)
        .into_iter()
        .map(|p| PassageId::of(&pool.hits[p]))
        .collect();
    for hit in first {
        let id = PassageId::of(hit);
        if !order.contains(&id) {
            order.push(id);
        }
    }
    order
}

fn view(path: &ScoredPath, pool: &Pool) -> PathView {
    PathView {
        first: PassageId::of(&pool.hits[path.first]),
        second: PassageId::of(&pool.hits[path.second]),
        score: path.score,
        linked: path.linked,
    }
}

/// Where a sub-answer lies, when it was found.
fn support_of_step(step: &Step) -> Option<Support> {
    (!step.passage.doc_id.is_empty()).then(|| Support {
        passage: step.passage.clone(),
        start: step.start,
        end: step.end,
    })
}

fn support_of(answer: &Candidate) -> Support {
    let e = &answer.evidence;
    Support {
        passage: PassageId {
            doc_id: e.doc_id.clone(),
            title: e.title.clone(),
            passage: e.passage,
        },
        start: e.passage_start,
        end: e.passage_end,
    }
}

/// What a bridge answer rests on: the answer's span, and in the other passage of its pair the
/// mention of the answer passage's title (the bridge), else that passage's start.
fn answer_support(response: &Response, top: &[ScoredPath], pool: &Pool) -> Vec<Support> {
    let Some(answer) = &response.answer else {
        return Vec::new();
    };
    let mut support = vec![support_of(answer)];
    let e = &answer.evidence;
    let in_pair = |p: usize| pool.hits[p].doc_id == e.doc_id && pool.hits[p].passage == e.passage;
    let Some(path) = top.iter().find(|p| in_pair(p.first) || in_pair(p.second)) else {
        return support;
    };
    let (this, other) = match in_pair(path.first) {
        true => (&pool.hits[path.first], &pool.hits[path.second]),
        false => (&pool.hits[path.second], &pool.hits[path.first]),
    };
    let (start, end) = mention(other, this.title.as_deref()).unwrap_or((0, 0));
    support.push(Support {
        passage: PassageId::of(other),
        start,
        end,
    });
    support
}

/// Character offsets of the first case-insensitive mention of `title` (without a trailing
/// parenthetical) in a passage.
fn mention(hit: &Hit, title: Option<&str>) -> Option<(usize, usize)> {
    let words = titles::title_words(title?);
    let first = words.first()?;
    let lower = hit.text.to_lowercase();
    // Lower-casing can change byte lengths; only use the offset when it maps back cleanly.
    if lower.len() != hit.text.len() {
        return None;
    }
    let at = lower.find(first.as_str())?;
    let start = hit.text[..at].chars().count();
    Some((start, start + first.chars().count()))
}

/// The first passage of document `doc_id` of the embedded index, if it passes `filter`.
fn first_indexed_passage(index: &Index, doc_id: &str, filter: Option<&Filter>) -> Option<Hit> {
    let doc = index.document(doc_id)?;
    if !filter.is_none_or(|f| doc.passes(f)) {
        return None;
    }
    let span = *doc.passages.first()?;
    Some(Hit {
        doc_id: doc.id.to_string(),
        title: doc.title.map(str::to_string),
        metadata: doc.metadata.and_then(|m| serde_json::from_str(m).ok()),
        page: None,
        section: None,
        passage: 0,
        span,
        text: doc.text[span.byte_start..span.byte_end].to_string(),
        score: 0.0,
        sources: Vec::new(),
    })
}

/// Evidence pointing at `start..end` (characters) of a passage.
fn evidence(
    pipeline: &Pipeline<impl DocumentStore>,
    hit: &Hit,
    start: usize,
    end: usize,
) -> Evidence {
    Evidence {
        doc_id: hit.doc_id.clone(),
        title: hit.title.clone(),
        date: pipeline.date_of(&hit.doc_id),
        metadata: hit.metadata.clone(),
        page: lector_ingest::page_of(hit.metadata.as_ref(), hit.span.char_start + start),
        section: lector_ingest::section_path(hit.metadata.as_ref(), hit.span.char_start + start),
        rank: 1,
        passage: hit.passage,
        passage_text: hit.text.clone(),
        passage_start: start,
        passage_end: end,
        start: hit.span.char_start + start,
        end: hit.span.char_start + end,
    }
}

/// Content words of a question that neither name an entity nor only shape the question.
fn attribute_words(question: &str, entities: &[&Hit]) -> Vec<String> {
    const SHAPE: &[&str] = &[
        "both", "same", "which", "who", "what", "whom", "whose", "when", "where", "how", "do",
        "does", "did", "has", "have", "had", "can", "could", "will", "would", "should", "also",
        "been", "being", "either", "not", "one", "two", "these", "those", "there", "than",
    ];
    let named: Vec<String> = entities
        .iter()
        .flat_map(|h| titles::title_words(h.title.as_deref().unwrap_or("")))
        .collect();
    titles::words(question)
        .into_iter()
        .filter(|w| !titles::is_stopword(w) && !SHAPE.contains(&w.as_str()))
        .filter(|w| !named.contains(w))
        .collect()
}

/// Share of `attributes` a passage mentions (words compared by their first five letters, a
/// crude stem: "American" matches "America").
fn coverage(attributes: &[String], hit: &Hit) -> f64 {
    if attributes.is_empty() {
        return 1.0;
    }
    let stem = |w: &str| w.chars().take(5).collect::<String>();
    let text: Vec<String> = titles::words(&hit.text).iter().map(|w| stem(w)).collect();
    let found = attributes
        .iter()
        .filter(|a| text.contains(&stem(a)))
        .count();
    found as f64 / attributes.len() as f64
}

/// Token F1 of two answers after SQuAD normalisation.
fn overlap(a: &str, b: &str) -> f64 {
    let (a, b) = (normalized_tokens(a), normalized_tokens(b));
    let common = a.iter().filter(|t| b.contains(t)).count();
    if common == 0 {
        return 0.0;
    }
    let (p, r) = (
        common as f64 / a.len() as f64,
        common as f64 / b.len() as f64,
    );
    2.0 * p * r / (p + r)
}

/// A computed answer (an option or yes/no) as the response's answer.
fn set_answer(response: &mut Response, text: &str, score: f64, evidence: Evidence) {
    let candidate = Candidate {
        text: text.to_string(),
        score,
        reader_score: score,
        log_odds: (score.max(1e-12) / (1.0 - score).max(1e-12)).ln(),
        // A computed answer, not a read span: the confidence map does not apply.
        confidence: None,
        passages: 1,
        evidence,
    };
    response.candidates.insert(0, candidate.clone());
    response.answer = Some(candidate);
    response.abstention = None;
    response.na_prob = 1.0 - score;
}

impl<S: DocumentStore> Pipeline<S> {
    /// Decides a comparison or yes/no question from sub-answers, replacing the read answer.
    #[allow(clippy::too_many_arguments)]
    fn decide(
        &self,
        question: &str,
        analysis: &Analysis,
        top: &[ScoredPath],
        pool: &Pool,
        options: &crate::AskOptions,
        response: &mut Response,
        trace: &mut HopTrace,
    ) -> Result<()> {
        let entities = self.entities(analysis, top, pool, options.search.as_ref())?;
        let [a, b] = match entities.as_slice() {
            [a, b, ..] => [a, b],
            _ => return Ok(()),
        };
        let decision = match (analysis.kind, &analysis.options) {
            (QuestionKind::Comparison, Some(names)) => {
                self.compare(question, analysis, names, [a, b], options)?
            }
            _ => self.yes_no(question, analysis, [a, b], options)?,
        };
        let Some(decision) = decision else {
            return Ok(());
        };
        trace.support = decision
            .steps
            .iter()
            .map(|s| Support {
                passage: s.passage.clone(),
                start: s.start,
                end: s.end,
            })
            .collect();
        trace.chain = decision.steps;
        set_answer(
            response,
            &decision.answer,
            decision.score,
            decision.evidence,
        );
        Ok(())
    }

    /// The two entities compared: the options' passages (by title, else retrieved for the
    /// option), or for yes/no the passages of the best pair.
    fn entities(
        &self,
        analysis: &Analysis,
        top: &[ScoredPath],
        pool: &Pool,
        search: Option<&SearchOptions>,
    ) -> Result<Vec<Hit>> {
        if let Some(names) = &analysis.options {
            let mut out = Vec::new();
            for name in names {
                match self.passage_named(name, pool, search)? {
                    Some(hit) => out.push(hit),
                    None => return Ok(Vec::new()),
                }
            }
            return Ok(out);
        }
        Ok(top
            .first()
            .map(|p| vec![pool.hits[p.first].clone(), pool.hits[p.second].clone()])
            .unwrap_or_default())
    }

    /// The passage about `name`: a document with that title that the ask may read, else the
    /// passage among those seen whose title shares most words with it, else BM25's best for
    /// the name (with the ask's filter and its statistics: a tenant's own).
    fn passage_named(
        &self,
        name: &str,
        pool: &Pool,
        search: Option<&SearchOptions>,
    ) -> Result<Option<Hit>> {
        let filter = search.and_then(|s| s.filter.as_ref());
        for doc_id in self.titles()?.lookup(name) {
            if let Some(hit) = self.first_passage(doc_id, filter)? {
                return Ok(Some(hit));
            }
        }
        let wanted = titles::title_words(name);
        let share = |hit: &Hit| {
            let words = titles::title_words(hit.title.as_deref().unwrap_or(""));
            let common = wanted.iter().filter(|w| words.contains(w)).count();
            common as f64 / wanted.len().max(words.len()).max(1) as f64
        };
        let best = pool
            .hits
            .iter()
            .map(|h| (share(h), h))
            .max_by(|a, b| a.0.total_cmp(&b.0));
        if let Some((s, hit)) = best {
            if s >= 0.5 {
                return Ok(Some(hit.clone()));
            }
        }
        let mut bm25_search = SearchOptions::for_index(&self.index, Mode::Bm25);
        bm25_search.filter = filter.cloned();
        bm25_search.statistics_within_filter = search.is_some_and(|s| s.statistics_within_filter);
        let bm25 = self.index.retriever(&bm25_search, None)?;
        Ok(bm25.retrieve(name, 1)?.into_iter().next())
    }
}

/// A comparison or yes/no answer with its sub-answers.
struct Decision {
    answer: String,
    score: f64,
    evidence: Evidence,
    steps: Vec<Step>,
}

impl<S: DocumentStore> Pipeline<S> {
    /// "..., X or Y?": the option whose value wins (years for temporal orders, numbers the reader
    /// finds for quantities), else the option whose passage says more of what the question asks.
    fn compare(
        &self,
        question: &str,
        analysis: &Analysis,
        names: &[String; 2],
        entities: [&Hit; 2],
        options: &crate::AskOptions,
    ) -> Result<Option<Decision>> {
        let values = match analysis.order {
            Some(order) if order.is_temporal() => {
                let steps = entities
                    .iter()
                    .zip(names)
                    .map(|(hit, name)| year_step(hit, name))
                    .collect::<Vec<_>>();
                Some((order, steps))
            }
            Some(order) => Some((
                order,
                self.number_steps(question, names, entities, options)?,
            )),
            None => None,
        };
        if let Some((order, steps)) = values {
            if let [Some((va, sa)), Some((vb, sb))] = [&steps[0], &steps[1]] {
                if va != vb {
                    let a_wins = match order {
                        Order::Earliest | Order::Least => va < vb,
                        Order::Latest | Order::Most => va > vb,
                    };
                    let (winner, hit, step) = match a_wins {
                        true => (&names[0], entities[0], sa),
                        false => (&names[1], entities[1], sb),
                    };
                    return Ok(Some(Decision {
                        answer: winner.clone(),
                        score: 0.5 + 0.5 * (sa.score.min(sb.score)),
                        evidence: evidence(self, hit, step.start, step.end),
                        steps: vec![sa.clone(), sb.clone()],
                    }));
                }
            }
        }
        Ok(Some(by_coverage(self, question, names, entities)))
    }

    /// The first number the reader finds in each option's passage, asked the question about
    /// that option alone.
    fn number_steps(
        &self,
        question: &str,
        names: &[String; 2],
        entities: [&Hit; 2],
        options: &crate::AskOptions,
    ) -> Result<Vec<Option<(f64, Step)>>> {
        let read = ReadParams {
            top_k: 5,
            ..options.read.clone()
        };
        let mut out = Vec::new();
        for (hit, name) in entities.iter().zip(names) {
            let sub = format!("{} {name}?", question_stem(question, name));
            let prediction = self.read(&sub, std::slice::from_ref(hit), &read)?.remove(0);
            let found = prediction.answers.iter().find_map(|a| {
                let (value, _) = question::numbers(&a.answer).into_iter().next()?;
                Some((
                    value,
                    Step {
                        question: sub.clone(),
                        answer: a.answer.clone(),
                        passage: PassageId::of(hit),
                        start: a.start,
                        end: a.end,
                        score: a.score,
                    },
                ))
            });
            out.push(found);
        }
        Ok(out)
    }

    /// Yes/no: with "same X", the X of each entity asked and compared; otherwise yes when each
    /// entity's passage says most of what the question asks.
    fn yes_no(
        &self,
        question: &str,
        analysis: &Analysis,
        entities: [&Hit; 2],
        options: &crate::AskOptions,
    ) -> Result<Option<Decision>> {
        if let Some(attribute) = &analysis.same {
            let mut steps = Vec::new();
            for hit in entities {
                let name = hit.title.as_deref().unwrap_or(&hit.doc_id);
                let name = titles::title_words(name).join(" ");
                let sub = format!("What is the {attribute} of {name}?");
                let prediction = self.read(&sub, std::slice::from_ref(hit), &options.read)?;
                let Some(a) = prediction
                    .into_iter()
                    .next()
                    .and_then(|p| p.answers.into_iter().next())
                else {
                    return Ok(None);
                };
                steps.push(Step {
                    question: sub,
                    answer: a.answer,
                    passage: PassageId::of(hit),
                    start: a.start,
                    end: a.end,
                    score: a.score,
                });
            }
            let same = overlap(&steps[0].answer, &steps[1].answer) >= 0.5;
            let answer = if same { "yes" } else { "no" };
            let score = 0.5 + 0.5 * steps[0].score.min(steps[1].score);
            let evidence = evidence(self, entities[0], steps[0].start, steps[0].end);
            return Ok(Some(Decision {
                answer: answer.into(),
                score,
                evidence,
                steps,
            }));
        }
        let attributes = attribute_words(question, &entities);
        let steps: Vec<Step> = entities
            .iter()
            .map(|hit| coverage_step(&attributes, hit))
            .collect();
        let both = steps.iter().all(|s| s.score >= 0.5);
        let score = steps.iter().map(|s| s.score).fold(1.0, f64::min);
        Ok(Some(Decision {
            answer: if both { "yes" } else { "no" }.into(),
            score: if both { score } else { 1.0 - score },
            evidence: evidence(self, entities[0], steps[0].start, steps[0].end),
            steps,
        }))
    }
}

/// The question's words before an option: "Which band has more members, Muse or X" -> "Which
/// band has more members".
fn question_stem(question: &str, name: &str) -> String {
    let cut = question.find(name).unwrap_or(question.len());
    question[..cut]
        .trim_end_matches([',', ':', ' '])
        .to_string()
}

/// The first year of an option's passage (where a biography gives the birth and an article
/// the founding or release), as a step.
fn year_step(hit: &Hit, name: &str) -> Option<(f64, Step)> {
    let (year, bytes) = question::years(&hit.text).into_iter().next()?;
    let start = hit.text[..bytes.start].chars().count();
    let end = start + hit.text[bytes.clone()].chars().count();
    Some((
        year,
        Step {
            question: format!("When was {name}?"),
            answer: hit.text[bytes].to_string(),
            passage: PassageId::of(hit),
            start,
            end,
            score: 1.0,
        },
    ))
}

/// How much of what the question asks a passage says, as a step (score: the share).
fn coverage_step(attributes: &[String], hit: &Hit) -> Step {
    let share = coverage(attributes, hit);
    Step {
        question: format!(
            "Does {} say: {}?",
            hit.title.as_deref().unwrap_or(&hit.doc_id),
            attributes.join(" ")
        ),
        answer: format!("{:.0}% of it", share * 100.0),
        passage: PassageId::of(hit),
        start: 0,
        end: 0,
        score: share,
    }
}

/// The option whose passage covers more of the question's attribute words (ties: the first).
fn by_coverage(
    pipeline: &Pipeline<impl DocumentStore>,
    question: &str,
    names: &[String; 2],
    entities: [&Hit; 2],
) -> Decision {
    let attributes = attribute_words(question, &entities);
    let mut attributes = attributes;
    for name in names {
        let words = titles::title_words(name);
        attributes.retain(|w| !words.contains(w));
    }
    let steps: Vec<Step> = entities
        .iter()
        .map(|hit| coverage_step(&attributes, hit))
        .collect();
    let a_wins = steps[0].score >= steps[1].score;
    let (winner, hit) = match a_wins {
        true => (&names[0], entities[0]),
        false => (&names[1], entities[1]),
    };
    let margin = (steps[0].score - steps[1].score).abs();
    Decision {
        answer: winner.clone(),
        score: 0.5 + 0.5 * margin,
        evidence: evidence(pipeline, hit, 0, 0),
        steps,
    }
}
