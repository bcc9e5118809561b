//! Hostile files: small inputs that cost gigabytes or hours unless reading is bounded for the
//! document as a whole (issue #48). Each is generated (`hostile/files.rs`); the CLI's tests run
//! the same files through `lector index add` under a memory bound.

#[allow(dead_code)] // char_offset is for the PDF and DOCX tests
mod common;
#[path = "hostile/files.rs"]
mod files;

use common::{invalid_message, read_with};
use lector_ingest::{IngestOptions, Item};
use std::time::{Duration, Instant};

/// A folder of its own holding `name` with `bytes`.
fn scratch(name: &str, bytes: &[u8]) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(name);
    std::fs::write(&path, bytes).unwrap();
    (dir, path)
}

/// Generous: the unbounded readers took minutes to hours on these inputs.
const BOUND: Duration = Duration::from_secs(30);

#[test]
fn pages_sharing_one_stream_are_refused_at_the_documents_budget() {
    // 200 pages x 6 MB of content under an 8 MiB limit: per page, each is within the limit, so
    // only a budget for the whole document stops it (after 16 MiB, the third page).
    let bytes = files::pdf_pages_sharing_one_stream(200, 6 << 20);
    assert!(bytes.len() < 64 << 10, "{} bytes", bytes.len());
    let (_dir, path) = scratch("shared.pdf", &bytes);
    let options = IngestOptions {
        max_document_bytes: 8 << 20,
    };
    let started = Instant::now();
    let message = invalid_message(&path, &options);
    assert!(started.elapsed() < BOUND, "{:?}", started.elapsed());
    assert!(
        message.starts_with(&path.display().to_string()),
        "{message}"
    );
    assert!(
        message.contains("more than 16.0 MiB in all")
            && message.contains("limit of 8.0 MiB per document"),
        "{message}"
    );
}

#[test]
fn a_stream_shared_by_pages_is_read_for_each_page_within_the_budget() {
    // Three pages showing one 1 MB stream, inflated once: each page has the text (but the lines
    // at its edges, which repeat on every page as a running header and footer would).
    let bytes = files::pdf_pages_sharing_one_stream(3, 1 << 20);
    let (_dir, path) = scratch("three.pdf", &bytes);
    let options = IngestOptions {
        max_document_bytes: 4 << 20,
    };
    let Some(Item::Document(doc)) = read_with(&path, &options).pop() else {
        panic!("expected a document");
    };
    let pages: Vec<&str> = doc.text.split('\u{c}').map(str::trim).collect();
    assert_eq!(pages, ["Every page shows this text."; 3]);
}

#[test]
fn a_long_outline_on_a_large_page_is_placed_within_the_step_budget() {
    // A 4-million-character page and 2,000 entries sharing one 20,000-character title that is
    // nearly printed everywhere: ~10^14 steps for a naive search.
    let bytes = files::pdf_with_a_long_outline(4_000_000, 2_000, 20_000);
    assert!(bytes.len() < 512 << 10, "{} bytes", bytes.len());
    let (_dir, path) = scratch("outline.pdf", &bytes);
    let started = Instant::now();
    let Some(Item::Document(doc)) = read_with(&path, &IngestOptions::default()).pop() else {
        panic!("expected a document");
    };
    assert!(started.elapsed() < BOUND, "{:?}", started.elapsed());
    let sections = doc.metadata.as_ref().unwrap()["sections"]
        .as_array()
        .unwrap();
    assert_eq!(sections.len(), 2_000);
    for section in sections {
        // Not printed: each starts at its page, its title cut to the cap.
        assert_eq!(section["start"], 0);
        let title = section["title"].as_str().unwrap();
        assert_eq!(title.chars().count(), lector_ingest::pdf::MAX_TITLE_CHARS);
    }
}

#[test]
fn a_docx_of_millions_of_unclosed_paragraphs_is_refused_at_the_depth_cap() {
    let bytes = files::docx_of_unclosed_paragraphs(25_000_000);
    assert!(bytes.len() < 1 << 20, "{} bytes", bytes.len());
    let (_dir, path) = scratch("deep.docx", &bytes);
    let started = Instant::now();
    let message = invalid_message(&path, &IngestOptions::default());
    assert!(started.elapsed() < BOUND, "{:?}", started.elapsed());
    assert!(message.contains("deep.docx"), "{message}");
    assert!(
        message.contains(&format!(
            "nested more than {} deep",
            lector_ingest::docx::MAX_XML_DEPTH
        )),
        "{message}"
    );
}
