//! lector-ingest: reading documents from files and folders, within size limits.
//!
//! | extension | documents |
//! | --- | --- |
//! | `.txt`, `.text` | one per file: the file's text; id = path relative to the argument |
//! | `.md`, `.markdown` | one per file, text kept verbatim (offsets map to the file) but a YAML front matter block blanked, its fields the metadata (a YAML subset: `key: value`, lists); metadata `sections` = its ATX headings ([`sections`]); title = its `title`, else the first `# ` heading |
//! | `.html`, `.htm` | one per file: visible text ([`html`], an HTML5 parser); metadata `sections` = its `h1`..`h6`; title = `<title>` |
//! | `.pdf` | one per file: the pages' text joined by form feeds ([`pdf`], text only, no OCR); metadata `pages` = each page's first character ([`page_of`]), `author`, `created`; title = the PDF's title |
//! | `.docx` | one per file: paragraphs in document order, one per line, a blank line before each heading, table rows as lines of ` \| `-joined cells ([`docx`]); metadata `sections` = each heading's `{start, level, title}` ([`section_path`], [`sections`]), `author`, `created`, `modified`; title = the document's title property, else its first Title or level-1 heading |
//! | `.jsonl` | one per line: `{id, title?, text, date?, metadata?}`, or BEIR `{_id, title, text}` |
//! | `.json` | a SQuAD dataset: one per paragraph, id `<article title>#<paragraph index>` |
//!
//! Every document read from a whole file (all but `.jsonl` and `.json`) also gets the metadata
//! field [`document::FILE_FIELD`]: the file's `path`, `bytes` and `modified` time, which
//! [`Document::content_hash`] leaves out.
//!
//! Folders are walked recursively in byte order of names ([`walk`]); hidden entries (`.name`)
//! and symbolic links to folders are skipped (no cycles), dangling links are errors, files with
//! other extensions are listed as ignored. A bad file or line becomes an [`Item::Invalid`] naming
//! the file and line, so callers may skip it or stop.
//!
//! Memory is bounded by [`IngestOptions::max_document_bytes`] before anything is read: a
//! whole-file format larger than the limit is refused by its size, and a JSONL line longer than
//! the limit is refused (as an invalid item for that line) without being stored.
//!
//! This crate does not depend on the index: the index takes the [`Document`]s it yields.
//!
//! # Example
//!
//! ```
//! use lector_ingest::{read_file, walk, IngestOptions, Item};
//! let dir = tempfile::tempdir().unwrap();
//! std::fs::write(dir.path().join("a.html"), "<title>A</title><p>Hello &hellip;").unwrap();
//! let found = walk(&[dir.path().to_path_buf()]);
//! let mut docs = Vec::new();
//! read_file(&found.files[0], &IngestOptions::default(), &mut |item, _| {
//!     if let Item::Document(doc) = item {
//!         docs.push(doc);
//!     }
//!     Ok(())
//! })
//! .unwrap();
//! assert_eq!((docs[0].id.as_str(), docs[0].text.as_str()), ("a.html", "Hello …"));
//! ```

pub mod document;
pub mod docx;
mod error;
mod frontmatter;
pub mod html;
mod isolate;
mod jsonl;
pub mod pdf;
mod read;
pub mod sections;
mod squad;
mod walk;

pub use document::{nesting_depth, ContentHash, Document, Embedding, MAX_METADATA_DEPTH};
pub use error::{Error, Result};
pub use isolate::{serve_worker, IsolatedReader, IsolationLimits};
pub use jsonl::document_from_json;
pub use pdf::page_of;
pub use read::{read_bytes, read_file, IngestOptions, Item, DEFAULT_MAX_DOCUMENT_BYTES};
pub use sections::{section_path, section_starts};
pub use walk::{walk, Format, SourceFile, Walk};
