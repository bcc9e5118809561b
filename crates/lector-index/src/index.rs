//! A read-only snapshot of an index (the last complete commit) and BM25 search over it.

use crate::analysis::Analyzer;
use crate::bm25::{idf, Bm25Params, TfNorm};
use crate::dense::SegmentVectors;
use crate::error::{Error, Result};
use crate::file_layer::{FileLayer, OsFiles};
use crate::filter::{Filter, FilterInput};
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

/// The documents a filtered search may return: per segment, per document (deleted ones never).
#[derive(Debug)]
pub(crate) struct Allowed {
    /// One bit per document of each segment.
    docs: Vec<Vec<u64>>,
    /// Live documents that pass.
    documents: usize,
    /// How many passages of each segment pass.
    pub passages: Vec<usize>,
    /// Whether BM25 counts only passing passages in its collection statistics.
    pub own_statistics: bool,
    /// The terms in all passing passages.
    total_len: u64,
}

impl Allowed {
    /// Whether passage `p` of segment `s` may be returned.
    pub fn keeps(&self, index: &Index, s: usize, p: u32) -> bool {
        let d = index.segments[s].segment.passages[p as usize].doc as usize;
        self.docs[s][d / 64] >> (d % 64) & 1 == 1
    }
}

/// The document sets of the filters last used on one snapshot (a tenant's, on every request of
/// that tenant), so that each costs one pass over the documents per snapshot, not per request.
#[derive(Default)]
struct AllowedCache {
    entries: std::sync::Mutex<Vec<(String, bool, Arc<Allowed>)>>,
}

impl AllowedCache {
    /// Filters kept per snapshot (the least recently used goes first).
    const CAPACITY: usize = 64;

    fn get_or_make(
        &self,
        filter: &Filter,
        own_statistics: bool,
        make: impl FnOnce() -> Allowed,
    ) -> Arc<Allowed> {
        let key = format!("{filter:?}");
        let lock = || self.entries.lock().unwrap_or_else(|e| e.into_inner());
        {
            let mut entries = lock();
            if let Some(i) = entries
                .iter()
                .position(|(k, own, _)| *k == key && *own == own_statistics)
            {
                let entry = entries.remove(i);
                let found = Arc::clone(&entry.2);
                entries.push(entry);
                return found;
            }
        }
        // Made outside the lock: other filters' requests do not wait for this pass.
        let made = Arc::new(make());
        let mut entries = lock();
        if entries.len() >= Self::CAPACITY {
            entries.remove(0);
        }
        entries.push((key, own_statistics, Arc::clone(&made)));
        made
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
    allowed_cache: AllowedCache,
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
    /// The vector it came with, in an index whose vectors come with the documents
    /// ([`crate::DenseMeta::external`]).
    pub embedding: Option<&'a [f32]>,
}

impl DocumentRef<'_> {
    /// Whether the document passes `filter`.
    pub fn passes(&self, filter: &Filter) -> bool {
        let metadata = self.metadata.and_then(|m| serde_json::from_str(m).ok());
        filter.matches(&FilterInput {
            id: self.id,
            title: self.title,
            date: self.date,
            metadata: metadata.as_ref(),
        })
    }
}

/// One page of [`Index::documents_page`].
#[derive(Debug, Clone, PartialEq)]
pub struct DocumentPage<'a> {
    /// The documents, in the index's own order.
    pub documents: Vec<DocumentRef<'a>>,
    /// Where the next page starts; `None` after the last document.
    pub next: Option<DocumentCursor>,
}

/// A place in the index's own order of documents: a segment and a document position in it.
/// Clients see it as opaque text ([`DocumentCursor::encode`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DocumentCursor {
    segment: String,
    position: u32,
}

impl DocumentCursor {
    /// The cursor as text for a URL (letters, digits, `-` and `.`).
    pub fn encode(&self) -> String {
        let stem = self.segment.strip_suffix(".lseg").unwrap_or(&self.segment);
        format!("{stem}.{}", self.position)
    }

