//! The single writer of an index: add, replace and remove documents, then commit atomically.

use crate::analysis::Analyzer;
use crate::dense::{embed_segment, SegmentVectors, HNSW_MIN_VECTORS};
use crate::document::Document;
use crate::embed::Embedder;
use crate::error::{io, Error, Result};
use crate::file_layer::{FileLayer, OsFiles};
use crate::index::{load_segments, Index, LiveSegment};
use crate::merge::{MergeJob, MergePolicy, MergedSegment};
use crate::segment::Segment;
use crate::store::{self, DenseMeta, IndexSettings, Manifest, SegmentMeta};
use crate::vector::{HnswParams, Vectors};
use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// What [`IndexWriter::add`] did with a document.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AddOutcome {
    /// A new id.
    Added,
    /// An existing id with different content: the old document goes at the next commit.
    Replaced,
    /// An existing id with the same content hash: nothing to do.
    Unchanged,
}

/// The result of a commit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CommitInfo {
    /// The generation now on disk.
    pub generation: u64,
    /// Live documents after the commit.
    pub documents: usize,
    /// Segment files after the commit.
    pub segments: usize,
}

/// Holds the index's writer lock for its lifetime; changes are invisible (to readers and after a
/// crash) until [`IndexWriter::commit`] returns.
pub struct IndexWriter {
    _lock: File,
    /// Where commits read and write (the real file system but in crash tests).
    files: Arc<dyn FileLayer>,
    index: Index,
    pending: Vec<Option<Document>>,
    pending_ids: HashMap<String, usize>,
    removed: HashSet<String>,
    embedder: Option<Arc<dyn Embedder>>,
    hnsw: HnswParams,
    hnsw_min: usize,
    policy: MergePolicy,
    /// Commits leave merging to the caller ([`IndexWriter::next_merge`]).
    defer_merges: bool,
    /// The output file of the merge planned and not finished yet.
    merging: Option<String>,
}

/// Merges planned in this process: numbers their output files, so that two writers of one
/// directory in turn (a server reopening its writer while a merge runs) never share a name.
static MERGES_PLANNED: AtomicU64 = AtomicU64::new(0);

impl IndexWriter {
    /// Opens the index at `dir` for writing, creating it with `settings` when the directory does
    /// not exist or is empty (an existing index keeps its own settings: see [`Self::settings`]).
    /// Fails with [`Error::Locked`] while another writer is open, and refuses a non-empty
    /// directory that is not an index. Files left by an interrupted commit are removed.
    pub fn open_or_create(dir: impl AsRef<Path>, settings: IndexSettings) -> Result<IndexWriter> {
        Self::open_or_create_with(Arc::new(OsFiles), dir.as_ref(), settings)
    }

    /// [`Self::open_or_create`] with every commit going through `files`.
    pub(crate) fn open_or_create_with(
        files: Arc<dyn FileLayer>,
        dir: &Path,
        settings: IndexSettings,
    ) -> Result<IndexWriter> {
        std::fs::create_dir_all(dir).map_err(io(dir))?;
        let lock = store::lock(dir)?;
        let manifest = match store::read_manifest(&*files, dir)? {
            Some(manifest) => manifest,
            None => create(&*files, dir, settings)?,
        };
        store::remove_unlisted(&*files, dir, &manifest, None)?;
        let segments = load_segments(&*files, dir, &manifest)?.ok_or_else(|| Error::Corrupt {
            dir: dir.to_path_buf(),
            message: format!("a segment file listed in {} is missing", store::MANIFEST),
        })?;
        let index = Index::from_parts(dir, manifest, segments);
        Ok(IndexWriter {
            _lock: lock,
            files,
            index,
            pending: Vec::new(),
            pending_ids: HashMap::new(),
            removed: HashSet::new(),
            embedder: None,
            hnsw: HnswParams::default(),
            hnsw_min: HNSW_MIN_VECTORS,
            policy: MergePolicy::default(),
            defer_merges: false,
            merging: None,
        })
    }

