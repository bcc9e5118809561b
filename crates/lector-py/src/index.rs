//! `lector._lector.Index`: an index directory, written and searched as `lector index add|rm` and
//! `lector search` do.

use crate::{from_py, serialized, OrRaise};
use indicatif::{ProgressBar, ProgressStyle};
use lector_index::{
    add_files, rank_documents, AddCounts, AddEvent, AddOptions, AddOutcome, DocumentRef,
    DocumentStore, Embedder, Filter, IndexSettings, IndexWriter, Mode, QueryVector, StoreWriter,
};
use lector_ingest::IngestOptions;
use lector_pipeline::config::load_embedder;
use lector_pipeline::ranking::DOCUMENT_DEPTH;
use lector_pipeline::RetrievalConfig;
use pyo3::exceptions::{PyKeyboardInterrupt, PyValueError};
use pyo3::prelude::*;
use serde_json::{json, Map, Value};
use std::ops::ControlFlow;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock, RwLock};
use std::time::{Duration, Instant};

/// An index directory. Each write opens the index's writer, commits and closes it, so the CLI
/// and other processes can write between calls; searches read the last commit this object saw
/// (after its own writes, or `reload()`).
#[pyclass(module = "lector._lector", frozen)]
pub struct Index {
    dir: PathBuf,
    /// Settings for a new index (an existing one keeps its own).
    settings: IndexSettings,
    /// Keep passage vectors (a new index; an existing dense one stays dense).
    dense: bool,
    /// Embedder checkpoint; `None`: the registry's.
    embedder_spec: Option<PathBuf>,
    embedder: OnceLock<Arc<dyn Embedder>>,
    /// The last commit seen; `None` before the index exists.
    snapshot: RwLock<Option<Arc<lector_index::Index>>>,
}

impl Index {
    /// The last commit seen, or an error when the index does not exist yet.
    pub(crate) fn snapshot(&self) -> PyResult<Arc<lector_index::Index>> {
        if let Some(index) = self.snapshot.read().expect("not poisoned").as_ref() {
            return Ok(Arc::clone(index));
        }
        self.reopen()
    }

    /// The last commit seen, or `None` when the index does not exist yet.
    fn existing(&self) -> PyResult<Option<Arc<lector_index::Index>>> {
        if let Some(index) = self.snapshot.read().expect("not poisoned").as_ref() {
            return Ok(Some(Arc::clone(index)));
        }
        match lector_index::Index::open(&self.dir) {
            Err(lector_index::Error::NoIndex { .. }) => Ok(None),
            opened => {
                let index = Arc::new(opened.or_raise()?);
                *self.snapshot.write().expect("not poisoned") = Some(Arc::clone(&index));
                Ok(Some(index))
            }
        }
    }

    fn reopen(&self) -> PyResult<Arc<lector_index::Index>> {
        let index = Arc::new(lector_index::Index::open(&self.dir).or_raise()?);
        *self.snapshot.write().expect("not poisoned") = Some(Arc::clone(&index));
        Ok(index)
    }

    pub(crate) fn embedder_spec(&self) -> Option<PathBuf> {
        self.embedder_spec.clone()
    }

    fn embedder(&self) -> PyResult<Arc<dyn Embedder>> {
        if let Some(embedder) = self.embedder.get() {
            return Ok(Arc::clone(embedder));
        }
        let loaded: Arc<dyn Embedder> = Arc::new(
            load_embedder(self.embedder_spec.as_deref(), &|m| eprintln!("{m}")).or_raise()?,
        );
        Ok(Arc::clone(self.embedder.get_or_init(|| loaded)))
    }

    /// Opens the writer (creating the index), with the embedder when the index is dense, runs
    /// `stage`, commits with embedding progress, and reopens the snapshot.
    fn write<T>(
        &self,
        progress: bool,
        stage: impl FnOnce(&mut IndexWriter, &ProgressBar) -> PyResult<T>,
    ) -> PyResult<(T, u64)> {
        let mut writer = IndexWriter::open_or_create(&self.dir, self.settings).or_raise()?;
        if self.dense || writer.embeds_itself() {
            writer.set_embedder(self.embedder()?).or_raise()?;
        }
        let bar = bar(progress);
        let staged = match stage(&mut writer, &bar) {
            Ok(staged) => staged,
            Err(err) => {
                // A stopped add may have committed batches: searches see them.
                drop(writer);
                let _ = self.reopen();
                return Err(err);
            }
        };
        let info = writer
            .commit_with_progress(&mut |done, total| {
                bar.set_message(format!("embedding {done}/{total} passages"))
            })
            .or_raise()?;
        bar.finish_and_clear();
        self.reopen()?;
        Ok((staged, info.generation))
    }
}

