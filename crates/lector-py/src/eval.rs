//! `lector._lector.squad|retrieval|hotpot`: the official metrics of `lector eval`, on Python data.

use crate::{from_py, serialized, OrRaise};
use lector_eval::breakdown::{self, Facet, OverlapBins};
use lector_eval::hotpot as hotpot_eval;
use lector_eval::retrieval::{Qrels, Run, DEFAULT_KS};
use lector_eval::squad as squad_eval;
use lector_eval::stats::Bootstrap;
use pyo3::prelude::*;
use std::collections::BTreeMap;
use std::path::Path;

/// The breakdowns asked for by name (`qtype`, `overlap`), with their settings.
pub(crate) struct BreakdownRequest {
    facets: Vec<Facet>,
    bins: OverlapBins,
    settings: Bootstrap,
}

impl BreakdownRequest {
    /// Checks the names and settings; an unknown facet or a bad setting is a `ValueError`.
    pub fn new(by: &[String], bins: usize, low: f64, settings: Bootstrap) -> PyResult<Self> {
        let facets: Vec<Facet> = parse_names(by)?;
        if bins == 0 || low.is_nan() || low < 0.0 {
            return Err(crate::bad_argument(
                "overlap_bins must be at least 1 and low_overlap at least 0",
            ));
        }
        if settings.resamples == 0 || !(settings.confidence > 0.0 && settings.confidence < 1.0) {
            return Err(crate::bad_argument(
                "resamples must be at least 1 and confidence in (0, 1)",
            ));
        }
        let bins = OverlapBins { bins, low };
        Ok(BreakdownRequest {
            facets,
            bins,
            settings,
        })
    }

    /// Adds `breakdowns` to `out` when any was asked for, and returns them (for a report).
    pub fn add(
        &self,
        out: &mut serde_json::Map<String, serde_json::Value>,
        questions: &[squad_eval::Question],
        scores: &[squad_eval::QuestionScore],
    ) -> PyResult<Vec<breakdown::Breakdown>> {
        if self.facets.is_empty() {
            return Ok(Vec::new());
        }
        let found =
            breakdown::breakdowns(&self.facets, questions, scores, self.bins, &self.settings)
                .or_raise()?;
        out.insert("breakdowns".into(), breakdown::to_json(&found));
        Ok(found)
    }
}

/// SQuAD v1.1/v2.0 scores of `predictions` (`{id: answer}`) against `dataset` (a SQuAD dataset
/// dict), with the official script's keys and values; for v2.0, `na_probs` (`{id: p}`) and the
/// threshold above which a question is predicted unanswerable. `by` adds `breakdowns` (as
/// `lector eval squad --by`), with bootstrap intervals.
#[pyfunction]
#[pyo3(signature = (dataset, predictions, na_probs = None, na_prob_thresh = 1.0, *, by = Vec::new(),
    overlap_bins = 4, low_overlap = 0.5, resamples = 1000, confidence = 0.95, seed = 0,
    html = None))]
