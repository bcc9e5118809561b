//! When the documents disagree: an answer is **ambiguous** when a runner-up from another document
//! gives a different answer that is nearly as likely to be right.
//!
//! A runner-up is a *disagreeing reading* of the top answer when
//!
//! 1. the two differ after SQuAD normalisation (they are different candidates) and neither
//!    contains the other's normalised text as whole words ("Broncos" and "Denver Broncos", "1887"
//!    and "in 1887" are one reading, not two);
//! 2. it comes from another document than the top answer and than every reading already kept
//!    (one reading per document: its best);
//! 3. it is the reader's best span in its passage: what that document says, not an alternative
//!    span the reader ranked below another answer in the same passage (a passage whose best span
//!    is the top answer agrees with it, whatever else it mentions);
//! 4. the document says it: the runner-up's own no-answer probability (the logistic of minus its
//!    [`Candidate::log_odds`]) is at most the threshold the answer passed, so the pipeline would
//!    answer with it had it been the top candidate (a span the reader ranks below its passage's
//!    "no answer" is not what that passage says, however the confidence map rates it: the map is
//!    fitted on answers, and says little about spans that would not be given as one);
//! 5. the top answer is at most [`AskOptions::ambiguity_odds`](crate::AskOptions::ambiguity_odds)
//!    times as likely to be right as it: `p_top <= odds * p_runner_up`, with `p_runner_up > 0`.
//!
//! `p` is the candidate's calibrated confidence ([`Candidate::confidence`], from the index's
//! confidence map). Without a map nothing is flagged: the reader's own probabilities (the
//! logistic of [`Candidate::log_odds`], the span against its passage's no-answer score) crowd
//! just under 1 (log-odds 13 and 3 are 0.999998 and 0.95), so any two answers look "close" and
//! nearly every answer would be. Calibrate the index (`lector calibrate`) to get the flag.
//!
//! **Why odds of 3** ([`DEFAULT_AMBIGUITY_ODDS`]). Two different answers cannot both be right, so
//! given that one of them is, the top one is right with probability `p_top / (p_top +
//! p_runner_up)`: their ratio is the odds of one reading against the other, a Bayes factor when
//! neither is favoured beforehand. On Jeffreys' scale as Kass and Raftery (1995, "Bayes
//! Factors", JASA 90:773) state it, odds between 1 and 3 are evidence "not worth more than a bare
//! mention"; from 3 on, "positive". So the answer is flagged while the evidence for it over the
//! other reading is not worth more than a bare mention: the runner-up still has at least a one in
//! four chance of being the right one of the two. The value comes from that scale, not from any
//! evaluation set.
//!
//! An abstention is never ambiguous: there is no answer to doubt.

use crate::aggregate::{Candidate, PassageReading};
use lector_eval::normalize::normalize_answer;

/// [`AskOptions::ambiguity_odds`](crate::AskOptions::ambiguity_odds)'s default: flag the answer
/// while it is at most 3 times as likely to be right as a disagreeing runner-up (see the
/// [module documentation](self) for why 3).
pub const DEFAULT_AMBIGUITY_ODDS: f64 = 3.0;

/// The readings of an answer, as indices into `candidates` (best first): the top answer (0) and
/// every disagreeing runner-up (see the [module documentation](self)), or nothing when no
/// runner-up disagrees or the candidates carry no calibrated confidence. `passages` are the passages read, in retrieval order (each candidate's
/// [`Evidence::rank`](crate::Evidence::rank) indexes them); `threshold` is the no-answer
/// threshold the answer passed. Call it only for an answer, not an abstention.
pub fn disagreeing_readings(
    candidates: &[Candidate],
    passages: &[PassageReading],
    odds: f64,
    threshold: f64,
) -> Vec<usize> {
    let Some(top_probability) = candidates.first().and_then(|c| c.confidence) else {
        return Vec::new();
    };
    let mut readings = vec![0];
    for (i, runner_up) in candidates.iter().enumerate().skip(1) {
        let p = runner_up.confidence.unwrap_or(0.0);
        let answered = 1.0 / (1.0 + runner_up.log_odds.exp()) <= threshold;
        let close = answered && p > 0.0 && top_probability <= odds * p;
        let distinct = readings.iter().all(|&r| {
            let kept = &candidates[r];
            kept.evidence.doc_id != runner_up.evidence.doc_id
                && !nested(&kept.text, &runner_up.text)
        });
        if close && distinct && is_best_span_of_its_passage(runner_up, passages) {
            readings.push(i);
        }
    }
    if readings.len() > 1 {
        readings
    } else {
        Vec::new()
    }
}

/// Whether one answer's normalised text contains the other's as whole words (also when either
/// normalises to nothing: such an answer says nothing to disagree with).
pub fn nested(a: &str, b: &str) -> bool {
    let (a, b) = (normalize_answer(a), normalize_answer(b));
    if a.is_empty() || b.is_empty() {
        return true;
    }
    let (a, b) = (format!(" {a} "), format!(" {b} "));
    a.contains(&b) || b.contains(&a)
}

