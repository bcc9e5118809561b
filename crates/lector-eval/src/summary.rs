//! Headline metrics with bootstrap intervals, and the HTML report, for each kind of evaluation:
//! what `lector eval squad|rouge|retrieval` print, built here so that other programs get the
//! same numbers.

use crate::report::{Metric, Report};
use crate::retrieval::{AnswerRecall, RetrievalEval};
use crate::rouge::{RougeScores, Score};
use crate::squad::{Evaluation, QuestionScore, SquadVersion};
use crate::stats::{bootstrap_mean, Bootstrap, Interval};
use std::path::Path;

/// Named metrics with their intervals, in report order.
pub type Intervals = Vec<(String, Interval)>;

/// Intervals as `lector eval --json` prints them: `{UNIT: count, "confidence": level, NAME:
/// {mean, low, high}, ...}`.
pub fn intervals_json(
    unit: &str,
    count: usize,
    intervals: &Intervals,
    confidence: f64,
) -> serde_json::Value {
    let mut out = serde_json::Map::new();
    out.insert(unit.into(), count.into());
    out.insert("confidence".into(), confidence.into());
    for (name, interval) in intervals {
        out.insert(name.clone(), serde_json::json!(interval));
    }
    serde_json::Value::Object(out)
}

/// Which questions a group of SQuAD v2.0 metrics covers.
type QuestionFilter = fn(&QuestionScore) -> bool;

/// EM and F1 in percent, keyed like the official output (`exact_match`/`f1` for v1.1; `exact`,
/// `f1`, `HasAns_exact`, ... for v2.0).
pub fn squad_intervals(
    questions: &[QuestionScore],
    version: SquadVersion,
    settings: &Bootstrap,
) -> Intervals {
    let groups: &[(&str, QuestionFilter)] = match version {
        SquadVersion::V1_1 => &[("", |_| true)],
        SquadVersion::V2_0 => &[
            ("", |_| true),
            ("HasAns_", |q| q.has_ans),
            ("NoAns_", |q| !q.has_ans),
        ],
    };
    let mut out = Vec::new();
    for &(prefix, keep) in groups {
        let subset: Vec<&QuestionScore> = questions.iter().filter(|q| keep(q)).collect();
        if subset.is_empty() {
            continue;
        }
        let em: Vec<f64> = subset.iter().map(|q| q.em).collect();
        let f1: Vec<f64> = subset.iter().map(|q| q.f1).collect();
        let em_key = match version {
            SquadVersion::V1_1 => "exact_match".to_string(),
            SquadVersion::V2_0 => format!("{prefix}exact"),
        };
        out.push((em_key, bootstrap_mean(&em, settings).scaled(100.0)));
        out.push((
            format!("{prefix}f1"),
            bootstrap_mean(&f1, settings).scaled(100.0),
        ));
    }
    out
}

/// The SQuAD report: headline metrics, the official output, the F1 histogram and, for v2.0, the
/// HasAns/NoAns breakdown at `threshold`.
pub fn squad_report(
    data: &Path,
    evaluation: &Evaluation,
    intervals: &Intervals,
    confidence: f64,
    threshold: f64,
) -> Report {
    let mut report = Report::new(format!("SQuAD evaluation: {}", data.display()));
    report.metrics("Headline metrics", &metrics(intervals), confidence);
    let rows: Vec<Vec<String>> = evaluation
        .summary
        .iter()
        .map(|(k, v)| vec![k.clone(), v.to_string()])
        .collect();
    report.table("Official output", &["key", "value"], &rows);
    let f1: Vec<f64> = evaluation.questions.iter().map(|q| q.f1).collect();
    report.histogram("F1 per question", &f1, (0.0, 1.0), 20, "F1");
    if evaluation.version == SquadVersion::V2_0 {
        breakdown(&mut report, &evaluation.questions, threshold);
    }
    report.note(&format!(
        "{} questions. Intervals: percentile bootstrap over questions.",
        evaluation.questions.len()
    ));
    report
}

/// HasAns/NoAns breakdown: how often the system answered, abstained, and was right.
fn breakdown(report: &mut Report, questions: &[QuestionScore], threshold: f64) {
    let row = |label: &str, has_ans: bool| {
        let group: Vec<&QuestionScore> =
            questions.iter().filter(|q| q.has_ans == has_ans).collect();
        let abstained = group
            .iter()
            .filter(|q| {
                q.prediction.as_deref() == Some("") || q.na_prob.is_some_and(|p| p > threshold)
            })
            .count();
        let n = group.len().max(1) as f64;
        vec![
            label.to_string(),
            group.len().to_string(),
            (group.len() - abstained).to_string(),
            abstained.to_string(),
            percent(group.iter().map(|q| q.em).sum::<f64>() / n),
            percent(group.iter().map(|q| q.f1).sum::<f64>() / n),
        ]
    };
    report.table(
        "HasAns / NoAns breakdown",
        &["questions", "count", "answered", "abstained", "EM", "F1"],
        &[row("HasAns", true), row("NoAns", false)],
    );
}