#[pymethods]
impl Index {
    #[new]
    #[pyo3(signature = (path, *, dense = false, embedder = None, passage_words = None, tfidf = false))]
    fn new(
        py: Python<'_>,
        path: PathBuf,
        dense: bool,
        embedder: Option<PathBuf>,
        passage_words: Option<usize>,
        tfidf: bool,
    ) -> PyResult<Self> {
        let mut settings = IndexSettings {
            tfidf,
            ..IndexSettings::default()
        };
        if let Some(words) = passage_words {
            if words == 0 {
                return Err(PyValueError::new_err("passage_words must be at least 1"));
            }
            settings.chunking.words = words;
        }
        // A missing or unreadable index is reported by the first search, not here: `add` creates it.
        let snapshot = py.detach(|| lector_index::Index::open(&path).ok().map(Arc::new));
        Ok(Index {
            dir: path,
            settings,
            dense,
            embedder_spec: embedder,
            embedder: OnceLock::new(),
            snapshot: RwLock::new(snapshot),
        })
    }

    /// The index directory.
    #[getter]
    fn path(&self) -> PathBuf {
        self.dir.clone()
    }

    /// Adds documents given as dicts `{id, text, title?, date?, metadata?}` (`meta` is taken for
    /// `metadata`, as in Haystack); `fields` are set on every document's metadata.
    #[pyo3(signature = (documents, *, fields = None, progress = false))]
    fn add_documents(
        &self,
        py: Python<'_>,
        documents: Vec<Bound<'_, PyAny>>,
        fields: Option<Bound<'_, PyAny>>,
        progress: bool,
    ) -> PyResult<Py<PyAny>> {
        let fields = metadata_fields(fields)?;
        let docs = documents
            .iter()
            .enumerate()
            .map(|(i, doc)| {
                let at = format!("documents[{i}]");
                let mut doc = lector_ingest::document_from_json(&from_py(doc, &at)?)
                    .map_err(|e| PyValueError::new_err(format!("{at}: {e}")))?;
                for (key, value) in &fields {
                    doc.set_field(key, value.clone());
                }
                Ok(doc)
            })
            .collect::<PyResult<Vec<_>>>()?;
        let total = docs.len() as u64;
        let mut interrupts = Interrupts::new();
        let (counts, generation) = py.detach(|| {
            self.write(progress, |writer, bar| {
                bar.set_length(total);
                let mut counts = AddCounts::default();
                for doc in docs {
                    if interrupts.poll().is_break() {
                        let kept = writer.committed_documents();
                        return Err(interrupts.raised(&format!("nothing of this add was committed; the index keeps its last commit, {kept} documents")));
                    }
                    match writer.add(doc) {
                        AddOutcome::Added => counts.added += 1,
                        AddOutcome::Replaced => counts.replaced += 1,
                        AddOutcome::Unchanged => counts.unchanged += 1,
                    }
                    bar.inc(1);
                }
                Ok(counts)
            })
        })?;
        self.summary(py, &counts, generation)
    }

    /// Adds files and folders as `lector index add` reads them (txt, md, html, pdf, docx, jsonl,
    /// SQuAD json). Unreadable files and invalid lines are skipped and counted, unless `strict`.
    #[pyo3(signature = (paths, *, fields = None, strict = false, progress = false))]
    fn add_files(
        &self,
        py: Python<'_>,
        paths: Vec<PathBuf>,
        fields: Option<Bound<'_, PyAny>>,
        strict: bool,
        progress: bool,
    ) -> PyResult<Py<PyAny>> {
        let options = AddOptions {
            ingest: IngestOptions::default(),
            commit_every: 10_000,
            strict,
            fields: metadata_fields(fields)?,
        };
        let mut interrupts = Interrupts::new();
        let (counts, generation) = py.detach(|| {
            self.write(progress, |writer, bar| {
                let walk = lector_ingest::walk(&paths);
                bar.set_length(walk.files.iter().map(|f| f.bytes).sum());
                let writer: &mut dyn StoreWriter = writer;
                let added = add_files(writer, walk, &options, &mut |event| {
                    match event {
                        AddEvent::Read { bytes } => bar.set_position(bytes),
                        AddEvent::Skipped(err) => {
                            bar.suspend(|| eprintln!("warning: skipped: {err}"))
                        }
                        _ => {}
                    }
                    interrupts.poll()
                });
                match added {
                    Err(lector_index::Error::AddStopped { kept, .. }) if interrupts.was_raised() => {
                        Err(interrupts.raised(&format!("stopped; the index keeps its last commit, {kept} documents, and nothing read since")))
                    }
                    other => other.or_raise(),
                }
            })
        })?;
        self.summary(py, &counts, generation)
    }

    /// Removes documents by id; returns how many there were.
    fn delete(&self, py: Python<'_>, ids: Vec<String>) -> PyResult<usize> {
        let (removed, _) = py.detach(|| {
            self.write(false, |writer, _| {
                Ok(ids.iter().filter(|id| writer.remove(id)).count())
            })
        })?;
        Ok(removed)
    }