#[allow(clippy::too_many_arguments)]
pub fn squad(
    py: Python<'_>,
    dataset: Bound<'_, PyAny>,
    predictions: Vec<(String, String)>,
    na_probs: Option<Vec<(String, f64)>>,
    na_prob_thresh: f64,
    by: Vec<String>,
    overlap_bins: usize,
    low_overlap: f64,
    resamples: usize,
    confidence: f64,
    seed: u64,
    html: Option<std::path::PathBuf>,
) -> PyResult<Py<PyAny>> {
    use lector_eval::summary;
    let settings = Bootstrap {
        resamples,
        confidence,
        seed,
    };
    let request = BreakdownRequest::new(&by, overlap_bins, low_overlap, settings)?;
    let text = from_py(&dataset, "dataset")?.to_string();
    let summary = py.detach(|| {
        let source = Path::new("<dataset>");
        let dataset = squad_eval::parse_dataset(source, &text).or_raise()?;
        let no_answer = squad_eval::NoAnswer {
            probs: na_probs.as_ref(),
            threshold: na_prob_thresh,
        };
        let evaluation = squad_eval::evaluate(&dataset, &predictions, &no_answer).or_raise()?;
        let intervals =
            summary::squad_intervals(&evaluation.questions, evaluation.version, &settings);
        let mut summary = evaluation.summary.clone();
        summary.insert(
            "intervals".into(),
            serde_json::to_value(&intervals).map_err(crate::bad_argument)?,
        );
        let found = request.add(&mut summary, &dataset.questions, &evaluation.questions)?;
        if let Some(path) = &html {
            let mut report =
                summary::squad_report(source, &evaluation, &intervals, confidence, na_prob_thresh);
            found.iter().for_each(|b| b.add_to(&mut report));
            report.write(path).or_raise()?;
        }
        PyResult::Ok(summary)
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

/// `lector eval odqa` through `pipeline`: every question of `data` (a SQuAD file whose
/// paragraphs the pipeline's index holds, unanswerable v2.0 questions included; or, with
/// `squad=False`, JSON lines `{"question", "answer": [...]}` asked of the index), the first
/// `limit`, answered from the top `k` passages. Returns the fields of `lector eval odqa --json`
/// (with `per_question`, also its per-question lines).
#[pyfunction]
#[pyo3(signature = (pipeline, data, *, k = 5, limit = None, squad = true, vote = false,
    rank_prior = lector_pipeline::DEFAULT_RANK_PRIOR, ambiguity_odds = lector_pipeline::DEFAULT_AMBIGUITY_ODDS,
    resamples = 1000, confidence = 0.95, seed = 0, per_question = false, progress = false,
    by = Vec::new(), overlap_bins = 4, low_overlap = 0.5, html = None))]
#[allow(clippy::too_many_arguments)]
pub fn odqa(
    py: Python<'_>,
    pipeline: &Bound<'_, crate::pipeline::Pipeline>,
    data: std::path::PathBuf,
    k: usize,
    limit: Option<usize>,
    squad: bool,
    vote: bool,
    rank_prior: f64,
    ambiguity_odds: f64,
    resamples: usize,
    confidence: f64,
    seed: u64,
    per_question: bool,
    progress: bool,
    by: Vec<String>,
    overlap_bins: usize,
    low_overlap: f64,
    html: Option<std::path::PathBuf>,
) -> PyResult<Py<PyAny>> {
    use lector_pipeline::odqa as run;
    let settings = Bootstrap {
        resamples,
        confidence,
        seed,
    };
    let request = BreakdownRequest::new(&by, overlap_bins, low_overlap, settings)?;
    let options = lector_pipeline::AskOptions {
        search: Some(pipeline.get().search().clone()),
        k,
        vote,
        rank_prior,
        ambiguity_odds,
        ..lector_pipeline::AskOptions::default()
    };
    options.validate().map_err(crate::bad_argument)?;
    let built = pipeline.get().current(py)?;
    let bar = crate::index::bar(progress);
    let out = py.detach(|| -> PyResult<serde_json::Value> {
        let dataset = match squad {
            true => run::squad_questions(&data, limit, true).or_raise()?.0,
            false => run::open_questions(&data, limit).or_raise()?.0,
        };
        let results = run::evaluate(built.as_ref(), dataset, &options, squad, &mut |p| {
            bar.set_length(p.total as u64);
            bar.set_position(p.done as u64);
        })
        .or_raise()?;
        let intervals = results.intervals(&settings);
        let mut summary = results.summary_json(&intervals, confidence);
        let found = request.add(
            &mut summary,
            &results.dataset.questions,
            &results.end_to_end,
        )?;
        if let Some(path) = &html {
            let mut report = results.html_report(&data, &intervals, confidence);
            found.iter().for_each(|b| b.add_to(&mut report));
            report.write(path).or_raise()?;
        }
        let mut out = serde_json::Value::Object(summary);
        if per_question {
            out["per_question"] = results.per_question().into();
        }
        Ok(out)
    })?;
    bar.finish_and_clear();
    Ok(serialized(py, &out)?.unbind())
}