    /// Opens an existing index for writing.
    pub fn open(dir: impl AsRef<Path>) -> Result<IndexWriter> {
        let dir = dir.as_ref();
        if store::read_manifest(&OsFiles, dir)?.is_none() {
            return Err(Error::NoIndex {
                dir: dir.to_path_buf(),
            });
        }
        Self::open_or_create(dir, IndexSettings::default())
    }

    /// Makes the index dense (or keeps it so): from the next commit on, every passage has a
    /// vector by `embedder`, and passages committed without one are embedded then. Fails when
    /// the index was embedded by another model (vectors of two models are not comparable).
    pub fn set_embedder(&mut self, embedder: Arc<dyn Embedder>) -> Result<()> {
        if let Some(meta) = &self.index.manifest.dense {
            meta.check(embedder.as_ref(), &self.index.dir().display())?;
        }
        self.embedder = Some(embedder);
        Ok(())
    }

    /// HNSW parameters for the graphs this writer builds, and the fewest passages a segment
    /// needs to get one (smaller segments are scanned exactly) [default: [`HNSW_MIN_VECTORS`]].
    pub fn set_hnsw(&mut self, params: HnswParams, min_passages: usize) {
        self.hnsw = params;
        self.hnsw_min = min_passages;
    }

    /// When segments are merged [default: [`MergePolicy::default`]].
    pub fn set_merge_policy(&mut self, policy: MergePolicy) {
        self.policy = policy;
    }

    /// With `defer` set, commits no longer merge segments: the caller runs the merges the policy
    /// asks for with [`Self::next_merge`], [`MergeJob::run`] (on any thread, without the writer)
    /// and [`Self::finish_merge`], so that commits stay quick while a large merge runs.
    pub fn defer_merges(&mut self, defer: bool) {
        self.defer_merges = defer;
    }

    /// Whether the index keeps passage vectors.
    pub fn is_dense(&self) -> bool {
        self.index.manifest.dense.is_some()
    }

    /// Whether the index embeds its passages itself: its commits then need the embedder for new
    /// passages (not so when the vectors come with the documents).
    pub fn embeds_itself(&self) -> bool {
        self.index
            .manifest
            .dense
            .as_ref()
            .is_some_and(|m| !m.external)
    }

    /// The index's settings.
    pub fn settings(&self) -> IndexSettings {
        self.index.settings()
    }

    /// The last commit, as readers see it.
    pub fn committed(&self) -> &Index {
        &self.index
    }

    /// Documents added or replaced since the last commit.
    pub fn pending(&self) -> usize {
        self.pending_ids.len()
    }

    /// Stages `doc`: a new id is added, a known id with new content replaces the old document,
    /// and a known id with the same content is left alone.
    pub fn add(&mut self, doc: Document) -> AddOutcome {
        let hash = doc.content_hash();
        if let Some(&slot) = self.pending_ids.get(&doc.id) {
            let staged = self.pending[slot].as_ref().expect("staged slot is filled");
            if staged.content_hash() == hash {
                return AddOutcome::Unchanged;
            }
            self.pending[slot] = Some(doc);
            return AddOutcome::Replaced;
        }
        let committed = self.committed_hash(&doc.id);
        if committed == Some(hash) {
            // Same content as committed: also cancels a staged removal of this id.
            self.removed.remove(&doc.id);
            return AddOutcome::Unchanged;
        }
        let outcome = if committed.is_some() {
            self.removed.insert(doc.id.clone());
            AddOutcome::Replaced
        } else {
            AddOutcome::Added
        };
        self.pending_ids.insert(doc.id.clone(), self.pending.len());
        self.pending.push(Some(doc));
        outcome
    }

    fn committed_hash(&self, id: &str) -> Option<crate::document::ContentHash> {
        let &(s, d) = self.index.ids.get(id)?;
        Some(self.index.segments[s].segment.docs[d as usize].hash)
    }

