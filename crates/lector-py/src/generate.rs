//! `lector._lector.generative`: `lector eval generative` on the local generator, with a prompt
//! file and few-shot examples.

use crate::{serialized, OrRaise};
use lector_generate::{GenerateOptions, Message};
use lector_pipeline::generative::{DecodingSpec, EndpointSpec, GeneratorSpec};
use lector_pipeline::odqa;
use lector_pipeline::prompting::{self, PromptSpec};
use pyo3::prelude::*;
use std::ops::ControlFlow;
use std::path::PathBuf;
use std::time::Duration;

/// Generated answers scored as `lector eval generative --json` scores them: `data` a SQuAD file
/// (open book: each answerable question with its gold paragraph, unless `closed_book`) or, with
/// `squad=False`, NQ-open JSON lines (closed book); greedy decoding with the local GGUF
/// `generator_model` [default: the registry's]. `prompt` names a prompt file or a shipped prompt;
/// `examples` few-shot examples, `shots` per question, chosen `fixed` or `similar` (by the
/// embedder). With `reader` (open book), the extractive reader (`reader_model`, default the
/// shipped one) on the same paragraphs; with a judge, its equivalence verdicts. With
/// `per_question`, the per-question rows too.
#[pyfunction]
#[pyo3(signature = (data, *, squad = true, closed_book = false, limit = None, prompt = None,
    examples = None, shots = 3, select = "fixed", generator_model = None, max_new_tokens = None,
    reader = false, reader_model = None, judge_model = None, judge_endpoint = None,
    judge_api_model = None, judge_api_key = None, per_question = false, progress = false))]
#[allow(clippy::too_many_arguments)]
pub fn generative(
    py: Python<'_>,
    data: PathBuf,
    squad: bool,
    closed_book: bool,
    limit: Option<usize>,
    prompt: Option<String>,
    examples: Option<PathBuf>,
    shots: usize,
    select: &str,
    generator_model: Option<PathBuf>,
    max_new_tokens: Option<usize>,
    reader: bool,
    reader_model: Option<PathBuf>,
    judge_model: Option<PathBuf>,
    judge_endpoint: Option<String>,
    judge_api_model: Option<String>,
    judge_api_key: Option<String>,
    per_question: bool,
    progress: bool,
) -> PyResult<Py<PyAny>> {
    use lector_pipeline::lab::generative;
    if !squad && !closed_book {
        return Err(crate::bad_argument(
            "questions without paragraphs (squad=False) need closed_book=True",
        ));
    }
    let spec = prompt_spec(prompt, examples, shots, select)?;
    let judge = optional_judge(judge_model, judge_endpoint, judge_api_model, judge_api_key)?;
    let decoding = DecodingSpec {
        max_new_tokens,
        ..DecodingSpec::default()
    };
    let bar = crate::index::bar(progress);
    let out = py.detach(|| -> PyResult<serde_json::Value> {
        let dataset = match squad {
            true => odqa::squad_questions(&data, limit, false).or_raise()?.0,
            false => odqa::open_questions(&data, limit).or_raise()?.0,
        };
        let notify = |m: &str| eprintln!("{m}");
        let prompting = prompting::load(&spec, &notify, &mut |_, _| {}).or_raise()?;
        let generation = decoding.options_for(&prompting).or_raise()?;
        let generator =
            lector_pipeline::config::load_generator(generator_model.as_deref(), &notify)
                .or_raise()?;
        let open_book = !closed_book;
        let reader = match reader && open_book {
            true => {
                let dir =
                    lector_models::registry::resolve_reader(reader_model.as_deref()).or_raise()?;
                Some(lector_reader::Reader::load(&dir).or_raise()?)
            }
            false => None,
        };
        let judge = match &judge {
            Some(spec) => Some(spec.load(&notify).or_raise()?),
            None => None,
        };
        let models = generative::Models {
            generator: &generator,
            generation: &generation,
            prompting: &prompting,
            reader: reader.as_ref(),
            judge: judge.as_deref(),
        };
        let report = generative::run(&dataset, open_book, &models, &mut |_, done, total| {
            bar.set_length(total as u64);
            bar.set_position(done as u64);
        })
        .or_raise()?;
        let mut out = report.json;
        if per_question {
            out["per_question"] = report.per_question.into();
        }
        Ok(out)
    })?;
    bar.finish_and_clear();
    Ok(serialized(py, &out)?.unbind())
}