/// `lector eval compare`: system B against system A on the same questions, by `metric` (a field
/// of each per-question record; booleans count 0/1). `a` and `b` are JSON lines files or lists of
/// dicts with `id` (e.g. `odqa(..., per_question=True)["per_question"]`). Returns the fields
/// of `lector eval compare --json`: the means, the paired-bootstrap interval of `b - a` and the
/// approximate-randomisation p-value over `trials`.
#[pyfunction]
#[pyo3(signature = (a, b, *, metric = "f1", trials = 10_000, resamples = 1000, confidence = 0.95, seed = 0))]
#[allow(clippy::too_many_arguments)]
pub fn compare(
    py: Python<'_>,
    a: Bound<'_, PyAny>,
    b: Bound<'_, PyAny>,
    metric: &str,
    trials: usize,
    resamples: usize,
    confidence: f64,
    seed: u64,
) -> PyResult<Py<PyAny>> {
    use lector_eval::paired;
    if trials == 0 || resamples == 0 || !(confidence > 0.0 && confidence < 1.0) {
        return Err(pyo3::exceptions::PyValueError::new_err(
            "trials and resamples must be at least 1, and confidence in (0, 1)",
        ));
    }
    let scores = |side: &Bound<'_, PyAny>,
                  name: &str|
     -> PyResult<(std::path::PathBuf, Vec<(String, f64)>)> {
        if let Ok(path) = side.extract::<std::path::PathBuf>() {
            let scores = paired::read_scores(&path, metric).or_raise()?;
            return Ok((path, scores));
        }
        let records = match from_py(side, name)? {
            serde_json::Value::Array(records) => records,
            _ => {
                return Err(pyo3::exceptions::PyTypeError::new_err(format!(
                    "{name} must be a path or a list of per-question dicts"
                )))
            }
        };
        let source = std::path::PathBuf::from(name);
        let scores = paired::scores_of(&records, metric, &source)
            .map_err(|e| pyo3::exceptions::PyValueError::new_err(e.to_string()))?;
        Ok((source, scores))
    };
    let (source_a, a) = scores(&a, "a")?;
    let (source_b, b) = scores(&b, "b")?;
    let settings = lector_eval::stats::Bootstrap {
        resamples,
        confidence,
        seed,
    };
    let result = py.detach(|| {
        paired::compare((&source_a, &a), (&source_b, &b), metric, &settings, trials)
            .map_err(|e| pyo3::exceptions::PyValueError::new_err(e.to_string()))
    })?;
    Ok(serialized(py, &result)?.unbind())
}

/// `lector eval adversarial` with `reader`: the answerable questions of `data` (SQuAD or MRQA
/// file), the first `limit`, read in their contexts and with each distractor `kinds` (`addsent`,
/// `addany`) at each of `positions` (`start`, `end`, `random`). Returns the fields of `--json`,
/// and with `per_question` the records of `--per-question`.
#[pyfunction]
#[pyo3(signature = (reader, data, *, limit = None, kinds = vec!["addsent".to_string(), "addany".to_string()],
    positions = vec!["start".to_string(), "end".to_string(), "random".to_string()], candidates = 4,
    distractor_seed = 0, resamples = 1000, confidence = 0.95, seed = 0, per_question = false, html = None,
    progress = false))]
#[allow(clippy::too_many_arguments)]
pub fn adversarial(
    py: Python<'_>,
    reader: &Bound<'_, crate::reader::Reader>,
    data: std::path::PathBuf,
    limit: Option<usize>,
    kinds: Vec<String>,
    positions: Vec<String>,
    candidates: usize,
    distractor_seed: u64,
    resamples: usize,
    confidence: f64,
    seed: u64,
    per_question: bool,
    html: Option<std::path::PathBuf>,
    progress: bool,
) -> PyResult<Py<PyAny>> {
    use lector_pipeline::adversarial as run;
    let options = run::Options {
        kinds: parse_names(&kinds)?,
        positions: parse_names(&positions)?,
        candidates,
        seed: distractor_seed,
        limit,
    };
    if candidates == 0 || resamples == 0 || !(confidence > 0.0 && confidence < 1.0) {
        return Err(crate::bad_argument(
            "candidates and resamples must be at least 1, and confidence in (0, 1)",
        ));
    }
    let settings = Bootstrap {
        resamples,
        confidence,
        seed,
    };
    let reader = reader.get();
    let bar = crate::index::bar(progress);
    let out = py.detach(|| -> PyResult<serde_json::Value> {
        let dataset = squad_eval::read_dataset(&data).or_raise()?;
        let params = lector_reader::ReadParams::default();
        let (report, records) = run::evaluate(
            reader.inner(),
            &dataset,
            &options,
            &params,
            &settings,
            &mut |p| {
                bar.set_length(p.total as u64);
                bar.set_position(p.done as u64);
            },
        )
        .or_raise()?;
        if let Some(path) = &html {
            report.html(&data, confidence).write(path).or_raise()?;
        }
        let mut out = serde_json::json!(report);
        if per_question {
            out["per_question"] = serde_json::json!(records);
        }
        Ok(out)
    })?;
    bar.finish_and_clear();
    Ok(serialized(py, &out)?.unbind())
}

