//! BM25 and KNN through `FT.SEARCH`, and the hits they give.

use crate::filter::{selection, Selection};
use crate::writer::{document_key, passage_key};
use crate::RedisStore;
use lector_index::analysis::Analyzer;
use lector_index::{
    Bm25Params, Embedder, Error, Filter, Hit, HybridRetriever, Mode, Result, Retriever,
    RetrieverKind, SearchOptions, Source, Span, DEFAULT_EF,
};
use redis::Value;
use std::collections::HashMap;

/// The hash fields a hit is made of (`meta`: only in passages of stores written before the
/// metadata moved to the document's record).
const HIT_FIELDS: [&str; 11] = [
    "doc", "n", "title", "text", "bs", "be", "cs", "ce", "page", "section", "meta",
];

pub(crate) fn retriever<'a>(
    store: &'a RedisStore,
    options: &SearchOptions,
    embedder: Option<&'a dyn Embedder>,
) -> Result<Box<dyn Retriever + 'a>> {
    let selected = match &options.filter {
        Some(filter) => filtered(store, filter, options.statistics_within_filter)?,
        None => Selection::All,
    };
    if options.bm25 != Bm25Params::default() {
        return Err(Error::Config(format!(
            "Redis scores BM25 with k1 = 1.2 and b = 0.75 only; the store {} cannot search with k1 = {}, b = {}",
            store.url(),
            options.bm25.k1,
            options.bm25.b
        )));
    }
    let bm25 = Bm25 {
        store,
        selected: selected.clone(),
    };
    let inner: Box<dyn Retriever + 'a> = match options.mode {
        Mode::Bm25 => Box::new(bm25),
        Mode::Dense => Box::new(Knn::new(store, embedder, options.ef, selected)?),
        Mode::Tfidf => {
            return Err(Error::Config(format!(
                "the Redis store {} has no n-gram postings: TF-IDF search needs an index directory created with --tfidf",
                store.url()
            )))
        }
        Mode::Hybrid => Box::new(HybridRetriever::new(
            Box::new(bm25),
            Box::new(Knn::new(store, embedder, options.ef, selected)?),
            options,
        )),
    };
    Ok(Box::new(WithMetadata { store, inner }))
}

/// A retriever whose final hits get their documents' metadata, kept once per document in its
/// record (`NAME:d:ID` field `meta`): one round trip for the `k` hits returned, not a copy in
/// every passage read by every ranking fused.
struct WithMetadata<'a> {
    store: &'a RedisStore,
    inner: Box<dyn Retriever + 'a>,
}

impl Retriever for WithMetadata<'_> {
    fn kind(&self) -> RetrieverKind {
        self.inner.kind()
    }

    fn retrieve(&self, query: &str, k: usize) -> Result<Vec<Hit>> {
        let mut hits = self.inner.retrieve(query, k)?;
        with_metadata(self.store, &mut hits)?;
        Ok(hits)
    }
}

/// Fills in the metadata of `hits` from their documents' records (hits of a store written
/// before carry it in their passages, and keep it).
fn with_metadata(store: &RedisStore, hits: &mut [Hit]) -> Result<()> {
    let mut ids: Vec<&str> = (hits.iter())
        .filter(|h| h.metadata.is_none())
        .map(|h| h.doc_id.as_str())
        .collect();
    ids.sort_unstable();
    ids.dedup();
    if ids.is_empty() {
        return Ok(());
    }
    let mut pipe = redis::pipe();
    for id in &ids {
        pipe.cmd("HGET")
            .arg(document_key(&store.link, id))
            .arg("meta");
    }
    let found: Vec<Option<String>> = store.link.run(|c| pipe.query(c))?;
    let metadata: HashMap<String, serde_json::Value> = (ids.iter().zip(found))
        .filter_map(|(id, m)| Some((id.to_string(), serde_json::from_str(&m?).ok()?)))
        .collect();
    for hit in hits.iter_mut().filter(|h| h.metadata.is_none()) {
        hit.metadata = metadata.get(&hit.doc_id).cloned();
    }
    Ok(())
}

