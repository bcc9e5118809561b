//! Okapi BM25 over passages, with k1 and b chosen per index (stored) or per query.
//!
//! score(q, p) = Σ_t qtf(t) · idf(t) · tf(t, p) · (k1 + 1) / (tf(t, p) + k1 · (1 − b + b · |p| / avg|p|)),
//! idf(t) = ln(1 + (N − df(t) + 0.5) / (df(t) + 0.5)) — Lucene's non-negative idf.
//!
//! N, df and the average length count live (not deleted) passages only, so scores do not drift
//! as documents are replaced. Lengths are exact term counts (Lucene rounds them to one byte).

use serde::{Deserialize, Serialize};

/// BM25's free parameters.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Bm25Params {
    /// Term-frequency saturation (default 1.2).
    pub k1: f64,
    /// Length normalisation, 0 (none) to 1 (full) (default 0.75).
    pub b: f64,
}

impl Default for Bm25Params {
    fn default() -> Self {
        Bm25Params { k1: 1.2, b: 0.75 }
    }
}

impl Bm25Params {
    /// Checks the ranges where BM25 is meaningful.
    pub fn validate(self) -> Result<Self, String> {
        if !(self.k1.is_finite() && self.k1 >= 0.0) {
            return Err(format!("k1 must be a finite number >= 0, got {}", self.k1));
        }
        if !(0.0..=1.0).contains(&self.b) {
            return Err(format!("b must be in [0, 1], got {}", self.b));
        }
        Ok(self)
    }
}

/// Inverse document frequency of a term in `df` of `n` passages.
pub(crate) fn idf(n: usize, df: usize) -> f64 {
    let (n, df) = (n as f64, df as f64);
    (1.0 + (n - df + 0.5) / (df + 0.5)).ln()
}

/// Precomputed per-query constants of the term-frequency part.
pub(crate) struct TfNorm {
    k1: f64,
    b: f64,
    avg_len: f64,
}

impl TfNorm {
    pub fn new(params: Bm25Params, avg_len: f64) -> Self {
        TfNorm {
            k1: params.k1,
            b: params.b,
            avg_len: avg_len.max(f64::MIN_POSITIVE),
        }
    }

    /// The saturated, length-normalised weight of `tf` occurrences in a passage of `len` terms.
    pub fn weight(&self, tf: u32, len: u32) -> f64 {
        let tf = f64::from(tf);
        let norm = self.k1 * (1.0 - self.b + self.b * f64::from(len) / self.avg_len);
        tf * (self.k1 + 1.0) / (tf + norm)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn textbook_values() {
        // N = 10, df = 1: ln(1 + 9.5 / 1.5).
        assert!((idf(10, 1) - (1.0f64 + 9.5 / 1.5).ln()).abs() < 1e-12);
        assert!(
            idf(10, 10) > 0.0,
            "Lucene's idf stays positive for a term in every passage"
        );
        let norm = TfNorm::new(Bm25Params::default(), 10.0);
        // At average length, tf = 1 weighs (k1 + 1) / (1 + k1) = 1.
        assert!((norm.weight(1, 10) - 1.0).abs() < 1e-12);
        assert!(norm.weight(2, 10) > norm.weight(1, 10));
        assert!(norm.weight(1, 20) < norm.weight(1, 10));
        let no_length = TfNorm::new(Bm25Params { k1: 1.2, b: 0.0 }, 10.0);
        assert_eq!(no_length.weight(1, 5), no_length.weight(1, 500));
        assert!(Bm25Params { k1: 1.0, b: 1.5 }.validate().is_err());
    }
}