    /// Stages the removal of `id`; false when no such document is committed or staged.
    pub fn remove(&mut self, id: &str) -> bool {
        let mut found = false;
        if let Some(slot) = self.pending_ids.remove(id) {
            self.pending[slot] = None;
            found = true;
        }
        if self.index.ids.contains_key(id) {
            self.removed.insert(id.to_string());
            found = true;
        }
        found
    }

    /// Makes every staged change durable and visible, atomically. With nothing staged (and no
    /// passage waiting for a vector) it only reports the current state. Then, unless merges are
    /// deferred, it runs the merges the policy asks for, each a commit of its own: an error there
    /// leaves the staged changes committed.
    pub fn commit(&mut self) -> Result<CommitInfo> {
        self.commit_with_progress(&mut |_, _| {})
    }

    /// [`Self::commit`], reporting embedding progress as (passages embedded, passages to embed).
    pub fn commit_with_progress(
        &mut self,
        progress: &mut dyn FnMut(usize, usize),
    ) -> Result<CommitInfo> {
        self.commit_staged(progress)?;
        if !self.defer_merges {
            while let Some(job) = self.next_merge() {
                self.finish_merge(job.run())?;
            }
        }
        Ok(self.info())
    }

    /// The merge the policy asks for next, planned on the last commit; `None` when there is none
    /// or one is still running (merges run one at a time). Its output file is reserved until
    /// [`Self::finish_merge`].
    pub fn next_merge(&mut self) -> Option<MergeJob> {
        if self.merging.is_some() {
            return None;
        }
        let picked = self.policy.pick(&self.index.segments)?;
        let n = MERGES_PLANNED.fetch_add(1, Ordering::Relaxed);
        let name = store::merge_name(self.index.generation() + 1, n);
        self.merging = Some(name.clone());
        let inputs = picked
            .into_iter()
            .map(|i| {
                let meta = self.index.manifest.segments[i].clone();
                (meta, self.index.segments[i].clone())
            })
            .collect();
        Some(MergeJob {
            files: self.files.clone(),
            dir: self.index.dir().to_path_buf(),
            name,
            inputs,
            dense: self.index.manifest.dense.clone(),
            hnsw: self.hnsw,
            hnsw_min: self.hnsw_min,
        })
    }

    /// Lists the output of the merge [`Self::next_merge`] planned in place of its inputs, in a
    /// commit of its own; documents deleted since it was planned stay deleted. Returns the
    /// merge's error if it failed, and `None` (dropping the output) when an input is gone
    /// meanwhile (every document of it was deleted) or another writer planned the merge (its
    /// files were not protected from this writer's commits).
    pub fn finish_merge(&mut self, merged: MergedSegment) -> Result<Option<CommitInfo>> {
        if self.merging.as_deref() != Some(merged.name.as_str()) {
            return Ok(None);
        }
        self.merging = None;
        let merged = merged.written?;
        let dir = self.index.dir().to_path_buf();
        let manifest = &self.index.manifest;
        let positions: Option<Vec<usize>> = merged
            .inputs
            .iter()
            .map(|(file, _)| manifest.segments.iter().position(|s| &s.file == file))
            .collect();
        let Some(positions) = positions else {
            store::remove_unlisted(&*self.files, &dir, manifest, None)?;
            return Ok(None);
        };
        let (mut meta, mut live) = (merged.meta, merged.live);
        for ((_, moved), &input) in merged.inputs.iter().zip(&positions) {
            let deleted_now = &self.index.segments[input].deleted;
            for (doc, target) in moved.iter().enumerate() {
                if let (Some(target), true) = (target, deleted_now[doc]) {
                    live.deleted[*target as usize] = true;
                }
            }
        }
        meta.deleted = (0..live.deleted.len() as u32)
            .filter(|&d| live.deleted[d as usize])
            .collect();
        let first = *positions.iter().min().expect("a merge has inputs");
        let mut parts: Vec<(SegmentMeta, LiveSegment)> = Vec::new();
        for (i, part) in self.committed_parts().into_iter().enumerate() {
            if i == first && live.deleted.contains(&false) {
                parts.push((meta.clone(), live.clone()));
            }
            if !positions.contains(&i) {
                parts.push(part);
            }
        }
        let manifest = Manifest {
            generation: self.index.generation() + 1,
            segments: parts.iter().map(|(meta, _)| meta.clone()).collect(),
            ..self.index.manifest.clone()
        };
        self.publish(&dir, manifest, parts)?;
        Ok(Some(self.info()))
    }

