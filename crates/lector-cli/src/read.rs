//! `lector read`: extractive answers from a context (one question) or a SQuAD file (batch).
use anyhow::{bail, Context as _, Result};
use clap::Args;
use lector_pipeline::odqa::gold_queries;
use lector_reader::{Prediction, Query, ReadParams, Reader};
use std::io::Read as _;
use std::path::{Path, PathBuf};

#[derive(Args)]
#[command(group(clap::ArgGroup::new("input").required(true).args(["context", "squad"])))]
pub struct ReadArgs {
    /// Checkpoint directory [default: $LECTOR_READER, else the shipped models/reader-minilm-squad].
    #[arg(long, value_name = "DIR")]
    model: Option<PathBuf>,
    /// File holding the context, or `-` for standard input.
    #[arg(long, value_name = "FILE", requires = "question")]
    context: Option<PathBuf>,
    /// The question (with --context).
    #[arg(long, value_name = "TEXT")]
    question: Option<String>,
    /// Answer every question of a SQuAD-format file.
    #[arg(
        long,
        value_name = "DATA.json",
        requires = "out",
        conflicts_with = "question"
    )]
    squad: Option<PathBuf>,
    /// Where to write the predictions {id: answer} (with --squad).
    #[arg(long, value_name = "PRED.json")]
    out: Option<PathBuf>,
    /// Where to write no-answer probabilities {id: null / (null + best)} (with --squad).
    #[arg(long, value_name = "NA.json", requires = "squad")]
    na_prob_out: Option<PathBuf>,
    /// Answer with the empty string when the null score beats every span (SQuAD v2).
    #[arg(long)]
    handle_impossible_answer: bool,
    /// Only the first N questions (with --squad).
    #[arg(long, value_name = "N", requires = "squad")]
    limit: Option<usize>,
    /// Answers to show (with --context).
    #[arg(value_parser = crate::values::at_least_one, long, default_value_t = 1, value_name = "N")]
    top_k: usize,
    /// Windows per forward pass.
    #[arg(value_parser = crate::values::at_least_one, long, default_value_t = 32, value_name = "N")]
    batch_size: usize,
    /// Tokens per window (question + context + special tokens).
    #[arg(value_parser = crate::values::at_least_one, long, default_value_t = 384, value_name = "N")]
    max_seq_len: usize,
    /// Tokens shared by consecutive windows.
    #[arg(value_parser = crate::values::at_least_one, long, default_value_t = 128, value_name = "N")]
    doc_stride: usize,
    /// Longer questions are truncated (with a warning).
    #[arg(value_parser = crate::values::at_least_one, long, default_value_t = 64, value_name = "N")]
    max_question_len: usize,
    /// Longest answer in tokens.
    #[arg(value_parser = crate::values::at_least_one, long, default_value_t = 15, value_name = "N")]
    max_answer_len: usize,
    /// With --precision bf16: questions whose top answers score within this factor of each
    /// other (natural log of the ratio) are read again in float32; 0 never re-reads.
    #[arg(value_parser = crate::values::non_negative, long, default_value_t = lector_reader::DEFAULT_RECHECK_MARGIN, value_name = "LN")]
    recheck_margin: f64,
    /// Print JSON instead of a table (with --context).
    #[arg(long)]
    json: bool,
}

pub fn run(args: ReadArgs) -> Result<()> {
    let dir = lector_models::registry::resolve_reader(args.model.as_deref())?;
    let params = ReadParams {
        max_seq_len: args.max_seq_len,
        doc_stride: args.doc_stride,
        max_question_len: args.max_question_len,
        max_answer_len: args.max_answer_len,
        top_k: args.top_k,
        handle_impossible_answer: args.handle_impossible_answer,
        batch_size: args.batch_size,
        recheck_margin: args.recheck_margin,
    };
    let reader =
        Reader::load(&dir).with_context(|| format!("loading the reader from {}", dir.display()))?;
    match (&args.context, &args.squad) {
        (Some(context), _) => read_one(
            &reader,
            context,
            args.question.as_deref().unwrap_or_default(),
            &params,
            args.json,
        ),
        (None, Some(squad)) => read_squad(&reader, squad, &args, &params),
        (None, None) => {
            bail!("give --context FILE --question TEXT, or --squad DATA.json --out PRED.json")
        }
    }
}

