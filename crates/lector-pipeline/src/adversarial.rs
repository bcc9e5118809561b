//! Adversarial evaluation of a reader (`lector eval adversarial`): every answerable question is
//! read in its own context and again with a distractor sentence inserted
//! ([`lector_eval::adversarial`]: AddSent- and AddAny-style, at the start, the end or between two
//! sentences), and the two are scored with SQuAD's rules. The report gives, per kind and
//! position, EM/F1 with and without the distractor on the same questions, the drop with its
//! paired-bootstrap interval, and how often the answer came from the inserted sentence.

use crate::{Progress, Result, Stage};
use lector_eval::adversarial::{self, Kind, Pools, Position};
use lector_eval::report::{fmt2, Metric, Report as HtmlReport};
use lector_eval::squad::{self, Dataset, NoAnswer, Question, QuestionScore};
use lector_eval::stats::{self, Bootstrap, Interval};
use lector_reader::{Prediction, Query, ReadParams, Reader};
use serde::Serialize;
use std::ops::Range;

/// What to insert, where, and how hard to search.
#[derive(Debug, Clone)]
pub struct Options {
    pub kinds: Vec<Kind>,
    pub positions: Vec<Position>,
    /// AddAny-style candidates tried per question and position; the one the reader does worst
    /// on is kept (1: a random sentence).
    pub candidates: usize,
    /// Seed of the distractors and of the random positions.
    pub seed: u64,
    /// Only the first N questions are read (fake answers still come from the whole dataset).
    pub limit: Option<usize>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            kinds: vec![Kind::AddSent, Kind::AddAny],
            positions: vec![Position::Start, Position::End, Position::Random],
            candidates: 4,
            seed: 0,
            limit: None,
        }
    }
}

/// The scores of one kind of distractor at one position.
#[derive(Debug, Clone, Serialize)]
pub struct Variant {
    pub kind: Kind,
    pub position: Position,
    /// Questions that got a distractor (AddSent-style skips those its rules cannot mutate).
    pub questions: usize,
    /// EM and F1 (percent) of these questions in their own contexts.
    pub original_exact_match: Interval,
    pub original_f1: Interval,
    /// EM and F1 (percent) with the distractor inserted.
    pub exact_match: Interval,
    pub f1: Interval,
    /// Mean of adversarial minus original F1 (percent) with its paired-bootstrap interval.
    pub f1_change: Interval,
    /// Share (percent) of answers taken from inside the inserted sentence.
    pub answers_from_distractor: f64,
}

/// One question under one distractor.
#[derive(Debug, Clone, Serialize)]
pub struct Record {
    pub id: String,
    pub kind: Kind,
    pub position: Position,
    pub distractor: String,
    pub original_prediction: String,
    pub prediction: String,
    pub original_f1: f64,
    pub f1: f64,
    pub em: f64,
    pub from_distractor: bool,
}

/// The whole run.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// Answerable questions read.
    pub questions: usize,
    /// Unanswerable questions left out (SQuAD v2.0 data).
    pub unanswerable: usize,
    pub original_exact_match: Interval,
    pub original_f1: Interval,
    pub variants: Vec<Variant>,
    pub seconds: f64,
}

/// A question's text in a changed context, and where the inserted sentence is.
struct Attack {
    question: usize,
    kind: Kind,
    position: Position,
    sentence: String,
    context: String,
    span: Range<usize>,
}

