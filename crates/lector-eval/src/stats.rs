//! Statistics for metric means: bootstrap confidence intervals and paired significance tests;
//! two-sample tests of distributions and rates in [`two_sample`]; agreement between raters
//! (Cohen's kappa) and correlation in [`agreement`].
//!
//! Everything is seeded and reproducible: the same inputs and seed give the same interval on every
//! machine (a small xoshiro256** generator, no platform randomness).

use serde::Serialize;

pub mod agreement;
pub mod auroc;
pub mod two_sample;

/// Settings of the bootstrap.
#[derive(Debug, Clone, Copy)]
pub struct Bootstrap {
    /// Number of resamples (default 1,000).
    pub resamples: usize,
    /// Two-sided confidence level in (0, 1) (default 0.95).
    pub confidence: f64,
    /// Seed of the resampling generator.
    pub seed: u64,
}

impl Default for Bootstrap {
    fn default() -> Self {
        Bootstrap {
            resamples: 1000,
            confidence: 0.95,
            seed: 0,
        }
    }
}

impl Bootstrap {
    /// Refuses settings no interval can come from: no resamples, or a confidence outside (0, 1).
    pub fn check(&self) -> std::result::Result<(), String> {
        if self.resamples == 0 {
            return Err("resamples must be at least 1".into());
        }
        if !(self.confidence > 0.0 && self.confidence < 1.0) {
            return Err("confidence must be between 0 and 1 (exclusive)".into());
        }
        Ok(())
    }
}

/// A mean with its percentile-bootstrap confidence interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Interval {
    pub mean: f64,
    pub low: f64,
    pub high: f64,
}

impl Interval {
    /// The interval with every bound multiplied by `factor` (e.g. 100 for percentages).
    pub fn scaled(self, factor: f64) -> Interval {
        Interval {
            mean: self.mean * factor,
            low: self.low * factor,
            high: self.high * factor,
        }
    }
}

/// The mean of `values` with a percentile bootstrap interval (NaN bounds for an empty slice).
pub fn bootstrap_mean(values: &[f64], settings: &Bootstrap) -> Interval {
    let mean = mean(values);
    if values.is_empty() {
        return Interval {
            mean,
            low: f64::NAN,
            high: f64::NAN,
        };
    }
    let mut rng = Rng::new(settings.seed);
    let n = values.len();
    let mut means: Vec<f64> = (0..settings.resamples.max(1))
        .map(|_| (0..n).map(|_| values[rng.below(n)]).sum::<f64>() / n as f64)
        .collect();
    means.sort_by(f64::total_cmp);
    let alpha = 1.0 - settings.confidence;
    Interval {
        mean,
        low: quantile(&means, alpha / 2.0),
        high: quantile(&means, 1.0 - alpha / 2.0),
    }
}

/// Paired comparison of two systems scored on the same questions.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct PairedComparison {
    pub mean_a: f64,
    pub mean_b: f64,
    /// Mean of `b - a` with its paired-bootstrap interval.
    pub difference: Interval,
    /// Two-sided approximate-randomisation p-value of the difference.
    pub p_value: f64,
    /// Number of randomisation trials behind `p_value`.
    pub trials: usize,
}

/// Compares per-question scores `a` and `b` (same order, same questions): the mean difference `b - a`
/// with a paired-bootstrap interval and an approximate-randomisation p-value.
///
/// # Panics
/// If `a` and `b` differ in length; callers align the question sets first.
pub fn compare_paired(
    a: &[f64],
    b: &[f64],
    settings: &Bootstrap,
    trials: usize,
) -> PairedComparison {
    assert_eq!(a.len(), b.len(), "paired samples must have the same length");
    let diffs: Vec<f64> = a.iter().zip(b).map(|(x, y)| y - x).collect();
    PairedComparison {
        mean_a: mean(a),
        mean_b: mean(b),
        difference: bootstrap_mean(&diffs, settings),
        p_value: randomization_p_value(&diffs, trials, settings.seed),
        trials,
    }
}

/// Approximate randomisation on paired differences: under the null hypothesis each pair's labels are
/// exchangeable, so each difference flips sign with probability 1/2. p = (hits + 1) / (trials + 1),
/// where a hit is a shuffled |mean| at least the observed one.
fn randomization_p_value(diffs: &[f64], trials: usize, seed: u64) -> f64 {
    if diffs.is_empty() {
        return 1.0;
    }
    let observed = diffs.iter().sum::<f64>().abs();
    // Relative slack so sums that are equal up to rounding count as "at least as extreme".
    let slack = 1e-12 * diffs.iter().map(|d| d.abs()).sum::<f64>();
    let mut rng = Rng::new(seed ^ 0x5eed_5eed);
    let hits = (0..trials)
        .filter(|_| {
            let shuffled: f64 = diffs
                .iter()
                .map(|&d| if rng.next_u64() & 1 == 1 { -d } else { d })
                .sum();
            shuffled.abs() >= observed - slack
        })
        .count();
    (hits + 1) as f64 / (trials + 1) as f64
}

