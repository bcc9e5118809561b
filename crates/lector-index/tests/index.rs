//! Storage, commits, locking and search of lector-index on real SciFact and SQuAD slices.

use lector_index::{
    Bm25Params, Document, Error, Index, IndexSettings, IndexWriter, MergePolicy, Retriever, Stemmer,
};
use lector_ingest::{self as ingest, IngestOptions, Item};
use std::path::PathBuf;

fn data(rel: &str) -> PathBuf {
    lector_eval::data::require(rel)
}

/// The first `n` SciFact abstracts as documents (title + text), read by the ingestion code.
fn scifact(n: usize) -> Vec<Document> {
    let walk = ingest::walk(&[data("beir/scifact/corpus.jsonl")]);
    let mut docs = Vec::new();
    ingest::read_file(&walk.files[0], &IngestOptions::default(), &mut |item, _| {
        if let (Item::Document(doc), true) = (item, docs.len() < n) {
            docs.push(doc);
        }
        Ok(())
    })
    .unwrap();
    docs
}

fn ids(index: &Index) -> Vec<String> {
    let mut ids: Vec<String> = index.documents().map(|d| d.id.to_string()).collect();
    ids.sort();
    ids
}

#[test]
fn add_replace_unchanged_remove_persist() {
    let dir = tempfile::tempdir().unwrap();
    let docs = scifact(30);
    let mut writer = IndexWriter::open_or_create(dir.path(), IndexSettings::default()).unwrap();
    for doc in &docs[..20] {
        assert_eq!(writer.add(doc.clone()), lector_index::AddOutcome::Added);
    }
    assert!(
        Index::open(dir.path()).unwrap().is_empty(),
        "staged documents are invisible before commit"
    );
    writer.commit().unwrap();
    assert_eq!(
        writer.add(docs[0].clone()),
        lector_index::AddOutcome::Unchanged
    );
    let mut changed = docs[1].clone();
    changed.text.push_str(" Appended sentence about zebrafish.");
    assert_eq!(writer.add(changed), lector_index::AddOutcome::Replaced);
    assert!(writer.remove(&docs[2].id));
    assert!(!writer.remove("no-such-id"));
    for doc in &docs[20..] {
        writer.add(doc.clone());
    }
    let info = writer.commit().unwrap();
    assert_eq!((info.generation, info.documents, info.segments), (2, 29, 2));
    drop(writer);

    let index = Index::open(dir.path()).unwrap();
    assert_eq!(index.len(), 29);
    assert!(index.document(&docs[2].id).is_none());
    assert!(index
        .document(&docs[1].id)
        .unwrap()
        .text
        .ends_with("zebrafish."));
    let hits = index
        .bm25(Bm25Params::default())
        .retrieve("zebrafish", 5)
        .unwrap();
    assert_eq!(
        hits.len(),
        1,
        "the replaced version is gone from the postings"
    );
    assert_eq!(hits[0].doc_id, docs[1].id);
}

#[test]
fn passages_of_stored_documents_slice_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let mut writer = IndexWriter::open_or_create(dir.path(), IndexSettings::default()).unwrap();
    let mut docs = scifact(200);
    docs.push(Document::new(
        "unicode",
        "Größere Zellen — 細胞は分裂する。 Ça va? Émile’s naïve café 🎉 serves crème brûlée.",
    ));
    for doc in docs {
        writer.add(doc);
    }
    writer.commit().unwrap();
    let index = Index::open(dir.path()).unwrap();
    for doc in index.documents() {
        for span in &doc.passages {
            let by_bytes = &doc.text[span.byte_start..span.byte_end];
            let by_chars: String = doc
                .text
                .chars()
                .skip(span.char_start)
                .take(span.char_end - span.char_start)
                .collect();
            assert_eq!(by_bytes, by_chars, "document {}", doc.id);
        }
    }
    for hit in index
        .bm25(Bm25Params::default())
        .retrieve("café brûlée zellen", 3)
        .unwrap()
    {
        let doc = index.document(&hit.doc_id).unwrap();
        assert_eq!(hit.text, doc.text[hit.span.byte_start..hit.span.byte_end]);
    }
}

