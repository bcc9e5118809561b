//! One contract, two stores: the embedded index and a real Redis with RediSearch hold the same
//! SciFact slice (real abstracts, the real embedder) and must behave alike through
//! `DocumentStore` / `StoreWriter`: adding, replacing, removing, counting, fetching passages by
//! id, and BM25, dense and hybrid search. Where they may differ (Redis's own tokenizer and BM25),
//! the test says so and checks what must still hold.

mod common;

use common::{embedder, RedisServer};
use lector_index::filter::FilterInput;
use lector_index::{
    AddOutcome, Document, DocumentStore, Filter, Hit, Index, IndexSettings, IndexWriter, Mode,
    SearchOptions, StoreWriter,
};
use lector_ingest::{IngestOptions, Item};
use lector_redis::{ConnectOptions, RedisStore, RedisWriter, StoreUrl, VectorType};

/// The first `n` SciFact abstracts.
fn scifact(n: usize) -> Vec<Document> {
    let walk = lector_ingest::walk(&[lector_eval::data::require("beir/scifact/corpus.jsonl")]);
    let mut docs = Vec::new();
    lector_ingest::read_file(&walk.files[0], &IngestOptions::default(), &mut |item, _| {
        if let Item::Document(doc) = item {
            if docs.len() < n {
                docs.push(doc);
            }
        }
        Ok(())
    })
    .unwrap();
    docs
}

/// A place to keep the documents: an index directory or a Redis store.
enum Place {
    Embedded(tempfile::TempDir),
    Redis(StoreUrl),
}

impl Place {
    fn writer(&self) -> Box<dyn StoreWriter> {
        let settings = IndexSettings::default();
        match self {
            Place::Embedded(dir) => {
                let mut writer = IndexWriter::open_or_create(dir.path(), settings).unwrap();
                writer.set_embedder(embedder()).unwrap();
                Box::new(writer)
            }
            Place::Redis(url) => Box::new(
                RedisWriter::open_or_create(
                    url,
                    &ConnectOptions::default(),
                    settings,
                    Some(embedder()),
                    VectorType::Float32,
                )
                .unwrap(),
            ),
        }
    }

    fn store(&self) -> Box<dyn DocumentStore> {
        match self {
            Place::Embedded(dir) => Box::new(Index::open(dir.path()).unwrap()),
            Place::Redis(url) => {
                Box::new(RedisStore::open(url, &ConnectOptions::default()).unwrap())
            }
        }
    }
}

fn search(store: &dyn DocumentStore, mode: Mode, query: &str, k: usize) -> Vec<Hit> {
    let e = embedder();
    let options = SearchOptions::for_index(store, mode);
    let retriever = store.retriever(&options, Some(e.as_ref())).unwrap();
    retriever.retrieve(query, k).unwrap()
}

/// Filters the two stores must answer alike (the documents' metadata: [`with_metadata`]).
const FILTERS: [&str; 6] = [
    r#"group == "x""#,
    r#"group in ["x", "z"] and not nested.open == true"#,
    r#"tags == "t1" or year == 2016.0"#,
    "year != 2017",
    r#"date == "2021-03-04" and tags == "all""#,
    r#"year == "2016""#, // a string never equals the number 2016: nothing
];

/// SciFact abstracts given metadata to filter on: a year, a group, a list of tags, a nested flag,
/// and a date on every fourth.
fn with_metadata(docs: Vec<Document>) -> Vec<Document> {
    let groups = ["x", "y", "z"];
    (docs.into_iter().enumerate())
        .map(|(i, mut doc)| {
            doc.metadata = Some(serde_json::json!({
                "year": 2015 + i % 5,
                "group": groups[i % 3],
                "tags": [format!("t{}", i % 4), "all"],
                "nested": {"open": i % 2 == 0},
            }));
            doc.date = (i % 4 == 0).then(|| "2021-03-04".to_string());
            doc
        })
        .collect()
}