    /// The best `k` passages for `query` as dicts (the fields of `lector search --json`). With
    /// `vector` (the query's own vector, from the model of the documents' own vectors) dense and
    /// hybrid search use it instead of embedding `query`; the mode is then dense by default.
    /// With `documents`, the best `k` documents instead, each scored by its best passage
    /// (MaxP), as the dicts of [`Self::documents`] with a `score`.
    #[pyo3(signature = (query, k = 10, *, mode = None, filter = None, vector = None, documents = false))]
    #[allow(clippy::too_many_arguments)]
    fn search(
        &self,
        py: Python<'_>,
        query: &str,
        k: usize,
        mode: Option<&str>,
        filter: Option<Bound<'_, PyAny>>,
        vector: Option<Vec<f32>>,
        documents: bool,
    ) -> PyResult<Py<PyAny>> {
        let mode = match (parse_mode(mode)?, &vector) {
            (None, Some(_)) => Some(Mode::Dense),
            (mode, _) => mode,
        };
        let config = RetrievalConfig {
            mode,
            embedder: self.embedder_spec.clone(),
            filter: parse_filter(filter)?,
            ..RetrievalConfig::default()
        };
        let index = self.snapshot()?;
        let found = py.detach(|| -> PyResult<Value> {
            let search = config.search_options(index.as_ref()).or_raise()?;
            let embedder: Option<Arc<dyn Embedder>> = match (search.mode.is_dense(), vector) {
                (false, _) => None,
                (true, Some(vector)) => Some(Arc::new(QueryVector {
                    model: lector_index::Index::dense_meta(&index)
                        .map(|m| m.model.clone())
                        .unwrap_or_default(),
                    vector,
                })),
                (true, None) => Some(self.embedder()?),
            };
            let retriever = index.retriever(&search, embedder.as_deref()).or_raise()?;
            if !documents {
                return serde_json::to_value(retriever.retrieve(query, k).or_raise()?)
                    .map_err(|e| PyValueError::new_err(e.to_string()));
            }
            let passages = retriever
                .retrieve(query, k.saturating_mul(DOCUMENT_DEPTH))
                .or_raise()?;
            let ranked = rank_documents(&passages, k)
                .iter()
                .filter_map(|hit| {
                    let mut doc = document_json(&index, &index.document(&hit.doc_id)?);
                    doc["score"] = json!(hit.score);
                    Some(doc)
                })
                .collect();
            Ok(Value::Array(ranked))
        })?;
        Ok(crate::to_py(py, &found)?.unbind())
    }

    /// The documents that pass `filter` (all without one) as dicts `{id, text, title, date,
    /// metadata, embedding, embedding_model}`, in the index's order (oldest commit first, in the
    /// order they were added); none before the index exists.
    #[pyo3(signature = (*, filter = None))]
    fn documents(&self, py: Python<'_>, filter: Option<Bound<'_, PyAny>>) -> PyResult<Py<PyAny>> {
        let filter = parse_filter(filter)?;
        let Some(index) = self.existing()? else {
            return Ok(serialized(py, &Vec::<Value>::new())?.unbind());
        };
        let documents = py.detach(|| {
            let page = index.documents_page(None, 0, usize::MAX, filter.as_ref());
            let documents = page.documents.iter().map(|d| document_json(&index, d));
            Value::Array(documents.collect())
        });
        Ok(crate::to_py(py, &documents)?.unbind())
    }

    /// How many documents pass `filter` (all without one); 0 before the index exists.
    #[pyo3(signature = (*, filter = None))]
    fn count(&self, py: Python<'_>, filter: Option<Bound<'_, PyAny>>) -> PyResult<usize> {
        let filter = parse_filter(filter)?;
        Ok(match self.existing()? {
            Some(index) => py.detach(|| index.count(filter.as_ref())),
            None => 0,
        })
    }

    /// Document and passage counts and the index's settings.
    fn stats(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let index = self.snapshot()?;
        Ok(serialized(py, &index.stats())?.unbind())
    }

    /// Reads the index's latest commit (made by another process or object).
    fn reload(&self, py: Python<'_>) -> PyResult<()> {
        py.detach(|| self.reopen().map(|_| ()))
    }

    fn __repr__(&self) -> String {
        format!("Index({:?})", self.dir.display().to_string())
    }
}

impl Index {
    fn summary(&self, py: Python<'_>, counts: &AddCounts, generation: u64) -> PyResult<Py<PyAny>> {
        let totals = self.snapshot()?.counts().or_raise()?;
        let out = json!({
            "generation": generation, "added": counts.added, "replaced": counts.replaced,
            "unchanged": counts.unchanged, "skipped_invalid": counts.invalid,
            "ignored_files": counts.ignored, "documents": totals.documents, "passages": totals.passages,
        });
        Ok(serialized(py, &out)?.unbind())
    }
}

