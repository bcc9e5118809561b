//! `lector report drift`: whether the questions users ask, and how the system answers them, have
//! changed between two windows of a query log (`lector serve --log-queries DIR`).
//!
//! Each ask is measured (question length, terms outside the index's vocabulary, abstention,
//! confidence, top retrieval score, similarity to the nearest indexed passage); each measure is
//! compared between the windows with a two-sample test and flagged when the difference is both
//! significant and large enough to matter (docs/drift.md).

mod measure;
mod render;
mod signals;

use anyhow::{bail, Context, Result};
use clap::Args;
use lector_server::querylog::record::log_files;
use lector_server::querylog::{read_log, time, AskRecord, Entry};
use measure::{measure, Measured, Probe};
use signals::{Signal, Thresholds, MIN_VALUES};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

#[derive(Args)]
pub struct DriftArgs {
    /// The query log directory (`lector serve --log-queries DIR`).
    #[arg(long, value_name = "DIR")]
    log: PathBuf,
    /// The index the questions were asked of: enables the out-of-vocabulary rate and, for an
    /// index with passage vectors, the nearness signals [default: $LECTOR_INDEX when set].
    #[arg(long, value_name = "DIR")]
    index: Option<PathBuf>,
    /// Embedder checkpoint of a dense index [default: the registry's all-MiniLM-L6-v2].
    #[arg(long, value_name = "DIR")]
    embedder: Option<PathBuf>,
    /// Compare the asks before this time with those at or after it (RFC 3339, or YYYY-MM-DD)
    /// [default: the median ask time, which halves the log].
    #[arg(long, value_name = "TIME", value_parser = parse_time, conflicts_with_all = ["before", "after"])]
    split: Option<SystemTime>,
    /// The earlier window, FROM..TO (TO excluded; either end may be left open, as in `..TO`).
    #[arg(long, value_name = "FROM..TO", value_parser = parse_span, requires = "after")]
    before: Option<Span>,
    /// The later window, FROM..TO (TO excluded; either end may be left open, as in `FROM..`).
    #[arg(long, value_name = "FROM..TO", value_parser = parse_span, requires = "before")]
    after: Option<Span>,
    /// A question is far from the index when the cosine similarity of its nearest passage is
    /// below this. 0.3 suits all-MiniLM-L6-v2, where a question and the passage that answers it
    /// score about 0.4 to 0.8 and unrelated texts about -0.1 to 0.2.
    #[arg(long, value_name = "COSINE", default_value_t = 0.3, value_parser = cosine)]
    far_below: f64,
    /// Significance level: a signal drifted only when its test's p-value is below it.
    #[arg(long, default_value_t = 0.01, value_parser = crate::values::unit_interval)]
    alpha: f64,
    /// Smallest change that counts as drift: the Kolmogorov-Smirnov D of a distribution, or the
    /// absolute change of a rate (so a big log does not flag differences too small to matter).
    #[arg(long, default_value_t = 0.05, value_parser = crate::values::unit_interval)]
    min_effect: f64,
    /// Also write an HTML report with before/after histograms to FILE.
    #[arg(long, value_name = "FILE")]
    html: Option<PathBuf>,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

/// A time window: asks at or after `from` and before `to`; `None` leaves that end open.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Span {
    from: Option<SystemTime>,
    to: Option<SystemTime>,
}

impl Span {
    fn contains(&self, at: SystemTime) -> bool {
        self.from.is_none_or(|from| at >= from) && self.to.is_none_or(|to| at < to)
    }

    /// `FROM..TO` in RFC 3339, an open end left empty.
    fn describe(&self) -> String {
        let end = |t: Option<SystemTime>| t.map(time::format).unwrap_or_default();
        format!("{}..{}", end(self.from), end(self.to))
    }
}

fn parse_time(text: &str) -> Result<SystemTime, String> {
    time::parse(text).ok_or_else(|| {
        format!("`{text}` is not a time (RFC 3339 such as 2026-12-02T13:00:00Z, or 2026-12-02)")
    })
}