/// Whether the candidate is the reader's first answer in the passage its evidence comes from.
fn is_best_span_of_its_passage(candidate: &Candidate, passages: &[PassageReading]) -> bool {
    let best = candidate
        .evidence
        .rank
        .checked_sub(1)
        .and_then(|i| passages.get(i))
        .and_then(|p| p.answers.first());
    best.is_some_and(|a| normalize_answer(&a.answer) == normalize_answer(&candidate.text))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::aggregate::{aggregate, Aggregation};

    /// A passage of document `doc` in which the reader read `answers` against `null`.
    fn passage(doc: &str, null: f64, answers: &[(&str, f64)]) -> PassageReading {
        crate::aggregate::tests::reading(doc, None, null, answers)
    }

    /// The readings' texts, aggregated without a rank prior and with the given confidences (by
    /// candidate text; `None`: no map).
    fn readings(
        passages: &[PassageReading],
        confidence: &dyn Fn(&str) -> Option<f64>,
    ) -> Vec<String> {
        let how = Aggregation {
            vote: false,
            prefer_recent: false,
            threshold: 0.5,
            rank_prior: 0.0,
        };
        let mut candidates = aggregate(passages, &how).candidates;
        for c in &mut candidates {
            c.confidence = confidence(&c.text);
        }
        disagreeing_readings(&candidates, passages, DEFAULT_AMBIGUITY_ODDS, 0.5)
            .into_iter()
            .map(|i| candidates[i].text.clone())
            .collect()
    }

    fn map(pairs: &'static [(&'static str, f64)]) -> impl Fn(&str) -> Option<f64> {
        move |text| pairs.iter().find(|(t, _)| *t == text).map(|(_, p)| *p)
    }

    #[test]
    fn two_documents_with_different_years_close_in_confidence_disagree() {
        let passages = [
            passage("guide", 0.01, &[("1893", 0.6)]),
            passage("almanac", 0.01, &[("1887", 0.5)]),
        ];
        let confidences = map(&[("1893", 0.48), ("1887", 0.41)]);
        assert_eq!(readings(&passages, &confidences), ["1893", "1887"]);
        // The rule is on the confidences: the same spans, a runner-up a third as likely or less.
        assert!(readings(&passages, &map(&[("1893", 0.9), ("1887", 0.29)])).is_empty());
        assert_eq!(
            readings(&passages, &map(&[("1893", 0.9), ("1887", 0.31)])),
            ["1893", "1887"]
        );
        // A runner-up with no chance at all is no reading.
        assert!(readings(&passages, &map(&[("1893", 0.0), ("1887", 0.0)])).is_empty());
    }

    #[test]
    fn without_a_map_nothing_is_flagged() {
        // Log-odds ln(0.6 / 0.01) and ln(0.5 / 0.01): raw probabilities 0.98 and 0.98, as close
        // as two answers get, and still no flag without calibrated confidences.
        let close = [
            passage("guide", 0.01, &[("1893", 0.6)]),
            passage("almanac", 0.01, &[("1887", 0.5)]),
        ];
        assert!(readings(&close, &|_| None).is_empty());
        assert_eq!(readings(&close, &|_| Some(0.5)), ["1893", "1887"]);
    }

    #[test]
    fn a_span_below_its_passage_no_answer_score_is_no_reading() {
        // The almanac's 1887 loses to its passage's "no answer" (log-odds ln(0.3 / 0.6)): the
        // reader would not give it, whatever confidence a map puts on it.
        let passages = [
            passage("guide", 0.01, &[("1893", 0.6)]),
            passage("almanac", 0.6, &[("1887", 0.3)]),
        ];
        assert!(readings(&passages, &|_| Some(0.5)).is_empty());
    }

    #[test]
    fn nested_answers_agree() {
        let passages = [
            passage("a", 0.01, &[("Denver Broncos", 0.6)]),
            passage("b", 0.01, &[("the Broncos", 0.55)]),
            passage("c", 0.01, &[("in 1887", 0.5)]),
        ];
        assert_eq!(
            readings(&passages, &|_| Some(0.5)),
            ["Denver Broncos", "in 1887"]
        );
        assert!(nested("Broncos.", "Denver Broncos"));
        assert!(!nested("Bronco", "Denver Broncos"), "whole words only");
        assert!(
            nested("the", "1887"),
            "an answer of no words disagrees with nothing"
        );
    }

    #[test]
    fn the_same_document_or_a_lower_span_of_a_passage_is_no_disagreement() {
        // Another span of the top answer's own document.
        let same_document = [
            passage("a", 0.01, &[("1893", 0.6)]),
            passage("a", 0.01, &[("1887", 0.5)]),
        ];
        assert!(readings(&same_document, &|_| Some(0.5)).is_empty());
        // Document b's best span is the top answer: b agrees, though it also mentions 1887.
        let agreeing = [
            passage("a", 0.01, &[("1893", 0.6)]),
            passage("b", 0.01, &[("1893", 0.5), ("1887", 0.45)]),
        ];
        assert!(readings(&agreeing, &|_| Some(0.5)).is_empty());
        // One reading per document: c's 1901 is kept, c's weaker 1902 is not.
        let three = [
            passage("a", 0.01, &[("1893", 0.6)]),
            passage("b", 0.01, &[("1887", 0.55)]),
            passage("c", 0.01, &[("1901", 0.5)]),
            passage("c", 0.01, &[("1902", 0.45)]),
        ];
        assert_eq!(readings(&three, &|_| Some(0.5)), ["1893", "1887", "1901"]);
    }

    #[test]
    fn a_single_candidate_or_none_has_no_readings() {
        let one = [passage("a", 0.01, &[("1893", 0.6)])];
        assert!(readings(&one, &|_| Some(0.5)).is_empty());
        assert!(disagreeing_readings(&[], &[], DEFAULT_AMBIGUITY_ODDS, 0.5).is_empty());
    }
}
