//! Running the layers of an encoder over a batch on the CPU.
//!
//! Activations are *packed*: the real tokens of every window, one window after another, no
//! padding (a padded batch of SQuAD windows is about a quarter padding, and attention over padded
//! keys is wasted work). The windows are split into parts of about equal cost, and each part goes
//! through all the layers on one thread with single-threaded products: the threads never wait for
//! each other between operations, unlike per-operation parallelism, which synchronises a few
//! dozen times per layer (and stalls whenever one thread is descheduled on a shared machine).

use crate::layers::{Scratch, TransformerLayer};
use crate::matmul::Threads;
use rayon::prelude::*;
use std::cell::RefCell;
use std::ops::Range;

/// Per-token hidden states of the real tokens of a batch, packed: `(tokens, width)` row-major,
/// window `w` owning the next `lengths[w]` rows.
pub(crate) struct Packed {
    pub data: Vec<f32>,
    pub width: usize,
    pub lengths: Vec<usize>,
}

impl Packed {
    pub(crate) fn tokens(&self) -> usize {
        self.lengths.iter().sum()
    }

    /// The element range of each window in `data`.
    pub(crate) fn windows(&self) -> impl Iterator<Item = Range<usize>> + '_ {
        self.lengths.iter().scan(0, |first, &len| {
            let range = *first * self.width..(*first + len) * self.width;
            *first += len;
            Some(range)
        })
    }
}

/// Tokens per part, about: parts that are a small share of a batch let idle threads take over
/// the remaining ones (rayon's work stealing) when their first finish early, and products of
/// about 1,000 rows still run at full speed (512 to 2,048 measured the same).
const PART_TOKENS: usize = 1024;

thread_local! {
    static SCRATCH: RefCell<Scratch> = RefCell::default();
}

/// Runs `layers` in place over the packed activations `xs`.
pub(crate) fn run(layers: &[TransformerLayer], xs: &mut Packed) {
    let threads = rayon::current_num_threads();
    if threads == 1 {
        return run_part(layers, &mut xs.data, &xs.lengths, Threads::One);
    }
    if xs.lengths.len() < 2 {
        // One window (a single short question): spread each product over the pool instead.
        return run_part(layers, &mut xs.data, &xs.lengths, Threads::Pool(threads));
    }
    let cost = |len| layers.first().map_or(len, |layer| layer.cost(len));
    // A multiple of the thread count: parts of equal cost then split evenly between the
    // threads (7 parts on 2 threads leave one thread idle for a seventh of the batch).
    let count = (xs.tokens() / PART_TOKENS).max(1).next_multiple_of(threads);
    let mut parts = Vec::with_capacity(count);
    let mut rest = xs.data.as_mut_slice();
    for windows in split(&xs.lengths, count, cost) {
        let lengths = &xs.lengths[windows];
        let (part, tail) = rest.split_at_mut(lengths.iter().sum::<usize>() * xs.width);
        parts.push((part, lengths));
        rest = tail;
    }
    parts
        .into_par_iter()
        .for_each(|(part, lengths)| run_part(layers, part, lengths, Threads::One));
}

fn run_part(layers: &[TransformerLayer], xs: &mut [f32], lengths: &[usize], threads: Threads) {
    SCRATCH.with(|cell| {
        // A thread that steals work while waiting inside a parallel product could re-enter here:
        // it then uses buffers of its own.
        let mut own = Scratch::default();
        let mut borrowed = cell.try_borrow_mut();
        let scratch = borrowed.as_deref_mut().unwrap_or(&mut own);
        for layer in layers {
            layer.forward(xs, lengths, scratch, threads);
        }
    });
}

/// Consecutive runs of windows, `parts` of them (fewer if there are fewer windows), of about equal `cost` (a function of a
/// window's length).
fn split(lengths: &[usize], parts: usize, cost: impl Fn(usize) -> usize) -> Vec<Range<usize>> {
    // prefix[w]: the cost of the windows before w.
    let prefix: Vec<usize> = std::iter::once(0)
        .chain(lengths.iter().scan(0, |sum, &len| {
            *sum += cost(len);
            Some(*sum)
        }))
        .collect();
    let total = prefix[lengths.len()];
    let parts = parts.clamp(1, lengths.len().max(1));
    let mut cuts = vec![0];
    for k in 1..parts {
        let target = total * k / parts;
        let after = prefix.partition_point(|&p| p < target).min(lengths.len());
        // Cut where the cost so far lands nearest the target.
        let nearest = if after > 0 && target - prefix[after - 1] < prefix[after] - target {
            after - 1
        } else {
            after
        };
        // Every part gets at least one window.
        cuts.push(nearest.clamp(cuts[k - 1] + 1, lengths.len() - (parts - k)));
    }
    cuts.push(lengths.len());
    let ranges = cuts.windows(2).map(|c| c[0]..c[1]);
    ranges.filter(|r| !r.is_empty()).collect()
}

#[cfg(test)]
mod tests {
    use super::split;

    #[test]
    fn parts_are_consecutive_balanced_and_cover_every_window() {
        let lengths = [300, 250, 200, 150, 120, 100, 90, 40, 30, 20];
        for parts in 1..=4 {
            let ranges = split(&lengths, parts, |len| len);
            assert_eq!(ranges.len(), parts);
            assert_eq!(ranges[0].start, 0);
            assert_eq!(ranges.last().unwrap().end, lengths.len());
            assert!(ranges.windows(2).all(|p| p[0].end == p[1].start));
        }
        assert_eq!(split(&lengths, 2, |len| len), vec![0..3, 3..10]);
        assert_eq!(split(&[5, 4, 3, 2], 2, |len| len), vec![0..2, 2..4]);
        assert_eq!(split(&[9, 1, 1, 1], 3, |len| len), vec![0..1, 1..2, 2..4]);
        assert_eq!(split(&[10], 2, |len| len), vec![0..1]);
    }
}