/// A document as Python sees it: `{id, text, title, date, metadata, embedding,
/// embedding_model}`, the model named only with a vector.
fn document_json(index: &lector_index::Index, doc: &DocumentRef<'_>) -> Value {
    let model = lector_index::Index::dense_meta(index).map(|m| m.model.as_str());
    let metadata: Option<Value> = doc.metadata.and_then(|m| serde_json::from_str(m).ok());
    json!({
        "id": doc.id, "text": doc.text, "title": doc.title, "date": doc.date,
        "metadata": metadata, "embedding": doc.embedding,
        "embedding_model": doc.embedding.and(model),
    })
}

/// Python's signals (Ctrl-C) seen from work done without the GIL: polled at most every 50 ms,
/// since each poll takes the GIL.
struct Interrupts {
    polled: Instant,
    raised: Option<PyErr>,
}

impl Interrupts {
    const EVERY: Duration = Duration::from_millis(50);

    fn new() -> Self {
        Interrupts {
            polled: Instant::now(),
            raised: None,
        }
    }

    /// `Break` once a signal handler has raised (and from then on).
    fn poll(&mut self) -> ControlFlow<()> {
        if self.raised.is_none() && self.polled.elapsed() >= Self::EVERY {
            self.polled = Instant::now();
            self.raised = Python::attach(|py| py.check_signals()).err();
        }
        match self.raised {
            Some(_) => ControlFlow::Break(()),
            None => ControlFlow::Continue(()),
        }
    }

    fn was_raised(&self) -> bool {
        self.raised.is_some()
    }

    /// The handler's exception; a `KeyboardInterrupt` says what the index kept (`state`).
    fn raised(&mut self, state: &str) -> PyErr {
        let err = self.raised.take().expect("raised after a Break");
        let interrupted = Python::attach(|py| err.is_instance_of::<PyKeyboardInterrupt>(py));
        match interrupted {
            true => PyKeyboardInterrupt::new_err(format!("interrupted: {state}")),
            false => err,
        }
    }
}

/// A progress bar on stderr when asked for, else a hidden one.
pub(crate) fn bar(visible: bool) -> ProgressBar {
    if !visible {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(0);
    bar.set_style(
        ProgressStyle::with_template("{spinner} [{elapsed_precise}] {wide_bar} {pos}/{len} {msg}")
            .expect("valid template"),
    );
    bar
}

/// `fields` (a dict) as metadata fields.
fn metadata_fields(fields: Option<Bound<'_, PyAny>>) -> PyResult<Map<String, Value>> {
    match fields {
        None => Ok(Map::new()),
        Some(fields) => match from_py(&fields, "fields")? {
            Value::Object(map) => Ok(map),
            _ => Err(PyValueError::new_err("fields must be a dict")),
        },
    }
}

/// `bm25`, `dense` or `hybrid`; `None`: the index's default.
pub(crate) fn parse_mode(mode: Option<&str>) -> PyResult<Option<Mode>> {
    mode.map(|m| m.parse().map_err(PyValueError::new_err))
        .transpose()
}

/// Retrieval by `mode` (a name, `None`: the index's default) with `embedder` for dense search.
pub(crate) fn retrieval_config(
    mode: Option<&str>,
    embedder: Option<PathBuf>,
) -> PyResult<lector_pipeline::RetrievalConfig> {
    Ok(lector_pipeline::RetrievalConfig {
        mode: parse_mode(mode)?,
        embedder,
        ..Default::default()
    })
}

/// Reranking by the cross-encoder `model` over the first `depth` passages, when one is given.
pub(crate) fn rerank_config(
    model: Option<PathBuf>,
    depth: usize,
) -> Option<lector_pipeline::RerankConfig> {
    model.map(|model| lector_pipeline::RerankConfig { model, depth })
}

/// A filter in lector's text syntax (`'year >= 2023 and product == "a"'`) or as a Haystack 2
/// filter dict.
pub(crate) fn parse_filter(filter: Option<Bound<'_, PyAny>>) -> PyResult<Option<Filter>> {
    let Some(filter) = filter else {
        return Ok(None);
    };
    if filter.is_none() {
        return Ok(None);
    }
    let parsed = match filter.extract::<String>() {
        Ok(text) => Filter::parse(&text),
        Err(_) => Filter::from_json(&from_py(&filter, "filter")?),
    };
    // The dict syntax's messages name where they are (`filter.conditions[0]`); the text's do not.
    parsed
        .map(Some)
        .map_err(|e| match e.0.starts_with("filter") {
            true => PyValueError::new_err(e.0),
            false => PyValueError::new_err(format!("filter: {}", e.0)),
        })
}
