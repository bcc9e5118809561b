//! Shared by the server tests: the repository root and a fresh index of the bundled sample.
#![allow(dead_code)]

use lector_index::{IndexSettings, IndexWriter};
use lector_ingest::{self as ingest, IngestOptions, Item};
use std::path::{Path, PathBuf};

/// The repository root.
pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The writer of a new index in `dir` holding the bundled sample's 10 documents, committed.
pub fn sample_writer(dir: &Path) -> IndexWriter {
    let mut writer = IndexWriter::open_or_create(dir, IndexSettings::default()).unwrap();
    let walk = ingest::walk(&[workspace().join("samples/squad-v1.1-sample.json")]);
    for file in &walk.files {
        ingest::read_file(file, &IngestOptions::default(), &mut |item, _| {
            if let Item::Document(doc) = item {
                writer.add(doc);
            }
            Ok(())
        })
        .unwrap();
    }
    writer.commit().unwrap();
    writer
}