/// Reads every answerable question of `dataset` with and without distractors.
pub fn evaluate(
    reader: &Reader,
    dataset: &Dataset,
    options: &Options,
    params: &ReadParams,
    settings: &Bootstrap,
    progress: &mut dyn FnMut(Progress),
) -> Result<(Report, Vec<Record>)> {
    let start = std::time::Instant::now();
    let limit = options
        .limit
        .unwrap_or(usize::MAX)
        .min(dataset.questions.len());
    let asked = &dataset.questions[..limit];
    let questions: Vec<&Question> = asked.iter().filter(|q| q.has_answer()).collect();
    let pools = Pools::new(&dataset.questions);
    let options = &Options {
        kinds: distinct(&options.kinds),
        positions: distinct(&options.positions),
        ..options.clone()
    };
    let attacks = build_attacks(&questions, &pools, options);
    let queries: Vec<Query> = questions
        .iter()
        .map(|q| Query {
            question: &q.question,
            context: &q.context,
        })
        .chain(attacks.iter().map(|a| Query {
            question: &questions[a.question].question,
            context: &a.context,
        }))
        .collect();
    let total = queries.len();
    let predictions = reader.answer_batch(&queries, params, &mut |done| {
        progress(Progress {
            stage: Stage::Read,
            done,
            total,
        })
    })?;
    let (original, attacked) = predictions.split_at(questions.len());
    let original_scores = score(&questions, original.iter().map(best_text))?;
    let chosen = worst_candidates(&questions, &attacks, attacked)?;
    let percent = |v: Vec<f64>| stats::bootstrap_mean(&v, settings).scaled(100.0);
    let mut variants = Vec::new();
    let mut records = Vec::new();
    for &kind in &options.kinds {
        for &position in &options.positions {
            let picked: Vec<usize> = chosen
                .iter()
                .copied()
                .filter(|&i| attacks[i].kind == kind && attacks[i].position == position)
                .collect();
            let asked: Vec<&Question> = picked
                .iter()
                .map(|&i| questions[attacks[i].question])
                .collect();
            let scores = score(&asked, picked.iter().map(|&i| best_text(&attacked[i])))?;
            let before: Vec<&QuestionScore> = picked
                .iter()
                .map(|&i| &original_scores[attacks[i].question])
                .collect();
            let f1_before: Vec<f64> = before.iter().map(|s| s.f1).collect();
            let f1_after: Vec<f64> = scores.iter().map(|s| s.f1).collect();
            let from: Vec<bool> = picked
                .iter()
                .map(|&i| inside(&attacked[i], &attacks[i].span))
                .collect();
            let change = stats::compare_paired(&f1_before, &f1_after, settings, 0).difference;
            variants.push(Variant {
                kind,
                position,
                questions: picked.len(),
                original_exact_match: percent(before.iter().map(|s| s.em).collect()),
                original_f1: percent(f1_before.clone()),
                exact_match: percent(scores.iter().map(|s| s.em).collect()),
                f1: percent(f1_after.clone()),
                f1_change: change.scaled(100.0),
                answers_from_distractor: 100.0 * from.iter().filter(|&&f| f).count() as f64
                    / picked.len().max(1) as f64,
            });
            for (n, &i) in picked.iter().enumerate() {
                let attack = &attacks[i];
                records.push(Record {
                    id: questions[attack.question].id.clone(),
                    kind,
                    position,
                    distractor: attack.sentence.clone(),
                    original_prediction: best_text(&original[attack.question]).to_string(),
                    prediction: best_text(&attacked[i]).to_string(),
                    original_f1: before[n].f1,
                    f1: scores[n].f1,
                    em: scores[n].em,
                    from_distractor: from[n],
                });
            }
        }
    }
    let report = Report {
        questions: questions.len(),
        unanswerable: asked.len() - questions.len(),
        original_exact_match: percent(original_scores.iter().map(|s| s.em).collect()),
        original_f1: percent(original_scores.iter().map(|s| s.f1).collect()),
        variants,
        seconds: start.elapsed().as_secs_f64(),
    };
    Ok((report, records))
}

fn build_attacks(questions: &[&Question], pools: &Pools, options: &Options) -> Vec<Attack> {
    let mut attacks = Vec::new();
    for (i, q) in questions.iter().enumerate() {
        for &kind in &options.kinds {
            let sentences = match kind {
                Kind::AddSent => adversarial::add_sent(q, pools, options.seed)
                    .into_iter()
                    .collect(),
                Kind::AddAny => adversarial::add_any(q, options.candidates.max(1), options.seed),
            };
            for &position in &options.positions {
                for sentence in &sentences {
                    let (context, span) =
                        adversarial::insert(&q.context, sentence, position, &q.id, options.seed);
                    attacks.push(Attack {
                        question: i,
                        kind,
                        position,
                        sentence: sentence.clone(),
                        context,
                        span,
                    });
                }
            }
        }
    }
    attacks
}

