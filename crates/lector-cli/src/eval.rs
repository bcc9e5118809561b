//! `lector eval ...`: scoring predictions with the lector-eval library.

use crate::table::{fmt2, print_table};
use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use lector_eval::squad::{self, NoAnswer};
use lector_eval::stats::{Bootstrap, Interval};
use lector_eval::summary::{self, Intervals};
use lector_eval::{breakdown, paired, retrieval, rouge};
use lector_pipeline::lab::retrieval::Scored;
use serde_json::{json, Map, Value};
use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};

mod adversarial;
mod bertscore;
mod canary;
mod faithfulness;
mod generative;
mod hotpot;
mod judge;
pub(crate) mod odqa;
mod with_index;

#[derive(Subcommand)]
pub enum EvalCommand {
    /// SQuAD EM/F1, a drop-in for the official evaluate-v1.1.py / evaluate-v2.0.py.
    Squad(SquadArgs),
    /// ROUGE-1/2/L/Lsum of predictions against references, identical to Google's rouge-score.
    Rouge(RougeArgs),
    /// Retrieval metrics: trec_eval-compatible nDCG/Recall/P/MRR/MAP from a run and qrels, or
    /// DPR-style answer-containment Recall@k from ranked passages.
    Retrieval(RetrievalArgs),
    /// Open-domain QA end to end: index a SQuAD file's paragraphs (or use --index), ask every
    /// question, report retrieval recall, reader and end-to-end EM/F1, and where answers are lost.
    Odqa(odqa::OdqaArgs),
    /// The reader with and without adversarial distractor sentences (AddSent/AddAny-style, Jia
    /// and Liang 2017) in each context: EM/F1 before and after, the drop, answers taken from the
    /// distractor.
    Adversarial(adversarial::AdversarialArgs),
    /// Generative QA: generated answers (open book on SQuAD gold paragraphs, or closed book)
    /// scored with EM/F1, ROUGE-L, citations and refusals, beside the extractive reader.
    Generative(Box<generative::GenerativeArgs>),
    /// Multi-hop QA on a HotpotQA file (distractor or open setting): the official answer,
    /// supporting-fact and joint EM/F1, both-gold-paragraph recall@k, by question type.
    Hotpot(hotpot::HotpotArgs),
    /// Canary: re-ask a labelled question set (SQuAD file) against an index or a running server
    /// and exit 1 when F1 or the abstention rate moved beyond a bound from a stored baseline.
    Canary(canary::CanaryArgs),
    /// Faithfulness checks on a labelled claim set (JSON lines: passage, claim, label, kind):
    /// AUROC and accuracy of the claim checker and of word overlap, per kind of claim.
    Faithfulness(faithfulness::FaithfulnessArgs),
    /// BERTScore P/R/F1 of candidates against references with a local encoder (token states at a
    /// layer, greedy cosine matching), identical to the `bert-score` package.
    Bertscore(bertscore::BertscoreArgs),
    /// LLM as judge (local GGUF or an OpenAI-compatible endpoint) of answers in JSON lines:
    /// correctness, faithfulness, or pairwise in both orders; agreement with labels (kappa),
    /// position and verbosity bias, unparseable replies, cached replies, tokens and time.
    Judge(judge::JudgeArgs),
    /// Compare two systems' per-question scores: difference, paired-bootstrap CI, randomisation p-value.
    Compare(CompareArgs),
    /// Rule-based answer equivalence of free-form answers (numbers, dates, units, acronyms) and
    /// key-fact match; with people's labels, each verdict's precision, recall and kappa.
    Equivalence(EquivalenceArgs),
}

/// Bootstrap settings shared by the subcommands that report intervals.
#[derive(Args, Clone, Copy)]
pub struct BootstrapArgs {
    /// Bootstrap resamples for confidence intervals.
    #[arg(value_parser = crate::values::at_least_one, long, default_value_t = 1000)]
    resamples: usize,
    /// Confidence level of the intervals.
    #[arg(long, default_value_t = 0.95, value_parser = parse_confidence)]
    confidence: f64,
    /// Seed of the resampling (results are reproducible for a given seed).
    #[arg(long, default_value_t = 0)]
    seed: u64,
}

impl BootstrapArgs {
    fn settings(self) -> Bootstrap {
        Bootstrap {
            resamples: self.resamples,
            confidence: self.confidence,
            seed: self.seed,
        }
    }
}