fn read_one(
    reader: &Reader,
    context: &Path,
    question: &str,
    params: &ReadParams,
    json: bool,
) -> Result<()> {
    let text = read_context(context)?;
    let prediction = reader.answer(question, &text, params)?;
    if prediction.question_truncated {
        eprintln!(
            "warning: the question has more than {} tokens and was truncated",
            params.max_question_len
        );
    }
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&prediction_json(&prediction))?
        );
    } else {
        print_table(&prediction);
    }
    Ok(())
}

fn read_context(path: &Path) -> Result<String> {
    if path.as_os_str() == "-" {
        let mut bytes = Vec::new();
        std::io::stdin()
            .read_to_end(&mut bytes)
            .context("reading the context from standard input")?;
        return String::from_utf8(bytes).map_err(|e| {
            anyhow::anyhow!(
                "<stdin>: invalid UTF-8 at byte {}",
                e.utf8_error().valid_up_to()
            )
        });
    }
    // The eval error already names the file and the cause: keep it as one message.
    lector_eval::input::read_text(path).map_err(|e| anyhow::anyhow!("{e}"))
}

fn prediction_json(p: &Prediction) -> serde_json::Value {
    serde_json::json!({
        "answers": p.answers,
        "null_score": p.null_score,
        "na_prob": p.na_prob,
        "question_truncated": p.question_truncated,
    })
}

fn print_table(p: &Prediction) {
    println!(
        "{:>4}  {:>8}  {:>7}  {:>7}  answer",
        "rank", "score", "start", "end"
    );
    for (i, a) in p.answers.iter().enumerate() {
        let shown = if a.answer.is_empty() {
            "(no answer)"
        } else {
            a.answer.as_str()
        };
        println!(
            "{:>4}  {:>8.4}  {:>7}  {:>7}  {shown}",
            i + 1,
            a.score,
            a.start,
            a.end
        );
    }
    if p.answers.is_empty() {
        println!("(no answer span found)");
    }
}

fn read_squad(reader: &Reader, path: &Path, args: &ReadArgs, params: &ReadParams) -> Result<()> {
    let dataset = lector_eval::squad::read_dataset(path)?;
    let ids: Vec<&str> = dataset.questions.iter().map(|q| q.id.as_str()).collect();
    let queries = gold_queries(&dataset);
    let n = args.limit.unwrap_or(queries.len()).min(queries.len());
    let predictions = run_with_progress(reader, &queries[..n], params)?;
    let truncated = predictions.iter().filter(|p| p.question_truncated).count();
    if truncated > 0 {
        eprintln!(
            "warning: {truncated} question(s) had more than {} tokens and were truncated",
            params.max_question_len
        );
    }
    let answers = ids.iter().zip(&predictions).map(|(id, p)| {
        let text = p.answers.first().map_or("", |a| a.answer.as_str());
        (id.to_string(), serde_json::Value::from(text))
    });
    let out = args
        .out
        .as_deref()
        .context("--squad needs --out PRED.json")?;
    write_json(out, answers.collect())?;
    if let Some(na_path) = &args.na_prob_out {
        let probs = ids
            .iter()
            .zip(&predictions)
            .map(|(id, p)| (id.to_string(), p.na_prob.into()));
        write_json(na_path, probs.collect())?;
    }
    Ok(())
}

/// Answers `queries` in one batch behind a progress bar; prints the throughput.
pub fn run_with_progress(
    reader: &Reader,
    queries: &[Query],
    params: &ReadParams,
) -> Result<Vec<Prediction>> {
    let bar = indicatif::ProgressBar::new(queries.len() as u64);
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{bar:40} {pos}/{len} questions [{elapsed_precise}<{eta_precise}, {per_sec}]",
        )
        .expect("valid template"),
    );
    let start = std::time::Instant::now();
    let predictions =
        reader.answer_batch(queries, params, &mut |done| bar.set_position(done as u64))?;
    bar.finish_and_clear();
    let secs = start.elapsed().as_secs_f64();
    eprintln!(
        "{} questions in {secs:.1} s ({:.1} questions/s)",
        queries.len(),
        queries.len() as f64 / secs
    );
    Ok(predictions)
}

fn write_json(path: &Path, map: serde_json::Map<String, serde_json::Value>) -> Result<()> {
    let text = serde_json::to_string_pretty(&serde_json::Value::Object(map))?;
    std::fs::write(path, text + "\n").with_context(|| format!("writing {}", path.display()))
}