/// Names parsed into their values, each once, in order; an unknown name is a `ValueError`.
fn parse_names<T: std::str::FromStr<Err = String> + PartialEq>(
    names: &[String],
) -> PyResult<Vec<T>> {
    let mut out = Vec::new();
    for name in names {
        let value = name.parse().map_err(crate::bad_argument)?;
        if !out.contains(&value) {
            out.push(value);
        }
    }
    Ok(out)
}

/// `lector eval equivalence --json` of `items` (dicts `{answer, golds, id?, question?,
/// context?, label?}`), with each item's record (`--per-item`) under `per_item`. With a judge
/// (the local GGUF `judge_model`, or `judge_api_model` behind `judge_endpoint`), its
/// equivalence verdicts too.
#[pyfunction]
#[pyo3(signature = (items, *, judge_model = None, judge_endpoint = None, judge_api_model = None,
    judge_api_key = None))]
pub fn equivalence(
    py: Python<'_>,
    items: Bound<'_, PyAny>,
    judge_model: Option<std::path::PathBuf>,
    judge_endpoint: Option<String>,
    judge_api_model: Option<String>,
    judge_api_key: Option<String>,
) -> PyResult<Py<PyAny>> {
    let items: Vec<lector_eval::equivalence::Item> =
        serde_json::from_value(from_py(&items, "items")?)
            .map_err(|e| crate::bad_argument(format!("items: {e}")))?;
    if items.is_empty() {
        return Err(crate::bad_argument("items: no items"));
    }
    let judge = crate::generate::optional_judge(
        judge_model,
        judge_endpoint,
        judge_api_model,
        judge_api_key,
    )?;
    let out = py.detach(|| -> PyResult<serde_json::Value> {
        let generator = match &judge {
            Some(spec) => Some(spec.load(&|m| eprintln!("{m}")).or_raise()?),
            None => None,
        };
        let report =
            lector_pipeline::lab::equivalence::run(&items, generator.as_deref(), &mut |_, _| {})
                .or_raise()?;
        let mut out = report.summary;
        out["per_item"] = report.per_item.into();
        Ok(out)
    })?;
    Ok(serialized(py, &out)?.unbind())
}

/// BERTScore of `items` (dicts `{"id"?, "candidate", "references" | "reference"}`) with the
/// encoder checkpoint `model`, as `lector eval bertscore --json` reports it (`layer`: `None` for
/// the package's default or the last; `idf`; `baseline` file); with `per_item`, each item's
/// scores too.
#[pyfunction]
#[pyo3(signature = (items, model, *, layer = None, idf = false, baseline = None, resamples = 1000,
    confidence = 0.95, seed = 0, per_item = false))]
#[allow(clippy::too_many_arguments)]
pub fn bertscore(
    py: Python<'_>,
    items: Bound<'_, PyAny>,
    model: std::path::PathBuf,
    layer: Option<usize>,
    idf: bool,
    baseline: Option<std::path::PathBuf>,
    resamples: usize,
    confidence: f64,
    seed: u64,
    per_item: bool,
) -> PyResult<Py<PyAny>> {
    use lector_eval::bertscore::Item;
    let values = match from_py(&items, "items")? {
        serde_json::Value::Array(values) => values,
        _ => return Err(crate::bad_argument("items must be a list of dicts")),
    };
    let items = values
        .iter()
        .enumerate()
        .map(|(i, v)| {
            Item::from_json(v, i).map_err(|e| crate::bad_argument(format!("items[{i}]: {e}")))
        })
        .collect::<PyResult<Vec<_>>>()?;
    let options = lector_pipeline::lab::bertscore::Options {
        model,
        layer,
        idf,
        baseline,
        bootstrap: Bootstrap {
            resamples,
            confidence,
            seed,
        },
    };
    let out = py.detach(|| -> PyResult<serde_json::Value> {
        let report =
            lector_pipeline::lab::bertscore::run(&items, &options, &mut |_, _| {}).or_raise()?;
        let mut out = serde_json::to_value(&report).map_err(crate::bad_argument)?;
        if per_item {
            out["per_item"] = report.per_item(&items).into();
        }
        Ok(out)
    })?;
    Ok(serialized(py, &out)?.unbind())
}