    /// Commits the staged changes, without merging.
    fn commit_staged(&mut self, progress: &mut dyn FnMut(usize, usize)) -> Result<()> {
        if self.staged_nothing() {
            return Ok(());
        }
        let dense = self.dense_meta()?;
        let dir = self.index.dir().to_path_buf();
        let generation = self.index.generation() + 1;
        let mut parts = self.surviving_segments();
        let staged: Vec<&Document> = self.pending.iter().flatten().collect();
        if !staged.is_empty() {
            let settings = self.settings();
            let segment = Segment::build(
                staged,
                &Analyzer::new(settings.analyzer),
                settings.chunking,
                settings.tfidf,
            );
            let name = store::segment_name(generation, 0);
            let meta = store::write_segment(&*self.files, &dir, &name, &segment)?;
            parts.push((
                meta,
                LiveSegment {
                    deleted: vec![false; segment.docs.len()],
                    segment: Arc::new(segment),
                    vectors: None,
                },
            ));
        }
        match &dense {
            Some(meta) if meta.external => {
                let staged: Vec<&Document> = self.pending.iter().flatten().collect();
                self.attach_given(&dir, &mut parts, meta, &staged)?;
            }
            Some(meta) => self.embed_missing(&dir, &mut parts, &meta.model, progress)?,
            None => {}
        }
        let manifest = Manifest {
            generation,
            segments: parts.iter().map(|(meta, _)| meta.clone()).collect(),
            dense,
            ..self.index.manifest.clone()
        };
        self.publish(&dir, manifest, parts)?;
        self.pending.clear();
        self.pending_ids.clear();
        self.removed.clear();
        Ok(())
    }

    /// Writes `manifest` (the commit point) and serves `parts` from now on.
    fn publish(
        &mut self,
        dir: &Path,
        manifest: Manifest,
        parts: Vec<(SegmentMeta, LiveSegment)>,
    ) -> Result<()> {
        store::write_manifest(&*self.files, dir, &manifest)?;
        self.index = Index::from_parts(
            dir,
            manifest,
            parts.into_iter().map(|(_, live)| live).collect(),
        );
        // Old segments are garbage now; a reader still opening them retries with the new manifest.
        // The manifest is durable, so the commit has happened whatever the cleanup does: an error
        // here must not make the caller retry (and write the documents again). What is left is
        // removed by the next commit's cleanup or the next open.
        let in_flight = self.merging.as_deref();
        let _ = store::remove_unlisted(&*self.files, dir, &self.index.manifest, in_flight);
        Ok(())
    }

    /// The last commit's segments with their metadata.
    pub(crate) fn committed_parts(&self) -> Vec<(SegmentMeta, LiveSegment)> {
        let metas = self.index.manifest.segments.iter().cloned();
        metas.zip(self.index.segments.iter().cloned()).collect()
    }

    /// Whether an embedder is set and some committed passages lack vectors (a BM25 index made
    /// dense): committing then embeds them even with nothing staged.
    fn needs_vectors(&self) -> bool {
        self.embedder.is_some() && self.index.segments.iter().any(|s| s.vectors.is_none())
    }

