//! The training loop shared by readers, embedders and rerankers: items in a seeded order,
//! forward and backward, gradient accumulation, AdamW, a JSON-lines log, checkpoints from which
//! `--resume` continues bit for bit, and (readers) dev evaluation each epoch with the best
//! checkpoint kept.

use crate::error::{io_err, Error, Result};
use crate::examples::{read_examples, Example, TrainFile};
use crate::fingerprint;
use crate::model::Network;
use crate::negatives::{add_negatives, Negatives};
use crate::optim::{AdamW, AdamWConfig};
use crate::rng::{self, Rng};
use crate::save::{self, DevScores, RunState};
use candle_core::Tensor;
use serde::{Deserialize, Serialize};
use std::fs;
use std::io::Write;
use std::path::Path;
use std::time::Instant;

/// How long and how fast to train; shared by every kind of run.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Schedule {
    pub epochs: usize,
    /// Items per forward pass (reader windows; embedder and reranker questions).
    pub batch_size: usize,
    /// Forward passes whose gradients add up to one optimiser step.
    pub accumulation: usize,
    /// Peak learning rate.
    pub lr: f64,
    pub weight_decay: f64,
    /// Fraction of the steps spent warming the learning rate up.
    pub warmup_ratio: f64,
    pub max_grad_norm: f64,
    /// Stop after this many optimiser steps (the schedule is laid out for them).
    pub max_steps: Option<usize>,
    pub seed: u64,
    /// The checkpoint's dropout (switched off only for exact comparisons).
    pub dropout: bool,
    /// Write a checkpoint every this many steps (0: at epoch ends only).
    pub save_every: usize,
    /// Round the operands of every matrix product to bfloat16 (float32 sums), as PyTorch's
    /// bfloat16 autocast computes them. The arithmetic stays float32, so this changes the
    /// numbers, not the speed (see [`crate::model::Network::bf16`]).
    #[serde(default)]
    pub bf16: bool,
}

impl Default for Schedule {
    /// The transformers question-answering example's settings (3e-5, 2 epochs, batch 12, 10% warm-up).
    fn default() -> Self {
        Self {
            epochs: 2,
            batch_size: 12,
            accumulation: 1,
            lr: 3e-5,
            weight_decay: 0.01,
            warmup_ratio: 0.1,
            max_grad_norm: 1.0,
            max_steps: None,
            seed: 42,
            dropout: true,
            save_every: 200,
            bf16: false,
        }
    }
}

impl Schedule {
    pub(crate) fn check(&self) -> Result<()> {
        let positive = [
            ("epochs", self.epochs),
            ("batch_size", self.batch_size),
            ("accumulation", self.accumulation),
        ];
        if let Some((name, _)) = positive.iter().find(|(_, v)| *v == 0) {
            return Err(Error::Params(format!("{name} must be at least 1")));
        }
        if !(self.lr > 0.0 && (0.0..1.0).contains(&self.warmup_ratio)) {
            return Err(Error::Params(
                "lr must be positive and warmup_ratio in [0, 1)".into(),
            ));
        }
        Ok(())
    }
}

/// One line of `train-log.jsonl`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StepLog {
    pub step: usize,
    pub epoch: usize,
    pub loss: f64,
    pub lr: f64,
    pub grad_norm: f64,
    /// Examples in this step (reader windows, embedder texts, reranker pairs).
    pub windows: usize,
    /// Examples per second over this step.
    pub examples_per_s: f64,
    /// Seconds since this process started training.
    pub elapsed_s: f64,
}

/// What training reports as it goes, for progress bars.
pub enum Event<'a> {
    /// Retrieving hard negatives.
    Retrieving {
        done: usize,
        total: usize,
    },
    /// Tokenising questions.
    Preparing {
        done: usize,
        total: usize,
    },
    Started {
        windows: usize,
        total_steps: usize,
        first_step: usize,
        fresh_head: bool,
    },
    Step(&'a StepLog),
    Evaluating {
        epoch: usize,
    },
    Dev(&'a DevScores),
}

/// What a finished run produced.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub steps: usize,
    /// Training examples (reader windows; questions for embedders and rerankers).
    pub windows: usize,
    pub best: Option<DevScores>,
    pub last_dev: Option<DevScores>,
}

impl Outcome {
    /// The summary `lector train ... --json` prints for a run written into `out`.
    pub fn to_json(&self, out: &Path) -> serde_json::Value {
        serde_json::json!({
            "out": out,
            "steps": self.steps,
            "windows": self.windows,
            "best": self.best,
            "last_dev": self.last_dev,
        })
    }
}

