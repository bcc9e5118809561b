//! `lector._lector.Embedder`: the sentence embedder a dense index uses (all-MiniLM-L6-v2 unless
//! told otherwise), for frameworks that embed texts themselves.

use crate::OrRaise;
use lector_index::Embedder as _;
use lector_pipeline::config::{load_embedder, IndexEmbedder};
use pyo3::prelude::*;
use std::path::PathBuf;

/// A loaded embedder: unit-length vectors, so inner products are cosine similarities.
#[pyclass(module = "lector._lector", frozen)]
pub struct Embedder {
    inner: IndexEmbedder,
}

#[pymethods]
impl Embedder {
    /// Loads the checkpoint `model` (`None`: the registry's all-MiniLM-L6-v2, fetched into the
    /// user cache on first use).
    #[new]
    #[pyo3(signature = (model = None))]
    fn new(py: Python<'_>, model: Option<PathBuf>) -> PyResult<Self> {
        py.detach(|| {
            let inner = load_embedder(model.as_deref(), &|m| eprintln!("{m}")).or_raise()?;
            Ok(Embedder { inner })
        })
    }

    /// The model's name, as a dense index records it.
    #[getter]
    fn model(&self) -> String {
        self.inner.model().to_string()
    }

    /// The vector dimension.
    #[getter]
    fn dim(&self) -> usize {
        self.inner.dim()
    }

    /// One vector per text, as passages are embedded.
    fn embed(&self, py: Python<'_>, texts: Vec<String>) -> PyResult<Vec<Vec<f32>>> {
        py.detach(|| {
            let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
            self.inner.embed(&refs).map_err(crate::LectorError::new_err)
        })
    }

    /// One vector per query, as queries are embedded.
    fn embed_queries(&self, py: Python<'_>, queries: Vec<String>) -> PyResult<Vec<Vec<f32>>> {
        py.detach(|| {
            let refs: Vec<&str> = queries.iter().map(String::as_str).collect();
            self.inner
                .embed_queries(&refs)
                .map_err(crate::LectorError::new_err)
        })
    }
}