fn parse_confidence(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(c) if c > 0.0 && c < 1.0 => Ok(c),
        _ => Err(format!("`{text}` is not a confidence level in (0, 1)")),
    }
}

/// Score breakdowns shared by `eval squad` and `eval odqa`.
#[derive(Args, Clone)]
pub struct BreakdownArgs {
    /// Also report EM/F1 by `qtype` (what, who, when, where, why, how, how many, which, other)
    /// and/or by question-context lexical `overlap` (quantile bins and the low-overlap subset),
    /// each group with its interval. Comma-separated or repeated.
    #[arg(long, value_delimiter = ',', value_name = "FACET")]
    by: Vec<breakdown::Facet>,
    /// Quantile bins of the overlap breakdown.
    #[arg(value_parser = crate::values::at_least_one, long, default_value_t = 4)]
    overlap_bins: usize,
    /// Questions with overlap below this form the low-overlap group.
    #[arg(value_parser = crate::values::non_negative, long, default_value_t = 0.5)]
    low_overlap: f64,
}

impl BreakdownArgs {
    /// The requested breakdowns of `scores` (one per question of `questions`).
    pub(crate) fn compute(
        &self,
        questions: &[squad::Question],
        scores: &[squad::QuestionScore],
        settings: &Bootstrap,
    ) -> Result<Vec<breakdown::Breakdown>> {
        let bins = breakdown::OverlapBins {
            bins: self.overlap_bins,
            low: self.low_overlap,
        };
        Ok(breakdown::breakdowns(
            &self.by, questions, scores, bins, settings,
        )?)
    }
}

/// Prints each breakdown as a table after a blank line.
pub(crate) fn print_breakdowns(breakdowns: &[breakdown::Breakdown]) {
    for b in breakdowns {
        println!();
        print_table(&b.header(), &b.rows());
    }
}

/// Output options shared by the scoring subcommands.
#[derive(Args)]
pub struct OutputArgs {
    /// Write a self-contained HTML report.
    #[arg(long)]
    html: Option<PathBuf>,
    /// Print JSON instead of a table (for `squad`: the official keys plus `intervals`).
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    bootstrap: BootstrapArgs,
}

#[derive(Args)]
pub struct SquadArgs {
    /// SQuAD dataset file (v1.1 or v2.0 format; its `version` picks the official rules), or an
    /// MRQA file (`.jsonl` / `.jsonl.gz`, scored as mrqa_official_eval.py does).
    data: PathBuf,
    /// Predictions: {"question id": "answer", ...}; "" means no answer.
    predictions: PathBuf,
    /// No-answer probabilities: {"question id": p, ...} with p in [0, 1] (v2.0 only).
    #[arg(long, short = 'n')]
    na_prob_file: Option<PathBuf>,
    /// Predict "no answer" when the no-answer probability is above this.
    #[arg(value_parser = crate::values::non_negative, long, short = 't', default_value_t = 1.0)]
    na_prob_thresh: f64,
    /// Write the official JSON (the same keys and values as the official script) to this file.
    #[arg(long, short = 'o')]
    out_file: Option<PathBuf>,
    /// Write one JSON line per question (id, prediction, best gold, em, f1, has_ans, na_prob).
    #[arg(long)]
    per_question: Option<PathBuf>,
    /// Leave questions without a prediction out of the totals instead of scoring them 0 (the
    /// MRQA script's flag).
    #[arg(long)]
    skip_no_answer: bool,
    #[command(flatten)]
    breakdown: BreakdownArgs,
    #[command(flatten)]
    output: OutputArgs,
}

#[derive(Args)]
pub struct CompareArgs {
    /// Per-question scores of system A (JSON lines with `id` and the metric, e.g. from --per-question).
    a: PathBuf,
    /// Per-question scores of system B, on the same questions.
    b: PathBuf,
    /// The per-question field to compare.
    #[arg(long, default_value = "f1")]
    metric: String,
    /// Approximate-randomisation trials for the p-value.
    #[arg(value_parser = crate::values::at_least_one, long, default_value_t = 10_000)]
    trials: usize,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    bootstrap: BootstrapArgs,
}

