//! Which segments to merge, and merging them apart from the writer.
//!
//! Segments are grouped in tiers by size in live passages: tier 0 holds those below
//! `floor_passages`, tier t those from `floor * factor^(t-1)` up to `floor * factor^t`. When a
//! tier holds `factor` segments, they are merged into one, which lands about a tier higher. A
//! passage is thus rewritten about once per tier (`log_factor(N / floor)` times in all) rather
//! than at every few commits, and a large segment is left alone while small commits come and go
//! (Lucene's `LogMergePolicy` works this way). A segment that has lost more than half its
//! documents is rewritten on its own, so deletions are reclaimed.
//!
//! A merge is planned under the writer ([`crate::IndexWriter::next_merge`]), run without it
//! ([`MergeJob::run`]: its inputs are immutable, and its output files are named so that no commit
//! removes them meanwhile), and applied under the writer again
//! ([`crate::IndexWriter::finish_merge`]), which keeps the documents deleted in the meantime
//! deleted. So a server keeps committing (and answering from snapshots) while a large merge runs.
//!
//! In a dense index the merged vectors are carried over, never re-embedded, and the HNSW graph of
//! the largest input is extended with the other inputs' rows (when that input has no deleted
//! documents) instead of being built again.

use crate::dense::{merge_vectors, SegmentVectors};
use crate::error::{Error, Result};
use crate::file_layer::FileLayer;
use crate::index::LiveSegment;
use crate::segment::Segment;
use crate::store::{self, DenseMeta, SegmentMeta};
use crate::vector::{Hnsw, HnswParams, Vectors};
use std::path::PathBuf;
use std::sync::Arc;

/// When segments are merged (see the [module documentation](self)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MergePolicy {
    /// Segments of one tier merged together; each tier spans this factor of sizes (at least 2).
    pub factor: usize,
    /// Segments below this many live passages share the lowest tier.
    pub floor_passages: usize,
}

impl Default for MergePolicy {
    /// Tiers of 8 segments from 1,000 passages up: merging small segments stays cheap (well
    /// under the size that gets an HNSW graph), and an index of a million passages keeps about
    /// 30 segments at most.
    fn default() -> Self {
        MergePolicy {
            factor: 8,
            floor_passages: 1_000,
        }
    }
}

impl MergePolicy {
    /// The tier of a segment of `passages` live passages.
    fn tier(&self, passages: usize) -> u32 {
        let mut tier = 0;
        let mut bound = self.floor_passages.max(1);
        while passages >= bound {
            tier += 1;
            bound = bound.saturating_mul(self.factor.max(2));
        }
        tier
    }

    /// The segments (positions in `segments`) the next merge should take, if any: a mostly
    /// deleted segment alone, else every segment of the lowest tier that is full.
    pub(crate) fn pick(&self, segments: &[LiveSegment]) -> Option<Vec<usize>> {
        if let Some(sparse) = segments.iter().position(mostly_deleted) {
            return Some(vec![sparse]);
        }
        let tiers: Vec<u32> = segments
            .iter()
            .map(|s| self.tier(live_passages(s)))
            .collect();
        let mut distinct = tiers.clone();
        distinct.sort_unstable();
        distinct.dedup();
        distinct.into_iter().find_map(|tier| {
            let members: Vec<usize> = (0..tiers.len()).filter(|&i| tiers[i] == tier).collect();
            (members.len() >= self.factor.max(2)).then_some(members)
        })
    }
}

/// The text a panic was raised with.
fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    match (panic.downcast_ref::<&str>(), panic.downcast_ref::<String>()) {
        (Some(text), _) => (*text).to_string(),
        (_, Some(text)) => text.clone(),
        _ => "(no message)".to_string(),
    }
}

fn live_passages(segment: &LiveSegment) -> usize {
    let docs = segment.segment.docs.iter().zip(&segment.deleted);
    docs.filter(|(_, &gone)| !gone)
        .map(|(doc, _)| doc.passages as usize)
        .sum()
}

fn mostly_deleted(segment: &LiveSegment) -> bool {
    2 * segment.deleted.iter().filter(|&&gone| gone).count() > segment.deleted.len()
}

/// A merge planned by [`crate::IndexWriter::next_merge`]: the inputs as they were then. Running
/// it needs no access to the writer, so it can run on another thread while the writer commits.
pub struct MergeJob {
    pub(crate) files: Arc<dyn FileLayer>,
    pub(crate) dir: PathBuf,
    /// The output segment's file name (reserved by the writer until the merge is finished).
    pub(crate) name: String,
    pub(crate) inputs: Vec<(SegmentMeta, LiveSegment)>,
    pub(crate) dense: Option<DenseMeta>,
    pub(crate) hnsw: HnswParams,
    pub(crate) hnsw_min: usize,
}

/// What [`MergeJob::run`] did, for [`crate::IndexWriter::finish_merge`].
pub struct MergedSegment {
    /// The output file the writer reserved for the job.
    pub(crate) name: String,
    pub(crate) written: Result<Written>,
}

/// A merged segment on disk, not listed yet.
pub(crate) struct Written {
    pub meta: SegmentMeta,
    pub live: LiveSegment,
    /// Per input: its segment file and, per document, its position in the merged segment
    /// (`None`: deleted when the merge was planned).
    pub inputs: Vec<(String, Vec<Option<u32>>)>,
}

