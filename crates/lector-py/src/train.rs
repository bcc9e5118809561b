//! `lector._lector.train_reader`, `train_retriever`: `lector train reader|embedder|reranker`
//! from Python, fresh or resumed, with a progress bar.

use crate::{serialized, OrRaise};
use indicatif::ProgressBar;
use lector_train::{
    read_run, train_reader as run_reader, train_retriever as run_retriever, Event, Negatives,
    Outcome, ReaderRun, RetrieverKind, RetrieverRun, Schedule, TrainFile, WindowParams,
};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::path::{Path, PathBuf};

/// The schedule from the keyword arguments every training call shares (`schedule`, a dict of
/// `Schedule`'s fields; missing ones take their defaults).
fn schedule(fields: Option<&Bound<'_, PyDict>>) -> PyResult<Schedule> {
    let mut schedule = Schedule {
        // The global precision: bf16 rounds every product's operands, as autocast does.
        bf16: lector_models::precision() == lector_models::Precision::Bf16,
        ..Schedule::default()
    };
    let Some(fields) = fields else {
        return Ok(schedule);
    };
    for (key, value) in fields.iter() {
        let key: String = key.extract()?;
        match key.as_str() {
            "epochs" => schedule.epochs = value.extract()?,
            "batch_size" => schedule.batch_size = value.extract()?,
            "accumulation" => schedule.accumulation = value.extract()?,
            "lr" => schedule.lr = value.extract()?,
            "weight_decay" => schedule.weight_decay = value.extract()?,
            "warmup_ratio" => schedule.warmup_ratio = value.extract()?,
            "max_grad_norm" => schedule.max_grad_norm = value.extract()?,
            "max_steps" => schedule.max_steps = value.extract()?,
            "seed" => schedule.seed = value.extract()?,
            "dropout" => schedule.dropout = value.extract()?,
            "save_every" => schedule.save_every = value.extract()?,
            other => {
                return Err(crate::bad_argument(format!(
                    "unknown schedule setting `{other}`"
                )))
            }
        }
    }
    Ok(schedule)
}

/// `FILE[:WEIGHT]` training files.
fn train_files(specs: &[String]) -> PyResult<Vec<TrainFile>> {
    specs
        .iter()
        .map(|spec| TrainFile::parse(spec).map_err(crate::bad_argument))
        .collect()
}

fn negatives(from: Option<PathBuf>, per_question: usize, depth: usize) -> Option<Negatives> {
    from.map(|index| Negatives {
        index,
        per_question,
        depth,
    })
}

/// A bar over each phase of a run (negatives, windows, steps with the loss).
fn show(bar: &ProgressBar, event: Event) {
    let (message, done, total) = match event {
        Event::Retrieving { done, total } => ("negatives".to_string(), done, total),
        Event::Preparing { done, total } => ("questions prepared".to_string(), done, total),
        Event::Started {
            total_steps,
            first_step,
            ..
        } => ("steps".to_string(), first_step, total_steps),
        Event::Step(log) => {
            bar.set_message(format!("steps, loss {:.4}", log.loss));
            bar.set_position(log.step as u64);
            return;
        }
        Event::Evaluating { epoch } => {
            bar.set_message(format!("evaluating epoch {epoch}"));
            return;
        }
        Event::Dev(scores) => {
            bar.println(format!(
                "epoch {} step {}: dev EM {:.2} F1 {:.2}",
                scores.epoch, scores.step, scores.exact, scores.f1
            ));
            return;
        }
    };
    bar.set_message(message);
    bar.set_length(total as u64);
    bar.set_position(done as u64);
}

/// What `lector train ... --json` prints.
fn summary(py: Python<'_>, outcome: &Outcome, out: &Path) -> PyResult<Py<PyAny>> {
    Ok(serialized(py, &outcome.to_json(out))?.unbind())
}

/// Whether the call resumes (`resume` with no settings of its own) or starts a run (with files).
fn resuming(resume: bool, train: &[String], model: &Option<PathBuf>) -> PyResult<bool> {
    match resume {
        true if !train.is_empty() || model.is_some() => Err(crate::bad_argument(
            "resume reads the run's settings from `out`: give no train files or model",
        )),
        false if train.is_empty() => {
            Err(crate::bad_argument("train needs at least one SQuAD file"))
        }
        _ => Ok(resume),
    }
}