/// Arithmetic mean (NaN for an empty slice).
pub fn mean(values: &[f64]) -> f64 {
    values.iter().sum::<f64>() / values.len() as f64
}

/// Median and 95th percentile of per-query latencies, in the unit given (nearest rank, as
/// latency reports quote them).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct LatencySummary {
    pub count: usize,
    pub p50: f64,
    pub p95: f64,
}

/// Summarises latencies; `None` for none.
pub fn latency_summary(values: &[f64]) -> Option<LatencySummary> {
    if values.is_empty() {
        return None;
    }
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let at = |q: f64| sorted[((sorted.len() - 1) as f64 * q).round() as usize];
    Some(LatencySummary {
        count: sorted.len(),
        p50: at(0.5),
        p95: at(0.95),
    })
}

/// Linear-interpolation quantile of sorted values (numpy's default method).
fn quantile(sorted: &[f64], q: f64) -> f64 {
    let position = q.clamp(0.0, 1.0) * (sorted.len() - 1) as f64;
    let below = position.floor() as usize;
    let above = position.ceil() as usize;
    let weight = position - below as f64;
    sorted[below] + (sorted[above] - sorted[below]) * weight
}

/// xoshiro256** seeded through splitmix64: small, fast and identical everywhere.
pub(crate) struct Rng {
    state: [u64; 4],
}

impl Rng {
    pub(crate) fn new(seed: u64) -> Rng {
        let mut s = seed;
        let mut next = || {
            s = s.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = s;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        };
        Rng {
            state: [next(), next(), next(), next()],
        }
    }

    pub(crate) fn next_u64(&mut self) -> u64 {
        let s = &mut self.state;
        let result = s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = s[1] << 17;
        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = s[3].rotate_left(45);
        result
    }

    /// Uniform in `0..n` (Lemire's multiply-shift; the bias is below 2^-32 for n < 2^32).
    pub(crate) fn below(&mut self, n: usize) -> usize {
        ((u128::from(self.next_u64()) * n as u128) >> 64) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interval_brackets_the_mean_and_is_reproducible() {
        let values: Vec<f64> = (0..500).map(|i| f64::from(u8::from(i % 3 == 0))).collect();
        let settings = Bootstrap::default();
        let a = bootstrap_mean(&values, &settings);
        assert!(a.low < a.mean && a.mean < a.high, "{a:?}");
        // Normal approximation: sd of a proportion mean is sqrt(p(1-p)/n) ~ 0.021; 95% half-width ~ 0.041.
        assert!((a.high - a.low - 0.083).abs() < 0.015, "{a:?}");
        assert_eq!(a, bootstrap_mean(&values, &settings));
        let other = bootstrap_mean(
            &values,
            &Bootstrap {
                seed: 7,
                ..settings
            },
        );
        assert_ne!(a, other);
    }

    #[test]
    fn constant_values_give_a_degenerate_interval() {
        let a = bootstrap_mean(&[0.5; 10], &Bootstrap::default());
        assert_eq!((a.low, a.mean, a.high), (0.5, 0.5, 0.5));
    }

    #[test]
    fn identical_systems_are_not_significant_and_different_ones_are() {
        let a: Vec<f64> = (0..300).map(|i| f64::from(i % 2)).collect();
        let same = compare_paired(&a, &a, &Bootstrap::default(), 1000);
        assert_eq!(same.p_value, 1.0);
        assert_eq!(same.difference.mean, 0.0);
        let better: Vec<f64> = a
            .iter()
            .enumerate()
            .map(|(i, &x)| if i % 4 == 0 { 1.0 } else { x })
            .collect();
        let cmp = compare_paired(&a, &better, &Bootstrap::default(), 1000);
        assert!(cmp.p_value < 0.01, "{cmp:?}");
        assert!(cmp.difference.low > 0.0, "{cmp:?}");
    }

    #[test]
    fn quantile_interpolates_like_numpy() {
        let sorted = [1.0, 2.0, 3.0, 4.0];
        assert_eq!(quantile(&sorted, 0.5), 2.5);
        assert_eq!(quantile(&sorted, 0.025), 1.075);
        assert_eq!(quantile(&sorted, 1.0), 4.0);
    }
}
