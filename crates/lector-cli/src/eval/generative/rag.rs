//! `lector eval generative --squad DATA.json --retrieve`: retrieval-augmented generation end to
//! end. The run is `lector_pipeline::lab::rag`'s; this parses the arguments and renders the
//! report (figures with intervals, counts, and the per-question records of `--per-question`).

use super::super::odqa as odqa_cli;
use super::GenerativeArgs;
use crate::search::{notify, RerankOptions, RetrievalOptions};
use crate::table::{fmt2, print_table};
use anyhow::{bail, Context, Result};
use clap::{Args, ValueEnum};
use lector_eval::stats::Bootstrap;
use lector_generate::grounded::PassageOrder;
use lector_pipeline::lab::rag::{self, BertScoreModel};
use std::path::PathBuf;

/// The options of a retrieval-augmented run (all need `--retrieve`).
#[derive(Args)]
pub struct RagArgs {
    /// Retrieve the passages instead of giving the gold paragraph: index the file's paragraphs,
    /// keep unanswerable questions, answer from the top --k passages.
    #[arg(long, requires = "squad", conflicts_with = "closed_book")]
    pub retrieve: bool,
    /// Index directory the paragraphs are added to (kept afterwards) [default: a temporary one].
    #[arg(long, value_name = "DIR", requires = "retrieve")]
    index: Option<PathBuf>,
    /// Passages retrieved per question (fewer are shown when the context window is full).
    #[arg(value_parser = crate::values::at_least_one, long, default_value_t = 5, requires = "retrieve")]
    k: usize,
    /// Retrieval options (dense and hybrid embed the paragraphs).
    #[command(flatten)]
    retrieval: RetrievalOptions,
    #[command(flatten)]
    rerank: RerankOptions,
    /// How the shown passages are placed in the prompt.
    #[arg(long, value_enum, default_value_t = OrderArg::Edges, requires = "retrieve")]
    order: OrderArg,
    /// Keep the paragraphs of every N-th article out of the index, so that their questions ask
    /// for what the corpus does not hold (unanswerable, unless a gold answer appears in an
    /// indexed paragraph).
    #[arg(long, value_name = "N", requires = "retrieve", value_parser = crate::values::at_least_one)]
    withhold_every: Option<usize>,
    /// BERTScore F1 of the short answer against the golds with this encoder checkpoint
    /// (as `lector eval bertscore --model`, no idf, no baseline).
    #[arg(long, value_name = "DIR", requires = "retrieve")]
    bertscore_model: Option<PathBuf>,
    /// The encoder layer BERTScore matches [default: the last].
    #[arg(long, value_name = "N", requires = "bertscore_model")]
    bertscore_layer: Option<usize>,
    #[command(flatten)]
    pub judge: crate::generate::JudgeModelArgs,
    /// Let the judge (--judge-model or --judge-endpoint) also decide each claim of each answer
    /// against its passage, instead of the lexical claim checker: faithfulness, citations and
    /// unsupported answers are then the judge's.
    #[arg(long, requires = "retrieve")]
    judge_claims: bool,
    /// Bootstrap resamples for the intervals (seed 0: reproducible).
    #[arg(value_parser = crate::values::at_least_one, long, default_value_t = 1000)]
    resamples: usize,
    /// Confidence level of the intervals.
    #[arg(long, default_value_t = 0.95, value_parser = crate::eval::parse_confidence)]
    confidence: f64,
}

/// `--order` on the command line.
#[derive(Clone, Copy, ValueEnum)]
enum OrderArg {
    /// Strongest passages first and last ("lost in the middle" placement).
    Edges,
    /// Retrieval rank order.
    Rank,
}

impl From<OrderArg> for PassageOrder {
    fn from(o: OrderArg) -> PassageOrder {
        match o {
            OrderArg::Edges => PassageOrder::Edges,
            OrderArg::Rank => PassageOrder::Rank,
        }
    }
}

pub fn run(args: &GenerativeArgs) -> Result<()> {
    let rag_args = &args.rag;
    let path = args.squad.as_deref().context("--retrieve needs --squad")?;
    let (index_dir, _temp) = odqa_cli::squad_index_dir(rag_args.index.as_deref())?;
    let options = rag::Options {
        limit: args.limit,
        withhold_every: rag_args.withhold_every,
        k: rag_args.k,
        order: rag_args.order.into(),
        retrieval: rag_args.retrieval.config(),
        rerank: rag_args.rerank.config(),
        bertscore: rag_args.bertscore_model.clone().map(|dir| BertScoreModel {
            dir,
            layer: rag_args.bertscore_layer,
        }),
        judge_claims: rag_args.judge_claims,
        bootstrap: Bootstrap {
            resamples: rag_args.resamples,
            confidence: rag_args.confidence,
            seed: 0,
        },
    };
    if rag_args.judge_claims && !rag_args.judge.is_given() {
        bail!("--judge-claims needs --judge-model or --judge-endpoint");
    }
    let prompting = args.prompt.load()?;
    let generation = args.generator.options_for(&prompting)?;
    let generator = args.generator.load()?;
    let judge = rag_args.judge.load()?;
    let models = rag::Models {
        generator: generator.as_ref(),
        generation: &generation,
        prompting: &prompting,
        judge: judge.as_deref(),
    };
    let bar = odqa_cli::progress_bar(0);
    let report = rag::run(
        path,
        &index_dir,
        &options,
        &models,
        &notify,
        &mut |step, done, total| {
            bar.set_message(step.name());
            bar.set_length(total as u64);
            bar.set_position(done as u64);
        },
    )?;
    bar.finish_and_clear();
    eprintln!(
        "index {}: {} documents, {} passages",
        index_dir.display(),
        report.documents,
        report.passages
    );
    if let Some(out) = &args.per_question {
        super::super::write_jsonl(out, &report.per_question)?;
    }
    print_report(args.json, &report)
}

fn print_report(json: bool, r: &rag::Report) -> Result<()> {
    if json {
        println!("{}", serde_json::to_string_pretty(&r.to_json())?);
        return Ok(());
    }
    println!(
        "{} questions ({} unanswerable, {} of them withheld from the index) over {} documents \
         ({} passages); {}, k = {}, order {}; generator {} ({:.1} s, {:.1} generated tokens/s)",
        r.questions,
        r.unanswerable,
        r.withheld,
        r.documents,
        r.passages,
        r.mode,
        r.k,
        r.order.name(),
        r.generator,
        r.seconds,
        r.generated_tokens_per_second
    );
    let ci = format!("{:.0}% CI", r.confidence * 100.0);
    let rows: Vec<Vec<String>> = r
        .figures
        .iter()
        .map(|f| {
            let i = f.interval;
            vec![
                f.name.clone(),
                fmt2(i.mean),
                format!("[{}, {}]", fmt2(i.low), fmt2(i.high)),
                f.n.to_string(),
            ]
        })
        .collect();
    print_table(&["metric (%)", "value", &ci, "n"], &rows);
    println!();
    let rows: Vec<Vec<String>> = r
        .counts
        .iter()
        .map(|(name, c)| vec![name.to_string(), c.to_string()])
        .collect();
    print_table(&["count", "n"], &rows);
    for (key, value) in &r.extras {
        println!("{key}: {value}");
    }
    Ok(())
}
