//! `lector eval canary`: re-asks a fixed labelled question set and raises an alarm (exit code 1)
//! when answer quality moved beyond a bound from a stored baseline, so that a re-index, a new
//! model or a configuration change is caught before users notice.
//!
//! The baseline, its checks and the comparison are [`lector_eval::canary`]'s; this asks the
//! questions, from a local index through the pipeline `lector ask` builds (`--index`), or from a
//! running `lector serve` (`--against`, through `lector_server::client`), and prints. Errors (a
//! missing baseline, one of another questions file, an unreachable server) exit 2 like every
//! other error, so an alarm is never confused with them.

use crate::ask::open_pipeline;
use crate::search::{RerankOptions, RetrievalOptions};
use crate::table::{fmt2, print_table};
use anyhow::{bail, Context, Result};
use clap::Args;
use indicatif::ProgressBar;
use lector_eval::canary::{
    Answers, Baseline, Bounds, Change, Check, QuestionSet, Run, Scores, DEFAULT_MAX_ABSTAIN_CHANGE,
    DEFAULT_MAX_F1_DROP,
};
use lector_eval::squad::Dataset;
use lector_pipeline::lab::canary::{self as canary_run, object, Outcome};
use lector_pipeline::{Built, Stage};
use lector_server::client::AskClient;
use serde_json::json;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Changed answers shown in the table (`--json` lists them all).
const CHANGES_SHOWN: usize = 5;

