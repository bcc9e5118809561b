//! Passage vectors of a segment: computing them, merging them, and searching them.
//!
//! Each segment with vectors has a sidecar file `seg-<generation>-<n>.lvec` holding one unit
//! vector per passage (in the segment's passage order) and, for large segments, an HNSW graph
//! over them. Like the segment, the file is immutable and listed (with length and CRC-32) in the
//! manifest, so it is committed atomically with it. Small segments are searched exactly: below
//! [`HNSW_MIN_VECTORS`] a SIMD scan takes about a millisecond and is always right.

use crate::codec::{DecodeResult, Decoder, Encoder};
use crate::embed::{passage_text, Embedder};
use crate::error::{Error, Result};
use crate::segment::Segment;
use crate::vector::{exact_top_k, Hnsw, HnswParams, Vectors};

const MAGIC: &[u8; 8] = b"LXDENSE1";

/// Segments with at least this many passages get an HNSW graph (by default; see
/// [`crate::IndexWriter::set_hnsw`]).
pub const HNSW_MIN_VECTORS: usize = 20_000;

/// Texts per call to the embedder: large enough to batch well, small enough for steady progress.
const EMBED_CHUNK: usize = 256;

/// The vectors of one segment and, when it is large, their graph.
#[derive(Debug)]
pub(crate) struct SegmentVectors {
    pub vectors: Vectors,
    pub hnsw: Option<Hnsw>,
    /// Rows of zeros, when there are any: passages of documents that came without a vector
    /// into an index whose vectors come with the documents. Searches never return them.
    missing: Option<Vec<bool>>,
}

impl SegmentVectors {
    /// Wraps `vectors`, building the graph when there are at least `min` of them.
    pub fn new(vectors: Vectors, params: &HnswParams, min: usize) -> Self {
        let hnsw = (vectors.len() >= min).then(|| Hnsw::build(&vectors, *params));
        Self::with_graph(vectors, hnsw)
    }

    /// Wraps `vectors` and their graph, if any.
    pub fn with_graph(vectors: Vectors, hnsw: Option<Hnsw>) -> Self {
        let zero = |i: usize| vectors.row(i).iter().all(|&x| x == 0.0);
        let missing = (0..vectors.len())
            .any(zero)
            .then(|| (0..vectors.len()).map(zero).collect());
        SegmentVectors {
            vectors,
            hnsw,
            missing,
        }
    }

    /// Whether row `p` holds a vector (not zeros).
    pub fn has(&self, p: u32) -> bool {
        self.missing.as_ref().is_none_or(|m| !m[p as usize])
    }

    /// The best `k` rows for `query` among those `keep` accepts; exact unless `ef` is given and
    /// the segment has a graph.
    pub fn search(
        &self,
        query: &[f32],
        k: usize,
        ef: Option<usize>,
        keep: impl Fn(u32) -> bool + Sync,
    ) -> Vec<(f32, u32)> {
        let keep = |p: u32| self.has(p) && keep(p);
        match (&self.hnsw, ef) {
            (Some(hnsw), Some(ef)) => hnsw.search(&self.vectors, query, k, ef.max(k), keep),
            _ => exact_top_k(&self.vectors, query, k, keep),
        }
    }

    /// The file's bytes.
    pub fn encode(&self, model: &str) -> Vec<u8> {
        let mut e = Encoder::default();
        e.raw(MAGIC);
        e.str(model);
        self.vectors.encode(&mut e);
        match &self.hnsw {
            Some(hnsw) => {
                e.varint(1);
                hnsw.encode(&mut e);
            }
            None => e.varint(0),
        }
        e.bytes
    }

    /// Parses a file written by [`Self::encode`]; returns the model name with the vectors.
    pub fn decode(bytes: &[u8]) -> DecodeResult<(String, SegmentVectors)> {
        let mut d = Decoder::new(bytes);
        if d.raw(MAGIC.len())? != MAGIC {
            return Err("not a lector vector file".into());
        }
        let model = d.str()?;
        let vectors = Vectors::decode(&mut d)?;
        let hnsw = match d.varint()? {
            0 => None,
            1 => Some(Hnsw::decode(&mut d)?),
            other => return Err(format!("unknown graph marker {other}")),
        };
        if !d.is_done() {
            return Err("trailing bytes".into());
        }
        Ok((model, SegmentVectors::with_graph(vectors, hnsw)))
    }
}

/// Embeds every passage of `segment` (title + passage text); `progress` gets the passages done.
pub(crate) fn embed_segment(
    segment: &Segment,
    embedder: &dyn Embedder,
    progress: &mut dyn FnMut(usize),
) -> Result<Vectors> {
    let texts: Vec<String> = segment
        .passages
        .iter()
        .map(|p| {
            let doc = &segment.docs[p.doc as usize];
            passage_text(
                doc.title.as_deref(),
                &doc.text[p.span.byte_start..p.span.byte_end],
            )
        })
        .collect();
    let dim = embedder.dim();
    let mut vectors = Vectors::new(dim);
    for chunk in texts.chunks(EMBED_CHUNK) {
        let refs: Vec<&str> = chunk.iter().map(String::as_str).collect();
        let embedded = embedder.embed(&refs).map_err(Error::Embed)?;
        if embedded.len() != refs.len() || embedded.iter().any(|v| v.len() != dim) {
            return Err(Error::Embed(format!(
                "the embedder `{}` returned vectors of the wrong number or size (expected {} of {dim})",
                embedder.model(),
                refs.len()
            )));
        }
        for vector in &embedded {
            vectors.push(vector);
        }
        progress(chunk.len());
    }
    Ok(vectors)
}

/// The rows of the documents that survive a merge, in [`Segment::merge`]'s order: input by input,
/// live documents in order, each document's passages in order.
pub(crate) fn merge_vectors(dim: usize, parts: &[(&Segment, &[bool], &Vectors)]) -> Vectors {
    let mut out = Vectors::new(dim);
    for (segment, deleted, vectors) in parts {
        for (d, doc) in segment.docs.iter().enumerate() {
            if deleted[d] {
                continue;
            }
            for p in doc.first_passage..doc.first_passage + doc.passages {
                out.push(vectors.row(p as usize));
            }
        }
    }
    out
}