/// Every filter of [`FILTERS`] by dense and BM25 search: each hit passes it (as lector decides);
/// the dense top 10 in order and every passage found, sorted.
fn filtered_searches(store: &dyn DocumentStore, docs: &[Document]) -> Vec<Vec<String>> {
    let e = embedder();
    let mut seen = Vec::new();
    for text in FILTERS {
        let filter = Filter::parse(text).unwrap();
        for mode in [Mode::Dense, Mode::Bm25] {
            let mut options = SearchOptions::for_index(store, mode);
            options.filter = Some(filter.clone());
            let retriever = store.retriever(&options, Some(e.as_ref())).unwrap();
            let hits = retriever.retrieve("cell protein expression", 1000).unwrap();
            for hit in &hits {
                let doc = docs.iter().find(|d| d.id == hit.doc_id).unwrap();
                // Every hit carries its document's metadata (kept once per document in Redis).
                assert_eq!(hit.metadata, doc.metadata, "{}", hit.doc_id);
                let input = FilterInput {
                    id: &doc.id,
                    title: doc.title.as_deref(),
                    date: doc.date.as_deref(),
                    metadata: doc.metadata.as_ref(),
                };
                assert!(filter.matches(&input), "{text}: {}", hit.doc_id);
            }
            let mut found: Vec<String> = hits
                .iter()
                .map(|h| format!("{}#{}", h.doc_id, h.passage))
                .collect();
            if mode == Mode::Dense {
                seen.push(found.iter().take(10).cloned().collect());
            }
            found.sort();
            seen.push(found);
        }
    }
    seen
}

/// What a store gave back, for comparing the two.
struct Seen {
    passages: Vec<Vec<Hit>>,
    dense: Vec<Vec<(String, usize, f64)>>,
    bm25_top10: Vec<Vec<String>>,
    filtered: Vec<Vec<String>>,
}

