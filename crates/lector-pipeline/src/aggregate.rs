//! From per-passage reader answers to one answer: candidates keyed by their SQuAD-normalised
//! text, the highest score (or, voting, the sum of scores) first, a no-answer probability from
//! the winning passage, abstention by threshold, and an optional tie-break toward recent
//! documents.
//!
//! Span probabilities are not comparable across passages: the reader's softmax runs over one
//! passage at a time, so a distractor passage with a single plausible span gives it a high
//! probability whatever the passage says. What the reader does compare is a span against the
//! passage's own no-answer position (it was trained to pick \[CLS\] in paragraphs without the
//! answer), so a candidate is scored `p / (p + null)`: the span probability against the no-answer
//! score of its passage, a monotonic function of `exp(span logit - null logit)` in which the
//! softmax normalisers cancel. Within one passage the order is the span probability's.
//!
//! Across passages the retriever's order is evidence too: the passage at rank `r` has its null
//! score multiplied by `r^a` ([`Aggregation::rank_prior`]), i.e. a span's odds against "no
//! answer here", `p / null`, are divided by `r^a`. Without it, reading more passages lets more
//! distractors in (see the README for the held-out measurements that chose `a`).

use lector_eval::normalize::normalize_answer;
use lector_index::Hit;
use lector_ingest::{page_of, section_path};
use lector_reader::{Answer, Prediction};
use serde::Serialize;

/// [`Aggregation::rank_prior`]'s default, chosen on held-out questions (README, `lector ask`).
pub const DEFAULT_RANK_PRIOR: f64 = 2.0;

/// Two candidates are near-tied when their best occurrences' log-odds against "no answer"
/// ([`Candidate::log_odds`]) differ by at most this much: close enough that the reader cannot
/// tell them apart, so `prefer_recent` may pick the newer evidence. On log-odds, not on the
/// score: scores crowd just under 1 (0.9999 and 0.9 are 9.2 and 2.2 in log-odds), so a ratio of
/// scores would call a sure answer and a guess tied. Measured on 2,000 held-out questions by
/// `bench/near_tie.py` (docs/open-domain.md): up to a gap of 0.1 the better-scored of two answers
/// from different documents is the right one 5 times in 8; beyond, 7 in 10.
pub const NEAR_TIE_LOG_ODDS: f64 = 0.1;

/// What the reader made of one retrieved passage.
#[derive(Debug, Clone, Serialize)]
pub struct PassageReading {
    /// The retrieved passage (its `score` is the retrieval score).
    #[serde(flatten)]
    pub hit: Hit,
    /// The document's date, verbatim.
    pub date: Option<String>,
    /// The reader's answers in this passage, best first; offsets index the passage text.
    pub answers: Vec<Answer>,
    /// The reader's no-answer score for this passage.
    pub null_score: f64,
    /// The reader's no-answer probability for this passage.
    pub na_prob: f64,
}

impl PassageReading {
    /// Pairs a retrieved passage with the reader's prediction on it.
    pub fn new(hit: Hit, date: Option<String>, prediction: Prediction) -> Self {
        PassageReading {
            hit,
            date,
            answers: prediction.answers,
            null_score: prediction.null_score,
            na_prob: prediction.na_prob,
        }
    }

    /// The reader's best span score in this passage (0 without a span).
    pub fn best_score(&self) -> f64 {
        self.answers.first().map_or(0.0, |a| a.score)
    }
}

/// Where an answer comes from.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Evidence {
    /// The document id.
    pub doc_id: String,
    /// The document title.
    pub title: Option<String>,
    /// The document date, verbatim.
    pub date: Option<String>,
    /// The document metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<serde_json::Value>,
    /// The page (1-based) of the answer's first character, for documents with pages (PDF).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub page: Option<usize>,
    /// The headings above the answer, for documents with sections (DOCX).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub section: Option<String>,
    /// 1-based rank of the passage among those read (the reranker's, with a reranker).
    pub rank: usize,
    /// Position of the passage in its document (0-based).
    pub passage: usize,
    /// The passage text.
    pub passage_text: String,
    /// Character offsets of the answer in the passage text.
    pub passage_start: usize,
    pub passage_end: usize,
    /// Character offsets of the answer in the document text (Unicode scalar values, as Python
    /// indexes strings): the passage's `char_start` plus the offsets in the passage.
    pub start: usize,
    pub end: usize,
}

