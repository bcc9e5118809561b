//! The area under the ROC curve of a score that ranks positives above negatives.
//!
//! AUROC is the probability that a random positive scores above a random negative, ties counting
//! one half: the Mann-Whitney U statistic of the positives over `n_pos * n_neg`. Computed from
//! mid-ranks (tied scores share the mean of their ranks), which gives exactly that tie rule, in
//! O(n log n).

/// The AUROC of `scores` (higher = more likely positive) for the items where `positive` holds;
/// `None` when there is no positive or no negative, or a score is NaN.
///
/// # Panics
/// If `scores` and `positive` differ in length.
pub fn auroc(scores: &[f64], positive: &[bool]) -> Option<f64> {
    assert_eq!(
        scores.len(),
        positive.len(),
        "one label per score is needed"
    );
    if scores.iter().any(|s| s.is_nan()) {
        return None;
    }
    let n_pos = positive.iter().filter(|&&p| p).count();
    let n_neg = positive.len() - n_pos;
    if n_pos == 0 || n_neg == 0 {
        return None;
    }
    let ranks = mid_ranks(scores);
    let rank_sum: f64 = ranks
        .iter()
        .zip(positive)
        .filter(|(_, &p)| p)
        .map(|(r, _)| r)
        .sum();
    let (p, n) = (n_pos as f64, n_neg as f64);
    let u = rank_sum - p * (p + 1.0) / 2.0;
    Some(u / (p * n))
}

/// The 1-based rank of each score in ascending order, tied scores sharing their mean rank.
fn mid_ranks(scores: &[f64]) -> Vec<f64> {
    let mut order: Vec<usize> = (0..scores.len()).collect();
    order.sort_by(|&a, &b| scores[a].total_cmp(&scores[b]));
    let mut ranks = vec![0.0; scores.len()];
    let mut start = 0;
    while start < order.len() {
        let mut end = start + 1;
        while end < order.len() && scores[order[end]] == scores[order[start]] {
            end += 1;
        }
        // Ranks start + 1 ..= end share their mean.
        let mean = (start + 1 + end) as f64 / 2.0;
        for &i in &order[start..end] {
            ranks[i] = mean;
        }
        start = end;
    }
    ranks
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn perfect_inverted_and_uninformative_rankings() {
        let labels = [true, true, false, false];
        assert_eq!(auroc(&[0.9, 0.8, 0.2, 0.1], &labels), Some(1.0));
        assert_eq!(auroc(&[0.1, 0.2, 0.8, 0.9], &labels), Some(0.0));
        assert_eq!(auroc(&[0.5; 4], &labels), Some(0.5));
    }

    #[test]
    fn hand_computed_with_ties() {
        // Positives 0.8, 0.4, 0.4; negatives 0.4, 0.3. Pairs (pos, neg):
        // 0.8 beats both (2); each 0.4 ties 0.4 (1/2) and beats 0.3 (1): 2 * 1.5 = 3.
        // U = 5 of 6 pairs.
        let scores = [0.8, 0.4, 0.4, 0.4, 0.3];
        let labels = [true, true, true, false, false];
        let a = auroc(&scores, &labels).unwrap();
        assert!((a - 5.0 / 6.0).abs() < 1e-12, "{a}");
    }

    #[test]
    fn hand_computed_without_ties() {
        // Positives 3, 1; negatives 2, 0: pairs won 3>2, 3>0, 1>0; lost 1<2. U = 3 of 4.
        let a = auroc(&[3.0, 2.0, 1.0, 0.0], &[true, false, true, false]).unwrap();
        assert_eq!(a, 0.75);
    }

    #[test]
    fn agrees_with_counting_pairs() {
        let scores: Vec<f64> = (0..60).map(|i| f64::from((i * 37 % 11) as u8)).collect();
        let labels: Vec<bool> = (0..60).map(|i| i % 3 == 0 || i % 7 == 0).collect();
        let mut wins = 0.0;
        let mut pairs = 0.0;
        for (i, &si) in scores.iter().enumerate() {
            for (j, &sj) in scores.iter().enumerate() {
                if labels[i] && !labels[j] {
                    pairs += 1.0;
                    wins += if si > sj {
                        1.0
                    } else if si == sj {
                        0.5
                    } else {
                        0.0
                    };
                }
            }
        }
        let a = auroc(&scores, &labels).unwrap();
        assert!((a - wins / pairs).abs() < 1e-12, "{a} vs {}", wins / pairs);
    }

    #[test]
    fn undefined_without_both_classes_or_with_nan() {
        assert_eq!(auroc(&[0.1, 0.2], &[true, true]), None);
        assert_eq!(auroc(&[0.1, 0.2], &[false, false]), None);
        assert_eq!(auroc(&[], &[]), None);
        assert_eq!(auroc(&[f64::NAN, 0.2], &[true, false]), None);
    }
}
