//! Confidence calibration: maps from a score to the probability that an answer is right, and how
//! far a set of confidences is from the truth.
//!
//! - [`Isotonic`]: isotonic regression by pool-adjacent-violators (PAV). Samples are sorted by
//!   score; samples with equal scores are pooled first (they must get one value); then adjacent
//!   blocks whose means are out of order (or equal) are merged until the block means increase.
//!   Each block keeps its lowest and highest score as two knots carrying the block mean, and the
//!   map interpolates **linearly between consecutive knots** (so it is flat within a block and
//!   ramps between blocks, like scikit-learn's `IsotonicRegression`), and is **constant beyond
//!   the first and last knots** (clipped: an unseen extreme score gets the extreme block's
//!   value). The result is non-decreasing and lies in \[0, 1\].
//! - [`Platt`]: Platt scaling, `p = 1 / (1 + exp(-(a x + b)))`, fitted by Newton's method with a
//!   backtracking line search (Lin, Lin and Weng, 2007) on Platt's smoothed targets: a right
//!   answer counts as `(N+ + 1) / (N+ + 2)` and a wrong one as `1 / (N- + 2)` (with `N+`, `N-` the
//!   numbers of right and wrong answers), which keeps the fit finite on separable data.
//! - [`expected_calibration_error`] (ECE) and [`reliability`]: confidences are put in `bins`
//!   equal-width bins of \[0, 1\] (bin `i` holds `[i/B, (i+1)/B)`, the last also holds 1; values
//!   outside \[0, 1\] count in the end bins); each bin has a mean confidence, an accuracy (share of
//!   right answers) and a count, and ECE is `Σ_b (n_b / N) |accuracy_b - confidence_b|`, the
//!   bins weighted by how many answers they hold (Naeini et al., 2015; Guo et al., 2017).
//!   [`DEFAULT_BINS`] is 10.

use serde::{Deserialize, Serialize};

/// The number of bins of [`expected_calibration_error`] unless told otherwise.
pub const DEFAULT_BINS: usize = 10;

/// Why a map cannot be fitted.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CalibrationError {
    /// No sample to fit on.
    #[error("no samples to fit a confidence map on")]
    NoSamples,
    /// A score is NaN or infinite.
    #[error("sample {index}: the score {value} is not a finite number")]
    NonFiniteScore { index: usize, value: f64 },
    /// A target is outside [0, 1].
    #[error("sample {index}: the target {value} is outside [0, 1]")]
    TargetOutOfRange { index: usize, value: f64 },
}

/// How a score is mapped to a probability.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Method {
    /// Isotonic regression ([`Isotonic`]).
    Isotonic,
    /// Platt scaling ([`Platt`]).
    Platt,
}

impl Method {
    /// The method's name as files and flags spell it.
    pub fn name(self) -> &'static str {
        match self {
            Method::Isotonic => "isotonic",
            Method::Platt => "platt",
        }
    }
}

impl std::fmt::Display for Method {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A monotone step-and-ramp map fitted by isotonic regression (see the module documentation).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Isotonic {
    /// `[score, probability]` pairs, scores and probabilities both non-decreasing.
    pub knots: Vec<[f64; 2]>,
}

/// One pooled block of the pool-adjacent-violators pass.
#[derive(Debug, Clone, Copy)]
struct Block {
    weight: f64,
    sum: f64,
    low: f64,
    high: f64,
}

impl Block {
    fn mean(&self) -> f64 {
        self.sum / self.weight
    }
}

impl Isotonic {
    /// Fits the map to `(score, target)` samples, targets in [0, 1] (1: right, 0: wrong).
    pub fn fit(samples: &[(f64, f64)]) -> Result<Isotonic, CalibrationError> {
        check_samples(samples)?;
        let mut sorted = samples.to_vec();
        sorted.sort_by(|a, b| a.0.total_cmp(&b.0));
        // Equal scores must get one value: pool them into one point before any ordering.
        let mut points: Vec<Block> = Vec::new();
        for (x, y) in sorted {
            match points.last_mut() {
                Some(last) if last.high == x => {
                    last.weight += 1.0;
                    last.sum += y;
                }
                _ => points.push(Block {
                    weight: 1.0,
                    sum: y,
                    low: x,
                    high: x,
                }),
            }
        }
        let mut blocks: Vec<Block> = Vec::with_capacity(points.len());
        for point in points {
            blocks.push(point);
            pool_violators(&mut blocks);
        }
        let knots = blocks
            .iter()
            .flat_map(|b| {
                let y = b.mean().clamp(0.0, 1.0);
                let high = (b.high > b.low).then_some([b.high, y]);
                std::iter::once([b.low, y]).chain(high)
            })
            .collect();
        Ok(Isotonic { knots })
    }

