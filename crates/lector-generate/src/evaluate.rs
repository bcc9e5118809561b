//! Generative QA evaluated (`lector eval generative`): answers generated open book (from the gold
//! paragraph, or from retrieved passages: [`generate_retrieved`]) or closed book, scored with
//! SQuAD EM/F1 and ROUGE-L, with refusals, citations and faithfulness.
//!
//! **Retrieval-augmented runs** ([`RagQuestion`], [`rag_figures`]): a citation is *gold* when it
//! names a shown passage that contains a gold answer (SQuAD normalisation, whole tokens, as
//! answer recall counts it); a cited number that names no shown passage is a citation too, never
//! gold. Citations are *written* (numbers in the answer) or *attributed* (the passage the claim
//! checker chose for an uncited claim). Citation figures are over answerable questions only: an
//! unanswerable question has no gold passage.

use crate::claims::CitationSource;
use crate::grounded::{self, Answered, Passage, PassageOrder};
use crate::judge::{Judge, Verdict as JudgeVerdict};
use crate::prompt::Prompting;
use crate::{Error, GenerateOptions, Generator, Result};
use lector_eval::equivalence;
use lector_eval::retrieval::contains_answer;
use lector_eval::rouge::RougeScorer;
use lector_eval::squad::{self, Dataset, NoAnswer, Question, QuestionScore};
use lector_eval::stats::{self, Bootstrap, Interval};
use serde::Serialize;
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
    /// Answers with a sentence below the word-overlap bar, [`grounded::SUPPORT_THRESHOLD`]
    /// (open book only).
    pub flagged: Option<f64>,
    /// Faithfulness: claims the claim checker finds supported, among all claims of the answers
    /// (open book only; `None` without claims).
    pub claims_supported: Option<f64>,
    /// Faithfulness: answers with an unsupported claim (open book only).
    pub unsupported_claim: Option<f64>,
    /// Answers equivalent to a gold answer by the rules of [`lector_eval::equivalence`] (%).
    pub equivalent: f64,
    /// Answers that contain a gold answer as whole canonical tokens (%).
    pub key_fact: f64,
    /// Mean canonical tokens per answer, beside `key_fact` (a long answer contains more).
    pub answer_tokens: f64,
}