/// Precision, recall and F-measure of each ROUGE type, as fractions.
pub fn rouge_intervals(scores: &[RougeScores], settings: &Bootstrap) -> Intervals {
    type Pick = fn(&RougeScores) -> Score;
    type Part = fn(Score) -> f64;
    let types: [(&str, Pick); 4] = [
        ("rouge1", |s| s.rouge1),
        ("rouge2", |s| s.rouge2),
        ("rougeL", |s| s.rouge_l),
        ("rougeLsum", |s| s.rouge_lsum),
    ];
    let parts: [(&str, Part); 3] = [
        ("precision", |s| s.precision),
        ("recall", |s| s.recall),
        ("fmeasure", |s| s.fmeasure),
    ];
    let mut intervals = Intervals::new();
    for (name, pick) in types {
        for (part, value) in parts {
            let values: Vec<f64> = scores.iter().map(|s| value(pick(s))).collect();
            intervals.push((format!("{name}.{part}"), bootstrap_mean(&values, settings)));
        }
    }
    intervals
}

/// The ROUGE report: F-measures and the ROUGE-L histogram.
pub fn rouge_report(
    input: &Path,
    scores: &[RougeScores],
    intervals: &Intervals,
    confidence: f64,
    stem: bool,
) -> Report {
    let mut report = Report::new(format!("ROUGE: {}", input.display()));
    let headline: Vec<Metric> = intervals
        .iter()
        .filter(|(n, _)| n.ends_with(".fmeasure"))
        .map(|(n, i)| Metric::with_interval(n.clone(), *i))
        .collect();
    report.metrics("Headline metrics (F-measure)", &headline, confidence);
    let f: Vec<f64> = scores.iter().map(|s| s.rouge_l.fmeasure).collect();
    report.histogram("ROUGE-L F per item", &f, (0.0, 1.0), 20, "ROUGE-L F");
    report.note(&format!(
        "{} items; stemming {}.",
        scores.len(),
        if stem { "on" } else { "off" }
    ));
    report
}

/// Every ranking metric of `eval`, per query averaged.
pub fn ranking_intervals(eval: &RetrievalEval, settings: &Bootstrap) -> Intervals {
    eval.metric_names
        .iter()
        .map(|name| (name.clone(), bootstrap_mean(&eval.values(name), settings)))
        .collect()
}

/// The ranking report: headline metrics, the recall curve and the nDCG@10 histogram.
pub fn ranking_report(
    run: &Path,
    eval: &RetrievalEval,
    intervals: &Intervals,
    confidence: f64,
) -> Report {
    let mut report = Report::new(format!("Retrieval evaluation: {}", run.display()));
    let headline: Vec<Metric> = intervals
        .iter()
        .filter(|(name, _)| ["ndcg@10", "recall@100", "mrr@10", "map"].contains(&name.as_str()))
        .map(|(name, i)| Metric::with_interval(name.clone(), *i))
        .collect();
    report.metrics("Headline metrics", &headline, confidence);
    let mean_of = |name: &str| {
        intervals
            .iter()
            .find(|(n, _)| n == name)
            .map_or(f64::NAN, |(_, i)| i.mean)
    };
    let recall: Vec<(f64, f64)> = eval
        .ks
        .iter()
        .map(|&k| (k as f64, mean_of(&format!("recall@{k}"))))
        .collect();
    report.curve("Recall@k", &recall, 1.0, "k", "recall");
    report.histogram(
        "nDCG@10 per query",
        &eval.values("ndcg@10"),
        (0.0, 1.0),
        20,
        "nDCG@10",
    );
    report.note(&format!(
        "{} queries evaluated. Metrics as trec_eval computes them.",
        eval.num_evaluated()
    ));
    report
}

/// Answer recall at the usual cutoffs up to `max_k`, and MRR.
pub fn answer_recall_intervals(
    recall: &AnswerRecall,
    max_k: usize,
    settings: &Bootstrap,
) -> Intervals {
    let hits_at = |k: usize| -> Vec<f64> {
        recall
            .queries
            .iter()
            .map(|q| f64::from(u8::from(q.hit_at(k))))
            .collect()
    };
    let mut intervals: Intervals = [1, 5, 10, 20, 50, 100]
        .into_iter()
        .filter(|&k| k <= max_k)
        .map(|k| (format!("recall@{k}"), bootstrap_mean(&hits_at(k), settings)))
        .collect();
    let rr: Vec<f64> = recall.queries.iter().map(|q| q.reciprocal_rank()).collect();
    intervals.push(("mrr".into(), bootstrap_mean(&rr, settings)));
    intervals
}

/// The answer-recall report: headline metrics and the recall curve.
pub fn answer_recall_report(
    path: &Path,
    recall: &AnswerRecall,
    intervals: &Intervals,
    confidence: f64,
) -> Report {
    let mut report = Report::new(format!("Answer recall: {}", path.display()));
    report.metrics("Headline metrics", &metrics(intervals), confidence);
    let curve: Vec<(f64, f64)> = recall
        .recall
        .iter()
        .enumerate()
        .map(|(i, r)| ((i + 1) as f64, *r))
        .collect();
    report.curve("Answer recall@k", &curve, 1.0, "k", "recall");
    report.note(&format!(
        "{} questions. A passage is a hit when it contains a gold answer as a token sequence after SQuAD normalisation.",
        recall.queries.len()
    ));
    report
}

fn metrics(intervals: &Intervals) -> Vec<Metric> {
    intervals
        .iter()
        .map(|(name, interval)| Metric::with_interval(name.clone(), *interval))
        .collect()
}

fn percent(fraction: f64) -> String {
    format!("{:.2}", 100.0 * fraction)
}
