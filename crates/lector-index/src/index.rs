//! A read-only snapshot of an index (the last complete commit) and BM25 search over it.

use crate::analysis::Analyzer;
use crate::bm25::{idf, Bm25Params, TfNorm};
use crate::dense::SegmentVectors;
use crate::error::{Error, Result};
use crate::file_layer::{FileLayer, OsFiles};
use crate::passage::Span;
use crate::retriever::{Hit, Retriever, RetrieverKind, Source};
use crate::segment::Segment;
use crate::store::{self, DenseMeta, IndexSettings, Manifest};
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// How often opening retries when a writer swaps segments between reading the manifest and the
/// segment files.
const OPEN_ATTEMPTS: usize = 20;

/// A segment with its deletion marks.
#[derive(Debug, Clone)]
pub(crate) struct LiveSegment {
    pub segment: Arc<Segment>,
    pub deleted: Vec<bool>,
    /// The passage vectors (dense indexes).
    pub vectors: Option<Arc<SegmentVectors>>,
}

impl LiveSegment {
    /// Whether passage `p` belongs to a live document.
    pub fn is_live(&self, p: u32) -> bool {
        !self.deleted[self.segment.passages[p as usize].doc as usize]
    }
}

/// An opened index: the documents and postings of one commit. Later commits by a writer are not
/// seen until the index is opened again.
pub struct Index {
    dir: PathBuf,
    pub(crate) manifest: Manifest,
    pub(crate) segments: Vec<LiveSegment>,
    /// Document id -> (segment, document) of every live document.
    pub(crate) ids: HashMap<String, (usize, u32)>,
    analyzer: Analyzer,
    live_passages: usize,
    total_len: u64,
}

/// Counts describing an index.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct IndexStats {
    /// The on-disk format version.
    pub format_version: u32,
    /// The commit generation (0: created, nothing committed).
    pub generation: u64,
    /// Live documents.
    pub documents: usize,
    /// Live passages.
    pub passages: usize,
    /// Distinct terms over all segments (deleted passages included until a merge).
    pub terms: usize,
    /// Segment files.
    pub segments: usize,
    /// Bytes of the segment files.
    pub bytes: u64,
    /// Mean passage length in terms.
    pub mean_passage_terms: f64,
    /// The index's settings.
    pub settings: IndexSettings,
    /// The embedding model, when the index keeps passage vectors.
    pub dense: Option<DenseMeta>,
    /// Passages searched through an HNSW graph (the rest are scanned exactly).
    pub hnsw_passages: usize,
}

/// A stored document.
#[derive(Debug, Clone, PartialEq)]
pub struct DocumentRef<'a> {
    /// Its id.
    pub id: &'a str,
    /// Its title.
    pub title: Option<&'a str>,
    /// Its full text.
    pub text: &'a str,
    /// Its date, verbatim.
    pub date: Option<&'a str>,
    /// Its metadata as JSON text.
    pub metadata: Option<&'a str>,
    /// Its passages, in order.
    pub passages: Vec<Span>,
}

/// A clone is a second handle on the same commit: segments and vectors are shared, not copied
/// (a server hands the writer's fresh commit to its readers this way, without reloading).
impl Clone for Index {
    fn clone(&self) -> Self {
        Index {
            dir: self.dir.clone(),
            manifest: self.manifest.clone(),
            segments: self.segments.clone(),
            ids: self.ids.clone(),
            analyzer: Analyzer::new(self.analyzer.config()),
            live_passages: self.live_passages,
            total_len: self.total_len,
        }
    }
}

impl Index {
    /// Opens the last complete commit of the index at `dir`.
    pub fn open(dir: impl AsRef<Path>) -> Result<Index> {
        Self::open_with(&OsFiles, dir.as_ref())
    }