#[test]
fn second_writer_gets_a_lock_error_naming_the_lock() {
    let dir = tempfile::tempdir().unwrap();
    let first = IndexWriter::open_or_create(dir.path(), IndexSettings::default()).unwrap();
    let err = IndexWriter::open_or_create(dir.path(), IndexSettings::default())
        .err()
        .unwrap();
    assert!(matches!(err, Error::Locked { .. }));
    assert!(err.to_string().contains("write.lock"), "{err}");
    assert!(Index::open(dir.path()).is_ok(), "readers need no lock");
    drop(first);
    IndexWriter::open(dir.path()).unwrap();
}

#[test]
fn leftovers_of_an_interrupted_commit_are_ignored_then_removed() {
    let dir = tempfile::tempdir().unwrap();
    let mut writer = IndexWriter::open_or_create(dir.path(), IndexSettings::default()).unwrap();
    for doc in scifact(10) {
        writer.add(doc);
    }
    writer.commit().unwrap();
    drop(writer);
    // What a crash between writing files and renaming the manifest leaves behind.
    std::fs::write(dir.path().join("seg-0000000002-0.lseg"), b"half a segment").unwrap();
    std::fs::write(dir.path().join("seg-0000000002-0.lseg.tmp"), b"half").unwrap();
    std::fs::write(dir.path().join("MANIFEST.json.tmp"), b"{\"trunc").unwrap();
    assert_eq!(Index::open(dir.path()).unwrap().len(), 10);
    IndexWriter::open(dir.path()).unwrap();
    let mut names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(
        names,
        ["MANIFEST.json", "seg-0000000001-0.lseg", "write.lock"]
    );
}

#[test]
fn damaged_or_newer_indexes_are_refused_clearly() {
    let dir = tempfile::tempdir().unwrap();
    let mut writer = IndexWriter::open_or_create(dir.path(), IndexSettings::default()).unwrap();
    writer.add(Document::new("a", "some text"));
    writer.commit().unwrap();
    drop(writer);
    let segment = dir.path().join("seg-0000000001-0.lseg");
    let mut bytes = std::fs::read(&segment).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 1;
    std::fs::write(&segment, bytes).unwrap();
    let err = Index::open(dir.path()).err().unwrap().to_string();
    assert!(err.contains("does not match its checksum"), "{err}");
    let manifest = dir.path().join("MANIFEST.json");
    let text = std::fs::read_to_string(&manifest)
        .unwrap()
        .replace("\"version\": 1", "\"version\": 99");
    std::fs::write(&manifest, text).unwrap();
    let err = Index::open(dir.path()).err().unwrap().to_string();
    assert!(err.contains("format version 99 is not supported"), "{err}");

    let other = tempfile::tempdir().unwrap();
    std::fs::write(other.path().join("thesis.txt"), "precious").unwrap();
    let err = IndexWriter::open_or_create(other.path(), IndexSettings::default())
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("is not a lector index"), "{err}");
    assert!(matches!(
        Index::open(other.path()),
        Err(Error::NoIndex { .. })
    ));
}

#[test]
fn many_commits_merge_into_the_same_ranking() {
    let docs = scifact(120);
    let merged_dir = tempfile::tempdir().unwrap();
    let mut writer =
        IndexWriter::open_or_create(merged_dir.path(), IndexSettings::default()).unwrap();
    for chunk in docs.chunks(10) {
        for doc in chunk {
            writer.add(doc.clone());
        }
        writer.remove(&chunk[0].id);
        writer.commit().unwrap();
    }
    assert!(writer.committed().stats().segments <= 8);
    let single_dir = tempfile::tempdir().unwrap();
    let mut single =
        IndexWriter::open_or_create(single_dir.path(), IndexSettings::default()).unwrap();
    for chunk in docs.chunks(10) {
        for doc in &chunk[1..] {
            single.add(doc.clone());
        }
    }
    single.commit().unwrap();
    let (a, b) = (
        Index::open(merged_dir.path()).unwrap(),
        Index::open(single_dir.path()).unwrap(),
    );
    assert_eq!(ids(&a), ids(&b));
    for query in [
        "cancer risk in children",
        "protein folding",
        "vitamin D deficiency",
    ] {
        let ra = a.bm25(Bm25Params::default()).retrieve(query, 10).unwrap();
        let rb = b.bm25(Bm25Params::default()).retrieve(query, 10).unwrap();
        let key =
            |h: &lector_index::Hit| (h.doc_id.clone(), h.passage, (h.score * 1e9).round() as i64);
        assert_eq!(
            ra.iter().map(key).collect::<Vec<_>>(),
            rb.iter().map(key).collect::<Vec<_>>()
        );
    }
}