    /// The probability for `score`: linear between the knots around it, the end knots' values
    /// beyond them (NaN counts as below every knot).
    pub fn apply(&self, score: f64) -> f64 {
        let (Some(first), Some(last)) = (self.knots.first(), self.knots.last()) else {
            return f64::NAN;
        };
        if score.is_nan() || score <= first[0] {
            return first[1];
        }
        if score >= last[0] {
            return last[1];
        }
        // The first knot above `score`: it has a predecessor, since score > first[0].
        let above = self.knots.partition_point(|k| k[0] <= score);
        let ([x0, y0], [x1, y1]) = (self.knots[above - 1], self.knots[above]);
        let t = (score - x0) / (x1 - x0);
        (y0 + t * (y1 - y0)).clamp(0.0, 1.0)
    }

    /// Whether the knots describe a usable map: at least one, finite, scores and probabilities
    /// non-decreasing, probabilities in [0, 1].
    pub fn validate(&self) -> Result<(), String> {
        if self.knots.is_empty() {
            return Err("the isotonic map has no knots".into());
        }
        for (i, [x, y]) in self.knots.iter().enumerate() {
            if !x.is_finite() || !(0.0..=1.0).contains(y) {
                return Err(format!(
                    "isotonic knot {i} [{x}, {y}]: the score must be finite and the probability in [0, 1]"
                ));
            }
        }
        match self
            .knots
            .windows(2)
            .position(|w| w[1][0] < w[0][0] || w[1][1] < w[0][1])
        {
            Some(i) => Err(format!(
                "isotonic knots {i} and {}: scores and probabilities must not decrease",
                i + 1
            )),
            None => Ok(()),
        }
    }
}

/// Merges the last blocks while their means do not increase.
fn pool_violators(blocks: &mut Vec<Block>) {
    while blocks.len() >= 2 {
        let n = blocks.len();
        let last = blocks[n - 1];
        let previous = &mut blocks[n - 2];
        if previous.mean() < last.mean() {
            return;
        }
        previous.weight += last.weight;
        previous.sum += last.sum;
        previous.high = last.high;
        blocks.pop();
    }
}

/// A logistic map of the score, `1 / (1 + exp(-(a * score + b)))`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Platt {
    /// The slope (positive when a higher score means a likelier right answer).
    pub a: f64,
    /// The intercept.
    pub b: f64,
}

/// Newton's method stops after this many iterations...
const NEWTON_ITERATIONS: usize = 100;
/// ...or when the gradient is this small...
const NEWTON_TOLERANCE: f64 = 1e-8;
/// ...or when the line search needs a step this small.
const MIN_STEP: f64 = 1e-10;
/// Added to the Hessian's diagonal so it stays invertible (e.g. when every score is equal).
const RIDGE: f64 = 1e-12;

impl Platt {
    /// Fits `a` and `b` to `(score, right)` samples (see the module documentation).
    pub fn fit(samples: &[(f64, bool)]) -> Result<Platt, CalibrationError> {
        let as_targets: Vec<(f64, f64)> = samples
            .iter()
            .map(|&(x, right)| (x, f64::from(u8::from(right))))
            .collect();
        check_samples(&as_targets)?;
        let positives = samples.iter().filter(|s| s.1).count() as f64;
        let negatives = samples.len() as f64 - positives;
        let (high, low) = (
            (positives + 1.0) / (positives + 2.0),
            1.0 / (negatives + 2.0),
        );
        let targeted: Vec<(f64, f64)> = samples
            .iter()
            .map(|&(x, right)| (x, if right { high } else { low }))
            .collect();
        let mut params = [0.0, ((positives + 1.0) / (negatives + 1.0)).ln()];
        let mut loss = platt_loss(&targeted, params);
        for _ in 0..NEWTON_ITERATIONS {
            let (gradient, hessian) = platt_derivatives(&targeted, params);
            if gradient[0].abs() < NEWTON_TOLERANCE && gradient[1].abs() < NEWTON_TOLERANCE {
                break;
            }
            let direction = newton_direction(gradient, hessian);
            let slope = gradient[0] * direction[0] + gradient[1] * direction[1];
            let mut step = 1.0;
            let accepted = loop {
                let next = [
                    params[0] + step * direction[0],
                    params[1] + step * direction[1],
                ];
                let next_loss = platt_loss(&targeted, next);
                if next_loss <= loss + 1e-4 * step * slope {
                    break Some((next, next_loss));
                }
                step /= 2.0;
                if step < MIN_STEP {
                    break None;
                }
            };
            let Some((next, next_loss)) = accepted else {
                break;
            };
            params = next;
            loss = next_loss;
        }
        Ok(Platt {
            a: params[0],
            b: params[1],
        })
    }