    /// [`Self::open`] through `files`.
    pub(crate) fn open_with(files: &dyn FileLayer, dir: &Path) -> Result<Index> {
        for _ in 0..OPEN_ATTEMPTS {
            let manifest = store::read_manifest(files, dir)?.ok_or_else(|| Error::NoIndex {
                dir: dir.to_path_buf(),
            })?;
            if let Some(segments) = load_segments(files, dir, &manifest)? {
                return Ok(Index::from_parts(dir, manifest, segments));
            }
        }
        Err(Error::Corrupt {
            dir: dir.to_path_buf(),
            message:
                "segment files keep disappearing while opening (is another program deleting them?)"
                    .into(),
        })
    }

    /// Assembles a snapshot from a manifest and its loaded segments.
    pub(crate) fn from_parts(dir: &Path, manifest: Manifest, segments: Vec<LiveSegment>) -> Index {
        let mut ids = HashMap::new();
        let (mut live_passages, mut total_len) = (0, 0u64);
        for (s, live) in segments.iter().enumerate() {
            for (d, doc) in live.segment.docs.iter().enumerate() {
                if live.deleted[d] {
                    continue;
                }
                ids.insert(doc.id.clone(), (s, d as u32));
                let passages =
                    &live.segment.passages[doc.first_passage as usize..][..doc.passages as usize];
                live_passages += passages.len();
                total_len += passages.iter().map(|p| u64::from(p.len)).sum::<u64>();
            }
        }
        let analyzer = Analyzer::new(manifest.settings.analyzer);
        Index {
            dir: dir.to_path_buf(),
            manifest,
            segments,
            ids,
            analyzer,
            live_passages,
            total_len,
        }
    }

    /// The directory of the index.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The settings the index was created with.
    pub fn settings(&self) -> IndexSettings {
        self.manifest.settings
    }

    /// The embedding model of the passage vectors, if the index has them.
    pub fn dense_meta(&self) -> Option<&DenseMeta> {
        self.manifest.dense.as_ref()
    }

    /// The commit generation of this snapshot.
    pub fn generation(&self) -> u64 {
        self.manifest.generation
    }

    /// The number of live documents.
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    /// Whether the index holds no document.
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// Counts and settings.
    pub fn stats(&self) -> IndexStats {
        let terms: std::collections::HashSet<&str> = self
            .segments
            .iter()
            .flat_map(|s| s.segment.terms.keys().map(String::as_str))
            .collect();
        IndexStats {
            format_version: self.manifest.version,
            generation: self.manifest.generation,
            documents: self.ids.len(),
            passages: self.live_passages,
            terms: terms.len(),
            segments: self.segments.len(),
            bytes: self.manifest.segments.iter().map(|s| s.bytes).sum(),
            mean_passage_terms: self.avg_len(),
            settings: self.manifest.settings,
            dense: self.manifest.dense.clone(),
            hnsw_passages: self
                .segments
                .iter()
                .filter_map(|s| s.vectors.as_ref())
                .filter(|v| v.hnsw.is_some())
                .map(|v| v.vectors.len())
                .sum(),
        }
    }

    fn avg_len(&self) -> f64 {
        if self.live_passages == 0 {
            0.0
        } else {
            self.total_len as f64 / self.live_passages as f64
        }
    }

