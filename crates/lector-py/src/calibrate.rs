//! `lector._lector.calibrate`: `lector calibrate` on an index (`lector_pipeline::calibrate`).

use crate::index::{bar, parse_mode, Index};
use crate::{bad_argument, serialized, OrRaise};
use lector_eval::calibration::Method;
use lector_index::DocumentStore;
use lector_pipeline::calibrate::{evaluate as evaluate_stored, fit, CalibrateOptions};
use lector_pipeline::calibration::{Calibration, Target, CALIBRATION_FILE};
use lector_pipeline::{PipelineConfig, RetrievalConfig};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use std::path::PathBuf;

/// Fits the no-answer threshold for `target` and the `confidence` map on the SQuAD file
/// `squad` (the first `limit` questions), read in gold paragraphs or, with `retrieve`, the top
/// k passages of the index; stores them with the index unless `dry_run`. With `evaluate`,
/// measures the stored calibration instead. Returns the fields of `lector calibrate --json`;
/// `html` writes the HTML report there.
#[pyfunction]
#[pyo3(signature = (index, squad, *, target = "max-f1", confidence = "isotonic", retrieve = None,
    limit = None, evaluate = false, dry_run = false, reader = None, mode = None, html = None,
    progress = false))]
#[allow(clippy::too_many_arguments)]
pub fn calibrate(
    py: Python<'_>,
    index: &Bound<'_, Index>,
    squad: PathBuf,
    target: &str,
    confidence: &str,
    retrieve: Option<usize>,
    limit: Option<usize>,
    evaluate: bool,
    dry_run: bool,
    reader: Option<PathBuf>,
    mode: Option<&str>,
    html: Option<PathBuf>,
    progress: bool,
) -> PyResult<Py<PyAny>> {
    let index = index.get();
    let target: Target = target.parse().map_err(bad_argument)?;
    let confidence = match confidence {
        "isotonic" => Some(Method::Isotonic),
        "platt" => Some(Method::Platt),
        "none" => None,
        other => {
            return Err(PyValueError::new_err(format!(
                "confidence must be \"isotonic\", \"platt\" or \"none\", not {other:?}"
            )))
        }
    };
    if retrieve == Some(0) {
        return Err(PyValueError::new_err("retrieve must be at least 1"));
    }
    let options = CalibrateOptions {
        target,
        confidence,
        retrieve,
        pipeline: PipelineConfig {
            reader,
            retrieval: RetrievalConfig {
                mode: parse_mode(mode)?,
                embedder: index.embedder_spec(),
                ..RetrievalConfig::default()
            },
            rerank: None,
        },
        data: squad.file_name().map_or_else(
            || squad.display().to_string(),
            |n| n.to_string_lossy().into(),
        ),
    };
    // The index is needed to read from it, to store in it, or to evaluate what it stores.
    let store = match retrieve.is_some() || !dry_run || evaluate {
        true => Some(index.snapshot()?),
        false => None,
    };
    let bar = bar(progress);
    let out = py.detach(|| -> PyResult<serde_json::Value> {
        let mut dataset = lector_eval::squad::read_dataset(&squad).or_raise()?;
        dataset.questions.truncate(limit.unwrap_or(usize::MAX));
        if dataset.questions.is_empty() {
            return Err(PyValueError::new_err(format!(
                "{}: no questions",
                squad.display()
            )));
        }
        let store = store.as_deref().map(|s| s as &dyn DocumentStore);
        let notify = |m: &str| eprintln!("{m}");
        let mut progress = |p: lector_pipeline::Progress| {
            bar.set_length(p.total as u64);
            bar.set_position(p.done as u64);
        };
        if evaluate {
            let store = store.expect("opened to evaluate");
            let stored = Calibration::load_from(store).or_raise()?.ok_or_else(|| {
                crate::LectorError::new_err(format!(
                    "no calibration in {} to evaluate (calibrate it first)",
                    store.location()
                ))
            })?;
            let evaluation = evaluate_stored(
                Some(store),
                &stored,
                &dataset,
                &options,
                &notify,
                &mut progress,
            )
            .or_raise()?;
            if let Some(path) = &html {
                evaluation.html(&squad).write(path).or_raise()?;
            }
            return serde_json::to_value(&evaluation).or_raise();
        }
        let fit = fit(store, &dataset, &options, &notify, &mut progress).or_raise()?;
        for warning in &fit.warnings {
            eprintln!("warning: {warning}");
        }
        if let Some(path) = &html {
            fit.html(&squad, target).write(path).or_raise()?;
        }
        let written = match (dry_run, store) {
            (false, Some(store)) => {
                fit.calibration.save_to(store).or_raise()?;
                let file = std::path::Path::new(&store.location()).join(CALIBRATION_FILE);
                Some(file.display().to_string())
            }
            _ => None,
        };
        let mut out = serde_json::to_value(&fit).or_raise()?;
        out["written"] = written.into();
        Ok(out)
    })?;
    bar.finish_and_clear();
    Ok(serialized(py, &out)?.unbind())
}
