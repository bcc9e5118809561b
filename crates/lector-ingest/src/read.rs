//! Turning one file into documents, within the size limit.
//!
//! Every path is bounded before it reads: whole-file formats (text, Markdown, HTML, PDF, DOCX,
//! SQuAD) check the file's size against the limit first, and JSONL reads one bounded line at a
//! time.

use crate::document::Document;
use crate::error::{invalid, io, Error, Result};
use crate::walk::{Format, SourceFile};
use crate::{docx, frontmatter, html, jsonl, pdf, squad};
use std::io::Read;
use std::path::{Path, PathBuf};

/// Documents with more text than this are refused by default (128 MiB).
pub const DEFAULT_MAX_DOCUMENT_BYTES: usize = 128 << 20;

/// Limits applied while reading.
#[derive(Debug, Clone, Copy)]
pub struct IngestOptions {
    /// The largest document accepted, in bytes: its text, the file it is read from (for
    /// whole-file formats) and its JSONL line.
    pub max_document_bytes: usize,
}

impl Default for IngestOptions {
    fn default() -> Self {
        IngestOptions {
            max_document_bytes: DEFAULT_MAX_DOCUMENT_BYTES,
        }
    }
}

/// What reading a file yields, one at a time.
#[derive(Debug)]
pub enum Item {
    /// A document ready to index.
    Document(Document),
    /// A file or line that could not be turned into a document, and why.
    Invalid(Error),
}

/// Reads the documents of `file`, calling `emit(item, bytes_read_so_far)` for each; an error
/// returned by `emit` stops reading and is returned. A bad file or line is an [`Item::Invalid`]
/// (emitted, not returned), so the caller decides whether to skip it or stop.
pub fn read_file(
    file: &SourceFile,
    options: &IngestOptions,
    emit: &mut dyn FnMut(Item, u64) -> Result<()>,
) -> Result<()> {
    match file.format {
        Format::Jsonl => jsonl::read(file, options, emit),
        Format::Squad => read_squad(file, options, emit),
        Format::Pdf | Format::Docx | Format::Text | Format::Markdown | Format::Html => {
            let item = match read_whole(file, options) {
                Ok(doc) => checked(with_file_attributes(doc, file), &file.path, None, options),
                Err(err) => Item::Invalid(err),
            };
            emit(item, file.bytes)
        }
    }
}

/// A PDF or Word file already in memory (an upload) as a document with id `id`, which also
/// names it in errors; within the size limit, refused as a file of that format would be.
pub fn read_bytes(
    id: &str,
    format: Format,
    bytes: &[u8],
    options: &IngestOptions,
) -> Result<Document> {
    let file = SourceFile {
        path: PathBuf::from(id),
        id: id.to_string(),
        bytes: bytes.len() as u64,
        format,
    };
    if bytes.len() > options.max_document_bytes {
        let message = format!(
            "file has {}, {}",
            human_size(file.bytes),
            over_limit(options)
        );
        return Err(invalid(&file.path, None, message));
    }
    let doc = match format {
        Format::Pdf => pdf::read(&file, bytes, options)?,
        Format::Docx => docx::read(&file, bytes, options)?,
        _ => {
            return Err(invalid(
                &file.path,
                None,
                "only PDF and Word files are read from bytes; send text as text",
            ))
        }
    };
    match checked(doc, &file.path, None, options) {
        Item::Document(doc) => Ok(doc),
        Item::Invalid(err) => Err(err),
    }
}

/// The one document of a whole-file format.
fn read_whole(file: &SourceFile, options: &IngestOptions) -> Result<Document> {
    match file.format {
        Format::Pdf => read_capped(&file.path, options).and_then(|b| pdf::read(file, &b, options)),
        Format::Docx => {
            read_capped(&file.path, options).and_then(|b| docx::read(file, &b, options))
        }
        _ => read_plain(file, options),
    }
}

/// `doc` with the metadata field [`FILE_FIELD`](crate::document::FILE_FIELD): the file's path
/// as given, its size and its modification time (UTC, RFC 3339, to the second).
fn with_file_attributes(mut doc: Document, file: &SourceFile) -> Document {
    let modified = std::fs::metadata(&file.path)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map(|d| utc_timestamp(d.as_secs()));
    let mut attributes = serde_json::json!({
        "path": file.path.display().to_string(),
        "bytes": file.bytes,
    });
    if let Some(modified) = modified {
        attributes["modified"] = modified.into();
    }
    doc.set_field(crate::document::FILE_FIELD, attributes);
    doc
}

/// `2026-12-04T21:36:52Z` for seconds since 1970 (the proleptic Gregorian calendar).
fn utc_timestamp(seconds: u64) -> String {
    let days = (seconds / 86_400) as i64;
    let rest = seconds % 86_400;
    // Civil date from days since 1970-01-01 (H. Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rest / 3600,
        rest / 60 % 60,
        rest % 60
    )
}

