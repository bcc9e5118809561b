//! What a judging run says about its items and about the judge.
//!
//! - **Verdict counts**, unparseable and (pairwise) inconsistent included.
//! - **Unparseable rate**: unparseable replies over all replies (a pair has two).
//! - **Agreement** with the items' labels: Cohen's kappa ([`lector_eval::stats::agreement`]) over
//!   the labelled items whose verdict is decided (not unparseable, not inconsistent), with a
//!   percentile-bootstrap interval over items, and the raw share of agreeing verdicts.
//! - **Position bias** (pairwise): among pairs whose two replies both parsed, the share where the
//!   judge preferred whichever answer it was shown first in both orders (a position-blind judge
//!   scores 0); also the share preferring the second-shown answer twice, and the order-dependent
//!   rate (the two orders disagree once swapped back: the first two plus tie-versus-winner).
//! - **Verbosity**: Pearson's r between the verdict and the answer's length in words. Pointwise,
//!   the verdict is 1 for `correct`/`supported` and 0 otherwise (partially correct is 0), so r is
//!   the point-biserial correlation. Pairwise, it is r between +1 (A wins), 0 (tie), -1 (B wins)
//!   and words(A) - words(B), over decided pairs. The same r of the *labels* is reported beside
//!   it: a judge is verbose-biased when its r exceeds the labels'.
//! - **Self-judging**: items whose `generator` is the judge model (names compared case aside).

use super::batch::Outcome;
use super::items::Item;
use super::{Cost, Mode, Verdict};
use lector_eval::stats::agreement::{kappa_interval, pearson};
use lector_eval::stats::{Bootstrap, Interval};
use serde::Serialize;

/// Agreement of the judge's verdicts with the items' labels.
#[derive(Debug, Clone, Serialize)]
pub struct Agreement {
    /// Items carrying a label.
    pub labelled: usize,
    /// Labelled items with a decided verdict: the items kappa is computed over.
    pub compared: usize,
    /// Share of compared items where verdict and label are the same.
    pub accuracy: f64,
    /// Cohen's kappa (`mean`) with its bootstrap interval; `None` when undefined.
    pub kappa: Option<Interval>,
}

/// How the order of a pair swayed the judge (pairwise only).
#[derive(Debug, Clone, Serialize)]
pub struct PositionBias {
    /// Pairs whose two replies both parsed.
    pub parsed_pairs: usize,
    /// Pairs where the first-shown answer won in both orders.
    pub first_shown_twice: usize,
    /// Pairs where the second-shown answer won in both orders.
    pub second_shown_twice: usize,
    /// Pairs whose two verdicts disagree once swapped back.
    pub order_dependent: usize,
    /// `first_shown_twice / parsed_pairs`: the position bias.
    pub position_bias: f64,
    /// `order_dependent / parsed_pairs`.
    pub order_dependent_rate: f64,
}

/// The summary of a judging run.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    /// What was judged.
    pub mode: Mode,
    /// The judge model.
    pub judge: String,
    /// Items judged.
    pub items: usize,
    /// Items per verdict, in the mode's order, then inconsistent and unparseable (a JSON
    /// object from verdict to count).
    #[serde(serialize_with = "counts_as_object")]
    pub verdicts: Vec<(Verdict, usize)>,
    /// Replies received (two per pair).
    pub replies: usize,
    /// Replies naming no verdict (or two).
    pub unparseable_replies: usize,
    /// `unparseable_replies / replies`.
    pub unparseable_rate: f64,
    /// Agreement with the labels, when items carry labels.
    pub agreement: Option<Agreement>,
    /// Position bias, in pairwise mode.
    pub position_bias: Option<PositionBias>,
    /// Pearson's r of the judge's verdicts with answer length (see the module docs).
    pub verbosity_r: Option<f64>,
    /// The same r for the labels.
    pub label_verbosity_r: Option<f64>,
    /// Items whose answers the judge model itself generated.
    pub self_judged: usize,
    /// Requests made and cached, and their tokens.
    pub cost: Cost,
    /// Wall time of the run.
    pub seconds: f64,
}

/// Summarises `outcomes` (one per item, in order) of judge `model` in `mode`.
pub fn summarise(
    model: &str,
    mode: Mode,
    items: &[Item],
    outcomes: &[Outcome],
    cost: Cost,
    seconds: f64,
    bootstrap: &Bootstrap,
) -> Summary {
    let replies: Vec<_> = outcomes.iter().flat_map(Outcome::replies).collect();
    let unparseable_replies = replies
        .iter()
        .filter(|j| j.verdict == Verdict::Unparseable)
        .count();
    Summary {
        mode,
        judge: model.to_string(),
        items: items.len(),
        verdicts: verdict_counts(mode, outcomes),
        replies: replies.len(),
        unparseable_replies,
        unparseable_rate: ratio(unparseable_replies, replies.len()),
        agreement: agreement(items, outcomes, bootstrap),
        position_bias: position_bias(outcomes),
        verbosity_r: verbosity(mode, items, &verdicts_of(outcomes)),
        label_verbosity_r: verbosity(
            mode,
            items,
            &items.iter().map(|i| i.label).collect::<Vec<_>>(),
        ),
        self_judged: items
            .iter()
            .filter(|i| is_self_judged(i.generator.as_deref(), model))
            .count(),
        cost,
        seconds,
    }
}