    /// The document with this id.
    pub fn document(&self, id: &str) -> Option<DocumentRef<'_>> {
        self.ids.get(id).map(|&(s, d)| self.document_at(s, d))
    }

    /// Every live document, in no particular order.
    pub fn documents(&self) -> impl Iterator<Item = DocumentRef<'_>> {
        self.ids.values().map(|&(s, d)| self.document_at(s, d))
    }

    /// One page of the live documents in id order (byte-wise): `offset` documents skipped, at
    /// most `limit` returned. The order depends only on the ids, so a client pages through a
    /// commit without seeing a document twice ([`Index::len`] is the total).
    pub fn documents_by_id(&self, offset: usize, limit: usize) -> Vec<DocumentRef<'_>> {
        let mut ids: Vec<(&str, (usize, u32))> =
            self.ids.iter().map(|(id, &at)| (id.as_str(), at)).collect();
        ids.sort_unstable_by_key(|&(id, _)| id);
        ids.into_iter()
            .skip(offset)
            .take(limit)
            .map(|(_, (s, d))| self.document_at(s, d))
            .collect()
    }

    fn document_at(&self, s: usize, d: u32) -> DocumentRef<'_> {
        let segment = &self.segments[s].segment;
        let doc = &segment.docs[d as usize];
        DocumentRef {
            id: &doc.id,
            title: doc.title.as_deref(),
            text: &doc.text,
            date: doc.date.as_deref(),
            metadata: doc.metadata.as_deref(),
            passages: segment.passages[doc.first_passage as usize..][..doc.passages as usize]
                .iter()
                .map(|p| p.span)
                .collect(),
        }
    }

    /// BM25 with these parameters (use `self.settings().bm25` for the index's defaults).
    pub fn bm25(&self, params: Bm25Params) -> Bm25Retriever<'_> {
        Bm25Retriever {
            index: self,
            params,
        }
    }

    /// The terms of `text` as this index analyses passages and queries (its stemmer and
    /// stopwords), e.g. to look query words up with [`Self::document_frequency`].
    pub fn analyze(&self, text: &str) -> Vec<String> {
        self.analyzer.terms(text)
    }

    /// How many live passages contain the analysed `term`; 0 for a term outside the vocabulary
    /// (or only in removed documents).
    pub fn document_frequency(&self, term: &str) -> usize {
        let lists: Vec<Option<&Vec<(u32, u32)>>> = self
            .segments
            .iter()
            .map(|s| {
                let t = s.segment.terms.get(term)?;
                Some(&s.segment.postings[*t as usize])
            })
            .collect();
        self.live_postings(&lists).count()
    }

    /// Scores of every passage matching a query term: (score, segment, passage).
    fn score_passages(&self, query: &str, params: Bm25Params) -> Vec<(f64, usize, u32)> {
        // Ordered, so that the per-passage sums add terms in one order in every process: a
        // HashMap's order changes per run, and the last bits with it, and so near-ties' order.
        let mut query_terms: BTreeMap<String, u32> = BTreeMap::new();
        for term in self.analyzer.terms(query) {
            *query_terms.entry(term).or_default() += 1;
        }
        let norm = TfNorm::new(params, self.avg_len());
        let mut scores: Vec<Vec<f64>> = self
            .segments
            .iter()
            .map(|s| vec![0.0; s.segment.passages.len()])
            .collect();
        for (term, qtf) in &query_terms {
            let lists: Vec<Option<&Vec<(u32, u32)>>> = self
                .segments
                .iter()
                .map(|s| {
                    s.segment
                        .terms
                        .get(term)
                        .map(|&t| &s.segment.postings[t as usize])
                })
                .collect();
            let df: usize = self.live_postings(&lists).count();
            if df == 0 {
                continue;
            }
            let weight = f64::from(*qtf) * idf(self.live_passages, df);
            for (s, passage, tf) in self.live_postings(&lists) {
                let p = &self.segments[s].segment.passages[passage as usize];
                scores[s][passage as usize] += weight * norm.weight(tf, p.len);
            }
        }
        let mut out = Vec::new();
        for (s, segment_scores) in scores.iter().enumerate() {
            out.extend(
                segment_scores
                    .iter()
                    .enumerate()
                    .filter(|(_, &v)| v > 0.0)
                    .map(|(p, &v)| (v, s, p as u32)),
            );
        }
        out
    }

    /// The postings of live passages: (segment, passage, term frequency).
    fn live_postings<'a>(
        &'a self,
        lists: &'a [Option<&'a Vec<(u32, u32)>>],
    ) -> impl Iterator<Item = (usize, u32, u32)> + 'a {
        lists.iter().enumerate().flat_map(move |(s, list)| {
            let live = &self.segments[s];
            list.iter()
                .flat_map(|l| l.iter())
                .filter_map(move |&(p, tf)| {
                    let doc = live.segment.passages[p as usize].doc;
                    (!live.deleted[doc as usize]).then_some((s, p, tf))
                })
        })
    }

    pub(crate) fn hit(
        &self,
        retriever: RetrieverKind,
        score: f64,
        s: usize,
        p: u32,
        rank: usize,
    ) -> Hit {
        let segment = &self.segments[s].segment;
        let passage = &segment.passages[p as usize];
        let doc = &segment.docs[passage.doc as usize];
        Hit {
            doc_id: doc.id.clone(),
            title: doc.title.clone(),
            passage: (p - doc.first_passage) as usize,
            span: passage.span,
            text: doc.text[passage.span.byte_start..passage.span.byte_end].to_string(),
            score,
            sources: vec![Source {
                retriever,
                rank,
                score,
            }],
        }
    }

    /// Orders scored passages best first, ties by document id then passage, and keeps `k`.
    pub(crate) fn top(
        &self,
        mut scored: Vec<(f64, usize, u32)>,
        k: usize,
    ) -> Vec<(f64, usize, u32)> {
        let key = |&(v, s, p): &(f64, usize, u32)| {
            (std::cmp::Reverse(ordered(v)), self.doc_id_of(s, p), s, p)
        };
        if scored.len() > k && k > 0 {
            scored.select_nth_unstable_by(k - 1, |a, b| key(a).cmp(&key(b)));
        }
        scored.truncate(k);
        scored.sort_by(|a, b| key(a).cmp(&key(b)));
        scored
    }

    fn doc_id_of(&self, s: usize, p: u32) -> &str {
        let segment = &self.segments[s].segment;
        &segment.docs[segment.passages[p as usize].doc as usize].id
    }
}

