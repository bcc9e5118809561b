//! lector's own retrieval run over a question set, for `lector eval retrieval --index`: document
//! rankings for qrels, or ranked passages for answer containment, with per-query latency.

use crate::config::Reranker;
use crate::Result;
use lector_eval::retrieval::{AnswerItem, LabelledQuery, Passage, Run};
use lector_index::{rank_documents, DocumentHit, Hit, Index, Mode, Retriever, SearchOptions};
use std::time::Instant;

/// Passages retrieved per document wanted when documents are ranked by their best passage.
pub const DOCUMENT_DEPTH: usize = 3;

/// A reranker with the number of passages it reorders.
pub type RerankHead<'a> = Option<(&'a Reranker, usize)>;

/// Per-query retrieval times in milliseconds (embedding the query included).
pub type Latencies = Vec<f64>;

/// Ranks `depth` documents per query by their best passage (MaxP) and returns the run. BM25 over
/// an embedded `index` scores every matching passage; other stores and the other modes rank [`DOCUMENT_DEPTH`] passages per document
/// wanted, and hybrid fuses rankings that deep. With a reranker, documents are scored by the
/// reciprocal of their rank: reranker and retriever scores are not on one scale.
pub fn document_run(
    index: Option<&Index>,
    options: &SearchOptions,
    retriever: &dyn Retriever,
    reranker: RerankHead,
    queries: &[LabelledQuery],
    depth: usize,
    on_query: &mut dyn FnMut(),
) -> Result<(Run, Latencies)> {
    let passages = depth.saturating_mul(DOCUMENT_DEPTH);
    let mut rankings = Vec::with_capacity(queries.len());
    let mut latencies = Vec::with_capacity(queries.len());
    let bm25 = index.map(|index| index.bm25(options.bm25).filtered(options.filter.as_ref()));
    for q in queries {
        let started = Instant::now();
        let ranking = match reranker {
            Some(_) => by_position(&rank_documents(
                &ranked(retriever, reranker, &q.text, passages)?,
                depth,
            )),
            None if options.mode == Mode::Bm25 && bm25.is_some() => {
                scored(bm25.as_ref().expect("checked").documents(&q.text, depth))
            }
            None => scored(rank_documents(
                &retriever.retrieve(&q.text, passages)?,
                depth,
            )),
        };
        latencies.push(elapsed_ms(started));
        rankings.push((q.id.clone(), ranking));
        on_query();
    }
    Ok((Run::from_rankings(rankings), latencies))
}

/// The best `depth` passages per query, for answer containment.
pub fn answer_items(
    retriever: &dyn Retriever,
    reranker: RerankHead,
    queries: &[LabelledQuery],
    depth: usize,
    on_query: &mut dyn FnMut(),
) -> Result<(Vec<AnswerItem>, Latencies)> {
    let mut latencies = Vec::with_capacity(queries.len());
    let items = queries
        .iter()
        .map(|q| {
            let started = Instant::now();
            let hits = ranked(retriever, reranker, &q.text, depth)?;
            latencies.push(elapsed_ms(started));
            on_query();
            let passages = hits
                .into_iter()
                .map(|h| Passage {
                    id: format!("{}#p{}", h.doc_id, h.passage),
                    text: h.text,
                })
                .collect();
            Ok(AnswerItem {
                qid: q.id.clone(),
                answers: q.answers.clone(),
                passages,
            })
        })
        .collect::<Result<_>>()?;
    Ok((items, latencies))
}

/// The best `n` passages for `query`, the first ones reordered by the reranker if there is one.
fn ranked(
    retriever: &dyn Retriever,
    reranker: RerankHead,
    query: &str,
    n: usize,
) -> Result<Vec<Hit>> {
    let Some((reranker, depth)) = reranker else {
        return Ok(retriever.retrieve(query, n)?);
    };
    let hits = retriever.retrieve(query, n.max(depth))?;
    let mut hits = reranker.rerank_head(depth, query, hits)?;
    hits.truncate(n);
    Ok(hits)
}

fn scored(documents: Vec<DocumentHit>) -> Vec<(String, f64)> {
    documents.into_iter().map(|h| (h.doc_id, h.score)).collect()
}

/// Documents scored by the reciprocal of their rank.
fn by_position(documents: &[DocumentHit]) -> Vec<(String, f64)> {
    documents
        .iter()
        .enumerate()
        .map(|(i, h)| (h.doc_id.clone(), 1.0 / (i + 1) as f64))
        .collect()
}

fn elapsed_ms(started: Instant) -> f64 {
    started.elapsed().as_secs_f64() * 1000.0
}
