//! `lector ask`: retrieve, read and aggregate; the answer with its evidence, or an abstention.

use crate::generate::{GeneratorArgs, PromptArgs};
use crate::index::IndexDir;
use crate::search::{notify, pipeline_config, RerankOptions, RetrievalOptions};
use crate::table::{fmt_prob, print_table};
use anyhow::Result;
use clap::Args;
use lector_index::{DocumentStore, Index};
use lector_pipeline::generative;
use lector_pipeline::multihop::{Decomposition, LlmDecomposer};
use lector_pipeline::{AskOptions, Built, Calibration, Response};
use lector_reader::{ReadParams, WindowProbabilities};
use std::io::Write;
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::sync::Arc;

#[derive(Args)]
pub struct AskArgs {
    /// The question.
    question: String,
    #[command(flatten)]
    dir: IndexDir,
    #[command(flatten)]
    store: crate::store::StoreArgs,
    /// Passages to retrieve and read.
    #[arg(value_parser = crate::values::at_least_one, long, default_value_t = 5)]
    k: usize,
    #[command(flatten)]
    retrieval: RetrievalOptions,
    #[command(flatten)]
    rerank: RerankOptions,
    #[command(flatten)]
    hops: crate::hops::HopArgs,
    /// Add up the scores of answers that normalise to the same text across passages.
    #[arg(long)]
    vote: bool,
    /// Retrieval-rank prior: a span from the passage at rank r has its odds against "no answer"
    /// divided by r^A (0: all passages alike).
    #[arg(value_parser = crate::values::non_negative, long, value_name = "A", default_value_t = lector_pipeline::DEFAULT_RANK_PRIOR)]
    rank_prior: f64,
    /// Among answers near-tied with the best (log-odds within lector_pipeline::aggregate::NEAR_TIE_LOG_ODDS),
    /// prefer the one from the newest dated document.
    #[arg(long)]
    prefer_recent: bool,
    /// Say the answer is ambiguous while it is at most N times as likely to be right as a
    /// runner-up from another document that disagrees with it (calibrated confidences: needs a
    /// confidence map from `lector calibrate`; 3: odds "not worth more than a bare mention").
    #[arg(value_parser = at_least_one_odds, long, value_name = "N", default_value_t = lector_pipeline::DEFAULT_AMBIGUITY_ODDS)]
    ambiguity_odds: f64,
    /// Show the retrieved passages with retrieval and reader scores, and the reader's start/end
    /// probabilities over the answer passage.
    #[arg(long)]
    explain: bool,
    /// Answers kept per passage (the runner-ups come from these).
    #[arg(value_parser = crate::values::at_least_one, long, default_value_t = 3, value_name = "N")]
    answers_per_passage: usize,
    /// Reader checkpoint directory [default: $LECTOR_READER, else the shipped models/reader-minilm-squad].
    #[arg(long, value_name = "DIR")]
    model: Option<PathBuf>,
    /// Print JSON (answer, evidence, runner-ups, passages, timings) instead of text.
    #[arg(long)]
    json: bool,
    /// Generate the answer with a language model from the retrieved passages, with citations,
    /// instead of extracting a span.
    #[arg(long)]
    generate: bool,
    /// With --generate: answer from the model's own knowledge, without retrieval.
    #[arg(long, requires = "generate")]
    closed_book: bool,
    #[command(flatten)]
    generator: GeneratorArgs,
    #[command(flatten)]
    prompt: PromptArgs,
}

