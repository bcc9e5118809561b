//! The drift signals: each measurement compared between the two windows, tested, and flagged.

use super::measure::Measured;
use lector_eval::stats::mean;
use lector_eval::stats::two_sample::{fisher_exact, kolmogorov_smirnov, median, TestResult};

/// Fewest values a window needs for a signal (and asks for a window) to be compared at all.
pub const MIN_VALUES: usize = 5;

/// When a difference counts as drift.
#[derive(Debug, Clone, Copy)]
pub struct Thresholds {
    /// Significance level: the test's p-value must be below it.
    pub alpha: f64,
    /// Smallest effect: the KS D of a distribution, or the absolute change of a rate.
    pub min_effect: f64,
    /// A question's nearest passage is far below this cosine similarity.
    pub far_below: f64,
}

impl Thresholds {
    /// Refuses thresholds outside their ranges: `alpha` and `min_effect` in [0, 1], `far_below`
    /// a cosine in [-1, 1].
    pub fn check(&self) -> Result<(), String> {
        if !(0.0..=1.0).contains(&self.alpha) {
            return Err(format!("alpha {} is not between 0 and 1", self.alpha));
        }
        if !(0.0..=1.0).contains(&self.min_effect) {
            return Err(format!(
                "min_effect {} is not between 0 and 1",
                self.min_effect
            ));
        }
        if !(-1.0..=1.0).contains(&self.far_below) {
            return Err(format!(
                "far_below {} is not a cosine similarity (between -1 and 1)",
                self.far_below
            ));
        }
        Ok(())
    }
}

/// How a signal is summarised and tested.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Values summarised by mean and median, tested with Kolmogorov-Smirnov.
    Distribution,
    /// A share of asks, tested with Fisher's exact test.
    Rate,
    /// A share of question terms; tested with Kolmogorov-Smirnov on each question's share, as
    /// questions (not terms, which come in clusters) are the independent draws.
    TermShare,
}

/// One window's side of a signal.
#[derive(Debug, Clone)]
pub struct Side {
    /// Values measured (asks; terms for a term share).
    pub n: usize,
    /// The mean of a distribution, or the rate.
    pub headline: f64,
    /// A distribution's median.
    pub median: Option<f64>,
    /// A rate's numerator.
    pub count: Option<usize>,
    /// The values tested and plotted (per question; 0/1 for a rate).
    pub values: Vec<f64>,
}

/// A signal compared between the windows.
#[derive(Debug, Clone)]
pub struct Compared {
    pub before: Side,
    pub after: Side,
    pub test: TestResult,
    pub drifted: bool,
}

impl Compared {
    /// After minus before, of the mean or rate.
    pub fn change(&self) -> f64 {
        self.after.headline - self.before.headline
    }
}

/// A signal: compared, or why it could not be.
#[derive(Debug, Clone)]
pub struct Signal {
    /// Its key in `--json`.
    pub key: &'static str,
    /// Its name in the table and the HTML report.
    pub label: &'static str,
    /// The unit of its values (a plot's x axis).
    pub unit: &'static str,
    pub kind: Kind,
    pub outcome: Result<Compared, String>,
}