/// A prompt file or shipped prompt's name, with few-shot `examples`, `shots` per question chosen
/// by `select` (`fixed` or `similar`).
pub(crate) fn prompt_spec(
    prompt: Option<String>,
    examples: Option<PathBuf>,
    shots: usize,
    select: &str,
) -> PyResult<PromptSpec> {
    Ok(PromptSpec {
        prompt,
        examples,
        shots,
        select: select.parse().map_err(crate::bad_argument)?,
        embedder: None,
    })
}

/// The judge a call names (`judge_model`, or `judge_api_model` behind `judge_endpoint`), if any.
pub(crate) fn optional_judge(
    model: Option<PathBuf>,
    endpoint: Option<String>,
    api_model: Option<String>,
    api_key: Option<String>,
) -> PyResult<Option<GeneratorSpec>> {
    match (&model, &endpoint) {
        (None, None) => Ok(None),
        _ => Ok(Some(judge_spec(model, endpoint, api_model, api_key)?)),
    }
}

/// `lector eval generative --squad DATA --retrieve --json`: the SQuAD file's paragraphs added to
/// the index at `index` (a new directory the caller keeps or removes), every question answered
/// from the top `k` retrieved passages by the generator (`generator_model`, or `api_model`
/// behind `endpoint`; greedy unless `temperature`), and judged by `judge_model` /
/// `judge_endpoint` when given. With `per_question`, the records of `--per-question`.
#[pyfunction]
#[pyo3(signature = (data, index, *, k = 5, limit = None, withhold_every = None, order = "edges",
    mode = None, embedder = None, rerank = None,
    rerank_depth = lector_index::DEFAULT_RERANK_DEPTH, prompt = None, examples = None, shots = 3,
    select = "fixed", generator_model = None, endpoint = None, api_model = None, api_key = None,
    temperature = 0.0, seed = 0, max_new_tokens = None, judge_model = None,
    judge_endpoint = None, judge_api_model = None, judge_api_key = None, judge_claims = false,
    bertscore_model = None, bertscore_layer = None, resamples = 1000, confidence = 0.95,
    per_question = false, progress = false))]
#[allow(clippy::too_many_arguments)]
pub fn rag(
    py: Python<'_>,
    data: PathBuf,
    index: PathBuf,
    k: usize,
    limit: Option<usize>,
    withhold_every: Option<usize>,
    order: &str,
    mode: Option<&str>,
    embedder: Option<PathBuf>,
    rerank: Option<PathBuf>,
    rerank_depth: usize,
    prompt: Option<String>,
    examples: Option<PathBuf>,
    shots: usize,
    select: &str,
    generator_model: Option<PathBuf>,
    endpoint: Option<String>,
    api_model: Option<String>,
    api_key: Option<String>,
    temperature: f64,
    seed: u64,
    max_new_tokens: Option<usize>,
    judge_model: Option<PathBuf>,
    judge_endpoint: Option<String>,
    judge_api_model: Option<String>,
    judge_api_key: Option<String>,
    judge_claims: bool,
    bertscore_model: Option<PathBuf>,
    bertscore_layer: Option<usize>,
    resamples: usize,
    confidence: f64,
    per_question: bool,
    progress: bool,
) -> PyResult<Py<PyAny>> {
    use lector_pipeline::lab::rag::{self, BertScoreModel};
    let options = rag::Options {
        limit,
        withhold_every,
        k,
        order: order.parse().map_err(crate::bad_argument)?,
        retrieval: crate::index::retrieval_config(mode, embedder)?,
        rerank: crate::index::rerank_config(rerank, rerank_depth),
        bertscore: bertscore_model.map(|dir| BertScoreModel {
            dir,
            layer: bertscore_layer,
        }),
        judge_claims,
        bootstrap: lector_eval::stats::Bootstrap {
            resamples,
            confidence,
            seed: 0,
        },
    };
    options.check().map_err(crate::bad_argument)?;
    if judge_claims && judge_model.is_none() && judge_endpoint.is_none() {
        return Err(crate::bad_argument(
            "judge_claims needs judge_model or judge_endpoint",
        ));
    }
    let spec = prompt_spec(prompt, examples, shots, select)?;
    let generator = judge_spec(generator_model, endpoint, api_model, api_key)?;
    let judge = optional_judge(judge_model, judge_endpoint, judge_api_model, judge_api_key)?;
    let decoding = DecodingSpec {
        temperature,
        seed,
        max_new_tokens,
        ..DecodingSpec::default()
    };
    let bar = crate::index::bar(progress);
    let report = py.detach(|| -> PyResult<rag::Report> {
        let notify = |m: &str| eprintln!("{m}");
        let prompting = prompting::load(&spec, &notify, &mut |_, _| {}).or_raise()?;
        let generation = decoding.options_for(&prompting).or_raise()?;
        let generator = generator.load(&notify).or_raise()?;
        let judge = match &judge {
            Some(spec) => Some(spec.load(&notify).or_raise()?),
            None => None,
        };
        let models = rag::Models {
            generator: generator.as_ref(),
            generation: &generation,
            prompting: &prompting,
            judge: judge.as_deref(),
        };
        rag::run(
            &data,
            &index,
            &options,
            &models,
            &notify,
            &mut |step, done, total| {
                bar.set_message(step.name());
                bar.set_length(total as u64);
                bar.set_position(done as u64);
            },
        )
        .or_raise()
    })?;
    bar.finish_and_clear();
    let mut out = report.to_json();
    if per_question {
        out["per_question"] = report.per_question.into();
    }
    Ok(serialized(py, &out)?.unbind())
}

