//! Judging many items with a bounded number of requests in flight.
//!
//! `concurrency` scoped threads take the next unjudged item in turn; each thread judges its item
//! to the end (both orders of a pair one after the other), so at most `concurrency` requests are
//! in flight at once. The first error stops the threads from taking further items and is
//! returned naming the item; the replies received before it are in the cache.

use super::items::{Candidate, Item};
use super::{Judge, Judgement, Mode, PairJudgement, Verdict};
use crate::error::{Error, Result};
use serde::Serialize;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;

/// The judge's decision on one item.
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
pub enum Outcome {
    /// A pointwise judgement.
    Single(Judgement),
    /// A pairwise judgement from both orders.
    Pair(PairJudgement),
}

impl Outcome {
    /// The item's verdict.
    pub fn verdict(&self) -> Verdict {
        match self {
            Outcome::Single(j) => j.verdict,
            Outcome::Pair(p) => p.verdict,
        }
    }

    /// The replies behind it (one, or two for a pair).
    pub fn replies(&self) -> Vec<&Judgement> {
        match self {
            Outcome::Single(j) => vec![j],
            Outcome::Pair(p) => vec![&p.first, &p.second],
        }
    }
}

/// Judges one item in `mode`.
pub fn judge_item(judge: &Judge, mode: Mode, item: &Item) -> Result<Outcome> {
    match (&item.candidate, mode) {
        (Candidate::Single(answer), Mode::Correctness) => judge
            .correctness(&item.question, &item.references, answer)
            .map(Outcome::Single),
        (Candidate::Single(answer), Mode::Faithfulness) => judge
            .faithfulness(&item.question, &item.context, answer)
            .map(Outcome::Single),
        (Candidate::Single(answer), Mode::Equivalence) => judge
            .equivalence(&item.question, &item.references, answer)
            .map(Outcome::Pair),
        (Candidate::Pair(a, b), Mode::Pairwise) => judge
            .pairwise(&item.question, &item.references, a, b)
            .map(Outcome::Pair),
        _ => Err(Error::Invalid(format!(
            "item `{}` was not read for {} judging",
            item.id,
            mode.name()
        ))),
    }
}

/// Judges `items` in `mode` with at most `concurrency` (at least 1) requests in flight;
/// `on_done` is called after each item. Outcomes are in item order.
pub fn judge_items(
    judge: &Judge,
    mode: Mode,
    items: &[Item],
    concurrency: usize,
    on_done: &(dyn Fn() + Sync),
) -> Result<Vec<Outcome>> {
    let next = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    let outcomes: Mutex<Vec<Option<Outcome>>> = Mutex::new(vec![None; items.len()]);
    let first_error: Mutex<Option<Error>> = Mutex::new(None);
    let worker = || loop {
        let i = next.fetch_add(1, Ordering::Relaxed);
        if i >= items.len() || stop.load(Ordering::Relaxed) {
            return;
        }
        match judge_item(judge, mode, &items[i]) {
            Ok(outcome) => {
                lock(&outcomes)[i] = Some(outcome);
                on_done();
            }
            Err(e) => {
                stop.store(true, Ordering::Relaxed);
                lock(&first_error).get_or_insert(Error::Question {
                    id: format!("{} (line {})", items[i].id, items[i].line),
                    source: Box::new(e),
                });
                return;
            }
        }
    };
    std::thread::scope(|s| {
        for _ in 0..concurrency.clamp(1, items.len().max(1)) {
            s.spawn(worker);
        }
    });
    if let Some(e) = lock(&first_error).take() {
        return Err(e);
    }
    let outcomes = std::mem::take(&mut *lock(&outcomes));
    // Every index below items.len() was taken by a worker that stored it or failed.
    Ok(outcomes.into_iter().flatten().collect())
}

/// The lock's data, also after a panic elsewhere (each write is a single assignment).
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
