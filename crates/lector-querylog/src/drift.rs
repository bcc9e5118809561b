//! Drift: whether the questions users ask, and how the system answers them, have changed
//! between two windows of a query log (`lector report drift`).
//!
//! Each ask is measured (question length, terms outside the index's vocabulary, abstention,
//! confidence, top retrieval score, similarity to the nearest indexed passage;
//! [`measure`](mod@measure)); each measure is compared between the windows with a two-sample
//! test and flagged when the difference is both significant and large enough to matter
//! ([`signals`](mod@signals), docs/drift.md).

pub mod measure;
pub mod report;
pub mod signals;

pub use measure::{measure, Measured, Probe};
pub use signals::{signals, Compared, Kind, Side, Signal, Thresholds, MIN_VALUES};

use crate::record::{log_files, read_lines};
use crate::{read_log, time, AskRecord, Entry, ReadError};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// Why a drift report cannot be made.
#[derive(Debug, thiserror::Error)]
pub enum DriftError {
    /// The log cannot be read, or one of its lines does not parse. The reader's I/O error shows
    /// its cause in its message and also chains it as its source, which a report of the whole
    /// chain would print twice: this keeps the message only (no source).
    #[error("{0}")]
    Log(ReadError),
    /// The directory holds no log files.
    #[error("{dir} holds no query log files (queries-*.jsonl); `lector serve --log-queries DIR` writes them", dir = .dir.display())]
    NoLogFiles { dir: PathBuf },
    /// The log holds feedback only.
    #[error("the query log in {dir} holds no asks", dir = .dir.display())]
    NoAsks { dir: PathBuf },
    /// A logged ask whose `time` is not a time; `at` is its file and line.
    #[error("{at}: `time` is `{time}`, not an RFC 3339 time")]
    BadTime { at: String, time: String },
    /// A window with too few asks to compare.
    #[error("the {name} window ({span}) holds {asks} asks; a drift report needs at least {MIN_VALUES} in each window (widen the windows or move --split)")]
    TooFewAsks {
        name: &'static str,
        span: String,
        asks: usize,
    },
    /// The index cannot be opened or searched.
    #[error(transparent)]
    Index(#[from] lector_index::Error),
    /// The index's embedder cannot be loaded.
    #[error(transparent)]
    Embedder(#[from] lector_pipeline::Error),
    /// Thresholds no test can use (named).
    #[error("{0}")]
    Thresholds(String),
    /// A question cannot be embedded.
    #[error("embedding the question `{question}`")]
    Embed {
        question: String,
        source: lector_index::Error,
    },
}

/// A time window: asks at or after `from` and before `to`; `None` leaves that end open.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Span {
    pub from: Option<SystemTime>,
    pub to: Option<SystemTime>,
}

impl Span {
    /// Whether `at` falls in the window.
    pub fn contains(&self, at: SystemTime) -> bool {
        self.from.is_none_or(|from| at >= from) && self.to.is_none_or(|to| at < to)
    }

    /// `FROM..TO` in RFC 3339, an open end left empty.
    pub fn describe(&self) -> String {
        let end = |t: Option<SystemTime>| t.map(time::format).unwrap_or_default();
        format!("{}..{}", end(self.from), end(self.to))
    }
}

/// A time as [`time::parse`] reads it, or a message saying what a time looks like.
pub fn parse_time(text: &str) -> Result<SystemTime, String> {
    time::parse(text).ok_or_else(|| {
        format!("`{text}` is not a time (RFC 3339 such as 2026-12-02T13:00:00Z, or 2026-12-02)")
    })
}

/// A window `FROM..TO` (either end may be empty, left open), or what is wrong with it.
pub fn parse_span(text: &str) -> Result<Span, String> {
    let (from, to) = text
        .split_once("..")
        .ok_or_else(|| format!("`{text}` is not a window FROM..TO"))?;
    let end = |t: &str| (!t.trim().is_empty()).then(|| parse_time(t)).transpose();
    let span = Span {
        from: end(from)?,
        to: end(to)?,
    };
    if let (Some(from), Some(to)) = (span.from, span.to) {
        if from >= to {
            return Err(format!("the window `{text}` ends before it starts"));
        }
    }
    Ok(span)
}

/// How the log is cut into the two windows compared.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Windows {
    /// Before and at-or-after the median ask time, which halves the log.
    Median,
    /// Before and at-or-after this time.
    Split(SystemTime),
    /// Two windows given explicitly.
    Explicit { before: Span, after: Span },
}

/// An ask and the time it was answered.
#[derive(Debug, Clone)]
pub struct TimedAsk {
    pub at: SystemTime,
    pub ask: AskRecord,
}

/// One side of the comparison.
pub struct Window {
    /// `before` or `after`.
    pub name: &'static str,
    pub span: Span,
    /// The times of its first and last asks.
    pub first: SystemTime,
    pub last: SystemTime,
    pub asks: Vec<Measured>,
    /// Retrieval modes and answer modes seen (scores of different modes do not compare).
    pub settings: BTreeSet<String>,
}

/// The whole comparison, ready to print.
pub struct Drift {
    pub log: PathBuf,
    pub windows: [Window; 2],
    pub thresholds: Thresholds,
    pub signals: Vec<Signal>,
    pub warnings: Vec<String>,
}

/// The drift report of the log at `log` (`lector report drift`): its asks read ([`load_asks`],
/// before any model is loaded), measured against the index at `index` when given (with
/// `embedder` for a dense one), and the two `windows` compared under `thresholds`.
pub fn report(
    log: &Path,
    index: Option<&Path>,
    embedder: Option<PathBuf>,
    windows: Windows,
    thresholds: Thresholds,
    notify: &dyn Fn(&str),
) -> Result<Drift, DriftError> {
    thresholds.check().map_err(DriftError::Thresholds)?;
    let asks = load_asks(log)?;
    let mut probe = match index {
        Some(dir) => Some(Probe::open(dir, embedder, notify)?),
        None => None,
    };
    compare(log, &asks, windows, probe.as_mut(), thresholds)
}