/// One answer candidate after merging the passages' answers.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Candidate {
    /// The answer text (of its best-scoring occurrence).
    pub text: String,
    /// The best [`answer_score`] among its occurrences (against the passage's null score with the
    /// rank prior), or with voting their sum.
    pub score: f64,
    /// The reader's span probability (`p_start * p_end`) of the best occurrence.
    pub reader_score: f64,
    /// The best occurrence's log-odds against "no answer": `ln(span / null)`, with the passage's
    /// null score weighted by the rank prior (so `score` is its logistic, without voting).
    pub log_odds: f64,
    /// The probability that this answer is right: the index's confidence map
    /// ([`crate::calibration::Confidence`], fitted by `lector calibrate`) applied to `log_odds`;
    /// `None` without a map. The map is fitted on first candidates, so a runner-up's is what a
    /// first candidate with its log-odds would get.
    pub confidence: Option<f64>,
    /// Distinct passages in which the reader proposed it.
    pub passages: usize,
    /// The best-scoring occurrence.
    pub evidence: Evidence,
}

/// Why the pipeline gave no answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Abstention {
    /// Retrieval found no passage sharing a term with the question.
    NoPassages,
    /// The reader proposed no span in any passage.
    NoSpan,
    /// The no-answer probability is above the threshold.
    BelowThreshold,
}

/// How candidates are combined and when to abstain.
#[derive(Debug, Clone, Copy)]
pub struct Aggregation {
    /// Add up the scores of answers that normalise to the same text.
    pub vote: bool,
    /// Among near-tied candidates ([`NEAR_TIE_LOG_ODDS`]), put the one with the newest dated evidence first.
    pub prefer_recent: bool,
    /// Abstain when the no-answer probability is above this.
    pub threshold: f64,
    /// Exponent `a` of the retrieval-rank prior: a span read in the passage at rank `r` is
    /// scored against its passage's null score times `r^a`. 0: every passage alike.
    pub rank_prior: f64,
}

/// The outcome of [`aggregate`].
#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    /// Every candidate, best first (after the recency tie-break).
    pub candidates: Vec<Candidate>,
    /// `null / (null + score)` of the top-scoring candidate, with `null` its passage's no-answer
    /// score; 1 without a candidate.
    pub na_prob: f64,
    /// Why there is no answer, if there is none.
    pub abstention: Option<Abstention>,
    /// The recency tie-break changed the first candidate.
    pub reordered_by_date: bool,
}

/// Merges the answers of every passage into ranked candidates and decides whether to answer.
///
/// Candidates are keyed by [`normalize_answer`] (answers that normalise to nothing keep their
/// lowercased text as key). A candidate's score is its best occurrence's [`answer_score`], or
/// with `vote` the sum over its occurrences. The no-answer probability compares the top
/// candidate's best occurrence with the null score of the passage it was read from, so with one
/// passage it is exactly the reader's own `na_prob` and a threshold calibrated on reader outputs
/// applies.
pub fn aggregate(readings: &[PassageReading], how: &Aggregation) -> Verdict {
    let mut candidates = merge_candidates(readings, how);
    // Stable: equal scores keep retrieval order.
    candidates.sort_by(|a, b| b.score.total_cmp(&a.score));
    let na_prob = candidates.first().map_or(1.0, |top| {
        let null = readings[top.evidence.rank - 1].null_score;
        1.0 - answer_score(top.reader_score, null)
    });
    let abstention = if readings.is_empty() {
        Some(Abstention::NoPassages)
    } else if candidates.is_empty() {
        Some(Abstention::NoSpan)
    } else if na_prob > how.threshold {
        Some(Abstention::BelowThreshold)
    } else {
        None
    };
    let reordered_by_date = how.prefer_recent && prefer_recent(&mut candidates);
    Verdict {
        candidates,
        na_prob,
        abstention,
        reordered_by_date,
    }
}

/// A candidate being merged: its key, its best single occurrence's score, its passages.
struct Group {
    key: String,
    candidate: Candidate,
    best_single: f64,
    seen_in: Vec<usize>,
}

