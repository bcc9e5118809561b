//! On-disk layout and the commit protocol.
//!
//! An index directory holds:
//!
//! - `MANIFEST.json`: format name and version, commit generation, settings, and the live segment
//!   files with their length, CRC-32, and deleted documents. The manifest *is* the commit: readers
//!   see exactly the segments it lists.
//! - `seg-<generation>-<n>.lseg`: immutable segment files ([`crate::segment`]).
//! - `seg-<generation>-<n>.lvec`: the passage vectors of a segment, when the index is dense
//!   ([`crate::dense`]); written, checked and committed like the segment files.
//! - `write.lock`: held with an OS advisory lock (`flock`) by the one writer; the OS releases it
//!   when the process dies, even by `kill -9`, so a crash never leaves a stale lock.
//!
//! A commit writes each new segment to `<name>.tmp`, fsyncs it and renames it into place, fsyncs
//! the directory, then does the same with `MANIFEST.json.tmp` -> `MANIFEST.json`
//! ([`crate::write_durably`]; all of it through a [`FileLayer`], so tests can cut the power). `rename` is
//! atomic, so a crash at any point leaves either the old manifest or the new one, both complete;
//! files of an unfinished commit are never listed and the next writer deletes them on open.

use crate::analysis::AnalyzerConfig;
use crate::bm25::Bm25Params;
use crate::dense::SegmentVectors;
use crate::error::{io, Error, Result};
use crate::file_layer::{write_durably_with, FileLayer};
use crate::passage::ChunkConfig;
use crate::segment::Segment;
use fs4::fs_std::FileExt;
use serde::{Deserialize, Serialize};
use std::fs::File;
use std::path::Path;

/// The on-disk format version this build writes and reads.
pub const FORMAT_VERSION: u32 = 1;
const FORMAT_NAME: &str = "lector-index";
pub(crate) const MANIFEST: &str = "MANIFEST.json";
pub(crate) const LOCK: &str = "write.lock";

/// Settings fixed when an index is created (BM25 parameters are defaults that queries may override).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, Default)]
pub struct IndexSettings {
    /// How text is turned into terms.
    pub analyzer: AnalyzerConfig,
    /// How documents are cut into passages.
    pub chunking: ChunkConfig,
    /// Default BM25 parameters.
    pub bm25: Bm25Params,
    /// Also index hashed unigrams and bigrams for TF-IDF search (`Mode::Tfidf`, DrQA's
    /// retriever). Off by default: the n-grams about double the postings.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub tfidf: bool,
}

/// The committed state of an index.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Manifest {
    pub format: String,
    pub version: u32,
    pub generation: u64,
    pub settings: IndexSettings,
    pub segments: Vec<SegmentMeta>,
    /// Set once the index holds passage vectors: every segment then has a vector file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dense: Option<DenseMeta>,
}

/// The embedding model of a dense index.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DenseMeta {
    /// The model's name ([`crate::Embedder::model`]).
    pub model: String,
    /// Its vector dimension.
    pub dim: usize,
    /// A digest of its weights and configuration ([`crate::Embedder::digest`]); absent in indexes
    /// written before lector recorded it, and for embedders that have none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
    /// The vectors came with the documents ([`crate::Document::embedding`]), made by `model`
    /// outside lector: the index embeds nothing itself, queries bring their own vector
    /// ([`crate::QueryVector`]), and scores are inner products of the vectors as given.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub external: bool,
}

impl DenseMeta {
    /// The metadata a new dense index records for `embedder`.
    pub fn of(embedder: &dyn crate::Embedder) -> Self {
        DenseMeta {
            model: embedder.model().to_string(),
            dim: embedder.dim(),
            digest: embedder.digest().map(str::to_string),
            external: false,
        }
    }

    /// Refuses an embedder whose vectors would not be comparable with the index's: another
    /// model name or dimension, or the same name with other weights (a model retrained into the
    /// same folder). An index or embedder without a digest is checked by name and dimension.
    pub fn check(
        &self,
        embedder: &dyn crate::Embedder,
        location: &dyn std::fmt::Display,
    ) -> crate::Result<()> {
        if self.external && (self.model != embedder.model() || self.dim != embedder.dim()) {
            return Err(crate::Error::Config(format!(
                "index {} holds vectors made by `{}` ({} dimensions) outside lector: dense search \
                 needs the query's vector from that model, not `{}` ({})",
                location,
                self.model,
                self.dim,
                embedder.model(),
                embedder.dim()
            )));
        }
        if self.model != embedder.model() || self.dim != embedder.dim() {
            return Err(crate::Error::Config(format!(
                "index {} was embedded with `{}` ({} dimensions), not `{}` ({}); build a new index to change models",
                location,
                self.model,
                self.dim,
                embedder.model(),
                embedder.dim()
            )));
        }
        if let (Some(stored), Some(given)) = (&self.digest, embedder.digest()) {
            if stored != given {
                return Err(crate::Error::Config(format!(
                    "index {} was embedded with `{}` whose weights had digest {stored}; the embedder given under that name has digest {given} (retrained into the same folder?); its vectors would not be comparable: build a new index",
                    location,
                    self.model
                )));
            }
        }
        Ok(())
    }
}