pub(crate) const RUN_FILE: &str = "run.json";
const LOG_FILE: &str = "train-log.jsonl";
const DEV_LOG_FILE: &str = "dev-scores.jsonl";

/// Reads the run saved in `out` (for `--resume`).
pub fn read_run<T: serde::de::DeserializeOwned>(out: &Path) -> Result<T> {
    let path = out.join(RUN_FILE);
    let text = fs::read_to_string(&path).map_err(io_err(&path))?;
    serde_json::from_str(&text).map_err(|e| Error::Checkpoint {
        path,
        message: e.to_string(),
    })
}

/// Creates `out` for a fresh run (refusing one that already holds a run) and saves `run` there.
pub(crate) fn prepare_out<T: Serialize>(run: &T, out: &Path, resume: bool) -> Result<()> {
    let run_path = out.join(RUN_FILE);
    if resume {
        return Ok(());
    }
    if run_path.exists() {
        return Err(Error::Params(format!(
            "{} already holds a training run: continue it with --resume {}, or choose another directory",
            out.display(),
            out.display()
        )));
    }
    fs::create_dir_all(out).map_err(io_err(out))?;
    let text = serde_json::to_vec_pretty(run).expect("a run serialises");
    lector_index::write_durably(&run_path, &text).map_err(io_err(&run_path))?;
    let log = out.join(LOG_FILE);
    fs::write(&log, b"").map_err(io_err(&log))
}

/// The questions of `train`, each answerable one followed by its hard negatives when `negatives`
/// says where to retrieve them. A fresh run records its inputs' fingerprints in `out`; a resumed
/// one refuses files or negatives that differ from them (see [`crate::fingerprint`]).
pub(crate) fn training_examples(
    train: &[TrainFile],
    negatives: Option<&Negatives>,
    out: &Path,
    resume: bool,
    events: &mut dyn FnMut(Event),
) -> Result<Vec<Example>> {
    let recorded = match resume {
        true => fingerprint::read(out)?,
        false => None,
    };
    let files = fingerprint::train_files(train)?;
    if let Some(recorded) = &recorded {
        fingerprint::check_train_files(recorded, train, &files, out)?;
    }
    let mut examples = read_examples(train)?;
    if let Some(negatives) = negatives {
        examples = add_negatives(examples, negatives, &mut |done, total| {
            events(Event::Retrieving { done, total })
        })?;
    }
    let inputs = fingerprint::Inputs {
        train: files,
        negatives: negatives.map(|_| fingerprint::examples(&examples)),
    };
    match (&recorded, negatives) {
        (Some(recorded), Some(negatives)) => {
            fingerprint::check_negatives(recorded, negatives, inputs.negatives.as_deref(), out)?
        }
        (Some(_), None) => {}
        // A fresh run, or one started before lector recorded fingerprints.
        (None, _) => fingerprint::write(out, &inputs)?,
    }
    Ok(examples)
}

/// What is being learned: the data order's units and the loss of a batch of them.
pub(crate) trait Objective {
    /// Groups of item indices that stay in one batch, in their natural order.
    fn units(&self) -> &[Vec<u32>];
    /// The loss of `items` and how many examples they hold.
    fn loss(
        &self,
        net: &Network,
        items: &[u32],
        dropout: Option<&mut Rng>,
    ) -> Result<(Tensor, usize)>;
}

/// A reader's dev evaluation, run after each epoch.
pub(crate) struct DevEval<'a> {
    pub file: &'a Path,
    pub score: &'a dyn Fn(&Path, &Path, usize, usize) -> Result<DevScores>,
}

pub(crate) struct Trainer<'a> {
    pub schedule: &'a Schedule,
    pub out: &'a Path,
    /// The checkpoint training started from (its tokenizer files are copied).
    pub source: &'a Path,
    pub net: Network,
    pub objective: &'a dyn Objective,
    pub dev: Option<DevEval<'a>>,
}

