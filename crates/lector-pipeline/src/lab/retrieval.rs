//! `lector eval retrieval` as a run: ranked documents scored against relevance judgements
//! (trec_eval's metrics) or ranked passages scored by answer containment, each metric with a
//! bootstrap interval; and lector's own retrieval run over a store's queries to produce them
//! ([`run`]).

use crate::ranking::{self, DOCUMENT_DEPTH};
use crate::{Error, RerankConfig, Result, RetrievalConfig};
use lector_eval::report::Report as HtmlReport;
use lector_eval::retrieval::{
    self, AnswerItem, AnswerRecall, LabelledQuery, Qrels, RetrievalEval, Run,
};
use lector_eval::stats::Bootstrap;
use lector_eval::summary::{self, Intervals};
use lector_index::{DocumentStore, Index};
use serde_json::{Map, Value};
use std::path::Path;

/// Retrieval scored: document rankings against qrels, or passages by answer containment.
#[derive(Debug, Clone)]
pub enum Scored {
    /// trec_eval's metrics of a document run.
    Ranking {
        evaluation: RetrievalEval,
        intervals: Intervals,
    },
    /// Answer-containment recall of ranked passages.
    Answers {
        recall: AnswerRecall,
        intervals: Intervals,
    },
}

impl Scored {
    /// A run's rankings against `qrels` at the cutoffs `ks`; queries on only one side are skipped
    /// and named in `warnings`.
    pub fn ranking(
        run: &Run,
        qrels: &Qrels,
        ks: &[usize],
        bootstrap: &Bootstrap,
        warnings: &mut Vec<String>,
    ) -> Result<Scored> {
        let evaluation = retrieval::evaluate(run, qrels, ks);
        if evaluation.num_evaluated() == 0 {
            return Err(Error::Options(
                "no query of the run has judgements in the qrels: nothing to evaluate".into(),
            ));
        }
        for (what, ids) in [
            (
                "run queries have no judgements and are skipped",
                &evaluation.run_qids_without_qrels,
            ),
            (
                "judged queries are absent from the run and are skipped",
                &evaluation.qrels_qids_without_run,
            ),
        ] {
            if let Some(first) = ids.first() {
                warnings.push(format!("{} {what} (first: {first})", ids.len()));
            }
        }
        let intervals = summary::ranking_intervals(&evaluation, bootstrap);
        Ok(Scored::Ranking {
            evaluation,
            intervals,
        })
    }

    /// Answer-containment recall of `items` up to `max_k`.
    pub fn answers(items: &[AnswerItem], max_k: usize, bootstrap: &Bootstrap) -> Result<Scored> {
        if items.is_empty() {
            return Err(Error::Options("no questions to score".into()));
        }
        let recall = retrieval::answer_recall(items, max_k);
        let intervals = summary::answer_recall_intervals(&recall, max_k, bootstrap);
        Ok(Scored::Answers { recall, intervals })
    }

    /// The metrics with their intervals.
    pub fn intervals(&self) -> &Intervals {
        match self {
            Scored::Ranking { intervals, .. } | Scored::Answers { intervals, .. } => intervals,
        }
    }

    /// Queries (rankings) or questions (answers) scored, and which.
    pub fn count(&self) -> (usize, &'static str) {
        match self {
            Scored::Ranking { evaluation, .. } => (evaluation.num_evaluated(), "queries"),
            Scored::Answers { recall, .. } => (recall.queries.len(), "questions"),
        }
    }

    /// As `lector eval retrieval --json` prints it.
    pub fn to_json(&self, confidence: f64) -> Value {
        match self {
            Scored::Ranking {
                evaluation,
                intervals,
            } => summary::intervals_json(
                "queries",
                evaluation.num_evaluated(),
                intervals,
                confidence,
            ),
            Scored::Answers { recall, intervals } => {
                let mut out = Map::new();
                out.insert("questions".into(), recall.queries.len().into());
                out.insert("mrr".into(), recall.mrr.into());
                out.insert("recall_curve".into(), serde_json::json!(recall.recall));
                out.insert("intervals".into(), serde_json::json!(intervals));
                Value::Object(out)
            }
        }
    }

    /// One record per query (`--per-query`).
    pub fn per_query(&self) -> Vec<Value> {
        match self {
            Scored::Ranking { evaluation, .. } => evaluation
                .queries
                .iter()
                .map(|q| serde_json::json!(q))
                .collect(),
            Scored::Answers { recall, .. } => recall
                .queries
                .iter()
                .map(|q| serde_json::json!(q))
                .collect(),
        }
    }