    /// The probability for `score`.
    pub fn apply(&self, score: f64) -> f64 {
        sigmoid(self.a * score + self.b)
    }

    /// Whether both parameters are finite.
    pub fn validate(&self) -> Result<(), String> {
        if self.a.is_finite() && self.b.is_finite() {
            Ok(())
        } else {
            Err(format!(
                "Platt parameters a = {}, b = {} must be finite",
                self.a, self.b
            ))
        }
    }
}

fn sigmoid(z: f64) -> f64 {
    if z >= 0.0 {
        1.0 / (1.0 + (-z).exp())
    } else {
        let e = z.exp();
        e / (1.0 + e)
    }
}

/// `ln(1 + e^u)` without overflow.
fn softplus(u: f64) -> f64 {
    u.max(0.0) + (-u.abs()).exp().ln_1p()
}

/// Cross-entropy of the logistic map `params` against soft targets.
fn platt_loss(samples: &[(f64, f64)], [a, b]: [f64; 2]) -> f64 {
    samples
        .iter()
        .map(|&(x, t)| {
            let z = a * x + b;
            t * softplus(-z) + (1.0 - t) * softplus(z)
        })
        .sum()
}

/// The loss's gradient and Hessian with respect to (a, b).
fn platt_derivatives(samples: &[(f64, f64)], [a, b]: [f64; 2]) -> ([f64; 2], [[f64; 2]; 2]) {
    let mut g = [0.0; 2];
    let mut h = [[RIDGE, 0.0], [0.0, RIDGE]];
    for &(x, t) in samples {
        let p = sigmoid(a * x + b);
        let (d, w) = (p - t, p * (1.0 - p));
        g[0] += d * x;
        g[1] += d;
        h[0][0] += w * x * x;
        h[0][1] += w * x;
        h[1][1] += w;
    }
    h[1][0] = h[0][1];
    (g, h)
}

/// `-H^-1 g` for a symmetric positive definite 2x2 `H`.
fn newton_direction(g: [f64; 2], h: [[f64; 2]; 2]) -> [f64; 2] {
    let det = h[0][0] * h[1][1] - h[0][1] * h[1][0];
    [
        -(h[1][1] * g[0] - h[0][1] * g[1]) / det,
        -(h[0][0] * g[1] - h[1][0] * g[0]) / det,
    ]
}

/// A fitted map from a score to the probability that the answer is right. Stored as JSON with
/// its method as a tag: `{"method": "isotonic", "knots": [[x, p], ...]}` or
/// `{"method": "platt", "a": .., "b": ..}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "method", rename_all = "snake_case")]
pub enum ConfidenceMap {
    Isotonic(Isotonic),
    Platt(Platt),
}

impl ConfidenceMap {
    /// Fits a map of `method` to `(score, right)` samples.
    pub fn fit(method: Method, samples: &[(f64, bool)]) -> Result<Self, CalibrationError> {
        Ok(match method {
            Method::Isotonic => {
                let targets: Vec<(f64, f64)> = samples
                    .iter()
                    .map(|&(x, right)| (x, f64::from(u8::from(right))))
                    .collect();
                ConfidenceMap::Isotonic(Isotonic::fit(&targets)?)
            }
            Method::Platt => ConfidenceMap::Platt(Platt::fit(samples)?),
        })
    }

    /// The probability that an answer with `score` is right, in [0, 1].
    pub fn apply(&self, score: f64) -> f64 {
        match self {
            ConfidenceMap::Isotonic(m) => m.apply(score),
            ConfidenceMap::Platt(m) => m.apply(score),
        }
    }

