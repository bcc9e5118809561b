//! Agreement between two raters and association with a number, as used to check an LLM judge
//! (`lector eval judge`) against labels.
//!
//! - [`cohen_kappa`]: Cohen's kappa of two raters over the same items, any number of categories,
//!   unweighted: `(p_o - p_e) / (1 - p_e)` with `p_o` the observed agreement and `p_e` the agreement
//!   expected from each rater's marginal shares. 1 is perfect agreement, 0 what chance gives.
//!   Undefined (`None`) for no items, and when both raters use one and the same category for every
//!   item (`p_e = 1`: chance already agrees perfectly), as scikit-learn's `cohen_kappa_score`,
//!   which returns NaN there.
//! - [`kappa_interval`]: kappa with a percentile-bootstrap interval over items.
//! - [`pearson`]: Pearson's correlation; with one variable 0/1 it is the point-biserial
//!   correlation (the same number: the point-biserial coefficient is Pearson's r on a binary
//!   variable).

use super::{quantile, Bootstrap, Interval, Rng};
use std::collections::BTreeMap;

/// Cohen's kappa of the rater pairs `(first, second)`, one pair per item; `None` when undefined
/// (see the module docs).
pub fn cohen_kappa<T: Ord>(pairs: &[(T, T)]) -> Option<f64> {
    let indices: Vec<usize> = (0..pairs.len()).collect();
    kappa_of(pairs, &indices)
}

/// Kappa over the items `pairs[i]` for `i` in `indices` (repeats allowed, for the bootstrap).
fn kappa_of<T: Ord>(pairs: &[(T, T)], indices: &[usize]) -> Option<f64> {
    if indices.is_empty() {
        return None;
    }
    let n = indices.len() as f64;
    // Per category: (items the first rater put there, items the second rater put there).
    let mut marginals: BTreeMap<&T, (usize, usize)> = BTreeMap::new();
    let mut agreed = 0usize;
    for &i in indices {
        let (a, b) = &pairs[i];
        marginals.entry(a).or_default().0 += 1;
        marginals.entry(b).or_default().1 += 1;
        agreed += usize::from(a == b);
    }
    let observed = agreed as f64 / n;
    let expected: f64 = marginals
        .values()
        .map(|&(a, b)| (a as f64 / n) * (b as f64 / n))
        .sum();
    // Rounding can leave p_e a hair below 1 when it is 1 in exact arithmetic.
    if expected >= 1.0 - 1e-12 {
        return None;
    }
    Some((observed - expected) / (1.0 - expected))
}

/// Kappa of `pairs` (as `mean`) with a percentile-bootstrap interval: items are resampled with
/// replacement `settings.resamples` times and kappa recomputed. Resamples where kappa is
/// undefined (every item drawn in one category by both raters) are left out; `None` when kappa
/// itself is undefined.
pub fn kappa_interval<T: Ord>(pairs: &[(T, T)], settings: &Bootstrap) -> Option<Interval> {
    let point = cohen_kappa(pairs)?;
    let n = pairs.len();
    let mut rng = Rng::new(settings.seed);
    let mut indices = vec![0; n];
    let mut kappas: Vec<f64> = Vec::with_capacity(settings.resamples);
    for _ in 0..settings.resamples.max(1) {
        for slot in indices.iter_mut() {
            *slot = rng.below(n);
        }
        if let Some(k) = kappa_of(pairs, &indices) {
            kappas.push(k);
        }
    }
    if kappas.is_empty() {
        return Some(Interval {
            mean: point,
            low: f64::NAN,
            high: f64::NAN,
        });
    }
    kappas.sort_by(f64::total_cmp);
    let alpha = 1.0 - settings.confidence;
    Some(Interval {
        mean: point,
        low: quantile(&kappas, alpha / 2.0),
        high: quantile(&kappas, 1.0 - alpha / 2.0),
    })
}

