//! TREC run and qrels files and the `trec_eval`-compatible ranking metrics.
//!
//! # Ids with whitespace
//!
//! Run and qrels files are whitespace-separated columns, so an id such as a HotpotQA title
//! (`Super Bowl 50`) cannot be written as it is. [`Run::write_trec`] percent-encodes, in query and
//! document ids, exactly the bytes that would break a column: the ASCII whitespace of C's
//! `isspace` (space, `\t`, `\n`, `\v`, `\f`, `\r`) and `%` itself, as `%` and two upper-case hex
//! digits (`%20`, `%09`, `%0A`, `%0B`, `%0C`, `%0D`, `%25`). [`parse_run`] and [`parse_qrels`]
//! decode every `%XX` (either case) in ids, so a run written by lector reads back to the same ids
//! and matches qrels written either raw (ids without whitespace) or escaped. A `%` that does not
//! start a valid escape (`%G1`, `%2` at the end) is kept literally, and so is a whole id whose
//! escapes would decode to invalid UTF-8. An id without `%` is never changed.

use crate::error::{Error, Result};
use crate::input::read_text;
use std::borrow::Cow;
use std::cmp::Ordering;
use std::collections::{BTreeMap, HashMap};
use std::io::{self, Write};
use std::path::Path;

/// The default cutoffs of [`evaluate`]: 1, 3, 5, 10, 20 and 100.
pub const DEFAULT_KS: [usize; 6] = [1, 3, 5, 10, 20, 100];

/// Relevance judgements: query id -> document id -> relevance (an integer; relevant when >= 1).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Qrels {
    queries: BTreeMap<String, BTreeMap<String, i64>>,
}

impl Qrels {
    /// An empty set of judgements.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records the relevance of `docid` for `qid`, returning the previous value if there was one.
    pub fn insert(
        &mut self,
        qid: impl Into<String>,
        docid: impl Into<String>,
        rel: i64,
    ) -> Option<i64> {
        self.queries
            .entry(qid.into())
            .or_default()
            .insert(docid.into(), rel)
    }

    /// The judgements of one query.
    pub fn get(&self, qid: &str) -> Option<&BTreeMap<String, i64>> {
        self.queries.get(qid)
    }

    /// The judged query ids, in byte order.
    pub fn qids(&self) -> impl Iterator<Item = &str> {
        self.queries.keys().map(String::as_str)
    }

    /// The number of judged queries.
    pub fn len(&self) -> usize {
        self.queries.len()
    }

    /// Whether no query is judged.
    pub fn is_empty(&self) -> bool {
        self.queries.is_empty()
    }
}

/// A run: query id -> ranked `(document id, score)` list, kept in `trec_eval` order
/// (score descending, ties by document id descending; see the [module docs](super)).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Run {
    queries: BTreeMap<String, Vec<(String, f64)>>,
}

impl Run {
    /// An empty run.
    pub fn new() -> Self {
        Self::default()
    }

    /// Builds a run from in-memory rankings (see [`Run::insert`]).
    pub fn from_rankings<I, Q, D>(rankings: I) -> Self
    where
        I: IntoIterator<Item = (Q, Vec<(D, f64)>)>,
        Q: Into<String>,
        D: Into<String>,
    {
        let mut run = Self::new();
        for (qid, ranking) in rankings {
            run.insert(
                qid,
                ranking.into_iter().map(|(d, s)| (d.into(), s)).collect(),
            );
        }
        run
    }

    /// Sets the ranking of `qid`, replacing any previous one. The order of `ranking` does not
    /// matter: documents are re-sorted by score as `trec_eval` does. A document id listed twice
    /// keeps its first occurrence. An empty ranking is kept: the query is then evaluated with all
    /// metrics 0 (as `pytrec_eval` does for an empty score dict). NaN scores sort last.
    pub fn insert(&mut self, qid: impl Into<String>, ranking: Vec<(String, f64)>) {
        let mut seen = std::collections::HashSet::with_capacity(ranking.len());
        let mut ranking: Vec<(String, f64)> = ranking
            .into_iter()
            .filter(|(docid, _)| seen.insert(docid.clone()))
            .collect();
        ranking.sort_by(trec_order);
        self.queries.insert(qid.into(), ranking);
    }

