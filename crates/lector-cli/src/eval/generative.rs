//! `lector eval generative`: generated answers scored like extracted ones, side by side with the
//! extractive reader on the same questions.
//!
//! - `--squad DATA.json`: open book, each question with its gold paragraph as the only passage
//!   (`[1]`), so the score measures reading, not retrieval; the reader reads the same paragraph.
//! - `--questions NQ.jsonl --closed-book`: the question alone (the model's own knowledge).
//!
//! Metrics: EM and F1 (official SQuAD rules) and ROUGE-L F of the short answer (the answer's
//! first sentence without citations; empty for a refusal); refusal rate; citation precision
//! (valid citations of the gold passage over all citations; open book); answers citing anything;
//! answers with a sentence flagged as unsupported.

use super::odqa::{open_questions, squad_questions};
use crate::generate::GeneratorArgs;
use crate::read::run_with_progress;
use lector_pipeline::odqa::gold_queries;
use crate::table::print_table;
use anyhow::{bail, Context, Result};
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use lector_eval::rouge::RougeScorer;
use lector_eval::squad::{self, Dataset, NoAnswer};
use lector_generate::grounded::{self, Answered, Passage};
use lector_reader::{ReadParams, Reader};
use serde_json::{json, Value};
use std::ops::ControlFlow;
use std::path::PathBuf;
use std::time::Instant;

#[derive(Args)]
pub struct GenerativeArgs {
    /// SQuAD dataset: open book, every answerable question with its gold paragraph.
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
}

/// Per-system means.
#[derive(Default)]
struct Summary {
    em: f64,
    f1: f64,
    rouge_l: f64,
    refusal_rate: f64,
    citation_precision: Option<f64>,
    citing: Option<f64>,
    flagged: Option<f64>,
}

pub fn run(args: &GenerativeArgs) -> Result<()> {
    let (dataset, open_book) = match (&args.squad, &args.questions) {
        (Some(path), _) => (squad_questions(path, args.limit)?, !args.closed_book),
        (None, Some(path)) if args.closed_book => (open_questions(path, args.limit)?, false),
        (None, Some(_)) => bail!("--questions has no passages to read: add --closed-book"),
        (None, None) => bail!("give --squad DATA.json, or --questions FILE --closed-book"),
    };
    let options = args.generator.options()?;
    let generator = args.generator.load()?;
    let start = Instant::now();
    let answered = generate_all(generator.as_ref(), &dataset, open_book, &options)?;
    let seconds = start.elapsed().as_secs_f64();
    let shorts: squad::Predictions = dataset
        .questions
        .iter()
        .zip(&answered)
        .map(|(q, a)| (q.id.clone(), a.answer.short_answer.clone()))
        .collect();
    let scores = squad::evaluate(&dataset, &shorts, &NoAnswer::default())?.questions;
    let rouge = RougeScorer::new(false);
    let rouge_l = |pred: &str, golds: &[String]| rouge.score(pred, golds).rouge_l.fmeasure;
    let gen_rouge: Vec<f64> = dataset
        .questions
        .iter()
        .zip(&answered)
        .map(|(q, a)| rouge_l(&a.answer.short_answer, &q.answers))
        .collect();
    let generative = summarise(&scores, &gen_rouge, &answered, open_book);

    let reader = if args.no_reader || !open_book {
        None
    } else {
        Some(read_gold(args, &dataset)?)
    };
    let extractive = reader.as_ref().map(|(answers, scores)| {
        let rouge: Vec<f64> = dataset
            .questions
            .iter()
            .zip(answers)
            .map(|(q, a)| rouge_l(a, &q.answers))
            .collect();
        summarise(scores, &rouge, &[], false)
    });
    if let Some(path) = &args.per_question {
        let rows: Vec<Value> = dataset
            .questions
            .iter()
            .enumerate()
            .map(|(i, q)| {
                let a = &answered[i];
                let mut row = json!({
                    "id": q.id, "question": q.question, "golds": q.answers,
                    "generated": a.answer.text, "short_answer": a.answer.short_answer,
                    "em": scores[i].em, "f1": scores[i].f1, "rouge_l": gen_rouge[i],
                    "refused": a.answer.refused, "citations": a.answer.citations,
                    "invalid_citations": a.answer.invalid_citations,
                    "flagged": a.answer.flagged.iter().map(|&s| &a.answer.sentences[s].text).collect::<Vec<_>>(),
                    "finish_reason": a.generation.finish_reason,
                });
                if let Some((answers, rs)) = &reader {
                    row["reader_answer"] = answers[i].clone().into();
                    row["reader_em"] = rs[i].em.into();
                    row["reader_f1"] = rs[i].f1.into();
                }
                row
            })
            .collect();
        super::write_jsonl(path, &rows)?;
    }
    let tokens: usize = answered
        .iter()
        .map(|a| a.generation.timings.generated_tokens)
        .sum();
    let gen_ms: f64 = answered
        .iter()
        .map(|a| a.generation.timings.generate_ms)
        .sum();
    let report = Report {
        questions: dataset.questions.len(),
        open_book,
        generator: generator.name(),
        seconds,
        tokens_per_second: if gen_ms > 0.0 {
            tokens as f64 * 1000.0 / gen_ms
        } else {
            0.0
        },
    };
    print_report(args.json, &report, &generative, extractive.as_ref())
}

struct Report {
    questions: usize,
    open_book: bool,
    generator: String,
    seconds: f64,
    tokens_per_second: f64,
}

