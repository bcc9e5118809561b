//! Hierarchical navigable small world graphs (Malkov & Yashunin, "Efficient and robust
//! approximate nearest neighbor search using HNSW graphs", 2016/2018).
//!
//! Every node lives on layer 0 and on each layer up to a random level drawn with
//! P(level >= l) = m^-l, so layer l holds about n / m^l nodes. A search descends greedily from
//! the single top node to layer 1, then runs a best-first search with a beam of `ef` candidates
//! on layer 0. Nodes keep at most `m` links per upper layer and `2m` on layer 0, picked by the
//! paper's heuristic (Algorithm 4) that prefers neighbours in different directions over the
//! closest ones, which keeps clusters connected to each other.
//!
//! Building inserts the nodes in id order; large inputs are inserted in parallel with one lock
//! per node for writing its link lists, as hnswlib does. Queries on the finished graph read
//! plain arrays.

use super::simd::{dot, prefetch};
use super::{Candidate, Vectors};
use crate::codec::{DecodeResult, Decoder, Encoder};
use rayon::prelude::*;
use std::cell::RefCell;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::ops::Range;
use std::sync::atomic::AtomicU32;
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};
use std::sync::{Mutex, MutexGuard, PoisonError};

/// Levels are capped; with m = 16 a level above 8 has probability 16^-8 per node anyway.
const MAX_LEVEL: u8 = 16;
/// The largest `m` accepted: bounds what a damaged file can make `decode` allocate.
const MAX_M: usize = 256;
/// From this many rows on, `build` inserts in parallel on rayon's threads (below it the build
/// takes seconds and stays reproducible).
const PARALLEL_BUILD: usize = 10_000;

/// Graph construction and default search parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HnswParams {
    /// Links per node on the upper layers; layer 0 keeps up to `2 * m`.
    pub m: usize,
    /// Beam width while inserting: higher builds a better graph, more slowly.
    pub ef_construction: usize,
    /// Beam width a caller should search with when it has no better value. 64: on 100k
    /// clustered 384-dimensional vectors (the mixture of `tests/vector.rs`) with m 16 and
    /// ef_construction 200, ef 48 gave recall@10 0.982 and ef 64 0.992, so 64 leaves a margin
    /// for real embeddings at about 1700 queries per second on one (shared) core. Raise it when
    /// a measurement on the real corpus asks for it; cost grows about linearly.
    pub ef_search: usize,
    /// Seeds the random levels.
    pub seed: u64,
}

impl Default for HnswParams {
    fn default() -> Self {
        HnswParams {
            m: 16,
            ef_construction: 200,
            ef_search: 64,
            seed: 0x5eed,
        }
    }
}

/// An HNSW graph over the rows of a [`Vectors`] (kept separately: the graph stores only ids).
#[derive(Debug, Clone, PartialEq)]
pub struct Hnsw {
    params: HnswParams,
    /// Each node's top layer.
    levels: Vec<u8>,
    layout: Layout,
    /// Layer 0's link lists, one block per node (see [`Layout`]).
    base: Vec<u32>,
    /// The upper layers' link lists.
    upper: Vec<u32>,
    /// The node searches start from: one of the highest level.
    entry: Option<u32>,
}

impl Hnsw {
    /// Builds the graph of all rows of `vectors`. Deterministic for a fixed seed below
    /// 10 000 rows or in a one-thread rayon pool; larger inputs use all of rayon's threads and
    /// the link choices then depend on timing. Panics unless `2 <= m <= 256`.
    pub fn build(vectors: &Vectors, params: HnswParams) -> Hnsw {
        assert!(
            (2..=MAX_M).contains(&params.m),
            "HNSW m must be between 2 and {MAX_M}"
        );
        assert!(
            vectors.len() < u32::MAX as usize,
            "too many rows for u32 ids"
        );
        let builder = Builder::new(vectors, params);
        builder.insert_all(0..vectors.len());
        builder.freeze(params)
    }