/// A key that orders floats like `f64::total_cmp` (scores may be negative: cosine similarities).
fn ordered(v: f64) -> u64 {
    let bits = v.to_bits();
    if bits >> 63 == 1 {
        !bits
    } else {
        bits | 1 << 63
    }
}

/// Loads every segment the manifest lists; `None` when one vanished (re-read the manifest).
pub(crate) fn load_segments(
    files: &dyn FileLayer,
    dir: &Path,
    manifest: &Manifest,
) -> Result<Option<Vec<LiveSegment>>> {
    let mut out = Vec::with_capacity(manifest.segments.len());
    for meta in &manifest.segments {
        let Some(segment) = store::read_segment(files, dir, meta)? else {
            return Ok(None);
        };
        let mut deleted = vec![false; segment.docs.len()];
        for &d in &meta.deleted {
            deleted[d as usize] = true;
        }
        let vectors = match (&manifest.dense, &meta.vectors) {
            (Some(dense), Some(file)) => {
                match store::read_vectors(files, dir, file, &dense.model, meta.passages)? {
                    Some(vectors) => Some(Arc::new(vectors)),
                    None => return Ok(None),
                }
            }
            _ => None,
        };
        out.push(LiveSegment {
            segment: Arc::new(segment),
            deleted,
            vectors,
        });
    }
    Ok(Some(out))
}

/// BM25 over an [`Index`] with fixed parameters.
pub struct Bm25Retriever<'a> {
    index: &'a Index,
    params: Bm25Params,
}

/// A document ranked by its best passage.
#[derive(Debug, Clone, PartialEq)]
pub struct DocumentHit {
    /// The document id.
    pub doc_id: String,
    /// The score of its best passage.
    pub score: f64,
    /// The position of that passage in the document.
    pub best_passage: usize,
}