    /// The ranking of one query, in `trec_eval` order.
    pub fn ranking(&self, qid: &str) -> Option<&[(String, f64)]> {
        self.queries.get(qid).map(Vec::as_slice)
    }

    /// The query ids of the run, in byte order.
    pub fn qids(&self) -> impl Iterator<Item = &str> {
        self.queries.keys().map(String::as_str)
    }

    /// The number of queries in the run.
    pub fn len(&self) -> usize {
        self.queries.len()
    }

    /// Whether the run has no query.
    pub fn is_empty(&self) -> bool {
        self.queries.is_empty()
    }

    /// Writes the run as a TREC run file (`qid Q0 docid rank score tag`), queries in byte order,
    /// documents in `trec_eval` order with ranks from 1. In ids, ASCII whitespace (C's `isspace`)
    /// and `%` are percent-encoded (`Super%20Bowl%2050`, `100%25`), which [`parse_run`] decodes.
    /// Scores are written in the shortest form that reads back to the same `f64`. Empty rankings
    /// produce no line.
    pub fn write_trec<W: Write>(&self, tag: &str, writer: &mut W) -> io::Result<()> {
        for (qid, ranking) in &self.queries {
            let qid = encode_id(qid);
            for (i, (docid, score)) in ranking.iter().enumerate() {
                let docid = encode_id(docid);
                writeln!(writer, "{qid} Q0 {docid} {} {score} {tag}", i + 1)?;
            }
        }
        Ok(())
    }
}

/// Whether byte `b` would split or end a column: C's `isspace` set, or the escape character.
fn needs_escape(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\x0B' | b'\x0C' | b'\r' | b'%')
}