/// Compares the two `windows` of the asks of the log at `log` (read with [`load_asks`]),
/// measured against `probe` when there is an index.
pub fn compare(
    log: &Path,
    asks: &[TimedAsk],
    windows: Windows,
    mut probe: Option<&mut Probe>,
    thresholds: Thresholds,
) -> Result<Drift, DriftError> {
    let [before, after] = spans(windows, asks);
    let before = window(before, asks, probe.as_deref_mut())?;
    let after = window(after, asks, probe.as_deref_mut())?;
    let dense = probe.as_ref().map(|p| p.is_dense());
    let signals = signals::signals(&before.asks, &after.asks, dense, thresholds);
    let warnings = warnings(&before, &after);
    Ok(Drift {
        log: log.to_path_buf(),
        windows: [before, after],
        thresholds,
        signals,
        warnings,
    })
}

/// Every ask of the log at `dir`, oldest first; an error when there is no log or no ask.
pub fn load_asks(dir: &Path) -> Result<Vec<TimedAsk>, DriftError> {
    if log_files(dir).map_err(DriftError::Log)?.is_empty() {
        return Err(DriftError::NoLogFiles {
            dir: dir.to_path_buf(),
        });
    }
    let mut asks = Vec::new();
    for entry in read_log(dir).map_err(DriftError::Log)? {
        let Entry::Ask(ask) = entry else { continue };
        let Some(at) = time::parse(&ask.time) else {
            return Err(DriftError::BadTime {
                at: locate(dir, &ask.request_id),
                time: ask.time,
            });
        };
        asks.push(TimedAsk { at, ask });
    }
    if asks.is_empty() {
        return Err(DriftError::NoAsks {
            dir: dir.to_path_buf(),
        });
    }
    asks.sort_by_key(|a| a.at);
    Ok(asks)
}

/// `FILE, line N` of the ask with `request_id` (the reader returns entries without positions,
/// so a bad field found after reading is located again, which is rare and cheap).
fn locate(dir: &Path, request_id: &str) -> String {
    for path in log_files(dir).unwrap_or_default() {
        let Ok(lines) = read_lines::<Entry>(&path, Default::default()) else {
            continue;
        };
        for (line, entry) in lines.records {
            if matches!(entry, Entry::Ask(ask) if ask.request_id == request_id) {
                return format!("{}, line {line}", path.display());
            }
        }
    }
    format!("{} (ask {request_id})", dir.display())
}

/// The two windows: explicit, split at a time, or split at the median ask time.
fn spans(windows: Windows, asks: &[TimedAsk]) -> [(&'static str, Span); 2] {
    let halves = |at| {
        [
            Span {
                from: None,
                to: Some(at),
            },
            Span {
                from: Some(at),
                to: None,
            },
        ]
    };
    let [before, after] = match windows {
        Windows::Split(at) => halves(at),
        Windows::Explicit { before, after } => [before, after],
        Windows::Median => halves(asks[asks.len() / 2].at),
    };
    [("before", before), ("after", after)]
}

/// The asks of `span`, measured; refused when it holds too few to compare.
fn window(
    (name, span): (&'static str, Span),
    asks: &[TimedAsk],
    mut probe: Option<&mut Probe>,
) -> Result<Window, DriftError> {
    let inside: Vec<&TimedAsk> = asks.iter().filter(|a| span.contains(a.at)).collect();
    if inside.len() < MIN_VALUES {
        return Err(DriftError::TooFewAsks {
            name,
            span: span.describe(),
            asks: inside.len(),
        });
    }
    let measured = inside
        .iter()
        .map(|a| measure(&a.ask, probe.as_deref_mut()))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Window {
        name,
        span,
        first: inside[0].at,
        last: inside[inside.len() - 1].at,
        asks: measured,
        settings: inside
            .iter()
            .map(|a| format!("{} {}", a.ask.settings.mode, a.ask.settings.retrieval))
            .collect(),
    })
}

/// What the reader should know before trusting a difference.
fn warnings(before: &Window, after: &Window) -> Vec<String> {
    let mut out = Vec::new();
    if before.settings != after.settings {
        let list = |w: &Window| w.settings.iter().cloned().collect::<Vec<_>>().join(", ");
        out.push(format!(
            "the windows were answered with different settings (before: {}; after: {}): retrieval scores of different modes do not compare, so a top-score change may be the settings, not the questions",
            list(before),
            list(after)
        ));
    }
    if before.last > after.first {
        out.push("the windows overlap".to_string());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_windows_with_open_ends() {
        let span = parse_span("2026-12-01..2026-12-02T12:00Z").unwrap();
        assert_eq!(span.from, time::parse("2026-12-01"));
        assert!(span.contains(time::parse("2026-12-02T11:59:59Z").unwrap()));
        assert!(!span.contains(time::parse("2026-12-02T12:00:00Z").unwrap()));
        let open = parse_span("2026-12-01..").unwrap();
        assert_eq!(
            (open.to, open.describe()),
            (None, "2026-12-01T00:00:00.000Z..".into())
        );
        assert!(parse_span("2026-12-02..2026-12-01")
            .unwrap_err()
            .contains("ends before"));
        assert!(parse_span("yesterday..")
            .unwrap_err()
            .contains("not a time"));
        assert!(parse_span("2026-12-01").unwrap_err().contains("FROM..TO"));
    }
}