/// What `filter` selects in `store`: stores created before filters have no tags to match, and
/// Redis keeps one set of BM25 statistics for the whole store.
fn filtered(store: &RedisStore, filter: &Filter, own_statistics: bool) -> Result<Selection> {
    if !store.meta.filterable {
        return Err(Error::Config(format!(
            "the store {} was created before lector could filter Redis stores; add its documents to a new store to filter",
            store.url()
        )));
    }
    if own_statistics {
        return Err(Error::Config(format!(
            "the store {} cannot score BM25 with the statistics of the filtered documents alone (Redis keeps one set per store)",
            store.url()
        )));
    }
    selection(filter).map_err(|e| Error::Config(format!("the store {}: {e}", store.url())))
}

/// BM25 by Redis (`SCORER BM25STD`) over the passages' `body`, among the passages selected.
struct Bm25<'a> {
    store: &'a RedisStore,
    selected: Selection,
}

impl Retriever for Bm25<'_> {
    fn kind(&self) -> RetrieverKind {
        RetrieverKind::Bm25
    }

    fn retrieve(&self, query: &str, k: usize) -> Result<Vec<Hit>> {
        let Some(terms) = any_of_terms(&self.store.analyzer, query) else {
            return Ok(Vec::new());
        };
        let query = match &self.selected {
            Selection::All => format!("@body:({terms})"),
            Selection::Nothing => return Ok(Vec::new()),
            Selection::Query(q) => format!("@body:({terms}) {q}"),
        };
        let mut cmd = redis::cmd("FT.SEARCH");
        cmd.arg(self.store.url().name())
            .arg(query)
            .arg("SCORER")
            .arg("BM25STD")
            .arg("WITHSCORES");
        return_fields(&mut cmd, &[]);
        limit(&mut cmd, k, self.store.link.timeout());
        let reply: Value = self.store.link.run(|c| cmd.query(c))?;
        let rows = rows(&reply, true)?;
        Ok(ranked(rows, RetrieverKind::Bm25, |row| row.score))
    }
}

/// A query's terms, analysed as the embedded index analyses text ([`crate::redis_terms`]), as a
/// RediSearch union (`a|b|c`): a passage matching any of them is scored, as in BM25 (RediSearch
/// intersects bare words). A repeated term stays repeated (it counts twice, as in the embedded
/// index). `None` for a query without terms.
fn any_of_terms(analyzer: &Analyzer, query: &str) -> Option<String> {
    let terms = crate::redis_query_terms(analyzer, query);
    (!terms.is_empty()).then(|| terms.join("|"))
}

/// KNN by Redis's HNSW over the passage vectors (among the passages selected); the score is the
/// cosine similarity.
struct Knn<'a> {
    store: &'a RedisStore,
    embedder: &'a dyn Embedder,
    ef: usize,
    selected: Selection,
}

impl<'a> Knn<'a> {
    fn new(
        store: &'a RedisStore,
        embedder: Option<&'a dyn Embedder>,
        ef: Option<usize>,
        selected: Selection,
    ) -> Result<Self> {
        let Some(meta) = store.meta.dense.as_ref() else {
            return Err(Error::Config(format!(
                "the store {} has no passage vectors; create it with `lector index add --dense --store URL`",
                store.url()
            )));
        };
        let Some(embedder) = embedder else {
            return Err(Error::Config(format!(
                "dense search of {} needs its embedder `{}`",
                store.url(),
                meta.model
            )));
        };
        meta.check(embedder, store.url())?;
        Ok(Knn {
            store,
            embedder,
            // Redis's HNSW has no exact mode: "exact" asks it for its default beam.
            ef: ef.unwrap_or(DEFAULT_EF),
            selected,
        })
    }
}

impl Retriever for Knn<'_> {
    fn kind(&self) -> RetrieverKind {
        RetrieverKind::Dense
    }

    fn retrieve(&self, query: &str, k: usize) -> Result<Vec<Hit>> {
        let among = match &self.selected {
            Selection::All => "*".to_string(),
            Selection::Nothing => return Ok(Vec::new()),
            Selection::Query(q) => format!("({q})"),
        };
        let vector = lector_index::embed_query(self.embedder, query)?;
        let blob = self.store.meta.vector_type.bytes(&vector);
        let mut cmd = redis::cmd("FT.SEARCH");
        cmd.arg(self.store.url().name())
            .arg(format!("{among}=>[KNN $k @vec $v EF_RUNTIME $ef AS dist]"))
            .arg("PARAMS")
            .arg(6)
            .arg("k")
            .arg(k)
            .arg("v")
            .arg(blob)
            .arg("ef")
            .arg(self.ef.max(k))
            .arg("SORTBY")
            .arg("dist");
        return_fields(&mut cmd, &["dist"]);
        limit(&mut cmd, k, self.store.link.timeout());
        let reply: Value = self.store.link.run(|c| cmd.query(c))?;
        let rows = rows(&reply, false)?;
        // Cosine distance is 1 - similarity.
        Ok(ranked(rows, RetrieverKind::Dense, |row| {
            1.0 - row.number("dist").unwrap_or(1.0)
        }))
    }
}

