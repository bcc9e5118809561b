//! lector-index's BM25 against an independent implementation, bm25s (tools/bm25_reference.py),
//! on all of BEIR SciFact and its 300 test queries.
//!
//! Both sides score the same terms: the passages' terms come from lector's analyser (title +
//! passage text, as the index stores them) and bm25s only counts them, so any difference is in
//! N, df, lengths or the formula. lector scores classic BM25 with Lucene's idf, keeping the Okapi
//! factor (k1 + 1) in the numerator (as Lucene did before 8.0); bm25s's "lucene" method is
//! Lucene 8's, which drops that constant. The test compares lector's score with (k1 + 1) times
//! bm25s's.

use lector_index::analysis::Analyzer;
use lector_index::{Bm25Params, Document, Index, IndexSettings, IndexWriter, Retriever};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Passages compared per query.
const K: usize = 100;
/// Relative tolerance on scores: both sides sum the same float64 terms in different orders.
const TOLERANCE: f64 = 1e-9;

/// A passage: its document id and position in the document.
type PassageKey = (String, usize);

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn read_jsonl(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn scifact_documents() -> Vec<Document> {
    let corpus = lector_eval::data::require("beir/scifact/corpus.jsonl");
    read_jsonl(&corpus)
        .into_iter()
        .map(|doc| {
            let mut document =
                Document::new(doc["_id"].as_str().unwrap(), doc["text"].as_str().unwrap());
            document.title = doc["title"]
                .as_str()
                .filter(|t| !t.is_empty())
                .map(String::from);
            document
        })
        .collect()
}

/// The 300 SciFact test queries.
fn scifact_queries() -> Vec<String> {
    let queries = lector_eval::data::require("beir/scifact/queries.jsonl");
    read_jsonl(&queries)
        .iter()
        .map(|q| q["text"].as_str().unwrap().to_string())
        .collect()
}

/// The whole corpus in two commits, then 52 documents removed: df, N and the mean length must
/// count live passages over several segments.
fn build_index(dir: &Path, documents: &[Document]) -> Index {
    let mut writer = IndexWriter::open_or_create(dir, IndexSettings::default()).unwrap();
    let (first, second) = documents.split_at(documents.len() / 2);
    for batch in [first, second] {
        for doc in batch {
            writer.add(doc.clone());
        }
        writer.commit().unwrap();
    }
    for doc in documents.iter().step_by(100) {
        assert!(writer.remove(&doc.id));
    }
    writer.commit().unwrap();
    drop(writer);
    Index::open(dir).unwrap()
}

/// Every live passage with its terms, analysed as the index analyses them (title + passage),
/// in (document id, passage) order: the order lector breaks score ties in.
fn passage_terms(index: &Index) -> (Vec<PassageKey>, Vec<Vec<String>>) {
    let analyzer = Analyzer::new(index.settings().analyzer);
    let mut documents: Vec<_> = index.documents().collect();
    documents.sort_by(|a, b| a.id.cmp(b.id));
    let mut keys = Vec::new();
    let mut terms = Vec::new();
    for doc in documents {
        for (i, span) in doc.passages.iter().enumerate() {
            let mut passage = Vec::new();
            if let Some(title) = doc.title {
                analyzer.analyze_into(title, &mut passage);
            }
            analyzer.analyze_into(&doc.text[span.byte_start..span.byte_end], &mut passage);
            keys.push((doc.id.to_string(), i));
            terms.push(passage);
        }
    }
    (keys, terms)
}

/// The reference interpreter (tools/setup-python.sh, cached after the first run).
fn python() -> PathBuf {
    let out = Command::new("bash")
        .arg(repo_root().join("tools/setup-python.sh"))
        .output()
        .expect("run tools/setup-python.sh");
    assert!(
        out.status.success(),
        "tools/setup-python.sh failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8(out.stdout).unwrap();
    PathBuf::from(stdout.lines().last().unwrap().trim())
}

/// bm25s's best `K` passages per query: (passage number, score).
fn bm25s_rankings(request: &Value) -> Vec<Vec<(usize, f64)>> {
    let mut child = Command::new(python())
        .arg(repo_root().join("tools/bm25_reference.py"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let body = serde_json::to_vec(request).unwrap();
    let mut stdin = child.stdin.take().unwrap();
    // Written from a thread: the child's stdout is drained meanwhile, so neither pipe fills up.
    let writer = std::thread::spawn(move || stdin.write_all(&body));
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap().unwrap();
    assert!(
        out.status.success(),
        "bm25_reference.py failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= TOLERANCE * a.abs().max(b.abs()).max(1.0)
}

/// What one parameter setting measured.
#[derive(Default, Debug)]
struct Agreement {
    ranks: usize,
    same_passage_at_rank: usize,
    max_relative_error: f64,
}

/// Asserts that lector's ranking is bm25s's, score for score, up to the order of tied passages.
fn compare_query(
    query: &str,
    ours: &[(PassageKey, f64)],
    theirs: &[(PassageKey, f64)],
    agreement: &mut Agreement,
) {
    assert_eq!(ours.len(), theirs.len(), "{query:?}: matching passages");
    let reference: HashMap<&PassageKey, f64> = theirs.iter().map(|(k, s)| (k, *s)).collect();
    let last_reference = theirs.last().map_or(0.0, |(_, s)| *s);
    for (rank, ((key, score), (their_key, their_score))) in ours.iter().zip(theirs).enumerate() {
        assert!(
            close(*score, *their_score),
            "{query:?} rank {rank}: lector {score} vs bm25s {their_score}"
        );
        let error = (score - their_score).abs() / their_score.abs().max(1.0);
        agreement.max_relative_error = agreement.max_relative_error.max(error);
        agreement.ranks += 1;
        agreement.same_passage_at_rank += usize::from(key == their_key);
        // A passage missing from the reference's top K can only be one tied with its last.
        match reference.get(key) {
            Some(theirs) => assert!(
                close(*score, *theirs),
                "{query:?}: {key:?} lector {score} vs bm25s {theirs}"
            ),
            None => assert!(
                close(*score, last_reference),
                "{query:?}: {key:?} ({score}) is not in bm25s's top {K}"
            ),
        }
    }
}

fn compare(index: &Index, params: Bm25Params) -> Agreement {
    let (keys, passages) = passage_terms(index);
    let analyzer = Analyzer::new(index.settings().analyzer);
    let queries = scifact_queries();
    assert_eq!(queries.len(), 300);
    let request = json!({
        "k1": params.k1,
        "b": params.b,
        "k": K,
        "passages": passages,
        "queries": queries.iter().map(|q| analyzer.terms(q)).collect::<Vec<_>>(),
    });
    let reference = bm25s_rankings(&request);
    let okapi_factor = params.k1 + 1.0;
    let retriever = index.bm25(params);
    let mut agreement = Agreement::default();
    for (query, theirs) in queries.iter().zip(&reference) {
        let ours: Vec<(PassageKey, f64)> = retriever
            .retrieve(query, K)
            .unwrap()
            .into_iter()
            .map(|hit| ((hit.doc_id, hit.passage), hit.score))
            .collect();
        let theirs: Vec<(PassageKey, f64)> = theirs
            .iter()
            .map(|&(p, score)| (keys[p].clone(), score * okapi_factor))
            .collect();
        compare_query(query, &ours, &theirs, &mut agreement);
    }
    agreement
}

#[test]
fn bm25_matches_bm25s_on_scifact_test_queries() {
    let dir = tempfile::tempdir().unwrap();
    let index = build_index(dir.path(), &scifact_documents());
    assert!(index.stats().segments >= 2, "{:?}", index.stats());
    // The index's defaults, and Anserini's BEIR setting.
    for params in [index.settings().bm25, Bm25Params { k1: 0.9, b: 0.4 }] {
        let agreement = compare(&index, params);
        eprintln!("k1 {} b {}: {agreement:?}", params.k1, params.b);
        // Nearly every query matches at least K passages, so nearly all 300 x K ranks are compared.
        assert!(agreement.ranks >= 300 * K * 9 / 10, "{agreement:?}");
    }
}