/// One candidate per normalised text, in first-seen order.
fn merge_candidates(readings: &[PassageReading], how: &Aggregation) -> Vec<Candidate> {
    let mut groups: Vec<Group> = Vec::new();
    for (i, reading) in readings.iter().enumerate() {
        for answer in reading.answers.iter().filter(|a| !a.answer.is_empty()) {
            let key = match normalize_answer(&answer.answer) {
                k if k.is_empty() => answer.answer.to_lowercase(),
                k => k,
            };
            let occurrence = candidate(reading, i + 1, answer, how.rank_prior);
            let Some(group) = groups.iter_mut().find(|g| g.key == key) else {
                groups.push(Group {
                    key,
                    best_single: occurrence.score,
                    candidate: occurrence,
                    seen_in: vec![i],
                });
                continue;
            };
            let c = &mut group.candidate;
            c.score = if how.vote {
                c.score + occurrence.score
            } else {
                c.score.max(occurrence.score)
            };
            if occurrence.score > group.best_single {
                group.best_single = occurrence.score;
                c.text = occurrence.text;
                c.reader_score = occurrence.reader_score;
                c.log_odds = occurrence.log_odds;
                c.evidence = occurrence.evidence;
            }
            if !group.seen_in.contains(&i) {
                group.seen_in.push(i);
                c.passages += 1;
            }
        }
    }
    groups.into_iter().map(|g| g.candidate).collect()
}

/// The candidate for one answer of the passage at 1-based `rank`.
fn candidate(reading: &PassageReading, rank: usize, answer: &Answer, rank_prior: f64) -> Candidate {
    let hit = &reading.hit;
    let null = reading.null_score * (rank as f64).powf(rank_prior);
    Candidate {
        text: answer.answer.clone(),
        score: answer_score(answer.score, null),
        reader_score: answer.score,
        log_odds: log_odds(answer.score, null),
        confidence: None,
        passages: 1,
        evidence: Evidence {
            doc_id: hit.doc_id.clone(),
            title: hit.title.clone(),
            date: reading.date.clone(),
            metadata: hit.metadata.clone(),
            page: page_of(hit.metadata.as_ref(), hit.span.char_start + answer.start),
            section: section_path(hit.metadata.as_ref(), hit.span.char_start + answer.start),
            rank,
            passage: hit.passage,
            passage_text: hit.text.clone(),
            passage_start: answer.start,
            passage_end: answer.end,
            start: hit.span.char_start + answer.start,
            end: hit.span.char_start + answer.end,
        },
    }
}

/// `ln(span / null)`, finite: probabilities below 1e-300 count as 1e-300.
pub fn log_odds(span: f64, null: f64) -> f64 {
    span.max(1e-300).ln() - null.max(1e-300).ln()
}

/// A span of probability `span` against its passage's no-answer score `null`: `span / (span +
/// null)`, 0 when both are 0. See the module documentation for why answers from different
/// passages are compared on this and not on `span`.
pub fn answer_score(span: f64, null: f64) -> f64 {
    if span + null > 0.0 {
        span / (span + null)
    } else {
        0.0
    }
}

/// Moves the near-tied candidate with the newest date to the front; true when that changed the
/// first candidate. Undated or unparsable dates never win over a dated candidate.
fn prefer_recent(candidates: &mut [Candidate]) -> bool {
    let Some(top) = candidates.first().map(|c| c.log_odds) else {
        return false;
    };
    let near = candidates
        .iter()
        .take_while(|c| top - c.log_odds <= NEAR_TIE_LOG_ODDS)
        .count();
    let newest = (0..near)
        .filter_map(|i| date_key(candidates[i].evidence.date.as_deref()?).map(|d| (d, i)))
        // On equal dates the better-scored (earlier) candidate stays.
        .fold(
            None,
            |best: Option<((u32, u32, u32), usize)>, (d, i)| match best {
                Some((bd, _)) if bd >= d => best,
                _ => Some((d, i)),
            },
        );
    match newest {
        Some((_, i)) if i > 0 => {
            candidates[..=i].rotate_right(1);
            true
        }
        _ => false,
    }
}

/// (year, month, day) of an ISO 8601 date or date-time (`2024`, `2024-03`, `2024-03-05`,
/// `2024-03-05T10:00:00Z`); a missing month or day sorts before any given one.
pub fn date_key(date: &str) -> Option<(u32, u32, u32)> {
    let day_part = date.trim().split(['T', ' ']).next()?;
    let mut parts = day_part.split('-');
    let year = parse_part(parts.next()?, 4)?;
    let month = parts.next().map(|m| parse_part(m, 2)).unwrap_or(Some(0))?;
    let day = parts.next().map(|d| parse_part(d, 2)).unwrap_or(Some(0))?;
    let valid = parts.next().is_none() && month <= 12 && day <= 31;
    valid.then_some((year, month, day))
}

