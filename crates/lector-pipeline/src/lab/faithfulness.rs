//! `lector eval faithfulness` as a run: how well the claim checker tells supported claims from
//! unsupported ones, beside the word-overlap support score, and optionally a language-model judge.
//!
//! The set is JSON lines `{"id", "passage", "claim", "label": "supported"|"unsupported", "kind"}`
//! (`bench/faithfulness_set.py` builds one from SQuAD). Each claim is checked against its passage
//! by the lexical claim checker (`lector_generate::claims::check_text`) and scored by the word
//! overlap of `grounded::support`. Reported: the AUROC of each score for "unsupported" (ranking
//! by one minus the score), the accuracy of each checker at its own threshold, and per kind of
//! claim the accuracy of both and the checker's most frequent failure.

use crate::Result;
use lector_eval::normalize::normalized_tokens;
use lector_eval::stats::auroc::auroc;
use lector_generate::claims::{self, ClaimJudge, Failure, COVERAGE_THRESHOLD};
use lector_generate::grounded::{self, SUPPORT_THRESHOLD};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashSet};

/// One claim of the set.
#[derive(Debug, Clone, Deserialize)]
pub struct Item {
    pub id: String,
    pub passage: String,
    pub claim: String,
    pub label: Label,
    pub kind: String,
}

/// A claim's gold label.
#[derive(Debug, Deserialize, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Label {
    Supported,
    Unsupported,
}

/// One claim's scores from both checkers.
struct Scored {
    item: Item,
    claims: claims::ClaimVerdict,
    overlap: f64,
    /// The judge's verdict, when a judge decides.
    judged: Option<claims::ClaimVerdict>,
}

impl Scored {
    fn unsupported(&self) -> bool {
        self.item.label == Label::Unsupported
    }

    fn overlap_supported(&self) -> bool {
        self.overlap >= SUPPORT_THRESHOLD
    }
}

/// AUROC (for "unsupported") and accuracy (percent) of one checker, at its threshold.
#[derive(Debug, Clone, Serialize)]
pub struct Quality {
    pub auroc: Option<f64>,
    pub accuracy: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub threshold: Option<f64>,
    /// The judge's model (the judge only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
}

/// The checkers compared.
#[derive(Debug, Clone, Serialize)]
pub struct Checkers {
    pub claims: Quality,
    pub word_overlap: Quality,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub judge: Option<Quality>,
}

/// A run's report (the `--json` output) and one record per claim.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub claims: usize,
    pub unsupported: usize,
    pub checkers: Checkers,
    /// Per kind: label, count, each checker's accuracy, the checker's mean score and most
    /// frequent failure.
    pub kinds: Vec<Value>,
    /// Both scores, verdicts and the checker's failures of every claim.
    #[serde(skip)]
    pub per_claim: Vec<Value>,
}

/// The judge that decides claims, with its model's name.
pub type NamedJudge<'a> = (&'a dyn ClaimJudge, &'a str);

/// Scores every claim of `items`; with `judge`, it decides each too (`on_judged` after each).
pub fn run(
    items: Vec<Item>,
    judge: Option<NamedJudge<'_>>,
    on_judged: &mut dyn FnMut(),
) -> Result<Report> {
    if items.is_empty() {
        return Err(crate::Error::Options("the claim set has no claims".into()));
    }
    let mut scored: Vec<Scored> = items.into_iter().map(score).collect();
    if let Some((judge, _)) = judge {
        for s in scored.iter_mut() {
            let verdict = judge
                .decide(&s.item.claim, &s.item.passage)
                .map_err(|e| crate::Error::Options(format!("judging claim {}: {e}", s.item.id)))?;
            s.judged = Some(verdict);
            on_judged();
        }
    }
    let mut checker = quality(&scored, |s| s.claims.score, |s| s.claims.supported);
    checker.threshold = Some(COVERAGE_THRESHOLD);
    let mut overlap = quality(&scored, |s| s.overlap, Scored::overlap_supported);
    overlap.threshold = Some(SUPPORT_THRESHOLD);
    let judged = judge.map(|(_, model)| {
        let verdict = |s: &Scored| s.judged.as_ref().is_some_and(|v| v.supported);
        let mut q = quality(&scored, |s| f64::from(u8::from(verdict(s))), verdict);
        q.model = Some(model.to_string());
        q
    });
    Ok(Report {
        claims: scored.len(),
        unsupported: scored.iter().filter(|s| s.unsupported()).count(),
        checkers: Checkers {
            claims: checker,
            word_overlap: overlap,
            judge: judged,
        },
        kinds: by_kind(&scored),
        per_claim: scored.iter().map(per_claim).collect(),
    })
}