impl MergeJob {
    /// The number of segments merged.
    pub fn segments(&self) -> usize {
        self.inputs.len()
    }

    /// The live passages the merge writes.
    pub fn passages(&self) -> usize {
        self.inputs
            .iter()
            .map(|(_, live)| live_passages(live))
            .sum()
    }

    /// Writes the merged segment (and its vectors) durably, under its reserved name. The writer
    /// lists it only in [`crate::IndexWriter::finish_merge`], which also reports a failure;
    /// until then, and after a crash, the files are unlisted and go at the next open.
    pub fn run(mut self) -> MergedSegment {
        let name = self.name.clone();
        // A panic must come back as a failed merge: unwinding past the writer would leave it
        // believing the merge still runs, and it would never plan another.
        let written = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.write()))
            .unwrap_or_else(|panic| Err(Error::MergePanicked(panic_message(&*panic))));
        MergedSegment { name, written }
    }

    fn write(&mut self) -> Result<Written> {
        // The input whose graph can be extended goes first, so its rows keep their numbers.
        let reusable = self.reusable_graph();
        if let Some(reusable) = reusable {
            let first = self.inputs.remove(reusable);
            self.inputs.insert(0, first);
        }
        let parts: Vec<(&Segment, &[bool])> = self
            .inputs
            .iter()
            .map(|(_, l)| (l.segment.as_ref(), l.deleted.as_slice()))
            .collect();
        let merged = Segment::merge(&parts);
        let files = &*self.files;
        let mut meta = store::write_segment(files, &self.dir, &self.name, &merged)?;
        let vectors = match (&self.dense, self.carried_vectors()) {
            (Some(dense), Some(carried)) => {
                let merged = merge_vectors(dense.dim, &carried);
                let vectors = self.merged_vectors(merged, reusable.is_some());
                let name = store::vector_name(&meta.file);
                let written =
                    store::write_vectors(files, &self.dir, &name, &dense.model, &vectors)?;
                meta.vectors = Some(written);
                Some(Arc::new(vectors))
            }
            _ => None,
        };
        Ok(Written {
            inputs: self.document_positions(),
            live: LiveSegment {
                deleted: vec![false; merged.docs.len()],
                segment: Arc::new(merged),
                vectors,
            },
            meta,
        })
    }

    /// The input whose graph the merged segment can extend: the largest with a graph, no
    /// deleted document, and passages stored in document order (so its rows come first,
    /// unchanged, in the merged vectors).
    fn reusable_graph(&self) -> Option<usize> {
        let reusable = |live: &LiveSegment| {
            let has_graph = live.vectors.as_ref().is_some_and(|v| v.hnsw.is_some());
            let mut next = 0;
            let in_order = live.segment.docs.iter().all(|doc| {
                let ok = doc.first_passage == next;
                next += doc.passages;
                ok
            });
            has_graph && !live.deleted.contains(&true) && in_order
        };
        (0..self.inputs.len())
            .filter(|&i| reusable(&self.inputs[i].1))
            .max_by_key(|&i| self.inputs[i].1.segment.passages.len())
    }

    /// Every input's vectors, or `None` when one has none (a segment of a BM25 index).
    fn carried_vectors(&self) -> Option<Vec<(&Segment, &[bool], &Vectors)>> {
        self.inputs
            .iter()
            .map(|(_, l)| {
                let vectors = l.vectors.as_deref()?;
                Some((l.segment.as_ref(), l.deleted.as_slice(), &vectors.vectors))
            })
            .collect()
    }

    /// The merged vectors with a graph when they need one: the first input's, extended, when
    /// [`Self::run`] put a reusable one first (`extend_first`), else a new one.
    fn merged_vectors(&self, vectors: Vectors, extend_first: bool) -> SegmentVectors {
        if vectors.len() < self.hnsw_min {
            return SegmentVectors::with_graph(vectors, None);
        }
        let first = self.inputs.first().and_then(|(_, l)| l.vectors.as_deref());
        let hnsw = match first.and_then(|v| v.hnsw.as_ref()) {
            Some(graph) if extend_first => graph.extend(&vectors),
            _ => Hnsw::build(&vectors, self.hnsw),
        };
        SegmentVectors::with_graph(vectors, Some(hnsw))
    }

    /// Per input, in merge order: its file and where each live document went.
    fn document_positions(&self) -> Vec<(String, Vec<Option<u32>>)> {
        let mut next = 0u32;
        self.inputs
            .iter()
            .map(|(meta, live)| {
                let positions = live
                    .deleted
                    .iter()
                    .map(|&gone| {
                        (!gone).then(|| {
                            next += 1;
                            next - 1
                        })
                    })
                    .collect();
                (meta.file.clone(), positions)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiers_grow_by_the_factor_from_the_floor() {
        let policy = MergePolicy::default();
        let tiers: Vec<u32> = [0, 999, 1_000, 7_999, 8_000, 64_000, 1_000_000]
            .map(|p| policy.tier(p))
            .to_vec();
        assert_eq!(tiers, [0, 0, 1, 1, 2, 3, 4]);
    }
}
