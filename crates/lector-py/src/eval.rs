//! `lector._lector.squad|retrieval|hotpot`: the official metrics of `lector eval`, on Python data.

use crate::{from_py, serialized, OrRaise};
use lector_eval::hotpot as hotpot_eval;
use lector_eval::retrieval::{Qrels, Run, DEFAULT_KS};
use lector_eval::squad as squad_eval;
use pyo3::prelude::*;
use std::collections::BTreeMap;
use std::path::Path;

/// SQuAD v1.1/v2.0 scores of `predictions` (`{id: answer}`) against `dataset` (a SQuAD dataset
/// dict), with the official script's keys and values; for v2.0, `na_probs` (`{id: p}`) and the
/// threshold above which a question is predicted unanswerable.
#[pyfunction]
#[pyo3(signature = (dataset, predictions, na_probs = None, na_prob_thresh = 1.0))]
pub fn squad(
    py: Python<'_>,
    dataset: Bound<'_, PyAny>,
    predictions: Vec<(String, String)>,
    na_probs: Option<Vec<(String, f64)>>,
    na_prob_thresh: f64,
) -> PyResult<Py<PyAny>> {
    let text = from_py(&dataset, "dataset")?.to_string();
    let summary = py.detach(|| {
        let dataset = squad_eval::parse_dataset(Path::new("<dataset>"), &text).or_raise()?;
        let no_answer = squad_eval::NoAnswer {
            probs: na_probs.as_ref(),
            threshold: na_prob_thresh,
        };
        squad_eval::evaluate(&dataset, &predictions, &no_answer)
            .or_raise()
            .map(|evaluation| evaluation.summary)
    })?;
    Ok(serialized(py, &summary)?.unbind())
}

/// trec_eval's measures (as `pytrec_eval` gives them) of `run` (`{qid: {docid: score}}`) against
/// `qrels` (`{qid: {docid: relevance}}`) at the cutoffs `ks`: `{"mean": {metric: value},
/// "queries": {qid: {metric: value}}}`.
#[pyfunction]
#[pyo3(signature = (qrels, run, ks = DEFAULT_KS.to_vec()))]
pub fn retrieval(
    py: Python<'_>,
    qrels: BTreeMap<String, BTreeMap<String, i64>>,
    run: BTreeMap<String, BTreeMap<String, f64>>,
    ks: Vec<usize>,
) -> PyResult<Py<PyAny>> {
    let evaluation = py.detach(|| {
        let mut judged = Qrels::new();
        for (qid, docs) in qrels {
            for (docid, rel) in docs {
                judged.insert(qid.clone(), docid, rel);
            }
        }
        let run = Run::from_rankings(
            run.into_iter()
                .map(|(qid, docs)| (qid, docs.into_iter().collect())),
        );
        lector_eval::retrieval::evaluate(&run, &judged, &ks)
    });
    let queries: BTreeMap<&str, &BTreeMap<String, f64>> = evaluation
        .queries
        .iter()
        .map(|q| (q.qid.as_str(), &q.values))
        .collect();
    let out = serde_json::json!({"mean": evaluation.means(), "queries": queries});
    Ok(serialized(py, &out)?.unbind())
}

/// HotpotQA's official metrics of `prediction` (`{"answer": {id: text}, "sp": {id: [[title,
/// sentence], ...]}}`) against `gold` (the list of questions of a HotpotQA file).
#[pyfunction]
pub fn hotpot(
    py: Python<'_>,
    gold: Bound<'_, PyAny>,
    prediction: Bound<'_, PyAny>,
) -> PyResult<Py<PyAny>> {
    let gold = from_py(&gold, "gold")?.to_string();
    let prediction = from_py(&prediction, "prediction")?;
    let metrics = py.detach(|| {
        let gold = hotpot_eval::parse_dataset(Path::new("<gold>"), &gold).or_raise()?;
        let prediction: hotpot_eval::Predictions = serde_json::from_value(prediction)
            .map_err(|e| pyo3::exceptions::PyValueError::new_err(format!("prediction: {e}")))?;
        PyResult::Ok(hotpot_eval::evaluate(&gold, &prediction).metrics)
    })?;
    Ok(serialized(py, &metrics)?.unbind())
}

/// `relative` inside the shared evaluation data (`$LECTOR_DATA_DIR`, else `../shared/data`
/// beside the checkout lector was built from); an error saying where it looked when missing.
#[pyfunction]
pub fn shared_data(relative: &str) -> PyResult<std::path::PathBuf> {
    let dir = lector_eval::data::shared_data_dir().map_err(crate::LectorError::new_err)?;
    let path = dir.join(relative);
    match path.exists() {
        true => Ok(path),
        false => Err(crate::LectorError::new_err(format!(
            "{relative} is missing from the shared data at {}",
            dir.display()
        ))),
    }
}