#[test]
fn k1_and_b_change_scores_and_stemming_is_stored() {
    let dir = tempfile::tempdir().unwrap();
    let mut settings = IndexSettings::default();
    settings.analyzer.stemmer = Stemmer::None;
    let mut writer = IndexWriter::open_or_create(dir.path(), settings).unwrap();
    for doc in scifact(100) {
        writer.add(doc);
    }
    writer.commit().unwrap();
    drop(writer);
    let index = Index::open(dir.path()).unwrap();
    assert_eq!(index.settings().analyzer.stemmer, Stemmer::None);
    let a = index
        .bm25(Bm25Params { k1: 1.2, b: 0.75 })
        .retrieve("cells", 3)
        .unwrap();
    let b = index
        .bm25(Bm25Params { k1: 0.5, b: 0.2 })
        .retrieve("cells", 3)
        .unwrap();
    assert_ne!(a[0].score, b[0].score);
    assert!(index
        .bm25(Bm25Params::default())
        .retrieve("cell", 3)
        .unwrap()
        .iter()
        .all(|h| !h.text.is_empty()));
}

#[test]
fn squad_paragraph_retrieval_finds_the_answer_paragraph() {
    let walk = ingest::walk(&[data("squad/dev-v1.1.json")]);
    let dir = tempfile::tempdir().unwrap();
    let mut writer = IndexWriter::open_or_create(dir.path(), IndexSettings::default()).unwrap();
    ingest::read_file(&walk.files[0], &IngestOptions::default(), &mut |item, _| {
        if let Item::Document(doc) = item {
            if doc.id.starts_with("Super_Bowl_50#") {
                writer.add(doc);
            }
        }
        Ok(())
    })
    .unwrap();
    writer.commit().unwrap();
    let index = writer.committed();
    let hits = index
        .bm25(Bm25Params::default())
        .retrieve("Which NFL team represented the AFC at Super Bowl 50?", 5)
        .unwrap();
    assert!(hits.iter().any(|h| h.text.contains("Denver Broncos")));

    // Passages 27#0 and 51#1 score the same up to the last bits for this question: the ranking
    // must not depend on the order in which a call happens to add up its terms.
    let question = "What is the Super Bowl program called that gives local companies business \
                    opportunities for the Super Bowl?";
    let ranking = || -> Vec<(String, usize)> {
        let hits = index
            .bm25(Bm25Params::default())
            .retrieve(question, 12)
            .unwrap();
        hits.into_iter().map(|h| (h.doc_id, h.passage)).collect()
    };
    let first = ranking();
    for _ in 0..30 {
        assert_eq!(ranking(), first);
    }
}

/// A 50 MB document (SciFact abstracts joined, about 7.5 million words) indexes, commits, reopens
/// and answers queries (about a minute: lector-index is optimised in test builds too).
#[test]
fn fifty_megabyte_document() {
    let abstracts: Vec<String> = scifact(6000).into_iter().map(|d| d.text).collect();
    let mut text = String::new();
    while text.len() < 50 << 20 {
        for a in &abstracts {
            text.push_str(a);
            text.push_str("\n\n");
        }
    }
    let started = std::time::Instant::now();
    let dir = tempfile::tempdir().unwrap();
    let mut writer = IndexWriter::open_or_create(dir.path(), IndexSettings::default()).unwrap();
    writer.add(Document::new("big", text.clone()));
    writer.commit().unwrap();
    drop(writer);
    let built = started.elapsed();
    let index = Index::open(dir.path()).unwrap();
    let opened = started.elapsed() - built;
    let doc = index.document("big").unwrap();
    assert_eq!(doc.text.len(), text.len());
    let last = doc.passages.last().unwrap();
    assert_eq!(last.char_end, text.trim_end().chars().count());
    let hits = index
        .bm25(Bm25Params::default())
        .retrieve("microstructural white matter", 5)
        .unwrap();
    assert_eq!(hits.len(), 5);
    eprintln!(
        "50 MB: {} passages, indexed and committed in {built:.1?}, reopened in {opened:.1?}, {} segment bytes",
        doc.passages.len(),
        index.stats().bytes
    );
}