    /// How the map was fitted.
    pub fn method(&self) -> Method {
        match self {
            ConfidenceMap::Isotonic(_) => Method::Isotonic,
            ConfidenceMap::Platt(_) => Method::Platt,
        }
    }

    /// Whether a map read from a file is usable (see [`Isotonic::validate`], [`Platt::validate`]).
    pub fn validate(&self) -> Result<(), String> {
        match self {
            ConfidenceMap::Isotonic(m) => m.validate(),
            ConfidenceMap::Platt(m) => m.validate(),
        }
    }
}

/// Out-of-fold confidences: the samples cut into `folds` runs of consecutive samples (so data
/// ordered by article or review is split by article or review, mostly), each run mapped by a map
/// fitted on the others. One confidence per sample, in order. Fewer than two samples or folds:
/// no held-out estimate is possible, and the result is empty.
pub fn cross_validate(
    method: Method,
    samples: &[(f64, bool)],
    folds: usize,
) -> Result<Vec<f64>, CalibrationError> {
    let folds = folds.min(samples.len());
    if folds < 2 {
        return Ok(Vec::new());
    }
    let mut out = Vec::with_capacity(samples.len());
    for fold in 0..folds {
        let range = fold * samples.len() / folds..(fold + 1) * samples.len() / folds;
        let training: Vec<(f64, bool)> = samples[..range.start]
            .iter()
            .chain(&samples[range.end..])
            .copied()
            .collect();
        let map = ConfidenceMap::fit(method, &training)?;
        out.extend(samples[range].iter().map(|&(x, _)| map.apply(x)));
    }
    Ok(out)
}

/// One bin of a reliability diagram.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ReliabilityBin {
    /// The bin's confidence range, `[low, high)` (the last bin also holds `high`).
    pub low: f64,
    pub high: f64,
    /// Answers whose confidence falls in the bin.
    pub count: usize,
    /// Their mean confidence (`None` when the bin is empty).
    pub confidence: Option<f64>,
    /// The share of them that are right (`None` when the bin is empty).
    pub accuracy: Option<f64>,
}

/// `(confidence, right)` pairs in `bins` equal-width bins of [0, 1] (see the module
/// documentation); every bin is returned, empty ones with no confidence or accuracy.
pub fn reliability(samples: &[(f64, bool)], bins: usize) -> Vec<ReliabilityBin> {
    let bins = bins.max(1);
    let mut sums = vec![(0usize, 0.0, 0usize); bins];
    for &(confidence, right) in samples {
        let bin = ((confidence.clamp(0.0, 1.0) * bins as f64) as usize).min(bins - 1);
        let s = &mut sums[bin];
        s.0 += 1;
        s.1 += confidence;
        s.2 += usize::from(right);
    }
    sums.iter()
        .enumerate()
        .map(|(i, &(count, confidence, right))| {
            let n = count as f64;
            ReliabilityBin {
                low: i as f64 / bins as f64,
                high: (i + 1) as f64 / bins as f64,
                count,
                confidence: (count > 0).then(|| confidence / n),
                accuracy: (count > 0).then(|| right as f64 / n),
            }
        })
        .collect()
}

/// The expected calibration error of `(confidence, right)` pairs over `bins` equal-width bins
/// (see the module documentation); NaN without samples.
pub fn expected_calibration_error(samples: &[(f64, bool)], bins: usize) -> f64 {
    ece_of_bins(&reliability(samples, bins))
}

/// The expected calibration error of reliability bins: the count-weighted mean gap between
/// accuracy and confidence; NaN when every bin is empty.
pub fn ece_of_bins(bins: &[ReliabilityBin]) -> f64 {
    let total: usize = bins.iter().map(|b| b.count).sum();
    let gaps: f64 = bins
        .iter()
        .filter_map(|b| Some(b.count as f64 * (b.accuracy? - b.confidence?).abs()))
        .sum();
    gaps / total as f64
}