fn parse_span(text: &str) -> Result<Span, String> {
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

fn cosine(text: &str) -> Result<f64, String> {
    let value: f64 = text
        .trim()
        .parse()
        .map_err(|_| format!("`{text}` is not a number"))?;
    if (-1.0..=1.0).contains(&value) {
        Ok(value)
    } else {
        Err("a cosine similarity is between -1 and 1".into())
    }
}

/// An ask and the time it was answered.
struct TimedAsk {
    at: SystemTime,
    ask: AskRecord,
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

pub fn run(args: DriftArgs) -> Result<()> {
    let asks = load_asks(&args.log)?;
    let spans = spans(&args, &asks)?;
    let index_dir = args.index.clone().or_else(|| {
        std::env::var_os("LECTOR_INDEX")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    });
    let mut probe = match &index_dir {
        Some(dir) => Some(
            Probe::open(dir, args.embedder.clone())
                .with_context(|| format!("opening the index {}", dir.display()))?,
        ),
        None => None,
    };
    let [before, after] = spans;
    let before = window(before, &asks, probe.as_mut())?;
    let after = window(after, &asks, probe.as_mut())?;
    let thresholds = Thresholds {
        alpha: args.alpha,
        min_effect: args.min_effect,
        far_below: args.far_below,
    };
    let dense = probe.as_ref().map(Probe::is_dense);
    let signals = signals::signals(&before.asks, &after.asks, dense, thresholds);
    let warnings = warnings(&before, &after);
    let drift = Drift {
        log: args.log.clone(),
        windows: [before, after],
        thresholds,
        signals,
        warnings,
    };
    if let Some(path) = &args.html {
        render::html(&drift)
            .write(path)
            .with_context(|| format!("writing the HTML report {}", path.display()))?;
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&render::json(&drift))?);
    } else {
        render::table(&drift);
    }
    Ok(())
}

/// Every ask of the log at `dir`, oldest first.
fn load_asks(dir: &Path) -> Result<Vec<TimedAsk>> {
    // The reader's I/O error shows its cause in its message and also chains it as its source,
    // which `{:#}` would print twice: keep the message only.
    let flat = |e: lector_server::querylog::ReadError| anyhow::anyhow!("{e}");
    if log_files(dir).map_err(flat)?.is_empty() {
        bail!(
            "{} holds no query log files (queries-*.jsonl); `lector serve --log-queries DIR` writes them",
            dir.display()
        );
    }
    let mut asks = Vec::new();
    for entry in read_log(dir).map_err(flat)? {
        let Entry::Ask(ask) = entry else { continue };
        let Some(at) = time::parse(&ask.time) else {
            bail!(
                "{}: `time` is `{}`, not an RFC 3339 time",
                locate(dir, &ask.request_id),
                ask.time
            );
        };
        asks.push(TimedAsk { at, ask });
    }
    if asks.is_empty() {
        bail!("the query log in {} holds no asks", dir.display());
    }
    asks.sort_by_key(|a| a.at);
    Ok(asks)
}

/// `FILE, line N` of the ask with `request_id` (the reader returns entries without positions,
/// so a bad field found after reading is located again, which is rare and cheap).
fn locate(dir: &Path, request_id: &str) -> String {
    for path in log_files(dir).unwrap_or_default() {
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        for (i, line) in text.lines().enumerate() {
            if let Ok(Entry::Ask(ask)) = serde_json::from_str::<Entry>(line) {
                if ask.request_id == request_id {
                    return format!("{}, line {}", path.display(), i + 1);
                }
            }
        }
    }
    format!("{} (ask {request_id})", dir.display())
}

/// The two windows: explicit, split at `--split`, or split at the median ask time.
fn spans(args: &DriftArgs, asks: &[TimedAsk]) -> Result<[(&'static str, Span); 2]> {
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
    let [before, after] = match (args.split, args.before, args.after) {
        (Some(at), _, _) => halves(at),
        (None, Some(before), Some(after)) => [before, after],
        _ => halves(asks[asks.len() / 2].at),
    };
    Ok([("before", before), ("after", after)])
}

/// The asks of `span`, measured; refused when it holds too few to compare.
fn window(
    (name, span): (&'static str, Span),
    asks: &[TimedAsk],
    mut probe: Option<&mut Probe>,
) -> Result<Window> {
    let inside: Vec<&TimedAsk> = asks.iter().filter(|a| span.contains(a.at)).collect();
    if inside.len() < MIN_VALUES {
        bail!(
            "the {name} window ({}) holds {} asks; a drift report needs at least {MIN_VALUES} in each window (widen the windows or move --split)",
            span.describe(),
            inside.len()
        );
    }
    let measured = inside
        .iter()
        .map(|a| measure(&a.ask, probe.as_deref_mut()))
        .collect::<Result<Vec<_>>>()?;
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