/// The contract, on one place: every check here must hold for every store.
fn contract(place: &Place, docs: &[Document]) -> Seen {
    let mut writer = place.writer();
    for doc in docs {
        assert_eq!(writer.add(doc.clone()).unwrap(), AddOutcome::Added);
    }
    assert_eq!(writer.pending(), docs.len());
    let mut embedded = 0;
    let info = writer.commit(&mut |done, _| embedded = done).unwrap();
    assert_eq!(info.documents, docs.len());
    assert_eq!(writer.committed_documents(), docs.len());
    let store = place.store();
    let counts = store.counts().unwrap();
    assert_eq!(counts.documents, docs.len());
    assert_eq!(counts.passages, embedded, "one vector per passage");
    let generation = store.generation().unwrap();
    assert!(generation >= 1);
    assert_eq!(store.dense_meta().unwrap().dim, 384);

    // Fetch by id: every passage, in order, slicing the document text.
    let passages: Vec<Vec<Hit>> = docs
        .iter()
        .map(|d| store.passages(&d.id).unwrap())
        .collect();
    for (doc, hits) in docs.iter().zip(&passages) {
        assert!(!hits.is_empty(), "{}", doc.id);
        for (n, hit) in hits.iter().enumerate() {
            assert_eq!((hit.doc_id.as_str(), hit.passage), (doc.id.as_str(), n));
            assert_eq!(hit.text, doc.text[hit.span.byte_start..hit.span.byte_end]);
            assert_eq!(hit.title, doc.title);
        }
    }
    assert!(store.passages("no-such-document").unwrap().is_empty());

    // Searches: a document's title finds it first by BM25 and hybrid; a passage's own text
    // finds that passage first by embedding, with cosine similarity ~1.
    let mut dense = Vec::new();
    let mut bm25_top10 = Vec::new();
    for doc in docs.iter().step_by(7).take(8) {
        let title = doc.title.as_deref().unwrap();
        let bm25 = search(&*store, Mode::Bm25, title, 10);
        assert_eq!(bm25[0].doc_id, doc.id, "BM25 for {title:?}");
        bm25_top10.push(
            bm25.iter()
                .map(|h| format!("{}#{}", h.doc_id, h.passage))
                .collect(),
        );
        let hybrid = search(&*store, Mode::Hybrid, title, 5);
        assert_eq!(hybrid[0].doc_id, doc.id, "hybrid for {title:?}");
        assert!(hybrid[0].sources.len() == 2, "both retrievers found it");
        let first = &store.passages(&doc.id).unwrap()[0];
        let own = lector_index::docstore::embedding_text(doc.title.as_deref(), &first.text);
        let nearest = search(&*store, Mode::Dense, &own, 10);
        assert_eq!(
            (nearest[0].doc_id.as_str(), nearest[0].passage),
            (doc.id.as_str(), 0)
        );
        assert!(
            (nearest[0].score - 1.0).abs() < 1e-3,
            "{}",
            nearest[0].score
        );
        dense.push(
            nearest
                .iter()
                .map(|h| (h.doc_id.clone(), h.passage, h.score))
                .collect(),
        );
    }

    let filtered = filtered_searches(&*store, docs);

    // Replace, keep unchanged, remove; then a new writer sees the same documents as unchanged.
    drop(writer);
    let mut writer = place.writer();
    let mut changed = docs[0].clone();
    changed.text = "Zebrafish larvae regenerate their fins within days.".into();
    changed.date = Some("2024-05-01".into());
    assert_eq!(writer.add(changed.clone()).unwrap(), AddOutcome::Replaced);
    assert_eq!(writer.add(docs[1].clone()).unwrap(), AddOutcome::Unchanged);
    assert!(writer.remove(&docs[2].id).unwrap());
    assert!(!writer.remove("no-such-document").unwrap());
    writer.commit(&mut |_, _| {}).unwrap();
    let store = place.store();
    assert!(store.generation().unwrap() > generation);
    assert_eq!(store.counts().unwrap().documents, docs.len() - 1);
    let replaced = store.passages(&docs[0].id).unwrap();
    assert_eq!(replaced.len(), 1, "the old passages are gone");
    assert_eq!(replaced[0].text, changed.text);
    assert_eq!(
        store.document_date(&docs[0].id).unwrap().as_deref(),
        Some("2024-05-01")
    );
    let found = search(&*store, Mode::Bm25, "zebrafish fins regenerate", 3);
    assert_eq!(found[0].doc_id, docs[0].id);
    assert!(store.passages(&docs[2].id).unwrap().is_empty());
    let title = docs[2].title.as_deref().unwrap();
    assert!(search(&*store, Mode::Hybrid, title, 20)
        .iter()
        .all(|h| h.doc_id != docs[2].id));
    drop(writer);
    let mut again = place.writer();
    for doc in &docs[3..] {
        assert_eq!(again.add(doc.clone()).unwrap(), AddOutcome::Unchanged);
    }
    assert_eq!(again.pending(), 0);
    Seen {
        passages,
        dense,
        bm25_top10,
        filtered,
    }
}

#[test]
fn the_embedded_index_and_redis_keep_the_same_contract() {
    let docs = with_metadata(scifact(60));
    let server = RedisServer::start(&[]);
    let embedded = contract(&Place::Embedded(tempfile::tempdir().unwrap()), &docs);
    let redis = contract(
        &Place::Redis(StoreUrl::parse(&server.url("contract")).unwrap()),
        &docs,
    );

    // The same passages, offsets, pages and metadata.
    assert_eq!(embedded.passages, redis.passages);
    // The same vectors: the same nearest passages with the same similarities (Redis's HNSW over
    // a few hundred vectors is exact in practice).
    for (e, r) in embedded.dense.iter().zip(&redis.dense) {
        assert_eq!(e.len(), r.len());
        for (a, b) in e.iter().zip(r) {
            assert_eq!((&a.0, a.1), (&b.0, b.1));
            assert!((a.2 - b.2).abs() < 1e-4, "{} vs {}", a.2, b.2);
        }
    }
    // Filters select the same passages; dense search ranks them alike.
    assert_eq!(embedded.filtered, redis.filtered);
    assert!(embedded.filtered.iter().filter(|f| f.is_empty()).count() >= 3);
    assert!(embedded.filtered.iter().filter(|f| !f.is_empty()).count() >= 10);
    // BM25 differs by tokenizer, stopwords and stemmer: report how much the top 10 agree.
    let overlap: f64 = (embedded.bm25_top10.iter().zip(&redis.bm25_top10))
        .map(|(e, r)| e.iter().filter(|h| r.contains(h)).count() as f64 / e.len() as f64)
        .sum::<f64>()
        / embedded.bm25_top10.len() as f64;
    eprintln!("BM25 top-10 overlap, embedded vs Redis: {overlap:.2}");
}