    /// The graph of `vectors`, whose first [`Self::len`] rows are the rows this graph was built
    /// on: the rest are inserted into a copy of it, as [`Self::build`] would have inserted them
    /// after the first ones, so extending costs the new rows only (a merge reuses the graph of
    /// its largest input this way instead of building one from scratch).
    /// Panics when `vectors` has fewer rows than the graph or another dimension than a query.
    pub fn extend(&self, vectors: &Vectors) -> Hnsw {
        let (old, n) = (self.len(), vectors.len());
        assert!(n >= old, "fewer rows than the graph has");
        assert!(n < u32::MAX as usize, "too many rows for u32 ids");
        let builder = Builder::resume(self, vectors);
        builder.insert_all(old..n);
        builder.freeze(self.params)
    }

    /// The parameters the graph was built with.
    pub fn params(&self) -> HnswParams {
        self.params
    }

    /// The number of nodes (rows).
    pub fn len(&self) -> usize {
        self.levels.len()
    }

    /// Whether the graph has no nodes.
    pub fn is_empty(&self) -> bool {
        self.levels.is_empty()
    }

    /// About `k` of the best rows for `query` among those `keep` accepts, best first (ties by
    /// lower id), searching layer 0 with a beam of `max(ef, k)` (`params().ef_search` is a good
    /// default). Rows `keep` rejects are still traversed, so deleting rows does not cut the
    /// graph apart, but a filter that rejects most rows makes the search visit most nodes.
    /// Panics unless `vectors` is the set the graph was built on (same length) and the query has
    /// its dimension.
    pub fn search(
        &self,
        vectors: &Vectors,
        query: &[f32],
        k: usize,
        ef: usize,
        keep: impl Fn(u32) -> bool,
    ) -> Vec<(f32, u32)> {
        assert_eq!(vectors.len(), self.len(), "vectors differ from the graph's");
        assert_eq!(
            query.len(),
            vectors.dim(),
            "query length differs from the dimension"
        );
        let Some(entry) = self.entry else {
            return Vec::new();
        };
        if k == 0 {
            return Vec::new();
        }
        with_scratch(|s| {
            let mut ep = Candidate {
                score: dot(query, vectors.row(entry as usize)),
                id: entry,
            };
            for layer in (1..=self.levels[entry as usize] as usize).rev() {
                ep = greedy(self, vectors, query, ep, layer, s);
            }
            let mut found = search_layer(self, vectors, query, &[ep], ef.max(k), 0, &keep, s);
            found.truncate(k);
            found.into_iter().map(|c| (c.score, c.id)).collect()
        })
    }

    /// Node `node`'s links on `layer` (the node must reach that layer).
    #[inline]
    fn links(&self, node: u32, layer: usize) -> &[u32] {
        let slots = if layer == 0 { &self.base } else { &self.upper };
        let block = &slots[self.layout.block(node, layer)];
        &block[1..1 + block[0] as usize]
    }
}

/// Persistence inside a caller's file.
impl Hnsw {
    const MAGIC: &[u8; 8] = b"LXHNSW01";

    /// Appends `LXHNSW01`, then as varints m, ef_construction, ef_search, seed, the node count
    /// and the entry node plus one (0: none), then one level byte per node, then per node and
    /// per layer from 0 up to its level: the link count and the links (varints, in stored
    /// order, so a decoded graph searches exactly like the original).
    pub(crate) fn encode(&self, e: &mut Encoder) {
        e.raw(Self::MAGIC);
        let p = self.params;
        for v in [p.m, p.ef_construction, p.ef_search] {
            e.varint(v as u64);
        }
        e.varint(p.seed);
        e.varint(self.len() as u64);
        e.varint(self.entry.map_or(0, |n| u64::from(n) + 1));
        e.raw(&self.levels);
        for node in 0..self.len() as u32 {
            for layer in 0..=self.levels[node as usize] as usize {
                let links = self.links(node, layer);
                e.varint(links.len() as u64);
                for &id in links {
                    e.varint(id.into());
                }
            }
        }
    }