/// Every signal for the asks of the two windows. `index`: whether an index was given, and
/// whether it keeps passage vectors.
pub fn signals(
    before: &[Measured],
    after: &[Measured],
    index: Option<bool>,
    limits: Thresholds,
) -> Vec<Signal> {
    let need_index = || "needs --index".to_string();
    let need_vectors = || match index {
        None => "needs --index of a dense or hybrid index".to_string(),
        Some(_) => "the index has no passage vectors (`lector index add --dense`)".to_string(),
    };
    let far = |m: &Measured| m.nearest.map(|s| s < limits.far_below);
    let on = |f: &dyn Fn(&Measured) -> Option<f64>| (pick(before, f), pick(after, f));
    vec![
        distribution(
            ("question_words", "question length", "words"),
            on(&|m| Some(m.words)),
            limits,
        ),
        match index {
            None => unavailable(
                ("oov_rate", "out-of-vocabulary rate"),
                Kind::TermShare,
                need_index(),
            ),
            Some(_) => term_share(before, after, limits),
        },
        rate(
            ("abstention_rate", "abstention rate"),
            (
                flags(before, |m| Some(m.abstained)),
                flags(after, |m| Some(m.abstained)),
            ),
            limits,
        ),
        distribution(
            ("confidence", "confidence", "confidence"),
            on(&|m| m.confidence),
            limits,
        ),
        distribution(
            ("top_score", "top retrieval score", "score"),
            on(&|m| m.top_score),
            limits,
        ),
        match index {
            Some(true) => distribution(
                ("nearest_similarity", "nearest passage similarity", "cosine"),
                on(&|m| m.nearest),
                limits,
            ),
            _ => unavailable(
                ("nearest_similarity", "nearest passage similarity"),
                Kind::Distribution,
                need_vectors(),
            ),
        },
        match index {
            Some(true) => rate(
                ("far_share", "far from the index"),
                (flags(before, far), flags(after, far)),
                limits,
            ),
            _ => unavailable(
                ("far_share", "far from the index"),
                Kind::Rate,
                need_vectors(),
            ),
        },
    ]
}

fn pick(asks: &[Measured], f: &dyn Fn(&Measured) -> Option<f64>) -> Vec<f64> {
    asks.iter()
        .filter_map(f)
        .filter(|v| v.is_finite())
        .collect()
}

fn flags(asks: &[Measured], f: impl Fn(&Measured) -> Option<bool>) -> Vec<bool> {
    asks.iter().filter_map(f).collect()
}

fn unavailable((key, label): (&'static str, &'static str), kind: Kind, reason: String) -> Signal {
    Signal {
        key,
        label,
        unit: "",
        kind,
        outcome: Err(reason),
    }
}

/// `Err` naming the window with too few values.
fn enough(before: usize, after: usize) -> Result<(), String> {
    for (name, n) in [("before", before), ("after", after)] {
        if n < MIN_VALUES {
            return Err(format!(
                "only {n} asks of the {name} window have it (at least {MIN_VALUES} needed)"
            ));
        }
    }
    Ok(())
}