#[test]
fn redis_refuses_what_it_would_do_differently() {
    let server = RedisServer::start(&[]);
    let url = StoreUrl::parse(&server.url("refusals")).unwrap();
    let mut writer =
        common::bm25_writer(&url, &ConnectOptions::default(), IndexSettings::default()).unwrap();
    writer.add(scifact(1).remove(0)).unwrap();
    writer.commit(&mut |_, _| {}).unwrap();
    let store = RedisStore::open(&url, &ConnectOptions::default()).unwrap();
    let mut options = SearchOptions::for_index(&store, Mode::Bm25);
    options.filter = Some(Filter::parse("year >= 2020").unwrap());
    let err = store.retriever(&options, None).err().unwrap().to_string();
    assert!(err.contains("range conditions"), "{err}");
    options.filter = Some(Filter::parse(r#"tenant == "acme""#).unwrap());
    options.statistics_within_filter = true;
    let err = store.retriever(&options, None).err().unwrap().to_string();
    assert!(
        err.contains("statistics of the filtered documents"),
        "{err}"
    );
    let mut options = SearchOptions::for_index(&store, Mode::Bm25);
    options.bm25.k1 = 0.9;
    let err = store.retriever(&options, None).err().unwrap().to_string();
    assert!(err.contains("k1 = 1.2 and b = 0.75 only"), "{err}");
    let options = SearchOptions::for_index(&store, Mode::Dense);
    let err = store.retriever(&options, None).err().unwrap().to_string();
    assert!(err.contains("has no passage vectors"), "{err}");
    let mut settings = IndexSettings::default();
    settings.bm25.b = 0.4;
    let other = StoreUrl::parse(&server.url("other")).unwrap();
    let err = common::bm25_writer(&other, &ConnectOptions::default(), settings)
        .err()
        .unwrap()
        .to_string();
    assert!(
        err.contains("cannot be created with k1 = 1.2, b = 0.4"),
        "{err}"
    );
    let missing = StoreUrl::parse(&server.url("missing")).unwrap();
    let err = RedisStore::open(&missing, &ConnectOptions::default())
        .err()
        .unwrap()
        .to_string();
    assert!(
        err.contains("no lector store at") && err.contains("--store"),
        "{err}"
    );
}

#[test]
fn float16_vectors_find_the_same_nearest_passages() {
    let docs = scifact(40);
    let server = RedisServer::start(&[]);
    let mut stores = Vec::new();
    for (name, vector_type) in [("f32", VectorType::Float32), ("f16", VectorType::Float16)] {
        let url = StoreUrl::parse(&server.url(name)).unwrap();
        let connect = ConnectOptions::default();
        let settings = IndexSettings::default();
        let mut writer =
            RedisWriter::open_or_create(&url, &connect, settings, Some(embedder()), vector_type)
                .unwrap();
        for doc in &docs {
            writer.add(doc.clone()).unwrap();
        }
        writer.commit(&mut |_, _| {}).unwrap();
        stores.push(RedisStore::open(&url, &connect).unwrap());
    }
    assert_eq!(stores[1].vector_type(), VectorType::Float16);
    for doc in docs.iter().step_by(5) {
        let title = doc.title.as_deref().unwrap();
        let [full, half] = [&stores[0], &stores[1]].map(|s| search(s, Mode::Dense, title, 5));
        let ids = |hits: &[Hit]| -> Vec<(String, usize)> {
            hits.iter().map(|h| (h.doc_id.clone(), h.passage)).collect()
        };
        assert_eq!(ids(&full)[0], ids(&half)[0], "{title}");
        for (a, b) in full.iter().zip(&half) {
            if (a.doc_id.as_str(), a.passage) == (b.doc_id.as_str(), b.passage) {
                assert!(
                    (a.score - b.score).abs() < 2e-3,
                    "{} vs {}",
                    a.score,
                    b.score
                );
            }
        }
    }
}