/// Pearson's correlation of `x` and `y` (same length); `None` for fewer than two points, when
/// the lengths differ, or when either variable is constant.
pub fn pearson(x: &[f64], y: &[f64]) -> Option<f64> {
    if x.len() != y.len() || x.len() < 2 {
        return None;
    }
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    let (mx, my) = (mean(x), mean(y));
    let (mut sxy, mut sxx, mut syy) = (0.0, 0.0, 0.0);
    for (a, b) in x.iter().zip(y) {
        let (dx, dy) = (a - mx, b - my);
        sxy += dx * dy;
        sxx += dx * dx;
        syy += dy * dy;
    }
    if sxx <= 0.0 || syy <= 0.0 {
        return None;
    }
    Some((sxy / (sxx.sqrt() * syy.sqrt())).clamp(-1.0, 1.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `count` copies of the pair `(a, b)`.
    fn repeat(a: &'static str, b: &'static str, count: usize) -> Vec<(&'static str, &'static str)> {
        vec![(a, b); count]
    }

    #[test]
    fn kappa_of_two_categories_matches_the_hand_computed_value() {
        // 50 items: both yes 20, first yes second no 5, first no second yes 10, both no 15.
        // p_o = 35/50 = 0.7; first says yes 25/50, second 30/50;
        // p_e = 0.5 * 0.6 + 0.5 * 0.4 = 0.5; kappa = (0.7 - 0.5) / 0.5 = 0.4.
        let mut pairs = repeat("yes", "yes", 20);
        pairs.extend(repeat("yes", "no", 5));
        pairs.extend(repeat("no", "yes", 10));
        pairs.extend(repeat("no", "no", 15));
        let kappa = cohen_kappa(&pairs).unwrap();
        assert!((kappa - 0.4).abs() < 1e-12, "{kappa}");
    }

    #[test]
    fn kappa_of_three_categories_matches_the_hand_computed_value() {
        // 10 items; p_o = 7/10; marginals c 4/4, p 3/3, i 3/3;
        // p_e = 0.16 + 0.09 + 0.09 = 0.34; kappa = 0.36 / 0.66 = 6/11.
        let mut pairs = repeat("c", "c", 3);
        pairs.extend(repeat("p", "p", 2));
        pairs.extend(repeat("i", "i", 2));
        pairs.extend([("c", "p"), ("p", "i"), ("i", "c")]);
        let kappa = cohen_kappa(&pairs).unwrap();
        assert!((kappa - 6.0 / 11.0).abs() < 1e-12, "{kappa}");
    }

    #[test]
    fn kappa_is_one_for_perfect_agreement_and_negative_for_systematic_disagreement() {
        let same = [(1, 1), (2, 2), (1, 1), (3, 3)];
        assert_eq!(cohen_kappa(&same), Some(1.0));
        // Always opposite on a balanced yes/no: p_o = 0, p_e = 0.5, kappa = -1.
        let opposite = [(0, 1), (1, 0), (0, 1), (1, 0)];
        assert_eq!(cohen_kappa(&opposite), Some(-1.0));
    }

    #[test]
    fn kappa_is_undefined_without_items_or_variation() {
        assert_eq!(cohen_kappa::<u8>(&[]), None);
        assert_eq!(cohen_kappa(&[("a", "a"), ("a", "a")]), None);
        // One rater constant, the other not: p_e = 0.5 < 1, defined (and 0: no better than chance).
        assert_eq!(cohen_kappa(&[("a", "a"), ("a", "b")]), Some(0.0));
    }

    #[test]
    fn kappa_interval_brackets_the_estimate_narrows_with_more_items_and_is_reproducible() {
        let mut pairs = repeat("yes", "yes", 20);
        pairs.extend(repeat("yes", "no", 5));
        pairs.extend(repeat("no", "yes", 10));
        pairs.extend(repeat("no", "no", 15));
        let settings = Bootstrap::default();
        let small = kappa_interval(&pairs, &settings).unwrap();
        assert_eq!(small.mean, cohen_kappa(&pairs).unwrap());
        assert!(
            small.low < small.mean && small.mean < small.high,
            "{small:?}"
        );
        assert_eq!(small, kappa_interval(&pairs, &settings).unwrap());
        let large: Vec<_> = pairs
            .iter()
            .cycle()
            .take(pairs.len() * 16)
            .copied()
            .collect();
        let large = kappa_interval(&large, &settings).unwrap();
        // The width shrinks like 1/sqrt(n): 16 times the items, about a quarter of the width.
        let ratio = (large.high - large.low) / (small.high - small.low);
        assert!((0.15..0.4).contains(&ratio), "{ratio} {small:?} {large:?}");
        assert_eq!(kappa_interval::<u8>(&[], &settings), None);
    }

    #[test]
    fn pearson_matches_hand_computed_values() {
        // dx = -2..2, dy = (-2, 0, 1, 0, 1): r = 6 / sqrt(10 * 6).
        let r = pearson(&[1.0, 2.0, 3.0, 4.0, 5.0], &[2.0, 4.0, 5.0, 4.0, 5.0]).unwrap();
        assert!((r - 6.0 / 60f64.sqrt()).abs() < 1e-12, "{r}");
        // Point-biserial: lengths 10, 8, 6 judged correct, 2, 4 not. (M1 - M0) / s * sqrt(pq)
        // = (8 - 3) / sqrt(8) * sqrt(0.24) = sqrt(3) / 2.
        let r = pearson(&[10.0, 2.0, 8.0, 6.0, 4.0], &[1.0, 0.0, 1.0, 1.0, 0.0]).unwrap();
        assert!((r - 3f64.sqrt() / 2.0).abs() < 1e-12, "{r}");
    }

    #[test]
    fn pearson_is_undefined_for_constant_or_short_input() {
        assert_eq!(pearson(&[1.0, 2.0], &[3.0, 3.0]), None);
        assert_eq!(pearson(&[1.0], &[1.0]), None);
        assert_eq!(pearson(&[1.0, 2.0], &[1.0]), None);
        let r = pearson(&[1.0, 2.0, 3.0], &[3.0, 2.0, 1.0]).unwrap();
        assert!((r + 1.0).abs() < 1e-12, "{r}");
    }
}