/// `lector eval judge --json`: a language model judges `items` (dicts as the items file's
/// lines) in `mode` (correctness, faithfulness, pairwise, equivalence), with the local GGUF
/// `generator_model` or `api_model` behind `endpoint`, greedy; `cache`: the reply cache's
/// directory (`None`: none); with `per_item`, each item's verdict(s) and reply(ies).
#[pyfunction]
#[pyo3(signature = (items, *, mode = "correctness", generator_model = None, endpoint = None,
    api_model = None, api_key = None, concurrency = 1, cache = None, resamples = 1000,
    confidence = 0.95, per_item = false))]
#[allow(clippy::too_many_arguments)]
pub fn judge(
    py: Python<'_>,
    items: Bound<'_, PyAny>,
    mode: &str,
    generator_model: Option<std::path::PathBuf>,
    endpoint: Option<String>,
    api_model: Option<String>,
    api_key: Option<String>,
    concurrency: usize,
    cache: Option<std::path::PathBuf>,
    resamples: usize,
    confidence: f64,
    per_item: bool,
) -> PyResult<Py<PyAny>> {
    use lector_generate::judge::{items::items_from_json, Mode};
    let mode: Mode = mode.parse().map_err(crate::bad_argument)?;
    if concurrency == 0 {
        return Err(crate::bad_argument("concurrency must be at least 1"));
    }
    let values = match from_py(&items, "items")? {
        serde_json::Value::Array(values) => values,
        _ => return Err(crate::bad_argument("items must be a list of dicts")),
    };
    let items = items_from_json(&values, mode).map_err(crate::bad_argument)?;
    let spec = crate::generate::judge_spec(generator_model, endpoint, api_model, api_key)?;
    let options = lector_pipeline::lab::judge::Options {
        mode,
        concurrency,
        cache,
        bootstrap: Bootstrap {
            resamples,
            confidence,
            seed: 0,
        },
    };
    let out = py.detach(|| -> PyResult<serde_json::Value> {
        let generator = spec.load(&|m| eprintln!("{m}")).or_raise()?;
        let generation = crate::generate::default_decoding()?;
        let run = lector_pipeline::lab::judge::run(
            generator.as_ref(),
            generation,
            &items,
            &options,
            &|| {},
        )
        .or_raise()?;
        let mut out = serde_json::to_value(&run.summary).map_err(crate::bad_argument)?;
        if per_item {
            out["per_item"] = run.per_item.into();
        }
        Ok(out)
    })?;
    Ok(serialized(py, &out)?.unbind())
}

/// `lector eval faithfulness --json` on `items` (dicts `{id, passage, claim, label, kind}`): the
/// claim checker and word overlap against the labels; with `judge`, a language model (the local
/// GGUF `generator_model` or `api_model` behind `endpoint`) decides each claim too. With
/// `per_claim`, each claim's scores and failures.
#[pyfunction]
#[pyo3(signature = (items, *, judge = false, generator_model = None, endpoint = None,
    api_model = None, api_key = None, per_claim = false))]
#[allow(clippy::too_many_arguments)]
pub fn faithfulness(
    py: Python<'_>,
    items: Bound<'_, PyAny>,
    judge: bool,
    generator_model: Option<std::path::PathBuf>,
    endpoint: Option<String>,
    api_model: Option<String>,
    api_key: Option<String>,
    per_claim: bool,
) -> PyResult<Py<PyAny>> {
    use lector_pipeline::lab::faithfulness::{self, Item};
    let items: Vec<Item> = serde_json::from_value(from_py(&items, "items")?)
        .map_err(|e| crate::bad_argument(format!("items: {e}")))?;
    let spec = crate::generate::judge_spec(generator_model, endpoint, api_model, api_key)?;
    let out = py.detach(|| -> PyResult<serde_json::Value> {
        let report = match judge {
            false => faithfulness::run(items, None, &mut || {}).or_raise()?,
            true => {
                let generator = spec.load(&|m| eprintln!("{m}")).or_raise()?;
                let generation = crate::generate::default_decoding()?;
                let judge = lector_generate::judge::Judge::new(generator.as_ref(), generation)
                    .or_raise()?;
                faithfulness::run(items, Some((&judge, judge.model())), &mut || {}).or_raise()?
            }
        };
        let mut out = serde_json::to_value(&report).map_err(crate::bad_argument)?;
        if per_claim {
            out["per_claim"] = report.per_claim.into();
        }
        Ok(out)
    })?;
    Ok(serialized(py, &out)?.unbind())
}

