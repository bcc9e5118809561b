//! Generative QA evaluated (`lector eval generative`): answers generated open book (from the gold
//! paragraph) or closed book, scored with SQuAD EM/F1 and ROUGE-L, with refusals and citations.

use crate::grounded::{self, Answered, Passage};
use crate::{Error, GenerateOptions, Generator, Result};
use lector_eval::rouge::RougeScorer;
use lector_eval::squad::{self, Dataset, NoAnswer, QuestionScore};
use serde_json::{json, Value};
use std::ops::ControlFlow;

/// Per-system means, in percent (ROUGE-L as a fraction).
#[derive(Debug, Clone, Default)]
pub struct Summary {
    pub em: f64,
    pub f1: f64,
    pub rouge_l: f64,
    pub refusal_rate: f64,
    /// Valid citations among all citations (open book only).
    pub citation_precision: Option<f64>,
    /// Answers that cite at least one passage (open book only).
    pub citing: Option<f64>,
    /// Answers with a sentence the support check flags (open book only).
    pub flagged: Option<f64>,
}

impl Summary {
    /// The summary as JSON, keyed as `eval generative --json` prints it.
    pub fn to_json(&self) -> Value {
        json!({
            "exact_match": self.em, "f1": self.f1, "rouge_l": self.rouge_l,
            "refusal_rate": self.refusal_rate, "citation_precision": self.citation_precision,
            "answers_citing": self.citing, "answers_flagged": self.flagged,
        })
    }
}

/// Answers every question of `dataset` in order: from its gold paragraph (`open_book`) or from
/// the model alone. `on_done` is called after each question.
pub fn generate_all(
    generator: &dyn Generator,
    dataset: &Dataset,
    open_book: bool,
    options: &GenerateOptions,
    on_done: &mut dyn FnMut(),
) -> Result<Vec<Answered>> {
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
        .map_err(|e| Error::Question {
            id: q.id.clone(),
            source: Box::new(e),
        })?;
        out.push(answered);
        on_done();
    }
    Ok(out)
}

/// Answers scored against `dataset`'s gold answers: SQuAD scores and ROUGE-L F per question.
pub fn score_answers(
    dataset: &Dataset,
    answers: &[&str],
) -> Result<(Vec<QuestionScore>, Vec<f64>)> {
    let predictions: squad::Predictions = dataset
        .questions
        .iter()
        .zip(answers)
        .map(|(q, a)| (q.id.clone(), a.to_string()))
        .collect();
    let scores = squad::evaluate(dataset, &predictions, &NoAnswer::default())?.questions;
    let rouge = RougeScorer::new(false);
    let rouge_l = dataset
        .questions
        .iter()
        .zip(answers)
        .map(|(q, a)| rouge.score(a, &q.answers).rouge_l.fmeasure)
        .collect();
    Ok((scores, rouge_l))
}

/// Means over questions; refusals and citations from `answered` (empty for a system that does
/// not generate, such as the extractive reader).
pub fn summarise(
    scores: &[QuestionScore],
    rouge: &[f64],
    answered: &[Answered],
    open_book: bool,
) -> Summary {
    let n = scores.len().max(1) as f64;
    let mean = |v: &mut dyn Iterator<Item = f64>| v.sum::<f64>() / n;
    let share = |f: &dyn Fn(&Answered) -> bool| {
        100.0 * mean(&mut answered.iter().map(|a| f64::from(u8::from(f(a)))))
    };
    let mut s = Summary {
        em: 100.0 * mean(&mut scores.iter().map(|q| q.em)),
        f1: 100.0 * mean(&mut scores.iter().map(|q| q.f1)),
        rouge_l: mean(&mut rouge.iter().copied()),
        ..Summary::default()
    };
    if answered.is_empty() {
        return s;
    }
    s.refusal_rate = share(&|a| a.answer.refused);
    if open_book {
        let valid: usize = answered.iter().map(|a| a.answer.citations.len()).sum();
        let invalid: usize = answered
            .iter()
            .map(|a| a.answer.invalid_citations.len())
            .sum();
        // The gold paragraph is the only passage, so every valid citation cites it.
        s.citation_precision =
            (valid + invalid > 0).then(|| 100.0 * valid as f64 / (valid + invalid) as f64);
        s.citing = Some(share(&|a| !a.answer.citations.is_empty()));
        s.flagged = Some(share(&|a| !a.answer.flagged.is_empty()));
    }
    s
}

/// One row per question: the generated answer, its scores, refusal, citations and flags.
pub fn per_question(
    dataset: &Dataset,
    answered: &[Answered],
    scores: &[QuestionScore],
    rouge_l: &[f64],
) -> Vec<Value> {
    dataset
        .questions
        .iter()
        .enumerate()
        .map(|(i, q)| {
            let a = &answered[i];
            json!({
                "id": q.id, "question": q.question, "golds": q.answers,
                "generated": a.answer.text, "short_answer": a.answer.short_answer,
                "em": scores[i].em, "f1": scores[i].f1, "rouge_l": rouge_l[i],
                "refused": a.answer.refused, "citations": a.answer.citations,
                "invalid_citations": a.answer.invalid_citations,
                "flagged": a.answer.flagged.iter().map(|&s| &a.answer.sentences[s].text).collect::<Vec<_>>(),
                "finish_reason": a.generation.finish_reason,
            })
        })
        .collect()
}

/// Generated tokens per second of generation time over all answers.
pub fn tokens_per_second(answered: &[Answered]) -> f64 {
    let tokens: usize = answered
        .iter()
        .map(|a| a.generation.timings.generated_tokens)
        .sum();
    let ms: f64 = answered
        .iter()
        .map(|a| a.generation.timings.generate_ms)
        .sum();
    if ms > 0.0 {
        tokens as f64 * 1000.0 / ms
    } else {
        0.0
    }
}