fn score(item: Item) -> Scored {
    let words: HashSet<String> = normalized_tokens(&item.passage).into_iter().collect();
    Scored {
        claims: claims::check_text(&item.claim, &item.passage),
        overlap: grounded::support(&item.claim, &words),
        judged: None,
        item,
    }
}

/// AUROC of `1 - score` for "unsupported", and accuracy of `supported`, in percent.
fn quality(
    scored: &[Scored],
    score: impl Fn(&Scored) -> f64,
    supported: impl Fn(&Scored) -> bool,
) -> Quality {
    let ranking: Vec<f64> = scored.iter().map(|s| 1.0 - score(s)).collect();
    let labels: Vec<bool> = scored.iter().map(Scored::unsupported).collect();
    let right = scored
        .iter()
        .filter(|s| supported(s) != s.unsupported())
        .count();
    Quality {
        auroc: auroc(&ranking, &labels),
        accuracy: 100.0 * right as f64 / scored.len() as f64,
        threshold: None,
        model: None,
    }
}

/// Per kind (those of supported claims first, then by name): label, count, both accuracies,
/// the checker's mean score and its most frequent failure.
fn by_kind(scored: &[Scored]) -> Vec<Value> {
    let mut kinds: Vec<(bool, &str)> = scored
        .iter()
        .map(|s| (s.unsupported(), s.item.kind.as_str()))
        .collect();
    kinds.sort_unstable();
    // A kind with both labels is listed once, where it first sorts.
    let mut seen = HashSet::new();
    kinds.retain(|(_, kind)| seen.insert(*kind));
    kinds
        .into_iter()
        .map(|(_, kind)| kind)
        .map(|kind| {
            let group: Vec<&Scored> = scored.iter().filter(|s| s.item.kind == kind).collect();
            let n = group.len() as f64;
            let share = |f: &dyn Fn(&Scored) -> bool| {
                100.0 * group.iter().filter(|s| f(s)).count() as f64 / n
            };
            let unsupported = group.iter().filter(|s| s.unsupported()).count();
            let label = match unsupported {
                0 => "supported",
                u if u == group.len() => "unsupported",
                _ => "mixed",
            };
            json!({
                "kind": kind,
                "label": label,
                "claims": group.len(),
                "claims_accuracy": share(&|s| s.claims.supported != s.unsupported()),
                "overlap_accuracy": share(&|s| s.overlap_supported() != s.unsupported()),
                "mean_score": group.iter().map(|s| s.claims.score).sum::<f64>() / n,
                "judge_accuracy": group.iter().all(|s| s.judged.is_some()).then(|| {
                    share(&|s| s.judged.as_ref().is_some_and(|v| v.supported) != s.unsupported())
                }),
                "top_failure": top_failure(&group),
            })
        })
        .collect()
}

/// The failure kind the checker reports on most claims of `group`, if any.
fn top_failure(group: &[&Scored]) -> Option<String> {
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for s in group {
        let mut seen: Vec<String> = s.claims.failures.iter().map(failure_kind).collect();
        seen.sort();
        seen.dedup();
        for kind in seen {
            *counts.entry(kind).or_default() += 1;
        }
    }
    let best = counts.values().copied().max()?;
    counts
        .into_iter()
        .find(|(_, c)| *c == best)
        .map(|(kind, _)| kind)
}

fn failure_kind(failure: &Failure) -> String {
    serde_json::to_value(failure)
        .ok()
        .and_then(|v| v["kind"].as_str().map(str::to_string))
        .unwrap_or_default()
}

fn per_claim(s: &Scored) -> Value {
    json!({
        "id": s.item.id, "kind": s.item.kind,
        "label": if s.unsupported() { "unsupported" } else { "supported" },
        "claim": s.item.claim,
        "claims_score": s.claims.score, "claims_supported": s.claims.supported,
        "failures": s.claims.failures,
        "overlap": s.overlap, "overlap_supported": s.overlap_supported(),
        "judge_supported": s.judged.as_ref().map(|v| v.supported),
        "judge_failures": s.judged.as_ref().map(|v| &v.failures),
    })
}