/// The files in `dir` but the manifest and the lock, sorted.
fn segment_files(dir: &std::path::Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.starts_with("seg-"))
        .collect();
    names.sort();
    names
}

/// The segment files the manifest lists, sorted.
fn listed(dir: &std::path::Path) -> Vec<String> {
    let manifest = std::fs::read_to_string(dir.join("MANIFEST.json")).unwrap();
    let manifest: serde_json::Value = serde_json::from_str(&manifest).unwrap();
    let mut names: Vec<String> = manifest["segments"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["file"].as_str().unwrap().to_string())
        .collect();
    names.sort();
    names
}

#[test]
fn small_commits_merge_in_tiers_and_leave_a_large_segment_alone() {
    let dir = tempfile::tempdir().unwrap();
    let docs = scifact(160);
    let mut writer = IndexWriter::open_or_create(dir.path(), IndexSettings::default()).unwrap();
    writer.set_merge_policy(MergePolicy {
        factor: 4,
        floor_passages: 8,
    });
    for doc in &docs[..120] {
        writer.add(doc.clone());
    }
    writer.commit().unwrap();
    let large = listed(dir.path());
    assert_eq!(large.len(), 1);
    for doc in &docs[120..] {
        writer.add(doc.clone());
        writer.commit().unwrap();
        let segments = listed(dir.path());
        assert!(
            segments.contains(&large[0]),
            "the large segment was rewritten"
        );
        // Below the large segment's tier at most factor - 1 segments wait in each tier.
        assert!(segments.len() <= 1 + 3 * 4, "{} segments", segments.len());
    }
    let segments = listed(dir.path());
    assert!(segments.iter().any(|s| s.contains("-m")), "{segments:?}");
    assert_eq!(segment_files(dir.path()), segments, "no file left over");
    let index = Index::open(dir.path()).unwrap();
    assert_eq!(ids(&index).len(), 160);
    let hits = index
        .bm25(Bm25Params::default())
        .retrieve(&docs[150].text, 1);
    assert_eq!(hits.unwrap()[0].doc_id, docs[150].id);
}

#[test]
fn a_deferred_merge_runs_beside_commits_and_keeps_their_deletions() {
    let dir = tempfile::tempdir().unwrap();
    let docs = scifact(40);
    let mut writer = IndexWriter::open_or_create(dir.path(), IndexSettings::default()).unwrap();
    writer.defer_merges(true);
    writer.set_merge_policy(MergePolicy {
        factor: 4,
        floor_passages: 1_000,
    });
    for chunk in docs[..20].chunks(5) {
        chunk.iter().for_each(|d| _ = writer.add(d.clone()));
        writer.commit().unwrap();
    }
    assert_eq!(listed(dir.path()).len(), 4, "commits do not merge");
    let job = writer.next_merge().expect("four segments of one tier");
    assert_eq!(job.segments(), 4);
    let merged = job.run();

    // While the merge is written but not listed, commits delete, replace and add documents
    // and must not remove its files; no second merge starts.
    assert!(writer.remove(&docs[1].id));
    let mut changed = docs[7].clone();
    changed.text.push_str(" A sentence added later.");
    writer.add(changed.clone());
    writer.add(docs[30].clone());
    writer.commit().unwrap();
    assert!(writer.next_merge().is_none(), "one merge at a time");
    let info = writer
        .finish_merge(merged)
        .unwrap()
        .expect("inputs still there");
    assert_eq!((info.documents, info.segments), (20, 2));

    let index = Index::open(dir.path()).unwrap();
    assert!(
        index.document(&docs[1].id).is_none(),
        "deleted while merging"
    );
    assert_eq!(index.document(&docs[7].id).unwrap().text, changed.text);
    assert!(index.document(&docs[30].id).is_some());
    assert_eq!(segment_files(dir.path()), listed(dir.path()));

    // A merge whose input lost every document meanwhile is dropped, files and all.
    for chunk in docs[31..40].chunks(3) {
        chunk.iter().for_each(|d| _ = writer.add(d.clone()));
        writer.commit().unwrap();
    }
    let job = writer.next_merge().expect("a full tier again");
    for doc in &docs[31..34] {
        writer.remove(&doc.id);
    }
    writer.commit().unwrap();
    assert!(writer.finish_merge(job.run()).unwrap().is_none());
    assert_eq!(segment_files(dir.path()), listed(dir.path()));
    assert_eq!(Index::open(dir.path()).unwrap().len(), 26);
}