pub fn run(args: AskArgs) -> Result<()> {
    if args.question.trim().is_empty() {
        anyhow::bail!("the question is empty");
    }
    if args.generate {
        return run_generative(&args);
    }
    let Built {
        pipeline, search, ..
    } = open_pipeline_over(
        args.store.open(&args.dir)?,
        args.model.as_deref(),
        &args.retrieval,
        &args.rerank,
    )?;
    let options = ask_options(&args, search);
    let response = match args.hops.hops {
        1 => pipeline.ask(&args.question, &options)?,
        _ => {
            let llm = match args.hops.decompose {
                Decomposition::Llm => Some(LlmDecomposer::new(Arc::from(args.generator.load()?))),
                _ => None,
            };
            let decomposer = args.hops.decompose.decomposer(llm.as_ref());
            pipeline.ask_hops_with(&args.question, &options, &args.hops.options(), decomposer)?
        }
    };
    let probabilities = match (&response.answer, args.explain) {
        (Some(answer), true) => Some(pipeline.token_probabilities(
            &args.question,
            &answer.evidence.passage_text,
            &options,
        )?),
        _ => None,
    };
    show(&args, &response, probabilities.as_deref())
}

/// Prints a response as JSON or text (with --explain, the passages and the reader's
/// probabilities over the answer passage).
fn show(
    args: &AskArgs,
    response: &Response,
    probabilities: Option<&[WindowProbabilities]>,
) -> Result<()> {
    if args.json {
        let mut out = serde_json::to_value(response)?;
        if let Some(windows) = probabilities {
            out["token_probabilities"] = serde_json::to_value(windows)?;
        }
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(());
    }
    print_response(response);
    if let Some(trace) = &response.hops {
        crate::hops::print_trace(trace);
    }
    if args.explain {
        print_passages(response);
        if let (Some(answer), Some(windows)) = (&response.answer, probabilities) {
            print_probabilities(answer, windows);
        }
    }
    print_timings(response);
    Ok(())
}

/// The pipeline's options from the command line, retrieving with `search`.
fn ask_options(args: &AskArgs, search: lector_index::SearchOptions) -> AskOptions {
    AskOptions {
        search: Some(search),
        k: args.k,
        vote: args.vote,
        rank_prior: args.rank_prior,
        prefer_recent: args.prefer_recent,
        read: ReadParams {
            top_k: args.answers_per_passage,
            ..ReadParams::default()
        },
        ambiguity_odds: args.ambiguity_odds,
    }
}

/// `ask --generate`: retrieve (unless closed book), prompt, generate with streaming, check.
fn run_generative(args: &AskArgs) -> Result<()> {
    let prompting = args.prompt.load()?;
    let options = args.generator.options_for(&prompting)?;
    let layout = prompting.layout(&args.question, Default::default())?;
    // Opened before the generator loads, so that a missing index fails fast.
    let pipeline = match args.closed_book {
        true => None,
        false => Some(open_pipeline_over(
            args.store.open(&args.dir)?,
            args.model.as_deref(),
            &args.retrieval,
            &args.rerank,
        )?),
    };
    let generator = args.generator.load()?;
    let stream = !args.json;
    if stream {
        print!("answer: ");
    }
    let mut on_token = |piece: &str| {
        if stream {
            print!("{piece}");
            let _ = std::io::stdout().flush();
        }
        ControlFlow::Continue(())
    };
    let generated = match pipeline {
        None => generative::answer(
            generator.as_ref(),
            &args.question,
            None,
            &options,
            layout,
            &mut on_token,
        )?,
        Some(Built {
            pipeline, search, ..
        }) => pipeline.generate(
            generator.as_ref(),
            &args.question,
            &ask_options(args, search),
            &options,
            layout,
            &mut on_token,
        )?,
    };
    if args.json {
        let out = generated.to_json(&generator.name());
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        println!();
        crate::generate::print_answered(
            &generated.answered,
            &generator.name(),
            generated.retrieve_ms,
        );
    }
    Ok(())
}

/// The pipeline over `index_dir` as the shared options configure it; its warnings go to stderr.
pub fn open_pipeline(
    index_dir: &Path,
    model: Option<&Path>,
    retrieval: &RetrievalOptions,
    rerank: &RerankOptions,
) -> Result<Built> {
    open_pipeline_over(Index::open(index_dir)?, model, retrieval, rerank)
}