    /// Reads what [`Hnsw::encode`] wrote, checking every link so that a damaged block is an
    /// error here rather than a panic in `search`.
    pub(crate) fn decode(d: &mut Decoder) -> DecodeResult<Hnsw> {
        if d.raw(Self::MAGIC.len())? != Self::MAGIC {
            return Err("not a lector HNSW block (bad magic)".into());
        }
        let mut numbers = [0usize; 3];
        for slot in &mut numbers {
            *slot = usize::try_from(d.varint()?).map_err(|_| "HNSW parameter too large")?;
        }
        let [m, ef_construction, ef_search] = numbers;
        if !(2..=MAX_M).contains(&m) {
            return Err(format!("HNSW m = {m} is out of range"));
        }
        let params = HnswParams {
            m,
            ef_construction,
            ef_search,
            seed: d.varint()?,
        };
        let n = d.u32()? as usize;
        let entry = match d.u32()? {
            0 => None,
            e => Some(e - 1),
        };
        let levels = d.raw(n)?.to_vec();
        let top = levels.iter().copied().max();
        if levels.iter().any(|&l| l > MAX_LEVEL)
            || entry.map(|e| levels.get(e as usize).copied()) != top.map(Some)
        {
            return Err("HNSW levels or entry node are invalid".into());
        }
        let layout = Layout::new(m, &levels);
        let mut base = vec![0; layout.slots(0)];
        let mut upper = vec![0; layout.slots(1)];
        for node in 0..n as u32 {
            for layer in 0..=levels[node as usize] as usize {
                let slots = if layer == 0 { &mut base } else { &mut upper };
                let block = &mut slots[layout.block(node, layer)];
                let count = d.varint()? as usize;
                if count >= block.len() {
                    return Err(format!("HNSW node {node} has too many links"));
                }
                block[0] = count as u32;
                for slot in &mut block[1..=count] {
                    let id = d.u32()?;
                    if levels
                        .get(id as usize)
                        .is_none_or(|&l| (l as usize) < layer)
                    {
                        return Err(format!("HNSW node {node} links to a missing node"));
                    }
                    *slot = id;
                }
            }
        }
        Ok(Hnsw {
            params,
            levels,
            layout,
            base,
            upper,
            entry,
        })
    }
}

/// Where link lists live. Layer 0 has a block of `2m + 1` slots per node, node `i`'s at
/// `i * (2m + 1)`; the upper layers a block of `m + 1` slots per node and layer, node `i`'s for
/// layer `l >= 1` at `(upper_start[i] + l - 1) * (m + 1)`. A block's first slot is the link
/// count, the links follow. Fixed blocks in one array keep a list in one or two cache lines and
/// let the builder update lists in place.
#[derive(Debug, Clone, PartialEq)]
struct Layout {
    m: usize,
    upper_start: Vec<u32>,
    upper_blocks: usize,
}

impl Layout {
    fn new(m: usize, levels: &[u8]) -> Layout {
        let mut upper_start = Vec::with_capacity(levels.len());
        let mut blocks = 0u32;
        for &level in levels {
            upper_start.push(blocks);
            blocks += u32::from(level);
        }
        Layout {
            m,
            upper_start,
            upper_blocks: blocks as usize,
        }
    }

    /// The slots of layer 0's array (`layer` 0) or of the upper layers' (any other).
    fn slots(&self, layer: usize) -> usize {
        if layer == 0 {
            self.upper_start.len() * (2 * self.m + 1)
        } else {
            self.upper_blocks * (self.m + 1)
        }
    }

    /// The slots of `node`'s block for `layer`, in that layer's array.
    #[inline]
    fn block(&self, node: u32, layer: usize) -> Range<usize> {
        let (start, stride) = if layer == 0 {
            (node as usize, 2 * self.m + 1)
        } else {
            (
                self.upper_start[node as usize] as usize + layer - 1,
                self.m + 1,
            )
        };
        start * stride..(start + 1) * stride
    }
}

