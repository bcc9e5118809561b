//! Ingestion into a real index: a refused line or file costs nothing already stored, and an index
//! error raised while adding stops ingestion with that error.

use lector_index::{AddOptions, Index, IndexSettings, IndexWriter};
use lector_ingest::{self as ingest, IngestOptions};
use std::path::Path;

fn write_jsonl(path: &Path, ids_and_texts: &[(&str, String)]) {
    let lines: Vec<String> = ids_and_texts
        .iter()
        .map(|(id, text)| serde_json::json!({"id": id, "text": text}).to_string())
        .collect();
    std::fs::write(path, lines.join("\n")).unwrap();
}

/// Adds the documents of `path` as `lector index add` does without `--strict` (invalid items
/// counted and skipped), then commits everything; the invalid count.
fn add_skipping_invalid(writer: &mut IndexWriter, path: &Path, options: &IngestOptions) -> usize {
    let add = AddOptions {
        ingest: *options,
        commit_every: usize::MAX,
        strict: false,
        fields: Default::default(),
    };
    let walk = ingest::walk(&[path.to_path_buf()]);
    let counts = lector_index::add_files(writer, walk, &add, &mut |_| {
        std::ops::ControlFlow::Continue(())
    })
    .unwrap();
    writer.commit().unwrap();
    counts.invalid
}

fn ids(dir: &Path) -> Vec<String> {
    let index = Index::open(dir).unwrap();
    let mut ids: Vec<String> = index.documents().map(|d| d.id.to_string()).collect();
    ids.sort();
    ids
}

#[test]
fn an_overlong_line_loses_nothing_already_stored() {
    let data = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let options = IngestOptions {
        max_document_bytes: 2000,
    };
    let mut writer = IndexWriter::open_or_create(dir.path(), IndexSettings::default()).unwrap();
    let first = data.path().join("first.jsonl");
    write_jsonl(
        &first,
        &[("a", "alpha text".into()), ("b", "beta text".into())],
    );
    assert_eq!(add_skipping_invalid(&mut writer, &first, &options), 0);

    let second = data.path().join("second.jsonl");
    write_jsonl(
        &second,
        &[
            ("c", "gamma text".into()),
            ("huge", "z ".repeat(5000)),
            ("d", "delta text".into()),
        ],
    );
    assert_eq!(add_skipping_invalid(&mut writer, &second, &options), 1);
    drop(writer);
    assert_eq!(ids(dir.path()), ["a", "b", "c", "d"]);
}

#[test]
fn an_index_error_in_emit_stops_ingestion_with_that_error() {
    let data = tempfile::tempdir().unwrap();
    let path = data.path().join("docs.jsonl");
    write_jsonl(&path, &[("a", "alpha".into()), ("b", "beta".into())]);
    let missing = data.path().join("no-index-here");
    let walked = ingest::walk(&[path]);
    let mut calls = 0;
    let err = ingest::read_file(&walked.files[0], &IngestOptions::default(), &mut |_, _| {
        calls += 1;
        Index::open(&missing)?;
        Ok(())
    })
    .unwrap_err();
    assert_eq!(calls, 1);
    assert!(matches!(err, ingest::Error::Stopped(_)));
    assert_eq!(
        err.to_string(),
        lector_index::Error::NoIndex { dir: missing }.to_string()
    );
}
