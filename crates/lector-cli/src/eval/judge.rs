//! `lector eval judge ITEMS.jsonl`: an LLM as judge of answers (correctness, faithfulness, or
//! pairwise in both orders), through the generator flags (`--generator-model` GGUF or
//! `--endpoint`), with a reply cache, a concurrency limit, and the judge's own reliability:
//! agreement with labels (Cohen's kappa with a bootstrap interval), position bias, verbosity
//! bias, unparseable replies, self-judging. The item format and every figure are documented in
//! `lector_generate::judge` (`items`, `report`).

use crate::generate::GeneratorArgs;
use crate::table::print_table;
use anyhow::{Context, Result};
use clap::{Args, ValueEnum};
use indicatif::{ProgressBar, ProgressStyle};
use lector_eval::stats::Bootstrap;
use lector_generate::judge::batch::{self, Outcome};
use lector_generate::judge::cache::Cache;
use lector_generate::judge::items::{self, Item};
use lector_generate::judge::report::{self, Summary};
use lector_generate::judge::{Judge, Mode};
use serde_json::json;
use std::path::PathBuf;
use std::time::Instant;

#[derive(Args)]
pub struct JudgeArgs {
    /// Items: JSON lines with `question`, `references`, `answer` (or `answer_a`/`answer_b`),
    /// optional `context`, `label` (a verdict: human or from EM/F1), `generator`, `id`.
    items: PathBuf,
    /// What to judge.
    #[arg(long, value_enum, default_value_t = ModeArg::Correctness)]
    mode: ModeArg,
    /// Requests in flight at once.
    #[arg(value_parser = crate::values::at_least_one, long, default_value_t = 1, value_name = "N")]
    concurrency: usize,
    /// Directory of the reply cache (judgements.jsonl) [default: $LECTOR_CACHE_DIR/judge, else
    /// the user cache directory's lector/models/judge].
    #[arg(long, value_name = "DIR")]
    cache: Option<PathBuf>,
    /// Ask the judge every time: neither read nor write the cache.
    #[arg(long, conflicts_with = "cache")]
    no_cache: bool,
    /// Write one JSON line per item: its verdict(s), reason(s), reply(ies) and label.
    #[arg(long, value_name = "FILE")]
    per_item: Option<PathBuf>,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
    /// Bootstrap resamples for the kappa interval (seeded, reproducible).
    #[arg(value_parser = crate::values::at_least_one, long, default_value_t = 1000)]
    resamples: usize,
    /// Confidence level of the kappa interval.
    #[arg(long, default_value_t = 0.95, value_parser = super::parse_confidence)]
    confidence: f64,
    #[command(flatten)]
    generator: GeneratorArgs,
}

/// The judging modes on the command line.
#[derive(Clone, Copy, ValueEnum)]
enum ModeArg {
    /// Candidate answer against reference answers: correct / partially correct / incorrect.
    Correctness,
    /// Answer against context passages: supported / not supported.
    Faithfulness,
    /// Two answers, asked in both orders: A / B / tie.
    Pairwise,
    /// Candidate answer against reference answers, asked in both orders: equivalent / not
    /// equivalent (the model-based counterpart of `eval equivalence`'s rules).
    Equivalence,
}

impl From<ModeArg> for Mode {
    fn from(m: ModeArg) -> Mode {
        match m {
            ModeArg::Correctness => Mode::Correctness,
            ModeArg::Faithfulness => Mode::Faithfulness,
            ModeArg::Pairwise => Mode::Pairwise,
            ModeArg::Equivalence => Mode::Equivalence,
        }
    }
}

pub fn run(args: &JudgeArgs) -> Result<()> {
    let mode = Mode::from(args.mode);
    let items = items::read_items(&args.items, mode)?;
    let options = args.generator.options()?;
    let generator = args.generator.load()?;
    let mut judge = Judge::new(generator.as_ref(), options)?;
    if !args.no_cache {
        judge = judge.with_cache(open_cache(args)?);
    }
    warn_self_judging(&items, judge.model());
    let start = Instant::now();
    let bar = progress(items.len());
    let outcomes = batch::judge_items(&judge, mode, &items, args.concurrency, &|| bar.inc(1))?;
    bar.finish_and_clear();
    let bootstrap = Bootstrap {
        resamples: args.resamples,
        confidence: args.confidence,
        seed: 0,
    };
    let summary = report::summarise(
        judge.model(),
        mode,
        &items,
        &outcomes,
        judge.cost(),
        start.elapsed().as_secs_f64(),
        &bootstrap,
    );
    if let Some(path) = &args.per_item {
        super::write_jsonl(path, &per_item_rows(&items, &outcomes))?;
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&summary)?);
    } else {
        print_summary(&summary, args.confidence);
    }
    Ok(())
}