/// Random levels of nodes `nodes`: floor(-ln(u) / ln(m)) for uniform u in (0, 1], from a
/// seeded splitmix64 whose n-th draw depends on n alone, so a graph extended later draws the
/// levels its rows would have had in one build.
fn draw_levels(nodes: Range<usize>, m: usize, seed: u64) -> Vec<u8> {
    let scale = 1.0 / (m as f64).ln();
    nodes
        .map(|node| {
            let state = seed.wrapping_add((node as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15));
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^= z >> 31;
            let u = ((z >> 11) + 1) as f64 / (1u64 << 53) as f64;
            (-u.ln() * scale).floor().min(f64::from(MAX_LEVEL)) as u8
        })
        .collect()
}

/// The graph under construction, in the final layout but with atomic slots.
///
/// Writers of a node's lists hold that node's lock, one lock at a time, so they cannot
/// deadlock. Readers (the searches of concurrent inserts) take no lock, as taking one per
/// expanded node costs a cache miss of its own: a list being rewritten may then be read half
/// old and half new, but every id in it is a node of that layer either way, which is all a
/// search needs (hnswlib's readers accept the same).
struct Builder<'a> {
    vectors: &'a Vectors,
    m: usize,
    ef_construction: usize,
    levels: Vec<u8>,
    layout: Layout,
    base: Vec<AtomicU32>,
    upper: Vec<AtomicU32>,
    /// One per node, held while writing its lists.
    locks: Vec<Mutex<()>>,
    /// The entry node and its level; `None` until the first insert.
    entry: Mutex<Option<(u32, u8)>>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while a lock was held leaves valid ids in every slot, so poisoning is ignored.
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

fn atomic_slots(n: usize) -> Vec<AtomicU32> {
    (0..n).map(|_| AtomicU32::new(0)).collect()
}

impl<'a> Builder<'a> {
    fn new(vectors: &'a Vectors, params: HnswParams) -> Self {
        let levels = draw_levels(0..vectors.len(), params.m, params.seed);
        let layout = Layout::new(params.m, &levels);
        Builder {
            vectors,
            m: params.m,
            ef_construction: params.ef_construction.max(1),
            base: atomic_slots(layout.slots(0)),
            upper: atomic_slots(layout.slots(1)),
            locks: (0..levels.len()).map(|_| Mutex::new(())).collect(),
            levels,
            layout,
            entry: Mutex::new(None),
        }
    }

    /// A builder over `vectors` holding `graph`'s links for its nodes (the first rows). The
    /// layout puts old nodes' blocks first in both arrays, so the old arrays are prefixes.
    fn resume(graph: &Hnsw, vectors: &'a Vectors) -> Self {
        let params = graph.params;
        let mut levels = graph.levels.clone();
        levels.extend(draw_levels(
            graph.len()..vectors.len(),
            params.m,
            params.seed,
        ));
        let layout = Layout::new(params.m, &levels);
        let copied = |old: &[u32], slots: usize| -> Vec<AtomicU32> {
            let mut out: Vec<AtomicU32> = old.iter().map(|&v| AtomicU32::new(v)).collect();
            out.resize_with(slots, || AtomicU32::new(0));
            out
        };
        let entry = graph.entry.map(|node| (node, graph.levels[node as usize]));
        Builder {
            vectors,
            m: params.m,
            ef_construction: params.ef_construction.max(1),
            base: copied(&graph.base, layout.slots(0)),
            upper: copied(&graph.upper, layout.slots(1)),
            locks: (0..levels.len()).map(|_| Mutex::new(())).collect(),
            levels,
            layout,
            entry: Mutex::new(entry),
        }
    }

