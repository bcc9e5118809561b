//! The label store: `labels.jsonl` in the query log's directory, one JSON object per line.
//!
//! Every label is appended and fsynced before [`LabelStore::append`] returns, so a label the
//! page was told is saved survives a crash or a kill. A label is never rewritten: labelling a
//! question again appends a new line, and the last line of a request id wins. A torn last line
//! (the server killed while writing it, never acknowledged) is skipped when reading, and cut off
//! when the store is opened for appending, so the next label starts on a line of its own.

use crate::record::parse_json_lines;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

/// The file name of the labels in the log directory.
pub const LABELS_FILE: &str = "labels.jsonl";

/// One label: what an annotator said about one logged ask.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Label {
    /// When it was stored (RFC 3339, UTC).
    pub time: String,
    /// The logged ask it labels.
    pub request_id: String,
    /// The question, as logged.
    pub question: String,
    pub verdict: LabelVerdict,
    /// The answer (verdict `answer` only): the document and the half-open character range
    /// (Unicode scalar values) of `text` in its text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub doc_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
}

/// What the annotator decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LabelVerdict {
    /// The answer is the selected span.
    Answer,
    /// The shown documents do not answer the question.
    Unanswerable,
    /// Not decided; the question comes back after the others.
    Skip,
}

impl LabelVerdict {
    /// `answer`, `unanswerable` or `skip`.
    pub fn name(self) -> &'static str {
        match self {
            LabelVerdict::Answer => "answer",
            LabelVerdict::Unanswerable => "unanswerable",
            LabelVerdict::Skip => "skip",
        }
    }
}

/// An error reading or writing labels: the file (and line), and what is wrong.
#[derive(Debug, thiserror::Error)]
pub enum LabelError {
    #[error("cannot use the label file {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    /// A line of the label file that does not parse (file and line named), or a query log
    /// that cannot be read.
    #[error(transparent)]
    Log(#[from] crate::ReadError),
}

fn io_error(path: &Path) -> impl FnOnce(std::io::Error) -> LabelError + '_ {
    move |source| LabelError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Every label stored in `dir`, in the order written (none when there is no label file yet).
/// A torn last line is skipped; any other line that does not parse is an error naming it.
pub fn read_labels(dir: &Path) -> Result<Vec<Label>, LabelError> {
    let path = dir.join(LABELS_FILE);
    match std::fs::read(&path) {
        Ok(bytes) => Ok(parse_json_lines(&path, &bytes)?.0),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(io_error(&path)(e)),
    }
}

/// The last label of each request id, ordered by when that last label was written (oldest
/// first).
pub fn latest(labels: &[Label]) -> Vec<&Label> {
    let mut last: HashMap<&str, usize> = HashMap::new();
    for (i, label) in labels.iter().enumerate() {
        last.insert(&label.request_id, i);
    }
    let mut positions: Vec<usize> = last.into_values().collect();
    positions.sort_unstable();
    positions.into_iter().map(|i| &labels[i]).collect()
}

/// How many request ids have each verdict as their last label.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct LabelCounts {
    pub answers: usize,
    pub unanswerable: usize,
    pub skipped: usize,
}

impl LabelCounts {
    /// The counts of `labels` (last labels, see [`latest`]).
    pub fn of<'a>(labels: impl IntoIterator<Item = &'a Label>) -> Self {
        let mut counts = LabelCounts::default();
        for label in labels {
            match label.verdict {
                LabelVerdict::Answer => counts.answers += 1,
                LabelVerdict::Unanswerable => counts.unanswerable += 1,
                LabelVerdict::Skip => counts.skipped += 1,
            }
        }
        counts
    }
}

/// The labels of one log directory, open for appending.
#[derive(Debug)]
pub struct LabelStore {
    path: PathBuf,
    file: File,
    /// Bytes of complete lines in the file: where the next label starts.
    len: u64,
    labels: Vec<Label>,
}

