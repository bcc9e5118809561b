//! `lector eval equivalence` as a run: free-form answers judged by rules (numbers, dates, units,
//! acronyms, key fact) beside exact match, each verdict's agreement with a person's labels, and,
//! with a judge model, its equivalence verdicts (both orders) apart from the rules.

use crate::{Error, Result};
use lector_eval::equivalence::{self, Agreement, Item, Judged};
use lector_generate::evaluate::judge_equivalence_summary;
use lector_generate::judge::{self, Judge, Verdict};
use lector_generate::Generator;
use serde_json::{json, Value};

/// A run's report: the summary `--json` prints and one record per item (`--per-item`).
#[derive(Debug, Clone)]
pub struct Report {
    /// `items`, the shares (in percent) of `exact_match`, `equivalent` and `key_fact`,
    /// `answer_tokens` per answer, `labelled`, `agreement` per verdict, and with a judge
    /// `judge_equivalence`.
    pub summary: Value,
    /// Each verdict's agreement with the labels (also in the summary).
    pub agreement: Vec<Agreement>,
    /// Each item's `id`, `answer`, `label` and verdicts (`judge_equivalence` with a judge).
    pub per_item: Vec<Value>,
}

/// Judges `items` by rules, and by `judge` when given (`on_item` after each item it judged).
pub fn run(
    items: &[Item],
    judge: Option<&dyn Generator>,
    on_item: &mut dyn FnMut(usize, usize),
) -> Result<Report> {
    if items.is_empty() {
        return Err(Error::Options("no items to judge".into()));
    }
    let judged = equivalence::judge_all(items);
    let by_model = match judge {
        Some(generator) => Some(judge_items(generator, items, on_item)?),
        None => None,
    };
    let mut per_item: Vec<Value> = items.iter().zip(&judged).map(record).collect();
    if let Some((_, verdicts)) = &by_model {
        for (row, verdict) in per_item.iter_mut().zip(verdicts) {
            row["judge_equivalence"] = verdict.name().into();
        }
    }
    let agreement = agreement(items, &judged, by_model.as_ref());
    Ok(Report {
        summary: summary(items, &judged, &agreement, by_model.as_ref()),
        agreement,
        per_item,
    })
}

fn record((item, judged): (&Item, &Judged)) -> Value {
    let mut row = json!({"id": item.id, "answer": item.answer, "label": item.label});
    if let (Some(row), Value::Object(fields)) = (row.as_object_mut(), json!(judged)) {
        row.extend(fields);
    }
    row
}

/// Each verdict's agreement with the labelled items, the judge's last.
fn agreement(
    items: &[Item],
    judged: &[Judged],
    by_model: Option<&(String, Vec<Verdict>)>,
) -> Vec<Agreement> {
    let mut agreement = equivalence::agreement(items, judged);
    if let Some((_, verdicts)) = by_model {
        // Undecided verdicts (orders that disagree, no verdict) count as not equivalent.
        let (said, labels): (Vec<bool>, Vec<bool>) = items
            .iter()
            .zip(verdicts)
            .filter_map(|(item, v)| Some((*v == Verdict::Equivalent, item.label?)))
            .unzip();
        agreement.push(equivalence::agreement_of(
            "judge_equivalent",
            &said,
            &labels,
        ));
    }
    agreement
}

fn summary(
    items: &[Item],
    judged: &[Judged],
    agreement: &[Agreement],
    by_model: Option<&(String, Vec<Verdict>)>,
) -> Value {
    let share = |f: &dyn Fn(&Judged) -> bool| {
        100.0 * judged.iter().filter(|j| f(j)).count() as f64 / items.len() as f64
    };
    let tokens: usize = judged.iter().map(|j| j.verdict.answer_tokens).sum();
    let mut summary = json!({
        "items": items.len(),
        "exact_match": share(&|j| j.exact_match),
        "equivalent": share(&|j| j.verdict.equivalent),
        "key_fact": share(&|j| j.verdict.key_fact),
        "answer_tokens": tokens as f64 / items.len() as f64,
        "labelled": items.iter().filter(|i| i.label.is_some()).count(),
        "agreement": agreement,
    });
    if let Some((model, verdicts)) = by_model {
        let verdicts: Vec<Option<Verdict>> = verdicts.iter().copied().map(Some).collect();
        let exact: Vec<bool> = judged.iter().map(|j| j.exact_match).collect();
        let rules: Vec<equivalence::Verdict> = judged.iter().map(|j| j.verdict.clone()).collect();
        summary["judge_equivalence"] = judge_equivalence_summary(model, &verdicts, &exact, &rules);
    }
    summary
}

/// The judge's equivalence verdict on each item (both orders; an empty answer is not
/// equivalent without asking), with the judge's model name.
fn judge_items(
    generator: &dyn Generator,
    items: &[Item],
    on_item: &mut dyn FnMut(usize, usize),
) -> Result<(String, Vec<Verdict>)> {
    let judge = Judge::new(generator, judge::decoding())?;
    let mut verdicts = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let verdict = match item.answer.trim().is_empty() {
            true => Verdict::NotEquivalent,
            false => {
                judge
                    .equivalence(&item.question, &item.golds, &item.answer)
                    .map_err(|e| Error::Question {
                        id: item.id.clone().unwrap_or_else(|| format!("#{}", i + 1)),
                        source: Box::new(Error::Generate(e)),
                    })?
                    .verdict
            }
        };
        verdicts.push(verdict);
        on_item(i + 1, items.len());
    }
    Ok((judge.model().to_string(), verdicts))
}