    /// The cursor [`DocumentCursor::encode`] wrote; `None` for any other text.
    pub fn decode(text: &str) -> Option<Self> {
        let (stem, position) = text.rsplit_once('.')?;
        let valid = stem.starts_with("seg-")
            && stem.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-');
        Some(DocumentCursor {
            segment: format!("{stem}.lseg"),
            position: position.parse().ok().filter(|_| valid)?,
        })
    }
}

/// How segment file names order: by the generation in the name (`seg-<generation>-...`), then
/// by the name, so a merge's output (`seg-<g>-m<n>`, planned after its inputs were written)
/// comes after every input.
fn segment_key(file: &str) -> (u64, &str) {
    let generation = file
        .strip_prefix("seg-")
        .and_then(|rest| rest.split('-').next())
        .and_then(|g| g.parse().ok())
        .unwrap_or(0);
    (generation, file)
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
            allowed_cache: AllowedCache::default(),
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
            allowed_cache: AllowedCache::default(),
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

    /// The generation last committed to the index at `dir`, read from its manifest alone: a
    /// cheap way for a reader to learn that a writer (another process) committed since it
    /// opened. [`Error::NoIndex`] when there is no index.
    pub fn committed_generation(dir: impl AsRef<Path>) -> Result<u64> {
        let dir = dir.as_ref();
        let manifest = store::read_manifest(&OsFiles, dir)?.ok_or_else(|| Error::NoIndex {
            dir: dir.to_path_buf(),
        })?;
        Ok(manifest.generation)
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
            .filter(|t| !crate::tfidf::is_key(t))
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

    /// The passages of document `id` in order, as hits with score 0 and no sources; empty when
    /// there is no such document.
    pub fn document_passages(&self, id: &str) -> Vec<Hit> {
        let Some(&(s, d)) = self.ids.get(id) else {
            return Vec::new();
        };
        let doc = &self.segments[s].segment.docs[d as usize];
        (doc.first_passage..doc.first_passage + doc.passages)
            .map(|p| Hit {
                sources: Vec::new(),
                ..self.hit(RetrieverKind::Bm25, 0.0, s, p, 0)
            })
            .collect()
    }

    /// Every live document, in no particular order.
    pub fn documents(&self) -> impl Iterator<Item = DocumentRef<'_>> {
        self.ids.values().map(|&(s, d)| self.document_at(s, d))
    }

    /// One page of the live documents in the index's own order: segments oldest first (by
    /// their file names, which start with the generation that wrote them), documents in the
    /// order they were added to each. The page starts at `from` (the first document when
    /// `None`), skips `skip` live documents, and holds at most `limit`; its cursor says where the
    /// next page starts (`None` after the last document). Nothing is sorted or collected beyond
    /// the page: the work is the page, the segments, and the deleted documents stepped over.
    ///
    /// A cursor stays valid across commits: paging on from one shows every document that stayed
    /// live meanwhile at least once, and documents added meanwhile (in newer segments). When
    /// its segment was merged away, paging goes on at the next segment in the order, which holds
    /// the merge's output, so documents already seen may come again.
    ///
    /// With a `filter`, only passing documents count (for `skip` too) and come back; the work is
    /// then every document stepped over, and the last page may be empty.
    pub fn documents_page(
        &self,
        from: Option<&DocumentCursor>,
        skip: usize,
        limit: usize,
        filter: Option<&Filter>,
    ) -> DocumentPage<'_> {
        let order = self.segment_order();
        let mut at = from.map_or((0, 0), |cursor| self.resume(&order, cursor));
        let mut skip = skip;
        let mut documents = Vec::new();
        while at.0 < order.len() && documents.len() < limit {
            let s = order[at.0];
            let live = &self.segments[s];
            let count = live.segment.docs.len() as u32;
            if filter.is_none() && at.1 == 0 && skip >= self.live_documents(s) {
                skip -= self.live_documents(s);
                at = (at.0 + 1, 0);
                continue;
            }
            while at.1 < count && documents.len() < limit {
                if !live.deleted[at.1 as usize] && self.passes(s, at.1 as usize, filter) {
                    match skip {
                        0 => documents.push(self.document_at(s, at.1)),
                        _ => skip -= 1,
                    }
                }
                at.1 += 1;
            }
            if at.1 >= count {
                at = (at.0 + 1, 0);
            }
        }
        // The next document that passes: a cursor (or its absence) says nothing of documents
        // the filter hides, such as another tenant's after one's own last.
        let next = self
            .next_passing(&order, at, filter)
            .map(|(i, position)| DocumentCursor {
                segment: self.manifest.segments[order[i]].file.clone(),
                position,
            });
        DocumentPage { documents, next }
    }

    /// Live documents that pass `filter` (all of them without one).
    pub fn count(&self, filter: Option<&Filter>) -> usize {
        match filter {
            None => self.len(),
            Some(f) => self.allowed(f, false).documents,
        }
    }

    /// Whether document `d` of segment `s` passes `filter` (always without one).
    fn passes(&self, s: usize, d: usize, filter: Option<&Filter>) -> bool {
        let Some(filter) = filter else {
            return true;
        };
        let segment = &self.segments[s].segment;
        let doc = &segment.docs[d];
        filter.matches(&FilterInput {
            id: &doc.id,
            title: doc.title.as_deref(),
            date: doc.date.as_deref(),
            metadata: segment.metadata(d),
        })
    }

    /// Segment indices in the index's own order (see [`Self::documents_page`]).
    fn segment_order(&self) -> Vec<usize> {
        let mut order: Vec<usize> = (0..self.segments.len()).collect();
        order.sort_by(|&a, &b| {
            segment_key(&self.manifest.segments[a].file)
                .cmp(&segment_key(&self.manifest.segments[b].file))
        });
        order
    }

    /// Live documents of segment `s`.
    fn live_documents(&self, s: usize) -> usize {
        let meta = &self.manifest.segments[s];
        meta.docs as usize - meta.deleted.len()
    }

    /// Where `cursor` points in `order`: its segment and position, or the start of the first
    /// later segment when its segment is gone.
    fn resume(&self, order: &[usize], cursor: &DocumentCursor) -> (usize, u32) {
        let file = |i: usize| self.manifest.segments[order[i]].file.as_str();
        if let Some(i) = (0..order.len()).find(|&i| file(i) == cursor.segment) {
            return (i, cursor.position);
        }
        let key = segment_key(&cursor.segment);
        let later = (0..order.len()).find(|&i| segment_key(file(i)) > key);
        (later.unwrap_or(order.len()), 0)
    }

    /// The first live document at or after `at`.
    fn next_passing(
        &self,
        order: &[usize],
        mut at: (usize, u32),
        filter: Option<&Filter>,
    ) -> Option<(usize, u32)> {
        while at.0 < order.len() {
            let s = order[at.0];
            let live = &self.segments[s];
            let count = live.segment.docs.len() as u32;
            let passing =
                |p: &u32| !live.deleted[*p as usize] && self.passes(s, *p as usize, filter);
            if let Some(p) = (at.1..count).find(passing) {
                return Some((at.0, p));
            }
            at = (at.0 + 1, 0);
        }
        None
    }

    fn document_at(&self, s: usize, d: u32) -> DocumentRef<'_> {
        let segment = &self.segments[s].segment;
        let doc = &segment.docs[d as usize];
        let external = self.manifest.dense.as_ref().is_some_and(|m| m.external);
        let vectors = self.segments[s].vectors.as_deref().filter(|_| external);
        // Every passage holds the document's vector: the first one's is it.
        let embedding = vectors
            .filter(|v| doc.passages > 0 && v.has(doc.first_passage))
            .map(|v| v.vectors.row(doc.first_passage as usize));
        DocumentRef {
            embedding,
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
            allowed: None,
        }
    }

    /// The live documents that pass `filter`, evaluated once per document and snapshot (kept
    /// for the next request with the same filter); with `own_statistics`, BM25 computes N, df
    /// and the mean length over them alone.
    pub(crate) fn allowed(&self, filter: &Filter, own_statistics: bool) -> Arc<Allowed> {
        self.allowed_cache.get_or_make(filter, own_statistics, || {
            self.evaluate(filter, own_statistics)
        })
    }

    fn evaluate(&self, filter: &Filter, own_statistics: bool) -> Allowed {
        let mut allowed = Allowed {
            docs: Vec::with_capacity(self.segments.len()),
            documents: 0,
            passages: Vec::with_capacity(self.segments.len()),
            own_statistics,
            total_len: 0,
        };
        for (s, live) in self.segments.iter().enumerate() {
            let segment = &live.segment;
            let docs: Vec<bool> = (0..segment.docs.len())
                .map(|d| !live.deleted[d] && self.passes(s, d, Some(filter)))
                .collect();
            allowed.documents += docs.iter().filter(|&&k| k).count();
            let passages = segment
                .docs
                .iter()
                .zip(&docs)
                .filter(|(_, &keep)| keep)
                .map(|(doc, _)| doc.passages as usize)
                .sum();
            allowed.total_len += segment
                .passages
                .iter()
                .filter(|p| docs[p.doc as usize])
                .map(|p| u64::from(p.len))
                .sum::<u64>();
            let mut bits = vec![0u64; docs.len().div_ceil(64)];
            for (d, _) in docs.iter().enumerate().filter(|(_, &keep)| keep) {
                bits[d / 64] |= 1 << (d % 64);
            }
            allowed.docs.push(bits);
            allowed.passages.push(passages);
        }
        allowed
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
    /// Collection statistics (N, df, mean length) count every live passage, filtered or not, so
    /// a filter changes which passages come back, never their scores.
    fn score_passages(
        &self,
        query: &str,
        scheme: Scheme,
        allowed: Option<&Allowed>,
    ) -> Vec<(f64, usize, u32)> {
        // Ordered, so that the per-passage sums add terms in one order in every process: a
        // HashMap's order changes per run, and the last bits with it, and so near-ties' order.
        let mut query_terms: BTreeMap<String, u32> = BTreeMap::new();
        let terms = match scheme {
            Scheme::Bm25(_) => self.analyzer.query_terms(query),
            Scheme::Tfidf => crate::tfidf::keys(query),
        };
        for term in terms {
            *query_terms.entry(term).or_default() += 1;
        }
        // Statistics over the passing passages only, when asked (tenants: scores must not
        // depend on documents the caller cannot see).
        let own = allowed.filter(|a| a.own_statistics);
        let (n, avg_len) = match own {
            Some(a) => {
                let n: usize = a.passages.iter().sum();
                (n, a.total_len as f64 / n.max(1) as f64)
            }
            None => (self.live_passages, self.avg_len()),
        };
        let norm = match scheme {
            Scheme::Bm25(params) => Some(TfNorm::new(params, avg_len)),
            Scheme::Tfidf => None,
        };
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
            let df = match own {
                Some(a) => self
                    .live_postings(&lists)
                    .filter(|&(s, p, _)| a.keeps(self, s, p))
                    .count(),
                None => self.live_postings(&lists).count(),
            };
            if df == 0 {
                continue;
            }
            match &norm {
                Some(norm) => {
                    let weight = f64::from(*qtf) * idf(n, df);
                    for (s, passage, tf) in self.live_postings(&lists) {
                        let p = &self.segments[s].segment.passages[passage as usize];
                        scores[s][passage as usize] += weight * norm.weight(tf, p.len);
                    }
                }
                None => {
                    // DrQA: the query's and the passage's ln(1 + tf) · idf, multiplied.
                    let idf = crate::tfidf::idf(n, df);
                    let weight = f64::from(*qtf).ln_1p() * idf * idf;
                    for (s, passage, tf) in self.live_postings(&lists) {
                        scores[s][passage as usize] += weight * f64::from(tf).ln_1p();
                    }
                }
            }
        }
        let mut out = Vec::new();
        for (s, segment_scores) in scores.iter().enumerate() {
            out.extend(
                segment_scores
                    .iter()
                    .enumerate()
                    .filter(|(p, &v)| {
                        v > 0.0 && allowed.is_none_or(|a| a.keeps(self, s, *p as u32))
                    })
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
        let metadata: Option<serde_json::Value> =
            (doc.metadata.as_deref()).and_then(|m| serde_json::from_str(m).ok());
        Hit {
            doc_id: doc.id.clone(),
            title: doc.title.clone(),
            // Parsed per hit: a filter-less search never pays for parsing the whole segment's.
            metadata: metadata.clone(),
            page: lector_ingest::page_of(metadata.as_ref(), passage.span.char_start),
            section: lector_ingest::section_path(metadata.as_ref(), passage.span.char_start),
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
    allowed: Option<Arc<Allowed>>,
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
    /// Only documents passing `filter` come back (their scores are unchanged).
    pub fn filtered(self, filter: Option<&Filter>) -> Self {
        let allowed = filter.map(|f| self.index.allowed(f, false));
        self.only(allowed)
    }

    /// Only passages of `allowed` documents come back.
    pub(crate) fn only(mut self, allowed: Option<Arc<Allowed>>) -> Self {
        self.allowed = allowed;
        self
    }

    /// The best `k` documents, each scored by its best passage (MaxP), best first.
    pub fn documents(&self, query: &str, k: usize) -> Vec<DocumentHit> {
        let index = self.index;
        let mut best: HashMap<(usize, u32), (f64, u32)> = HashMap::new();
        for (score, s, p) in
            index.score_passages(query, Scheme::Bm25(self.params), self.allowed.as_deref())
        {
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
        let scored =
            self.index
                .score_passages(query, Scheme::Bm25(self.params), self.allowed.as_deref());
        let top = self.index.top(scored, k);
        Ok(top
            .into_iter()
            .enumerate()
            .map(|(i, (v, s, p))| self.index.hit(RetrieverKind::Bm25, v, s, p, i + 1))
            .collect())
    }
}

/// How passages are scored against a query's terms.
#[derive(Clone, Copy)]
enum Scheme {
    Bm25(Bm25Params),
    /// DrQA's TF-IDF over hashed n-grams ([`crate::tfidf`]).
    Tfidf,
}

/// TF-IDF over hashed unigrams and bigrams (DrQA's document retriever), for indexes created
/// with [`IndexSettings::tfidf`](crate::IndexSettings).
pub struct TfidfRetriever<'a> {
    index: &'a Index,
    allowed: Option<Arc<Allowed>>,
}

impl Index {
    /// The TF-IDF retriever; an error when the index was created without n-gram postings.
    pub fn tfidf(&self) -> Result<TfidfRetriever<'_>> {
        if !self.manifest.settings.tfidf {
            return Err(Error::Config(format!(
                "index {} has no n-gram postings for TF-IDF; create it with `lector index add --tfidf`",
                self.dir().display()
            )));
        }
        Ok(TfidfRetriever {
            index: self,
            allowed: None,
        })
    }
}

impl TfidfRetriever<'_> {
    /// Only passages of `allowed` documents come back.
    pub(crate) fn only(mut self, allowed: Option<Arc<Allowed>>) -> Self {
        self.allowed = allowed;
        self
    }
}

impl Retriever for TfidfRetriever<'_> {
    fn kind(&self) -> RetrieverKind {
        RetrieverKind::Tfidf
    }

    fn retrieve(&self, query: &str, k: usize) -> Result<Vec<Hit>> {
        let scored = self
            .index
            .score_passages(query, Scheme::Tfidf, self.allowed.as_deref());
        let top = self.index.top(scored, k);
        Ok(top
            .into_iter()
            .enumerate()
            .map(|(i, (v, s, p))| self.index.hit(RetrieverKind::Tfidf, v, s, p, i + 1))
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::{AllowedCache, DocumentCursor, DocumentPage};
    use crate::{Document, Index, IndexSettings, IndexWriter};

    fn doc(id: &str, text: &str) -> Document {
        Document {
            id: id.to_string(),
            title: None,
            text: text.to_string(),
            date: None,
            metadata: None,
            embedding: None,
        }
    }

    #[test]
    fn a_filters_documents_are_found_once_per_snapshot_and_exactly() {
        use crate::Filter;
        use std::sync::Arc;
        let dir = tempfile::tempdir().unwrap();
        let mut writer = IndexWriter::open_or_create(dir.path(), IndexSettings::default()).unwrap();
        // 150 documents (more than two 64-bit words), every third of tenant "a".
        for i in 0..150u32 {
            let mut d = doc(&format!("d{i}"), &format!("Document number {i} about tea."));
            let tenant = if i.is_multiple_of(3) { "a" } else { "b" };
            d.metadata = Some(serde_json::json!({ "tenant": tenant }));
            writer.add(d);
        }
        writer.commit().unwrap();
        let index = writer.committed().clone();
        let a = Filter::parse(r#"tenant == "a""#).unwrap();
        let b = Filter::parse(r#"tenant == "b""#).unwrap();
        let first = index.allowed(&a, true);
        assert!(Arc::ptr_eq(&first, &index.allowed(&a, true)), "kept");
        assert!(
            !Arc::ptr_eq(&first, &index.allowed(&a, false)),
            "by statistics too"
        );
        assert_eq!((index.count(Some(&a)), index.count(Some(&b))), (50, 100));
        for p in 0..150u32 {
            let doc_of = index.segments[0].segment.passages[p as usize].doc;
            assert_eq!(
                first.keeps(&index, 0, p),
                doc_of.is_multiple_of(3),
                "passage {p}"
            );
        }
        // The cache is bounded: old filters are made again, not kept forever.
        for year in 0..=AllowedCache::CAPACITY {
            index.allowed(&Filter::parse(&format!("year == {year}")).unwrap(), false);
        }
        assert!(!Arc::ptr_eq(&first, &index.allowed(&a, true)));
        assert_eq!(
            index.allowed_cache.entries.lock().unwrap().len(),
            AllowedCache::CAPACITY
        );
    }

    #[test]
    fn documents_page_in_index_order_over_segments_deletions_and_commits() {
        let dir = tempfile::tempdir().unwrap();
        let mut writer = IndexWriter::open_or_create(dir.path(), IndexSettings::default()).unwrap();
        // Merges run when the test says.
        writer.defer_merges(true);
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
        let index = writer.committed().clone();
        let ids = |page: &DocumentPage| -> Vec<String> {
            page.documents.iter().map(|d| d.id.to_string()).collect()
        };
        let all = index.documents_page(None, 0, 10, None);
        assert_eq!(ids(&all), ["delta", "alpha", "charlie", "bravo"]);
        assert_eq!(all.next, None);
        assert_eq!(
            ids(&index.documents_page(None, 1, 2, None)),
            ["alpha", "charlie"]
        );
        assert!(index.documents_page(None, 4, 2, None).documents.is_empty());
        // Cursors: pages of two, through the encoded text a client sends back.
        let first = index.documents_page(None, 0, 2, None);
        assert_eq!(ids(&first), ["delta", "alpha"]);
        let text = first.next.as_ref().unwrap().encode();
        assert!(
            text.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-.".contains(&b)),
            "{text}"
        );
        let cursor = DocumentCursor::decode(&text).unwrap();
        let second = index.documents_page(Some(&cursor), 0, 2, None);
        assert_eq!(ids(&second), ["charlie", "bravo"]);
        assert_eq!(second.next, None, "no live document after the page");
        assert_eq!(
            index.documents_page(Some(&cursor), 0, 2, None).documents[0].text,
            "The charlie document."
        );
        // A cursor outlives commits: a deletion before it and an addition after it.
        writer.remove("alpha");
        writer.add(doc("foxtrot", "The foxtrot document."));
        writer.commit().unwrap();
        let later = writer.committed().clone();
        assert_eq!(
            ids(&later.documents_page(Some(&cursor), 0, 10, None)),
            ["charlie", "bravo", "foxtrot"]
        );
        // Merges rewrite segments under the cursor: what it had not reached is still listed.
        while let Some(job) = writer.next_merge() {
            writer.finish_merge(job.run()).unwrap();
        }
        let merged = writer.committed().clone();
        let after = ids(&merged.documents_page(Some(&cursor), 0, 10, None));
        for id in ["charlie", "bravo", "foxtrot"] {
            assert!(
                after.contains(&id.to_string()),
                "{id} missing after a merge: {after:?}"
            );
        }
        for bad in ["", "seg-1", "x.1", "seg-1.-1", "seg-1/..%2f.1", "seg-1.1x"] {
            assert_eq!(DocumentCursor::decode(bad), None, "{bad}");
        }
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
