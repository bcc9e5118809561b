//! Span decoding, step for step as transformers' `select_starts_ends` and `decode_spans`
//! (question-answering pipeline, v4.57), on the logits of one window.

/// The logit the pipeline gives to tokens that cannot be part of an answer.
const MASKED_LOGIT: f32 = -10000.0;

/// A candidate answer: token positions in the window (inclusive) and `p_start * p_end`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Span {
    pub start: usize,
    pub end: usize,
    pub score: f32,
}

/// Softmax over one window after setting undesired tokens (question, special tokens, padding)
/// to -10000, in float32 like numpy, summing pairwise like numpy so that scores agree to the last bits.
pub fn masked_softmax(logits: &[f32], desired: &[bool]) -> Vec<f32> {
    let masked: Vec<f32> = logits
        .iter()
        .zip(desired)
        .map(|(&x, &ok)| if ok { x } else { MASKED_LOGIT })
        .collect();
    let max = masked.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let exps: Vec<f32> = masked.iter().map(|&x| (x - max).exp()).collect();
    let sum = pairwise_sum(&exps);
    exps.iter().map(|&e| e / sum).collect()
}

/// numpy's pairwise summation for float32 (`pairwise_sum` in `loops_utils.h.src`).
fn pairwise_sum(xs: &[f32]) -> f32 {
    const BLOCK: usize = 128;
    let n = xs.len();
    if n < 8 {
        return xs.iter().fold(-0.0, |acc, &x| acc + x);
    }
    if n <= BLOCK {
        let mut r = [0f32; 8];
        r.copy_from_slice(&xs[..8]);
        let whole = n - n % 8;
        for chunk in xs[8..whole].chunks_exact(8) {
            for (acc, &x) in r.iter_mut().zip(chunk) {
                *acc += x;
            }
        }
        let mut total = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
        for &x in &xs[whole..] {
            total += x;
        }
        return total;
    }
    let mut half = n / 2;
    half -= half % 8;
    pairwise_sum(&xs[..half]) + pairwise_sum(&xs[half..])
}

/// The best `k` spans with `end - start < max_answer_len`, best first; equal scores keep the
/// row-major order of the flattened start x end matrix, as numpy's argmax does.
///
/// `p_start[0]` and `p_end[0]` (the CLS position) must already be zeroed. Only spans with a
/// positive score are returned: the pipeline may pad its top-k with zero-probability spans, which
/// can never outrank a real one.
pub fn top_spans(p_start: &[f32], p_end: &[f32], k: usize, max_answer_len: usize) -> Vec<Span> {
    let mut best: Vec<Span> = Vec::with_capacity(k + 1);
    for (start, &ps) in p_start.iter().enumerate() {
        if ps <= 0.0 {
            continue;
        }
        let stop = (start + max_answer_len).min(p_end.len());
        for (end, &pe) in p_end.iter().enumerate().take(stop).skip(start) {
            let score = ps * pe;
            if score > 0.0 {
                insert_ranked(&mut best, Span { start, end, score }, k);
            }
        }
    }
    best
}

/// Inserts after every span with a score >= `span.score` (earlier spans win ties), keeping `k`.
fn insert_ranked(best: &mut Vec<Span>, span: Span, k: usize) {
    if best.len() == k && best.last().is_some_and(|last| last.score >= span.score) {
        return;
    }
    let at = best.partition_point(|b| b.score >= span.score);
    best.insert(at, span);
    best.truncate(k);
}

/// Probabilities, the null score `p_start[CLS] * p_end[CLS]`, and the top spans of one window.
pub struct WindowScores {
    pub null_score: f32,
    pub spans: Vec<Span>,
}

/// `select_starts_ends`: softmax, null score at position 0, CLS zeroed, then [`top_spans`].
pub fn score_window(
    start_logits: &[f32],
    end_logits: &[f32],
    desired: &[bool],
    k: usize,
    max_answer_len: usize,
) -> WindowScores {
    let mut p_start = masked_softmax(start_logits, desired);
    let mut p_end = masked_softmax(end_logits, desired);
    let null_score = p_start[0] * p_end[0];
    p_start[0] = 0.0;
    p_end[0] = 0.0;
    WindowScores {
        null_score,
        spans: top_spans(&p_start, &p_end, k, max_answer_len),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn span(start: usize, end: usize) -> (usize, usize) {
        (start, end)
    }

    fn positions(spans: &[Span]) -> Vec<(usize, usize)> {
        spans.iter().map(|s| span(s.start, s.end)).collect()
    }

    #[test]
    fn softmax_ignores_masked_tokens() {
        let p = masked_softmax(&[0.0, 5.0, 1.0, 1.0], &[true, false, true, true]);
        assert_eq!(p[1], 0.0);
        assert!((p[0] + p[2] + p[3] - 1.0).abs() < 1e-6);
        assert!((p[2] - p[3]).abs() < 1e-9);
    }

    #[test]
    fn pairwise_sum_matches_plain_sum_on_exact_values() {
        let xs: Vec<f32> = (0..1000).map(|i| (i % 7) as f32).collect();
        assert_eq!(pairwise_sum(&xs), xs.iter().sum::<f32>());
    }

    #[test]
    fn ties_keep_row_major_order() {
        // Every span of equal-probability tokens has the same score: order is (start, end) ascending.
        let p = [0.0, 0.25, 0.25, 0.25, 0.25];
        let spans = top_spans(&p, &p, 4, 15);
        assert_eq!(positions(&spans), vec![(1, 1), (1, 2), (1, 3), (1, 4)]);
    }

    #[test]
    fn max_answer_len_bounds_span_length() {
        let ps = [0.0, 0.9, 0.0, 0.0, 0.1];
        let pe = [0.0, 0.0, 0.0, 0.0, 1.0];
        assert_eq!(positions(&top_spans(&ps, &pe, 5, 3)), vec![(4, 4)]);
        assert_eq!(positions(&top_spans(&ps, &pe, 5, 4)), vec![(1, 4), (4, 4)]);
    }

    #[test]
    fn end_before_start_is_never_a_candidate() {
        let ps = [0.0, 0.0, 1.0];
        let pe = [0.0, 1.0, 0.0];
        assert!(top_spans(&ps, &pe, 3, 15).is_empty());
    }

    #[test]
    fn spans_never_touch_the_question() {
        // [CLS] q q [SEP] c c [SEP]: the question has the largest logits but is masked.
        let desired = [true, false, false, false, true, true, false];
        let start = [0.0, 9.0, 9.0, 9.0, 1.0, 0.5, 9.0];
        let end = [0.0, 9.0, 9.0, 9.0, 0.5, 1.0, 9.0];
        let w = score_window(&start, &end, &desired, 12, 15);
        assert_eq!(positions(&w.spans), vec![(4, 5), (4, 4), (5, 5)]);
        assert!(w.spans.iter().all(|s| desired[s.start] && desired[s.end]));
    }

    #[test]
    fn null_score_uses_cls_before_zeroing() {
        let desired = [true, false, true, true];
        let w = score_window(
            &[3.0, 0.0, 0.0, 0.0],
            &[3.0, 0.0, 0.0, 0.0],
            &desired,
            1,
            15,
        );
        assert!(w.null_score > 0.7, "null {}", w.null_score);
        assert!(w.spans[0].score < w.null_score);
        assert_ne!(w.spans[0].start, 0);
    }

    #[test]
    fn empty_window_has_no_spans() {
        let w = score_window(&[1.0, 2.0], &[1.0, 2.0], &[true, false], 12, 15);
        assert!(w.spans.is_empty());
        assert!((w.null_score - 1.0).abs() < 1e-6);
    }
}