impl Summary {
    /// The summary as JSON, keyed as `eval generative --json` prints it.
    pub fn to_json(&self) -> Value {
        json!({
            "exact_match": self.em, "f1": self.f1, "rouge_l": self.rouge_l,
            "refusal_rate": self.refusal_rate, "citation_precision": self.citation_precision,
            "answers_citing": self.citing, "answers_flagged": self.flagged,
            "claims_supported": self.claims_supported,
            "answers_with_unsupported_claim": self.unsupported_claim,
            "equivalent": self.equivalent, "key_fact": self.key_fact,
            "answer_tokens": self.answer_tokens,
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
    prompting: &Prompting,
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
        let answered = prompting
            .layout(&q.question, PassageOrder::default())
            .and_then(|layout| {
                grounded::answer_with(
                    generator,
                    &q.question,
                    passages,
                    options,
                    &layout,
                    &mut |_| ControlFlow::Continue(()),
                )
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

/// A generative run over a dataset's questions (open book on their gold paragraphs, or closed
/// book), scored: what `lector eval generative` and `lector.eval.generative` report.
#[derive(Debug, Clone)]
pub struct GoldRun {
    pub answered: Vec<Answered>,
    pub scores: Vec<QuestionScore>,
    pub rouge_l: Vec<f64>,
    pub verdicts: Vec<equivalence::Verdict>,
    pub summary: Summary,
}

impl GoldRun {
    /// Answers every question ([`generate_all`]) and scores the answers.
    pub fn run(
        generator: &dyn Generator,
        dataset: &Dataset,
        open_book: bool,
        options: &GenerateOptions,
        prompting: &Prompting,
        on_done: &mut dyn FnMut(),
    ) -> Result<GoldRun> {
        let answered = generate_all(generator, dataset, open_book, options, prompting, on_done)?;
        let shorts = short_answers(&answered);
        let (scores, rouge_l) = score_answers(dataset, &shorts)?;
        let verdicts = equivalence(dataset, &shorts);
        let summary = summarise(&scores, &rouge_l, &verdicts, &answered, open_book);
        Ok(GoldRun {
            answered,
            scores,
            rouge_l,
            verdicts,
            summary,
        })
    }

    /// The short answers, one per question: what EM/F1 and equivalence score.
    pub fn short_answers(&self) -> Vec<&str> {
        short_answers(&self.answered)
    }

    /// One row per question ([`per_question`]).
    pub fn rows(&self, dataset: &Dataset) -> Vec<Value> {
        per_question(
            dataset,
            &self.answered,
            &self.scores,
            &self.rouge_l,
            &self.verdicts,
        )
    }

    /// Generated tokens per second of generation time ([`tokens_per_second`]).
    pub fn tokens_per_second(&self) -> f64 {
        tokens_per_second(&self.answered)
    }

    /// The report as `eval generative --json` prints it (less the extractive comparison):
    /// questions, mode, generator, prompt, seconds, tokens/s and the generative summary.
    pub fn report_json(
        &self,
        open_book: bool,
        generator: &str,
        prompt: &str,
        seconds: f64,
    ) -> Value {
        json!({
            "questions": self.answered.len(),
            "mode": if open_book { "open_book" } else { "closed_book" },
            "generator": generator,
            "prompt": prompt,
            "seconds": seconds,
            "generated_tokens_per_second": self.tokens_per_second(),
            "generative": self.summary.to_json(),
        })
    }
}

/// The short answer of each generated answer, in order.
pub fn short_answers(answered: &[Answered]) -> Vec<&str> {
    answered
        .iter()
        .map(|a| a.answer.short_answer.as_str())
        .collect()
}

/// The judge's equivalence verdict on each answer (one per question of `dataset`, in order)
/// against the question's golds, asked in both orders ([`Judge::equivalence`]); an empty answer
/// (a refusal, or none) is not equivalent without asking, and a question without golds is not
/// asked (`None`). `on_done` is called after each question.
pub fn judge_equivalence(
    judge: &Judge,
    dataset: &Dataset,
    answers: &[&str],
    on_done: &mut dyn FnMut(),
) -> Result<Vec<Option<JudgeVerdict>>> {
    let mut out = Vec::with_capacity(answers.len());
    for (q, answer) in dataset.questions.iter().zip(answers) {
        let verdict = match (q.answers.is_empty(), answer.trim().is_empty()) {
            (true, _) => None,
            (false, true) => Some(JudgeVerdict::NotEquivalent),
            (false, false) => Some(
                judge
                    .equivalence(&q.question, &q.answers, answer)
                    .map_err(|e| Error::Question {
                        id: q.id.clone(),
                        source: Box::new(e),
                    })?
                    .verdict,
            ),
        };
        out.push(verdict);
        on_done();
    }
    Ok(out)
}

/// The judge's equivalence verdicts summed up apart from the rules: the share called
/// equivalent (%, of the questions asked or answered empty; undecided ones count as not
/// equivalent), the undecided ones (orders that disagree, replies without a verdict), and the
/// judge's agreement (Cohen's kappa) with exact match, rule-based equivalence and key fact on
/// the same answers (`exact_match` and `rules` one per question, like `verdicts`).
pub fn judge_equivalence_summary(
    model: &str,
    verdicts: &[Option<JudgeVerdict>],
    exact_match: &[bool],
    rules: &[equivalence::Verdict],
) -> Value {
    let decided: Vec<(usize, JudgeVerdict)> = verdicts
        .iter()
        .enumerate()
        .filter_map(|(i, v)| Some((i, (*v)?)))
        .collect();
    let count = |v: JudgeVerdict| decided.iter().filter(|(_, d)| *d == v).count();
    let said: Vec<bool> = decided
        .iter()
        .map(|(_, v)| *v == JudgeVerdict::Equivalent)
        .collect();
    let kappa = |rule: &dyn Fn(usize) -> bool| {
        let pairs: Vec<(bool, bool)> = decided
            .iter()
            .zip(&said)
            .map(|((i, _), s)| (*s, rule(*i)))
            .collect();
        lector_eval::stats::agreement::cohen_kappa(&pairs)
    };
    json!({
        "model": model,
        "questions": decided.len(),
        "equivalent": 100.0 * count(JudgeVerdict::Equivalent) as f64 / decided.len().max(1) as f64,
        "inconsistent": count(JudgeVerdict::Inconsistent),
        "unparseable": count(JudgeVerdict::Unparseable),
        "kappa_with": {
            "exact_match": kappa(&|i| exact_match[i]),
            "equivalent": kappa(&|i| rules[i].equivalent),
            "key_fact": kappa(&|i| rules[i].key_fact),
        },
    })
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

/// The rule-based equivalence verdict of each answer (one per question of `dataset`, in order),
/// with acronyms defined in the question or its paragraph.
pub fn equivalence(dataset: &Dataset, answers: &[&str]) -> Vec<equivalence::Verdict> {
    dataset
        .questions
        .iter()
        .zip(answers)
        .map(|(q, a)| equivalence::judge(a, &q.answers, &[&q.question, &q.context]))
        .collect()
}

/// Means over questions; refusals and citations from `answered` (empty for a system that does
/// not generate, such as the extractive reader).
pub fn summarise(
    scores: &[QuestionScore],
    rouge: &[f64],
    verdicts: &[equivalence::Verdict],
    answered: &[Answered],
    open_book: bool,
) -> Summary {
    let n = scores.len().max(1) as f64;
    let mean = |v: &mut dyn Iterator<Item = f64>| v.sum::<f64>() / n;
    let share = |f: &dyn Fn(&Answered) -> bool| {
        100.0 * mean(&mut answered.iter().map(|a| f64::from(u8::from(f(a)))))
    };
    let rate = |f: fn(&equivalence::Verdict) -> bool| {
        100.0 * mean(&mut verdicts.iter().map(|v| f64::from(u8::from(f(v)))))
    };
    let mut s = Summary {
        em: 100.0 * mean(&mut scores.iter().map(|q| q.em)),
        f1: 100.0 * mean(&mut scores.iter().map(|q| q.f1)),
        rouge_l: mean(&mut rouge.iter().copied()),
        equivalent: rate(|v| v.equivalent),
        key_fact: rate(|v| v.key_fact),
        answer_tokens: mean(&mut verdicts.iter().map(|v| v.answer_tokens as f64)),
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
        s.flagged = Some(share(&|a| {
            a.answer
                .sentences
                .iter()
                .any(|s| s.support < grounded::SUPPORT_THRESHOLD)
        }));
        let claims = answered.iter().flat_map(|a| &a.answer.claims);
        let (supported, total) = claims.fold((0usize, 0usize), |(s, t), c| {
            (s + usize::from(c.supported), t + 1)
        });
        s.claims_supported = (total > 0).then(|| 100.0 * supported as f64 / total as f64);
        s.unsupported_claim = Some(share(&|a| a.answer.claims.iter().any(|c| !c.supported)));
    }
    s
}

/// One row per question: the generated answer, its scores, refusal, citations and flags.
pub fn per_question(
    dataset: &Dataset,
    answered: &[Answered],
    scores: &[QuestionScore],
    rouge_l: &[f64],
    verdicts: &[equivalence::Verdict],
) -> Vec<Value> {
    dataset
        .questions
        .iter()
        .enumerate()
        .map(|(i, q)| {
            let a = &answered[i];
            let mut row = json!({
                "id": q.id, "question": q.question, "golds": q.answers,
                "generated": a.answer.text, "short_answer": a.answer.short_answer,
                "em": scores[i].em, "f1": scores[i].f1, "rouge_l": rouge_l[i],
                "equivalent": verdicts[i].equivalent, "key_fact": verdicts[i].key_fact,
                "answer_tokens": verdicts[i].answer_tokens,
                "refused": a.answer.refused, "citations": a.answer.citations,
                "invalid_citations": a.answer.invalid_citations,
                "flagged": a.answer.flagged.iter().map(|&s| &a.answer.sentences[s].text).collect::<Vec<_>>(),
                "claims": a.answer.claims,
                "finish_reason": a.generation.finish_reason,
            });
            if let Some(reasoning) = &a.reasoning {
                row["reasoning"] = reasoning.as_str().into();
            }
            row
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

/// Answers every question of `dataset` in order from the passages `retrieve` gives it (ranked,
/// strongest first), shown in `order`; returns each question's passages with its answer.
/// `on_done` is called after each question.
pub fn generate_retrieved<E: std::fmt::Display>(
    generator: &dyn Generator,
    dataset: &Dataset,
    retrieve: &mut dyn FnMut(&Question) -> std::result::Result<Vec<Passage>, E>,
    options: &GenerateOptions,
    prompting: &Prompting,
    order: PassageOrder,
    on_done: &mut dyn FnMut(),
) -> Result<Vec<(Vec<Passage>, Answered)>> {
    let mut out = Vec::with_capacity(dataset.questions.len());
    for q in &dataset.questions {
        let in_question = |source: Error| Error::Question {
            id: q.id.clone(),
            source: Box::new(source),
        };
        let passages = retrieve(q)
            .map_err(|e| in_question(Error::Invalid(format!("retrieving passages: {e}"))))?;
        let layout = prompting.layout(&q.question, order).map_err(in_question)?;
        let answered = grounded::answer_with(
            generator,
            &q.question,
            Some(&passages),
            options,
            &layout,
            &mut |_| ControlFlow::Continue(()),
        )
        .map_err(in_question)?;
        out.push((passages, answered));
        on_done();
    }
    Ok(out)
}

/// One question of a retrieval-augmented run: what the prompt showed, which shown passages hold
/// a gold answer, and what the answer cites.
#[derive(Debug, Clone, Default, Serialize)]
pub struct RagQuestion {
    /// The question has a gold answer (SQuAD v2.0's unanswerable and withheld ones have none).
    pub answerable: bool,
    /// Passage numbers (retrieval rank + 1) in the order the prompt showed them.
    pub shown: Vec<usize>,
    /// Passage numbers left out to fit the context window.
    pub cut: Vec<usize>,
    /// Shown passage numbers whose text contains a gold answer.
    pub gold_passages: Vec<usize>,
    /// Numbers the answer writes, each once, in order (those naming no shown passage included).
    pub written: Vec<usize>,
    /// Passages the claim checker attributed uncited claims to, each once, in order.
    pub attributed: Vec<usize>,
    pub refused: bool,
    /// Claims of the answer, and how many of them are supported.
    pub claims: usize,
    pub supported_claims: usize,
}

impl RagQuestion {
    /// The figures of `answered`, generated for `question` from `passages` shown in `order`.
    pub fn new(
        question: &Question,
        passages: &[Passage],
        answered: &Answered,
        order: PassageOrder,
    ) -> RagQuestion {
        let numbers = |refs: &[grounded::PassageRef]| -> Vec<usize> {
            refs.iter().map(|r| r.number).collect()
        };
        let (included, cut) = answered
            .prompt
            .as_ref()
            .map_or((Vec::new(), Vec::new()), |p| {
                (numbers(&p.included), numbers(&p.cut))
            });
        let ranks: Vec<usize> = included.iter().map(|n| n - 1).collect();
        let shown: Vec<usize> = grounded::shown_order(&ranks, order)
            .into_iter()
            .map(|r| r + 1)
            .collect();
        let gold_passages = included
            .iter()
            .copied()
            .filter(|&n| contains_answer(&question.answers, &passages[n - 1].text))
            .collect();
        let answer = &answered.answer;
        let mut written: Vec<usize> = Vec::new();
        for n in grounded::citations(&answer.text) {
            if !written.contains(&n) {
                written.push(n);
            }
        }
        let mut attributed: Vec<usize> = Vec::new();
        for claim in &answer.claims {
            if let (Some(CitationSource::Attributed), Some(n)) = (claim.citation, claim.passage) {
                if !attributed.contains(&n) {
                    attributed.push(n);
                }
            }
        }
        RagQuestion {
            answerable: question.has_answer(),
            shown,
            cut,
            gold_passages,
            written,
            attributed,
            refused: answer.refused,
            claims: answer.claims.len(),
            supported_claims: answer.claims.iter().filter(|c| c.supported).count(),
        }
    }

    /// Whether a shown passage contains a gold answer.
    pub fn gold_shown(&self) -> bool {
        !self.gold_passages.is_empty()
    }

    /// Whether the answer cites (written or attributed) a passage with a gold answer; `None`
    /// when no shown passage holds one.
    pub fn cites_gold(&self) -> Option<bool> {
        self.gold_shown().then(|| {
            self.written
                .iter()
                .chain(&self.attributed)
                .any(|n| self.gold_passages.contains(n))
        })
    }

    /// Whether a written citation names a passage with a gold answer; `None` as [`Self::cites_gold`].
    pub fn writes_gold(&self) -> Option<bool> {
        self.gold_shown()
            .then(|| self.written.iter().any(|n| self.gold_passages.contains(n)))
    }

    /// 1 for each of `numbers` naming a gold passage, else 0.
    fn gold_indicators(&self, numbers: &[usize]) -> Vec<f64> {
        numbers
            .iter()
            .map(|n| indicator(self.gold_passages.contains(n)))
            .collect()
    }
}

fn indicator(b: bool) -> f64 {
    f64::from(u8::from(b))
}

/// A figure of a retrieval-augmented run: its mean in percent with a percentile-bootstrap
/// interval, over `n` units (questions, claims or citations, as its name says).
#[derive(Debug, Clone, Serialize)]
pub struct Figure {
    pub name: String,
    /// Questions, claims or citations the figure averages over (0: no interval, NaN mean).
    pub n: usize,
    #[serde(flatten)]
    pub interval: Interval,
}

/// Per-question correctness scores beyond EM/F1 (BERTScore F1, judge), one value in [0, 1] per
/// question of the run; only the answerable questions' values enter the figure.
pub struct ExtraScore<'a> {
    pub name: &'a str,
    pub values: &'a [f64],
}

/// The figures of a retrieval-augmented run, in percent: correctness on answerable questions
/// (`exact_match`, `f1`, then `extra`) and over all (`exact_match_all`, `f1_all`, SQuAD v2.0
/// rules: a refusal is right on an unanswerable question); faithfulness (`claims_supported`,
/// `answers_with_unsupported_claim`); citations on answerable questions (`citation_precision`
/// over written and attributed citations, and for each kind; `citation_recall` among questions
/// with a gold answer in a shown passage, and `citation_recall_written`); refusals
/// (`refusal_rate_unanswerable`, `refusal_rate_answerable`); retrieval (`recall@K_shown`: a
/// shown passage holds a gold answer).
pub fn rag_figures(
    questions: &[RagQuestion],
    scores: &[QuestionScore],
    extra: &[ExtraScore<'_>],
    k: usize,
    settings: &Bootstrap,
) -> Vec<Figure> {
    let figure = |name: &str, values: Vec<f64>| Figure {
        name: name.to_string(),
        n: values.len(),
        interval: stats::bootstrap_mean(&values, settings).scaled(100.0),
    };
    let answerable: Vec<usize> = (0..questions.len())
        .filter(|&i| questions[i].answerable)
        .collect();
    let on_answerable = |value: &dyn Fn(usize) -> f64| -> Vec<f64> {
        answerable.iter().map(|&i| value(i)).collect()
    };
    let mut out = vec![
        figure("exact_match", on_answerable(&|i| scores[i].em)),
        figure("f1", on_answerable(&|i| scores[i].f1)),
    ];
    for e in extra {
        out.push(figure(e.name, on_answerable(&|i| e.values[i])));
    }
    out.push(figure(
        "exact_match_all",
        scores.iter().map(|s| s.em).collect(),
    ));
    out.push(figure("f1_all", scores.iter().map(|s| s.f1).collect()));
    out.extend(faithfulness_figures(questions, &figure));
    out.extend(citation_figures(questions, &figure));
    let refusals = |answerable: bool| -> Vec<f64> {
        questions
            .iter()
            .filter(|q| q.answerable == answerable)
            .map(|q| indicator(q.refused))
            .collect()
    };
    out.push(figure("refusal_rate_unanswerable", refusals(false)));
    out.push(figure("refusal_rate_answerable", refusals(true)));
    out.push(figure(
        &format!("recall@{k}_shown"),
        on_answerable(&|i| indicator(questions[i].gold_shown())),
    ));
    out
}

type MakeFigure<'a> = dyn Fn(&str, Vec<f64>) -> Figure + 'a;

/// Claims supported (over all claims) and answers with an unsupported claim (over all answers).
fn faithfulness_figures(questions: &[RagQuestion], figure: &MakeFigure<'_>) -> Vec<Figure> {
    let claims: Vec<f64> = questions
        .iter()
        .flat_map(|q| {
            let unsupported = q.claims - q.supported_claims;
            std::iter::repeat_n(1.0, q.supported_claims)
                .chain(std::iter::repeat_n(0.0, unsupported))
        })
        .collect();
    let unsupported = questions
        .iter()
        .map(|q| indicator(q.supported_claims < q.claims))
        .collect();
    vec![
        figure("claims_supported", claims),
        figure("answers_with_unsupported_claim", unsupported),
    ]
}

/// Citation precision (per citation) and recall (per question with a gold passage shown), on
/// answerable questions.
fn citation_figures(questions: &[RagQuestion], figure: &MakeFigure<'_>) -> Vec<Figure> {
    let answerable = || questions.iter().filter(|q| q.answerable);
    let written: Vec<f64> = answerable()
        .flat_map(|q| q.gold_indicators(&q.written))
        .collect();
    let attributed: Vec<f64> = answerable()
        .flat_map(|q| q.gold_indicators(&q.attributed))
        .collect();
    let all = written.iter().chain(&attributed).copied().collect();
    let recall = |pick: fn(&RagQuestion) -> Option<bool>| -> Vec<f64> {
        answerable().filter_map(pick).map(indicator).collect()
    };
    vec![
        figure("citation_precision", all),
        figure("citation_precision_written", written),
        figure("citation_precision_attributed", attributed),
        figure("citation_recall", recall(RagQuestion::cites_gold)),
        figure("citation_recall_written", recall(RagQuestion::writes_gold)),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grounded::{OpenBookPrompt, PassageRef, PromptReport};
    use crate::options::{FinishReason, Generation, Timings};
    use std::sync::Arc;

    fn passage(n: usize, text: &str) -> Passage {
        Passage {
            doc_id: format!("d{n}"),
            title: None,
            text: text.to_string(),
        }
    }

    /// `text` answered over `passages`, of which the ranks `included` were shown.
    fn answered(text: &str, passages: &[Passage], included: &[usize]) -> Answered {
        let prompt = OpenBookPrompt {
            messages: Vec::new(),
            included: included.to_vec(),
            cut: (included.len()..passages.len()).collect(),
            truncated: None,
            prompt_tokens: 0,
        };
        let refs = |ranks: &[usize]| -> Vec<PassageRef> {
            ranks
                .iter()
                .map(|&r| PassageRef {
                    number: r + 1,
                    doc_id: passages[r].doc_id.clone(),
                    title: None,
                })
                .collect()
        };
        Answered {
            question: "Who won?".into(),
            prompt: Some(PromptReport {
                included: refs(&prompt.included),
                cut: refs(&prompt.cut),
                truncated: None,
                prompt_tokens: 0,
            }),
            answer: grounded::check(text, passages, Some(&prompt)),
            reasoning: None,
            disagreement: None,
            generation: Generation {
                text: text.into(),
                finish_reason: FinishReason::EndOfText,
                timings: Timings::default(),
            },
        }
    }

    fn question(answers: &[&str]) -> Question {
        Question {
            id: "q".into(),
            question: "Who won?".into(),
            answers: answers.iter().map(|a| a.to_string()).collect(),
            context: Arc::from(""),
            title: Arc::from(""),
        }
    }

    #[test]
    fn citations_are_gold_when_they_name_a_shown_passage_with_an_answer() {
        let passages = [
            passage(1, "The Broncos beat the Panthers in Super Bowl 50."),
            passage(2, "Carolina had the best record of the season."),
            passage(3, "Denver Broncos won the title."),
            passage(4, "The Broncos were cut from the prompt."),
        ];
        let q = question(&["Denver Broncos", "Broncos"]);
        let a = answered("The Broncos won [2][7].", &passages, &[0, 1, 2]);
        let row = RagQuestion::new(&q, &passages, &a, PassageOrder::Rank);
        assert_eq!(row.shown, [1, 2, 3]);
        assert_eq!(row.cut, [4]);
        // Passage 4 holds an answer but was not shown.
        assert_eq!(row.gold_passages, [1, 3]);
        assert_eq!(row.written, [2, 7]);
        assert_eq!(row.writes_gold(), Some(false));
        let edges = RagQuestion::new(&q, &passages, &a, PassageOrder::Edges);
        assert_eq!(edges.shown, [1, 3, 2]);

        let score = QuestionScore {
            id: "q".into(),
            prediction: None,
            best_gold: String::new(),
            em: 1.0,
            f1: 1.0,
            has_ans: true,
            na_prob: None,
        };
        let scores = vec![score; 2];
        let refusal = answered(grounded::REFUSAL, &passages, &[0, 1, 2]);
        let unanswerable =
            RagQuestion::new(&question(&[]), &passages, &refusal, PassageOrder::Rank);
        assert!(unanswerable.refused && !unanswerable.answerable);
        let figures = rag_figures(&[row, unanswerable], &scores, &[], 3, &Bootstrap::default());
        let get = |name: &str| figures.iter().find(|f| f.name == name).unwrap();
        // Two written citations, neither gold; attributed ones come on top.
        assert_eq!(get("citation_precision_written").n, 2);
        assert_eq!(get("citation_precision_written").interval.mean, 0.0);
        assert_eq!(get("exact_match").n, 1);
        assert_eq!(get("f1_all").n, 2);
        assert_eq!(get("refusal_rate_unanswerable").interval.mean, 100.0);
        assert_eq!(get("recall@3_shown").interval.mean, 100.0);
        assert_eq!(get("citation_recall_written").interval.mean, 0.0);
    }
}

#[cfg(test)]
mod faithfulness_tests {
    use super::*;
    use crate::grounded::OpenBookPrompt;
    use crate::{FinishReason, Generation, Timings};

    const PARAGRAPH: &str = "The Denver Broncos defeated the Carolina Panthers 24-10 in 2016.";

    /// `text` answered open book from PARAGRAPH, checked as `grounded::answer` checks it.
    fn answered(text: &str) -> Answered {
        let passages = [Passage {
            doc_id: "sb50".into(),
            title: None,
            text: PARAGRAPH.into(),
        }];
        let prompt = OpenBookPrompt {
            messages: Vec::new(),
            included: vec![0],
            cut: Vec::new(),
            truncated: None,
            prompt_tokens: 0,
        };
        Answered {
            question: "Who won?".into(),
            prompt: None,
            answer: grounded::check(text, &passages, Some(&prompt)),
            reasoning: None,
            disagreement: None,
            generation: Generation {
                text: text.into(),
                finish_reason: FinishReason::EndOfText,
                timings: Timings::default(),
            },
        }
    }

    fn score(em: f64) -> QuestionScore {
        QuestionScore {
            id: "q".into(),
            prediction: None,
            best_gold: String::new(),
            em,
            f1: em,
            has_ans: true,
            na_prob: None,
        }
    }

    #[test]
    fn faithfulness_counts_claims_and_answers_beside_the_old_flag() {
        let answers = [
            // Two supported claims.
            answered("The Broncos defeated the Panthers 24-10 and they defeated them in 2016."),
            // One supported claim, one negating the paragraph: the word-overlap check passes
            // it ("not" is a stop word), the claim check does not.
            answered("The Broncos defeated the Panthers. The Broncos did not defeat the Panthers."),
        ];
        let scores = [score(1.0), score(0.0)];
        let s = summarise(&scores, &[0.5, 0.5], &[], &answers, true);
        assert_eq!(s.em, 50.0);
        assert_eq!(s.flagged, Some(0.0), "word overlap flags nothing");
        assert_eq!(s.claims_supported, Some(75.0));
        assert_eq!(s.unsupported_claim, Some(50.0));
        let json = s.to_json();
        assert_eq!(json["claims_supported"], 75.0);
        assert_eq!(json["answers_with_unsupported_claim"], 50.0);
        let closed = summarise(&scores, &[0.5, 0.5], &[], &answers, false);
        assert_eq!(
            (closed.claims_supported, closed.unsupported_claim),
            (None, None)
        );
    }
}
