//! `lector train reader`: fine-tune a reader on SQuAD-format questions (lector-train).

use crate::table;
use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};
use lector_train::{
    read_run, train_reader, train_retriever, DevScores, Event, Negatives, Outcome, ReaderRun,
    RetrieverKind, RetrieverRun, Schedule, TrainFile, WindowParams,
};
use std::path::PathBuf;

#[derive(Subcommand)]
pub enum TrainCommand {
    /// Fine-tune an extractive reader on SQuAD v1.1/v2.0 files; writes a Hugging Face checkpoint.
    Reader(ReaderArgs),
    /// Fine-tune the sentence embedder for question-to-passage retrieval (in-batch and hard negatives).
    Embedder(RetrieverArgs),
    /// Train a cross-encoder reranker (question and passage read together; needs --negatives-from).
    Reranker(RetrieverArgs),
}

/// Settings every training command shares.
#[derive(Args)]
pub struct ScheduleArgs {
    #[arg(long, default_value_t = 2, value_parser = crate::values::at_least_one)]
    epochs: usize,
    /// Items per forward pass: reader windows, or embedder/reranker questions.
    #[arg(long, default_value_t = 12, value_parser = crate::values::at_least_one)]
    batch_size: usize,
    /// Forward passes per optimiser step (gradient accumulation).
    #[arg(long, default_value_t = 1, value_parser = crate::values::at_least_one)]
    accumulation: usize,
    /// Peak learning rate (linear warm-up, then linear decay to 0).
    #[arg(long, default_value_t = 3e-5)]
    lr: f64,
    /// Decoupled weight decay (not applied to biases and LayerNorm parameters).
    #[arg(long, default_value_t = 0.01, value_parser = crate::values::non_negative)]
    weight_decay: f64,
    /// Fraction of the steps spent warming up.
    #[arg(long, default_value_t = 0.1, value_parser = crate::values::unit_interval)]
    warmup_ratio: f64,
    /// Clip the global gradient norm to this (0: no clipping).
    #[arg(long, default_value_t = 1.0, value_parser = crate::values::non_negative)]
    max_grad_norm: f64,
    /// Stop after this many optimiser steps (the schedule is laid out for them).
    #[arg(long, value_parser = crate::values::at_least_one)]
    max_steps: Option<usize>,
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Switch the checkpoint's dropout off.
    #[arg(long)]
    no_dropout: bool,
    /// Write a resumable checkpoint every N optimiser steps (0: at epoch ends only).
    #[arg(long, default_value_t = 200)]
    save_every: usize,
    /// Threads for the tensor arithmetic [default: all cores].
    #[arg(long, value_parser = crate::values::at_least_one)]
    threads: Option<usize>,
    /// Print the summary as JSON.
    #[arg(long)]
    json: bool,
}

impl ScheduleArgs {
    fn schedule(&self) -> Schedule {
        Schedule {
            epochs: self.epochs,
            batch_size: self.batch_size,
            accumulation: self.accumulation,
            lr: self.lr,
            weight_decay: self.weight_decay,
            warmup_ratio: self.warmup_ratio,
            max_grad_norm: self.max_grad_norm,
            max_steps: self.max_steps,
            seed: self.seed,
            dropout: !self.no_dropout,
            save_every: self.save_every,
            // The global --precision: bf16 rounds every product's operands, as autocast does.
            bf16: lector_models::precision() == lector_models::Precision::Bf16,
        }
    }
}

/// Where hard negatives come from.
#[derive(Args)]
pub struct NegativeArgs {
    /// Add hard negatives: passages of this index that BM25 ranks high for a question but that do
    /// not contain its answer.
    #[arg(long, value_name = "INDEX")]
    negatives_from: Option<PathBuf>,
    /// Hard negatives per answerable question (with --negatives-from).
    #[arg(long, default_value_t = 2, value_parser = crate::values::at_least_one)]
    negatives: usize,
    /// Passages retrieved per question to find the negatives in (with --negatives-from).
    #[arg(long, default_value_t = 10, value_parser = crate::values::at_least_one)]
    negatives_depth: usize,
}

impl NegativeArgs {
    fn negatives(&self) -> Option<Negatives> {
        self.negatives_from.clone().map(|index| Negatives {
            index,
            per_question: self.negatives,
            depth: self.negatives_depth,
        })
    }
}

