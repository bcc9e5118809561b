//! Reading documents from files and folders.
//!
//! | extension | documents |
//! | --- | --- |
//! | `.txt`, `.text` | one per file: the file's text; id = path relative to the argument |
//! | `.md`, `.markdown` | one per file, text kept verbatim (offsets map to the file); title = first `# ` heading |
//! | `.html`, `.htm` | one per file: visible text ([`crate::html`]); title = `<title>` |
//! | `.jsonl` | one per line: `{id, title?, text, date?, metadata?}`, or BEIR `{_id, title, text}` |
//! | `.json` | a SQuAD dataset: one per paragraph, id `<article title>#<paragraph index>` |
//!
//! Folders are walked recursively in byte order of names; hidden entries (`.name`) and symbolic
//! links to folders are skipped (no cycles), dangling links are errors, files with other extensions are listed as ignored. A bad file or
//! line becomes an [`Item::Invalid`] naming the file and line, so callers may skip it or stop.

use crate::document::Document;
use crate::error::{io, Error, Result};
use crate::html;
use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};

/// Documents with more text than this are refused by default (128 MiB).
pub const DEFAULT_MAX_DOCUMENT_BYTES: usize = 128 << 20;

/// Limits applied while reading.
#[derive(Debug, Clone, Copy)]
pub struct IngestOptions {
    /// The largest document text accepted, in bytes.
    pub max_document_bytes: usize,
}

impl Default for IngestOptions {
    fn default() -> Self {
        IngestOptions {
            max_document_bytes: DEFAULT_MAX_DOCUMENT_BYTES,
        }
    }
}

/// How a file is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Plain text.
    Text,
    /// Markdown, kept verbatim.
    Markdown,
    /// HTML, reduced to its visible text.
    Html,
    /// JSON lines, one document per line.
    Jsonl,
    /// A SQuAD dataset, one document per paragraph.
    Squad,
}

impl Format {
    /// The format of a file by its extension, if lector reads it.
    pub fn of(path: &Path) -> Option<Format> {
        let ext = path.extension()?.to_str()?.to_ascii_lowercase();
        Some(match ext.as_str() {
            "txt" | "text" => Format::Text,
            "md" | "markdown" => Format::Markdown,
            "html" | "htm" => Format::Html,
            "jsonl" => Format::Jsonl,
            "json" => Format::Squad,
            _ => return None,
        })
    }
}

/// A file to read.
#[derive(Debug, Clone)]
pub struct SourceFile {
    /// Where it is.
    pub path: PathBuf,
    /// Its path relative to the argument it was found under (the id of a plain-file document).
    pub id: String,
    /// Its size in bytes (for progress).
    pub bytes: u64,
    /// How it is read.
    pub format: Format,
}

/// The result of walking the arguments of `index add`.
#[derive(Debug, Default)]
pub struct Walk {
    /// Files to read, in walk order.
    pub files: Vec<SourceFile>,
    /// Files skipped because lector does not read their extension.
    pub ignored: Vec<PathBuf>,
    /// Paths that could not be read (missing, permission denied).
    pub errors: Vec<Error>,
}

/// Lists the readable files under `paths` (files or folders).
pub fn walk(paths: &[PathBuf]) -> Walk {
    let mut out = Walk::default();
    for root in paths {
        match std::fs::metadata(root) {
            Ok(meta) if meta.is_dir() => walk_dir(root, root, &mut out),
            Ok(meta) => add_file(
                root,
                root.parent().unwrap_or(Path::new("")),
                meta.len(),
                true,
                &mut out,
            ),
            Err(source) => out.errors.push(Error::Io {
                path: root.clone(),
                source,
            }),
        }
    }
    out
}

fn walk_dir(root: &Path, dir: &Path, out: &mut Walk) {
    let entries = match std::fs::read_dir(dir).and_then(|e| e.collect::<std::io::Result<Vec<_>>>())
    {
        Ok(entries) => entries,
        Err(source) => {
            return out.errors.push(Error::Io {
                path: dir.to_path_buf(),
                source,
            })
        }
    };
    let mut paths: Vec<PathBuf> = entries
        .iter()
        .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
        .map(|e| e.path())
        .collect();
    paths.sort();
    for path in paths {
        match std::fs::symlink_metadata(&path) {
            Ok(meta) if meta.is_dir() => walk_dir(root, &path, out),
            Ok(meta) if meta.file_type().is_symlink() => match std::fs::metadata(&path) {
                Ok(target) if target.is_file() => add_file(&path, root, target.len(), false, out),
                Ok(_) => out.ignored.push(path),
                Err(source) => out.errors.push(Error::Io { path, source }),
            },
            Ok(meta) => add_file(&path, root, meta.len(), false, out),
            Err(source) => out.errors.push(Error::Io { path, source }),
        }
    }
}