/// The first `k` results, with the query's own time limit at the connection's timeout: RediSearch
/// otherwise stops a query after 500 ms and returns what it found so far as if it were all.
fn limit(cmd: &mut redis::Cmd, k: usize, timeout: std::time::Duration) {
    cmd.arg("LIMIT").arg(0).arg(k);
    cmd.arg("TIMEOUT").arg(timeout.as_millis().max(1) as u64);
    cmd.arg("DIALECT").arg(2);
}

fn return_fields(cmd: &mut redis::Cmd, extra: &[&str]) {
    cmd.arg("RETURN").arg(HIT_FIELDS.len() + extra.len());
    for field in HIT_FIELDS.iter().chain(extra) {
        cmd.arg(*field);
    }
}

/// One result of `FT.SEARCH`: its score (with `WITHSCORES`) and fields.
struct Row {
    score: f64,
    fields: HashMap<String, String>,
}

impl Row {
    fn number(&self, field: &str) -> Option<f64> {
        self.fields.get(field)?.parse().ok()
    }

    fn count(&self, field: &str) -> Option<usize> {
        self.fields.get(field)?.parse().ok()
    }

    fn hit(self, retriever: RetrieverKind, score: f64, rank: usize) -> Result<Hit> {
        let span = (|| {
            Some(Span {
                byte_start: self.count("bs")?,
                byte_end: self.count("be")?,
                char_start: self.count("cs")?,
                char_end: self.count("ce")?,
            })
        })();
        let (Some(span), Some(passage)) = (span, self.count("n")) else {
            return Err(Error::Config(format!(
                "a passage of document {:?} lacks its offsets (written by another program?)",
                self.fields.get("doc")
            )));
        };
        let mut fields = self.fields;
        Ok(Hit {
            doc_id: fields.remove("doc").unwrap_or_default(),
            title: fields.remove("title"),
            metadata: fields
                .get("meta")
                .and_then(|m| serde_json::from_str(m).ok()),
            page: fields.get("page").and_then(|p| p.parse().ok()),
            section: fields.remove("section"),
            passage,
            span,
            text: fields.remove("text").unwrap_or_default(),
            score,
            sources: vec![Source {
                retriever,
                rank,
                score,
            }],
        })
    }
}

/// Hits from rows, scored by `score` and ordered best first (ties by document and passage, as
/// the embedded index orders them).
fn ranked(rows: Vec<Row>, retriever: RetrieverKind, score: impl Fn(&Row) -> f64) -> Vec<Hit> {
    let mut scored: Vec<(f64, Row)> = rows.into_iter().map(|r| (score(&r), r)).collect();
    scored.sort_by(|(a, ra), (b, rb)| {
        b.total_cmp(a)
            .then_with(|| ra.fields.get("doc").cmp(&rb.fields.get("doc")))
            .then_with(|| ra.count("n").cmp(&rb.count("n")))
    });
    scored
        .into_iter()
        .enumerate()
        .filter_map(|(i, (s, row))| row.hit(retriever, s, i + 1).ok())
        .collect()
}

/// The rows of an `FT.SEARCH` reply (RESP2: total, then key, [score,] fields per result).
fn rows(reply: &Value, with_scores: bool) -> Result<Vec<Row>> {
    let malformed = || Error::Config("Redis answered FT.SEARCH with an unexpected reply".into());
    let Value::Array(items) = reply else {
        return Err(malformed());
    };
    let per_row = if with_scores { 3 } else { 2 };
    let mut out = Vec::new();
    for chunk in items.get(1..).unwrap_or_default().chunks(per_row) {
        if chunk.len() != per_row {
            return Err(malformed());
        }
        let score = match with_scores {
            true => text(&chunk[1])
                .and_then(|s| s.parse().ok())
                .ok_or_else(malformed)?,
            false => 0.0,
        };
        let Value::Array(pairs) = &chunk[per_row - 1] else {
            return Err(malformed());
        };
        let fields = pairs
            .chunks(2)
            .filter_map(|kv| Some((text(kv.first()?)?, text(kv.get(1)?)?)))
            .collect();
        out.push(Row { score, fields });
    }
    Ok(out)
}

