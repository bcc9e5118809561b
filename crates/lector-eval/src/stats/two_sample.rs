//! Two-sample tests (behind `lector report drift`'s flags): Kolmogorov-Smirnov for distributions and
//! Fisher's exact test for rates, both distribution-free and without tuning (no bins to choose,
//! unlike the population stability index), and both with a p-value that says how surprising the
//! difference would be if nothing had changed.

/// A two-sample test: its statistic and p-value.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TestResult {
    /// KS D (the largest gap between the two cumulative distributions, 0 to 1), or for a rate
    /// the absolute change (which is the KS D of a yes/no variable).
    pub statistic: f64,
    /// The probability of a difference at least this large if both samples came from one
    /// distribution.
    pub p_value: f64,
}

/// The two-sample Kolmogorov-Smirnov test of `a` against `b` (both non-empty), with the
/// asymptotic p-value (Stephens' small-sample correction, as in Numerical Recipes' `probks`;
/// conservative when values tie, as counts do).
pub fn kolmogorov_smirnov(a: &[f64], b: &[f64]) -> TestResult {
    let (a, b) = (sorted(a), sorted(b));
    let (n, m) = (a.len() as f64, b.len() as f64);
    let (mut i, mut j, mut d) = (0, 0, 0.0f64);
    while i < a.len() && j < b.len() {
        // Step past every value equal to the smaller head, in both samples, before comparing,
        // so ties move both cumulative distributions at once.
        let x = a[i].min(b[j]);
        while i < a.len() && a[i] <= x {
            i += 1;
        }
        while j < b.len() && b[j] <= x {
            j += 1;
        }
        d = d.max((i as f64 / n - j as f64 / m).abs());
    }
    let effective = (n * m / (n + m)).sqrt();
    let lambda = (effective + 0.12 + 0.11 / effective) * d;
    TestResult {
        statistic: d,
        p_value: kolmogorov_q(lambda),
    }
}

/// The Kolmogorov distribution's upper tail, 2 Σ (-1)^(k-1) exp(-2 k² λ²).
fn kolmogorov_q(lambda: f64) -> f64 {
    let (mut sum, mut sign, mut previous) = (0.0, 1.0, 0.0);
    for k in 1..=100 {
        let k = f64::from(k);
        let term = sign * 2.0 * (-2.0 * k * k * lambda * lambda).exp();
        sum += term;
        if term.abs() <= 1e-3 * previous || term.abs() <= 1e-8 * sum {
            return sum.clamp(0.0, 1.0);
        }
        sign = -sign;
        previous = term.abs();
    }
    // The series only fails to converge for λ near 0, where the tail is 1.
    1.0
}

/// Fisher's exact test (two-sided) of `k1` successes in `n1` trials against `k2` in `n2`:
/// exact for any window size, where a z-test needs large counts. The statistic is the absolute
/// change in the rate.
pub fn fisher_exact(k1: usize, n1: usize, k2: usize, n2: usize) -> TestResult {
    let statistic = (k2 as f64 / n2.max(1) as f64 - k1 as f64 / n1.max(1) as f64).abs();
    let total = n1 + n2;
    let successes = k1 + k2;
    let ln_fact = ln_factorials(total);
    let ln_choose = |n: usize, k: usize| ln_fact[n] - ln_fact[k] - ln_fact[n - k];
    // P(X = x) for x successes among the first n1 of `total` trials holding `successes`.
    let probability = |x: usize| {
        (ln_choose(successes, x) + ln_choose(total - successes, n1 - x) - ln_choose(total, n1))
            .exp()
    };
    let observed = probability(k1);
    let low = n1.saturating_sub(total - successes);
    let high = successes.min(n1);
    // Tables no more likely than the observed one; the tolerance keeps exact ties in.
    let p_value: f64 = (low..=high)
        .map(probability)
        .filter(|&p| p <= observed * (1.0 + 1e-7))
        .sum();
    TestResult {
        statistic,
        p_value: p_value.min(1.0),
    }
}

/// ln(i!) for i in 0..=n.
fn ln_factorials(n: usize) -> Vec<f64> {
    let mut out = Vec::with_capacity(n + 1);
    out.push(0.0);
    for i in 1..=n {
        out.push(out[i - 1] + (i as f64).ln());
    }
    out
}

fn sorted(values: &[f64]) -> Vec<f64> {
    let mut out = values.to_vec();
    out.sort_by(f64::total_cmp);
    out
}

/// The median: the middle value, or the mean of the two middle ones (0 for no values).
pub fn median(values: &[f64]) -> f64 {
    let s = sorted(values);
    match s.len() {
        0 => 0.0,
        n if n % 2 == 1 => s[n / 2],
        n => (s[n / 2 - 1] + s[n / 2]) / 2.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ks_matches_reference_values() {
        // [1..5] against [3..8]: the cumulative distributions after 5 are 1 and 3/6, D = 0.5.
        let r = kolmogorov_smirnov(&[1.0, 2.0, 3.0, 4.0, 5.0], &[3.0, 4.0, 5.0, 6.0, 7.0, 8.0]);
        assert!((r.statistic - 0.5).abs() < 1e-12);
        // The Kolmogorov tail at its textbook points: Q(1.36) = 0.049, Q(1.63) = 0.010.
        assert!((kolmogorov_q(1.36) - 0.0494).abs() < 5e-4);
        assert!((kolmogorov_q(1.63) - 0.0098).abs() < 5e-4);
        assert_eq!(kolmogorov_q(0.0), 1.0);
        // Identical samples: no gap, nothing surprising.
        let same = kolmogorov_smirnov(&[1.0, 1.0, 2.0], &[2.0, 1.0, 1.0]);
        assert_eq!((same.statistic, same.p_value), (0.0, 1.0));
        // Disjoint samples of 30: D = 1, p far below any level.
        let a: Vec<f64> = (0..30).map(f64::from).collect();
        let b: Vec<f64> = (100..130).map(f64::from).collect();
        let far = kolmogorov_smirnov(&a, &b);
        assert_eq!(far.statistic, 1.0);
        assert!(far.p_value < 1e-9, "{}", far.p_value);
    }

    #[test]
    fn fisher_matches_reference_values() {
        // 3/30 against 18/30: p = 9.414e-5 (the same sum in exact integer arithmetic).
        let r = fisher_exact(3, 30, 18, 30);
        assert!((r.statistic - 0.5).abs() < 1e-12);
        assert!((r.p_value - 9.414e-5).abs() < 1e-8, "{}", r.p_value);
        // The lady tasting tea: 3 of 4 against 1 of 4, p = 0.4857.
        assert!((fisher_exact(3, 4, 1, 4).p_value - 0.4857).abs() < 1e-4);
        assert!((fisher_exact(5, 50, 5, 50).p_value - 1.0).abs() < 1e-9);
        assert_eq!(fisher_exact(0, 10, 0, 12).p_value, 1.0);
    }

    #[test]
    fn median_of_odd_even_and_no_values() {
        assert_eq!(median(&[6.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 6.0]), 3.0);
        assert_eq!(median(&[]), 0.0);
    }
}
