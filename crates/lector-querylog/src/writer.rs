//! The background writer of the query log: lines are handed over through a bounded queue, so
//! an ask never waits for the disk; a full queue drops the line and counts it.
//!
//! Files are `queries-<UTC start>-<sequence>.jsonl`; their names sort in the order they were
//! started, also across restarts (the sequence continues from the files already there). A new
//! file starts when the current one would pass `max_file_bytes` or is older than
//! `max_file_age`; beyond `max_files` files the oldest are deleted. Lines reach the operating
//! system whenever the queue runs empty (no fsync: a power loss may take the last lines).
//!
//! A line never continues a torn one: when a write fails part-way (a full disk), the file is
//! cut back to its last complete line, and when even that fails the next line starts a new
//! file, whose reader ([`lector_eval::jsonl`]) leaves the old file's torn last line out.

use crate::record::{log_files, sequence_of, Entry, ReadError};
use crate::time;
use crate::LogConfig;
use std::fs::File;
use std::io::{self, Write};
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
        if let Err(err) = files.flush(counters) {
            eprintln!("error: query log: {err}");
        }
    }
    let _ = files.flush(counters);
}

/// Bytes of lines gathered before they are written out, even while the queue is not empty.
const BATCH_BYTES: usize = 64 << 10;

/// The current log file and when to start the next.
struct RotatingFile {
    dir: PathBuf,
    max_bytes: u64,
    max_age: std::time::Duration,
    max_files: usize,
    next_sequence: u64,
    opener: Opener,
    current: Box<dyn LogFile>,
    /// Bytes of the current file: complete lines only.
    bytes: u64,
    /// Lines not written yet, each with its newline, and how many.
    batch: Vec<u8>,
    batch_lines: u64,
    /// The current file may end in part of a line that could not be cut off: the next line
    /// goes to a new file.
    torn: bool,
    started: Instant,
}

/// The file a log writes to: a real file, or in tests one that fails on demand.
trait LogFile: Write + Send {
    /// Cuts the file to `len` bytes.
    fn cut(&mut self, len: u64) -> io::Result<()>;
}

impl LogFile for File {
    fn cut(&mut self, len: u64) -> io::Result<()> {
        self.set_len(len)
    }
}

/// Creates a new log file at a path.
type Opener = fn(&Path) -> io::Result<Box<dyn LogFile>>;

fn open_real(path: &Path) -> io::Result<Box<dyn LogFile>> {
    let file = File::options().create_new(true).append(true).open(path)?;
    Ok(Box::new(file))
}

impl RotatingFile {
    fn open(config: &LogConfig) -> io::Result<Self> {
        Self::open_with(config, open_real)
    }