fn text(value: &Value) -> Option<String> {
    match value {
        Value::BulkString(bytes) => Some(String::from_utf8_lossy(bytes).into_owned()),
        Value::SimpleString(s) => Some(s.clone()),
        Value::Int(i) => Some(i.to_string()),
        Value::Double(d) => Some(d.to_string()),
        _ => None,
    }
}

/// A field of an `FT.INFO` reply (a flat list of names and values).
pub(crate) fn info_field(info: &Value, name: &str) -> Option<String> {
    let Value::Array(items) = info else {
        return None;
    };
    items
        .chunks(2)
        .find(|kv| text(&kv[0]).as_deref() == Some(name))
        .and_then(|kv| kv.get(1).and_then(text))
}

pub(crate) fn document_passages(store: &RedisStore, id: &str) -> Result<Vec<Hit>> {
    let record = document_key(&store.link, id);
    let count: Option<usize> = store
        .link
        .run(|c| redis::cmd("HGET").arg(&record).arg("passages").query(c))?;
    let count = count.unwrap_or(0);
    if count == 0 {
        return Ok(Vec::new());
    }
    let mut pipe = redis::pipe();
    for n in 0..count {
        pipe.cmd("HMGET")
            .arg(passage_key(&store.link, id, n))
            .arg(&HIT_FIELDS[..]);
    }
    let passages: Vec<Vec<Option<String>>> = store.link.run(|c| pipe.query(c))?;
    let mut hits = passages
        .into_iter()
        .map(|values| {
            let fields = (HIT_FIELDS.iter().zip(values))
                .filter_map(|(f, v)| Some((f.to_string(), v?)))
                .collect();
            let mut hit = Row { score: 0.0, fields }.hit(RetrieverKind::Bm25, 0.0, 0)?;
            hit.sources.clear();
            Ok(hit)
        })
        .collect::<Result<Vec<_>>>()?;
    with_metadata(store, &mut hits)?;
    Ok(hits)
}

/// Documents whose titles one round trip fetches.
const TITLES_PER_ROUND_TRIP: usize = 1000;

/// Every document id (`SSCAN` of the document set) with the title its first passage carries.
pub(crate) fn titles(store: &RedisStore) -> Result<Vec<(String, String)>> {
    let docs = store.link.key("docs");
    let mut ids: Vec<String> = Vec::new();
    let mut cursor = 0u64;
    loop {
        let (next, batch): (u64, Vec<String>) = store.link.run(|c| {
            redis::cmd("SSCAN")
                .arg(&docs)
                .arg(cursor)
                .arg("COUNT")
                .arg(TITLES_PER_ROUND_TRIP)
                .query(c)
        })?;
        ids.extend(batch);
        if next == 0 {
            break;
        }
        cursor = next;
    }
    ids.sort();
    ids.dedup(); // SSCAN may return an element twice
    let mut out = Vec::with_capacity(ids.len());
    for chunk in ids.chunks(TITLES_PER_ROUND_TRIP) {
        let mut pipe = redis::pipe();
        for id in chunk {
            pipe.cmd("HGET")
                .arg(passage_key(&store.link, id, 0))
                .arg("title");
        }
        let titles: Vec<Option<String>> = store.link.run(|c| pipe.query(c))?;
        out.extend((chunk.iter().zip(titles)).filter_map(|(id, t)| Some((id.clone(), t?))));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::any_of_terms;
    use lector_index::analysis::{Analyzer, AnalyzerConfig};

    #[test]
    fn queries_become_unions_of_analysed_terms_without_query_syntax() {
        let analyzer = Analyzer::new(AnalyzerConfig::default());
        assert_eq!(
            any_of_terms(
                &analyzer,
                "In the 10th week, what were Peyton's injuries? -(x)|@y 3.5"
            )
            .as_deref(),
            Some("10th|week|what|were|peyton|injuri|x|y|3_5")
        );
        assert_eq!(any_of_terms(&analyzer, "the of"), None);
        assert_eq!(any_of_terms(&analyzer, "?!"), None);
    }
}