/// `lector generate-questions` over the pipeline's index: questions proposed by rule from the
/// index's passages (the first `limit_passages`, `per_passage` candidate answers each), kept
/// when the pipeline's reader recovers the answer (F1 at least `min_f1`) and its retrieval ranks
/// the passage within `k`. Returns `{"report": ..., "squad": ...}`: the counts of each step, and
/// the questions as the SQuAD v1.1 JSON the CLI writes.
#[pyfunction]
#[pyo3(signature = (pipeline, *, per_passage = 3, limit_passages = None, min_f1 = 1.0, k = 5,
    progress = false))]
pub fn generate_questions(
    py: Python<'_>,
    pipeline: &Bound<'_, crate::pipeline::Pipeline>,
    per_passage: usize,
    limit_passages: Option<usize>,
    min_f1: f64,
    k: usize,
    progress: bool,
) -> PyResult<Py<PyAny>> {
    use lector_pipeline::questions::{self, Method, Options};
    if per_passage == 0 || k == 0 || !(0.0..=1.0).contains(&min_f1) {
        return Err(crate::bad_argument(
            "per_passage and k must be at least 1, min_f1 in [0, 1]",
        ));
    }
    let options = Options {
        method: Method::Rules,
        per_passage,
        min_f1,
        k,
        search: pipeline.get().search().clone(),
    };
    let built = pipeline.get().current(py)?;
    let bar = crate::index::bar(progress);
    let out = py.detach(|| -> PyResult<serde_json::Value> {
        let passages = questions::passages_of(built.store(), limit_passages);
        let (found, report) = questions::generate(
            &built,
            &passages,
            &options,
            None,
            &mut |step, done, total| {
                bar.set_message(step.to_string());
                bar.set_length(total as u64);
                bar.set_position(done as u64);
            },
        )
        .or_raise()?;
        Ok(serde_json::json!({
            "report": report,
            "squad": questions::to_squad(&found),
        }))
    })?;
    bar.finish_and_clear();
    Ok(serialized(py, &out)?.unbind())
}

/// The generator a call names: the local GGUF `model` (`None`: the registry's), or `api_model`
/// behind the OpenAI-compatible `endpoint`.
pub(crate) fn generator_spec(
    model: Option<PathBuf>,
    endpoint: Option<String>,
    api_model: Option<String>,
    api_key: Option<String>,
    timeout: f64,
    api_context: usize,
) -> PyResult<GeneratorSpec> {
    let endpoint = match (endpoint, api_model) {
        (None, None) => None,
        (Some(url), Some(name)) => {
            if !(timeout.is_finite() && timeout > 0.0) {
                return Err(crate::bad_argument(
                    "timeout must be a positive number of seconds",
                ));
            }
            Some(EndpointSpec {
                api_key,
                timeout: Duration::from_secs_f64(timeout),
                context_window: api_context,
                ..EndpointSpec::new(&url, &name)
            })
        }
        _ => return Err(crate::bad_argument("endpoint and api_model go together")),
    };
    Ok(GeneratorSpec {
        local: model,
        endpoint,
    })
}

/// The generator an evaluation call names, with the CLI's default timeout and context window.
pub(crate) fn judge_spec(
    model: Option<PathBuf>,
    endpoint: Option<String>,
    api_model: Option<String>,
    api_key: Option<String>,
) -> PyResult<GeneratorSpec> {
    generator_spec(model, endpoint, api_model, api_key, 120.0, 8192)
}