/// `--cache`, else the default directory beside the model cache.
fn open_cache(args: &JudgeArgs) -> Result<Cache> {
    let dir = match &args.cache {
        Some(dir) => dir.clone(),
        None => lector_models::registry::cache_root()?.join("judge"),
    };
    let cache =
        Cache::open(&dir).with_context(|| format!("opening the judge cache {}", dir.display()))?;
    if cache.skipped_lines() > 0 {
        eprintln!(
            "warning: {}: {} unreadable lines skipped",
            cache.path().display(),
            cache.skipped_lines()
        );
    }
    Ok(cache)
}

/// A model judging its own answers tends to favour them (self-preference bias).
fn warn_self_judging(items: &[Item], judge: &str) {
    let own = items
        .iter()
        .filter(|i| report::is_self_judged(i.generator.as_deref(), judge))
        .count();
    if own > 0 {
        eprintln!(
            "warning: {own} of {} items were generated by the judge model itself ({judge}); \
             models tend to prefer their own answers",
            items.len()
        );
    }
}

fn progress(len: usize) -> ProgressBar {
    let bar = ProgressBar::new(len as u64);
    bar.set_style(
        ProgressStyle::with_template(
            "{bar:40} {pos}/{len} items [{elapsed_precise}<{eta_precise}]",
        )
        .expect("valid template"),
    );
    bar
}

fn per_item_rows(items: &[Item], outcomes: &[Outcome]) -> Vec<serde_json::Value> {
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

fn print_summary(s: &Summary, confidence: f64) {
    println!(
        "judge {} ({}), {} items, {:.1} s",
        s.judge,
        s.mode.name(),
        s.items,
        s.seconds
    );
    let mut rows: Vec<Vec<String>> = s
        .verdicts
        .iter()
        .map(|(v, n)| vec![format!("verdict {}", v.name()), n.to_string()])
        .collect();
    let mut row = |name: &str, value: String| rows.push(vec![name.to_string(), value]);
    row(
        "unparseable replies",
        format!(
            "{} of {} ({:.1}%)",
            s.unparseable_replies,
            s.replies,
            100.0 * s.unparseable_rate
        ),
    );
    if let Some(a) = &s.agreement {
        let kappa = a.kappa.map_or("undefined".to_string(), |k| {
            format!("{:.3} [{:.3}, {:.3}]", k.mean, k.low, k.high)
        });
        row(&format!("kappa [{:.0}% CI]", confidence * 100.0), kappa);
        row(
            "agreement with labels",
            format!(
                "{:.1}% of {} compared ({} labelled)",
                100.0 * a.accuracy,
                a.compared,
                a.labelled
            ),
        );
    }
    if let Some(p) = &s.position_bias {
        row(
            "position bias (first shown wins twice)",
            format!(
                "{:.1}% of {} parsed pairs",
                100.0 * p.position_bias,
                p.parsed_pairs
            ),
        );
        row("second shown wins twice", p.second_shown_twice.to_string());
        row(
            "order-dependent verdicts",
            format!("{:.1}%", 100.0 * p.order_dependent_rate),
        );
    }
    let r = |v: Option<f64>| v.map_or("undefined".to_string(), |r| format!("{r:.3}"));
    row(
        "verbosity r (judge / labels)",
        format!("{} / {}", r(s.verbosity_r), r(s.label_verbosity_r)),
    );
    row("self-judged items", s.self_judged.to_string());
    row(
        "requests made / cached",
        format!("{} / {}", s.cost.requests, s.cost.cached),
    );
    row("prompt tokens", s.cost.prompt_tokens.to_string());
    row("generated tokens", s.cost.generated_tokens.to_string());
    row("seconds", format!("{:.2}", s.seconds));
    print_table(&["metric", "value"], &rows);
}
