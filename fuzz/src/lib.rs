//! What the fuzz targets share: feeding bytes to lector's file readers through a real file, the
//! shipped reader tokenizer, and the checks every target makes on what a parser accepts.
//!
//! The targets only call lector's public API; a panic, an abort or a broken check below is a
//! crash for libFuzzer.

use lector_ingest::{read_file, Format, IngestOptions, Item, SourceFile};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use tokenizers::Tokenizer;

/// A small document limit, so that inputs libFuzzer can reach (kilobytes) hit the size checks.
pub const FUZZ_MAX_DOCUMENT_BYTES: usize = 4096;

/// The document limit of the PDF and DOCX targets, which take inputs of megabytes
/// (`bench/fuzz.sh`): what is bounded for the document as a whole (shared streams, nesting,
/// outlines) only costs anything at that size.
pub const FUZZ_MAX_FILE_BYTES: usize = 8 << 20;

/// A scratch file named `input.<extension>` in a folder of this process's own: the ingestion API
/// reads files (it bounds reads by the file's size), so the bytes go through a real one.
pub fn scratch_file(extension: &str, bytes: &[u8]) -> PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    let dir = DIR.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("lector-fuzz-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("create the scratch folder");
        dir
    });
    let path = dir.join(format!("input.{extension}"));
    std::fs::write(&path, bytes).expect("write the scratch file");
    path
}

/// Reads `bytes` as a file with `extension` through [`read_file`], checking what it yields:
/// every document has text within the limit, and progress never goes back or past the file.
pub fn ingest(extension: &str, bytes: &[u8]) {
    ingest_items(extension, bytes);
}

/// [`ingest`], returning the items read, for a target's own checks on them.
pub fn ingest_items(extension: &str, bytes: &[u8]) -> Vec<Item> {
    ingest_items_within(extension, bytes, FUZZ_MAX_DOCUMENT_BYTES)
}

/// [`ingest_items`] with a document limit of `limit` bytes.
pub fn ingest_items_within(extension: &str, bytes: &[u8], limit: usize) -> Vec<Item> {
    let path = scratch_file(extension, bytes);
    let format = Format::of(&path).expect("an extension lector reads");
    let file = SourceFile {
        id: format!("input.{extension}"),
        bytes: bytes.len() as u64,
        path,
        format,
    };
    let options = IngestOptions {
        max_document_bytes: limit,
    };
    let mut progress = 0u64;
    let mut items = Vec::new();
    let result = read_file(&file, &options, &mut |item, read| {
        assert!(
            read >= progress && read <= file.bytes,
            "progress {read} after {progress}"
        );
        progress = read;
        if let Item::Document(doc) = &item {
            assert!(!doc.id.is_empty(), "a document without an id");
            assert!(!doc.text.trim().is_empty(), "a document without text");
            assert!(doc.text.len() <= limit, "a document over the limit");
        }
        items.push(item);
        Ok(())
    });
    // The only error `read_file` returns is one from `emit`, which never fails here.
    result.expect("read_file failed although emit never does");
    items
}

/// The shipped reader's tokenizer (`models/reader-minilm-squad/tokenizer.json`), loaded once.
pub fn reader_tokenizer() -> &'static Tokenizer {
    static TOKENIZER: OnceLock<Tokenizer> = OnceLock::new();
    TOKENIZER.get_or_init(|| {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../models/reader-minilm-squad/tokenizer.json");
        Tokenizer::from_file(&path)
            .unwrap_or_else(|e| panic!("cannot load {}: {e}", path.display()))
    })
}

/// Splits fuzz input into a fixed-size header of parameter bytes and the rest.
pub fn split_header<const N: usize>(data: &[u8]) -> Option<([u8; N], &[u8])> {
    let header = data.get(..N)?.try_into().ok()?;
    Some((header, &data[N..]))
}