impl Trainer<'_> {
    pub fn run(mut self, resume: bool, events: &mut dyn FnMut(Event)) -> Result<Outcome> {
        let schedule = self.schedule;
        self.net.bf16 = schedule.bf16;
        let units = self.objective.units();
        if units.is_empty() {
            return Err(Error::Params(
                "the training files give nothing to train on".into(),
            ));
        }
        let layout = StepLayout::new(units, schedule);
        let total_steps = layout.total().min(schedule.max_steps.unwrap_or(usize::MAX));
        let mut opt = AdamW::new(&self.net.params, adamw_config(schedule, total_steps));
        let mut state = RunState::default();
        if resume {
            if let Some(saved) = save::read_checkpoint(self.out, &self.net, &mut opt)? {
                state = saved;
            }
            truncate_log(&self.out.join(LOG_FILE), state.step)?;
        }
        events(Event::Started {
            windows: units.iter().map(Vec::len).sum(),
            total_steps,
            first_step: state.step,
            fresh_head: self.net.fresh_head,
        });
        let started = Instant::now();
        let mut plan: Option<(usize, Vec<Vec<u32>>)> = None;
        let mut last_dev = None;
        while state.step < total_steps {
            let step = state.step;
            let (epoch, in_epoch) = layout.locate(step);
            if plan.as_ref().is_none_or(|(e, _)| *e != epoch) {
                plan = Some((epoch, plan_epoch(units, schedule, epoch)));
            }
            let batches = &plan.as_ref().expect("planned above").1;
            let first = in_epoch * schedule.accumulation;
            let mine = &batches[first..(first + schedule.accumulation).min(batches.len())];
            let log = self.step(&mut opt, step, epoch, mine, &started)?;
            append_line(
                &self.out.join(LOG_FILE),
                &serde_json::to_string(&log).expect("serialises"),
            )?;
            events(Event::Step(&log));
            state.step += 1;
            let epoch_end = in_epoch + 1 == layout.steps[epoch] || state.step == total_steps;
            if epoch_end && self.dev.is_some() {
                events(Event::Evaluating { epoch });
                let scores = self.evaluate_dev(epoch, state.step, &mut state)?;
                events(Event::Dev(&scores));
                last_dev = Some(scores);
            }
            let periodic = schedule.save_every > 0 && state.step % schedule.save_every == 0;
            if epoch_end || periodic {
                save::write_checkpoint(self.out, &self.net, &opt, &state)?;
            }
        }
        save::save_model(&self.net, self.source, self.out)?;
        Ok(Outcome {
            steps: state.step,
            windows: units.iter().map(Vec::len).sum(),
            best: state.best,
            last_dev,
        })
    }

    /// One optimiser step: its micro-batches forward and backward, then AdamW.
    fn step(
        &mut self,
        opt: &mut AdamW,
        step: usize,
        epoch: usize,
        batches: &[Vec<u32>],
        started: &Instant,
    ) -> Result<StepLog> {
        let t0 = Instant::now();
        let acc = self.schedule.accumulation;
        let mut grads: Vec<Vec<f32>> = self
            .net
            .params
            .vars
            .iter()
            .map(|v| vec![0f32; v.elem_count()])
            .collect();
        let (mut loss, mut examples) = (0.0, 0);
        for (i, batch) in batches.iter().enumerate() {
            let mut dropout = self
                .schedule
                .dropout
                .then(|| Rng::stream(self.schedule.seed, rng::DROPOUT, (step * acc + i) as u64));
            let (batch_loss, n) = self.objective.loss(&self.net, batch, dropout.as_mut())?;
            loss += backward(&self.net, &(batch_loss / acc as f64)?, &mut grads)?;
            examples += n;
        }
        let info = opt.update(&self.net.params, &mut grads)?;
        let seconds = t0.elapsed().as_secs_f64();
        Ok(StepLog {
            step: step + 1,
            epoch,
            loss,
            lr: info.lr,
            grad_norm: info.grad_norm,
            windows: examples,
            examples_per_s: examples as f64 / seconds.max(1e-9),
            elapsed_s: started.elapsed().as_secs_f64(),
        })
    }

    fn evaluate_dev(&self, epoch: usize, step: usize, state: &mut RunState) -> Result<DevScores> {
        let dev = self.dev.as_ref().expect("called with a dev set");
        let dir = self.out.join("dev-eval");
        save::save_model(&self.net, self.source, &dir)?;
        let scores = (dev.score)(&dir, dev.file, epoch, step)?;
        let line = serde_json::to_string(&scores).expect("scores serialise");
        append_line(&self.out.join(DEV_LOG_FILE), &line)?;
        if state.best.as_ref().is_none_or(|b| scores.key() > b.key()) {
            let text = serde_json::to_vec_pretty(&scores).expect("scores serialise");
            let scores_path = dir.join("dev-scores.json");
            lector_index::write_durably(&scores_path, &text).map_err(io_err(&scores_path))?;
            replace_dir(&dir, &save::best_dir(self.out))?;
            state.best = Some(scores.clone());
        } else {
            fs::remove_dir_all(&dir).map_err(io_err(&dir))?;
        }
        Ok(scores)
    }
}

