//! lector-querylog: the query log (`lector serve --log-queries DIR`) and what is made from it.
//!
//! - [`record`]: the log's lines (one JSON object per ask and per feedback) and their reader;
//!   [`tail`]: the same, read as the log grows (only the bytes added since the last read).
//! - [`writer`]: the background writer, rotating files by size and age, so that logging never
//!   slows or fails an ask (a full queue drops the line and counts it in `/metrics`).
//! - [`redact`]: masking personal data in logged text; [`time`]: the log's time stamps.
//! - [`label`]: labels made on the labelling page, which logged question to label next, and
//!   their export as SQuAD v2.0 training data.
//! - [`drift`]: whether the questions, and how they are answered, changed between two windows
//!   of the log (`lector report drift`).
//!
//! The records of an ask are built here from a pipeline [`Response`] ([`extractive_record`]);
//! the HTTP routes that write and label them are in `lector-server`.

pub mod drift;
pub mod label;
pub mod record;
pub mod redact;
pub mod tail;
pub mod time;
pub mod writer;

pub use record::{
    read_log, AskRecord, AskSettings, Entry, FeedbackRecord, LoggedAnswer, LoggedCandidate,
    LoggedPassage, LoggedTimings, ReadError, Verdict,
};
pub use tail::{LogEntries, LogReader};
pub use writer::QueryLog;

use std::path::PathBuf;
use std::time::Duration;

/// Where and how the server logs questions (`lector_server::Config::query_log`).
#[derive(Debug, Clone)]
pub struct LogConfig {
    /// The directory of the log files (created if missing); labels made on the labelling page
    /// are kept beside them (`labels.jsonl`).
    pub dir: PathBuf,
    /// Mask e-mail addresses, phone numbers and long digit runs in every free text logged:
    /// questions, answers (extracted or generated), runner-ups, unsupported sentences and
    /// feedback ([`masked_record`]).
    pub redact: bool,
    /// Start a new file when the current one reaches this many bytes.
    pub max_file_bytes: u64,
    /// Start a new file when the current one is this old.
    pub max_file_age: Duration,
    /// Keep at most this many files, deleting the oldest: the log holds at most
    /// `max_files * max_file_bytes` bytes (plus one line).
    pub max_files: usize,
    /// Lines waiting for the writer thread; when full, new lines are dropped and counted.
    pub queue: usize,
}

impl LogConfig {
    /// Logging into `dir` with the defaults: no redaction, 64 MiB files, a new file daily,
    /// 16 files (1 GiB at most), 4,096 lines queued.
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        LogConfig {
            dir: dir.into(),
            redact: false,
            max_file_bytes: 64 << 20,
            max_file_age: Duration::from_secs(24 * 3600),
            max_files: 16,
            queue: 4096,
        }
    }
}

use lector_index::Hit;
use lector_pipeline::{Candidate, Response};
use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::SystemTime;

/// A new request id: 16 hex digits, a counter hashed with this process's random key, so ids
/// neither repeat across restarts nor reveal how many requests came before.
pub fn request_id() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    static KEY: OnceLock<RandomState> = OnceLock::new();
    let mut hasher = KEY.get_or_init(RandomState::new).build_hasher();
    hasher.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    format!("{:016x}", hasher.finish())
}

/// Whether `id` has the form of [`request_id`]'s ids.
pub fn is_request_id(id: &str) -> bool {
    id.len() == 16 && id.bytes().all(|b| b.is_ascii_hexdigit())
}

/// `text` masked when `redact` (see [`redact::redact`]), and whether anything was masked.
pub fn masked(text: &str, redact: bool) -> (String, bool) {
    match redact {
        true => redact::redact(text),
        false => (text.to_string(), false),
    }
}

/// `record` with every free text in it masked when `redact` ([`redact::redact`]): the
/// question, the answer, the runner-ups and the unsupported sentences. Answers are masked too,
/// though extracted ones are copied from the documents: a generated answer often repeats the
/// question, e-mail address and all, and a document may hold personal data as well.
/// [`AskRecord::redacted`] says whether anything was masked.
pub fn masked_record(mut record: AskRecord, redact: bool) -> AskRecord {
    if !redact {
        return record;
    }
    let mut changed = false;
    let mut mask = |text: &mut String| {
        let (masked, found) = redact::redact(text);
        *text = masked;
        changed |= found;
    };
    mask(&mut record.question);
    if let Some(answer) = record.answer.as_mut() {
        mask(&mut answer.text);
    }
    for candidate in &mut record.runner_ups {
        mask(&mut candidate.text);
    }
    record.unsupported.iter_mut().for_each(&mut mask);
    record.redacted = changed;
    record
}

/// The log line of an extractive ask, masked when `redact` ([`masked_record`]).
pub fn extractive_record(
    request_id: &str,
    settings: AskSettings,
    response: &Response,
    total_ms: f64,
    redact: bool,
) -> AskRecord {
    let skip = usize::from(response.answer.is_some());
    let t = &response.timings;
    let record = AskRecord {
        time: time::format(SystemTime::now()),
        request_id: request_id.to_string(),
        question: response.question.clone(),
        redacted: false,
        settings,
        answer: response.answer.as_ref().map(|c| LoggedAnswer {
            text: c.text.clone(),
            score: Some(c.score),
            doc_id: Some(c.evidence.doc_id.clone()),
            passage: Some(c.evidence.passage),
            start: Some(c.evidence.start),
            end: Some(c.evidence.end),
        }),
        abstention: response.abstention.map(|a| abstention_name(a).to_string()),
        na_prob: Some(response.na_prob),
        threshold: Some(response.threshold),
        confidence: Some(1.0 - response.na_prob),
        runner_ups: runner_ups(&response.candidates[skip.min(response.candidates.len())..]),
        passages: response.passages.iter().map(|p| logged(&p.hit)).collect(),
        unsupported: Vec::new(),
        timings: LoggedTimings {
            retrieve_ms: t.retrieve_ms,
            rerank_ms: t.rerank_ms,
            read_ms: t.read_ms,
            aggregate_ms: t.aggregate_ms,
            generate_ms: 0.0,
            total_ms,
        },
    };
    masked_record(record, redact)
}

fn runner_ups(candidates: &[Candidate]) -> Vec<LoggedCandidate> {
    candidates
        .iter()
        .take(record::RUNNER_UPS)
        .map(|c| LoggedCandidate {
            text: c.text.clone(),
            score: c.score,
            doc_id: c.evidence.doc_id.clone(),
        })
        .collect()
}

/// A retrieved passage as logged.
pub fn logged(hit: &Hit) -> LoggedPassage {
    LoggedPassage {
        doc_id: hit.doc_id.clone(),
        passage: hit.passage,
        start: hit.span.char_start,
        end: hit.span.char_end,
        score: hit.score,
    }
}

/// The name an abstention has in the JSON answer.
fn abstention_name(abstention: lector_pipeline::Abstention) -> &'static str {
    use lector_pipeline::Abstention;
    match abstention {
        Abstention::NoPassages => "no_passages",
        Abstention::NoSpan => "no_span",
        Abstention::BelowThreshold => "below_threshold",
    }
}