/// `lector train reader`: fine-tunes a reader on SQuAD files (`FILE[:WEIGHT]`) into `out`, or
/// with `resume` continues the run saved there.
#[pyfunction]
#[pyo3(signature = (out, train = Vec::new(), *, resume = false, model = None, dev = None,
    max_seq_len = None, doc_stride = None, max_question_len = None, shared_norm = false,
    negatives_from = None, negatives = 2, negatives_depth = 10, schedule = None,
    progress = false))]
#[allow(clippy::too_many_arguments)]
pub fn train_reader(
    py: Python<'_>,
    out: PathBuf,
    train: Vec<String>,
    resume: bool,
    model: Option<PathBuf>,
    dev: Option<PathBuf>,
    max_seq_len: Option<usize>,
    doc_stride: Option<usize>,
    max_question_len: Option<usize>,
    shared_norm: bool,
    negatives_from: Option<PathBuf>,
    negatives: usize,
    negatives_depth: usize,
    schedule: Option<Bound<'_, PyDict>>,
    progress: bool,
) -> PyResult<Py<PyAny>> {
    let run = match resuming(resume, &train, &model)? {
        true => None,
        false => {
            let defaults = WindowParams::default();
            let mut run = ReaderRun::new(PathBuf::new(), train_files(&train)?);
            run.dev = dev;
            run.windows = WindowParams {
                max_seq_len: max_seq_len.unwrap_or(defaults.max_seq_len),
                doc_stride: doc_stride.unwrap_or(defaults.doc_stride),
                max_question_len: max_question_len.unwrap_or(defaults.max_question_len),
            };
            run.shared_norm = shared_norm;
            run.negatives = self::negatives(negatives_from, negatives, negatives_depth);
            run.schedule = self::schedule(schedule.as_ref())?;
            Some(run)
        }
    };
    let bar = crate::index::bar(progress);
    let outcome = py.detach(|| -> PyResult<Outcome> {
        let run = match run {
            Some(mut run) => {
                run.model = lector_models::registry::resolve_reader(model.as_deref()).or_raise()?;
                run
            }
            None => read_run(&out).or_raise()?,
        };
        run_reader(&run, &out, resume, &mut |event| show(&bar, event)).or_raise()
    })?;
    bar.finish_and_clear();
    summary(py, &outcome, &out)
}

/// `lector train embedder|reranker` (`kind`): fine-tunes the sentence embedder or trains a
/// cross-encoder reranker on SQuAD files into `out`, or with `resume` continues the run there.
#[pyfunction]
#[pyo3(signature = (out, train = Vec::new(), *, kind = "embedder", resume = false, model = None,
    negatives_from = None, negatives = 2, negatives_depth = 10, max_tokens = 256, scale = 20.0,
    schedule = None, progress = false))]
#[allow(clippy::too_many_arguments)]
pub fn train_retriever(
    py: Python<'_>,
    out: PathBuf,
    train: Vec<String>,
    kind: &str,
    resume: bool,
    model: Option<PathBuf>,
    negatives_from: Option<PathBuf>,
    negatives: usize,
    negatives_depth: usize,
    max_tokens: usize,
    scale: f64,
    schedule: Option<Bound<'_, PyDict>>,
    progress: bool,
) -> PyResult<Py<PyAny>> {
    let kind: RetrieverKind = kind.parse().map_err(crate::bad_argument)?;
    let fresh = match resuming(resume, &train, &model)? {
        true => None,
        false => Some((
            train_files(&train)?,
            self::negatives(negatives_from, negatives, negatives_depth),
            self::schedule(schedule.as_ref())?,
        )),
    };
    let bar = crate::index::bar(progress);
    let outcome = py.detach(|| -> PyResult<Outcome> {
        let run = match fresh {
            Some((train, negatives, schedule)) => RetrieverRun {
                kind,
                model: match model {
                    Some(dir) => dir,
                    None => kind.default_model().or_raise()?,
                },
                train,
                negatives,
                max_tokens,
                scale,
                schedule,
            },
            None => read_run(&out).or_raise()?,
        };
        run_retriever(&run, &out, resume, &mut |event| show(&bar, event)).or_raise()
    })?;
    bar.finish_and_clear();
    summary(py, &outcome, &out)
}
