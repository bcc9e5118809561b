//! The lines of a query log: one JSON object per line, `"type": "ask"` or `"type": "feedback"`,
//! and how to read them back (all files of a log directory, oldest first, by the one JSON-lines
//! rule of [`lector_eval::jsonl`]).

use lector_eval::jsonl::{Lines, Position};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// One line of the log.
// Most lines are asks, so boxing them to shrink the rare feedback would only add allocations.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Entry {
    /// A question and what the server answered.
    Ask(AskRecord),
    /// A user's verdict on an earlier answer.
    Feedback(FeedbackRecord),
}

/// A question asked over `POST /v1/ask` and its answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AskRecord {
    /// When the answer was sent: RFC 3339, UTC, milliseconds ([`crate::time::format`]).
    pub time: String,
    /// The id the client received (`request_id` in the body, `x-request-id` header).
    pub request_id: String,
    /// The question, masked when the server redacts ([`crate::redact`]), like every free text
    /// of the record ([`crate::masked_record`]).
    pub question: String,
    /// Whether redaction masked anything in the record: the question, the answer, a runner-up
    /// or an unsupported sentence.
    pub redacted: bool,
    /// How the question was asked.
    pub settings: AskSettings,
    /// The answer; `None` when the server abstained (extractive) or refused (generative).
    pub answer: Option<LoggedAnswer>,
    /// Why there is no answer (`below_threshold`, `no_span`, `no_passages`, `refused`).
    pub abstention: Option<String>,
    /// Extractive: the no-answer probability of the top candidate, and the threshold it was
    /// compared with (abstain when above). Generative: `None`.
    pub na_prob: Option<f64>,
    pub threshold: Option<f64>,
    /// Extractive: `1 - na_prob`, the probability that the passages hold an answer (the score
    /// the abstention compares). Generative: `None`.
    pub confidence: Option<f64>,
    /// The candidates after the answer, best first (at most [`RUNNER_UPS`]).
    pub runner_ups: Vec<LoggedCandidate>,
    /// The passages read (extractive) or given to the generator, in rank order.
    pub passages: Vec<LoggedPassage>,
    /// Generative: sentences of the answer that no passage supports (empty when all are).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unsupported: Vec<String>,
    /// Milliseconds per stage.
    pub timings: LoggedTimings,
}

/// Runner-ups kept per logged ask.
pub const RUNNER_UPS: usize = 3;

/// The settings of one ask.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AskSettings {
    /// `extractive` or `generative`.
    pub mode: String,
    /// `bm25`, `dense` or `hybrid`.
    pub retrieval: String,
    /// Passages retrieved and read.
    pub k: usize,
    /// Retrieval hops (1 or 2).
    pub hops: usize,
    pub vote: bool,
    pub prefer_recent: bool,
    pub rank_prior: f64,
    /// The tenant of the key that asked (`lector serve --keys`): labelling shows a tenant's
    /// key only its own tenant's asks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
}

/// An answer and where it was found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoggedAnswer {
    /// The answer text.
    pub text: String,
    /// Extractive: the candidate's score; generative: `None`.
    pub score: Option<f64>,
    /// Extractive: the document, the passage's position in it, and the answer's character
    /// offsets (Unicode scalar values) in the document text. Generative: `None`.
    pub doc_id: Option<String>,
    pub passage: Option<usize>,
    pub start: Option<usize>,
    pub end: Option<usize>,
}

/// A runner-up answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoggedCandidate {
    pub text: String,
    pub score: f64,
    pub doc_id: String,
}

/// A passage read for the answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoggedPassage {
    pub doc_id: String,
    /// Position of the passage in its document (0-based).
    pub passage: usize,
    /// Character offsets of the passage in the document text.
    pub start: usize,
    pub end: usize,
    /// The retrieval score (the fused score with hybrid retrieval).
    pub score: f64,
}

/// Time per stage, in milliseconds (0 for stages an ask did not run).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LoggedTimings {
    pub retrieve_ms: f64,
    pub rerank_ms: f64,
    pub read_ms: f64,
    pub aggregate_ms: f64,
    pub generate_ms: f64,
    /// From admission to the answer.
    pub total_ms: f64,
}