/// The pipeline over `store`, with the calibration kept in it, as the shared options configure
/// it; its warnings go to stderr.
pub fn open_pipeline_over<S: DocumentStore>(
    store: S,
    model: Option<&Path>,
    retrieval: &RetrievalOptions,
    rerank: &RerankOptions,
) -> Result<Built<S>> {
    let calibration = Calibration::load_from(&store)?;
    let built =
        pipeline_config(model, retrieval, rerank).build_over(store, calibration, &notify)?;
    for warning in &built.warnings {
        eprintln!("warning: {warning}");
    }
    Ok(built)
}

fn print_response(r: &Response) {
    let rule = if r.calibrated {
        "calibrated"
    } else {
        "default, uncalibrated"
    };
    match &r.answer {
        Some(a) => {
            let e = &a.evidence;
            println!("answer: {}", a.text);
            println!(
                "{}score {:.4} (span probability {:.4} against its passage's no-answer score, rank-weighted), \
                 no-answer probability {} (threshold {}, {rule}){}",
                a.confidence.map_or(String::new(), |c| format!(
                    "confidence {} (calibrated probability that it is right); ",
                    fmt_confidence(c)
                )),
                a.score,
                a.reader_score,
                fmt_prob(r.na_prob),
                fmt_prob(r.threshold),
                if r.reordered_by_date {
                    "; chosen over a near-tie as the most recent"
                } else {
                    ""
                }
            );
            print_evidence("evidence", e);
            print_readings(r);
        }
        None => println!("no answer: {}", abstention_text(r)),
    }
    let runners: Vec<Vec<String>> = r
        .candidates
        .iter()
        .enumerate()
        .skip(usize::from(r.answer.is_some()))
        .take(5)
        .map(|(i, c)| {
            vec![
                (i + 1).to_string(),
                c.confidence.map_or_else(|| "-".into(), fmt_confidence),
                format!("{:.4}", c.score),
                format!("{:.4}", c.reader_score),
                c.passages.to_string(),
                c.evidence.doc_id.clone(),
                c.text.clone(),
            ]
        })
        .collect();
    if !runners.is_empty() {
        println!();
        let heading = if r.answer.is_some() {
            "runner-ups:"
        } else {
            "candidates:"
        };
        println!("{heading}");
        print_table(
            &[
                "rank",
                "confidence",
                "score",
                "span p",
                "passages",
                "doc id",
                "answer",
            ],
            &runners,
        );
    }
}

/// Where an answer comes from, and its passage with the answer highlighted.
fn print_evidence(label: &str, e: &lector_pipeline::Evidence) {
    let title = e
        .title
        .as_deref()
        .map_or(String::new(), |t| format!(" \"{t}\""));
    let date = e
        .date
        .as_deref()
        .map_or(String::new(), |d| format!(", dated {d}"));
    let page = e.page.map_or(String::new(), |p| format!("page {p}, "));
    let page = match &e.section {
        Some(section) => format!("{page}section \"{section}\", "),
        None => page,
    };
    println!(
        "{label}: {}{title}{date}, {page}passage {} (rank {} among the passages read), characters {}..{} of the document",
        e.doc_id, e.passage, e.rank, e.start, e.end
    );
    println!(
        "  {}",
        highlight(&e.passage_text, e.passage_start, e.passage_end)
    );
}

/// When the documents disagree: one line naming every reading, then each runner-up's evidence
/// (the answer's is printed above).
fn print_readings(r: &Response) {
    if !r.ambiguous {
        return;
    }
    let readings: Vec<&lector_pipeline::Candidate> =
        r.readings.iter().map(|&i| &r.candidates[i]).collect();
    println!("{}", ambiguity_line(&readings));
    for (n, reading) in readings.iter().enumerate().skip(1) {
        print_evidence(
            &format!("reading {} ({}), evidence", n + 1, reading.text),
            &reading.evidence,
        );
    }
}