fn read_squad(
    file: &SourceFile,
    options: &IngestOptions,
    emit: &mut dyn FnMut(Item, u64) -> Result<()>,
) -> Result<()> {
    let docs = match read_utf8(&file.path, options).and_then(|t| squad::paragraphs(&t, &file.path))
    {
        Ok(docs) => docs,
        Err(err) => return emit(Item::Invalid(err), file.bytes),
    };
    let n = docs.len() as u64;
    for (i, doc) in docs.into_iter().enumerate() {
        // Progress in proportion to paragraphs done: the file is parsed as a whole.
        emit(
            checked(doc, &file.path, None, options),
            file.bytes * (i as u64 + 1) / n,
        )?;
    }
    Ok(())
}

/// Empty and oversized documents become invalid items.
pub(crate) fn checked(
    doc: Document,
    path: &Path,
    line: Option<usize>,
    options: &IngestOptions,
) -> Item {
    if doc.text.trim().is_empty() {
        return Item::Invalid(invalid(
            path,
            line,
            format!("document `{}` has no text", doc.id),
        ));
    }
    if doc.text.len() > options.max_document_bytes {
        let message = format!(
            "document `{}` has {} of text, {}",
            doc.id,
            human_size(doc.text.len() as u64),
            over_limit(options)
        );
        return Item::Invalid(invalid(path, line, message));
    }
    Item::Document(doc)
}

/// The end of every "too large" message: the limit and how to change it.
pub(crate) fn over_limit(options: &IngestOptions) -> String {
    format!(
        "above the limit of {} per document (raise it with --max-doc-mb)",
        human_size(options.max_document_bytes as u64)
    )
}

/// Bytes as people read them: `900 bytes`, `12.5 KiB`, `3.0 MiB`.
pub(crate) fn human_size(bytes: u64) -> String {
    match bytes {
        b if b < 1 << 10 => format!("{b} bytes"),
        b if b < 1 << 20 => format!("{:.1} KiB", b as f64 / 1024.0),
        b => format!("{:.1} MiB", b as f64 / 1048576.0),
    }
}

/// The file's bytes, refused before reading when it is larger than the limit. Reads at most one
/// byte past the limit, so a file that grows after the check is refused too.
fn read_capped(path: &Path, options: &IngestOptions) -> Result<Vec<u8>> {
    let handle = std::fs::File::open(path).map_err(io(path))?;
    let limit = options.max_document_bytes as u64;
    let size = handle.metadata().map_err(io(path))?.len();
    let too_large = |bytes: u64| {
        let message = format!("file has {}, {}", human_size(bytes), over_limit(options));
        invalid(path, None, message)
    };
    if size > limit {
        return Err(too_large(size));
    }
    let mut bytes = Vec::with_capacity(size as usize);
    handle
        .take(limit + 1)
        .read_to_end(&mut bytes)
        .map_err(io(path))?;
    if bytes.len() as u64 > limit {
        return Err(too_large(bytes.len() as u64));
    }
    Ok(bytes)
}

/// The file's text (size-capped), or an error naming the line of the first invalid byte.
fn read_utf8(path: &Path, options: &IngestOptions) -> Result<String> {
    let bytes = read_capped(path, options)?;
    String::from_utf8(bytes).map_err(|e| {
        let at = e.utf8_error().valid_up_to();
        let line = e.as_bytes()[..at].iter().filter(|&&b| b == b'\n').count() + 1;
        invalid(path, Some(line), format!("invalid UTF-8 at byte {at}"))
    })
}

fn read_plain(file: &SourceFile, options: &IngestOptions) -> Result<Document> {
    let raw = read_utf8(&file.path, options)?;
    match file.format {
        Format::Markdown => read_markdown(file, raw).map(crate::sections::with_markdown_sections),
        Format::Html => Ok(html::document(file, &raw)),
        _ => Ok(Document::new(file.id.clone(), raw)),
    }
}

/// Markdown: front matter fields into the metadata (`title` and `date` into the document's
/// own), the text verbatim with the block blanked, the title else the first `# ` heading.
fn read_markdown(file: &SourceFile, raw: String) -> Result<Document> {
    let (mut fields, text) = match frontmatter::split(&raw) {
        Ok(Some((fields, blanked))) => (fields, blanked),
        Ok(None) => (serde_json::Map::new(), raw),
        Err((line, reason)) => {
            return Err(invalid(
                &file.path,
                Some(line),
                format!("front matter: {reason}"),
            ))
        }
    };
    let text_field = |value: Option<serde_json::Value>| match value {
        Some(serde_json::Value::String(s)) => Some(s),
        Some(other @ serde_json::Value::Number(_)) => Some(other.to_string()),
        _ => None,
    };
    let title = text_field(fields.remove("title")).or_else(|| markdown_title(&text));
    let date = text_field(fields.remove("date"));
    Ok(Document {
        id: file.id.clone(),
        title,
        text,
        date,
        metadata: (!fields.is_empty()).then_some(serde_json::Value::Object(fields)),
        embedding: None,
    })
}

fn markdown_title(text: &str) -> Option<String> {
    text.lines()
        .find_map(|l| l.strip_prefix("# "))
        .map(|t| t.trim().to_string())
        .filter(|t| !t.is_empty())
}