    fn open_with(config: &LogConfig, opener: Opener) -> io::Result<Self> {
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
            opener,
            current: create(&config.dir, sequence, opener)?,
            bytes: 0,
            batch: Vec::new(),
            batch_lines: 0,
            torn: false,
            started: Instant::now(),
        };
        files.prune()?;
        Ok(files)
    }

    /// Queues `line` for the file, writing the queue out when it is large, and starting a new
    /// file first when the current one is full, old or torn.
    fn write_line(&mut self, line: &str, counters: &Counters) {
        let len = line.len() as u64 + 1;
        let size = self.bytes + self.batch.len() as u64;
        let full = size > 0 && size + len > self.max_bytes;
        if full || self.torn || self.started.elapsed() >= self.max_age {
            if let Err(err) = self.start_file(counters) {
                eprintln!("error: query log: cannot start a new file: {err}");
            }
        }
        if self.torn {
            // No file to write to without gluing this line onto a torn one.
            counters.failed.fetch_add(1, Ordering::Relaxed);
            return;
        }
        self.batch.extend_from_slice(line.as_bytes());
        self.batch.push(b'\n');
        self.batch_lines += 1;
        if self.batch.len() >= BATCH_BYTES {
            if let Err(err) = self.flush(counters) {
                eprintln!("error: query log: {err}");
            }
        }
    }

    /// Writes the queued lines out. When that fails, they are counted as failed and the file is
    /// cut back to the lines before them (or, when it cannot be, marked torn).
    fn flush(&mut self, counters: &Counters) -> io::Result<()> {
        if self.batch.is_empty() {
            return Ok(());
        }
        let lines = std::mem::take(&mut self.batch_lines);
        let written = self
            .current
            .write_all(&self.batch)
            .and_then(|()| self.current.flush());
        match &written {
            Ok(()) => {
                self.bytes += self.batch.len() as u64;
                counters.written.fetch_add(lines, Ordering::Relaxed);
            }
            Err(_) => {
                counters.failed.fetch_add(lines, Ordering::Relaxed);
                self.torn = self.current.cut(self.bytes).is_err();
            }
        }
        self.batch.clear();
        written
    }

    /// Finishes the current file and starts the next.
    fn start_file(&mut self, counters: &Counters) -> io::Result<()> {
        if let Err(err) = self.flush(counters) {
            eprintln!("error: query log: {err}");
        }
        self.current = create(&self.dir, self.next_sequence, self.opener)?;
        self.next_sequence += 1;
        self.bytes = 0;
        self.torn = false;
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
fn create(dir: &Path, sequence: u64, opener: Opener) -> io::Result<Box<dyn LogFile>> {
    let name = format!(
        "queries-{}-{sequence:06}.jsonl",
        time::compact(SystemTime::now())
    );
    opener(&dir.join(name))
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
    use std::sync::atomic::{AtomicBool, AtomicUsize};
    use std::time::Duration;

    fn feedback(i: usize) -> Entry {
        Entry::Feedback(FeedbackRecord {
            tenant: None,
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

    /// Bytes the next failing write lets through before it fails (`usize::MAX`: none fails).
    static FAIL_AFTER: AtomicUsize = AtomicUsize::new(usize::MAX);

    /// A real log file whose next write, when armed, is cut short like one hitting a full disk:
    /// the bytes allowed reach the file, then the write fails once.
    struct CutShort(File);

    impl Write for CutShort {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            match FAIL_AFTER.swap(usize::MAX, Ordering::SeqCst) {
                usize::MAX => self.0.write(buf),
                0 => Err(io::Error::other("no space left (test)")),
                allowed => {
                    FAIL_AFTER.store(0, Ordering::SeqCst);
                    self.0.write(&buf[..allowed.min(buf.len())])
                }
            }
        }

        fn flush(&mut self) -> io::Result<()> {
            self.0.flush()
        }
    }

    /// Held by the tests that arm the failures above, which are shared.
    static ARMING: Mutex<()> = Mutex::new(());

    /// The next cut fails too (a file system that refuses every change).
    static FAIL_CUT: AtomicBool = AtomicBool::new(false);

    impl LogFile for CutShort {
        fn cut(&mut self, len: u64) -> io::Result<()> {
            match FAIL_CUT.swap(false, Ordering::SeqCst) {
                true => Err(io::Error::other("read-only (test)")),
                false => self.0.set_len(len),
            }
        }
    }

    fn open_cut_short(path: &Path) -> io::Result<Box<dyn LogFile>> {
        let file = File::options().create_new(true).append(true).open(path)?;
        Ok(Box::new(CutShort(file)))
    }

    #[test]
    fn a_write_cut_short_leaves_no_torn_line_for_the_next_to_glue_onto() {
        let _armed = ARMING.lock().unwrap_or_else(|e| e.into_inner());
        let dir = tempfile::tempdir().unwrap();
        let config = LogConfig::new(dir.path());
        let mut files = RotatingFile::open_with(&config, open_cut_short).unwrap();
        let counters = Counters::default();
        // Lines longer than a write buffer (an ask logging many passages) go out on their own.
        let long = |i: usize| {
            let mut entry = feedback(i);
            if let Entry::Feedback(f) = &mut entry {
                f.note = Some("x".repeat(20_000));
            }
            serde_json::to_string(&entry).unwrap()
        };
        files.write_line(&long(0), &counters);
        files.flush(&counters).unwrap();
        FAIL_AFTER.store(5_000, Ordering::SeqCst);
        files.write_line(&long(1), &counters);
        assert!(files.flush(&counters).is_err());
        for i in 2..4 {
            files.write_line(&long(i), &counters);
        }
        files.flush(&counters).unwrap();
        let read = ids(dir.path());
        let written = counters.written.load(Ordering::Relaxed);
        let failed = counters.failed.load(Ordering::Relaxed);
        assert_eq!(written + failed, 4);
        assert_eq!(read.len() as u64, written, "{read:?}");
        assert!(read.contains(&format!("{:016x}", 3)), "{read:?}");
    }

    #[test]
    fn a_torn_line_that_cannot_be_cut_off_ends_its_file() {
        let _armed = ARMING.lock().unwrap_or_else(|e| e.into_inner());
        let dir = tempfile::tempdir().unwrap();
        let mut files =
            RotatingFile::open_with(&LogConfig::new(dir.path()), open_cut_short).unwrap();
        let counters = Counters::default();
        files.write_line(&serde_json::to_string(&feedback(0)).unwrap(), &counters);
        FAIL_AFTER.store(30, Ordering::SeqCst);
        FAIL_CUT.store(true, Ordering::SeqCst);
        assert!(files.flush(&counters).is_err());
        files.write_line(&serde_json::to_string(&feedback(1)).unwrap(), &counters);
        files.flush(&counters).unwrap();
        let logs = log_files(dir.path()).unwrap();
        assert_eq!(logs.len(), 2, "the next line started a new file");
        assert_eq!(
            std::fs::metadata(&logs[0]).unwrap().len(),
            30,
            "the torn line is left"
        );
        assert_eq!(ids(dir.path()), [format!("{:016x}", 1)]);
        assert_eq!(counters.failed.load(Ordering::Relaxed), 1);
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