/// "ambiguous: the documents disagree — A (doc X, confidence 48%) or B (doc Y, 41%)" (only
/// calibrated answers are flagged, so every reading has a confidence).
fn ambiguity_line(readings: &[&lector_pipeline::Candidate]) -> String {
    let named: Vec<String> = readings
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let p = c.confidence.map(fmt_confidence).unwrap_or_default();
            let what = if i == 0 { format!("confidence {p}") } else { p };
            format!("{} (doc {}, {what})", c.text, c.evidence.doc_id)
        })
        .collect();
    format!("ambiguous: the documents disagree — {}", named.join(" or "))
}

/// `--ambiguity-odds`: a number of at least 1 (the top answer is never less likely than itself).
pub(crate) fn at_least_one_odds(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(odds) if odds >= 1.0 => Ok(odds),
        Ok(_) => Err("must be at least 1".into()),
        Err(e) => Err(format!("not a number: {e}")),
    }
}

/// A confidence as a whole percentage; `<1%` and `>99%` rather than a rounded 0% or 100%, which
/// would claim certainty the map does not give.
fn fmt_confidence(p: f64) -> String {
    match p {
        p if p > 0.0 && p < 0.01 => "<1%".into(),
        p if p > 0.99 && p < 1.0 => ">99%".into(),
        p => format!("{:.0}%", 100.0 * p),
    }
}

fn abstention_text(r: &Response) -> String {
    use lector_pipeline::Abstention;
    match r.abstention {
        Some(Abstention::NoPassages) => "no passage of the index matches the question".into(),
        Some(Abstention::NoSpan) => "the reader found no answer span in the passages".into(),
        Some(Abstention::BelowThreshold) | None => format!(
            "the no-answer probability {} is above the threshold {}{}",
            fmt_prob(r.na_prob),
            fmt_prob(r.threshold),
            if r.calibrated {
                " (calibrated)"
            } else {
                " (default: the null score beats the best span)"
            }
        ),
    }
}

/// The passage on one line with the answer in [[double brackets]].
fn highlight(passage: &str, start: usize, end: usize) -> String {
    let flat = |s: String| s.split_whitespace().collect::<Vec<_>>().join(" ");
    let before: String = passage.chars().take(start).collect();
    let answer: String = passage.chars().skip(start).take(end - start).collect();
    let after: String = passage.chars().skip(end).collect();
    format!("{} [[{}]] {}", flat(before), flat(answer), flat(after))
}

fn print_passages(r: &Response) {
    println!();
    println!("retrieved passages:");
    let rows: Vec<Vec<String>> = r
        .passages
        .iter()
        .enumerate()
        .map(|(i, p)| {
            vec![
                (i + 1).to_string(),
                format!("{:.4}", p.hit.score),
                format!("{:.4}", p.best_score()),
                fmt_prob(p.na_prob),
                format!("{}#p{}", p.hit.doc_id, p.hit.passage),
                p.answers
                    .first()
                    .map_or(String::new(), |a| a.answer.clone()),
            ]
        })
        .collect();
    // A hit's score is its last stage's: the reranker's when there is one.
    let reranked = r.passages.iter().any(|p| {
        p.hit
            .sources
            .iter()
            .any(|s| s.retriever == lector_index::RetrieverKind::Rerank)
    });
    let score = if reranked { "rerank" } else { "retrieval" };
    print_table(
        &["rank", score, "reader", "na_prob", "passage", "best span"],
        &rows,
    );
}

