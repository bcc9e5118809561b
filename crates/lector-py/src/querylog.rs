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
