//! Reading a query log as it grows: [`LogReader::refresh`] parses only what was added since its
//! last call (the growth of the files read, and new files), so a server that keeps the log's
//! entries in memory never parses the whole log again, however large it is.
//!
//! The entries are kept in shared chunks, one per file and refresh, so a [`LogEntries`] handed
//! to a request is a list of pointers: a refresh while requests hold older ones adds a chunk
//! and copies nothing. Files the writer deleted (the oldest, beyond `max_files`) take their
//! entries with them. Lines are read by the rule of [`lector_eval::jsonl`].

use crate::record::{log_files, read_lines, Entry, ReadError};
use lector_eval::jsonl::Position;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Chunks a file may collect before they are joined into one (keeps a snapshot short).
const MAX_CHUNKS_PER_FILE: usize = 32;

/// The entries of a log at one refresh, oldest first; cloning shares them.
#[derive(Debug, Clone, Default)]
pub struct LogEntries {
    chunks: Vec<Arc<[Entry]>>,
}

impl LogEntries {
    /// The entries, oldest first.
    pub fn iter(&self) -> impl Iterator<Item = &Entry> + Clone {
        self.chunks.iter().flat_map(|chunk| chunk.iter())
    }

    /// How many entries there are.
    pub fn len(&self) -> usize {
        self.chunks.iter().map(|c| c.len()).sum()
    }

    /// Whether the log holds no entry.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// One log file as read so far.
#[derive(Debug)]
struct FileRead {
    path: PathBuf,
    end: Position,
    chunks: Vec<Arc<[Entry]>>,
}

/// A log directory read incrementally (see the module documentation).
#[derive(Debug)]
pub struct LogReader {
    dir: PathBuf,
    files: Vec<FileRead>,
}

impl LogReader {
    /// A reader of the log in `dir`, which has read nothing yet.
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        LogReader {
            dir: dir.into(),
            files: Vec::new(),
        }
    }

    /// The log directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Reads what the log gained since the last call and returns all its entries. A directory
    /// that does not exist yet is an empty log. A file that shrank (replaced by hand) is read
    /// again from its start. On an error the reader keeps what it had, and retries next time.
    pub fn refresh(&mut self) -> Result<LogEntries, ReadError> {
        let paths = match log_files(&self.dir) {
            Ok(paths) => paths,
            Err(_) if !self.dir.exists() => Vec::new(),
            Err(e) => return Err(e),
        };
        let mut known = std::mem::take(&mut self.files);
        let mut files = Vec::with_capacity(paths.len());
        let mut failed = None;
        for path in paths {
            let mut file = match known.iter().position(|f| f.path == path) {
                Some(i) => known.swap_remove(i),
                None => FileRead {
                    path,
                    end: Position::default(),
                    chunks: Vec::new(),
                },
            };
            if failed.is_none() {
                failed = read_on(&mut file).err();
            }
            files.push(file);
        }
        self.files = files;
        match failed {
            Some(err) => Err(err),
            None => Ok(self.entries()),
        }
    }

    /// The entries read so far.
    fn entries(&self) -> LogEntries {
        LogEntries {
            chunks: self
                .files
                .iter()
                .flat_map(|f| f.chunks.iter().cloned())
                .collect(),
        }
    }
}

/// Parses what `file` gained since it was last read.
fn read_on(file: &mut FileRead) -> Result<(), ReadError> {
    let size = std::fs::metadata(&file.path).map_or(0, |m| m.len());
    if size < file.end.offset {
        file.end = Position::default();
        file.chunks.clear();
    }
    if size == file.end.offset {
        return Ok(());
    }
    let lines = read_lines::<Entry>(&file.path, file.end)?;
    file.end = lines.end;
    if !lines.records.is_empty() {
        let entries: Vec<Entry> = lines.records.into_iter().map(|(_, e)| e).collect();
        file.chunks.push(entries.into());
    }
    if file.chunks.len() > MAX_CHUNKS_PER_FILE {
        let joined: Vec<Entry> = file.chunks.iter().flat_map(|c| c.iter().cloned()).collect();
        file.chunks = vec![joined.into()];
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::abstained_ask;
    use std::io::Write;

    fn line(id: &str) -> String {
        serde_json::to_string(&Entry::Ask(abstained_ask(id, "Who won?"))).unwrap() + "\n"
    }

    fn ids(entries: &LogEntries) -> Vec<String> {
        entries
            .iter()
            .map(|e| match e {
                Entry::Ask(a) => a.request_id.clone(),
                Entry::Feedback(f) => f.request_id.clone(),
            })
            .collect()
    }

    fn append(path: &Path, text: &str) {
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .unwrap();
        file.write_all(text.as_bytes()).unwrap();
    }

    #[test]
    fn reads_growth_new_files_and_forgets_deleted_ones() {
        let dir = tempfile::tempdir().unwrap();
        let mut reader = LogReader::new(dir.path().join("log"));
        assert!(reader.refresh().unwrap().is_empty(), "no directory yet");
        std::fs::create_dir(dir.path().join("log")).unwrap();
        let first = dir.path().join("log/queries-20261202T120000Z-000000.jsonl");
        let second = dir.path().join("log/queries-20261202T130000Z-000001.jsonl");
        append(&first, &(line("a") + &line("b")[..20]));
        let held = reader.refresh().unwrap();
        assert_eq!(ids(&held), ["a"], "the torn line waits");
        append(&first, &line("b")[20..]);
        append(&second, &line("c"));
        let now = reader.refresh().unwrap();
        assert_eq!(ids(&now), ["a", "b", "c"]);
        assert_eq!(ids(&held), ["a"], "an earlier snapshot is unchanged");
        assert!(
            Arc::ptr_eq(&held.chunks[0], &now.chunks[0]),
            "entries read before are shared, not copied"
        );
        std::fs::remove_file(&first).unwrap();
        append(&second, &line("d"));
        assert_eq!(ids(&reader.refresh().unwrap()), ["c", "d"]);
        // A file that shrank is read again from its start.
        std::fs::write(&second, line("e")).unwrap();
        assert_eq!(ids(&reader.refresh().unwrap()), ["e"]);
    }

    #[test]
    fn many_small_refreshes_are_joined_into_one_chunk() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("queries-20261202T120000Z-000000.jsonl");
        let mut reader = LogReader::new(dir.path());
        for i in 0..=MAX_CHUNKS_PER_FILE {
            append(&path, &line(&format!("{i}")));
            reader.refresh().unwrap();
        }
        let entries = reader.refresh().unwrap();
        assert_eq!(entries.chunks.len(), 1);
        assert_eq!(entries.len(), MAX_CHUNKS_PER_FILE + 1);
        assert_eq!(
            ids(&entries)[MAX_CHUNKS_PER_FILE],
            MAX_CHUNKS_PER_FILE.to_string()
        );
    }

    #[test]
    fn a_bad_line_is_an_error_and_the_reader_keeps_what_it_had() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("queries-20261202T120000Z-000000.jsonl");
        append(&path, &line("a"));
        let mut reader = LogReader::new(dir.path());
        assert_eq!(reader.refresh().unwrap().len(), 1);
        append(&path, "{\"type\":\"nope\"}\n");
        let err = reader.refresh().unwrap_err().to_string();
        assert!(err.contains("000000.jsonl, line 2"), "{err}");
        assert_eq!(reader.entries().len(), 1);
    }
}
