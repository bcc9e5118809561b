//! `lector_server::open`: a server's state from an index directory and a pipeline
//! configuration, without the binary's wiring (the shipped reader, a real index on disk).

mod common;

use common::workspace;
use lector_index::Document;
use lector_pipeline::{AskOptions, PipelineConfig, RetrievalConfig};
use lector_server::{open, Config, Error, Limits, Opened};
use std::cell::RefCell;

fn pipeline(reader: &str) -> PipelineConfig {
    PipelineConfig {
        reader: Some(workspace().join(reader)),
        retrieval: RetrievalConfig::default(),
        rerank: None,
    }
}

fn config(search: lector_index::SearchOptions) -> Config {
    Config::new(search, Limits::default())
}

#[test]
fn opens_an_empty_directory_as_a_new_index_that_takes_documents_and_answers() {
    let dir = tempfile::tempdir().unwrap();
    let heard = RefCell::new(Vec::new());
    let notify = |m: &str| heard.borrow_mut().push(m.to_string());
    let reader = pipeline("models/reader-minilm-squad");
    let Opened { state, warnings } = open(dir.path(), &reader, false, config, &notify).unwrap();
    let state = std::sync::Arc::new(state);
    assert!(warnings.is_empty(), "{warnings:?}");
    assert!(
        heard
            .borrow()
            .iter()
            .any(|m| m.contains("created an empty index")),
        "{heard:?}"
    );
    assert_eq!(state.pipeline().store().counts().unwrap().documents, 0);
    let mut writer = state.writer().unwrap();
    writer.writer().add(Document {
        id: "offsite".into(),
        title: None,
        text: "The 2026 offsite takes place in Lisbon on 4 June.".into(),
        date: None,
        metadata: None,
        embedding: None,
    });
    writer.commit().unwrap();
    drop(writer);
    let response = state
        .pipeline()
        .ask("Where does the offsite take place?", &AskOptions::default())
        .unwrap();
    assert_eq!(response.answer.map(|a| a.text).as_deref(), Some("Lisbon"));
}

#[test]
fn read_only_needs_an_index_and_a_bad_reader_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let reader = pipeline("models/reader-minilm-squad");
    let missing = open(dir.path(), &reader, true, config, &|_| {});
    assert!(
        matches!(
            missing,
            Err(Error::Index(lector_index::Error::NoIndex { .. }))
        ),
        "{:?}",
        missing.err()
    );
    let created: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert!(created.is_empty(), "read-only created {created:?}");

    let broken = pipeline("models/no-such-reader");
    let err = open(dir.path(), &broken, false, config, &|_| {})
        .err()
        .unwrap();
    assert!(matches!(err, Error::Pipeline(_)), "{err:?}");
    assert!(err.to_string().contains("no-such-reader"), "{err}");
}
