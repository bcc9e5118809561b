//! A small seeded generator (SplitMix64). Training draws its data order, dropout masks and fresh
//! head weights from it, so a run is a function of its seed alone; streams are derived from
//! (seed, purpose, step) rather than carried along, which is what lets a resumed run draw exactly
//! what the uninterrupted one would have.

/// SplitMix64 (Steele, Lea & Flood 2014): 64 bits of state, passes BigCrush, trivially seekable.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// The stream for `purpose` at `index` of a run seeded with `seed`.
    pub fn stream(seed: u64, purpose: u64, index: u64) -> Self {
        let mut rng = Rng(seed);
        let a = rng.next_u64() ^ purpose.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let mut rng = Rng(a);
        let b = rng.next_u64() ^ index.wrapping_mul(0xD1B5_4A32_D192_ED03);
        Rng(b)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1), 24 random bits.
    pub fn uniform(&mut self) -> f32 {
        (self.next_u64() >> 40) as f32 / (1u64 << 24) as f32
    }

    /// Standard normal (Box-Muller).
    pub fn normal(&mut self) -> f64 {
        let u1 = ((self.next_u64() >> 11) as f64 + 1.0) / (1u64 << 53) as f64;
        let u2 = (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
        (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    }

    /// Uniform in `0..n` (n > 0), without modulo bias worth noticing for training data sizes.
    pub fn below(&mut self, n: usize) -> usize {
        ((self.next_u64() as u128 * n as u128) >> 64) as usize
    }

    /// Fisher-Yates shuffle.
    pub fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            items.swap(i, self.below(i + 1));
        }
    }
}

/// Purposes of the derived streams.
pub(crate) const ORDER: u64 = 1;
pub(crate) const DROPOUT: u64 = 2;
pub(crate) const INIT: u64 = 3;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_are_reproducible_and_distinct() {
        let a: Vec<u64> = (0..4)
            .map(|_| Rng::stream(7, ORDER, 3).next_u64())
            .collect();
        assert!(a.windows(2).all(|w| w[0] == w[1]));
        assert_ne!(
            Rng::stream(7, ORDER, 3).next_u64(),
            Rng::stream(7, ORDER, 4).next_u64()
        );
        assert_ne!(
            Rng::stream(7, ORDER, 3).next_u64(),
            Rng::stream(7, DROPOUT, 3).next_u64()
        );
    }

    #[test]
    fn uniform_and_normal_have_the_right_moments() {
        let mut rng = Rng::stream(1, 0, 0);
        let n = 100_000;
        let u: f64 = (0..n).map(|_| rng.uniform() as f64).sum::<f64>() / n as f64;
        assert!((u - 0.5).abs() < 0.01, "mean of uniform {u}");
        let xs: Vec<f64> = (0..n).map(|_| rng.normal()).collect();
        let mean = xs.iter().sum::<f64>() / n as f64;
        let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n as f64;
        assert!(
            mean.abs() < 0.02 && (var - 1.0).abs() < 0.02,
            "{mean} {var}"
        );
    }

    #[test]
    fn shuffle_is_a_permutation() {
        let mut items: Vec<usize> = (0..1000).collect();
        Rng::stream(3, ORDER, 0).shuffle(&mut items);
        assert_ne!(items, (0..1000).collect::<Vec<_>>());
        items.sort_unstable();
        assert_eq!(items, (0..1000).collect::<Vec<_>>());
    }
}