fn counts_as_object<S: serde::Serializer>(
    counts: &[(Verdict, usize)],
    serializer: S,
) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeMap;
    let mut map = serializer.serialize_map(Some(counts.len()))?;
    for (verdict, count) in counts {
        map.serialize_entry(verdict.name(), count)?;
    }
    map.end()
}

/// Whether answers from `generator` are judged by the same model `judge`.
pub fn is_self_judged(generator: Option<&str>, judge: &str) -> bool {
    generator.is_some_and(|g| g.trim().eq_ignore_ascii_case(judge.trim()))
}

fn ratio(part: usize, whole: usize) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 / whole as f64
    }
}

fn verdicts_of(outcomes: &[Outcome]) -> Vec<Option<Verdict>> {
    outcomes.iter().map(|o| Some(o.verdict())).collect()
}

fn verdict_counts(mode: Mode, outcomes: &[Outcome]) -> Vec<(Verdict, usize)> {
    let mut kinds: Vec<Verdict> = mode.verdicts().to_vec();
    if matches!(mode, Mode::Pairwise | Mode::Equivalence) {
        kinds.push(Verdict::Inconsistent);
    }
    kinds.push(Verdict::Unparseable);
    kinds
        .into_iter()
        .map(|v| (v, outcomes.iter().filter(|o| o.verdict() == v).count()))
        .collect()
}

fn agreement(items: &[Item], outcomes: &[Outcome], bootstrap: &Bootstrap) -> Option<Agreement> {
    let labelled = items.iter().filter(|i| i.label.is_some()).count();
    if labelled == 0 {
        return None;
    }
    let pairs: Vec<(Verdict, Verdict)> = items
        .iter()
        .zip(outcomes)
        .filter_map(|(item, o)| Some((o.verdict(), item.label?)))
        .filter(|(v, _)| v.is_decided())
        .collect();
    let agreeing = pairs.iter().filter(|(v, l)| v == l).count();
    Some(Agreement {
        labelled,
        compared: pairs.len(),
        accuracy: ratio(agreeing, pairs.len()),
        kappa: kappa_interval(&pairs, bootstrap),
    })
}

fn position_bias(outcomes: &[Outcome]) -> Option<PositionBias> {
    let pairs: Vec<_> = outcomes
        .iter()
        .filter_map(|o| match o {
            Outcome::Pair(p) if p.first.verdict.is_decided() && p.second.verdict.is_decided() => {
                Some(p)
            }
            _ => None,
        })
        .collect();
    if !outcomes.iter().any(|o| matches!(o, Outcome::Pair(_))) {
        return None;
    }
    let count = |f: &dyn Fn(&&&super::PairJudgement) -> bool| pairs.iter().filter(f).count();
    let first = count(&|p| p.prefers_first_shown());
    let order_dependent = count(&|p| p.verdict == Verdict::Inconsistent);
    Some(PositionBias {
        parsed_pairs: pairs.len(),
        first_shown_twice: first,
        second_shown_twice: count(&|p| p.prefers_second_shown()),
        order_dependent,
        position_bias: ratio(first, pairs.len()),
        order_dependent_rate: ratio(order_dependent, pairs.len()),
    })
}

/// Pearson's r of `verdicts` (one per item; `None` or undecided ones left out) with length.
fn verbosity(mode: Mode, items: &[Item], verdicts: &[Option<Verdict>]) -> Option<f64> {
    let (lengths, scores): (Vec<f64>, Vec<f64>) = items
        .iter()
        .zip(verdicts)
        .filter_map(|(item, v)| {
            let score = score(mode, (*v)?)?;
            let (a, b) = item.answer_words();
            let length = match mode {
                Mode::Pairwise => a as f64 - b as f64,
                _ => a as f64,
            };
            Some((length, score))
        })
        .unzip();
    pearson(&lengths, &scores)
}

/// The number a decided verdict stands for in the verbosity correlation.
fn score(mode: Mode, verdict: Verdict) -> Option<f64> {
    match (mode, verdict) {
        (_, Verdict::Correct | Verdict::Supported | Verdict::Equivalent) => Some(1.0),
        (
            _,
            Verdict::PartiallyCorrect
            | Verdict::Incorrect
            | Verdict::NotSupported
            | Verdict::NotEquivalent,
        ) => Some(0.0),
        (_, Verdict::A) => Some(1.0),
        (_, Verdict::B) => Some(-1.0),
        (_, Verdict::Tie) => Some(0.0),
        (_, Verdict::Inconsistent | Verdict::Unparseable) => None,
    }
}