    /// The HTML report titled after `source` (the run, answers or queries file).
    pub fn html(&self, source: &Path, confidence: f64) -> HtmlReport {
        match self {
            Scored::Ranking {
                evaluation,
                intervals,
            } => summary::ranking_report(source, evaluation, intervals, confidence),
            Scored::Answers { recall, intervals } => {
                summary::answer_recall_report(source, recall, intervals, confidence)
            }
        }
    }
}

/// How lector's own retrieval is run and scored.
#[derive(Debug, Clone)]
pub struct Options {
    pub retrieval: RetrievalConfig,
    /// The first `depth` passages reordered by a cross-encoder, the deeper ones after them.
    pub rerank: Option<RerankConfig>,
    /// Documents retrieved per query (against qrels).
    pub depth: usize,
    /// Cutoffs of the ranking metrics.
    pub ks: Vec<usize>,
    /// Deepest k of the answer-recall curve (passages retrieved per question without qrels).
    pub max_k: usize,
    pub bootstrap: Bootstrap,
}

/// What was retrieved: a TREC run of documents, or each question's ranked passages.
#[derive(Debug, Clone)]
pub enum Retrieved {
    Documents(Run),
    Passages(Vec<AnswerItem>),
}

/// A retrieval run's report.
#[derive(Debug, Clone)]
pub struct Report {
    /// The retrieval mode (`+ rerank` when reranked).
    pub label: String,
    /// The mode's name, for a run file's tag.
    pub mode: &'static str,
    /// Milliseconds per query.
    pub latencies: Vec<f64>,
    pub retrieved: Retrieved,
    pub scored: Scored,
    pub warnings: Vec<String>,
}

/// Runs `queries` through `store`'s retrieval as `options` configure it, and scores the result:
/// against `qrels` as document rankings (each document by its best passage), else by whether the
/// ranked passages contain each query's answers. `index` is the store when it is an embedded
/// index (its BM25 ranks documents directly). `on_query` after each query.
pub fn run(
    store: &dyn DocumentStore,
    index: Option<&Index>,
    queries: &[LabelledQuery],
    qrels: Option<&Qrels>,
    options: &Options,
    notify: &dyn Fn(&str),
    on_query: &mut dyn FnMut(),
) -> Result<Report> {
    options.bootstrap.check().map_err(Error::Options)?;
    if options.depth == 0 || options.max_k == 0 {
        return Err(Error::Options("depth and max_k must be at least 1".into()));
    }
    if queries.is_empty() {
        return Err(Error::Options("no queries".into()));
    }
    let (mut search, embedder) = options.retrieval.resolve(store, notify)?;
    let reranker = options
        .rerank
        .as_ref()
        .map(RerankConfig::load)
        .transpose()?;
    let head = reranker
        .as_ref()
        .zip(options.rerank.as_ref().map(|r| r.depth));
    let label = match head {
        Some(_) => format!("{} + rerank", search.mode.name()),
        None => search.mode.name().to_string(),
    };
    let mut warnings = Vec::new();
    let (retrieved, latencies, scored) = match qrels {
        Some(qrels) => {
            // Qrels judge documents, each ranked by its best passage: hybrid fuses rankings as
            // deep as the passages that ranking needs.
            search.fusion_depth = search
                .fusion_depth
                .max(options.depth.saturating_mul(DOCUMENT_DEPTH));
            let retriever = store.retriever(&search, embedder.as_deref())?;
            let (run, latencies) = ranking::document_run(
                index,
                &search,
                retriever.as_ref(),
                head,
                queries,
                options.depth,
                on_query,
            )?;
            let scored =
                Scored::ranking(&run, qrels, &options.ks, &options.bootstrap, &mut warnings)?;
            (Retrieved::Documents(run), latencies, scored)
        }
        None => {
            if queries.iter().all(|q| q.answers.is_empty()) {
                return Err(Error::Options(
                    "the queries carry no answers: give qrels to score document rankings".into(),
                ));
            }
            let retriever = store.retriever(&search, embedder.as_deref())?;
            let (items, latencies) =
                ranking::answer_items(retriever.as_ref(), head, queries, options.max_k, on_query)?;
            let scored = Scored::answers(&items, options.max_k, &options.bootstrap)?;
            (Retrieved::Passages(items), latencies, scored)
        }
    };
    Ok(Report {
        label,
        mode: search.mode.name(),
        latencies,
        retrieved,
        scored,
        warnings,
    })
}