    /// Inserts `nodes` in order, or in parallel on rayon's threads when there are many.
    fn insert_all(&self, nodes: Range<usize>) {
        let insert = |q: usize| with_scratch(|s| self.insert(q as u32, s));
        if nodes.len() < PARALLEL_BUILD || rayon::current_num_threads() == 1 {
            nodes.for_each(insert);
        } else {
            nodes.into_par_iter().for_each(insert);
        }
    }

    /// `node`'s block on `layer`: the count, then the link slots.
    #[inline]
    fn block(&self, node: u32, layer: usize) -> &[AtomicU32] {
        let slots = if layer == 0 { &self.base } else { &self.upper };
        &slots[self.layout.block(node, layer)]
    }

    /// Replaces `node`'s links on `layer`; the caller holds `node`'s lock. The count is stored
    /// last (release) so a reader that sees it also sees the links it covers. Slots past the
    /// new count keep their old ids: a reader holding the old count still reads only nodes of
    /// this layer.
    fn write(&self, node: u32, layer: usize, links: &[u32]) {
        let block = self.block(node, layer);
        for (slot, &id) in block[1..].iter().zip(links) {
            slot.store(id, Relaxed);
        }
        block[0].store(links.len() as u32, Release);
    }

    /// Inserts node `q` (Algorithm 1 of the paper).
    fn insert(&self, q: u32, s: &mut Scratch) {
        let level = self.levels[q as usize];
        let mut entry_guard = lock(&self.entry);
        let Some((entry, top)) = *entry_guard else {
            *entry_guard = Some((q, level));
            return;
        };
        // A node above the current top becomes the entry point. Keeping the lock until it is
        // linked stops other inserts from starting at a node without links (hnswlib does this).
        let raising = if level > top {
            Some(entry_guard)
        } else {
            drop(entry_guard);
            None
        };
        let query = self.vectors.row(q as usize);
        let mut ep = Candidate {
            score: dot(query, self.vectors.row(entry as usize)),
            id: entry,
        };
        for layer in (level as usize + 1..=top as usize).rev() {
            ep = greedy(self, self.vectors, query, ep, layer, s);
        }
        let mut entry_points = vec![ep];
        for layer in (0..=level.min(top) as usize).rev() {
            let mut found = search_layer(
                self,
                self.vectors,
                query,
                &entry_points,
                self.ef_construction,
                layer,
                &|_| true,
                s,
            );
            found.retain(|c| c.id != q);
            let chosen = select_neighbours(self.vectors, &found, self.m);
            let ids: Vec<u32> = chosen.iter().map(|c| c.id).collect();
            {
                let _guard = lock(&self.locks[q as usize]);
                self.write(q, layer, &ids);
            }
            for c in &chosen {
                self.link_back(c.id, q, c.score, layer);
            }
            // The paper starts the next layer from all of this layer's results.
            entry_points = found;
        }
        if let Some(mut guard) = raising {
            *guard = Some((q, level));
        }
    }

    /// Adds `q` to `node`'s links on `layer`; a full list is re-pruned with the heuristic.
    fn link_back(&self, node: u32, q: u32, score: f32, layer: usize) {
        let _guard = lock(&self.locks[node as usize]);
        let block = self.block(node, layer);
        let count = block[0].load(Relaxed) as usize;
        if count + 1 < block.len() {
            block[1 + count].store(q, Relaxed);
            block[0].store(count as u32 + 1, Release);
            return;
        }
        let row = self.vectors.row(node as usize);
        let mut candidates: Vec<Candidate> = block[1..]
            .iter()
            .map(|slot| {
                let id = slot.load(Relaxed);
                Candidate {
                    score: dot(row, self.vectors.row(id as usize)),
                    id,
                }
            })
            .chain([Candidate { score, id: q }])
            .collect();
        candidates.sort_unstable_by(|a, b| b.cmp(a));
        let kept: Vec<u32> = select_neighbours(self.vectors, &candidates, block.len() - 1)
            .iter()
            .map(|c| c.id)
            .collect();
        self.write(node, layer, &kept);
    }