fn adamw_config(schedule: &Schedule, total_steps: usize) -> AdamWConfig {
    AdamWConfig {
        lr: schedule.lr,
        beta1: 0.9,
        beta2: 0.999,
        eps: 1e-8,
        weight_decay: schedule.weight_decay,
        warmup_steps: (schedule.warmup_ratio * total_steps as f64).round() as usize,
        total_steps,
        max_grad_norm: schedule.max_grad_norm,
    }
}

/// Back-propagates `loss`, adds every parameter's gradient to `grads`, returns the loss.
fn backward(net: &Network, loss: &Tensor, grads: &mut [Vec<f32>]) -> Result<f64> {
    let gradients = loss.backward()?;
    for (sum, var) in grads.iter_mut().zip(&net.params.vars) {
        if let Some(g) = gradients.get(var) {
            let g = g.flatten_all()?.to_vec1::<f32>()?;
            sum.iter_mut().zip(g).for_each(|(s, g)| *s += g);
        }
    }
    Ok(loss.to_scalar::<f32>()? as f64)
}

/// How many optimiser steps each epoch holds. Epochs are planned one by one: packing units of
/// different sizes (a question's windows, with shared normalisation) in another order can give
/// another number of batches, so epochs may differ in length.
struct StepLayout {
    steps: Vec<usize>,
}

impl StepLayout {
    fn new(units: &[Vec<u32>], schedule: &Schedule) -> Self {
        let steps = (0..schedule.epochs)
            .map(|epoch| {
                plan_epoch(units, schedule, epoch)
                    .len()
                    .div_ceil(schedule.accumulation)
            })
            .collect();
        Self { steps }
    }

    /// Steps of all epochs together.
    fn total(&self) -> usize {
        self.steps.iter().sum()
    }

    /// The epoch of optimiser step `step` (0-based) and the step's index within it.
    fn locate(&self, mut step: usize) -> (usize, usize) {
        for (epoch, &steps) in self.steps.iter().enumerate() {
            if step < steps {
                return (epoch, step);
            }
            step -= steps;
        }
        panic!("step beyond the last epoch (the loop stops at the total)")
    }
}

/// The batches of `epoch`: the units in a seeded order, packed up to `batch_size` items (a unit
/// larger than that is a batch of its own).
fn plan_epoch(units: &[Vec<u32>], schedule: &Schedule, epoch: usize) -> Vec<Vec<u32>> {
    let mut order: Vec<usize> = (0..units.len()).collect();
    Rng::stream(schedule.seed, rng::ORDER, epoch as u64).shuffle(&mut order);
    let mut batches: Vec<Vec<u32>> = Vec::new();
    let mut current: Vec<u32> = Vec::new();
    for u in order {
        let unit = &units[u];
        if !current.is_empty() && current.len() + unit.len() > schedule.batch_size {
            batches.push(std::mem::take(&mut current));
        }
        current.extend(unit);
    }
    if !current.is_empty() {
        batches.push(current);
    }
    batches
}

/// Moves `from` to `to`, replacing `to` (which stays whole until the rename).
fn replace_dir(from: &Path, to: &Path) -> Result<()> {
    let old = to.with_extension("old");
    if to.exists() {
        if old.exists() {
            fs::remove_dir_all(&old).map_err(io_err(&old))?;
        }
        fs::rename(to, &old).map_err(io_err(to))?;
    }
    fs::rename(from, to).map_err(io_err(from))?;
    if old.exists() {
        fs::remove_dir_all(&old).map_err(io_err(&old))?;
    }
    Ok(())
}

fn append_line(path: &Path, line: &str) -> Result<()> {
    let mut file = fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(io_err(path))?;
    writeln!(file, "{line}").map_err(io_err(path))
}

/// Drops log lines of steps after `step` (written before an interruption, redone on resume).
fn truncate_log(path: &Path, step: usize) -> Result<()> {
    let text = fs::read_to_string(path).unwrap_or_default();
    let kept: String = text
        .lines()
        .filter(|line| serde_json::from_str::<StepLog>(line).is_ok_and(|l| l.step <= step))
        .map(|line| format!("{line}\n"))
        .collect();
    lector_index::write_durably(path, kept.as_bytes()).map_err(io_err(path))
}
