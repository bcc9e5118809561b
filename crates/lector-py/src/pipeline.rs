//! `lector._lector.Pipeline`: retrieve, read and aggregate, as `lector ask` does.

use crate::index::{parse_filter, parse_mode, Index};
use crate::reader::Reader;
use crate::{bad_argument, from_py, serialized, OrRaise};
use lector_index::{Filter, Hit};
use lector_pipeline::generative::{self, DecodingSpec};
use lector_pipeline::multihop::{Decomposition, HopOptions, LlmDecomposer};
use lector_pipeline::prompting;
use lector_pipeline::{AskOptions, Calibration, PipelineConfig, RetrievalConfig};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::path::PathBuf;
use std::sync::{Arc, RwLock};

type Snapshot = Arc<lector_index::Index>;

/// Question answering over an `Index`: follows the index object's commits (its own writes and
/// `reload()`), keeping the reader, embedder and calibration it was built with.
#[pyclass(module = "lector._lector", frozen)]
pub struct Pipeline {
    index: Py<Index>,
    built: RwLock<Arc<lector_pipeline::Pipeline<Snapshot>>>,
    search: lector_index::SearchOptions,
    /// The reader checkpoint given (`None`: the default reader).
    reader: Option<PathBuf>,
    /// The reranker's checkpoint, when there is one.
    rerank: Option<PathBuf>,
}

impl Pipeline {
    /// The search options the pipeline was built with.
    pub(crate) fn search(&self) -> &lector_index::SearchOptions {
        &self.search
    }

    /// The reader and reranker checkpoints it was built with (`None`: the default reader; no
    /// reranker).
    pub(crate) fn checkpoints(&self) -> (Option<PathBuf>, Option<PathBuf>) {
        (self.reader.clone(), self.rerank.clone())
    }

    /// The pipeline over the index object's current snapshot, rebuilt around it when it changed.
    pub(crate) fn current(
        &self,
        py: Python<'_>,
    ) -> PyResult<Arc<lector_pipeline::Pipeline<Snapshot>>> {
        let snapshot = self.index.get().snapshot()?;
        let built = Arc::clone(&self.built.read().expect("not poisoned"));
        if Arc::ptr_eq(built.store(), &snapshot) {
            return Ok(built);
        }
        let next = Arc::new(py.detach(|| built.with_store(snapshot)));
        *self.built.write().expect("not poisoned") = Arc::clone(&next);
        Ok(next)
    }
}

#[pymethods]
impl Pipeline {
    /// Builds the pipeline over `index` with `reader` (`None`: `$LECTOR_READER`, else the shipped
    /// reader), retrieving with `mode` (`None`: hybrid for a dense index, else BM25), reranking
    /// with the cross-encoder `rerank` when given, and the index's calibration.
    #[new]
    #[pyo3(signature = (index, reader = None, *, mode = None, filter = None, rerank = None, rerank_depth = lector_index::DEFAULT_RERANK_DEPTH))]
    fn new(
        py: Python<'_>,
        index: Py<Index>,
        reader: Option<PyRef<'_, Reader>>,
        mode: Option<&str>,
        filter: Option<Bound<'_, PyAny>>,
        rerank: Option<PathBuf>,
        rerank_depth: usize,
    ) -> PyResult<Self> {
        let config = PipelineConfig {
            reader: reader.map(|r| r.dir()),
            retrieval: RetrievalConfig {
                mode: parse_mode(mode)?,
                embedder: index.get().embedder_spec(),
                filter: parse_filter(filter)?,
                ..RetrievalConfig::default()
            },
            rerank: crate::index::rerank_config(rerank, rerank_depth),
        };
        let snapshot = index.get().snapshot()?;
        let built = py.detach(|| {
            let calibration = Calibration::load_from(snapshot.as_ref()).or_raise()?;
            config
                .build_over(snapshot, calibration, &|m| eprintln!("{m}"))
                .or_raise()
        })?;
        for warning in &built.warnings {
            eprintln!("warning: {warning}");
        }
        Ok(Pipeline {
            index,
            built: RwLock::new(Arc::new(built.pipeline)),
            search: built.search,
            reader: config.reader.clone(),
            rerank: config.rerank.as_ref().map(|r| r.model.clone()),
        })
    }

    /// Answers each question (read in one batch) as a dict with the fields of `lector ask
    /// --json`: `answer` (text, score, confidence, evidence) or `abstention`, `candidates`,
    /// `passages`, `timings`. `options`: see `Pipeline::ask_options`. `progress` shows the
    /// reading of the passages on stderr.
    #[pyo3(signature = (questions, options = None, progress = false))]
    fn ask_many(
        &self,
        py: Python<'_>,
        questions: Vec<String>,
        options: Option<Bound<'_, PyDict>>,
        progress: bool,
    ) -> PyResult<Py<PyAny>> {
        let options = self.ask_options(options)?;
        let pipeline = self.current(py)?;
        let bar = crate::index::bar(progress);
        let responses = py.detach(|| {
            let questions: Vec<&str> = questions.iter().map(String::as_str).collect();
            pipeline
                .ask_many(&questions, &options, &mut |p| {
                    bar.set_length(p.total as u64);
                    bar.set_position(p.done as u64);
                })
                .or_raise()
        })?;
        bar.finish_and_clear();
        Ok(serialized(py, &responses)?.unbind())
    }