    /// The dense metadata after this commit: the index's, or the embedder's when it becomes
    /// dense now, or the model of the staged documents' own vectors. A dense index with new
    /// passages and no embedder cannot commit, unless its vectors come with the documents.
    fn dense_meta(&self) -> Result<Option<DenseMeta>> {
        let mut given = self
            .pending
            .iter()
            .flatten()
            .filter(|d| d.embedding.is_some());
        if let Some(first) = given.next() {
            let embedding = first.embedding.as_ref().expect("filtered on embeddings");
            let meta = match &self.index.manifest.dense {
                Some(meta) => meta.clone(),
                None => DenseMeta {
                    model: embedding.model.clone(),
                    dim: embedding.vector.len(),
                    digest: None,
                    external: true,
                },
            };
            for doc in std::iter::once(first).chain(given) {
                self.check_given(doc, &meta)?;
            }
            return Ok(Some(meta));
        }
        match (&self.index.manifest.dense, &self.embedder) {
            (Some(meta), _) if meta.external => Ok(Some(meta.clone())),
            (Some(meta), Some(_)) => Ok(Some(meta.clone())),
            (Some(meta), None) if self.pending_ids.is_empty() => Ok(Some(meta.clone())),
            (Some(meta), None) => Err(Error::Config(format!(
                "index {} is dense: new documents need its embedder `{}`",
                self.index.dir().display(),
                meta.model
            ))),
            (None, Some(embedder)) => Ok(Some(DenseMeta::of(embedder.as_ref()))),
            (None, None) => Ok(None),
        }
    }

    /// Refuses a document's own vector that the index cannot keep, naming the document.
    fn check_given(&self, doc: &Document, meta: &DenseMeta) -> Result<()> {
        let embedding = doc.embedding.as_ref().expect("a document with a vector");
        let refuse = |why: String| {
            Err(Error::Config(format!(
                "document `{}`: {why} (index {})",
                doc.id,
                self.index.dir().display()
            )))
        };
        if let Err(why) = embedding.check() {
            return refuse(why);
        }
        if !meta.external || self.embedder.is_some() {
            return refuse(format!(
                "the index embeds its passages itself with `{}`; vectors made outside lector \
                 need an index of their own",
                meta.model
            ));
        }
        if embedding.model != meta.model || embedding.vector.len() != meta.dim {
            return refuse(format!(
                "its vector is from `{}` ({} dimensions), the index's from `{}` ({}); vectors \
                 of two models are not comparable",
                embedding.model,
                embedding.vector.len(),
                meta.model,
                meta.dim
            ));
        }
        Ok(())
    }

    /// Gives every segment of `parts` without vectors its vector file in an index whose vectors
    /// come with the documents: each passage gets its document's vector from `staged`, a
    /// document without one zeros (which dense search never returns).
    fn attach_given(
        &self,
        dir: &Path,
        parts: &mut [(SegmentMeta, LiveSegment)],
        meta: &DenseMeta,
        staged: &[&Document],
    ) -> Result<()> {
        let given: HashMap<&str, &[f32]> = staged
            .iter()
            .filter_map(|d| Some((d.id.as_str(), d.embedding.as_ref()?.vector.as_slice())))
            .collect();
        let zeros = vec![0.0; meta.dim];
        for (segment_meta, live) in parts.iter_mut() {
            if live.vectors.is_some() {
                continue;
            }
            let mut vectors = Vectors::new(meta.dim);
            for passage in &live.segment.passages {
                let doc = &live.segment.docs[passage.doc as usize];
                vectors.push(given.get(doc.id.as_str()).copied().unwrap_or(&zeros));
            }
            let vectors = SegmentVectors::new(vectors, &self.hnsw, self.hnsw_min);
            let name = store::vector_name(&segment_meta.file);
            let written = store::write_vectors(&*self.files, dir, &name, &meta.model, &vectors)?;
            segment_meta.vectors = Some(written);
            live.vectors = Some(Arc::new(vectors));
        }
        Ok(())
    }