/// `lector eval canary --index --json` through `pipeline`: every question of the SQuAD file
/// `questions` asked (`k` passages each), then written as the baseline (`write_baseline`) or
/// compared with it (`baseline`: default `<questions stem>.baseline.json` beside the file);
/// `alarm` says whether F1 fell more than `max_f1_drop` points or the abstention rate moved more
/// than `max_abstain_change`.
#[pyfunction]
#[pyo3(signature = (pipeline, questions, *, k = 5, baseline = None, write_baseline = false,
    max_f1_drop = lector_eval::canary::DEFAULT_MAX_F1_DROP,
    max_abstain_change = lector_eval::canary::DEFAULT_MAX_ABSTAIN_CHANGE, progress = false))]
#[allow(clippy::too_many_arguments)]
pub fn canary(
    py: Python<'_>,
    pipeline: &Bound<'_, crate::pipeline::Pipeline>,
    questions: std::path::PathBuf,
    k: usize,
    baseline: Option<std::path::PathBuf>,
    write_baseline: bool,
    max_f1_drop: f64,
    max_abstain_change: f64,
    progress: bool,
) -> PyResult<Py<PyAny>> {
    use lector_eval::canary::{Baseline, Bounds, QuestionSet};
    use lector_pipeline::lab::canary as run;
    if k == 0 || !(max_f1_drop >= 0.0 && max_abstain_change >= 0.0) {
        return Err(crate::bad_argument(
            "k must be at least 1 and the bounds not negative",
        ));
    }
    let search = pipeline.get().search().clone();
    let (reader, rerank) = pipeline.get().checkpoints();
    let built = pipeline.get().current(py)?;
    let bar = crate::index::bar(progress);
    let out = py.detach(|| -> PyResult<serde_json::Value> {
        let set = QuestionSet::read(&questions).or_raise()?;
        let path = baseline.unwrap_or_else(|| run::default_baseline_path(&questions));
        let stored = match write_baseline {
            true => None,
            false => Some(Baseline::read(&path, &set).or_raise()?),
        };
        let setting = run::Setting {
            k,
            rerank: rerank.map(|p| p.display().to_string()),
            reader,
        };
        let answers = run::ask_pipeline(
            &built,
            built.store(),
            &search,
            &setting,
            &set.dataset,
            &mut |p| {
                bar.set_length(p.total as u64);
                bar.set_position(p.done as u64);
            },
        )
        .or_raise()?;
        let bounds = Bounds {
            max_f1_drop,
            max_abstain_change,
        };
        let outcome = run::finish(set, answers, &path, stored, bounds).or_raise()?;
        Ok(outcome.to_json())
    })?;
    bar.finish_and_clear();
    Ok(serialized(py, &out)?.unbind())
}

/// ROUGE-1/2/L/Lsum of `items` (dicts `{id, prediction, references}`), identical to Google's
/// rouge-score (`stem`: Porter-stem tokens longer than 3 characters), with bootstrap intervals,
/// as `lector eval rouge --json` reports them; with `per_item`, each item's scores; with `html`,
/// the HTML report written there.
#[pyfunction]
#[pyo3(signature = (items, *, stem = false, resamples = 1000, confidence = 0.95, seed = 0,
    per_item = false, html = None))]
