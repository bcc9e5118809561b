//! `lector eval judge` as a run: a language model judges answers (correctness, faithfulness,
//! equivalence, or pairwise in both orders) with a reply cache and a concurrency limit, and the
//! judge's own reliability is reported (`lector_generate::judge::report`).

use crate::Result;
use lector_eval::stats::Bootstrap;
use lector_generate::judge::batch::{self, Outcome};
use lector_generate::judge::cache::Cache;
use lector_generate::judge::items::Item;
use lector_generate::judge::report::{self, Summary};
use lector_generate::judge::{Judge, Mode};
use lector_generate::{GenerateOptions, Generator};
use serde_json::{json, Value};
use std::path::PathBuf;
use std::time::Instant;

/// How a judging run works.
#[derive(Debug, Clone)]
pub struct Options {
    /// What is judged.
    pub mode: Mode,
    /// Requests in flight at once.
    pub concurrency: usize,
    /// The reply cache's directory; `None`: ask the judge every time.
    pub cache: Option<PathBuf>,
    /// The kappa interval's resampling.
    pub bootstrap: Bootstrap,
}

/// A judging run's results.
#[derive(Debug)]
pub struct Run {
    /// Verdict counts, agreement with labels, biases, cost (the `--json` report).
    pub summary: Summary,
    /// One record per item: its verdict(s), reason(s), reply(ies) and label.
    pub per_item: Vec<Value>,
    /// Items the judge model generated itself (it tends to prefer them).
    pub self_judged: usize,
    /// Unreadable lines the cache skipped.
    pub cache_skipped_lines: usize,
}

/// The default reply cache: `judge` beside the model cache.
pub fn default_cache_dir() -> Result<PathBuf> {
    Ok(lector_models::registry::cache_root()
        .map_err(|e| crate::Error::Options(format!("no cache directory: {e}")))?
        .join("judge"))
}

/// Judges `items` with `generator` decoding by `generation`; `on_item` after each item.
pub fn run(
    generator: &dyn Generator,
    generation: GenerateOptions,
    items: &[Item],
    options: &Options,
    on_item: &(dyn Fn() + Sync),
) -> Result<Run> {
    let mut judge = Judge::new(generator, generation)?;
    let mut cache_skipped_lines = 0;
    if let Some(dir) = &options.cache {
        let cache = Cache::open(dir)?;
        cache_skipped_lines = cache.skipped_lines();
        judge = judge.with_cache(cache);
    }
    let self_judged = items
        .iter()
        .filter(|i| report::is_self_judged(i.generator.as_deref(), judge.model()))
        .count();
    let start = Instant::now();
    let outcomes = batch::judge_items(&judge, options.mode, items, options.concurrency, on_item)?;
    let summary = report::summarise(
        judge.model(),
        options.mode,
        items,
        &outcomes,
        judge.cost(),
        start.elapsed().as_secs_f64(),
        &options.bootstrap,
    );
    Ok(Run {
        summary,
        per_item: per_item_rows(items, &outcomes),
        self_judged,
        cache_skipped_lines,
    })
}

fn per_item_rows(items: &[Item], outcomes: &[Outcome]) -> Vec<Value> {
    items
        .iter()
        .zip(outcomes)
        .map(|(item, outcome)| {
            let mut row = json!({
                "id": item.id,
                "line": item.line,
                "verdict": outcome.verdict(),
                "label": item.label,
            });
            match outcome {
                Outcome::Single(j) => row["judgement"] = json!(j),
                Outcome::Pair(p) => {
                    row["first_order"] = json!(p.first);
                    row["second_order"] = json!(p.second);
                }
            }
            row
        })
        .collect()
}