/// Sparklines of the start and end probabilities over the answer passage's tokens.
fn print_probabilities(answer: &lector_pipeline::Candidate, windows: &[WindowProbabilities]) {
    let e = &answer.evidence;
    for (w, window) in windows.iter().enumerate() {
        let tokens = &window.tokens;
        let Some(first) = tokens.iter().position(|t| t.end > e.passage_start) else {
            continue;
        };
        println!();
        println!(
            "reader probabilities over the answer passage{} ({} tokens, one column per token, full height = 1):",
            if windows.len() > 1 {
                format!(", window {}", w + 1)
            } else {
                String::new()
            },
            tokens.len()
        );
        let marks: String = tokens
            .iter()
            .map(|t| {
                if t.start < e.passage_end && t.end > e.passage_start {
                    '^'
                } else {
                    ' '
                }
            })
            .collect();
        let starts: Vec<f32> = tokens.iter().map(|t| t.p_start).collect();
        let ends: Vec<f32> = tokens.iter().map(|t| t.p_end).collect();
        for chunk in (0..tokens.len()).step_by(SPARK_WIDTH) {
            let range = chunk..(chunk + SPARK_WIDTH).min(tokens.len());
            let rows = [
                ("start ", sparkline(&starts[range.clone()])),
                ("end   ", sparkline(&ends[range.clone()])),
                ("answer", marks[range].to_string()),
            ];
            for (label, line) in rows {
                println!("  {label} |{}", line.trim_end());
            }
        }
        let top = |p: &[f32]| {
            let (i, v) = p
                .iter()
                .enumerate()
                .max_by(|a, b| a.1.total_cmp(b.1))
                .expect("a window has tokens");
            let t = tokens[i];
            let text: String = e
                .passage_text
                .chars()
                .skip(t.start)
                .take(t.end - t.start)
                .collect();
            format!("`{text}` ({v:.3})")
        };
        println!(
            "  most likely start {}, end {}; null score {:.4}; answer starts at token {}",
            top(&starts),
            top(&ends),
            window.null_score,
            first + 1
        );
    }
}

/// Tokens per sparkline row.
const SPARK_WIDTH: usize = 100;

/// One block character per value in [0, 1], in eighths rounded up; below 0.01 a space, so the
/// few tokens that matter stand out.
fn sparkline(values: &[f32]) -> String {
    const LEVELS: [char; 9] = [' ', '▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];
    values
        .iter()
        .map(|&v| match v {
            v if v < 0.01 => ' ',
            v => LEVELS[(v.min(1.0) * 8.0).ceil() as usize],
        })
        .collect::<String>()
        .trim_end()
        .to_string()
}

fn print_timings(r: &Response) {
    let t = r.timings;
    println!();
    let rerank = if t.rerank_ms > 0.0 {
        format!(", rerank {:.1} ms", t.rerank_ms)
    } else {
        String::new()
    };
    match &r.hops {
        Some(trace) => println!(
            "time: {} (hop 1: retrieve {:.2} ms{rerank}, read {:.1} ms; {} passages read)",
            crate::hops::hop_times(trace),
            t.retrieve_ms,
            t.read_ms,
            r.passages.len()
        ),
        None => println!(
            "time: retrieve {:.2} ms{rerank}, read {:.1} ms, aggregate {:.2} ms ({} passages)",
            t.retrieve_ms,
            t.read_ms,
            t.aggregate_ms,
            r.passages.len()
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sparkline_scales_to_eight_levels() {
        assert_eq!(sparkline(&[0.0, 0.5, 1.0, 0.0]), " ▄█");
        assert_eq!(sparkline(&[0.01, 0.005, 0.2]), "▁ ▂");
    }

    #[test]
    fn confidence_shows_as_a_percentage_without_false_certainty() {
        assert_eq!(fmt_confidence(0.834), "83%");
        assert_eq!(fmt_confidence(0.004), "<1%");
        assert_eq!(fmt_confidence(0.996), ">99%");
        assert_eq!(
            (fmt_confidence(0.0), fmt_confidence(1.0)),
            ("0%".into(), "100%".into())
        );
    }

    #[test]
    fn highlight_marks_the_answer_by_characters() {
        assert_eq!(highlight("Über 1921 café", 5, 9), "Über [[1921]] café");
    }
}