/// A file the manifest lists with its length and checksum.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct FileMeta {
    pub file: String,
    pub bytes: u64,
    pub crc32: u32,
}

/// A live segment file and its deleted documents.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct SegmentMeta {
    pub file: String,
    pub bytes: u64,
    pub crc32: u32,
    pub docs: u32,
    pub passages: u32,
    /// Documents (indices in the segment) deleted by later commits, ascending.
    pub deleted: Vec<u32>,
    /// The segment's passage vectors (dense indexes only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vectors: Option<FileMeta>,
}

impl Manifest {
    pub fn empty(settings: IndexSettings) -> Self {
        Manifest {
            format: FORMAT_NAME.into(),
            version: FORMAT_VERSION,
            generation: 0,
            settings,
            segments: Vec::new(),
            dense: None,
        }
    }
}

fn corrupt(dir: &Path, message: impl Into<String>) -> Error {
    Error::Corrupt {
        dir: dir.to_path_buf(),
        message: message.into(),
    }
}

/// The manifest, or `None` when the directory has none.
pub(crate) fn read_manifest(files: &dyn FileLayer, dir: &Path) -> Result<Option<Manifest>> {
    let path = dir.join(MANIFEST);
    let bytes = match files.read(&path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io(&path)(e)),
    };
    let manifest: Manifest = serde_json::from_slice(&bytes)
        .map_err(|e| corrupt(dir, format!("{MANIFEST} is not a valid manifest: {e}")))?;
    if manifest.format != FORMAT_NAME {
        return Err(corrupt(
            dir,
            format!("{MANIFEST} is not a lector index manifest"),
        ));
    }
    if manifest.version != FORMAT_VERSION {
        return Err(corrupt(
            dir,
            format!("format version {} is not supported by this lector (it reads version {FORMAT_VERSION})", manifest.version),
        ));
    }
    Ok(Some(manifest))
}

/// Reads and verifies one segment. `Ok(None)` when the file is gone (a writer replaced it after
/// the manifest was read; the caller re-reads the manifest).
pub(crate) fn read_segment(
    files: &dyn FileLayer,
    dir: &Path,
    meta: &SegmentMeta,
) -> Result<Option<Segment>> {
    let Some(bytes) = read_checked(files, dir, &meta.file, meta.bytes, meta.crc32)? else {
        return Ok(None);
    };
    let segment =
        Segment::decode(&bytes).map_err(|m| corrupt(dir, format!("{}: {m}", meta.file)))?;
    if segment.docs.len() != meta.docs as usize || meta.deleted.iter().any(|&d| d >= meta.docs) {
        return Err(corrupt(
            dir,
            format!("{} does not hold the documents {MANIFEST} lists", meta.file),
        ));
    }
    Ok(Some(segment))
}

/// The bytes of `dir/name` after checking its length and CRC-32; `None` when it does not exist.
fn read_checked(
    files: &dyn FileLayer,
    dir: &Path,
    name: &str,
    len: u64,
    crc32: u32,
) -> Result<Option<Vec<u8>>> {
    let path = dir.join(name);
    let bytes = match files.read(&path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io(&path)(e)),
    };
    if bytes.len() as u64 != len || crc32fast::hash(&bytes) != crc32 {
        return Err(corrupt(
            dir,
            format!("{name} does not match its checksum in {MANIFEST}"),
        ));
    }
    Ok(Some(bytes))
}

/// Writes `bytes` to `dir/name` durably ([`crate::write_durably`]).
fn write_durably(files: &dyn FileLayer, dir: &Path, name: &str, bytes: &[u8]) -> Result<()> {
    let path = dir.join(name);
    write_durably_with(files, &path, bytes).map_err(io(&path))
}

/// Writes a segment file; returns its manifest entry.
pub(crate) fn write_segment(
    files: &dyn FileLayer,
    dir: &Path,
    name: &str,
    segment: &Segment,
) -> Result<SegmentMeta> {
    let bytes = segment.encode();
    write_durably(files, dir, name, &bytes)?;
    Ok(SegmentMeta {
        file: name.to_string(),
        bytes: bytes.len() as u64,
        crc32: crc32fast::hash(&bytes),
        docs: segment.docs.len() as u32,
        passages: segment.passages.len() as u32,
        deleted: Vec::new(),
        vectors: None,
    })
}

/// Writes a segment's vector file; returns its manifest entry.
pub(crate) fn write_vectors(
    files: &dyn FileLayer,
    dir: &Path,
    name: &str,
    model: &str,
    vectors: &SegmentVectors,
) -> Result<FileMeta> {
    let bytes = vectors.encode(model);
    write_durably(files, dir, name, &bytes)?;
    Ok(FileMeta {
        file: name.to_string(),
        bytes: bytes.len() as u64,
        crc32: crc32fast::hash(&bytes),
    })
}