#[derive(Args)]
pub struct RetrieverArgs {
    /// Output directory: the trained checkpoint, train-log.jsonl, checkpoint/ (for --resume).
    #[arg(long, required_unless_present = "resume")]
    out: Option<PathBuf>,
    /// Continue the interrupted run in DIR (its settings are read from DIR/run.json).
    #[arg(long, value_name = "DIR", conflicts_with_all = ["out", "train", "model"])]
    resume: Option<PathBuf>,
    /// Starting checkpoint [default: embedder: the registry's all-MiniLM-L6-v2; reranker:
    /// $LECTOR_READER, else the shipped reader's encoder, with a fresh classifier].
    #[arg(long)]
    model: Option<PathBuf>,
    /// SQuAD v1.1/v2.0 training file (answerable questions are used), optionally FILE:WEIGHT; repeatable.
    #[arg(long, required_unless_present = "resume", value_name = "FILE[:WEIGHT]")]
    train: Vec<String>,
    #[command(flatten)]
    negatives: NegativeArgs,
    /// Tokens per text (embedder) or question-passage pair (reranker), as lector reads them.
    #[arg(long, default_value_t = 256, value_parser = crate::values::at_least_one)]
    max_tokens: usize,
    /// Embedder: the similarity scale of the ranking loss.
    #[arg(long, default_value_t = 20.0)]
    scale: f64,
    #[command(flatten)]
    schedule: ScheduleArgs,
}

#[derive(Args)]
pub struct ReaderArgs {
    /// Output directory: the trained checkpoint, train-log.jsonl, checkpoint/ (for --resume), best/.
    #[arg(long, required_unless_present = "resume")]
    out: Option<PathBuf>,
    /// Continue the interrupted run in DIR (its settings are read from DIR/run.json).
    #[arg(long, value_name = "DIR", conflicts_with_all = ["out", "train", "model"])]
    resume: Option<PathBuf>,
    /// Starting checkpoint: a reader, or a bare encoder (a fresh qa_outputs head is drawn)
    /// [default: $LECTOR_READER, else the shipped models/reader-minilm-squad].
    #[arg(long)]
    model: Option<PathBuf>,
    /// SQuAD v1.1/v2.0 training file, optionally with a loss weight (FILE:WEIGHT); repeatable.
    #[arg(long, required_unless_present = "resume", value_name = "FILE[:WEIGHT]")]
    train: Vec<String>,
    /// SQuAD file evaluated after each epoch (EM/F1, and the best threshold for v2.0 data); the
    /// best checkpoint is kept in OUT/best/ with its scores.
    #[arg(long)]
    dev: Option<PathBuf>,
    /// Tokens per window, as the reader's --max-seq-len.
    #[arg(long, default_value_t = WindowParams::default().max_seq_len, value_parser = crate::values::at_least_one)]
    max_seq_len: usize,
    /// Tokens shared by consecutive windows, as the reader's --doc-stride.
    #[arg(long, default_value_t = WindowParams::default().doc_stride)]
    doc_stride: usize,
    #[arg(long, default_value_t = WindowParams::default().max_question_len, value_parser = crate::values::at_least_one)]
    max_question_len: usize,
    /// Shared normalisation: one softmax over all windows of a question, each logit relative to
    /// its window's [CLS] (Clark & Gardner 2018); a question's windows share a batch.
    #[arg(long)]
    shared_norm: bool,
    /// Hard negatives target [CLS]; with --shared-norm they share the question's softmax.
    #[command(flatten)]
    negatives: NegativeArgs,
    #[command(flatten)]
    schedule: ScheduleArgs,
}

pub fn run(cmd: TrainCommand) -> Result<()> {
    keep_freed_pages();
    match cmd {
        TrainCommand::Reader(args) => reader(args),
        TrainCommand::Embedder(args) => retriever(args, RetrieverKind::Embedder),
        TrainCommand::Reranker(args) => retriever(args, RetrieverKind::Reranker),
    }
}

/// mimalloc's `mi_option_purge_delay` (mimalloc.h, v2 and v3).
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// Every training step allocates and frees the same few hundred MB of activations. By default
/// mimalloc hands freed pages back to the OS and the kernel zeroes them again on the next step
/// (a fifth of the time, measured with perf); -1 keeps them mapped.
fn keep_freed_pages() {
    // SAFETY: sets a documented runtime option of the global allocator; no memory is touched.
    unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, -1) };
}

fn set_threads(schedule: &ScheduleArgs) {
    if let Some(threads) = schedule.threads {
        // candle's matrix products size their thread pool from this variable (read on first use).
        std::env::set_var("RAYON_NUM_THREADS", threads.to_string());
    }
}

fn reader(args: ReaderArgs) -> Result<()> {
    set_threads(&args.schedule);
    let (run, out, resume) = match &args.resume {
        Some(dir) => (read_run(dir)?, dir.clone(), true),
        None => (
            new_reader_run(&args)?,
            args.out.clone().expect("clap requires --out"),
            false,
        ),
    };
    let progress = Progress::new();
    let outcome = train_reader(&run, &out, resume, &mut |event| progress.on(event))
        .with_context(|| format!("training into {}", out.display()))?;
    progress.finish();
    report(&outcome, &out, args.schedule.json)
}

fn retriever(args: RetrieverArgs, kind: RetrieverKind) -> Result<()> {
    set_threads(&args.schedule);
    let (run, out, resume) = match &args.resume {
        Some(dir) => (read_run(dir)?, dir.clone(), true),
        None => (
            new_retriever_run(&args, kind)?,
            args.out.clone().expect("clap requires --out"),
            false,
        ),
    };
    let progress = Progress::new();
    let outcome = train_retriever(&run, &out, resume, &mut |event| progress.on(event))
        .with_context(|| format!("training into {}", out.display()))?;
    progress.finish();
    report(&outcome, &out, args.schedule.json)
}