#[allow(clippy::too_many_arguments)]
pub fn rouge(
    py: Python<'_>,
    items: Bound<'_, PyAny>,
    stem: bool,
    resamples: usize,
    confidence: f64,
    seed: u64,
    per_item: bool,
    html: Option<std::path::PathBuf>,
) -> PyResult<Py<PyAny>> {
    use lector_eval::rouge::{RougeItem, RougeScorer};
    let items: Vec<RougeItem> = serde_json::from_value(from_py(&items, "items")?)
        .map_err(|e| crate::bad_argument(format!("items: {e}")))?;
    if items.is_empty() {
        return Err(crate::bad_argument("items: no items"));
    }
    if let Some(i) = items.iter().position(|item| item.references.is_empty()) {
        return Err(crate::bad_argument(format!(
            "items[{i}]: item {:?} has no references",
            items[i].id
        )));
    }
    let settings = Bootstrap {
        resamples,
        confidence,
        seed,
    };
    let out = py.detach(|| -> PyResult<serde_json::Value> {
        let scorer = RougeScorer::new(stem);
        let scores: Vec<_> = (items.iter())
            .map(|i| scorer.score(&i.prediction, &i.references))
            .collect();
        let intervals = lector_eval::summary::rouge_intervals(&scores, &settings);
        if let Some(path) = &html {
            let source = Path::new("<items>");
            lector_eval::summary::rouge_report(source, &scores, &intervals, confidence, stem)
                .write(path)
                .or_raise()?;
        }
        let mut out =
            lector_eval::summary::intervals_json("items", items.len(), &intervals, confidence);
        if per_item {
            let rows: Vec<serde_json::Value> = (items.iter().zip(&scores))
                .map(|(i, s)| serde_json::json!({"id": i.id, "scores": s}))
                .collect();
            out["per_item"] = rows.into();
        }
        Ok(out)
    })?;
    Ok(serialized(py, &out)?.unbind())
}

/// `lector eval hotpot --json` on the HotpotQA file `data`: every question (from `offset`, the
/// first `limit`) asked with `hops` through pipelines over its own paragraphs (`distractor`) or
/// every paragraph of the file (`open`, in `index` when given), scored with the official metrics.
/// `work_dir` holds the indexes built (the caller removes it). With `per_question`, each
/// question's row; with `predictions`, the official `{"answer", "sp"}` file's content; with
/// `html`, the HTML report written there.
#[pyfunction]
#[pyo3(signature = (data, work_dir, *, setting = "distractor", index = None, k = 5, offset = 0,
    limit = None, hops = 1, second_hop = "lexical", beam = None, paths = None,
    stop_confidence = None, decompose = "rules", reader = None, mode = None, embedder = None,
    rerank = None, rerank_depth = lector_index::DEFAULT_RERANK_DEPTH, resamples = 1000,
    confidence = 0.95, per_question = false, predictions = false, html = None, progress = false))]
#[allow(clippy::too_many_arguments)]
pub fn hotpot_run(
    py: Python<'_>,
    data: std::path::PathBuf,
    work_dir: std::path::PathBuf,
    setting: &str,
    index: Option<std::path::PathBuf>,
    k: usize,
    offset: usize,
    limit: Option<usize>,
    hops: usize,
    second_hop: &str,
    beam: Option<usize>,
    paths: Option<usize>,
    stop_confidence: Option<f64>,
    decompose: &str,
    reader: Option<std::path::PathBuf>,
    mode: Option<&str>,
    embedder: Option<std::path::PathBuf>,
    rerank: Option<std::path::PathBuf>,
    rerank_depth: usize,
    resamples: usize,
    confidence: f64,
    per_question: bool,
    predictions: bool,
    html: Option<std::path::PathBuf>,
    progress: bool,
) -> PyResult<Py<PyAny>> {
    use lector_pipeline::lab::hotpot;
    use lector_pipeline::multihop::HopOptions;
    if !(1..=2).contains(&hops) {
        return Err(crate::bad_argument("hops must be 1 or 2"));
    }
    let defaults = HopOptions::default();
    let options = hotpot::Options {
        setting: setting.parse().map_err(crate::bad_argument)?,
        index,
        k,
        offset,
        limit,
        hops: HopOptions {
            hops,
            second_hop: second_hop.parse().map_err(crate::bad_argument)?,
            beam: beam.unwrap_or(defaults.beam),
            paths: paths.unwrap_or(defaults.paths),
            stop_confidence,
            ..defaults
        },
        decompose: decompose.parse().map_err(crate::bad_argument)?,
        bootstrap: Bootstrap {
            resamples,
            confidence,
            seed: 0,
        },
    };
    options.bootstrap.check().map_err(crate::bad_argument)?;
    if k == 0 {
        return Err(crate::bad_argument("k must be at least 1"));
    }
    let config = lector_pipeline::PipelineConfig {
        reader,
        retrieval: crate::index::retrieval_config(mode, embedder)?,
        rerank: crate::index::rerank_config(rerank, rerank_depth),
    };
    let bar = crate::index::bar(progress);
    let report = py.detach(|| {
        hotpot::run(
            &data,
            &config,
            &options,
            &work_dir,
            &|m| eprintln!("{m}"),
            &mut |_, done, total| {
                bar.set_length(total as u64);
                bar.set_position(done as u64);
            },
        )
        .or_raise()
    })?;
    bar.finish_and_clear();
    if let Some(path) = &html {
        report.html(&data).write(path).or_raise()?;
    }
    let mut out = report.to_json();
    if per_question {
        out["per_question"] = serde_json::to_value(&report.rows).map_err(crate::bad_argument)?;
    }
    if predictions {
        out["predictions"] =
            serde_json::to_value(&report.predictions).map_err(crate::bad_argument)?;
    }
    Ok(serialized(py, &out)?.unbind())
}