    /// Embeds every segment of `parts` that has no vectors yet and writes its vector file.
    fn embed_missing(
        &self,
        dir: &Path,
        parts: &mut [(SegmentMeta, LiveSegment)],
        model: &str,
        progress: &mut dyn FnMut(usize, usize),
    ) -> Result<()> {
        let total: usize = parts
            .iter()
            .filter(|(_, live)| live.vectors.is_none())
            .map(|(_, live)| live.segment.passages.len())
            .sum();
        if total == 0 {
            return Ok(());
        }
        let embedder = self
            .embedder
            .as_deref()
            .expect("dense_meta checked that new passages have an embedder");
        let mut done = 0;
        progress(done, total);
        for (meta, live) in parts.iter_mut() {
            if live.vectors.is_some() {
                continue;
            }
            let vectors = embed_segment(&live.segment, embedder, &mut |count| {
                done += count;
                progress(done, total);
            })?;
            let vectors = SegmentVectors::new(vectors, &self.hnsw, self.hnsw_min);
            let name = store::vector_name(&meta.file);
            let written = store::write_vectors(&*self.files, dir, &name, model, &vectors)?;
            meta.vectors = Some(written);
            live.vectors = Some(Arc::new(vectors));
        }
        Ok(())
    }

    /// Whether nothing is staged (nor waiting for vectors).
    pub(crate) fn staged_nothing(&self) -> bool {
        self.pending_ids.is_empty() && self.removed.is_empty() && !self.needs_vectors()
    }

    /// Commits `manifest`, whose segments are `parts` (written durably already).
    pub(crate) fn publish_manifest(
        &mut self,
        manifest: Manifest,
        parts: Vec<(SegmentMeta, LiveSegment)>,
    ) -> Result<()> {
        let dir = self.index.dir().to_path_buf();
        self.publish(&dir, manifest, parts)
    }

    /// Copies the file `from` to `to` (in this index's directory) durably.
    pub(crate) fn copy_file(&self, from: &Path, to: &Path) -> Result<()> {
        let bytes = self.files.read(from).map_err(io(from))?;
        crate::file_layer::write_durably_with(&*self.files, to, &bytes).map_err(io(to))
    }

    pub(crate) fn info(&self) -> CommitInfo {
        CommitInfo {
            generation: self.index.generation(),
            documents: self.index.len(),
            segments: self.index.segments.len(),
        }
    }

    /// The committed segments with this commit's deletions applied; fully deleted ones dropped.
    fn surviving_segments(&self) -> Vec<(SegmentMeta, LiveSegment)> {
        let mut parts = self.committed_parts();
        for id in &self.removed {
            if let Some(&(s, d)) = self.index.ids.get(id) {
                parts[s].1.deleted[d as usize] = true;
            }
        }
        parts.retain(|(_, live)| live.deleted.iter().any(|&gone| !gone));
        for (meta, live) in &mut parts {
            meta.deleted = (0..live.deleted.len() as u32)
                .filter(|&d| live.deleted[d as usize])
                .collect();
        }
        parts
    }
}

