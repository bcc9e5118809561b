//! `lector._lector.read_log`, `read_labels`, `export_labels`: the query log of `lector serve
//! --log-queries DIR`, the labels made on its labelling page, and their export as SQuAD v2.0
//! training data (`lector label export`).

use crate::{serialized, OrRaise};
use lector_querylog::label::{export_squad, read_labels as labels_in};
use pyo3::prelude::*;
use serde_json::json;
use std::path::PathBuf;

/// Every entry of the log in `dir`, oldest first: asks and feedback, as the log stores them.
#[pyfunction]
pub fn read_log(py: Python<'_>, dir: PathBuf) -> PyResult<Py<PyAny>> {
    let entries = py.detach(|| lector_querylog::read_log(&dir).or_raise())?;
    Ok(serialized(py, &entries)?.unbind())
}

/// The labels stored beside the log in `dir` (none before the first).
#[pyfunction]
pub fn read_labels(py: Python<'_>, dir: PathBuf) -> PyResult<Py<PyAny>> {
    let labels = py.detach(|| labels_in(&dir).or_raise())?;
    Ok(serialized(py, &labels)?.unbind())
}

/// The labels of the log in `dir` as SQuAD v2.0 over the documents of `index`: `{squad,
/// answers, unanswerable, skipped, left_out}`, as `lector label export --json` counts them.
#[pyfunction]
pub fn export_labels(
    py: Python<'_>,
    dir: PathBuf,
    index: &Bound<'_, crate::index::Index>,
) -> PyResult<Py<PyAny>> {
    let snapshot = index.get().snapshot()?;
    let out = py.detach(|| -> PyResult<serde_json::Value> {
        let labels = labels_in(&dir).or_raise()?;
        let entries = lector_querylog::read_log(&dir).or_raise()?;
        let export = export_squad(&labels, &entries, snapshot.as_ref());
        Ok(json!({
            "squad": export.squad, "answers": export.answers,
            "unanswerable": export.unanswerable, "skipped": export.skipped,
            "left_out": export.warnings,
        }))
    })?;
    Ok(serialized(py, &out)?.unbind())
}

/// `lector report drift --json` on the log in `dir`: the asks before and after `split` (an RFC
/// 3339 time or date; default the median ask time), or in the windows `before` and `after`
/// (`FROM..TO`), compared signal by signal under `alpha`, `min_effect` and `far_below`, measured
/// against the index at `index` when given. With `html`, the HTML report is written there.
#[pyfunction]
#[pyo3(signature = (dir, *, index = None, embedder = None, split = None, before = None,
    after = None, far_below = 0.3, alpha = 0.01, min_effect = 0.05, html = None))]
#[allow(clippy::too_many_arguments)]
pub fn drift(
    py: Python<'_>,
    dir: PathBuf,
    index: Option<PathBuf>,
    embedder: Option<PathBuf>,
    split: Option<&str>,
    before: Option<&str>,
    after: Option<&str>,
    far_below: f64,
    alpha: f64,
    min_effect: f64,
    html: Option<PathBuf>,
) -> PyResult<Py<PyAny>> {
    use lector_querylog::drift::{self, parse_span, parse_time, Thresholds, Windows};
    let windows = match (split, before, after) {
        (Some(_), Some(_), _) | (Some(_), _, Some(_)) => {
            return Err(crate::bad_argument(
                "give split, or before and after, not both",
            ))
        }
        (Some(at), None, None) => Windows::Split(parse_time(at).map_err(crate::bad_argument)?),
        (None, Some(before), Some(after)) => Windows::Explicit {
            before: parse_span(before).map_err(crate::bad_argument)?,
            after: parse_span(after).map_err(crate::bad_argument)?,
        },
        (None, None, None) => Windows::Median,
        _ => return Err(crate::bad_argument("before and after go together")),
    };
    let thresholds = Thresholds {
        alpha,
        min_effect,
        far_below,
    };
    thresholds.check().map_err(crate::bad_argument)?;
    let report = py.detach(|| {
        drift::report(
            &dir,
            index.as_deref(),
            embedder,
            windows,
            thresholds,
            &|m| eprintln!("{m}"),
        )
        .or_raise()
    })?;
    if let Some(path) = &html {
        drift::report::html(&report).write(path).or_raise()?;
    }
    Ok(serialized(py, &drift::report::to_json(&report))?.unbind())
}