fn parse_part(text: &str, digits: usize) -> Option<u32> {
    (text.len() == digits && text.bytes().all(|b| b.is_ascii_digit()))
        .then(|| text.parse().ok())
        .flatten()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use lector_index::Span;

    /// A passage of document `doc` in which the reader read `answers` (text, span probability),
    /// best first, against the no-answer score `null`.
    pub(crate) fn reading(
        doc: &str,
        date: Option<&str>,
        null: f64,
        answers: &[(&str, f64)],
    ) -> PassageReading {
        let text = answers
            .iter()
            .map(|(a, _)| *a)
            .collect::<Vec<_>>()
            .join(" | ");
        let mut at = 0;
        let answers = answers
            .iter()
            .map(|&(a, score)| {
                let start = at;
                at += a.chars().count() + 3;
                Answer {
                    answer: a.into(),
                    score,
                    start,
                    end: start + a.chars().count(),
                }
            })
            .collect();
        let chars = text.chars().count();
        PassageReading {
            hit: Hit {
                doc_id: doc.into(),
                title: None,
                metadata: None,
                page: None,
                section: None,
                passage: 1,
                span: Span {
                    byte_start: 100,
                    byte_end: 100 + text.len(),
                    char_start: 90,
                    char_end: 90 + chars,
                },
                text,
                score: 1.0,
                sources: Vec::new(),
            },
            date: date.map(str::to_string),
            answers,
            null_score: null,
            na_prob: 0.0,
        }
    }

    fn how(vote: bool, prefer_recent: bool) -> Aggregation {
        Aggregation {
            vote,
            prefer_recent,
            threshold: 0.5,
            rank_prior: 0.0,
        }
    }

    fn texts(v: &Verdict) -> Vec<&str> {
        v.candidates.iter().map(|c| c.text.as_str()).collect()
    }

    #[test]
    fn highest_score_wins_and_duplicates_merge_by_normalised_text() {
        let readings = [
            reading("a", None, 0.01, &[("the Broncos", 0.4), ("Panthers", 0.3)]),
            reading("b", None, 0.01, &[("Panthers", 0.35), ("Broncos.", 0.3)]),
        ];
        let plain = aggregate(&readings, &how(false, false));
        assert_eq!(texts(&plain), ["the Broncos", "Panthers"]);
        assert_eq!(plain.candidates[0].score, answer_score(0.4, 0.01));
        assert_eq!(plain.candidates[0].reader_score, 0.4);
        assert_eq!(plain.candidates[0].passages, 2);
        // The evidence is the best occurrence: "Panthers" at 0.35 in the second passage.
        assert_eq!(plain.candidates[1].evidence.doc_id, "b");
        assert_eq!(plain.candidates[1].evidence.rank, 2);
        let voted = aggregate(&readings, &how(true, false));
        assert_eq!(texts(&voted), ["the Broncos", "Panthers"]);
        let sum = |a: f64, b: f64| answer_score(a, 0.01) + answer_score(b, 0.01);
        assert!((voted.candidates[0].score - sum(0.4, 0.3)).abs() < 1e-12);
        assert!((voted.candidates[1].score - sum(0.3, 0.35)).abs() < 1e-12);
    }

    #[test]
    fn voting_lets_agreement_beat_a_single_strong_span() {
        let readings = [
            reading("a", None, 0.01, &[("the Congress of Vienna", 0.5)]),
            reading("b", None, 0.01, &[("Treaty of Paris", 0.3)]),
            reading("c", None, 0.01, &[("the treaty of Paris.", 0.3)]),
        ];
        let plain = aggregate(&readings, &how(false, false));
        assert_eq!(texts(&plain)[0], "the Congress of Vienna");
        let voted = aggregate(&readings, &how(true, false));
        assert_eq!(voted.candidates[0].text, "Treaty of Paris");
        assert_eq!(voted.candidates[0].passages, 2);
        assert!((voted.candidates[0].score - 2.0 * answer_score(0.3, 0.01)).abs() < 1e-12);
    }

    #[test]
    fn spans_are_compared_against_their_own_passages_no_answer_score() {
        // The distractor's span is likelier within its passage, but the reader puts even more
        // on "no answer" there; the other passage's span beats its null score by far.
        let readings = [
            reading("distractor", None, 0.5, &[("Panthers", 0.45)]),
            reading("gold", None, 0.001, &[("Broncos", 0.3)]),
        ];
        let v = aggregate(&readings, &how(false, false));
        assert_eq!(texts(&v), ["Broncos", "Panthers"]);
        assert_eq!(v.candidates[0].evidence.doc_id, "gold");
        assert!((v.na_prob - 0.001 / 0.301).abs() < 1e-12);
        assert_eq!(answer_score(0.0, 0.0), 0.0);
    }

    #[test]
    fn document_offsets_add_the_passage_start() {
        let readings = [reading("a", None, 0.01, &[("x", 0.2), ("yz", 0.9)])];
        let v = aggregate(&readings, &how(false, false));
        let e = &v.candidates[0].evidence;
        assert_eq!((e.passage_start, e.passage_end), (4, 6));
        assert_eq!((e.start, e.end), (94, 96));
        let inside: String = e
            .passage_text
            .chars()
            .skip(e.passage_start)
            .take(2)
            .collect();
        assert_eq!(inside, "yz");
    }

    #[test]
    fn the_rank_prior_divides_a_span_s_odds_by_its_rank_to_the_power_a() {
        // Odds against "no answer": 30 at rank 1, 45 at rank 2 (45 / 2^2 = 11.25 with a = 2).
        let readings = [
            reading("first", None, 0.01, &[("Broncos", 0.3)]),
            reading("second", None, 0.01, &[("Panthers", 0.45)]),
        ];
        let flat = aggregate(&readings, &how(false, false));
        assert_eq!(texts(&flat), ["Panthers", "Broncos"]);
        let prior = Aggregation {
            rank_prior: 2.0,
            ..how(false, false)
        };
        let v = aggregate(&readings, &prior);
        assert_eq!(texts(&v), ["Broncos", "Panthers"]);
        assert_eq!(v.candidates[1].score, answer_score(0.45, 0.04));
        assert_eq!(v.candidates[0].score, answer_score(0.3, 0.01));
        // The no-answer probability stays the reader's own on the winning passage.
        assert!((v.na_prob - 0.01 / 0.31).abs() < 1e-12);
    }

    #[test]
    fn abstains_when_the_null_score_wins() {
        let confident = [reading("a", None, 0.1, &[("x", 0.3)])];
        let v = aggregate(&confident, &how(false, false));
        assert!((v.na_prob - 0.25).abs() < 1e-12);
        assert_eq!(v.abstention, None);
        let unsure = [reading("a", None, 0.4, &[("x", 0.3)])];
        let v = aggregate(&unsure, &how(false, false));
        assert_eq!(v.abstention, Some(Abstention::BelowThreshold));
        let strict = Aggregation {
            threshold: 0.2,
            ..how(false, false)
        };
        assert_eq!(
            aggregate(&confident, &strict).abstention,
            Some(Abstention::BelowThreshold)
        );
        assert_eq!(
            aggregate(&[], &how(false, false)).abstention,
            Some(Abstention::NoPassages)
        );
        let empty = [reading("a", None, 0.4, &[])];
        assert_eq!(
            aggregate(&empty, &how(false, false)).abstention,
            Some(Abstention::NoSpan)
        );
    }

    #[test]
    fn prefer_recent_breaks_near_ties_only() {
        let readings = [
            reading("old", Some("2019-05-01"), 0.5, &[("Alice", 0.50)]),
            reading("new", Some("2024-01-15"), 0.5, &[("Bob", 0.46)]),
            reading("newest", Some("2025-01-01"), 0.5, &[("Carol", 0.40)]),
        ];
        let v = aggregate(&readings, &how(false, true));
        // Log-odds 0, -0.083, -0.223: Carol is newest but not within the margin, Bob is.
        assert_eq!(texts(&v), ["Bob", "Alice", "Carol"]);
        assert!(v.reordered_by_date);
        let v = aggregate(&readings, &how(false, false));
        assert_eq!(texts(&v), ["Alice", "Bob", "Carol"]);
        let undated = [
            reading("old", Some("2019"), 0.5, &[("Alice", 0.50)]),
            reading("new", None, 0.5, &[("Bob", 0.49)]),
        ];
        assert!(!aggregate(&undated, &how(false, true)).reordered_by_date);
    }

    #[test]
    fn iso_dates_parse_with_optional_parts() {
        assert_eq!(date_key("2024-03-05"), Some((2024, 3, 5)));
        assert_eq!(date_key("2024-03-05T10:00:00Z"), Some((2024, 3, 5)));
        assert_eq!(date_key(" 2024-03 "), Some((2024, 3, 0)));
        assert_eq!(date_key("2024"), Some((2024, 0, 0)));
        assert!(date_key("2024") < date_key("2024-01"));
        assert_eq!(date_key("March 2024"), None);
        assert_eq!(date_key("2024-13-01"), None);
        assert_eq!(date_key("24-01-01"), None);
    }
}