fn add_file(path: &Path, root: &Path, bytes: u64, explicit: bool, out: &mut Walk) {
    let Some(format) = Format::of(path) else {
        if explicit {
            out.errors.push(invalid(
                path,
                None,
                "unsupported file type (txt, md, html, jsonl, json)",
            ));
        } else {
            out.ignored.push(path.to_path_buf());
        }
        return;
    };
    let relative = path.strip_prefix(root).unwrap_or(path);
    let id = relative.to_string_lossy().replace('\\', "/");
    out.files.push(SourceFile {
        path: path.to_path_buf(),
        id,
        bytes,
        format,
    });
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
/// returned by `emit` stops reading and is returned.
pub fn read_file(
    file: &SourceFile,
    options: &IngestOptions,
    emit: &mut dyn FnMut(Item, u64) -> Result<()>,
) -> Result<()> {
    match file.format {
        Format::Jsonl => read_jsonl(file, options, emit),
        Format::Squad => match read_squad(&file.path) {
            Ok(docs) => {
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
            Err(err) => emit(Item::Invalid(err), file.bytes),
        },
        Format::Text | Format::Markdown | Format::Html => {
            let item = match read_plain(file, options) {
                Ok(doc) => checked(doc, &file.path, None, options),
                Err(err) => Item::Invalid(err),
            };
            emit(item, file.bytes)
        }
    }
}

/// Empty and oversized documents become invalid items.
fn checked(doc: Document, path: &Path, line: Option<usize>, options: &IngestOptions) -> Item {
    if doc.text.trim().is_empty() {
        return Item::Invalid(invalid(
            path,
            line,
            format!("document `{}` has no text", doc.id),
        ));
    }
    if doc.text.len() > options.max_document_bytes {
        return Item::Invalid(too_large(path, line, &doc.id, doc.text.len(), options));
    }
    Item::Document(doc)
}

fn too_large(
    path: &Path,
    line: Option<usize>,
    id: &str,
    bytes: usize,
    options: &IngestOptions,
) -> Error {
    invalid(
        path,
        line,
        format!(
            "document `{id}` has {:.1} MiB of text, above the limit of {:.1} MiB (raise it with --max-doc-mb)",
            bytes as f64 / 1048576.0,
            options.max_document_bytes as f64 / 1048576.0
        ),
    )
}

fn invalid(path: &Path, line: Option<usize>, message: impl Into<String>) -> Error {
    Error::InvalidInput {
        path: path.to_path_buf(),
        line,
        message: message.into(),
    }
}

fn read_utf8(path: &Path) -> Result<String> {
    let bytes = std::fs::read(path).map_err(io(path))?;
    String::from_utf8(bytes).map_err(|e| {
        let at = e.utf8_error().valid_up_to();
        let line = e.as_bytes()[..at].iter().filter(|&&b| b == b'\n').count() + 1;
        invalid(path, Some(line), format!("invalid UTF-8 at byte {at}"))
    })
}

fn read_plain(file: &SourceFile, options: &IngestOptions) -> Result<Document> {
    // Refuse before reading: a huge file would otherwise be loaded only to be dropped.
    let limit = options.max_document_bytes as u64;
    if file.format != Format::Html && file.bytes > limit {
        return Err(too_large(
            &file.path,
            None,
            &file.id,
            file.bytes as usize,
            options,
        ));
    }
    let raw = read_utf8(&file.path)?;
    let (title, text) = match file.format {
        Format::Html => {
            let page = html::extract(&raw);
            (page.title, page.text)
        }
        Format::Markdown => (markdown_title(&raw), raw),
        _ => (None, raw),
    };
    Ok(Document {
        id: file.id.clone(),
        title,
        text,
        date: None,
        metadata: None,
    })
}

fn markdown_title(text: &str) -> Option<String> {
    text.lines()
        .find_map(|l| l.strip_prefix("# "))
        .map(|t| t.trim().to_string())
        .filter(|t| !t.is_empty())
}

fn read_jsonl(
    file: &SourceFile,
    options: &IngestOptions,
    emit: &mut dyn FnMut(Item, u64) -> Result<()>,
) -> Result<()> {
    let handle = std::fs::File::open(&file.path).map_err(io(&file.path));
    let mut reader = match handle {
        Ok(f) => BufReader::with_capacity(1 << 16, f),
        Err(err) => return emit(Item::Invalid(err), file.bytes),
    };
    let (mut buf, mut line, mut offset) = (Vec::new(), 0usize, 0u64);
    loop {
        buf.clear();
        let n = match reader.read_until(b'\n', &mut buf) {
            Ok(0) => return Ok(()),
            Ok(n) => n,
            Err(source) => {
                return emit(
                    Item::Invalid(Error::Io {
                        path: file.path.clone(),
                        source,
                    }),
                    file.bytes,
                )
            }
        };
        line += 1;
        offset += n as u64;
        if buf.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let item = match jsonl_record(&buf, &file.path, line) {
            Ok(doc) => checked(doc, &file.path, Some(line), options),
            Err(err) => Item::Invalid(err),
        };
        emit(item, offset)?;
    }
}

fn jsonl_record(bytes: &[u8], path: &Path, line: usize) -> Result<Document> {
    let value: Value =
        serde_json::from_slice(bytes).map_err(|e| invalid(path, Some(line), strip_position(&e)))?;
    let Value::Object(map) = value else {
        return Err(invalid(path, Some(line), "expected a JSON object"));
    };
    let field = |name: &str| -> Result<Option<String>> {
        match map.get(name) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(Value::Number(n)) if name.ends_with("id") => Ok(Some(n.to_string())),
            Some(_) => Err(invalid(
                path,
                Some(line),
                format!("`{name}` is not a string"),
            )),
        }
    };
    let id = match field("id")? {
        Some(id) => id,
        None => field("_id")?
            .ok_or_else(|| invalid(path, Some(line), "no `id` (or BEIR `_id`) field"))?,
    };
    if id.is_empty() {
        return Err(invalid(path, Some(line), "empty `id`"));
    }
    let text = field("text")?.ok_or_else(|| {
        invalid(
            path,
            Some(line),
            format!("document `{id}` has no `text` field"),
        )
    })?;
    let metadata = map.get("metadata").filter(|m| !is_empty_json(m)).cloned();
    Ok(Document {
        title: field("title")?.filter(|t| !t.is_empty()),
        date: field("date")?,
        metadata,
        id,
        text,
    })
}

fn is_empty_json(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Object(m) => m.is_empty(),
        _ => false,
    }
}

