//! TF-IDF over hashed n-grams (`Mode::Tfidf`, DrQA's retriever) on a real index directory.

use lector_index::{
    Document, Index, IndexSettings, IndexWriter, Mode, RetrieverKind, SearchOptions,
};

fn index(dir: &std::path::Path, tfidf: bool, docs: &[(&str, &str)]) -> Index {
    let settings = IndexSettings {
        tfidf,
        ..Default::default()
    };
    let mut writer = IndexWriter::open_or_create(dir, settings).unwrap();
    for (id, text) in docs {
        writer.add(Document::new(*id, *text));
    }
    writer.commit().unwrap();
    Index::open(dir).unwrap()
}

fn search(index: &Index, query: &str) -> Vec<(String, f64)> {
    let options = SearchOptions::for_index(index, Mode::Tfidf);
    let retriever = index.retriever(&options, None).unwrap();
    assert_eq!(retriever.kind(), RetrieverKind::Tfidf);
    let hits = retriever.retrieve(query, 10).unwrap();
    hits.into_iter().map(|h| (h.doc_id, h.score)).collect()
}

const DOCS: [(&str, &str); 8] = [
    ("ny", "New York is a city. York is old."),
    ("york", "York is a city in England. York is old."),
    ("new", "A new city was built."),
    ("paris", "Paris is a city in France."),
    ("berlin", "Berlin is a city in Germany."),
    ("rome", "Rome is a city in Italy."),
    ("oslo", "Oslo is a city in Norway."),
    ("lima", "Lima is a city in Peru."),
];

#[test]
fn scores_are_drqas_dot_product_of_log_tf_idf_weights() {
    let dir = tempfile::tempdir().unwrap();
    let index = index(dir.path(), true, &DOCS);
    let hits = search(&index, "new york");
    // Query n-grams: "new", "york", "new york" (N = 8); "city", in every passage, would weigh 0
    // (DrQA clips negative idf).
    let idf = |df: f64| ((8.0 - df + 0.5) / (df + 0.5_f64)).ln().max(0.0);
    let (new, york, bigram) = (idf(2.0), idf(2.0), idf(1.0));
    let ln2 = 2f64.ln();
    // The query has each once: weight ln(2) · idf; a passage's weight ln(1 + tf) · idf.
    let ny = ln2 * new * ln2 * new + ln2 * york * 3f64.ln() * york + ln2 * bigram * ln2 * bigram;
    let ids: Vec<&str> = hits.iter().map(|(id, _)| id.as_str()).collect();
    assert_eq!(ids, ["ny", "york", "new"], "{hits:?}");
    assert!((hits[0].1 - ny).abs() < 1e-12, "{} vs {ny}", hits[0].1);
    assert!((hits[1].1 - ln2 * york * 3f64.ln() * york).abs() < 1e-12);
    assert!((hits[2].1 - ln2 * new * ln2 * new).abs() < 1e-12);
    // Stopwords and punctuation alone match nothing.
    assert!(search(&index, "the of , ?").is_empty());
    // Counting n-grams did not change BM25 (passage lengths and terms are the analyser's).
    let plain = tempfile::tempdir().unwrap();
    let without = self::index(plain.path(), false, &DOCS);
    assert_eq!(index.stats().terms, without.stats().terms);
}

#[test]
fn removed_documents_leave_the_statistics_and_old_indexes_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    index(dir.path(), true, &DOCS);
    let mut writer = IndexWriter::open_or_create(dir.path(), IndexSettings::default()).unwrap();
    // An existing index keeps its settings: still n-grams.
    assert!(writer.settings().tfidf);
    writer.remove("ny");
    writer.add(Document::new("later", "New York again, new and new."));
    writer.commit().unwrap();
    let index = Index::open(dir.path()).unwrap();
    let hits = search(&index, "new york");
    assert_eq!(hits[0].0, "later");
    assert!(hits.iter().all(|(id, _)| id != "ny"));

    let plain = tempfile::tempdir().unwrap();
    let without = self::index(plain.path(), false, &DOCS);
    let options = SearchOptions::for_index(&without, Mode::Tfidf);
    let err = without.retriever(&options, None).err().unwrap().to_string();
    assert!(err.contains("has no n-gram postings for TF-IDF"), "{err}");
    assert_eq!("tfidf".parse::<Mode>().unwrap(), Mode::Tfidf);
    assert!(!Mode::Tfidf.is_dense());
}
