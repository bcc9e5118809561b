//! `lector eval generative` (open book on each question's gold paragraph, or closed book) as a
//! run: generated answers scored like extracted ones (EM/F1, ROUGE-L, equivalence, key fact,
//! refusals, citations, faithfulness), side by side with the extractive reader on the same
//! paragraphs, and with a judge model's equivalence verdicts when one is given. The
//! retrieval-augmented run is [`super::rag`].

use crate::Result;
use lector_eval::squad::{Dataset, QuestionScore};
use lector_generate::evaluate::{self, GoldRun, Summary};
use lector_generate::judge::{self, Judge, Verdict};
use lector_generate::prompt::Prompting;
use lector_generate::{GenerateOptions, Generator};
use lector_reader::Reader;
use serde_json::Value;
use std::time::Instant;

/// The models a run answers, reads and judges with.
pub struct Models<'a> {
    /// Writes the answers.
    pub generator: &'a dyn Generator,
    /// How it decodes.
    pub generation: &'a GenerateOptions,
    /// The prompt (and few-shot examples).
    pub prompting: &'a Prompting,
    /// The extractive reader compared on the same paragraphs (open book only).
    pub reader: Option<&'a Reader>,
    /// A judge of equivalence, reported apart from the rules.
    pub judge: Option<&'a dyn Generator>,
}

/// What a run is busy with, for progress.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Questions answered by the generator.
    Generate,
    /// Gold paragraphs read by the reader.
    Read,
    /// Answers the judge compared with the golds.
    JudgeEquivalence,
}

/// A run's report: the `--json` report and one record per question (`--per-question`).
#[derive(Debug, Clone)]
pub struct Report {
    pub json: Value,
    pub per_question: Vec<Value>,
    /// The generated answers' summary.
    pub generative: Summary,
    /// The reader's, on the same paragraphs.
    pub extractive: Option<Summary>,
}

/// Answers `dataset`'s questions open book (each with its gold paragraph as passage `[1]`) or
/// closed book, and scores them; `progress` gets (step, done, total).
pub fn run(
    dataset: &Dataset,
    open_book: bool,
    models: &Models<'_>,
    progress: &mut dyn FnMut(Step, usize, usize),
) -> Result<Report> {
    let total = dataset.questions.len();
    let start = Instant::now();
    let mut done = 0;
    let run = GoldRun::run(
        models.generator,
        dataset,
        open_book,
        models.generation,
        models.prompting,
        &mut || {
            done += 1;
            progress(Step::Generate, done, total)
        },
    )?;
    let seconds = start.elapsed().as_secs_f64();
    let read = match (models.reader, open_book) {
        (Some(reader), true) => Some(crate::odqa::read_gold(reader, dataset, &mut |done| {
            progress(Step::Read, done, total)
        })?),
        _ => None,
    };
    let extractive = match &read {
        Some((answers, scores)) => {
            let answers: Vec<&str> = answers.iter().map(String::as_str).collect();
            let (_, rouge) = evaluate::score_answers(dataset, &answers)?;
            let verdicts = evaluate::equivalence(dataset, &answers);
            Some(evaluate::summarise(scores, &rouge, &verdicts, &[], false))
        }
        None => None,
    };
    let shorts = run.short_answers();
    let judged = match models.judge {
        Some(judge) => Some(judge_equivalence(
            judge,
            dataset,
            &shorts,
            &mut |done, total| progress(Step::JudgeEquivalence, done, total),
        )?),
        None => None,
    };
    let mut per_question = run.rows(dataset);
    if let Some((answers, scores)) = &read {
        for (i, row) in per_question.iter_mut().enumerate() {
            row["reader_answer"] = answers[i].clone().into();
            row["reader_em"] = scores[i].em.into();
            row["reader_f1"] = scores[i].f1.into();
        }
    }
    if let Some((_, verdicts)) = &judged {
        for (row, verdict) in per_question.iter_mut().zip(verdicts) {
            row["judge_equivalence"] = verdict.map(Verdict::name).into();
        }
    }
    let mut json = run.report_json(
        open_book,
        &models.generator.name(),
        models.prompting.prompt.name(),
        seconds,
    );
    json["extractive"] = extractive.as_ref().map_or(Value::Null, Summary::to_json);
    if let Some((model, verdicts)) = &judged {
        json["judge_equivalence"] = evaluate::judge_equivalence_summary(
            model,
            verdicts,
            &exact(&run.scores),
            &run.verdicts,
        );
    }
    Ok(Report {
        json,
        per_question,
        generative: run.summary,
        extractive,
    })
}

/// The judge's equivalence verdict on each short answer (both orders; see
/// `lector_generate::evaluate::judge_equivalence`), with the judge's model name; `on_item`
/// gets (done, total).
pub fn judge_equivalence(
    generator: &dyn Generator,
    dataset: &Dataset,
    shorts: &[&str],
    on_item: &mut dyn FnMut(usize, usize),
) -> Result<(String, Vec<Option<Verdict>>)> {
    let judge = Judge::new(generator, judge::decoding())?;
    let total = dataset.questions.len();
    let mut done = 0;
    let verdicts = evaluate::judge_equivalence(&judge, dataset, shorts, &mut || {
        done += 1;
        on_item(done, total)
    })?;
    Ok((judge.model().to_string(), verdicts))
}

/// Whether each score is an exact match.
pub(crate) fn exact(scores: &[QuestionScore]) -> Vec<bool> {
    scores.iter().map(|s| s.em > 0.0).collect()
}