#[derive(Args)]
#[command(group(clap::ArgGroup::new("source").required(true).args(["against", "index"])))]
pub struct CanaryArgs {
    /// Labelled questions: a SQuAD v1.1 or v2.0 file; every question is asked, unanswerable
    /// ones included.
    #[arg(long, value_name = "FILE")]
    questions: PathBuf,
    /// Ask a running `lector serve` at this base URL (`POST URL/v1/ask`), sending
    /// `Authorization: Bearer $LECTOR_API_KEY` when that is set.
    #[arg(long, value_name = "URL")]
    against: Option<String>,
    /// Answer locally from this index with the pipeline `lector ask` builds.
    #[arg(long, value_name = "DIR")]
    index: Option<PathBuf>,
    /// The baseline file [default: <questions name>.baseline.json beside the questions file].
    #[arg(long, value_name = "FILE")]
    baseline: Option<PathBuf>,
    /// Store this run as the baseline (replacing one there) instead of comparing with it.
    #[arg(long)]
    write_baseline: bool,
    /// Alarm when F1 falls by more than this many points (of 100) below the baseline's.
    #[arg(value_parser = crate::values::non_negative, long, value_name = "POINTS", default_value_t = DEFAULT_MAX_F1_DROP)]
    max_f1_drop: f64,
    /// Alarm when the share of questions abstained on moves, up or down, by more than this many
    /// points (of 100).
    #[arg(value_parser = crate::values::non_negative, long, value_name = "POINTS", default_value_t = DEFAULT_MAX_ABSTAIN_CHANGE)]
    max_abstain_change: f64,
    /// Passages retrieved and read per question.
    #[arg(value_parser = crate::values::at_least_one, long, default_value_t = 5)]
    k: usize,
    /// Retrieval options for --index (with --against only --mode applies, sent as the request's
    /// `retrieval`; the server's settings hold otherwise).
    #[command(flatten)]
    retrieval: RetrievalOptions,
    #[command(flatten)]
    rerank: RerankOptions,
    /// Reader checkpoint directory for --index [default: $LECTOR_READER, else the shipped
    /// models/reader-minilm-squad].
    #[arg(long, value_name = "DIR", conflicts_with = "against")]
    model: Option<PathBuf>,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

pub fn run(args: &CanaryArgs) -> Result<()> {
    if args.against.is_some() && args.rerank.rerank.is_some() {
        bail!("--rerank applies to --index; a server reranks as it was started");
    }
    let questions = QuestionSet::read(&args.questions)?;
    let baseline_path = args
        .baseline
        .clone()
        .unwrap_or_else(|| canary_run::default_baseline_path(&args.questions));
    // Read the baseline before asking, so that a missing or wrong one fails at once.
    let baseline = match args.write_baseline {
        true => None,
        false => Some(Baseline::read(&baseline_path, &questions)?),
    };
    let answers = match (&args.against, &args.index) {
        (Some(url), _) => ask_server(url, args, &questions.dataset)?,
        (None, Some(dir)) => ask_index(dir, args, &questions.dataset)?,
        (None, None) => bail!("give --index DIR or --against URL"),
    };
    let bounds = Bounds {
        max_f1_drop: args.max_f1_drop,
        max_abstain_change: args.max_abstain_change,
    };
    let outcome = canary_run::finish(questions, answers, &baseline_path, baseline, bounds)?;
    report(&outcome, args.json)
}

/// Every question through the local pipeline, read in one batch as `lector eval odqa` does.
fn ask_index(dir: &Path, args: &CanaryArgs, dataset: &Dataset) -> Result<Answers> {
    let Built {
        pipeline, search, ..
    } = open_pipeline(dir, args.model.as_deref(), &args.retrieval, &args.rerank)?;
    let setting = canary_run::Setting {
        k: args.k,
        rerank: args.rerank.rerank.as_ref().map(|p| p.display().to_string()),
        reader: args.model.clone(),
    };
    let bar = progress_bar(0, "passages read");
    let answers = canary_run::ask_pipeline(
        &pipeline,
        pipeline.index(),
        &search,
        &setting,
        dataset,
        &mut |p| {
            bar.set_message(match p.stage {
                Stage::Rerank => "questions reranked",
                _ => "passages read",
            });
            bar.set_length(p.total as u64);
            bar.set_position(p.done as u64);
        },
    )?;
    bar.finish_and_clear();
    Ok(answers)
}

/// Every question over HTTP, one request at a time (the server reads each one's passages in a
/// batch of its own).
fn ask_server(url: &str, args: &CanaryArgs, dataset: &Dataset) -> Result<Answers> {
    let client = AskClient::from_env(url);
    let retrieval = args.retrieval.mode.map(|m| m.name());
    let bar = progress_bar(dataset.questions.len() as u64, "questions asked");
    let start = Instant::now();
    let mut texts = Vec::with_capacity(dataset.questions.len());
    let mut settings = json!({"k": args.k, "retrieval": retrieval});
    for (i, question) in dataset.questions.iter().enumerate() {
        let mut body = json!({"question": question.question, "k": args.k, "probabilities": false});
        if let Some(mode) = retrieval {
            body["retrieval"] = mode.into();
        }
        let asked = client
            .ask(&body)
            .with_context(|| format!("asking question `{}`", question.id))?;
        if i == 0 {
            settings["calibrated"] = asked.reply["calibrated"].clone();
            settings["threshold"] = asked.reply["threshold"].clone();
        }
        texts.push(asked.answer.unwrap_or_default());
        bar.inc(1);
    }
    bar.finish_and_clear();
    Ok(Answers {
        texts,
        source: object(json!({"url": url})),
        settings: object(settings),
        seconds: start.elapsed().as_secs_f64(),
    })
}

fn progress_bar(total: u64, message: &'static str) -> ProgressBar {
    let bar = super::odqa::progress_bar(total);
    bar.set_message(message);
    bar
}

/// Reports the outcome; an alarm exits with code 1.
fn report(outcome: &Outcome, json: bool) -> Result<()> {
    if let Outcome::Compared { comparison, .. } = outcome {
        for note in &comparison.setting_changes {
            eprintln!("note: a setting differs from the baseline's: {note}");
        }
    }
    if json {
        println!("{}", serde_json::to_string_pretty(&outcome.to_json())?);
    }
    match outcome {
        Outcome::Written { run, path } => {
            if !json {
                report_written(run, path);
            }
            return Ok(());
        }
        Outcome::Compared {
            run,
            baseline,
            comparison,
            ..
        } if !json => {
            print_header(&run.questions, &run.answers);
            print_comparison(&baseline.scores, &run.scores, &comparison.checks);
            print_changes(&comparison.changes, run.scores.questions);
        }
        Outcome::Compared { .. } => {}
    }
    let failed = outcome.alarms();
    if failed.is_empty() {
        if !json {
            println!("\nquiet: every check is within its bound");
        }
        return Ok(());
    }
    for check in &failed {
        eprintln!("alarm: {}", alarm_text(check));
    }
    // An alarm is exit code 1, apart from errors (2): flush first, the process ends here.
    std::io::stdout().flush().ok();
    std::process::exit(1)
}

fn alarm_text(check: &Check) -> String {
    match check.check {
        "f1_drop" => format!(
            "F1 dropped by {} points ({} -> {}), more than --max-f1-drop {}",
            fmt2(-check.change),
            fmt2(check.baseline),
            fmt2(check.current),
            fmt2(check.bound)
        ),
        _ => format!(
            "the abstention rate moved by {:+.2} points ({}% -> {}%), more than --max-abstain-change {}",
            check.change,
            fmt2(check.baseline),
            fmt2(check.current),
            fmt2(check.bound)
        ),
    }
}

fn describe_source(answers: &Answers) -> String {
    let settings = &answers.settings;
    match (answers.source.get("index"), answers.source.get("url")) {
        (Some(dir), _) => format!(
            "index {} ({}, k = {})",
            dir.as_str().unwrap_or_default(),
            settings["mode"].as_str().unwrap_or("?"),
            settings["k"]
        ),
        (_, Some(url)) => format!(
            "{} (k = {})",
            url.as_str().unwrap_or_default(),
            settings["k"]
        ),
        _ => String::new(),
    }
}

fn print_header(questions: &QuestionSet, answers: &Answers) {
    println!(
        "{} questions of {}, answered from {} in {:.1} s",
        questions.questions().len(),
        questions.path.display(),
        describe_source(answers),
        answers.seconds
    );
}

fn report_written(run: &Run, path: &Path) {
    let (questions, answers, scores) = (&run.questions, &run.answers, &run.scores);
    print_header(questions, answers);
    print_table(
        &["metric", "value"],
        &[
            vec!["F1 (%)".into(), fmt2(scores.f1)],
            vec!["exact match (%)".into(), fmt2(scores.exact)],
            vec!["abstained (%)".into(), fmt2(scores.abstention_rate)],
        ],
    );
    println!("baseline written to {}", path.display());
}

fn print_comparison(baseline: &Scores, current: &Scores, checks: &[Check]) {
    let verdict = |c: &Check| if c.failed { "ALARM" } else { "ok" };
    let f1 = &checks[0];
    let abstention = &checks[1];
    let rows = vec![
        vec![
            "F1 (%)".into(),
            fmt2(baseline.f1),
            fmt2(current.f1),
            format!("{:+.2}", f1.change),
            format!("drop <= {}", fmt2(f1.bound)),
            verdict(f1).into(),
        ],
        vec![
            "exact match (%)".into(),
            fmt2(baseline.exact),
            fmt2(current.exact),
            format!("{:+.2}", current.exact - baseline.exact),
            String::new(),
            String::new(),
        ],
        vec![
            "abstained (%)".into(),
            fmt2(baseline.abstention_rate),
            fmt2(current.abstention_rate),
            format!("{:+.2}", abstention.change),
            format!("+/- {}", fmt2(abstention.bound)),
            verdict(abstention).into(),
        ],
    ];
    print_table(
        &["metric", "baseline", "now", "change", "bound", "check"],
        &rows,
    );
}

fn print_changes(changes: &[Change], questions: usize) {
    println!();
    println!("answers changed: {} of {questions}", changes.len());
    if changes.is_empty() {
        return;
    }
    let shown = |text: &str| match text {
        "" => "(no answer)".to_string(),
        text => text.to_string(),
    };
    let rows: Vec<Vec<String>> = changes
        .iter()
        .take(CHANGES_SHOWN)
        .map(|c| {
            vec![
                c.id.clone(),
                shown(&c.baseline),
                shown(&c.current),
                format!("{:.0} -> {:.0}", c.f1_baseline, c.f1_current),
                c.question.clone(),
            ]
        })
        .collect();
    print_table(&["id", "baseline", "now", "F1", "question"], &rows);
    if changes.len() > CHANGES_SHOWN {
        println!("(the {CHANGES_SHOWN} that lost the most F1; --json lists all)");
    }
}