fn report(outcome: &Outcome, out: &std::path::Path, json: bool) -> Result<()> {
    if json {
        println!("{}", serde_json::to_string_pretty(&outcome.to_json(out))?);
        return Ok(());
    }
    println!(
        "trained {} steps over {} examples into {}",
        outcome.steps,
        outcome.windows,
        out.display()
    );
    if let Some(best) = &outcome.best {
        print_dev(best, out);
    }
    Ok(())
}

fn train_files(specs: &[String]) -> Result<Vec<TrainFile>> {
    Ok(specs
        .iter()
        .map(|spec| TrainFile::parse(spec))
        .collect::<Result<Vec<_>, _>>()?)
}

fn new_reader_run(args: &ReaderArgs) -> Result<ReaderRun> {
    let model = lector_models::registry::resolve_reader(args.model.as_deref())?;
    let mut run = ReaderRun::new(model, train_files(&args.train)?);
    run.dev = args.dev.clone();
    run.windows = WindowParams {
        max_seq_len: args.max_seq_len,
        doc_stride: args.doc_stride,
        max_question_len: args.max_question_len,
    };
    run.shared_norm = args.shared_norm;
    run.negatives = args.negatives.negatives();
    run.schedule = args.schedule.schedule();
    Ok(run)
}

fn new_retriever_run(args: &RetrieverArgs, kind: RetrieverKind) -> Result<RetrieverRun> {
    let model = match &args.model {
        Some(dir) => dir.clone(),
        None => kind.default_model()?,
    };
    Ok(RetrieverRun {
        kind,
        model,
        train: train_files(&args.train)?,
        negatives: args.negatives.negatives(),
        max_tokens: args.max_tokens,
        scale: args.scale,
        schedule: args.schedule.schedule(),
    })
}

fn print_dev(best: &DevScores, out: &std::path::Path) {
    let mut rows = vec![
        vec!["epoch".to_string(), best.epoch.to_string()],
        vec!["step".into(), best.step.to_string()],
        vec!["exact".into(), format!("{:.2}", best.exact)],
        vec!["f1".into(), format!("{:.2}", best.f1)],
    ];
    if let (Some(f1), Some(thresh)) = (best.best_f1, best.best_f1_thresh) {
        rows.push(vec!["best_f1".into(), format!("{f1:.2}")]);
        rows.push(vec!["best_f1_thresh".into(), format!("{thresh:.4}")]);
    }
    println!("best dev checkpoint: {}", out.join("best").display());
    table::print_table(&["dev", "value"], &rows);
}

/// Progress bars: tokenising, then optimiser steps with the loss and an ETA.
struct Progress {
    bar: ProgressBar,
}

impl Progress {
    fn new() -> Self {
        Self {
            bar: ProgressBar::hidden(),
        }
    }

    fn on(&self, event: Event) {
        match event {
            Event::Retrieving { done, total } => {
                if self.bar.is_hidden() {
                    self.restyle("negatives {wide_bar} {pos}/{len} questions ({eta})", total);
                }
                self.bar.set_position(done as u64);
            }
            Event::Preparing { done, total } => {
                if done == 0 {
                    self.restyle("windows {wide_bar} {pos}/{len} questions ({eta})", total);
                }
                self.bar.set_position(done as u64);
            }
            Event::Started {
                windows,
                total_steps,
                first_step,
                fresh_head,
            } => {
                self.restyle(
                    "training {wide_bar} {pos}/{len} steps, loss {msg} ({per_sec}, {eta})",
                    total_steps,
                );
                self.bar.set_position(first_step as u64);
                self.bar.reset_eta();
                let head = if fresh_head {
                    ", fresh qa_outputs head"
                } else {
                    ""
                };
                self.bar
                    .println(format!("{windows} training windows{head}"));
            }
            Event::Step(log) => {
                self.bar.set_message(format!("{:.4}", log.loss));
                self.bar.set_position(log.step as u64);
            }
            Event::Evaluating { epoch } => {
                self.bar.set_message(format!("(evaluating epoch {epoch})"))
            }
            Event::Dev(scores) => self.bar.println(format!(
                "epoch {} step {}: dev EM {:.2} F1 {:.2}{}",
                scores.epoch,
                scores.step,
                scores.exact,
                scores.f1,
                scores
                    .best_f1
                    .map(|f| format!(" best-threshold F1 {f:.2}"))
                    .unwrap_or_default()
            )),
        }
    }

    fn restyle(&self, template: &str, len: usize) {
        self.bar
            .set_draw_target(indicatif::ProgressDrawTarget::stderr());
        self.bar
            .set_style(ProgressStyle::with_template(template).expect("valid template"));
        self.bar.set_length(len as u64);
        self.bar.set_position(0);
    }

    fn finish(&self) {
        self.bar.finish_and_clear();
    }
}
