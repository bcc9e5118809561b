//! Finding the files to read under the paths given: folders recursively, in byte order of names.

use crate::error::{invalid, Error};
use std::path::{Path, PathBuf};

/// How a file is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Plain text.
    Text,
    /// Markdown, kept verbatim.
    Markdown,
    /// HTML, reduced to its visible text.
    Html,
    /// PDF, its text page by page (one document per file).
    Pdf,
    /// Word (Office Open XML), its paragraphs and tables in document order (one document per
    /// file).
    Docx,
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
            "pdf" => Format::Pdf,
            "docx" => Format::Docx,
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
    /// Its size in bytes when walked (for progress).
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

impl Walk {
    /// The `k`-th (1-based) of `n` consecutive runs of the files, as even as whole files allow,
    /// so that `n` processes can read one walk's files together, each its own run, and their
    /// indexes merge into what one process builds. The errors and ignored files stay with the
    /// first run only, so that the runs' counts add up. `k` must be in `1..=n`.
    ///
    /// ```
    /// use lector_ingest::{Format, SourceFile, Walk};
    /// let file = |id: &str| SourceFile { path: id.into(), id: id.into(), bytes: 1, format: Format::Text };
    /// let walk = || Walk { files: ["a", "b", "c", "d", "e"].map(file).to_vec(), ..Walk::default() };
    /// let ids = |w: Walk| w.files.into_iter().map(|f| f.id).collect::<Vec<_>>();
    /// assert_eq!(ids(walk().shard(1, 2)), ["a", "b", "c"]);
    /// assert_eq!(ids(walk().shard(2, 2)), ["d", "e"]);
    /// ```
    pub fn shard(mut self, k: usize, n: usize) -> Walk {
        assert!((1..=n).contains(&k), "shard {k} of {n}");
        let total = self.files.len();
        let mut position = 0;
        self.files.retain(|_| {
            position += 1;
            (position - 1) * n / total.max(1) == k - 1
        });
        if k > 1 {
            self.errors.clear();
            self.ignored.clear();
        }
        self
    }
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

/// A `.doc` file (Word 97-2003's binary format).
fn is_legacy_word(path: &Path) -> bool {
    path.extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("doc"))
}

fn add_file(path: &Path, root: &Path, bytes: u64, explicit: bool, out: &mut Walk) {
    let Some(format) = Format::of(path) else {
        if is_legacy_word(path) {
            // A document the user meant to index, which lector cannot read: said by name, not
            // counted among the files of other types.
            out.errors.push(invalid(
                path,
                None,
                "a legacy Word document (.doc), which lector cannot read: save it as .docx",
            ));
        } else if explicit {
            out.errors.push(invalid(
                path,
                None,
                "unsupported file type (txt, md, html, pdf, docx, jsonl, json)",
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