/// A verdict sent to `POST /v1/feedback`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FeedbackRecord {
    /// When it arrived (RFC 3339, UTC).
    pub time: String,
    /// The ask it judges.
    pub request_id: String,
    pub verdict: Verdict,
    /// The answer the user says is right (redacted like questions).
    pub correct_answer: Option<String>,
    /// A free-text note (redacted like questions).
    pub note: Option<String>,
    /// The tenant of the key that sent it: it counts only for that tenant's ask.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
}

impl FeedbackRecord {
    /// Whether this feedback may judge `ask`: the same request id, sent by a key of the ask's
    /// tenant (another tenant cannot vote on an ask it never saw).
    pub fn judges(&self, ask: &AskRecord) -> bool {
        self.request_id == ask.request_id && self.tenant == ask.settings.tenant
    }
}

/// Thumbs up or down.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Up,
    Down,
}

/// An error reading a log: the file and line, and what is wrong.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("cannot read the query log {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}, line {line}: {message}")]
    Line {
        path: PathBuf,
        line: usize,
        message: String,
    },
}

/// Whether `name` is a query log file (`queries-*.jsonl`).
pub fn is_log_file(name: &str) -> bool {
    name.starts_with("queries-") && name.ends_with(".jsonl")
}

/// The log files of `dir`, oldest first: by the sequence number the writer gives each new
/// file (`queries-<UTC start>-<sequence>.jsonl`), which also orders files started within one
/// second or across restarts.
pub fn log_files(dir: &Path) -> Result<Vec<PathBuf>, ReadError> {
    let io = |source| ReadError::Io {
        path: dir.to_path_buf(),
        source,
    };
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(io)? {
        let entry = entry.map_err(io)?;
        let name = entry.file_name();
        if name.to_str().is_some_and(is_log_file) {
            files.push(entry.path());
        }
    }
    files.sort_by_key(|p| (sequence_of(p), p.clone()));
    Ok(files)
}

/// The sequence number of a log file's name.
pub(crate) fn sequence_of(path: &Path) -> Option<u64> {
    let stem = path.file_stem()?.to_str()?;
    stem.rsplit('-').next()?.parse().ok()
}

/// Every entry of the log in `dir`, oldest first, read by the rule of [`lector_eval::jsonl`]:
/// a torn last line of a file (the server killed, or the disk full, while writing it) is left
/// out; any other line that does not parse is an error naming its file and line.
pub fn read_log(dir: &Path) -> Result<Vec<Entry>, ReadError> {
    let mut entries = Vec::new();
    for path in log_files(dir)? {
        let lines = read_lines::<Entry>(&path, Position::default())?;
        entries.extend(lines.records.into_iter().map(|(_, entry)| entry));
    }
    Ok(entries)
}

/// The records of the JSON-lines file at `path` after `from` ([`lector_eval::jsonl::read_from`]).
pub fn read_lines<T: DeserializeOwned>(path: &Path, from: Position) -> Result<Lines<T>, ReadError> {
    lector_eval::jsonl::read_from(path, from).map_err(ReadError::from)
}

/// The records of `bytes`, the whole of the JSON-lines file at `path`, and the byte length of
/// what was read: where an append must start, since a torn last line is left out of both.
pub(crate) fn parse_json_lines<T: DeserializeOwned>(
    path: &Path,
    bytes: &[u8],
) -> Result<(Vec<T>, usize), ReadError> {
    let lines = lector_eval::jsonl::parse(path, bytes, Position::default())?;
    let records = lines.records.into_iter().map(|(_, r)| r).collect();
    Ok((records, lines.end.offset as usize))
}

impl From<lector_eval::Error> for ReadError {
    fn from(error: lector_eval::Error) -> Self {
        match error {
            lector_eval::Error::Io { path, source } => ReadError::Io { path, source },
            lector_eval::Error::Parse {
                path,
                line,
                column,
                message,
            } => ReadError::Line {
                path,
                line,
                message: format!("{message} (column {column})"),
            },
            other => ReadError::Io {
                path: PathBuf::new(),
                source: std::io::Error::other(other.to_string()),
            },
        }
    }
}