    /// The finished graph, with the stale slots past each count zeroed so that equal graphs
    /// have equal arrays (as decoded ones do).
    fn freeze(self, params: HnswParams) -> Hnsw {
        let plain = |slots: Vec<AtomicU32>| -> Vec<u32> {
            slots.into_iter().map(AtomicU32::into_inner).collect()
        };
        let (mut base, mut upper) = (plain(self.base), plain(self.upper));
        for (node, &level) in self.levels.iter().enumerate() {
            for layer in 0..=level as usize {
                let slots = if layer == 0 { &mut base } else { &mut upper };
                let block = &mut slots[self.layout.block(node as u32, layer)];
                let count = block[0] as usize;
                block[1 + count..].fill(0);
            }
        }
        let entry = self
            .entry
            .into_inner()
            .unwrap_or_else(PoisonError::into_inner);
        Hnsw {
            params,
            levels: self.levels,
            layout: self.layout,
            base,
            upper,
            entry: entry.map(|(node, _)| node),
        }
    }
}

/// Up to `m` of `candidates` (sorted best first) by the paper's Algorithm 4: a candidate is kept
/// only when it is closer to the base node than to every neighbour kept so far, since a closer
/// kept neighbour already leads to it. Without the extension and fill-up options (hnswlib and
/// faiss leave them out too).
fn select_neighbours(vectors: &Vectors, candidates: &[Candidate], m: usize) -> Vec<Candidate> {
    if candidates.len() <= m {
        return candidates.to_vec();
    }
    let mut chosen: Vec<Candidate> = Vec::with_capacity(m);
    for &c in candidates {
        if chosen.len() == m {
            break;
        }
        let row = vectors.row(c.id as usize);
        if chosen
            .iter()
            .all(|k| dot(row, vectors.row(k.id as usize)) <= c.score)
        {
            chosen.push(c);
        }
    }
    chosen
}

/// Read access to link lists: atomic loads while building, plain ones once frozen.
trait Links {
    /// Calls `f` with each of `node`'s links on `layer`.
    fn for_each_link(&self, node: u32, layer: usize, f: impl FnMut(u32));
}

impl Links for Hnsw {
    #[inline]
    fn for_each_link(&self, node: u32, layer: usize, f: impl FnMut(u32)) {
        self.links(node, layer).iter().copied().for_each(f);
    }
}

impl Links for Builder<'_> {
    #[inline]
    fn for_each_link(&self, node: u32, layer: usize, f: impl FnMut(u32)) {
        let block = self.block(node, layer);
        let count = (block[0].load(Acquire) as usize).min(block.len() - 1);
        block[1..=count]
            .iter()
            .map(|slot| slot.load(Relaxed))
            .for_each(f);
    }
}

/// Moves from `ep` to a better neighbour on `layer` while there is one (search with ef = 1).
fn greedy(
    graph: &impl Links,
    vectors: &Vectors,
    query: &[f32],
    mut ep: Candidate,
    layer: usize,
    s: &mut Scratch,
) -> Candidate {
    loop {
        s.neighbours.clear();
        graph.for_each_link(ep.id, layer, |id| s.neighbours.push(id));
        let mut moved = false;
        for &id in &s.neighbours {
            let c = Candidate {
                score: dot(query, vectors.row(id as usize)),
                id,
            };
            if c > ep {
                ep = c;
                moved = true;
            }
        }
        if !moved {
            return ep;
        }
    }
}