#[derive(Args)]
pub struct EquivalenceArgs {
    /// JSON lines `{"answer", "golds": [..], "question"?, "context"?, "label"?}`.
    items: PathBuf,
    /// Write one JSON line per item with its verdicts.
    #[arg(long)]
    per_item: Option<PathBuf>,
    /// Print JSON instead of tables.
    #[arg(long)]
    json: bool,
    /// A judge model's equivalence verdict too (both orders), reported apart from the rules,
    /// with its agreement with the labels and with the rules.
    #[command(flatten)]
    judge: crate::generate::JudgeModelArgs,
}

#[derive(Args)]
pub struct RougeArgs {
    /// JSON lines `{id, prediction, references: [..]}`; each item scores against its best reference.
    input: PathBuf,
    /// Porter-stem tokens longer than 3 characters (rouge-score's `use_stemmer=True`).
    #[arg(long)]
    stem: bool,
    /// Write one JSON line per item with its scores.
    #[arg(long)]
    per_item: Option<PathBuf>,
    #[command(flatten)]
    output: OutputArgs,
}

#[derive(Args)]
pub struct RetrievalArgs {
    /// TREC run file (`qid Q0 docid rank score tag`).
    #[arg(long, requires = "qrels", conflicts_with = "answers")]
    run: Option<PathBuf>,
    /// Relevance judgements: TREC qrels (`qid 0 docid rel`) or BEIR tsv with a header.
    #[arg(long)]
    qrels: Option<PathBuf>,
    /// Answer-containment mode: JSON lines `{qid, answers: [..], passages: [{id, text}, ..]}` in rank order.
    #[arg(long, required_unless_present_any = ["run", "index"], conflicts_with = "index")]
    answers: Option<PathBuf>,
    /// Evaluate lector's own retrieval: run --queries against this index (with --qrels: document
    /// ranking by best passage; without: answer containment of the ranked passages). A Redis
    /// store is given as its URL (`--store redis://HOST:PORT/NAME`, or `$LECTOR_STORE`'s value).
    #[arg(
        long,
        visible_alias = "store",
        requires = "queries",
        conflicts_with = "run"
    )]
    index: Option<PathBuf>,
    /// Queries for --index: JSON lines `{_id, text}` (BEIR; `id`/`qid` and `query`/`question` also
    /// read, optional `answers: [..]`), or a SQuAD dataset (.json) whose questions carry answers.
    #[arg(long, requires = "index")]
    queries: Option<PathBuf>,
    /// Retrieval options for --index.
    #[command(flatten)]
    retrieval: crate::search::RetrievalOptions,
    /// Reranking for --index: the first --rerank-depth passages are reordered by the reranker,
    /// the deeper ones follow in retrieval order.
    #[command(flatten)]
    rerank: crate::search::RerankOptions,
    /// Documents retrieved per query for --index with --qrels.
    #[arg(value_parser = crate::values::at_least_one, long, default_value_t = 1000)]
    depth: usize,
    /// Write what --index retrieved: a TREC run (with --qrels) or answer-mode JSON lines.
    #[arg(long, requires = "index")]
    run_out: Option<PathBuf>,
    /// Cutoffs for the ranking metrics.
    #[arg(long, value_delimiter = ',', default_values_t = lector_eval::retrieval::DEFAULT_KS)]
    k: Vec<usize>,
    /// Deepest k of the answer-recall curve.
    #[arg(value_parser = crate::values::at_least_one, long, default_value_t = 100)]
    max_k: usize,
    /// Write one JSON line per query with its metric values.
    #[arg(long)]
    per_query: Option<PathBuf>,
    #[command(flatten)]
    output: OutputArgs,
}

pub fn run(cmd: EvalCommand) -> Result<()> {
    match cmd {
        EvalCommand::Squad(args) => squad(args),
        EvalCommand::Rouge(args) => rouge(args),
        EvalCommand::Retrieval(args) => match (&args.run, &args.qrels, &args.answers) {
            _ if args.index.is_some() => with_index::run(&args),
            _ if args.rerank.rerank.is_some() => bail!("--rerank needs --index"),
            (Some(run), Some(qrels), _) => ranking_metrics(run, qrels, &args),
            (_, _, Some(answers)) => answer_containment(answers, &args),
            _ => bail!("give --run with --qrels, or --answers"),
        },
        EvalCommand::Compare(args) => compare(args),
        EvalCommand::Equivalence(args) => equivalence(&args),
        EvalCommand::Bertscore(args) => bertscore::run(&args),
        EvalCommand::Odqa(args) => odqa::run(&args),
        EvalCommand::Adversarial(args) => adversarial::run(&args),
        EvalCommand::Generative(args) => generative::run(&args),
        EvalCommand::Hotpot(args) => hotpot::run(&args),
        EvalCommand::Judge(args) => judge::run(&args),
        EvalCommand::Canary(args) => canary::run(&args),
        EvalCommand::Faithfulness(args) => faithfulness::run(&args),
    }
}

