//! The drift report as table rows, as JSON, and as an HTML page with before/after histograms.

use super::{Compared, Drift, Kind, Side, Signal, Window};
use crate::time;
use lector_eval::report::{fmt_prob, Report};
use serde_json::{json, Value};

/// Bins of the HTML histograms.
const BINS: usize = 20;

/// The columns of [`rows`].
pub const HEADER: [&str; 7] = [
    "signal", "before", "after", "change", "test", "p-value", "drifted",
];

/// A window in one line: its asks, their times, its span.
pub fn describe_window(w: &Window) -> String {
    format!(
        "{:<6} {} asks, {} to {} (window {})",
        w.name,
        w.asks.len(),
        time::format(w.first),
        time::format(w.last),
        w.span.describe()
    )
}

/// One row per signal under [`HEADER`] (`n/a` for a signal not available).
pub fn rows(drift: &Drift) -> Vec<Vec<String>> {
    drift
        .signals
        .iter()
        .map(|s| match &s.outcome {
            Ok(c) => vec![
                s.label.to_string(),
                side_cell(s.kind, &c.before),
                side_cell(s.kind, &c.after),
                format!("{:+.3}", c.change()),
                test_cell(s.kind, c),
                fmt_prob(c.test.p_value),
                if c.drifted { "YES" } else { "no" }.to_string(),
            ],
            Err(_) => vec![
                s.label.to_string(),
                "n/a".into(),
                "n/a".into(),
                String::new(),
                String::new(),
                String::new(),
                String::new(),
            ],
        })
        .collect()
}

fn side_cell(kind: Kind, side: &Side) -> String {
    match (kind, side.median, side.count) {
        (Kind::Distribution, Some(median), _) => {
            format!("{:.3} (median {median:.3})", side.headline)
        }
        (_, _, Some(count)) => format!("{:.3} ({count}/{})", side.headline, side.n),
        _ => format!("{:.3}", side.headline),
    }
}

fn test_cell(kind: Kind, c: &Compared) -> String {
    match kind {
        Kind::Rate => format!("Fisher, |change| {:.3}", c.test.statistic),
        _ => format!("KS D {:.3}", c.test.statistic),
    }
}

/// Why signals are missing, and warnings.
pub fn notes(drift: &Drift) -> Vec<String> {
    let mut out: Vec<String> = drift
        .signals
        .iter()
        .filter_map(|s| {
            let reason = s.outcome.as_ref().err()?;
            Some(format!("{}: not available: {reason}", s.label))
        })
        .collect();
    out.extend(drift.warnings.iter().map(|w| format!("warning: {w}")));
    out
}

/// One line: what drifted, under which thresholds.
pub fn verdict(drift: &Drift) -> String {
    let t = drift.thresholds;
    let rule = format!(
        "p < {} and effect >= {}; far: nearest passage cosine < {}",
        t.alpha, t.min_effect, t.far_below
    );
    let drifted = drifted(drift);
    if drifted.is_empty() {
        format!("no signal drifted ({rule})")
    } else {
        format!("drifted: {} ({rule})", drifted.join(", "))
    }
}

fn drifted(drift: &Drift) -> Vec<&'static str> {
    drift
        .signals
        .iter()
        .filter(|s| s.outcome.as_ref().is_ok_and(|c| c.drifted))
        .map(|s| s.label)
        .collect()
}

/// The machine-readable report (`lector report drift --json`).
pub fn to_json(drift: &Drift) -> Value {
    let t = drift.thresholds;
    let drifted: Vec<&str> = drift
        .signals
        .iter()
        .filter(|s| s.outcome.as_ref().is_ok_and(|c| c.drifted))
        .map(|s| s.key)
        .collect();
    json!({
        "log": drift.log,
        "windows": drift
            .windows
            .iter()
            .map(|w| (w.name.to_string(), window_json(w)))
            .collect::<serde_json::Map<_, _>>(),
        "thresholds": {"alpha": t.alpha, "min_effect": t.min_effect, "far_below": t.far_below},
        "signals": drift.signals.iter().map(signal_json).collect::<Vec<_>>(),
        "drifted": drifted,
        "warnings": drift.warnings,
    })
}

fn window_json(w: &Window) -> Value {
    let end = |t: Option<std::time::SystemTime>| t.map(time::format);
    json!({
        "from": end(w.span.from),
        "to": end(w.span.to),
        "first_ask": time::format(w.first),
        "last_ask": time::format(w.last),
        "asks": w.asks.len(),
        "settings": w.settings,
    })
}

fn signal_json(s: &Signal) -> Value {
    let kind = match s.kind {
        Kind::Distribution => "distribution",
        Kind::Rate => "rate",
        Kind::TermShare => "term_share",
    };
    match &s.outcome {
        Err(reason) => json!({
            "name": s.key, "label": s.label, "kind": kind, "available": false, "reason": reason,
        }),
        Ok(c) => json!({
            "name": s.key,
            "label": s.label,
            "kind": kind,
            "available": true,
            "before": side_json(s.kind, &c.before),
            "after": side_json(s.kind, &c.after),
            "change": c.change(),
            "test": {
                "name": if s.kind == Kind::Rate { "fisher_exact" } else { "kolmogorov_smirnov" },
                "statistic": c.test.statistic,
                "p_value": c.test.p_value,
            },
            "drifted": c.drifted,
        }),
    }
}

fn side_json(kind: Kind, side: &Side) -> Value {
    match kind {
        Kind::Distribution => json!({"n": side.n, "mean": side.headline, "median": side.median}),
        _ => json!({"n": side.n, "count": side.count, "rate": side.headline}),
    }
}

/// The HTML report: windows, the table, notes, and a before/after histogram per distribution.
pub fn html(drift: &Drift) -> Report {
    let mut report = Report::new("Query drift");
    report.note(&format!("Query log: {}", drift.log.display()));
    for w in &drift.windows {
        report.note(&describe_window(w));
    }
    report.table("Signals", &HEADER, &rows(drift));
    for line in notes(drift) {
        report.note(&line);
    }
    report.note(&verdict(drift));
    for signal in &drift.signals {
        let Ok(c) = &signal.outcome else { continue };
        if signal.kind == Kind::Rate {
            continue;
        }
        let names = [
            format!("before ({})", c.before.values.len()),
            format!("after ({})", c.after.values.len()),
        ];
        report.histogram_pair(
            &format!("{}: before and after", signal.label),
            [
                (names[0].as_str(), c.before.values.as_slice()),
                (names[1].as_str(), c.after.values.as_slice()),
            ],
            plot_range(signal.key, c),
            BINS,
            signal.unit,
        );
    }
    report
}

/// The x range of a signal's histogram: fixed for shares and probabilities, else the values'.
fn plot_range(key: &str, c: &Compared) -> (f64, f64) {
    if matches!(key, "confidence" | "oov_rate") {
        return (0.0, 1.0);
    }
    let all = c.before.values.iter().chain(&c.after.values);
    let (lo, hi) = all.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &v| {
        (lo.min(v), hi.max(v))
    });
    // Scores and lengths start at 0 unless negative (cosine), so bar heights read as shares of a
    // common axis; a constant signal still gets a non-empty range.
    let lo = lo.min(0.0);
    (lo, if hi > lo { hi } else { lo + 1.0 })
}