/// Best-first search of `layer` (Algorithm 2) with a beam of `ef`; returns up to `ef` results
/// that `keep` accepts, best first. Rejected nodes are expanded like any other.
#[allow(clippy::too_many_arguments)]
fn search_layer(
    graph: &impl Links,
    vectors: &Vectors,
    query: &[f32],
    entry_points: &[Candidate],
    ef: usize,
    layer: usize,
    keep: &impl Fn(u32) -> bool,
    s: &mut Scratch,
) -> Vec<Candidate> {
    let Scratch {
        visited,
        candidates,
        results,
        neighbours,
    } = s;
    visited.reset(vectors.len());
    candidates.clear();
    results.clear();
    for &ep in entry_points {
        if visited.insert(ep.id) {
            candidates.push(ep);
            if keep(ep.id) {
                results.push(Reverse(ep));
            }
        }
    }
    while results.len() > ef {
        results.pop();
    }
    // `results` holds the best `ef` accepted nodes, worst on top; `candidates` the frontier.
    while let Some(current) = candidates.pop() {
        if results.len() >= ef && current < results.peek().expect("ef >= 1").0 {
            break;
        }
        // Unvisited neighbours are collected (and their rows requested from memory) before any
        // is scored, so the loads overlap.
        neighbours.clear();
        graph.for_each_link(current.id, layer, |id| {
            if visited.insert(id) {
                prefetch(vectors.row(id as usize));
                neighbours.push(id);
            }
        });
        for &id in neighbours.iter() {
            let c = Candidate {
                score: dot(query, vectors.row(id as usize)),
                id,
            };
            if results.len() < ef || c > results.peek().expect("results are full").0 {
                candidates.push(c);
                if keep(id) {
                    results.push(Reverse(c));
                    if results.len() > ef {
                        results.pop();
                    }
                }
            }
        }
    }
    let mut out: Vec<Candidate> = results.drain().map(|Reverse(c)| c).collect();
    out.sort_unstable_by(|a, b| b.cmp(a));
    out
}

/// Per-thread search buffers, reused so a query allocates nothing proportional to the graph.
#[derive(Default)]
struct Scratch {
    visited: Visited,
    candidates: BinaryHeap<Candidate>,
    results: BinaryHeap<Reverse<Candidate>>,
    neighbours: Vec<u32>,
}

/// A visited set cleared in O(1): a node is visited when its mark equals the current epoch.
#[derive(Default)]
struct Visited {
    marks: Vec<u32>,
    epoch: u32,
}

impl Visited {
    fn reset(&mut self, n: usize) {
        if self.marks.len() < n {
            self.marks.resize(n, 0);
        }
        self.epoch = self.epoch.wrapping_add(1);
        if self.epoch == 0 {
            self.marks.fill(0);
            self.epoch = 1;
        }
    }

    /// Marks `id`; true when it was not marked yet.
    #[inline]
    fn insert(&mut self, id: u32) -> bool {
        let mark = &mut self.marks[id as usize];
        let new = *mark != self.epoch;
        *mark = self.epoch;
        new
    }
}

thread_local! {
    static SCRATCH: RefCell<Scratch> = RefCell::new(Scratch::default());
}