/// An index of `docs` at `dir`, committed every `batch` documents.
fn built(dir: &std::path::Path, docs: &[Document], batch: usize) -> Index {
    let mut writer = IndexWriter::open_or_create(dir, IndexSettings::default()).unwrap();
    for chunk in docs.chunks(batch) {
        for doc in chunk {
            writer.add(doc.clone());
        }
        writer.commit().unwrap();
    }
    writer.committed().clone()
}

#[test]
fn shards_added_whole_rank_as_one_index_built_in_one_process() {
    let docs = scifact(90);
    let shards: Vec<tempfile::TempDir> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    for (shard, part) in shards.iter().zip(docs.chunks(30)) {
        built(shard.path(), part, 20);
    }
    let (single_dir, combined_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let single = built(single_dir.path(), &docs, 90);
    let mut writer =
        IndexWriter::open_or_create(combined_dir.path(), IndexSettings::default()).unwrap();
    let sources: Vec<PathBuf> = shards.iter().map(|s| s.path().to_path_buf()).collect();
    let info = writer.add_indexes(&sources).unwrap();
    assert_eq!((info.generation, info.documents), (1, 90));
    drop(writer);
    let combined = Index::open(combined_dir.path()).unwrap();
    assert_eq!(ids(&combined), ids(&single));
    for query in [
        "cancer risk in children",
        "protein folding",
        "vitamin D deficiency",
    ] {
        let a = combined
            .bm25(Bm25Params::default())
            .retrieve(query, 10)
            .unwrap();
        let b = single
            .bm25(Bm25Params::default())
            .retrieve(query, 10)
            .unwrap();
        assert_eq!(a.len(), 10);
        for (x, y) in a.iter().zip(&b) {
            assert_eq!((&x.doc_id, x.passage), (&y.doc_id, y.passage), "{query}");
            assert!(
                (x.score - y.score).abs() <= 1e-6,
                "{query}: {} {}",
                x.score,
                y.score
            );
        }
    }
    // A shard sharing an id with what is already there is refused, naming both, and nothing
    // is added.
    let mut writer = IndexWriter::open(combined_dir.path()).unwrap();
    let err = writer.add_indexes(&sources[..1]).unwrap_err().to_string();
    let shard_ids: Vec<String> = docs[..30].iter().map(|d| format!("`{}`", d.id)).collect();
    assert!(shard_ids.iter().any(|id| err.contains(id)), "{err}");
    for dir in [combined_dir.path(), shards[0].path()] {
        assert!(err.contains(&dir.display().to_string()), "{err}");
    }
    assert_eq!(writer.committed().len(), 90);
    // So is a shard with other settings.
    let other = tempfile::tempdir().unwrap();
    let mut odd = IndexWriter::open_or_create(
        other.path(),
        IndexSettings {
            analyzer: lector_index::AnalyzerConfig {
                stemmer: Stemmer::None,
                ..Default::default()
            },
            ..Default::default()
        },
    )
    .unwrap();
    odd.add(Document {
        id: "odd".into(),
        ..docs[0].clone()
    });
    odd.commit().unwrap();
    drop(odd);
    let err = writer
        .add_indexes(&[other.path().to_path_buf()])
        .unwrap_err()
        .to_string();
    assert!(err.contains("other settings"), "{err}");
}
