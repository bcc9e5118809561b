//! The background writer of the query log: lines are handed over through a bounded queue, so
//! an ask never waits for the disk; a full queue drops the line and counts it.
//!
//! Files are `queries-<UTC start>-<sequence>.jsonl`; their names sort in the order they were
//! started, also across restarts (the sequence continues from the files already there). A new
//! file starts when the current one would pass `max_file_bytes` or is older than
//! `max_file_age`; beyond `max_files` files the oldest are deleted. Lines reach the operating
//! system whenever the queue runs empty (no fsync: a power loss may take the last lines).

use crate::record::{log_files, sequence_of, Entry, ReadError};
use crate::time;
use crate::LogConfig;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Instant, SystemTime};

/// A running query log.
pub struct QueryLog {
    sender: Mutex<Option<SyncSender<String>>>,
    thread: Mutex<Option<JoinHandle<()>>>,
    counters: Arc<Counters>,
    config: LogConfig,
}

/// What the log has done, for `/metrics`.
#[derive(Debug, Default)]
pub struct Counters {
    /// Lines written.
    pub written: AtomicU64,
    /// Lines dropped because the queue was full (or the writer had stopped).
    pub dropped: AtomicU64,
    /// Lines lost to write errors (each also reported on stderr).
    pub failed: AtomicU64,
}

impl QueryLog {
    /// Creates `config.dir` if needed and starts the writer thread (the first file is created
    /// now, so a directory that cannot be written is an error at startup, not later).
    pub fn open(config: &LogConfig) -> io::Result<Self> {
        std::fs::create_dir_all(&config.dir)?;
        let files = RotatingFile::open(config)?;
        let (sender, receiver) = mpsc::sync_channel(config.queue.max(1));
        let counters = Arc::new(Counters::default());
        let shared = counters.clone();
        let thread = std::thread::Builder::new()
            .name("lector-query-log".into())
            .spawn(move || write_lines(receiver, files, &shared))?;
        Ok(QueryLog {
            sender: Mutex::new(Some(sender)),
            thread: Mutex::new(Some(thread)),
            counters,
            config: config.clone(),
        })
    }

    /// The settings it was opened with.
    pub fn config(&self) -> &LogConfig {
        &self.config
    }

    /// Queues one entry; never blocks. `false` when it was dropped (queue full, or closed).
    pub fn write(&self, entry: &Entry) -> bool {
        let line = match serde_json::to_string(entry) {
            Ok(line) => line,
            Err(_) => return self.dropped(),
        };
        let sender = self.sender.lock().unwrap_or_else(|e| e.into_inner());
        match sender.as_ref().map(|s| s.try_send(line)) {
            Some(Ok(())) => true,
            Some(Err(TrySendError::Full(_) | TrySendError::Disconnected(_))) | None => {
                self.dropped()
            }
        }
    }

    fn dropped(&self) -> bool {
        self.counters.dropped.fetch_add(1, Ordering::Relaxed);
        false
    }

    /// Lines written, dropped and failed so far.
    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    /// Writes what is queued and stops the writer; later entries are dropped.
    pub fn close(&self) {
        self.sender.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(thread) = self.thread.lock().unwrap_or_else(|e| e.into_inner()).take() {
            let _ = thread.join();
        }
    }
}

impl Drop for QueryLog {
    fn drop(&mut self) {
        self.close();
    }
}

/// The writer thread: takes lines until every sender is gone, flushing when the queue is empty.
fn write_lines(receiver: Receiver<String>, mut files: RotatingFile, counters: &Counters) {
    while let Ok(line) = receiver.recv() {
        files.write_line(&line, counters);
        while let Ok(line) = receiver.try_recv() {
            files.write_line(&line, counters);
        }
        if let Err(err) = files.flush() {
            eprintln!("error: query log: {err}");
        }
    }
    let _ = files.flush();
}

/// The current log file and when to start the next.
struct RotatingFile {
    dir: PathBuf,
    max_bytes: u64,
    max_age: std::time::Duration,
    max_files: usize,
    next_sequence: u64,
    current: BufWriter<File>,
    bytes: u64,
    started: Instant,
}

impl RotatingFile {
    fn open(config: &LogConfig) -> io::Result<Self> {
        let sequence = existing(&config.dir)?
            .iter()
            .filter_map(|p| sequence_of(p))
            .max()
            .map_or(0, |s| s + 1);
        let files = RotatingFile {
            dir: config.dir.clone(),
            max_bytes: config.max_file_bytes.max(1),
            max_age: config.max_file_age,
            max_files: config.max_files.max(1),
            next_sequence: sequence + 1,
            current: create(&config.dir, sequence)?,
            bytes: 0,
            started: Instant::now(),
        };
        files.prune()?;
        Ok(files)
    }