/// `id` with the bytes of [`needs_escape`] written as `%XX` (upper-case hex).
fn encode_id(id: &str) -> Cow<'_, str> {
    if !id.bytes().any(needs_escape) {
        return Cow::Borrowed(id);
    }
    let mut out = String::with_capacity(id.len() + 8);
    for c in id.chars() {
        match u8::try_from(c) {
            Ok(b) if needs_escape(b) => out.push_str(&format!("%{b:02X}")),
            _ => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// `id` with every valid `%XX` escape decoded; malformed escapes stay as written, and the whole
/// id does when the decoded bytes are not UTF-8.
fn decode_id(id: &str) -> Cow<'_, str> {
    if !id.contains('%') {
        return Cow::Borrowed(id);
    }
    let bytes = id.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if let Some(decoded) = escaped_byte(&bytes[i..]) {
            out.push(decoded);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_or(Cow::Borrowed(id), Cow::Owned)
}

/// The byte of a `%XX` escape at the start of `bytes`, if there is one.
fn escaped_byte(bytes: &[u8]) -> Option<u8> {
    let [b'%', high, low, ..] = *bytes else {
        return None;
    };
    let digit = |b: u8| char::from(b).to_digit(16);
    Some((digit(high)? * 16 + digit(low)?) as u8)
}

/// `trec_eval`'s `comp_sim_docno`: higher score first, then document id in descending byte order.
fn trec_order(a: &(String, f64), b: &(String, f64)) -> Ordering {
    let by_score = match (a.1.is_nan(), b.1.is_nan()) {
        (true, true) => Ordering::Equal,
        (true, false) => Ordering::Greater,
        (false, true) => Ordering::Less,
        (false, false) => b.1.partial_cmp(&a.1).unwrap_or(Ordering::Equal),
    };
    by_score.then_with(|| b.0.as_bytes().cmp(a.0.as_bytes()))
}

/// Reads a TREC run file (`qid Q0 docid rank score tag`, whitespace separated).
///
/// Blank lines are skipped. Every other line must have exactly 6 columns and a numeric score
/// (NaN is refused); the `Q0`, rank and tag columns are ignored, like `trec_eval`. A document
/// listed twice for one query is an error, as in `trec_eval` and `pytrec_eval.parse_run`.
/// `%XX` escapes in ids are decoded (either case); a `%` that starts no valid escape (`%G1`, `%2`
/// at the end) is kept literally, and so is an id whose escapes would decode to invalid UTF-8.
pub fn read_run(path: &Path) -> Result<Run> {
    parse_run(path, &read_text(path)?)
}

/// Parses the text of a TREC run file; `path` is only used in error messages.
pub fn parse_run(path: &Path, text: &str) -> Result<Run> {
    let mut queries: BTreeMap<String, Vec<(String, f64)>> = BTreeMap::new();
    let mut first_seen: HashMap<(String, String), usize> = HashMap::new();
    for (index, line) in text.lines().enumerate() {
        let line_no = index + 1;
        let fields = fields(line);
        if fields.is_empty() {
            continue;
        }
        if fields.len() != 6 {
            return Err(parse_error(
                path,
                line_no,
                1,
                format!(
                    "expected 6 whitespace-separated columns (qid Q0 docid rank score tag), found {}",
                    fields.len()
                ),
            ));
        }
        let (qid, docid, (score_col, score_text)) = (fields[0].1, fields[2].1, fields[4]);
        let score: f64 = score_text.parse().map_err(|_| {
            parse_error(
                path,
                line_no,
                column(line, score_col),
                format!("score {score_text:?} is not a number"),
            )
        })?;
        if score.is_nan() {
            return Err(parse_error(
                path,
                line_no,
                column(line, score_col),
                "score is NaN".into(),
            ));
        }
        let (qid, docid) = (decode_id(qid), decode_id(docid));
        if let Some(first) = first_seen.insert((qid.to_string(), docid.to_string()), line_no) {
            return Err(parse_error(
                path,
                line_no,
                column(line, fields[2].0),
                format!(
                    "document {docid:?} listed twice for query {qid:?} (first on line {first})"
                ),
            ));
        }
        queries
            .entry(qid.to_string())
            .or_default()
            .push((docid.to_string(), score));
    }
    for ranking in queries.values_mut() {
        ranking.sort_by(trec_order);
    }
    Ok(Run { queries })
}

/// Reads a qrels file in either supported format, detected from the first non-blank line:
///
/// - TREC: 4 whitespace-separated columns `qid iter docid rel` (`iter` ignored);
/// - BEIR: 3 tab-separated columns `query-id corpus-id score`, with an optional header line
///   (a first line whose third column is not an integer).
///
/// Relevance must be an integer. A `(qid, docid)` pair judged twice is an error, as in
/// `trec_eval` and `pytrec_eval.parse_qrel`. `%XX` escapes in ids are decoded as in
/// [`read_run`], so qrels match a run whether their ids are written raw or escaped.
pub fn read_qrels(path: &Path) -> Result<Qrels> {
    parse_qrels(path, &read_text(path)?)
}

/// Parses the text of a qrels file (see [`read_qrels`]); `path` is only used in error messages.
pub fn parse_qrels(path: &Path, text: &str) -> Result<Qrels> {
    #[derive(Clone, Copy, PartialEq)]
    enum Format {
        Trec,
        Beir,
    }
    let mut format = None;
    let mut qrels = Qrels::new();
    let mut first_seen: HashMap<(String, String), usize> = HashMap::new();
    for (index, line) in text.lines().enumerate() {
        let line_no = index + 1;
        if line.trim().is_empty() {
            continue;
        }
        let tab_fields = tab_fields(line);
        let format = match format {
            Some(f) => f,
            None => {
                let detected = if tab_fields.len() == 3 {
                    Format::Beir
                } else if fields(line).len() == 4 {
                    Format::Trec
                } else {
                    return Err(parse_error(
                        path,
                        line_no,
                        1,
                        "unrecognised qrels format: expected 4 whitespace-separated columns \
                         (TREC: qid iter docid rel) or 3 tab-separated columns \
                         (BEIR: query-id corpus-id score)"
                            .into(),
                    ));
                };
                format = Some(detected);
                if detected == Format::Beir && tab_fields[2].1.parse::<i64>().is_err() {
                    continue; // header line
                }
                detected
            }
        };
        let (qid, (doc_col, docid), (rel_col, rel_text)) = match format {
            Format::Trec => {
                let f = fields(line);
                if f.len() != 4 {
                    return Err(parse_error(
                        path,
                        line_no,
                        1,
                        format!(
                            "expected 4 whitespace-separated columns (qid iter docid rel), found {}",
                            f.len()
                        ),
                    ));
                }
                (f[0].1, f[2], f[3])
            }
            Format::Beir => {
                if tab_fields.len() != 3 {
                    return Err(parse_error(
                        path,
                        line_no,
                        1,
                        format!(
                            "expected 3 tab-separated columns (query-id corpus-id score), found {}",
                            tab_fields.len()
                        ),
                    ));
                }
                if let Some(&(col, _)) = tab_fields.iter().find(|(_, f)| f.is_empty()) {
                    return Err(parse_error(
                        path,
                        line_no,
                        column(line, col),
                        "empty column".into(),
                    ));
                }
                (tab_fields[0].1, tab_fields[1], tab_fields[2])
            }
        };
        let rel: i64 = rel_text.parse().map_err(|_| {
            parse_error(
                path,
                line_no,
                column(line, rel_col),
                format!("relevance {rel_text:?} is not an integer"),
            )
        })?;
        let (qid, docid) = (decode_id(qid), decode_id(docid));
        if let Some(first) = first_seen.insert((qid.to_string(), docid.to_string()), line_no) {
            return Err(parse_error(
                path,
                line_no,
                column(line, doc_col),
                format!(
                    "document {docid:?} judged twice for query {qid:?} (first on line {first})"
                ),
            ));
        }
        qrels.insert(qid, docid, rel);
    }
    Ok(qrels)
}

/// Whitespace-separated fields with their byte offsets (ASCII whitespace, like C's `isspace`).
fn fields(line: &str) -> Vec<(usize, &str)> {
    let mut out = Vec::new();
    let mut start = None;
    for (i, c) in line.char_indices() {
        if c.is_ascii_whitespace() {
            if let Some(s) = start.take() {
                out.push((s, &line[s..i]));
            }
        } else if start.is_none() {
            start = Some(i);
        }
    }
    if let Some(s) = start {
        out.push((s, &line[s..]));
    }
    out
}

/// Tab-separated fields, trimmed of surrounding spaces, with the byte offset of each field.
fn tab_fields(line: &str) -> Vec<(usize, &str)> {
    let mut out = Vec::new();
    let mut offset = 0;
    for part in line.split('\t') {
        let lead = part.len() - part.trim_start().len();
        out.push((offset + lead, part.trim()));
        offset += part.len() + 1;
    }
    out
}

/// 1-based character column of byte offset `byte` in `line`.
fn column(line: &str, byte: usize) -> usize {
    line[..byte].chars().count() + 1
}

fn parse_error(path: &Path, line: usize, column: usize, message: String) -> Error {
    Error::Parse {
        path: path.to_path_buf(),
        line,
        column,
        message,
    }
}

/// The metric values of one evaluated query, keyed by metric name (see the [module docs](super)).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct QueryMetrics {
    /// The query id.
    pub qid: String,
    /// Metric name -> value.
    pub values: BTreeMap<String, f64>,
}

/// The result of [`evaluate`].
///
/// Evaluated queries are those present in both the run and the qrels, like `pytrec_eval`
/// (and `trec_eval` without `-c`). Run queries without judgements are skipped; judged queries
/// absent from the run are skipped too (they are not counted as zeros). Judged queries without
/// any relevant document are evaluated, with every metric 0.
#[derive(Debug, Clone, PartialEq)]
pub struct RetrievalEval {
    /// The cutoffs, sorted ascending, without duplicates or 0.
    pub ks: Vec<usize>,
    /// The metric names in report order: `ndcg@k`, `recall@k`, `p@k`, `mrr@k` for each k, then
    /// `map` and `mrr`.
    pub metric_names: Vec<String>,
    /// Per-query values of the evaluated queries, in query-id byte order.
    pub queries: Vec<QueryMetrics>,
    /// Run queries with no judgement in the qrels (not evaluated).
    pub run_qids_without_qrels: Vec<String>,
    /// Judged queries absent from the run (not evaluated).
    pub qrels_qids_without_run: Vec<String>,
}

impl RetrievalEval {
    /// The number of evaluated queries.
    pub fn num_evaluated(&self) -> usize {
        self.queries.len()
    }

    /// The per-query values of one metric, in the order of [`RetrievalEval::queries`]
    /// (empty for an unknown metric name).
    pub fn values(&self, metric: &str) -> Vec<f64> {
        self.queries
            .iter()
            .filter_map(|q| q.values.get(metric).copied())
            .collect()
    }

    /// The mean of each metric over the evaluated queries (the `trec_eval` summary line).
    /// Empty when no query was evaluated.
    pub fn means(&self) -> BTreeMap<String, f64> {
        if self.queries.is_empty() {
            return BTreeMap::new();
        }
        let n = self.queries.len() as f64;
        self.metric_names
            .iter()
            .map(|name| {
                let sum: f64 = self.values(name).iter().sum();
                (name.clone(), sum / n)
            })
            .collect()
    }
}

/// Sorted cutoffs without duplicates or zeros.
fn clean_ks(ks: &[usize]) -> Vec<usize> {
    let mut ks: Vec<usize> = ks.iter().copied().filter(|&k| k > 0).collect();
    ks.sort_unstable();
    ks.dedup();
    ks
}

/// The metric names [`evaluate`] reports for these cutoffs, in report order.
pub fn metric_names(ks: &[usize]) -> Vec<String> {
    let ks = clean_ks(ks);
    let mut names = Vec::with_capacity(4 * ks.len() + 2);
    for family in ["ndcg", "recall", "p", "mrr"] {
        names.extend(ks.iter().map(|k| format!("{family}@{k}")));
    }
    names.push("map".into());
    names.push("mrr".into());
    names
}

/// Evaluates `run` against `qrels` at the cutoffs `ks` (sorted and deduplicated; 0 is dropped),
/// with the same values as `pytrec_eval` / `trec_eval` 9.x at relevance level 1.
pub fn evaluate(run: &Run, qrels: &Qrels, ks: &[usize]) -> RetrievalEval {
    let ks = clean_ks(ks);
    let mut queries = Vec::new();
    let mut run_qids_without_qrels = Vec::new();
    for (qid, ranking) in &run.queries {
        match qrels.get(qid) {
            Some(judged) => queries.push(QueryMetrics {
                qid: qid.clone(),
                values: query_metrics(ranking, judged, &ks),
            }),
            None => run_qids_without_qrels.push(qid.clone()),
        }
    }
    let qrels_qids_without_run = qrels
        .qids()
        .filter(|qid| !run.queries.contains_key(*qid))
        .map(str::to_string)
        .collect();
    RetrievalEval {
        metric_names: metric_names(&ks),
        ks,
        queries,
        run_qids_without_qrels,
        qrels_qids_without_run,
    }
}

/// All metrics of one query; `ranking` is in `trec_eval` order.
fn query_metrics(
    ranking: &[(String, f64)],
    judged: &BTreeMap<String, i64>,
    ks: &[usize],
) -> BTreeMap<String, f64> {
    // Unjudged documents are non-relevant with gain 0 (trec_eval's RELVALUE_NONPOOL).
    let rels: Vec<i64> = ranking
        .iter()
        .map(|(docid, _)| judged.get(docid).copied().unwrap_or(0))
        .collect();
    let num_rel = judged.values().filter(|&&r| r >= 1).count();
    let mut ideal: Vec<i64> = judged.values().copied().filter(|&r| r > 0).collect();
    ideal.sort_unstable_by(|a, b| b.cmp(a));

    // Prefix sums, accumulated in rank order like trec_eval.
    let dcg = discounted_prefix(&rels);
    let idcg = discounted_prefix(&ideal);
    let mut hits = Vec::with_capacity(rels.len() + 1);
    hits.push(0usize);
    for &r in &rels {
        hits.push(hits.last().copied().unwrap_or(0) + usize::from(r >= 1));
    }
    let first_rel = rels.iter().position(|&r| r >= 1);

    let mut values = BTreeMap::new();
    for &k in ks {
        let hits_k = hits[k.min(rels.len())] as f64;
        let dcg_k = dcg[k.min(rels.len())];
        let idcg_k = idcg[k.min(ideal.len())];
        let ndcg = if idcg_k > 0.0 { dcg_k / idcg_k } else { dcg_k };
        let recall = if num_rel == 0 {
            0.0
        } else {
            hits_k / num_rel as f64
        };
        let mrr = match first_rel {
            Some(i) if i < k => 1.0 / (i + 1) as f64,
            _ => 0.0,
        };
        values.insert(format!("ndcg@{k}"), ndcg);
        values.insert(format!("recall@{k}"), recall);
        values.insert(format!("p@{k}"), hits_k / k as f64);
        values.insert(format!("mrr@{k}"), mrr);
    }

    let mut precision_sum = 0.0;
    let mut rel_so_far = 0usize;
    for (i, &r) in rels.iter().enumerate() {
        if r >= 1 {
            rel_so_far += 1;
            precision_sum += rel_so_far as f64 / (i + 1) as f64;
        }
    }
    let map = if rel_so_far > 0 {
        precision_sum / num_rel as f64
    } else {
        0.0
    };
    values.insert("map".into(), map);
    values.insert(
        "mrr".into(),
        first_rel.map_or(0.0, |i| 1.0 / (i + 1) as f64),
    );
    values
}

/// `out[n]` = DCG of the first `n` gains (positive gains only, discount `log2(rank + 1)`).
fn discounted_prefix(gains: &[i64]) -> Vec<f64> {
    let mut out = Vec::with_capacity(gains.len() + 1);
    let mut sum = 0.0;
    out.push(sum);
    for (i, &g) in gains.iter().enumerate() {
        if g > 0 {
            sum += g as f64 / ((i + 2) as f64).log2();
        }
        out.push(sum);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p() -> &'static Path {
        Path::new("mem.txt")
    }

    #[test]
    fn ties_follow_trec_eval() {
        let run = Run::from_rankings([(
            "q",
            vec![
                ("a", 1.0),
                ("B", 1.0),
                ("c", 1.0),
                ("aa", 1.0),
                ("b", 1.0),
                ("z", 0.5),
            ],
        )]);
        let order: Vec<&str> = run
            .ranking("q")
            .unwrap()
            .iter()
            .map(|(d, _)| d.as_str())
            .collect();
        assert_eq!(order, ["c", "b", "aa", "a", "B", "z"]);
    }

    #[test]
    fn hand_computed_metrics() {
        let mut qrels = Qrels::new();
        qrels.insert("q1", "a", 1);
        qrels.insert("q1", "b", 2);
        qrels.insert("q1", "c", 0);
        qrels.insert("q2", "x", 1);
        let run = Run::from_rankings([
            (
                "q1",
                vec![("a", 1.0), ("b", 1.0), ("c", 1.0), ("B", 1.0), ("aa", 1.0)],
            ),
            ("q3", vec![("x", 1.0)]),
        ]);
        let eval = evaluate(&run, &qrels, &[2, 1, 2, 0]);
        assert_eq!(eval.ks, [1, 2]);
        assert_eq!(eval.run_qids_without_qrels, ["q3"]);
        assert_eq!(eval.qrels_qids_without_run, ["q2"]);
        let v = &eval.queries[0].values;
        // Order c(0) b(2) aa a(1) B.
        let ideal2 = 2.0 + 1.0 / 3f64.log2();
        assert!((v["ndcg@2"] - (2.0 / 3f64.log2()) / ideal2).abs() < 1e-12);
        assert_eq!(v["p@2"], 0.5);
        assert_eq!(v["recall@1"], 0.0);
        assert_eq!(v["mrr@1"], 0.0);
        assert_eq!(v["mrr@2"], 0.5);
        assert_eq!(v["map"], 0.5);
        assert_eq!(v["mrr"], 0.5);
        assert_eq!(eval.metric_names.len(), 10);
        assert_eq!(eval.means()["map"], 0.5);
    }

    #[test]
    fn run_round_trip_and_errors() {
        let run = Run::from_rankings([("q", vec![("d1", 0.1 + 0.2), ("d2", -1e-300)])]);
        let mut out = Vec::new();
        run.write_trec("tag", &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert_eq!(parse_run(p(), &text).unwrap(), run);

        let err = parse_run(p(), "q Q0 d 1 1.0 t\nq Q0 e 2 x t\n").unwrap_err();
        assert_eq!(err.to_string(), "mem.txt:2:10: score \"x\" is not a number");
        let err = parse_run(p(), "q Q0 d 1 1.0\n").unwrap_err();
        assert!(
            err.to_string().starts_with("mem.txt:1:1: expected 6"),
            "{err}"
        );
        let err = parse_run(p(), "q Q0 d 1 1 t\n\nq Q0 d 2 0 t\n").unwrap_err();
        assert!(
            err.to_string()
                .contains("mem.txt:3:6: document \"d\" listed twice"),
            "{err}"
        );
    }

    #[test]
    fn ids_with_whitespace_round_trip_escaped() {
        let ids = [
            "Super Bowl 50",
            "a\tb",
            "100% cotton",
            "plain",
            "line\r\nend\x0b\x0c",
        ];
        let run = Run::from_rankings(
            ids.iter()
                .map(|&qid| (qid, ids.iter().map(|&d| (d, 1.0)).collect::<Vec<_>>())),
        );
        let mut out = Vec::new();
        run.write_trec("tag", &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(text.contains("Super%20Bowl%2050 Q0 a%09b "), "{text}");
        assert!(text.contains(" 100%25%20cotton "), "{text}");
        assert!(text.contains(" line%0D%0Aend%0B%0C "), "{text}");
        assert_eq!(text.lines().count(), ids.len() * ids.len());
        let read = parse_run(p(), &text).unwrap();
        assert_eq!(read, run);
        assert_eq!(read.ranking("a\tb").unwrap().len(), ids.len());
    }

    #[test]
    fn escapes_decode_and_malformed_ones_stay_literal() {
        assert_eq!(encode_id("plain"), "plain");
        assert_eq!(decode_id("plain"), "plain");
        assert_eq!(decode_id("Caf%c3%A9%20x"), "Café x");
        assert_eq!(decode_id("%G1 %2"), "%G1 %2");
        assert_eq!(decode_id("50%"), "50%");
        assert_eq!(decode_id("%41%"), "A%");
        // Escapes that would make invalid UTF-8 leave the whole id as written.
        assert_eq!(decode_id("%FF%20"), "%FF%20");
        for id in ["100% cotton", "%25", "%G1 %2 \u{b}", ""] {
            assert_eq!(decode_id(&encode_id(id)), id);
        }
    }

    #[test]
    fn qrels_ids_are_decoded() {
        let qrels = parse_qrels(p(), "q%201 0 Super%20Bowl%2050 1\nq%201 0 plain 2\n").unwrap();
        let judged = qrels.get("q 1").unwrap();
        assert_eq!(judged["Super Bowl 50"], 1);
        assert_eq!(judged["plain"], 2);
        let beir = parse_qrels(p(), "q\tSuper Bowl 50\t1\nq\t100%25\t1\n").unwrap();
        assert_eq!(
            beir.get("q").unwrap().keys().collect::<Vec<_>>(),
            ["100%", "Super Bowl 50"]
        );
        // The same document raw and escaped is one document.
        let err = parse_qrels(p(), "q\tSuper Bowl 50\t1\nq\tSuper%20Bowl 50\t0\n").unwrap_err();
        assert!(err.to_string().contains("judged twice"), "{err}");
    }

    #[test]
    fn qrels_formats() {
        let beir = parse_qrels(p(), "query-id\tcorpus-id\tscore\n1\tdoc 1\t2\n2\td\t0\n").unwrap();
        assert_eq!(beir.get("1").unwrap()["doc 1"], 2);
        assert_eq!(beir.len(), 2);
        let trec = parse_qrels(p(), "\n1 0 d1 1\n1 0 d2 -1\n").unwrap();
        assert_eq!(trec.get("1").unwrap()["d2"], -1);
        let err = parse_qrels(p(), "1 0 d1 1\n1 0 d2 1.5\n").unwrap_err();
        assert_eq!(
            err.to_string(),
            "mem.txt:2:8: relevance \"1.5\" is not an integer"
        );
        let err = parse_qrels(p(), "q\td\n").unwrap_err();
        assert!(
            err.to_string().contains("unrecognised qrels format"),
            "{err}"
        );
        let err = parse_qrels(p(), "h\th\th\n1\td\n").unwrap_err();
        assert!(
            err.to_string().starts_with("mem.txt:2:1: expected 3 tab"),
            "{err}"
        );
    }
}