/// Reads and verifies the vector file of a segment with `passages` passages, made by `model`.
/// `Ok(None)` when the file is gone (see [`read_segment`]).
pub(crate) fn read_vectors(
    files: &dyn FileLayer,
    dir: &Path,
    meta: &FileMeta,
    model: &str,
    passages: u32,
) -> Result<Option<SegmentVectors>> {
    let Some(bytes) = read_checked(files, dir, &meta.file, meta.bytes, meta.crc32)? else {
        return Ok(None);
    };
    let (stored_model, vectors) =
        SegmentVectors::decode(&bytes).map_err(|m| corrupt(dir, format!("{}: {m}", meta.file)))?;
    if stored_model != model || vectors.vectors.len() != passages as usize {
        return Err(corrupt(
            dir,
            format!("{} does not hold the vectors {MANIFEST} lists", meta.file),
        ));
    }
    Ok(Some(vectors))
}

/// Commits: atomically replaces the manifest.
pub(crate) fn write_manifest(files: &dyn FileLayer, dir: &Path, manifest: &Manifest) -> Result<()> {
    let text = serde_json::to_string_pretty(manifest).expect("manifest serialises");
    write_durably(files, dir, MANIFEST, text.as_bytes())
}

/// Takes the writer lock of `dir`, failing at once (naming the lock) when another writer holds it.
pub(crate) fn lock(dir: &Path) -> Result<File> {
    let path = dir.join(LOCK);
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(io(&path))?;
    match FileExt::try_lock_exclusive(&file) {
        Ok(true) => Ok(file),
        Ok(false) => Err(Error::Locked {
            dir: dir.to_path_buf(),
            lock: path,
        }),
        Err(e) => Err(io(&path)(e)),
    }
}

/// Writes `name` into the index directory `dir`, beside the index's own files (a calibration,
/// for example), durably and while holding the index's writer lock, so that it never races a
/// writer, a merge or another such write. Fails at once, naming the lock, while a writer (a
/// read-write server, `lector index add`) holds it; nothing is written then.
pub fn write_locked(dir: &Path, name: &str, bytes: &[u8]) -> Result<()> {
    let _lock = lock(dir)?;
    let path = dir.join(name);
    crate::file_layer::write_durably(&path, bytes).map_err(io(&path))
}

/// Whether `name` is a file this crate writes (so the directory check and cleaning never touch
/// anything else).
pub(crate) fn is_index_file(name: &str) -> bool {
    name == MANIFEST || name == LOCK || is_segment_file(name) || is_temporary(name)
}

fn is_segment_file(name: &str) -> bool {
    name.starts_with("seg-") && (name.ends_with(".lseg") || name.ends_with(".lvec"))
}

fn is_temporary(name: &str) -> bool {
    name.strip_suffix(".tmp")
        .is_some_and(|base| base == MANIFEST || is_segment_file(base))
}

/// The names of the entries of `dir`.
pub(crate) fn file_names(files: &dyn FileLayer, dir: &Path) -> Result<Vec<String>> {
    files.list(dir).map_err(io(dir))
}

/// The file of segment `n` written by commit `generation`.
pub(crate) fn segment_name(generation: u64, n: usize) -> String {
    format!("seg-{generation:010}-{n}.lseg")
}

/// The file of the `n`-th merge planned at `generation` (a merge is listed by a later commit).
pub(crate) fn merge_name(generation: u64, n: u64) -> String {
    format!("seg-{generation:010}-m{n}.lseg")
}

/// A segment's vector file is named after the segment file (unique: segment files never reuse
/// a name, and only a segment without vectors gets a vector file).
pub(crate) fn vector_name(segment_file: &str) -> String {
    format!("{}.lvec", segment_file.trim_end_matches(".lseg"))
}

/// Deletes segment files the manifest does not list and temporary files of unfinished commits,
/// but for the files of the segment `in_flight` (a merge still being written). Only the lock
/// holder calls this, so no commit is in progress.
pub(crate) fn remove_unlisted(
    files: &dyn FileLayer,
    dir: &Path,
    manifest: &Manifest,
    in_flight: Option<&str>,
) -> Result<()> {
    let stem = in_flight.map(|name| name.trim_end_matches("lseg"));
    for name in file_names(files, dir)? {
        if stem.is_some_and(|stem| name.starts_with(stem)) {
            continue;
        }
        let listed = manifest
            .segments
            .iter()
            .any(|s| s.file == name || s.vectors.as_ref().is_some_and(|v| v.file == name));
        let leftover = (is_segment_file(&name) && !listed) || is_temporary(&name);
        if leftover {
            let path = dir.join(&name);
            files.remove(&path).map_err(io(&path))?;
        }
    }
    Ok(())
}