/// The CLI's default decoding (greedy, the default answer length), as `eval judge` and `eval
/// faithfulness --judge` decode.
pub(crate) fn default_decoding() -> PyResult<GenerateOptions> {
    DecodingSpec::default()
        .options_for(&Default::default())
        .or_raise()
}

/// A Python callable given each generated piece of text (with the GIL); an exception it raises
/// stops the generation and is kept to be raised once the call returns.
pub(crate) struct TokenCallback {
    callback: Option<Py<PyAny>>,
    raised: Option<PyErr>,
}

impl TokenCallback {
    pub(crate) fn new(callback: Option<Py<PyAny>>) -> Self {
        TokenCallback {
            callback,
            raised: None,
        }
    }

    /// Hands `piece` to the callable; `Break` once it raised.
    pub(crate) fn tell(&mut self, piece: &str) -> ControlFlow<()> {
        let Some(callback) = &self.callback else {
            return ControlFlow::Continue(());
        };
        Python::attach(|py| match callback.call1(py, (piece,)) {
            Ok(_) => ControlFlow::Continue(()),
            Err(err) => {
                self.raised = Some(err);
                ControlFlow::Break(())
            }
        })
    }

    /// `result`, unless the callable raised: then its exception.
    pub(crate) fn finish<T>(self, result: PyResult<T>) -> PyResult<T> {
        match self.raised {
            Some(err) => Err(err),
            None => result,
        }
    }
}

/// A loaded text generator (a local GGUF model or an endpoint's model), for frameworks that
/// prompt a model themselves.
#[pyclass(module = "lector._lector", frozen)]
pub struct Generator {
    inner: Box<dyn lector_generate::Generator>,
}

#[pymethods]
impl Generator {
    /// Loads the local GGUF `model` (`None`: the registry's SmolLM2-135M-Instruct, fetched
    /// into the user cache on first use), or names `api_model` behind `endpoint`.
    #[new]
    #[pyo3(signature = (model = None, *, endpoint = None, api_model = None, api_key = None,
        timeout = 120.0, api_context = 8192))]
    fn new(
        py: Python<'_>,
        model: Option<PathBuf>,
        endpoint: Option<String>,
        api_model: Option<String>,
        api_key: Option<String>,
        timeout: f64,
        api_context: usize,
    ) -> PyResult<Self> {
        let spec = generator_spec(model, endpoint, api_model, api_key, timeout, api_context)?;
        let inner = py.detach(|| spec.load(&|m| eprintln!("{m}")).or_raise())?;
        Ok(Generator { inner })
    }

    /// The model's name.
    #[getter]
    fn name(&self) -> String {
        self.inner.name()
    }

    /// The context window in tokens.
    #[getter]
    fn context_window(&self) -> usize {
        self.inner.context_window()
    }

    /// The assistant's reply to `messages` (dicts `{role, content}`) as a dict `{text,
    /// finish_reason, timings}`: greedy at temperature 0, else sampled with `seed`; `on_token`
    /// gets each piece as it is generated.
    #[pyo3(signature = (messages, *, temperature = 0.0, top_p = 1.0, seed = 0,
        max_new_tokens = None, stop = Vec::new(), repeat_penalty = 1.0, on_token = None))]
    #[allow(clippy::too_many_arguments)]
    fn chat(
        &self,
        py: Python<'_>,
        messages: Vec<Bound<'_, PyAny>>,
        temperature: f64,
        top_p: f64,
        seed: u64,
        max_new_tokens: Option<usize>,
        stop: Vec<String>,
        repeat_penalty: f32,
        on_token: Option<Py<PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        let messages = messages
            .iter()
            .enumerate()
            .map(|(i, m)| {
                let at = format!("messages[{i}]");
                serde_json::from_value::<Message>(crate::from_py(m, &at)?)
                    .map_err(|e| crate::bad_argument(format!("{at}: {e}")))
            })
            .collect::<PyResult<Vec<_>>>()?;
        let decoding = DecodingSpec {
            temperature,
            top_p,
            seed,
            max_new_tokens,
            stop,
            repeat_penalty,
            ..DecodingSpec::default()
        };
        let options = decoding.options_for(&Default::default()).or_raise()?;
        let mut callback = TokenCallback::new(on_token);
        let generated = py.detach(|| {
            self.inner
                .generate(&messages, &options, &mut |piece| callback.tell(piece))
                .or_raise()
        });
        let generation = callback.finish(generated)?;
        Ok(serialized(py, &generation)?.unbind())
    }
}