/// A logged extractive abstention (BM25, k 5, na_prob 0.9 against 0.5), for tests to adjust.
#[cfg(test)]
pub(crate) fn abstained_ask(id: &str, question: &str) -> AskRecord {
    AskRecord {
        time: "2026-12-02T13:00:00.000Z".into(),
        request_id: id.into(),
        question: question.into(),
        redacted: false,
        settings: AskSettings {
            mode: "extractive".into(),
            retrieval: "bm25".into(),
            k: 5,
            hops: 1,
            vote: false,
            prefer_recent: false,
            rank_prior: 1.0,
            tenant: None,
        },
        answer: None,
        abstention: Some("below_threshold".into()),
        na_prob: Some(0.9),
        threshold: Some(0.5),
        confidence: Some(0.1),
        runner_ups: vec![],
        passages: vec![],
        unsupported: vec![],
        timings: LoggedTimings::default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ask(id: &str) -> Entry {
        Entry::Ask(abstained_ask(id, "Who won?"))
    }

    #[test]
    fn reads_files_in_order_skips_a_torn_tail_and_names_a_bad_line() {
        let dir = tempfile::tempdir().unwrap();
        let line = |e: &Entry| serde_json::to_string(e).unwrap() + "\n";
        std::fs::write(
            dir.path().join("queries-20261202T130000Z-000001.jsonl"),
            line(&ask("b")) + "{\"type\":\"ask\",\"ti",
        )
        .unwrap();
        std::fs::write(
            dir.path().join("queries-20261202T120000Z-000000.jsonl"),
            line(&ask("a")),
        )
        .unwrap();
        std::fs::write(dir.path().join("labels.jsonl"), "not a log line\n").unwrap();
        let ids: Vec<String> = read_log(dir.path())
            .unwrap()
            .into_iter()
            .map(|e| match e {
                Entry::Ask(a) => a.request_id,
                Entry::Feedback(f) => f.request_id,
            })
            .collect();
        assert_eq!(ids, ["a", "b"]);

        let bad = dir.path().join("queries-20261202T140000Z-000002.jsonl");
        std::fs::write(&bad, "{\"type\":\"nope\"}\n").unwrap();
        let err = read_log(dir.path()).unwrap_err().to_string();
        assert!(err.contains("000002.jsonl, line 1"), "{err}");
    }

    #[test]
    fn a_log_torn_inside_a_character_is_read_for_labelling_drift_and_export() {
        use crate::label::{export_squad, Label, LabelVerdict};
        let dir = tempfile::tempdir().unwrap();
        let asked = |id: &str, question: &str| {
            let mut ask = abstained_ask(id, question);
            ask.passages.push(crate::LoggedPassage {
                doc_id: "gare".into(),
                passage: 0,
                start: 0,
                end: 20,
                score: 1.0,
            });
            Entry::Ask(ask)
        };
        let mut bytes = Vec::new();
        for (id, question) in [("a", "Où est la gare ?"), ("b", "Quand part le train ?")] {
            bytes.extend(serde_json::to_string(&asked(id, question)).unwrap().bytes());
            bytes.push(b'\n');
        }
        // The server was killed inside the two bytes of "é".
        let torn = serde_json::to_string(&asked("c", "Qui a gagné ?")).unwrap();
        bytes.extend_from_slice(&torn.as_bytes()[..torn.find('é').unwrap() + 1]);
        std::fs::write(
            dir.path().join("queries-20261202T130000Z-000000.jsonl"),
            bytes,
        )
        .unwrap();

        let entries = read_log(dir.path()).unwrap();
        assert_eq!(entries.len(), 2);
        assert_eq!(crate::drift::load_asks(dir.path()).unwrap().len(), 2);
        let label = Label {
            time: "2026-12-02T14:00:00.000Z".into(),
            request_id: "a".into(),
            question: "Où est la gare ?".into(),
            verdict: LabelVerdict::Unanswerable,
            doc_id: None,
            start: None,
            end: None,
            text: None,
        };
        let documents = std::collections::HashMap::from([(
            "gare".to_string(),
            "La gare est au nord.".to_string(),
        )]);
        let export = export_squad(&[label], &entries, &documents);
        assert_eq!(export.unanswerable, 1, "{:?}", export.warnings);
    }
}