    fn write_line(&mut self, line: &str, counters: &Counters) {
        let len = line.len() as u64 + 1;
        let full = self.bytes > 0 && self.bytes + len > self.max_bytes;
        if full || self.started.elapsed() >= self.max_age {
            if let Err(err) = self.start_file() {
                eprintln!("error: query log: cannot start a new file: {err}");
            }
        }
        let written = self
            .current
            .write_all(line.as_bytes())
            .and_then(|()| self.current.write_all(b"\n"));
        match written {
            Ok(()) => {
                self.bytes += len;
                counters.written.fetch_add(1, Ordering::Relaxed);
            }
            Err(err) => {
                counters.failed.fetch_add(1, Ordering::Relaxed);
                eprintln!("error: query log: {err}");
            }
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        self.current.flush()
    }

    /// Finishes the current file and starts the next.
    fn start_file(&mut self) -> io::Result<()> {
        self.current.flush()?;
        self.current = create(&self.dir, self.next_sequence)?;
        self.next_sequence += 1;
        self.bytes = 0;
        self.started = Instant::now();
        self.prune()
    }

    /// Deletes the oldest files beyond `max_files`.
    fn prune(&self) -> io::Result<()> {
        let files = existing(&self.dir)?;
        for old in files
            .iter()
            .take(files.len().saturating_sub(self.max_files))
        {
            std::fs::remove_file(old)?;
        }
        Ok(())
    }
}

/// A new, empty log file with this sequence number.
fn create(dir: &Path, sequence: u64) -> io::Result<BufWriter<File>> {
    let name = format!(
        "queries-{}-{sequence:06}.jsonl",
        time::compact(SystemTime::now())
    );
    let file = File::options()
        .create_new(true)
        .append(true)
        .open(dir.join(name))?;
    Ok(BufWriter::new(file))
}

/// The log files in `dir`, oldest first.
fn existing(dir: &Path) -> io::Result<Vec<PathBuf>> {
    log_files(dir).map_err(|e| match e {
        ReadError::Io { source, .. } => source,
        other => io::Error::other(other.to_string()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{read_log, FeedbackRecord, Verdict};
    use std::time::Duration;

    fn feedback(i: usize) -> Entry {
        Entry::Feedback(FeedbackRecord {
            time: time::format(SystemTime::now()),
            request_id: format!("{i:016x}"),
            verdict: Verdict::Up,
            correct_answer: None,
            note: Some("x".repeat(100)),
        })
    }

    fn ids(dir: &Path) -> Vec<String> {
        read_log(dir)
            .unwrap()
            .into_iter()
            .map(|e| match e {
                Entry::Feedback(f) => f.request_id,
                Entry::Ask(a) => a.request_id,
            })
            .collect()
    }

    #[test]
    fn rotates_by_size_keeps_the_newest_files_and_continues_after_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let line_bytes = serde_json::to_string(&feedback(0)).unwrap().len() as u64 + 1;
        let config = LogConfig {
            max_file_bytes: 3 * line_bytes,
            max_files: 2,
            ..LogConfig::new(dir.path())
        };
        let log = QueryLog::open(&config).unwrap();
        for i in 0..10 {
            assert!(log.write(&feedback(i)));
        }
        log.close();
        assert!(!log.write(&feedback(99)), "a closed log drops");
        assert_eq!(log.counters().written.load(Ordering::Relaxed), 10);
        assert_eq!(log.counters().dropped.load(Ordering::Relaxed), 1);
        // 3 lines per file: files 0..3, 3..6, 6..9, 9; the two newest remain.
        let files = log_files(dir.path()).unwrap();
        assert_eq!(files.len(), 2);
        let kept: Vec<String> = (6..10).map(|i| format!("{i:016x}")).collect();
        assert_eq!(ids(dir.path()), kept);
        for file in &files {
            assert!(file.metadata().unwrap().len() <= config.max_file_bytes);
        }

        let again = QueryLog::open(&config).unwrap();
        again.write(&feedback(10));
        again.close();
        let after = ids(dir.path());
        assert_eq!(after.last().map(String::as_str), Some("000000000000000a"));
        assert_eq!(
            after.len(),
            2,
            "the restart started a file and kept two: {after:?}"
        );
    }

    #[test]
    fn an_old_file_is_rotated_by_age() {
        let dir = tempfile::tempdir().unwrap();
        let config = LogConfig {
            max_file_age: Duration::from_millis(50),
            ..LogConfig::new(dir.path())
        };
        let log = QueryLog::open(&config).unwrap();
        log.write(&feedback(0));
        std::thread::sleep(Duration::from_millis(120));
        log.write(&feedback(1));
        log.close();
        assert_eq!(log_files(dir.path()).unwrap().len(), 2);
        assert_eq!(ids(dir.path()).len(), 2);
    }
}