fn distribution(
    (key, label, unit): (&'static str, &'static str, &'static str),
    (before, after): (Vec<f64>, Vec<f64>),
    limits: Thresholds,
) -> Signal {
    let side = |values: Vec<f64>| Side {
        n: values.len(),
        headline: mean(&values),
        median: Some(median(&values)),
        count: None,
        values,
    };
    let outcome = enough(before.len(), after.len()).map(|()| {
        let test = kolmogorov_smirnov(&before, &after);
        compared(side(before), side(after), test, limits)
    });
    Signal {
        key,
        label,
        unit,
        kind: Kind::Distribution,
        outcome,
    }
}

fn rate(
    (key, label): (&'static str, &'static str),
    (before, after): (Vec<bool>, Vec<bool>),
    limits: Thresholds,
) -> Signal {
    let side = |flags: &[bool]| {
        let count = flags.iter().filter(|&&f| f).count();
        Side {
            n: flags.len(),
            headline: count as f64 / flags.len().max(1) as f64,
            median: None,
            count: Some(count),
            values: flags.iter().map(|&f| f64::from(u8::from(f))).collect(),
        }
    };
    let outcome = enough(before.len(), after.len()).map(|()| {
        let (b, a) = (side(&before), side(&after));
        let test = fisher_exact(b.count.unwrap_or(0), b.n, a.count.unwrap_or(0), a.n);
        compared(b, a, test, limits)
    });
    Signal {
        key,
        label,
        unit: "share",
        kind: Kind::Rate,
        outcome,
    }
}

/// The pooled share of question terms outside the vocabulary; tested on per-question shares.
fn term_share(before: &[Measured], after: &[Measured], limits: Thresholds) -> Signal {
    let side = |asks: &[Measured]| {
        let counts: Vec<(usize, usize)> = asks
            .iter()
            .filter_map(|m| m.oov)
            .filter(|&(_, terms)| terms > 0)
            .collect();
        let (unknown, terms) = counts
            .iter()
            .fold((0, 0), |(u, t), &(du, dt)| (u + du, t + dt));
        Side {
            n: terms,
            headline: unknown as f64 / terms.max(1) as f64,
            median: None,
            count: Some(unknown),
            values: counts.iter().map(|&(u, t)| u as f64 / t as f64).collect(),
        }
    };
    let (b, a) = (side(before), side(after));
    let outcome = enough(b.values.len(), a.values.len()).map(|()| {
        let test = kolmogorov_smirnov(&b.values, &a.values);
        compared(b, a, test, limits)
    });
    Signal {
        key: "oov_rate",
        label: "out-of-vocabulary rate",
        unit: "share of the question's terms",
        kind: Kind::TermShare,
        outcome,
    }
}

fn compared(before: Side, after: Side, test: TestResult, limits: Thresholds) -> Compared {
    let drifted = test.p_value < limits.alpha && test.statistic >= limits.min_effect;
    Compared {
        before,
        after,
        test,
        drifted,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ask(words: f64, abstained: bool, nearest: f64) -> Measured {
        Measured {
            words,
            oov: Some((usize::from(abstained), 4)),
            abstained,
            confidence: Some(0.5),
            top_score: Some(10.0),
            nearest: Some(nearest),
        }
    }

    const LIMITS: Thresholds = Thresholds {
        alpha: 0.01,
        min_effect: 0.05,
        far_below: 0.3,
    };

    fn by_key<'a>(signals: &'a [Signal], key: &str) -> &'a Signal {
        signals.iter().find(|s| s.key == key).unwrap()
    }

    #[test]
    fn flags_what_changed_and_only_that() {
        let before: Vec<Measured> = (0..40)
            .map(|i| ask(8.0 + f64::from(i % 3), i % 10 == 0, 0.6))
            .collect();
        let after: Vec<Measured> = (0..40)
            .map(|i| ask(16.0 + f64::from(i % 3), i % 2 == 0, 0.1))
            .collect();
        let signals = signals(&before, &after, Some(true), LIMITS);
        let drifted = |key| by_key(&signals, key).outcome.as_ref().unwrap().drifted;
        for key in [
            "question_words",
            "oov_rate",
            "abstention_rate",
            "nearest_similarity",
            "far_share",
        ] {
            assert!(drifted(key), "{key}");
        }
        for key in ["confidence", "top_score"] {
            assert!(!drifted(key), "{key}");
        }
        let words = by_key(&signals, "question_words").outcome.as_ref().unwrap();
        assert_eq!(
            (words.before.headline, words.after.headline),
            (8.975, 16.975)
        );
        assert_eq!(words.after.median, Some(17.0));
        let oov = by_key(&signals, "oov_rate").outcome.as_ref().unwrap();
        // 4 of 160 terms before, 20 of 160 after.
        assert_eq!(
            (oov.before.count, oov.after.count, oov.after.n),
            (Some(4), Some(20), 160)
        );
        assert!((oov.change() - 0.1).abs() < 1e-12);
        let far = by_key(&signals, "far_share").outcome.as_ref().unwrap();
        assert_eq!((far.before.headline, far.after.headline), (0.0, 1.0));
    }

    #[test]
    fn says_why_a_signal_is_missing() {
        let mut few: Vec<Measured> = (0..10).map(|_| ask(5.0, false, 0.5)).collect();
        for m in &mut few[3..] {
            m.confidence = None;
        }
        let signals = signals(&few, &few, None, LIMITS);
        let reason = |key| by_key(&signals, key).outcome.clone().unwrap_err();
        assert_eq!(reason("oov_rate"), "needs --index");
        assert!(reason("far_share").contains("dense or hybrid"));
        assert!(
            reason("confidence").contains("only 3 asks of the before window"),
            "{}",
            reason("confidence")
        );
        let vectorless = super::signals(&few, &few, Some(false), LIMITS);
        assert!(by_key(&vectorless, "nearest_similarity")
            .outcome
            .clone()
            .unwrap_err()
            .contains("no passage vectors"));
        assert!(by_key(&vectorless, "oov_rate").outcome.is_ok());
    }
}
