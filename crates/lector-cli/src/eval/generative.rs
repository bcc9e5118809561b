//! `lector eval generative`: generated answers scored like extracted ones, side by side with the
//! extractive reader on the same questions.
//!
//! - `--squad DATA.json`: open book, each answerable question with its gold paragraph as the
//!   only passage (`[1]`), so the score measures reading, not retrieval; the reader reads the
//!   same paragraph.
//! - `--squad DATA.json --retrieve`: the real path ([`rag`]): the file's paragraphs indexed,
//!   every question (unanswerable ones kept) answered from the top `--k` retrieved passages,
//!   ordered (`--order`), fitted to the context window; correctness, faithfulness, citations,
//!   refusal and retrieval figures with bootstrap intervals.
//! - `--questions NQ.jsonl --closed-book`: the question alone (the model's own knowledge).
//!
//! Metrics: EM and F1 (official SQuAD rules) and ROUGE-L F of the short answer (the answer's
//! first sentence without citations; empty for a refusal); refusal rate; citation precision
//! (valid citations of the gold passage over all citations; open book); answers citing anything;
//! answers with a sentence below the word-overlap bar; faithfulness: claims the claim checker
//! finds supported, and answers with an unsupported claim.

use super::odqa::{open_questions, squad_questions};
use crate::generate::{GeneratorArgs, PromptArgs};
use crate::table::print_table;
use anyhow::{bail, Context, Result};
use clap::Args;
use lector_generate::evaluate::Summary;
use lector_pipeline::lab::generative::{self, Step};
use lector_reader::Reader;
use serde_json::Value;
use std::path::PathBuf;

mod rag;

#[derive(Args)]
pub struct GenerativeArgs {
    /// SQuAD dataset: open book, every answerable question with its gold paragraph (with
    /// --retrieve: every question, from retrieved passages).
    #[arg(
        long,
        required_unless_present = "questions",
        conflicts_with = "questions"
    )]
    squad: Option<PathBuf>,
    /// Questions with answers and no passages (NQ-open JSON lines `{"question", "answer": [..]}`); needs --closed-book.
    #[arg(long)]
    questions: Option<PathBuf>,
    /// Ask the question alone, without passages.
    #[arg(long)]
    closed_book: bool,
    /// Only the first N questions.
    #[arg(long, value_name = "N")]
    limit: Option<usize>,
    /// Reader checkpoint for the extractive comparison [default: the shipped reader].
    #[arg(long, value_name = "DIR")]
    model: Option<PathBuf>,
    /// Skip the extractive comparison.
    #[arg(long)]
    no_reader: bool,
    /// Write one JSON line per question (answers, scores, citations, flags).
    #[arg(long, value_name = "FILE")]
    per_question: Option<PathBuf>,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    generator: GeneratorArgs,
    #[command(flatten)]
    prompt: PromptArgs,
    #[command(flatten)]
    rag: rag::RagArgs,
}

pub fn run(args: &GenerativeArgs) -> Result<()> {
    if args.rag.retrieve {
        return rag::run(args);
    }
    let (dataset, open_book) = match (&args.squad, &args.questions) {
        (Some(path), _) => (squad_questions(path, args.limit)?, !args.closed_book),
        (None, Some(path)) if args.closed_book => (open_questions(path, args.limit)?, false),
        (None, Some(_)) => bail!("--questions has no passages to read: add --closed-book"),
        (None, None) => bail!("give --squad DATA.json, or --questions FILE --closed-book"),
    };
    let prompting = args.prompt.load()?;
    let generation = args.generator.options_for(&prompting)?;
    let generator = args.generator.load()?;
    let reader = match args.no_reader || !open_book {
        true => None,
        false => {
            let dir = lector_models::registry::resolve_reader(args.model.as_deref())?;
            Some(
                Reader::load(&dir)
                    .with_context(|| format!("loading the reader from {}", dir.display()))?,
            )
        }
    };
    let judge = args.rag.judge.load()?;
    let models = generative::Models {
        generator: generator.as_ref(),
        generation: &generation,
        prompting: &prompting,
        reader: reader.as_ref(),
        judge: judge.as_deref(),
    };
    let bar = super::odqa::progress_bar(0);
    let report = generative::run(&dataset, open_book, &models, &mut |step, done, total| {
        bar.set_message(match step {
            Step::Generate => "questions answered",
            Step::Read => "gold paragraphs read",
            Step::JudgeEquivalence => "answers judged for equivalence",
        });
        bar.set_length(total as u64);
        bar.set_position(done as u64);
    })?;
    bar.finish_and_clear();
    if let Some(path) = &args.per_question {
        super::write_jsonl(path, &report.per_question)?;
    }
    print_report(
        args.json,
        &report.json,
        &report.generative,
        report.extractive.as_ref(),
    )
}

fn print_report(json: bool, report: &Value, g: &Summary, e: Option<&Summary>) -> Result<()> {
    if json {
        println!("{}", serde_json::to_string_pretty(report)?);
        return Ok(());
    }
    println!(
        "{} questions, {}, generator {}, prompt {} ({:.1} s, {:.1} generated tokens/s)",
        report["questions"],
        if report["mode"] == "open_book" {
            "open book (gold paragraph)"
        } else {
            "closed book"
        },
        report["generator"].as_str().unwrap_or_default(),
        report["prompt"].as_str().unwrap_or_default(),
        report["seconds"].as_f64().unwrap_or_default(),
        report["generated_tokens_per_second"]
            .as_f64()
            .unwrap_or_default(),
    );
    let opt = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.2}"));
    let rows: Vec<Vec<String>> = [
        ("exact_match", Some(g.em), e.map(|e| e.em)),
        ("f1", Some(g.f1), e.map(|e| e.f1)),
        ("rouge_l_f", Some(g.rouge_l), e.map(|e| e.rouge_l)),
        ("equivalent_%", Some(g.equivalent), e.map(|e| e.equivalent)),
        ("key_fact_%", Some(g.key_fact), e.map(|e| e.key_fact)),
        (
            "answer_tokens",
            Some(g.answer_tokens),
            e.map(|e| e.answer_tokens),
        ),
        (
            "refusal_rate_%",
            Some(g.refusal_rate),
            e.map(|e| e.refusal_rate),
        ),
        ("citation_precision_%", g.citation_precision, None),
        ("answers_citing_%", g.citing, None),
        ("answers_flagged_%", g.flagged, None),
        ("claims_supported_%", g.claims_supported, None),
        ("answers_unsupported_claim_%", g.unsupported_claim, None),
    ]
    .into_iter()
    .map(|(name, gv, ev)| vec![name.to_string(), opt(gv), opt(ev)])
    .collect();
    print_table(&["metric", "generative", "extractive"], &rows);
    let judged = &report["judge_equivalence"];
    if judged.is_object() {
        println!(
            "judge {} (equivalence, both orders; apart from the rules): equivalent {:.2}% of {} answers, {} inconsistent, {} unparseable; kappa with exact match {}, rule equivalence {}, key fact {}",
            judged["model"].as_str().unwrap_or_default(),
            judged["equivalent"].as_f64().unwrap_or_default(),
            judged["questions"],
            judged["inconsistent"],
            judged["unparseable"],
            super::fmt_kappa(&judged["kappa_with"]["exact_match"]),
            super::fmt_kappa(&judged["kappa_with"]["equivalent"]),
            super::fmt_kappa(&judged["kappa_with"]["key_fact"]),
        );
    }
    Ok(())
}