impl LabelStore {
    /// Opens (or creates) `dir/labels.jsonl` and loads its labels; a torn last line is cut off.
    pub fn open(dir: &Path) -> Result<Self, LabelError> {
        std::fs::create_dir_all(dir).map_err(io_error(dir))?;
        let path = dir.join(LABELS_FILE);
        let existed = path.exists();
        let mut file = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .open(&path)
            .map_err(io_error(&path))?;
        let mut text = Vec::new();
        file.read_to_end(&mut text).map_err(io_error(&path))?;
        let (labels, mut complete) = parse_json_lines(&path, &text)?;
        if complete < text.len() {
            file.set_len(complete as u64).map_err(io_error(&path))?;
            file.sync_data().map_err(io_error(&path))?;
        } else if !text.is_empty() && !text.ends_with(b"\n") {
            // A whole label without its newline (written by hand): end its line.
            file.write_all(b"\n")
                .and_then(|()| file.sync_data())
                .map_err(io_error(&path))?;
            complete += 1;
        }
        if !existed {
            sync_dir(dir)?;
        }
        Ok(LabelStore {
            path,
            file,
            len: complete as u64,
            labels,
        })
    }

    /// Appends `label` and waits until it is on disk. On failure the file is cut back to the
    /// labels before it, so a half-written line never precedes the next label.
    pub fn append(&mut self, label: Label) -> Result<(), LabelError> {
        let mut line = serde_json::to_string(&label).expect("a label serialises");
        line.push('\n');
        let written = self
            .file
            .write_all(line.as_bytes())
            .and_then(|()| self.file.sync_data());
        if let Err(source) = written {
            let _ = self.file.set_len(self.len);
            return Err(io_error(&self.path)(source));
        }
        self.len += line.len() as u64;
        self.labels.push(label);
        Ok(())
    }

    /// Every label, in the order written.
    pub fn labels(&self) -> &[Label] {
        &self.labels
    }

    /// The last label of each request id (see [`latest`]).
    pub fn latest(&self) -> Vec<&Label> {
        latest(&self.labels)
    }

    /// The file the labels are kept in.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// Makes a new file's directory entry durable (the file's own fsync does not cover it).
fn sync_dir(dir: &Path) -> Result<(), LabelError> {
    lector_index::sync_dir(dir).map_err(io_error(dir))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn label(id: &str, verdict: LabelVerdict) -> Label {
        Label {
            time: "2026-12-02T13:00:00.000Z".into(),
            request_id: id.into(),
            question: format!("question {id}?"),
            verdict,
            doc_id: None,
            start: None,
            end: None,
            text: None,
        }
    }

    fn ids(labels: &[&Label]) -> Vec<(String, LabelVerdict)> {
        labels
            .iter()
            .map(|l| (l.request_id.clone(), l.verdict))
            .collect()
    }

    #[test]
    fn an_appended_label_is_in_the_file_before_the_store_is_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = LabelStore::open(dir.path()).unwrap();
        store
            .append(Label {
                doc_id: Some("Zürich".into()),
                start: Some(3),
                end: Some(8),
                text: Some("Zür😀ch".into()),
                ..label("a", LabelVerdict::Answer)
            })
            .unwrap();
        // A second reader, while the store is still open: the line is complete on disk.
        let text = std::fs::read_to_string(dir.path().join(LABELS_FILE)).unwrap();
        assert!(text.ends_with('\n'), "{text}");
        let read = read_labels(dir.path()).unwrap();
        assert_eq!(read, store.labels());
        assert_eq!(read[0].text.as_deref(), Some("Zür😀ch"));
        // Fields of other verdicts are not written at all.
        store.append(label("b", LabelVerdict::Skip)).unwrap();
        let last = std::fs::read_to_string(store.path()).unwrap();
        let last = last.lines().last().unwrap();
        assert!(!last.contains("doc_id"), "{last}");
        assert!(last.contains("\"verdict\":\"skip\""), "{last}");
    }