/// Creates a new index: the directory must hold nothing but (leftover) index files.
fn create(files: &dyn FileLayer, dir: &Path, settings: IndexSettings) -> Result<Manifest> {
    for name in store::file_names(files, dir)? {
        if !store::is_index_file(&name) {
            return Err(Error::Config(format!(
                "{} is not empty and is not a lector index (found `{name}`); choose another --index directory",
                dir.display()
            )));
        }
    }
    settings.bm25.validate().map_err(Error::Config)?;
    let manifest = Manifest::empty(settings);
    store::write_manifest(files, dir, &manifest)?;
    Ok(manifest)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io;
    use std::sync::atomic::AtomicBool;

    /// The real file system, but removals fail while `failing` is set, and writing a merge's
    /// output panics while `panicking` is.
    #[derive(Default)]
    struct Faulty {
        failing: AtomicBool,
        panicking: AtomicBool,
    }

    impl FileLayer for Faulty {
        fn write(&self, path: &Path, bytes: &[u8]) -> io::Result<()> {
            let name = path.file_name().unwrap().to_string_lossy();
            if self.panicking.load(Ordering::Relaxed) && name.contains("-m") {
                panic!("a bug while writing {name}");
            }
            OsFiles.write(path, bytes)
        }
        fn sync_file(&self, path: &Path) -> io::Result<()> {
            OsFiles.sync_file(path)
        }
        fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
            OsFiles.rename(from, to)
        }
        fn remove(&self, path: &Path) -> io::Result<()> {
            if self.failing.load(Ordering::Relaxed) {
                return Err(io::Error::other("removal refused"));
            }
            OsFiles.remove(path)
        }
        fn sync_dir(&self, dir: &Path) -> io::Result<()> {
            OsFiles.sync_dir(dir)
        }
        fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
            OsFiles.read(path)
        }
        fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
            OsFiles.list(dir)
        }
    }

    fn doc(id: &str) -> Document {
        Document {
            id: id.to_string(),
            title: None,
            text: format!("The {id} document."),
            date: None,
            metadata: None,
            embedding: None,
        }
    }

    #[test]
    fn a_cleanup_error_after_the_commit_point_is_not_a_failed_commit() {
        let dir = tempfile::tempdir().unwrap();
        let files = Arc::new(Faulty::default());
        let mut writer =
            IndexWriter::open_or_create_with(files.clone(), dir.path(), IndexSettings::default())
                .unwrap();
        writer.add(doc("a"));
        let first = writer.commit().unwrap();
        // Deleting every document of the first segment makes its file garbage.
        files.failing.store(true, Ordering::Relaxed);
        writer.remove("a");
        writer.add(doc("b"));
        let second = writer.commit().expect("the manifest is durable: committed");
        assert_eq!(second.generation, first.generation + 1);
        assert_eq!(second.documents, 1);
        // Nothing is left staged, so a retry writes nothing again.
        assert_eq!(writer.commit().unwrap(), second);
        // The leftover goes at the next open.
        files.failing.store(false, Ordering::Relaxed);
        drop(writer);
        let reopened = IndexWriter::open(dir.path()).unwrap();
        assert_eq!(reopened.committed().len(), 1);
        let segment_files = std::fs::read_dir(dir.path())
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .unwrap()
                    .file_name()
                    .to_string_lossy()
                    .starts_with("seg-")
            })
            .count();
        assert_eq!(segment_files, 1, "only the listed segment is left");
    }

    #[test]
    fn a_panicking_merge_fails_and_is_planned_again() {
        let dir = tempfile::tempdir().unwrap();
        let files = Arc::new(Faulty::default());
        let mut writer =
            IndexWriter::open_or_create_with(files.clone(), dir.path(), IndexSettings::default())
                .unwrap();
        writer.defer_merges(true);
        writer.set_merge_policy(MergePolicy {
            factor: 2,
            floor_passages: 1_000,
        });
        for id in ["a", "b"] {
            writer.add(doc(id));
            writer.commit().unwrap();
        }
        files.panicking.store(true, Ordering::Relaxed);
        let job = writer.next_merge().expect("two small segments are due");
        let failed = writer.finish_merge(job.run());
        assert!(
            matches!(failed, Err(Error::MergePanicked(ref m)) if m.contains("a bug while writing")),
            "{:?}",
            failed.map(|_| ())
        );
        assert_eq!(
            writer.committed().segments.len(),
            2,
            "the index is unchanged"
        );
        files.panicking.store(false, Ordering::Relaxed);
        let retry = writer.next_merge().expect("the merge is planned again");
        let merged = writer.finish_merge(retry.run()).unwrap().unwrap();
        assert_eq!((merged.segments, merged.documents), (1, 2));
    }
}