impl Bm25Retriever<'_> {
    /// The best `k` documents, each scored by its best passage (MaxP), best first.
    pub fn documents(&self, query: &str, k: usize) -> Vec<DocumentHit> {
        let index = self.index;
        let mut best: HashMap<(usize, u32), (f64, u32)> = HashMap::new();
        for (score, s, p) in index.score_passages(query, self.params) {
            let doc = index.segments[s].segment.passages[p as usize].doc;
            let entry = best.entry((s, doc)).or_insert((score, p));
            // Strictly greater: on a tie the earlier passage (scored first) stays the best.
            if score > entry.0 {
                *entry = (score, p);
            }
        }
        let scored: Vec<(f64, usize, u32)> = best
            .into_iter()
            .map(|((s, _), (score, p))| (score, s, p))
            .collect();
        let top = index.top(scored, k);
        top.into_iter()
            .map(|(score, s, p)| {
                let segment = &index.segments[s].segment;
                let doc = &segment.docs[segment.passages[p as usize].doc as usize];
                DocumentHit {
                    doc_id: doc.id.clone(),
                    score,
                    best_passage: (p - doc.first_passage) as usize,
                }
            })
            .collect()
    }
}

impl Retriever for Bm25Retriever<'_> {
    fn kind(&self) -> RetrieverKind {
        RetrieverKind::Bm25
    }

    fn retrieve(&self, query: &str, k: usize) -> Result<Vec<Hit>> {
        let scored = self.index.score_passages(query, self.params);
        let top = self.index.top(scored, k);
        Ok(top
            .into_iter()
            .enumerate()
            .map(|(i, (v, s, p))| self.index.hit(RetrieverKind::Bm25, v, s, p, i + 1))
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use crate::{Document, Index, IndexSettings, IndexWriter};

    fn doc(id: &str, text: &str) -> Document {
        Document {
            id: id.to_string(),
            title: None,
            text: text.to_string(),
            date: None,
            metadata: None,
        }
    }

    #[test]
    fn documents_by_id_pages_in_id_order_over_segments_and_deletions() {
        let dir = tempfile::tempdir().unwrap();
        let mut writer = IndexWriter::open_or_create(dir.path(), IndexSettings::default()).unwrap();
        for id in ["delta", "alpha", "echo"] {
            writer.add(doc(id, &format!("The {id} document.")));
        }
        writer.commit().unwrap();
        // A second segment, and a deletion in the first.
        for id in ["charlie", "bravo"] {
            writer.add(doc(id, &format!("The {id} document.")));
        }
        writer.remove("echo");
        writer.commit().unwrap();
        drop(writer);
        let index = Index::open(dir.path()).unwrap();
        let page = |offset, limit| -> Vec<String> {
            index
                .documents_by_id(offset, limit)
                .iter()
                .map(|d| d.id.to_string())
                .collect()
        };
        assert_eq!(page(0, 10), ["alpha", "bravo", "charlie", "delta"]);
        assert_eq!(page(1, 2), ["bravo", "charlie"]);
        assert_eq!(page(3, 2), ["delta"]);
        assert!(page(4, 2).is_empty());
        assert_eq!(index.documents_by_id(2, 1)[0].text, "The charlie document.");
        assert_eq!(index.len(), 4);
    }

    #[test]
    fn document_frequency_counts_live_passages_of_analysed_terms() {
        let dir = tempfile::tempdir().unwrap();
        let mut writer = IndexWriter::open_or_create(dir.path(), IndexSettings::default()).unwrap();
        writer.add(doc("a", "Cells divide."));
        writer.add(doc("b", "The cell's membrane."));
        writer.add(doc("c", "Dividing cells."));
        writer.commit().unwrap();
        writer.remove("c");
        writer.commit().unwrap();
        drop(writer);
        let index = Index::open(dir.path()).unwrap();
        assert_eq!(index.analyze("The Cells' dividing"), ["cell", "divid"]);
        assert_eq!(index.document_frequency("cell"), 2);
        // "divid" is in a live passage and in a removed one.
        assert_eq!(index.document_frequency("divid"), 1);
        assert_eq!(index.document_frequency("cells"), 0);
        assert_eq!(index.document_frequency("the"), 0);
    }
}
