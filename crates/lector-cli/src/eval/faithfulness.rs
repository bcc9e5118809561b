//! `lector eval faithfulness SET.jsonl`: how well the claim checker tells supported claims from
//! unsupported ones, beside today's word-overlap support score.
//!
//! The set is JSON lines `{"id", "passage", "claim", "label": "supported"|"unsupported", "kind"}`
//! (`bench/faithfulness_set.py` builds one from SQuAD). Each claim is checked against its passage
//! by the lexical claim checker (`lector_generate::claims::check_text`) and scored by the word
//! overlap of `grounded::support`. Reported: the AUROC of each score for "unsupported" (ranking
//! by one minus the score), the accuracy of each checker at its own threshold, and per kind of
//! claim the accuracy of both and the checker's most frequent failure. With `--judge`, an LLM
//! judge (the generator options: a local GGUF or an OpenAI-compatible endpoint) also decides
//! each claim against its passage, reported as a third checker.

use crate::table::print_table;
use anyhow::{bail, Context, Result};
use clap::Args;
use lector_eval::normalize::normalized_tokens;
use lector_eval::stats::auroc::auroc;
use lector_generate::claims::{self, Failure, COVERAGE_THRESHOLD};
use lector_generate::grounded::{self, SUPPORT_THRESHOLD};
use serde::Deserialize;
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashSet};
use std::path::PathBuf;

#[derive(Args)]
pub struct FaithfulnessArgs {
    /// Claim set: JSON lines {"id", "passage", "claim", "label": "supported"|"unsupported", "kind"}.
    set: PathBuf,
    /// Write one JSON line per claim: both scores, verdicts and the checker's failures.
    #[arg(long, value_name = "FILE")]
    per_claim: Option<PathBuf>,
    /// Print JSON instead of tables.
    #[arg(long)]
    json: bool,
    /// Also let an LLM judge decide each claim (the model given by the generator options, as
    /// `lector eval judge` takes it).
    #[arg(long)]
    judge: bool,
    #[command(flatten)]
    generator: crate::generate::GeneratorArgs,
}

#[derive(Deserialize)]
struct Item {
    id: String,
    passage: String,
    claim: String,
    label: Label,
    kind: String,
}

#[derive(Deserialize, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
enum Label {
    Supported,
    Unsupported,
}

/// One claim's scores from both checkers.
struct Scored {
    item: Item,
    claims: claims::ClaimVerdict,
    overlap: f64,
    /// The judge's verdict, with `--judge`.
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

/// AUROC and accuracy of one checker.
struct Quality {
    auroc: Option<f64>,
    accuracy: f64,
}

pub fn run(args: &FaithfulnessArgs) -> Result<()> {
    let items: Vec<Item> = lector_eval::input::read_jsonl(&args.set)?;
    if items.is_empty() {
        bail!("{}: no claims", args.set.display());
    }
    let mut scored: Vec<Scored> = items.into_iter().map(score).collect();
    let judge_model = match args.judge {
        true => Some(judge_all(args, &mut scored)?),
        false => None,
    };
    if let Some(path) = &args.per_claim {
        super::write_jsonl(path, &scored.iter().map(per_claim).collect::<Vec<_>>())?;
    }
    let checker = quality(&scored, |s| s.claims.score, |s| s.claims.supported);
    let overlap = quality(&scored, |s| s.overlap, Scored::overlap_supported);
    let judged = judge_model.as_ref().map(|model| {
        let verdict = |s: &Scored| s.judged.as_ref().is_some_and(|v| v.supported);
        (
            model,
            quality(&scored, |s| f64::from(u8::from(verdict(s))), verdict),
        )
    });
    let kinds = by_kind(&scored);
    if args.json {
        let mut out = json!({
            "claims": scored.len(),
            "unsupported": scored.iter().filter(|s| s.unsupported()).count(),
            "checkers": {
                "claims": quality_json(&checker, COVERAGE_THRESHOLD),
                "word_overlap": quality_json(&overlap, SUPPORT_THRESHOLD),
            },
            "kinds": kinds,
        });
        if let Some((model, q)) = &judged {
            out["checkers"]["judge"] =
                json!({"model": model, "auroc": q.auroc, "accuracy": q.accuracy});
        }
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(());
    }
    print_report(&args.set, &scored, &checker, &overlap, &kinds);
    if let Some((model, q)) = &judged {
        let auroc = q.auroc.map_or("-".to_string(), |v| format!("{v:.4}"));
        println!(
            "\njudge {model}: auroc_unsupported {auroc}, accuracy {:.2}% (a verdict, so the AUROC \
             ranks two levels)",
            q.accuracy
        );
    }
    Ok(())
}

/// Lets the judge decide every claim against its passage (a progress bar); the judge's model.
fn judge_all(args: &FaithfulnessArgs, scored: &mut [Scored]) -> Result<String> {
    use claims::ClaimJudge;
    let options = args.generator.options()?;
    let generator = args.generator.load()?;
    let judge = lector_generate::judge::Judge::new(generator.as_ref(), options)?;
    let bar = super::odqa::progress_bar(scored.len() as u64);
    bar.set_message("claims judged");
    for s in scored.iter_mut() {
        let verdict = judge
            .decide(&s.item.claim, &s.item.passage)
            .with_context(|| format!("{}: judging claim {}", args.set.display(), s.item.id))?;
        s.judged = Some(verdict);
        bar.inc(1);
    }
    bar.finish_and_clear();
    Ok(judge.model().to_string())
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
    }
}

fn quality_json(q: &Quality, threshold: f64) -> Value {
    json!({"auroc": q.auroc, "accuracy": q.accuracy, "threshold": threshold})
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

fn print_report(
    set: &std::path::Path,
    scored: &[Scored],
    checker: &Quality,
    overlap: &Quality,
    kinds: &[Value],
) {
    let unsupported = scored.iter().filter(|s| s.unsupported()).count();
    println!(
        "{} claims ({unsupported} unsupported) from {}",
        scored.len(),
        set.display()
    );
    let opt = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.4}"));
    let rows = vec![
        vec![
            "claims (lexical)".to_string(),
            opt(checker.auroc),
            format!("{:.2}", checker.accuracy),
            format!("{COVERAGE_THRESHOLD:.2}"),
        ],
        vec![
            "word overlap".to_string(),
            opt(overlap.auroc),
            format!("{:.2}", overlap.accuracy),
            format!("{SUPPORT_THRESHOLD:.2}"),
        ],
    ];
    print_table(
        &["checker", "auroc_unsupported", "accuracy_%", "threshold"],
        &rows,
    );
    println!();
    let rows: Vec<Vec<String>> = kinds
        .iter()
        .map(|k| {
            vec![
                k["kind"].as_str().unwrap_or_default().to_string(),
                k["label"].as_str().unwrap_or_default().to_string(),
                k["claims"].to_string(),
                format!("{:.2}", k["claims_accuracy"].as_f64().unwrap_or(0.0)),
                format!("{:.2}", k["overlap_accuracy"].as_f64().unwrap_or(0.0)),
                format!("{:.3}", k["mean_score"].as_f64().unwrap_or(0.0)),
                k["top_failure"].as_str().unwrap_or("-").to_string(),
            ]
        })
        .collect();
    print_table(
        &[
            "kind",
            "label",
            "claims",
            "claims_acc_%",
            "overlap_acc_%",
            "mean_score",
            "top_failure",
        ],
        &rows,
    );
}