fn with_scratch<R>(f: impl FnOnce(&mut Scratch) -> R) -> R {
    SCRATCH.with(|cell| match cell.try_borrow_mut() {
        Ok(mut scratch) => f(&mut scratch),
        // Re-entered (a `keep` predicate that searches itself): use a fresh set of buffers.
        Err(_) => f(&mut Scratch::default()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vector::{exact_top_k, normalize};

    fn random_unit(n: usize, dim: usize, seed: u64) -> Vectors {
        let mut state = seed;
        let mut v = Vectors::new(dim);
        let mut row = vec![0.0; dim];
        for _ in 0..n {
            for x in row.iter_mut() {
                state = state
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                *x = ((state >> 40) as f32 / (1u64 << 24) as f32) - 0.5;
            }
            normalize(&mut row);
            v.push(&row);
        }
        v
    }

    #[test]
    fn levels_follow_the_geometric_distribution() {
        let levels = draw_levels(0..100_000, 16, 7);
        let above = levels.iter().filter(|&&l| l >= 1).count() as f64 / 100_000.0;
        assert!((above - 1.0 / 16.0).abs() < 0.005, "{above}");
        assert_eq!(levels, draw_levels(0..100_000, 16, 7));
        assert_eq!(levels[60_000..], draw_levels(60_000..100_000, 16, 7));
    }

    #[test]
    fn encode_decode_round_trip_searches_identically() {
        let vectors = random_unit(600, 8, 3);
        let params = HnswParams {
            m: 6,
            ef_construction: 40,
            ..HnswParams::default()
        };
        let graph = Hnsw::build(&vectors, params);
        assert_eq!(Hnsw::build(&vectors, params), graph, "deterministic");
        let mut e = Encoder::default();
        vectors.encode(&mut e);
        graph.encode(&mut e);
        let mut d = Decoder::new(&e.bytes);
        let vectors_back = Vectors::decode(&mut d).unwrap();
        let back = Hnsw::decode(&mut d).unwrap();
        assert!(d.is_done());
        assert_eq!(back, graph);
        let queries = random_unit(20, 8, 4);
        for i in 0..queries.len() {
            let q = queries.row(i);
            assert_eq!(
                back.search(&vectors_back, q, 10, 20, |_| true),
                graph.search(&vectors, q, 10, 20, |_| true)
            );
        }
        let mut alone = Encoder::default();
        vectors.encode(&mut alone);
        let start = alone.bytes.len();
        for cut in [start + 4, (start + e.bytes.len()) / 2, e.bytes.len() - 1] {
            let mut d = Decoder::new(&e.bytes[..cut]);
            Vectors::decode(&mut d).unwrap();
            assert!(Hnsw::decode(&mut d).is_err());
        }
    }

    /// A hand-written block: m = 2, two nodes (node 0 on layers 0-1, node 1 on layer 0 only),
    /// node 0's layer-1 list being `upper_link`.
    fn two_nodes(upper_link: &[u64]) -> Vec<u8> {
        let mut e = Encoder::default();
        e.raw(Hnsw::MAGIC);
        for v in [2, 10, 10, 0, 2, 1] {
            e.varint(v);
        }
        e.raw(&[1, 0]);
        for list in [&[1][..], upper_link, &[0]] {
            e.varint(list.len() as u64);
            list.iter().for_each(|&id| e.varint(id));
        }
        e.bytes
    }

    #[test]
    fn decode_rejects_links_to_nodes_off_the_layer() {
        assert!(Hnsw::decode(&mut Decoder::new(&two_nodes(&[]))).is_ok());
        assert!(Hnsw::decode(&mut Decoder::new(&two_nodes(&[1]))).is_err());
        assert!(Hnsw::decode(&mut Decoder::new(&two_nodes(&[7]))).is_err());
    }

    #[test]
    fn small_graph_finds_the_exact_neighbours() {
        let vectors = random_unit(300, 4, 9);
        let graph = Hnsw::build(&vectors, HnswParams::default());
        for i in 0..30 {
            let q = vectors.row(i);
            let exact = exact_top_k(&vectors, q, 5, |_| true);
            assert_eq!(graph.search(&vectors, q, 5, 300, |_| true), exact);
        }
    }

    #[test]
    fn an_extended_graph_is_the_graph_built_in_one_go() {
        // Below the parallel threshold insertion is sequential, so inserting the last rows into
        // the graph of the first ones must give exactly the graph of all rows.
        let vectors = random_unit(900, 8, 5);
        let mut first = Vectors::new(8);
        (0..500).for_each(|i| first.push(vectors.row(i)));
        let params = HnswParams {
            m: 6,
            ef_construction: 40,
            ..HnswParams::default()
        };
        let extended = Hnsw::build(&first, params).extend(&vectors);
        assert_eq!(extended, Hnsw::build(&vectors, params));
        assert_eq!(
            extended.extend(&vectors),
            extended,
            "no new rows, no change"
        );
        let empty = Hnsw::build(&Vectors::new(8), params);
        assert_eq!(empty.extend(&vectors), Hnsw::build(&vectors, params));
    }
}