/// `lector eval retrieval --index --queries --json`: the queries of the file `queries` (BEIR
/// JSON lines, or a SQuAD file) run through the index's retrieval (`mode`, reranked by `rerank`),
/// scored against the `qrels` file as document rankings (`depth` documents, cutoffs `ks`), or
/// without qrels by whether the first `max_k` passages contain each question's answers. With
/// `per_query`, each query's record; with `html`, the HTML report written there.
#[pyfunction]
#[pyo3(signature = (index, queries, *, qrels = None, mode = None, embedder = None, rerank = None,
    rerank_depth = lector_index::DEFAULT_RERANK_DEPTH, depth = 1000, ks = DEFAULT_KS.to_vec(),
    max_k = 100, resamples = 1000, confidence = 0.95, seed = 0, per_query = false, html = None,
    progress = false))]
#[allow(clippy::too_many_arguments)]
pub fn retrieval_run(
    py: Python<'_>,
    index: &Bound<'_, crate::index::Index>,
    queries: std::path::PathBuf,
    qrels: Option<std::path::PathBuf>,
    mode: Option<&str>,
    embedder: Option<std::path::PathBuf>,
    rerank: Option<std::path::PathBuf>,
    rerank_depth: usize,
    depth: usize,
    ks: Vec<usize>,
    max_k: usize,
    resamples: usize,
    confidence: f64,
    seed: u64,
    per_query: bool,
    html: Option<std::path::PathBuf>,
    progress: bool,
) -> PyResult<Py<PyAny>> {
    use lector_pipeline::lab::retrieval as lab;
    let index = index.get();
    let options = lab::Options {
        retrieval: crate::index::retrieval_config(
            mode,
            embedder.or_else(|| index.embedder_spec()),
        )?,
        rerank: crate::index::rerank_config(rerank, rerank_depth),
        depth,
        ks,
        max_k,
        bootstrap: Bootstrap {
            resamples,
            confidence,
            seed,
        },
    };
    options.bootstrap.check().map_err(crate::bad_argument)?;
    if depth == 0 || max_k == 0 {
        return Err(crate::bad_argument("depth and max_k must be at least 1"));
    }
    let snapshot = index.snapshot()?;
    let bar = crate::index::bar(progress);
    let out = py.detach(|| -> PyResult<serde_json::Value> {
        let labelled = lector_eval::retrieval::read_queries(&queries).or_raise()?;
        let judged = qrels
            .as_deref()
            .map(lector_eval::retrieval::read_qrels)
            .transpose()
            .or_raise()?;
        bar.set_length(labelled.len() as u64);
        let report = lab::run(
            snapshot.as_ref(),
            Some(snapshot.as_ref()),
            &labelled,
            judged.as_ref(),
            &options,
            &|m| eprintln!("{m}"),
            &mut || bar.inc(1),
        )
        .or_raise()?;
        for warning in &report.warnings {
            eprintln!("warning: {warning}");
        }
        if let Some(path) = &html {
            report
                .scored
                .html(&queries, confidence)
                .write(path)
                .or_raise()?;
        }
        let mut out = report.scored.to_json(confidence);
        if per_query {
            out["per_query"] = report.scored.per_query().into();
        }
        Ok(out)
    })?;
    bar.finish_and_clear();
    Ok(serialized(py, &out)?.unbind())
}