/// Of each question's candidates for one kind and position, the one with the lowest F1 (the
/// first on ties): the adversary's choice. Returns indices into `attacks`, in order.
fn worst_candidates(
    questions: &[&Question],
    attacks: &[Attack],
    read: &[Prediction],
) -> Result<Vec<usize>> {
    let mut f1 = Vec::with_capacity(attacks.len());
    for (a, p) in attacks.iter().zip(read) {
        f1.push(score(&[questions[a.question]], std::iter::once(best_text(p)))?[0].f1);
    }
    let mut chosen: Vec<usize> = Vec::new();
    for i in 0..attacks.len() {
        let same = |j: usize| {
            attacks[j].question == attacks[i].question
                && attacks[j].kind == attacks[i].kind
                && attacks[j].position == attacks[i].position
        };
        match chosen.last() {
            Some(&last) if same(last) => {
                if f1[i] < f1[last] {
                    *chosen.last_mut().expect("not empty") = i;
                }
            }
            _ => chosen.push(i),
        }
    }
    Ok(chosen)
}

fn best_text(p: &Prediction) -> &str {
    p.answers.first().map_or("", |a| a.answer.as_str())
}

/// Whether the best answer lies inside the inserted sentence's character range.
fn inside(p: &Prediction, span: &Range<usize>) -> bool {
    p.answers
        .first()
        .is_some_and(|a| a.start >= span.start && a.end <= span.end && a.start < a.end)
}

/// SQuAD v1.1 scores of `answers` (one per question, in order).
fn score<'a>(
    questions: &[&Question],
    answers: impl Iterator<Item = &'a str>,
) -> Result<Vec<QuestionScore>> {
    let dataset = Dataset {
        version: squad::SquadVersion::V1_1,
        questions: questions.iter().map(|q| (*q).clone()).collect(),
    };
    let predictions: Vec<(String, String)> = questions
        .iter()
        .zip(answers)
        .map(|(q, a)| (q.id.clone(), a.to_string()))
        .collect();
    Ok(squad::evaluate(&dataset, &predictions, &NoAnswer::default())?.questions)
}

/// `items` without repeats, in order (`--kind addsent,addsent` reads once).
fn distinct<T: PartialEq + Copy>(items: &[T]) -> Vec<T> {
    let mut out: Vec<T> = Vec::new();
    for &item in items {
        if !out.contains(&item) {
            out.push(item);
        }
    }
    out
}

/// The columns of [`rows`].
pub const HEADER: [&str; 9] = [
    "distractor",
    "position",
    "questions",
    "EM before",
    "EM after",
    "F1 before",
    "F1 after",
    "F1 change [CI]",
    "from distractor (%)",
];

/// One row per variant under [`HEADER`]: scores before and after (percent), the F1 change with
/// its interval, and the answers taken from the distractor.
pub fn rows(variants: &[Variant]) -> Vec<Vec<String>> {
    // A variant no question got (AddSent on questions its rules cannot change) has no scores.
    let fmt2 = |v: f64| if v.is_nan() { "-".to_string() } else { fmt2(v) };
    let ci = |i: &Interval| format!("{} [{}, {}]", fmt2(i.mean), fmt2(i.low), fmt2(i.high));
    variants
        .iter()
        .map(|v| {
            vec![
                v.kind.name().to_string(),
                v.position.name().to_string(),
                v.questions.to_string(),
                fmt2(v.original_exact_match.mean),
                fmt2(v.exact_match.mean),
                fmt2(v.original_f1.mean),
                fmt2(v.f1.mean),
                ci(&v.f1_change),
                format!("{:.1}", v.answers_from_distractor),
            ]
        })
        .collect()
}

impl Report {
    /// The HTML report titled after `data`: scores without distractors with intervals, the
    /// variants' table, and how to read it.
    pub fn html(&self, data: &std::path::Path, confidence: f64) -> HtmlReport {
        let report = self;
        let mut page = HtmlReport::new(format!("Adversarial distractors: {}", data.display()));
        page.metrics(
            "Without distractors (%)",
            &[
                Metric::with_interval("exact_match", report.original_exact_match),
                Metric::with_interval("f1", report.original_f1),
            ],
            confidence,
        );
        page.table("With distractors (%)", &HEADER, &rows(&report.variants));
        page.note(&format!(
        "{} answerable questions. F1 change: adversarial minus original on the same questions, \
         paired bootstrap. The last column: answers taken from the inserted sentence (%).",
        report.questions
    ));
        page
    }
}