    #[test]
    fn the_last_label_of_a_request_wins_and_orders_by_when_it_was_written() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = LabelStore::open(dir.path()).unwrap();
        store.append(label("a", LabelVerdict::Skip)).unwrap();
        store.append(label("b", LabelVerdict::Skip)).unwrap();
        store
            .append(label("a", LabelVerdict::Unanswerable))
            .unwrap();
        drop(store);
        let store = LabelStore::open(dir.path()).unwrap();
        assert_eq!(store.labels().len(), 3);
        assert_eq!(
            ids(&store.latest()),
            [
                ("b".into(), LabelVerdict::Skip),
                ("a".into(), LabelVerdict::Unanswerable)
            ]
        );
        assert_eq!(
            LabelCounts::of(store.latest()),
            LabelCounts {
                answers: 0,
                unanswerable: 1,
                skipped: 1
            }
        );
    }

    #[test]
    fn a_torn_last_line_is_skipped_and_cut_before_the_next_label() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(LABELS_FILE);
        let whole = serde_json::to_string(&label("a", LabelVerdict::Skip)).unwrap() + "\n";
        std::fs::write(&path, whole.clone() + "{\"time\":\"2026-12-02T13:0").unwrap();
        assert_eq!(read_labels(dir.path()).unwrap().len(), 1);

        let mut store = LabelStore::open(dir.path()).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), whole);
        store
            .append(label("b", LabelVerdict::Unanswerable))
            .unwrap();
        drop(store);
        let read = read_labels(dir.path()).unwrap();
        assert_eq!(
            ids(&read.iter().collect::<Vec<_>>()),
            [
                ("a".into(), LabelVerdict::Skip),
                ("b".into(), LabelVerdict::Unanswerable)
            ]
        );
    }

    #[test]
    fn a_torn_last_line_cut_inside_a_character_is_cut_off_too() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(LABELS_FILE);
        let whole = serde_json::to_string(&label("a", LabelVerdict::Skip)).unwrap() + "\n";
        let mut bytes = whole.clone().into_bytes();
        bytes.extend_from_slice("{\"question\":\"Zürich".as_bytes());
        bytes.truncate(bytes.len() - 5); // inside the two bytes of "ü"
        std::fs::write(&path, &bytes).unwrap();
        assert_eq!(read_labels(dir.path()).unwrap().len(), 1);
        let mut store = LabelStore::open(dir.path()).unwrap();
        store.append(label("b", LabelVerdict::Skip)).unwrap();
        assert_eq!(read_labels(dir.path()).unwrap().len(), 2);
        assert!(std::fs::read_to_string(&path).unwrap().starts_with(&whole));
    }

    #[test]
    fn a_complete_last_line_without_a_newline_is_kept() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(LABELS_FILE);
        let whole = serde_json::to_string(&label("a", LabelVerdict::Skip)).unwrap();
        std::fs::write(&path, &whole).unwrap();
        let mut store = LabelStore::open(dir.path()).unwrap();
        store.append(label("b", LabelVerdict::Skip)).unwrap();
        assert_eq!(read_labels(dir.path()).unwrap().len(), 2);
    }

    #[test]
    fn a_broken_line_in_the_middle_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let whole = serde_json::to_string(&label("a", LabelVerdict::Skip)).unwrap() + "\n";
        std::fs::write(
            dir.path().join(LABELS_FILE),
            format!("{whole}{{\"verdict\":\"maybe\"}}\n{whole}"),
        )
        .unwrap();
        let err = read_labels(dir.path()).unwrap_err().to_string();
        assert!(err.contains("labels.jsonl, line 2"), "{err}");
        assert!(LabelStore::open(dir.path()).is_err());
    }

    #[test]
    fn no_file_means_no_labels() {
        let dir = tempfile::tempdir().unwrap();
        assert!(read_labels(dir.path()).unwrap().is_empty());
    }
}