    /// Reads `hits` (dicts with the fields of `Index.search`'s hits, best first), passages another
    /// retriever found for `question`, and aggregates their answers as `ask_many` does.
    #[pyo3(signature = (question, hits, options = None))]
    fn answer_passages(
        &self,
        py: Python<'_>,
        question: String,
        hits: Vec<Bound<'_, PyAny>>,
        options: Option<Bound<'_, PyDict>>,
    ) -> PyResult<Py<PyAny>> {
        let options = self.ask_options(options)?;
        let hits = hits
            .iter()
            .enumerate()
            .map(|(i, hit)| {
                serde_json::from_value(from_py(hit, &format!("hits[{i}]"))?)
                    .map_err(|e| PyValueError::new_err(format!("hits[{i}]: {e}")))
            })
            .collect::<PyResult<Vec<Hit>>>()?;
        let pipeline = self.current(py)?;
        let response = py.detach(|| {
            pipeline
                .answer_passages(&question, hits, &options)
                .or_raise()
        })?;
        Ok(serialized(py, &response)?.unbind())
    }

    /// A generated answer to `question` as `lector ask --generate --json` gives it: the
    /// passages this pipeline retrieves (reading them first on an index with a confidence map,
    /// to name disagreeing readings), a prompt (`prompt`: a file or shipped name; few-shot
    /// `examples`), the local GGUF `generator_model` or the `endpoint` model `api_model`
    /// (`api_key`: default `$OPENAI_API_KEY`), decoded greedily at temperature 0, else sampled
    /// with `seed`, or by `beams`; then citations and claims checked. `on_token` is called with
    /// each piece of text as it is generated (returning nothing); an exception it raises stops
    /// the generation and is raised here. `closed_book`: no retrieval.
    #[pyo3(signature = (question, options = None, *, closed_book = false, prompt = None,
        examples = None, shots = 3, select = "fixed", generator_model = None, endpoint = None,
        api_model = None, api_key = None, timeout = 120.0, api_context = 8192, temperature = 0.0,
        top_p = 1.0, seed = 0, beams = None, length_penalty = 1.0, max_new_tokens = None,
        stop = Vec::new(), repeat_penalty = 1.0, on_token = None))]
    #[allow(clippy::too_many_arguments)]
    fn generate(
        &self,
        py: Python<'_>,
        question: String,
        options: Option<Bound<'_, PyDict>>,
        closed_book: bool,
        prompt: Option<String>,
        examples: Option<PathBuf>,
        shots: usize,
        select: &str,
        generator_model: Option<PathBuf>,
        endpoint: Option<String>,
        api_model: Option<String>,
        api_key: Option<String>,
        timeout: f64,
        api_context: usize,
        temperature: f64,
        top_p: f64,
        seed: u64,
        beams: Option<usize>,
        length_penalty: f64,
        max_new_tokens: Option<usize>,
        stop: Vec<String>,
        repeat_penalty: f32,
        on_token: Option<Py<PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        let options = self.ask_options(options)?;
        let spec = crate::generate::generator_spec(
            generator_model,
            endpoint,
            api_model,
            api_key,
            timeout,
            api_context,
        )?;
        let decoding = DecodingSpec {
            temperature,
            top_p,
            seed,
            beams,
            length_penalty,
            max_new_tokens,
            stop,
            repeat_penalty,
        };
        let prompt_spec = crate::generate::prompt_spec(prompt, examples, shots, select)?;
        let pipeline = self.current(py)?;
        let mut callback = crate::generate::TokenCallback::new(on_token);
        let out = py.detach(|| -> PyResult<serde_json::Value> {
            let prompting =
                prompting::load(&prompt_spec, &|m| eprintln!("{m}"), &mut |_, _| {}).or_raise()?;
            let generation = decoding.options_for(&prompting).or_raise()?;
            let layout = prompting.layout(&question, Default::default()).or_raise()?;
            let generator = spec.load(&|m| eprintln!("{m}")).or_raise()?;
            let mut tell = |piece: &str| callback.tell(piece);
            let generated = match closed_book {
                true => generative::answer(
                    generator.as_ref(),
                    &question,
                    None,
                    &generation,
                    layout,
                    &mut tell,
                ),
                false => pipeline.generate(
                    generator.as_ref(),
                    &question,
                    &options,
                    &generation,
                    layout,
                    &mut tell,
                ),
            };
            Ok(generated.or_raise()?.to_json(&generator.name()))
        });
        let out = callback.finish(out)?;
        Ok(crate::to_py(py, &out)?.unbind())
    }

    /// Answers a multi-hop question as `lector ask --hops 2 --json` does: a second retrieval
    /// hop from the first hop's passages (`second_hop`: lexical, dense or both; `beam` passages
    /// expanded, `paths` passage pairs read; `stop_confidence` stops after hop 1), bridge
    /// questions split by `decompose` (rules, llm or none; llm with the local
    /// `generator_model` or `api_model` behind `endpoint`). The response's `hops` holds the
    /// chain.
    #[pyo3(signature = (question, options = None, *, second_hop = "lexical", beam = None,
        paths = None, stop_confidence = None, decompose = "rules", generator_model = None,
        endpoint = None, api_model = None))]
    #[allow(clippy::too_many_arguments)]
    fn ask_hops(
        &self,
        py: Python<'_>,
        question: String,
        options: Option<Bound<'_, PyDict>>,
        second_hop: &str,
        beam: Option<usize>,
        paths: Option<usize>,
        stop_confidence: Option<f64>,
        decompose: &str,
        generator_model: Option<PathBuf>,
        endpoint: Option<String>,
        api_model: Option<String>,
    ) -> PyResult<Py<PyAny>> {
        let options = self.ask_options(options)?;
        let defaults = HopOptions::default();
        let hops = HopOptions {
            second_hop: second_hop.parse().map_err(bad_argument)?,
            beam: beam.unwrap_or(defaults.beam),
            paths: paths.unwrap_or(defaults.paths),
            stop_confidence,
            ..defaults
        };
        let decomposition: Decomposition = decompose.parse().map_err(bad_argument)?;
        let spec = match decomposition {
            Decomposition::Llm => Some(crate::generate::judge_spec(
                generator_model,
                endpoint,
                api_model,
                None,
            )?),
            _ => None,
        };
        let pipeline = self.current(py)?;
        let response = py.detach(|| {
            let llm = match &spec {
                Some(spec) => Some(LlmDecomposer::new(Arc::from(
                    spec.load(&|m| eprintln!("{m}")).or_raise()?,
                ))),
                None => None,
            };
            let decomposer = decomposition.decomposer(llm.as_ref());
            pipeline
                .ask_hops_with(&question, &options, &hops, decomposer)
                .or_raise()
        })?;
        Ok(serialized(py, &response)?.unbind())
    }

    /// The index this pipeline answers from.
    #[getter]
    fn index(&self, py: Python<'_>) -> Py<Index> {
        self.index.clone_ref(py)
    }
}