fn squad(args: SquadArgs) -> Result<()> {
    let mut dataset = squad::read_dataset(&args.data)?;
    let predictions = squad::read_predictions(&args.predictions)?;
    if args.skip_no_answer {
        dataset.retain_predicted(&predictions);
        if dataset.questions.is_empty() {
            bail!(
                "{}: no question of {} has a prediction",
                args.predictions.display(),
                args.data.display()
            );
        }
    }
    let na_probs = args
        .na_prob_file
        .as_deref()
        .map(squad::read_na_probs)
        .transpose()?;
    if na_probs.is_some() && dataset.version == squad::SquadVersion::V1_1 {
        eprintln!("warning: no-answer probabilities are ignored for SQuAD v1.1 data");
    }
    let no_answer = NoAnswer {
        probs: na_probs.as_ref(),
        threshold: args.na_prob_thresh,
    };
    let evaluation = squad::evaluate(&dataset, &predictions, &no_answer)?;
    warn_about_coverage(&dataset, &predictions, &evaluation.missing);

    let settings = args.output.bootstrap.settings();
    let intervals = summary::squad_intervals(&evaluation.questions, evaluation.version, &settings);
    let breakdowns =
        args.breakdown
            .compute(&dataset.questions, &evaluation.questions, &settings)?;
    if let Some(path) = &args.out_file {
        write_file(path, &serde_json::to_string(&evaluation.summary)?)?;
    }
    if let Some(path) = &args.per_question {
        write_jsonl(path, &evaluation.questions)?;
    }
    if let Some(path) = &args.output.html {
        let mut report = summary::squad_report(
            &args.data,
            &evaluation,
            &intervals,
            settings.confidence,
            args.na_prob_thresh,
        );
        breakdowns.iter().for_each(|b| b.add_to(&mut report));
        report.write(path)?;
    }
    if args.output.json {
        let mut out = evaluation.summary.clone();
        out.insert("intervals".into(), serde_json::to_value(&intervals)?);
        if !breakdowns.is_empty() {
            out.insert("breakdowns".into(), breakdown::to_json(&breakdowns));
        }
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        print_squad_table(&evaluation.summary, &intervals, settings.confidence);
        print_breakdowns(&breakdowns);
    }
    // The process ends next: freeing ~100k small strings one by one would cost more than the
    // scoring's slowest stage, so leave that to the operating system.
    std::mem::forget((dataset, predictions, evaluation));
    Ok(())
}

fn warn_about_coverage(
    dataset: &squad::Dataset,
    predictions: &squad::Predictions,
    missing: &[String],
) {
    if !missing.is_empty() {
        eprintln!(
            "warning: {} of {} questions have no prediction and score 0 (first: {})",
            missing.len(),
            dataset.questions.len(),
            missing[0]
        );
    }
    let unknown = squad::unknown_predictions(dataset, predictions);
    if !unknown.is_empty() {
        eprintln!(
            "warning: {} predictions name questions not in the dataset and are ignored (first: {})",
            unknown.len(),
            unknown[0]
        );
    }
}

fn print_squad_table(summary: &Map<String, Value>, intervals: &Intervals, confidence: f64) {
    let ci: HashMap<&str, &Interval> = intervals.iter().map(|(k, v)| (k.as_str(), v)).collect();
    let ci_header = format!("{:.0}% CI", confidence * 100.0);
    let rows: Vec<Vec<String>> = summary
        .iter()
        .map(|(key, value)| {
            let shown = match value.as_u64() {
                Some(n) if key.ends_with("total") => n.to_string(),
                // Thresholds are probabilities that can be tiny: show them in full precision.
                _ if key.ends_with("_thresh") => value.to_string(),
                _ => value
                    .as_f64()
                    .map_or_else(|| value.to_string(), |v| format!("{v:.4}")),
            };
            let interval = ci.get(key.as_str()).map_or(String::new(), |i| {
                format!("[{}, {}]", fmt2(i.low), fmt2(i.high))
            });
            vec![key.clone(), shown, interval]
        })
        .collect();
    print_table(&["metric", "value", &ci_header], &rows);
}