fn check_samples(samples: &[(f64, f64)]) -> Result<(), CalibrationError> {
    if samples.is_empty() {
        return Err(CalibrationError::NoSamples);
    }
    for (index, &(x, y)) in samples.iter().enumerate() {
        if !x.is_finite() {
            return Err(CalibrationError::NonFiniteScore { index, value: x });
        }
        if !(0.0..=1.0).contains(&y) {
            return Err(CalibrationError::TargetOutOfRange { index, value: y });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn isotonic_pools_violators_and_interpolates_between_knots() {
        // (2, 1) then (3, 0) violate the order: pooled to 0.5 over scores 2..3.
        let map = Isotonic::fit(&[(3.0, 0.0), (1.0, 0.0), (4.0, 1.0), (2.0, 1.0)]).unwrap();
        assert_eq!(
            map.knots,
            vec![[1.0, 0.0], [2.0, 0.5], [3.0, 0.5], [4.0, 1.0]]
        );
        for (x, p) in [
            (-10.0, 0.0),
            (1.0, 0.0),
            (1.5, 0.25),
            (2.5, 0.5),
            (3.5, 0.75),
            (4.0, 1.0),
            (99.0, 1.0),
        ] {
            assert!(close(map.apply(x), p), "apply({x}) = {}", map.apply(x));
        }
        assert!(close(map.apply(f64::NAN), 0.0));
    }

    #[test]
    fn isotonic_gives_equal_scores_one_value() {
        // Score 1 is right once in two; score 2 never: all three pool to 1/3.
        let map = Isotonic::fit(&[(1.0, 1.0), (1.0, 0.0), (2.0, 0.0)]).unwrap();
        assert_eq!(map.knots.len(), 2);
        assert!(map.knots.iter().all(|k| close(k[1], 1.0 / 3.0)));
        // Already increasing: one block per distinct score, one knot each.
        let map = Isotonic::fit(&[(0.0, 0.0), (1.0, 0.0), (1.0, 1.0), (2.0, 1.0)]).unwrap();
        assert_eq!(map.knots, vec![[0.0, 0.0], [1.0, 0.5], [2.0, 1.0]]);
    }

    #[test]
    fn platt_recovers_the_hand_computed_fit() {
        // One right answer at +1, one wrong at -1: the smoothed targets are 2/3 and 1/3, which
        // a = ln 2, b = 0 fit exactly (sigmoid(ln 2) = 2/3).
        let map = Platt::fit(&[(1.0, true), (-1.0, false)]).unwrap();
        assert!((map.a - 2f64.ln()).abs() < 1e-6, "{map:?}");
        assert!(map.b.abs() < 1e-6, "{map:?}");
        assert!((map.apply(1.0) - 2.0 / 3.0).abs() < 1e-6);
        // Equal scores: no slope to learn; the intercept gives the smoothed base rate
        // (3 right of 4: targets 4/5 three times and 1/3 once, mean 0.6833...).
        let flat = Platt::fit(&[(0.5, true), (0.5, true), (0.5, true), (0.5, false)]).unwrap();
        let mean_target = (3.0 * 0.8 + 1.0 / 3.0) / 4.0;
        assert!((flat.apply(0.5) - mean_target).abs() < 1e-6, "{flat:?}");
    }

    #[test]
    fn platt_stays_finite_on_separable_data() {
        let samples: Vec<(f64, bool)> = (0..50).map(|i| (f64::from(i), i >= 25)).collect();
        let map = Platt::fit(&samples).unwrap();
        assert!(map.validate().is_ok() && map.a > 0.0, "{map:?}");
        assert!(map.apply(0.0) < 0.05 && map.apply(49.0) > 0.95, "{map:?}");
    }

    #[test]
    fn ece_weights_bins_by_their_counts() {
        let samples = [(0.05, false), (0.15, false), (0.95, true), (0.95, false)];
        // Bins 0 and 1 miss by 0.05 and 0.15; bin 9 by |0.5 - 0.95| = 0.45 for two answers.
        let ece = expected_calibration_error(&samples, DEFAULT_BINS);
        assert!(close(ece, (0.05 + 0.15 + 2.0 * 0.45) / 4.0), "{ece}");
        let bins = reliability(&samples, DEFAULT_BINS);
        assert_eq!(bins.len(), 10);
        assert_eq!(bins[9].count, 2);
        assert_eq!(bins[9].accuracy, Some(0.5));
        assert_eq!((bins[5].count, bins[5].confidence), (0, None));
        // 1.0 falls in the last bin, not an eleventh.
        assert_eq!(reliability(&[(1.0, true)], 4)[3].count, 1);
        assert!(expected_calibration_error(&[], 10).is_nan());
    }

    #[test]
    fn maps_round_trip_through_json_with_their_method() {
        let isotonic = ConfidenceMap::fit(Method::Isotonic, &[(0.1, false), (0.3, true)]).unwrap();
        let text = serde_json::to_string(&isotonic).unwrap();
        assert_eq!(
            text,
            r#"{"method":"isotonic","knots":[[0.1,0.0],[0.3,1.0]]}"#
        );
        let back: ConfidenceMap = serde_json::from_str(&text).unwrap();
        assert_eq!(back, isotonic);
        let platt = ConfidenceMap::Platt(Platt { a: 0.7, b: -1.25 });
        let back: ConfidenceMap =
            serde_json::from_str(&serde_json::to_string(&platt).unwrap()).unwrap();
        assert_eq!((back.method(), back), (Method::Platt, platt));
        let broken = Isotonic {
            knots: vec![[0.0, 0.6], [1.0, 0.4]],
        };
        assert!(broken.validate().unwrap_err().contains("must not decrease"));
    }

    #[test]
    fn bad_samples_are_named() {
        assert_eq!(
            ConfidenceMap::fit(Method::Platt, &[]),
            Err(CalibrationError::NoSamples)
        );
        let err = Isotonic::fit(&[(0.0, 1.0), (f64::INFINITY, 0.0)]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "sample 1: the score inf is not a finite number"
        );
    }

    #[test]
    fn cross_validation_maps_each_fold_with_the_others() {
        // Folds {0,1} and {2,3}: each half is mapped by the other half's isotonic fit.
        let samples = [(0.0, false), (1.0, true), (0.0, true), (1.0, true)];
        let out = cross_validate(Method::Isotonic, &samples, 2).unwrap();
        assert_eq!(out, vec![1.0, 1.0, 0.0, 1.0]);
        assert!(cross_validate(Method::Isotonic, &samples[..1], 5)
            .unwrap()
            .is_empty());
    }

    /// A deterministic uniform in [0, 1) from a counter (splitmix64).
    fn uniform(seed: u64, i: u64) -> f64 {
        let mut z = seed.wrapping_add(i.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64
    }

    proptest! {
        #[test]
        fn isotonic_is_monotone_and_in_the_unit_interval(
            samples in proptest::collection::vec((-50.0f64..50.0, proptest::bool::ANY), 1..200),
            probes in proptest::collection::vec(-60.0f64..60.0, 2..50),
        ) {
            let targets: Vec<(f64, f64)> =
                samples.iter().map(|&(x, r)| (x, f64::from(u8::from(r)))).collect();
            let map = Isotonic::fit(&targets).unwrap();
            prop_assert!(map.validate().is_ok());
            let mut probes = probes;
            probes.sort_by(f64::total_cmp);
            let values: Vec<f64> = probes.iter().map(|&x| map.apply(x)).collect();
            prop_assert!(values.windows(2).all(|w| w[0] <= w[1]), "{values:?}");
            prop_assert!(values.iter().all(|v| (0.0..=1.0).contains(v)));
            // PAV keeps the mean: the fitted values average to the share of right answers.
            let fitted: f64 = targets.iter().map(|&(x, _)| map.apply(x)).sum::<f64>();
            let right: f64 = targets.iter().map(|t| t.1).sum();
            prop_assert!((fitted - right).abs() < 1e-6 * targets.len() as f64);
        }

        #[test]
        fn a_perfectly_calibrated_sample_has_a_small_ece(seed in proptest::num::u64::ANY) {
            // Confidence c, right with probability exactly c: 5,000 answers.
            let samples: Vec<(f64, bool)> = (0..5000u64)
                .map(|i| {
                    let c = uniform(seed, 2 * i);
                    (c, uniform(seed, 2 * i + 1) < c)
                })
                .collect();
            let ece = expected_calibration_error(&samples, DEFAULT_BINS);
            prop_assert!(ece < 0.05, "ECE {ece}");
            // The same answers all claimed at 0.99 are far off.
            let overconfident: Vec<(f64, bool)> = samples.iter().map(|&(_, r)| (0.99, r)).collect();
            prop_assert!(expected_calibration_error(&overconfident, DEFAULT_BINS) > 0.4);
        }
    }
}
