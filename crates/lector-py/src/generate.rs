//! `lector._lector.generative`: `lector eval generative` on the local generator, with a prompt
//! file and few-shot examples.

use crate::{serialized, OrRaise};
use lector_generate::evaluate::GoldRun;
use lector_generate::{Decoding, GenerateOptions, Generator};
use lector_pipeline::odqa;
use lector_pipeline::prompting::{self, PromptSpec};
use pyo3::prelude::*;
use std::path::PathBuf;
use std::time::Instant;

/// Generated answers scored as `lector eval generative --json --no-reader` scores them: `data` a
/// SQuAD file (open book: each answerable question with its gold paragraph, unless
/// `closed_book`) or, with `squad=False`, NQ-open JSON lines (closed book); greedy decoding
/// with the local GGUF `generator_model` [default: the registry's]. `prompt` names a prompt file
/// or a shipped prompt; `examples` few-shot examples, `shots` per question, chosen `fixed` or
/// `similar` (by the embedder). With `per_question`, the per-question rows too.
#[pyfunction]
#[pyo3(signature = (data, *, squad = true, closed_book = false, limit = None, prompt = None,
    examples = None, shots = 3, select = "fixed", generator_model = None, max_new_tokens = None,
    per_question = false, progress = false))]
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
    per_question: bool,
    progress: bool,
) -> PyResult<Py<PyAny>> {
    if !squad && !closed_book {
        return Err(crate::bad_argument(
            "questions without paragraphs (squad=False) need closed_book=True",
        ));
    }
    let spec = PromptSpec {
        prompt,
        examples,
        shots,
        select: select.parse().map_err(crate::bad_argument)?,
        embedder: None,
    };
    let bar = crate::index::bar(progress);
    let out = py.detach(|| -> PyResult<serde_json::Value> {
        let dataset = match squad {
            true => odqa::squad_questions(&data, limit, false).or_raise()?.0,
            false => odqa::open_questions(&data, limit).or_raise()?.0,
        };
        let prompting = prompting::load(&spec, &|_| {}, &mut |_, _| {}).or_raise()?;
        let options = GenerateOptions {
            decoding: Decoding::Greedy,
            max_new_tokens: prompting.max_new_tokens(max_new_tokens),
            ..GenerateOptions::default()
        };
        options.validate().map_err(crate::bad_argument)?;
        let generator =
            lector_pipeline::config::load_generator(generator_model.as_deref(), &|_| {})
                .or_raise()?;
        let open_book = !closed_book;
        bar.set_length(dataset.questions.len() as u64);
        let start = Instant::now();
        let run = GoldRun::run(
            &generator,
            &dataset,
            open_book,
            &options,
            &prompting,
            &mut || bar.inc(1),
        )
        .or_raise()?;
        let seconds = start.elapsed().as_secs_f64();
        let mut out = run.report_json(
            open_book,
            &generator.name(),
            prompting.prompt.name(),
            seconds,
        );
        if per_question {
            out["per_question"] = run.rows(&dataset).into();
        }
        Ok(out)
    })?;
    bar.finish_and_clear();
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