fn strip_position(e: &serde_json::Error) -> String {
    let message = e.to_string();
    match message.rfind(" at line ") {
        Some(i) => format!("column {}: {}", e.column(), &message[..i]),
        None => message,
    }
}

/// One document per SQuAD paragraph, titled by its article (underscores shown as spaces).
fn read_squad(path: &Path) -> Result<Vec<Document>> {
    let text = read_utf8(path)?;
    let value: Value = serde_json::from_str(&text)
        .map_err(|e| invalid(path, Some(e.line()), strip_position(&e)))?;
    let articles = value.get("data").and_then(Value::as_array).ok_or_else(|| {
        invalid(
            path,
            None,
            "no `data` array at the top level: not a SQuAD dataset",
        )
    })?;
    let mut docs = Vec::new();
    for (a, article) in articles.iter().enumerate() {
        let title = article
            .get("title")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let title = if title.is_empty() {
            format!("article {a}")
        } else {
            title.to_string()
        };
        let paragraphs = article.get("paragraphs").and_then(Value::as_array);
        for (p, paragraph) in paragraphs.into_iter().flatten().enumerate() {
            let Some(context) = paragraph.get("context").and_then(Value::as_str) else {
                return Err(invalid(
                    path,
                    None,
                    format!("paragraph {p} of `{title}` has no `context` string"),
                ));
            };
            let mut doc = Document::new(format!("{title}#{p}"), context);
            doc.title = Some(title.replace('_', " "));
            docs.push(doc);
        }
    }
    Ok(docs)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn collect(file: &SourceFile, options: &IngestOptions) -> (Vec<Document>, Vec<String>) {
        let (mut docs, mut errors) = (Vec::new(), Vec::new());
        read_file(file, options, &mut |item, _| {
            match item {
                Item::Document(d) => docs.push(d),
                Item::Invalid(e) => errors.push(e.to_string()),
            }
            Ok(())
        })
        .unwrap();
        (docs, errors)
    }

    #[test]
    fn jsonl_lines_good_and_bad() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("docs.jsonl");
        std::fs::write(
            &path,
            "{\"id\": \"a\", \"title\": \"T\", \"text\": \"alpha\", \"date\": \"2024-01-02\", \"metadata\": {\"k\": 1}}\n\
             \n{\"_id\": 7, \"title\": \"\", \"text\": \"beir\", \"metadata\": {}}\n\
             {not json}\n{\"id\": \"e\", \"text\": \"   \"}\n{\"text\": \"no id\"}\n[1]\n",
        )
        .unwrap();
        let walk = walk(std::slice::from_ref(&path));
        let (docs, errors) = collect(&walk.files[0], &IngestOptions::default());
        assert_eq!(docs.len(), 2);
        assert_eq!(docs[0].date.as_deref(), Some("2024-01-02"));
        assert_eq!(docs[0].metadata, Some(serde_json::json!({"k": 1})));
        assert_eq!(
            (
                docs[1].id.as_str(),
                docs[1].title.as_deref(),
                docs[1].metadata.is_none()
            ),
            ("7", None, true)
        );
        let p = path.display();
        assert_eq!(
            errors,
            [
                format!("{p}:4: column 2: key must be a string"),
                format!("{p}:5: document `e` has no text"),
                format!("{p}:6: no `id` (or BEIR `_id`) field"),
                format!("{p}:7: expected a JSON object"),
            ]
        );
    }

    #[test]
    fn folders_recurse_with_relative_ids() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("sub/deeper")).unwrap();
        std::fs::write(dir.path().join("a.txt"), "plain").unwrap();
        std::fs::write(dir.path().join("sub/b.md"), "# Heading\nbody").unwrap();
        std::fs::write(
            dir.path().join("sub/deeper/c.html"),
            "<title>C</title><p>see</p>",
        )
        .unwrap();
        std::fs::write(dir.path().join("sub/skip.bin"), "x").unwrap();
        std::fs::write(dir.path().join(".hidden.txt"), "x").unwrap();
        let walk = walk(&[dir.path().to_path_buf()]);
        let ids: Vec<&str> = walk.files.iter().map(|f| f.id.as_str()).collect();
        assert_eq!(ids, ["a.txt", "sub/b.md", "sub/deeper/c.html"]);
        assert_eq!(walk.ignored.len(), 1);
        let (docs, _) = collect(&walk.files[1], &IngestOptions::default());
        assert_eq!(
            (docs[0].title.as_deref(), docs[0].text.as_str()),
            (Some("Heading"), "# Heading\nbody")
        );
        let (docs, _) = collect(&walk.files[2], &IngestOptions::default());
        assert_eq!(
            (docs[0].title.as_deref(), docs[0].text.as_str()),
            (Some("C"), "see")
        );
    }

    #[test]
    fn oversized_missing_and_invalid_utf8_files_are_reported() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("big.txt"), "word ".repeat(1000)).unwrap();
        std::fs::write(dir.path().join("bad.txt"), b"ok\n\xff\xfe").unwrap();
        let walked = walk(&[dir.path().to_path_buf(), dir.path().join("missing.txt")]);
        assert_eq!(walked.errors.len(), 1);
        assert!(walked.errors[0].to_string().contains("missing.txt"));
        let options = IngestOptions {
            max_document_bytes: 1000,
        };
        let (_, bad) = collect(&walked.files[0], &options);
        assert!(
            bad[0].ends_with("bad.txt:2: invalid UTF-8 at byte 3"),
            "{}",
            bad[0]
        );
        let (_, big) = collect(&walked.files[1], &options);
        assert!(
            big[0].contains("above the limit of 0.0 MiB (raise it with --max-doc-mb)"),
            "{}",
            big[0]
        );
    }

    #[test]
    fn squad_paragraphs_become_documents() {
        let path = Path::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../../shared/data/squad/dev-v1.1.json"
        ));
        let docs = read_squad(path).unwrap();
        assert_eq!(docs.len(), 2067);
        assert_eq!(docs[0].id, "Super_Bowl_50#0");
        assert_eq!(docs[0].title.as_deref(), Some("Super Bowl 50"));
    }
}