/// A kappa from a JSON report: three decimals, `-` when undefined.
pub(crate) fn fmt_kappa(kappa: &Value) -> String {
    kappa.as_f64().map_or("-".into(), |k| format!("{k:.3}"))
}

fn equivalence(args: &EquivalenceArgs) -> Result<()> {
    let items: Vec<lector_eval::equivalence::Item> = lector_eval::input::read_jsonl(&args.items)?;
    if items.is_empty() {
        bail!("{}: no items", args.items.display());
    }
    let judge = args.judge.load()?;
    let bar = odqa::progress_bar(items.len() as u64);
    bar.set_message("items judged");
    let report =
        lector_pipeline::lab::equivalence::run(&items, judge.as_deref(), &mut |done, _| {
            bar.set_position(done as u64)
        })?;
    bar.finish_and_clear();
    if let Some(path) = &args.per_item {
        write_jsonl(path, &report.per_item)?;
    }
    let summary = &report.summary;
    if args.json {
        println!("{}", serde_json::to_string_pretty(summary)?);
        return Ok(());
    }
    println!(
        "{} items: exact match {:.1}%, equivalent {:.1}%, key fact {:.1}%, {:.1} tokens per answer",
        items.len(),
        summary["exact_match"].as_f64().unwrap_or(0.0),
        summary["equivalent"].as_f64().unwrap_or(0.0),
        summary["key_fact"].as_f64().unwrap_or(0.0),
        summary["answer_tokens"].as_f64().unwrap_or(0.0),
    );
    let judge = &summary["judge_equivalence"];
    if judge.is_object() {
        println!(
            "judge {} (both orders): equivalent {:.1}%, {} inconsistent, {} unparseable; kappa with exact match {}, rule equivalence {}, key fact {}",
            judge["model"].as_str().unwrap_or_default(),
            judge["equivalent"].as_f64().unwrap_or(0.0),
            judge["inconsistent"],
            judge["unparseable"],
            fmt_kappa(&judge["kappa_with"]["exact_match"]),
            fmt_kappa(&judge["kappa_with"]["equivalent"]),
            fmt_kappa(&judge["kappa_with"]["key_fact"]),
        );
    }
    if summary["labelled"] == 0 {
        return Ok(());
    }
    println!("against {} labels:", summary["labelled"]);
    let rows: Vec<Vec<String>> = report
        .agreement
        .iter()
        .map(|a| {
            vec![
                a.verdict.to_string(),
                a.positives.to_string(),
                a.precision.map_or("-".into(), |p| format!("{p:.3}")),
                a.recall.map_or("-".into(), |r| format!("{r:.3}")),
                format!("{:.3}", a.accuracy),
                a.kappa.map_or("-".into(), |k| format!("{k:.3}")),
            ]
        })
        .collect();
    print_table(
        &[
            "verdict",
            "said yes",
            "precision",
            "recall",
            "accuracy",
            "kappa",
        ],
        &rows,
    );
    Ok(())
}

fn rouge(args: RougeArgs) -> Result<()> {
    let items = rouge::read_items(&args.input)?;
    if items.is_empty() {
        bail!("{}: no items", args.input.display());
    }
    let scorer = rouge::RougeScorer::new(args.stem);
    let scores: Vec<rouge::RougeScores> = items
        .iter()
        .map(|i| scorer.score(&i.prediction, &i.references))
        .collect();
    let settings = args.output.bootstrap.settings();
    let intervals = summary::rouge_intervals(&scores, &settings);
    if let Some(path) = &args.per_item {
        let rows: Vec<Value> = items
            .iter()
            .zip(&scores)
            .map(|(i, s)| json!({"id": i.id, "scores": s}))
            .collect();
        write_jsonl(path, &rows)?;
    }
    if let Some(path) = &args.output.html {
        summary::rouge_report(
            &args.input,
            &scores,
            &intervals,
            settings.confidence,
            args.stem,
        )
        .write(path)?;
    }
    print_intervals(
        args.output.json,
        items.len(),
        "items",
        &intervals,
        settings.confidence,
    )
}

