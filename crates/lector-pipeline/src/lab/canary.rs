//! `lector eval canary` as a run: re-ask a fixed labelled question set and compare answer
//! quality with a stored baseline (`lector_eval::canary`'s checks), or store this run as the
//! baseline. The answers come from a pipeline ([`ask_pipeline`]) or from elsewhere (the CLI asks
//! a running server); an alarm is a report with `alarm: true`, never an error.

use crate::config::reader_name;
use crate::{AskOptions, Pipeline, Progress, Response, Result};
use lector_eval::canary::{self, Answers, Baseline, Bounds, Check, QuestionSet, Run};
use lector_eval::squad::Dataset;
use lector_index::{DocumentStore, Index, SearchOptions};
use serde_json::{json, Map, Value};
use std::path::{Path, PathBuf};
use std::time::Instant;

/// `<questions stem>.baseline.json` beside the questions file: one baseline per question set.
pub fn default_baseline_path(questions: &Path) -> PathBuf {
    let stem = questions
        .file_stem()
        .map_or_else(|| "questions".into(), |s| s.to_string_lossy().into_owned());
    questions.with_file_name(format!("{stem}.baseline.json"))
}

/// What shapes a pipeline's answers, recorded with them (and compared with the baseline's).
#[derive(Debug, Clone, Default)]
pub struct Setting {
    /// Passages retrieved and read per question.
    pub k: usize,
    /// The reranker's checkpoint, when there is one.
    pub rerank: Option<String>,
    /// The reader checkpoint's directory (`None`: the default reader).
    pub reader: Option<PathBuf>,
}

/// Every question of `dataset` through `pipeline` over the embedded `index`, read in one batch
/// as `lector eval odqa` does, with the settings that shaped the answers.
pub fn ask_pipeline(
    pipeline: &Pipeline<impl DocumentStore>,
    index: &Index,
    search: &SearchOptions,
    setting: &Setting,
    dataset: &Dataset,
    progress: &mut dyn FnMut(Progress),
) -> Result<Answers> {
    let options = AskOptions {
        search: Some(search.clone()),
        k: setting.k,
        ..AskOptions::default()
    };
    let questions = dataset.question_texts();
    let start = Instant::now();
    let responses = pipeline.ask_many(&questions, &options, progress)?;
    let stats = index.stats();
    let mut settings = json!({
        "k": setting.k,
        "mode": search.mode.name(),
        "k1": search.bm25.k1,
        "b": search.bm25.b,
        "rerank": setting.rerank,
        "reader": lector_models::registry::resolve_reader(setting.reader.as_deref())
            .ok()
            .map(|dir| reader_name(&dir)),
        "index_settings": serde_json::to_value(index.settings()).unwrap_or_default(),
        "embedder": stats.dense.as_ref().map(|d| d.model.clone()),
        "documents": stats.documents,
        "passages": stats.passages,
    });
    if let Some(r) = responses.first() {
        // They all share it: whether answers were read against a calibrated threshold.
        settings["calibrated"] = r.calibrated.into();
        settings["threshold"] = r.threshold.into();
    }
    Ok(Answers {
        texts: responses.iter().map(answer_text).collect(),
        source: object(json!({"index": index.dir().display().to_string()})),
        settings: object(settings),
        seconds: start.elapsed().as_secs_f64(),
    })
}

fn answer_text(response: &Response) -> String {
    response
        .answer
        .as_ref()
        .map_or(String::new(), |a| a.text.clone())
}

/// `value`'s fields (none when it is not an object).
pub fn object(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}

/// What a canary run did: stored a baseline, or compared with one.
#[derive(Debug)]
pub enum Outcome {
    /// The run became the baseline.
    Written { run: Run, path: PathBuf },
    /// The run was compared with the baseline; `comparison.failed()` are the alarms.
    Compared {
        run: Run,
        baseline: Box<Baseline>,
        comparison: canary::Comparison,
        path: PathBuf,
    },
}

/// The run of `answers` to `questions`: written as the baseline at `path` when `write_baseline`,
/// else compared with the one there by `bounds`. Read the baseline before asking
/// ([`Baseline::read`]) to fail early; this reads it again only when it was not given.
pub fn finish(
    questions: QuestionSet,
    answers: Answers,
    path: &Path,
    baseline: Option<Baseline>,
    bounds: Bounds,
) -> Result<Outcome> {
    let run = Run::new(questions, answers)?;
    let Some(baseline) = baseline else {
        Baseline::new(&run).write(path)?;
        return Ok(Outcome::Written {
            run,
            path: path.to_path_buf(),
        });
    };
    let comparison = canary::compare(&run, &baseline, path, bounds)?;
    Ok(Outcome::Compared {
        run,
        baseline: Box::new(baseline),
        comparison,
        path: path.to_path_buf(),
    })
}

impl Outcome {
    /// The checks that failed: each one is an alarm (none when a baseline was written).
    pub fn alarms(&self) -> Vec<&Check> {
        match self {
            Outcome::Written { .. } => Vec::new(),
            Outcome::Compared { comparison, .. } => comparison.failed(),
        }
    }

    /// The report `lector eval canary --json` prints.
    pub fn to_json(&self) -> Value {
        match self {
            Outcome::Written { run, path } => json!({
                "baseline_file": path.display().to_string(),
                "questions_file": run.questions.path.display().to_string(),
                "source": run.answers.source,
                "seconds": run.answers.seconds,
                "scores": run.scores,
            }),
            Outcome::Compared {
                run,
                baseline,
                comparison,
                path,
            } => json!({
                "questions_file": run.questions.path.display().to_string(),
                "baseline_file": path.display().to_string(),
                "source": run.answers.source,
                "seconds": run.answers.seconds,
                "baseline": baseline.scores,
                "current": run.scores,
                "checks": comparison.checks,
                "changed": comparison.changes.len(),
                "changed_answers": comparison.changes,
                "alarm": !comparison.failed().is_empty(),
            }),
        }
    }
}
