//! Combining whole indexes: the shards of a corpus built apart (in parallel, on other machines)
//! become one index by copying their segment and vector files, with no passage re-analysed or
//! re-embedded. BM25 statistics are summed over segments at query time, so the combined index
//! ranks exactly as one built in a single process from the same documents.

use crate::error::{Error, Result};
use crate::index::{Index, LiveSegment};
use crate::store::{self, FileMeta, Manifest, SegmentMeta};
use crate::writer::{CommitInfo, IndexWriter};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

impl IndexWriter {
    /// Adds every live document of the indexes at `sources` in one commit, by copying their
    /// segment and vector files. The sources must have this index's settings and embedding
    /// model (or all be lexical), and no document id may be in two of them or in this index
    /// (the error names the id and both places). Each source's writer lock is held while it is
    /// read, so none changes meanwhile. Nothing may be staged.
    pub fn add_indexes(&mut self, sources: &[PathBuf]) -> Result<CommitInfo> {
        if !self.staged_nothing() {
            return Err(Error::Config(
                "commit or drop the staged changes before adding whole indexes".into(),
            ));
        }
        let _locks = sources
            .iter()
            .map(|dir| store::lock(dir))
            .collect::<Result<Vec<_>>>()?;
        let opened = sources
            .iter()
            .map(Index::open)
            .collect::<Result<Vec<_>>>()?;
        let dense = self.check_compatible(&opened)?;
        check_unique_ids(self.committed(), &opened)?;
        let generation = self.committed().generation() + 1;
        let mut parts = self.committed_parts();
        for source in &opened {
            for (meta, live) in source.manifest.segments.iter().zip(&source.segments) {
                let name = store::segment_name(generation, parts.len());
                parts.push(self.copy_segment(source.dir(), meta, live, name)?);
            }
        }
        let manifest = Manifest {
            generation,
            segments: parts.iter().map(|(meta, _)| meta.clone()).collect(),
            dense,
            ..self.committed().manifest.clone()
        };
        self.publish_manifest(manifest, parts)?;
        Ok(self.info())
    }

    /// The dense metadata after adding `sources`: they and this index must agree on settings
    /// and on the embedding model (an empty index takes the sources').
    fn check_compatible(&self, sources: &[Index]) -> Result<Option<store::DenseMeta>> {
        let this = self.committed();
        // An empty index takes the first source's vectors, if any; else its own are the rule.
        let reference = match (this.manifest.segments.is_empty(), sources.first()) {
            (true, Some(first)) => first,
            _ => this,
        };
        for source in sources {
            if source.settings() != this.settings() {
                return Err(Error::Config(format!(
                    "index {} was built with other settings (analysis, passages or BM25) than {}",
                    source.dir().display(),
                    this.dir().display()
                )));
            }
            if source.manifest.dense != reference.manifest.dense {
                return Err(Error::Config(format!(
                    "index {} has other passage vectors ({}) than {} ({}): build every shard with the same embedder",
                    source.dir().display(),
                    describe(source.manifest.dense.as_ref()),
                    reference.dir().display(),
                    describe(reference.manifest.dense.as_ref())
                )));
            }
        }
        Ok(reference.manifest.dense.clone())
    }

    /// Copies one source segment (and its vectors) in under `name`.
    fn copy_segment(
        &self,
        from: &Path,
        meta: &SegmentMeta,
        live: &LiveSegment,
        name: String,
    ) -> Result<(SegmentMeta, LiveSegment)> {
        let to = self.committed().dir().to_path_buf();
        self.copy_file(&from.join(&meta.file), &to.join(&name))?;
        let vectors = match &meta.vectors {
            Some(file) => {
                let vector_file = store::vector_name(&name);
                self.copy_file(&from.join(&file.file), &to.join(&vector_file))?;
                Some(FileMeta {
                    file: vector_file,
                    ..file.clone()
                })
            }
            None => None,
        };
        let meta = SegmentMeta {
            file: name,
            vectors,
            ..meta.clone()
        };
        Ok((meta, live.clone()))
    }
}

/// Refuses a document id that two of the indexes hold.
fn check_unique_ids(this: &Index, sources: &[Index]) -> Result<()> {
    let mut seen: HashMap<&str, &Path> = this
        .ids
        .keys()
        .map(|id| (id.as_str(), this.dir()))
        .collect();
    for source in sources {
        for id in source.ids.keys() {
            if let Some(first) = seen.insert(id, source.dir()) {
                return Err(Error::Config(format!(
                    "document `{id}` is in both {} and {}: shards must not share ids",
                    first.display(),
                    source.dir().display()
                )));
            }
        }
    }
    Ok(())
}

fn describe(dense: Option<&store::DenseMeta>) -> String {
    match dense {
        Some(meta) => format!("`{}`, {} dimensions", meta.model, meta.dim),
        None => "none".into(),
    }
}