fn ranking_metrics(run_path: &Path, qrels_path: &Path, args: &RetrievalArgs) -> Result<()> {
    let run = retrieval::read_run(run_path)?;
    let qrels = retrieval::read_qrels(qrels_path)?;
    score_run(&run, run_path, &qrels, qrels_path, args)
}

/// Ranking metrics of `run` (read from, or produced for, `run_path`) against the qrels.
/// A run file's rankings against qrels.
fn score_run(
    run: &retrieval::Run,
    run_path: &Path,
    qrels: &retrieval::Qrels,
    qrels_path: &Path,
    args: &RetrievalArgs,
) -> Result<()> {
    let mut warnings = Vec::new();
    let settings = args.output.bootstrap.settings();
    let scored = Scored::ranking(run, qrels, &args.k, &settings, &mut warnings)
        .with_context(|| format!("{} against {}", run_path.display(), qrels_path.display()))?;
    for warning in &warnings {
        eprintln!("warning: {warning}");
    }
    show_scored(&scored, run_path, args)
}

fn answer_containment(path: &Path, args: &RetrievalArgs) -> Result<()> {
    let items = retrieval::read_answer_items(path)?;
    let scored = Scored::answers(&items, args.max_k, &args.output.bootstrap.settings())
        .with_context(|| path.display().to_string())?;
    show_scored(&scored, path, args)
}

/// Writes and prints scored retrieval: per-query records, the HTML report, the table or JSON.
fn show_scored(scored: &Scored, source: &Path, args: &RetrievalArgs) -> Result<()> {
    let confidence = args.output.bootstrap.settings().confidence;
    if let Some(out) = &args.per_query {
        write_jsonl(out, &scored.per_query())?;
    }
    if let Some(out) = &args.output.html {
        scored.html(source, confidence).write(out)?;
    }
    if args.output.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&scored.to_json(confidence))?
        );
        return Ok(());
    }
    let (count, unit) = scored.count();
    print_intervals(false, count, unit, scored.intervals(), confidence)
}

/// Metric means with intervals, as a table or JSON (`{metric: {mean, low, high}}`).
fn print_intervals(
    json: bool,
    count: usize,
    unit: &str,
    intervals: &Intervals,
    confidence: f64,
) -> Result<()> {
    if json {
        let out = summary::intervals_json(unit, count, intervals, confidence);
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(());
    }
    let rows: Vec<Vec<String>> = intervals
        .iter()
        .map(|(name, i)| {
            vec![
                name.clone(),
                format!("{:.4}", i.mean),
                format!("[{:.4}, {:.4}]", i.low, i.high),
            ]
        })
        .collect();
    println!("{count} {unit}");
    print_table(
        &["metric", "mean", &format!("{:.0}% CI", confidence * 100.0)],
        &rows,
    );
    Ok(())
}

fn compare(args: CompareArgs) -> Result<()> {
    let a = paired::read_scores(&args.a, &args.metric)?;
    let b = paired::read_scores(&args.b, &args.metric)?;
    let settings = args.bootstrap.settings();
    let result = paired::compare(
        (&args.a, &a),
        (&args.b, &b),
        &args.metric,
        &settings,
        args.trials,
    )?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&result)?);
        return Ok(());
    }
    let d = result.difference;
    print_table(
        &[
            "metric",
            "questions",
            "A",
            "B",
            "B - A",
            &format!("{:.0}% CI", settings.confidence * 100.0),
            "p-value",
        ],
        &[vec![
            args.metric.clone(),
            result.questions.to_string(),
            format!("{:.4}", result.mean_a),
            format!("{:.4}", result.mean_b),
            format!("{:+.4}", d.mean),
            format!("[{:+.4}, {:+.4}]", d.low, d.high),
            format!("{:.4}", result.p_value),
        ]],
    );
    Ok(())
}

fn write_file(path: &Path, text: &str) -> Result<()> {
    std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))
}

fn write_jsonl<T: serde::Serialize>(path: &Path, rows: &[T]) -> Result<()> {
    let file =
        std::fs::File::create(path).with_context(|| format!("cannot write {}", path.display()))?;
    let mut out = std::io::BufWriter::new(file);
    for row in rows {
        serde_json::to_writer(&mut out, row)?;
        out.write_all(b"\n")?;
    }
    out.flush()
        .with_context(|| format!("cannot write {}", path.display()))
}