impl Pipeline {
    /// The options of one ask, from a dict with any of: `k`, `filter` (lector's text syntax or a
    /// Haystack filter dict, added to the pipeline's own), `vote`, `answers_per_passage`,
    /// `rank_prior`, `prefer_recent`, `ambiguity_odds`. Unknown keys are errors.
    fn ask_options(&self, given: Option<Bound<'_, PyDict>>) -> PyResult<AskOptions> {
        let mut options = AskOptions {
            search: Some(self.search.clone()),
            ..AskOptions::default()
        };
        let Some(given) = given else {
            return Ok(options);
        };
        for (key, value) in given.iter() {
            let key: String = key.extract()?;
            match key.as_str() {
                "k" => options.k = named(&value, "k")?,
                "filter" => {
                    if let Some(filter) = parse_filter(Some(value))? {
                        let search = options.search.as_mut().expect("set above");
                        search.filter = Some(match search.filter.take() {
                            Some(own) => Filter::And(vec![own, filter]),
                            None => filter,
                        });
                    }
                }
                "vote" => options.vote = named(&value, "vote")?,
                "answers_per_passage" => options.read.top_k = named(&value, "answers_per_passage")?,
                "rank_prior" => options.rank_prior = named(&value, "rank_prior")?,
                "prefer_recent" => options.prefer_recent = named(&value, "prefer_recent")?,
                "ambiguity_odds" => options.ambiguity_odds = named(&value, "ambiguity_odds")?,
                other => {
                    return Err(PyValueError::new_err(format!(
                        "unknown ask option `{other}`"
                    )))
                }
            }
        }
        options.validate().map_err(bad_argument)?;
        Ok(options)
    }
}

/// The ask option `name`'s value, or a `ValueError` naming it (`k=-1` is not an overflow).
fn named<'py, T: for<'a> FromPyObject<'a, 'py>>(
    value: &Bound<'py, PyAny>,
    name: &str,
) -> PyResult<T> {
    value.extract().map_err(|_| {
        let given = value.repr().map(|r| r.to_string()).unwrap_or_default();
        let wanted = std::any::type_name::<T>();
        let wanted = match wanted {
            "usize" => "a positive integer",
            "f64" => "a number",
            "bool" => "True or False",
            other => other,
        };
        PyValueError::new_err(format!("{name} must be {wanted}, not {given}"))
    })
}