fn generate_all(
    generator: &dyn lector_generate::Generator,
    dataset: &Dataset,
    open_book: bool,
    options: &lector_generate::GenerateOptions,
) -> Result<Vec<Answered>> {
    let bar = ProgressBar::new(dataset.questions.len() as u64);
    bar.set_style(
        ProgressStyle::with_template(
            "{bar:40} {pos}/{len} questions [{elapsed_precise}<{eta_precise}]",
        )
        .expect("valid template"),
    );
    let mut out = Vec::with_capacity(dataset.questions.len());
    for q in &dataset.questions {
        let passages = [Passage {
            doc_id: q.id.clone(),
            title: Some(q.title.to_string()),
            text: q.context.to_string(),
        }];
        let passages = open_book.then_some(&passages[..]);
        let answered = grounded::answer(generator, &q.question, passages, options, &mut |_| {
            ControlFlow::Continue(())
        })
        .with_context(|| format!("question `{}`", q.id))?;
        out.push(answered);
        bar.inc(1);
    }
    bar.finish_and_clear();
    Ok(out)
}

/// The reader's answers on the gold paragraphs and their scores.
fn read_gold(
    args: &GenerativeArgs,
    dataset: &Dataset,
) -> Result<(Vec<String>, Vec<squad::QuestionScore>)> {
    let dir = lector_models::registry::resolve_reader(args.model.as_deref())?;
    let reader =
        Reader::load(&dir).with_context(|| format!("loading the reader from {}", dir.display()))?;
    let queries = gold_queries(dataset);
    let predictions = run_with_progress(&reader, &queries, &ReadParams::default())?;
    let answers: Vec<String> = predictions
        .iter()
        .map(|p| {
            p.answers
                .first()
                .map_or(String::new(), |a| a.answer.clone())
        })
        .collect();
    let map: squad::Predictions = dataset
        .questions
        .iter()
        .zip(&answers)
        .map(|(q, a)| (q.id.clone(), a.clone()))
        .collect();
    Ok((
        answers,
        squad::evaluate(dataset, &map, &NoAnswer::default())?.questions,
    ))
}

fn summarise(
    scores: &[squad::QuestionScore],
    rouge: &[f64],
    answered: &[Answered],
    open_book: bool,
) -> Summary {
    let n = scores.len().max(1) as f64;
    let mean = |v: &mut dyn Iterator<Item = f64>| v.sum::<f64>() / n;
    let mut s = Summary {
        em: 100.0 * mean(&mut scores.iter().map(|q| q.em)),
        f1: 100.0 * mean(&mut scores.iter().map(|q| q.f1)),
        rouge_l: mean(&mut rouge.iter().copied()),
        ..Summary::default()
    };
    if answered.is_empty() {
        return s;
    }
    s.refusal_rate = 100.0
        * mean(
            &mut answered
                .iter()
                .map(|a| f64::from(u8::from(a.answer.refused))),
        );
    if open_book {
        let valid: usize = answered.iter().map(|a| a.answer.citations.len()).sum();
        let all: usize = valid
            + answered
                .iter()
                .map(|a| a.answer.invalid_citations.len())
                .sum::<usize>();
        // The gold paragraph is the only passage, so every valid citation cites it.
        s.citation_precision = (all > 0).then(|| 100.0 * valid as f64 / all as f64);
        s.citing = Some(
            100.0
                * mean(
                    &mut answered
                        .iter()
                        .map(|a| f64::from(u8::from(!a.answer.citations.is_empty()))),
                ),
        );
        s.flagged = Some(
            100.0
                * mean(
                    &mut answered
                        .iter()
                        .map(|a| f64::from(u8::from(!a.answer.flagged.is_empty()))),
                ),
        );
    }
    s
}

fn print_report(json: bool, r: &Report, g: &Summary, e: Option<&Summary>) -> Result<()> {
    let value = |s: &Summary| {
        json!({
            "exact_match": s.em, "f1": s.f1, "rouge_l": s.rouge_l, "refusal_rate": s.refusal_rate,
            "citation_precision": s.citation_precision, "answers_citing": s.citing,
            "answers_flagged": s.flagged,
        })
    };
    if json {
        let out = json!({
            "questions": r.questions,
            "mode": if r.open_book { "open_book" } else { "closed_book" },
            "generator": r.generator,
            "seconds": r.seconds,
            "generated_tokens_per_second": r.tokens_per_second,
            "generative": value(g),
            "extractive": e.map(value),
        });
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(());
    }
    println!(
        "{} questions, {}, generator {} ({:.1} s, {:.1} generated tokens/s)",
        r.questions,
        if r.open_book {
            "open book (gold paragraph)"
        } else {
            "closed book"
        },
        r.generator,
        r.seconds,
        r.tokens_per_second
    );
    let opt = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.2}"));
    let rows: Vec<Vec<String>> = [
        ("exact_match", Some(g.em), e.map(|e| e.em)),
        ("f1", Some(g.f1), e.map(|e| e.f1)),
        ("rouge_l_f", Some(g.rouge_l), e.map(|e| e.rouge_l)),
        (
            "refusal_rate_%",
            Some(g.refusal_rate),
            e.map(|e| e.refusal_rate),
        ),
        ("citation_precision_%", g.citation_precision, None),
        ("answers_citing_%", g.citing, None),
        ("answers_flagged_%", g.flagged, None),
    ]
    .into_iter()
    .map(|(name, gv, ev)| vec![name.to_string(), opt(gv), opt(ev)])
    .collect();
    print_table(&["metric", "generative", "extractive"], &rows);
    Ok(())
}
