//! `lector._lector.Reader`: the extractive reader, as `lector read` runs it.

use crate::{bad_argument, serialized, OrRaise};
use lector_reader::{Prediction, Query, ReadParams};
use pyo3::prelude::*;
use serde_json::json;
use std::path::PathBuf;

/// A loaded reader checkpoint (a folder in the Hugging Face layout, or a pulled hub repository).
#[pyclass(module = "lector._lector", frozen)]
pub struct Reader {
    dir: PathBuf,
    reader: lector_reader::Reader,
}

impl Reader {
    /// The checkpoint folder.
    pub(crate) fn dir(&self) -> PathBuf {
        self.dir.clone()
    }

    /// The loaded model.
    pub(crate) fn inner(&self) -> &lector_reader::Reader {
        &self.reader
    }
}

#[pymethods]
impl Reader {
    /// Loads `model` (`None`: `$LECTOR_READER`, else the shipped reader).
    #[new]
    #[pyo3(signature = (model = None))]
    fn new(py: Python<'_>, model: Option<PathBuf>) -> PyResult<Self> {
        py.detach(|| {
            let dir = lector_models::registry::resolve_reader(model.as_deref()).or_raise()?;
            let reader = lector_reader::Reader::load(&dir).or_raise()?;
            Ok(Reader { dir, reader })
        })
    }

    /// The checkpoint folder.
    #[getter]
    fn model_dir(&self) -> PathBuf {
        self.dir.clone()
    }

    /// Answers `(question, context)` pairs in batches; one dict per pair:
    /// `{answers: [{answer, score, start, end}], na_prob, null_score, question_truncated}`.
    #[pyo3(signature = (pairs, *, top_k = 1, handle_impossible_answer = false, max_seq_len = 384,
        doc_stride = 128, max_question_len = 64, max_answer_len = 15, batch_size = 32, progress = false))]
    #[allow(clippy::too_many_arguments)]
    fn read_pairs(
        &self,
        py: Python<'_>,
        pairs: Vec<(String, String)>,
        top_k: usize,
        handle_impossible_answer: bool,
        max_seq_len: usize,
        doc_stride: usize,
        max_question_len: usize,
        max_answer_len: usize,
        batch_size: usize,
        progress: bool,
    ) -> PyResult<Py<PyAny>> {
        let params = ReadParams {
            max_seq_len,
            doc_stride,
            max_question_len,
            max_answer_len,
            top_k,
            handle_impossible_answer,
            batch_size,
            ..ReadParams::default()
        };
        params.validate().map_err(bad_argument)?;
        let bar = crate::index::bar(progress);
        bar.set_length(pairs.len() as u64);
        let predictions = py.detach(|| {
            let queries: Vec<Query> = pairs
                .iter()
                .map(|(question, context)| Query { question, context })
                .collect();
            self.reader
                .answer_batch(&queries, &params, &mut |done| bar.set_position(done as u64))
                .or_raise()
        })?;
        bar.finish_and_clear();
        let out: Vec<_> = predictions.iter().map(prediction_json).collect();
        Ok(serialized(py, &out)?.unbind())
    }

    fn __repr__(&self) -> String {
        format!("Reader({:?})", self.dir.display().to_string())
    }
}

fn prediction_json(p: &Prediction) -> serde_json::Value {
    json!({
        "answers": p.answers, "na_prob": p.na_prob, "null_score": p.null_score,
        "question_truncated": p.question_truncated,
    })
}
