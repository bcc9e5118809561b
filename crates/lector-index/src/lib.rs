//! lector-index: the embedded passage index of lector, with lexical, dense and hybrid retrieval.
//!
//! Documents come from `lector-ingest`, are cut into passages of about 100 words on sentence
//! boundaries ([`passage`]), analysed into terms ([`analysis`]), embedded when the index is dense
//! (an [`Embedder`]), and stored in immutable segments with an inverted index and, on a dense
//! index, the passage vectors. Commits are atomic and durable ([`IndexWriter`], storage in
//! `store`, every file through [`write_durably`]); a tiered policy merges segments, beside commits
//! if the caller wants ([`MergePolicy`], [`MergeJob`]). Queries are ranked with BM25 ([`bm25`]),
//! by vector similarity (exact or HNSW, [`vector`]) or both fused ([`fuse`]), all through the
//! [`Retriever`] interface, and optionally reranked ([`rerank()`]).
//!
//! # Why an own inverted index
//!
//! BM25 here has per-index and per-query k1 and b. Tantivy fixes them (k1 = 1.2, b = 0.75) in
//! its scorer, and re-scoring its postings ourselves would keep its storage but none of its
//! ranking. The index sizes lector targets (a desktop corpus, a benchmark collection: up to a few
//! million passages) fit in memory, so a simple design is enough and stays transparent: segment
//! files with documents, passage spans and delta-coded postings, which commits add and merges
//! combine, loaded whole on open, with exact passage lengths (Lucene quantises them to one byte).
//!
//! # Example
//!
//! ```
//! use lector_index::{Document, Index, IndexSettings, IndexWriter, Retriever};
//! let dir = tempfile::tempdir().unwrap();
//! let mut writer = IndexWriter::open_or_create(dir.path(), IndexSettings::default()).unwrap();
//! writer.add(Document::new("doc1", "Mitochondria are the powerhouse of the cell."));
//! writer.add(Document::new("doc2", "Ribosomes synthesise proteins."));
//! writer.commit().unwrap();
//!
//! let index = Index::open(dir.path()).unwrap();
//! let hits = index.bm25(index.settings().bm25).retrieve("cell powerhouse", 10).unwrap();
//! assert_eq!(hits[0].doc_id, "doc1");
//! assert_eq!(&hits[0].text, "Mitochondria are the powerhouse of the cell.");
//! ```

mod add;
pub mod analysis;
pub mod bm25;
mod codec;
mod combine;
#[cfg(test)]
mod crash_test;
mod dense;
pub mod docstore;
pub use lector_ingest::document;
mod embed;
pub mod error;
mod file_layer;
pub mod filter;
mod index;
mod merge;
pub mod passage;
mod rerank;
pub mod retriever;
mod search;
mod segment;
mod store;
mod tfidf;
pub mod vector;
mod writer;

pub use add::{add_files, AddCounts, AddEvent, AddOptions};
pub use analysis::{AnalyzerConfig, Stemmer};
pub use bm25::Bm25Params;
pub use dense::HNSW_MIN_VECTORS;
pub use docstore::{DocumentStore, StoreCounts, StoreWriter};
pub use document::{Document, Embedding};
pub use embed::{embed_query, Embedder, QueryVector};
pub use error::{Error, Result};
pub use file_layer::{rename_durably, sync_dir, write_durably};
pub use filter::{Filter, FilterError};
pub use index::{
    Bm25Retriever, DocumentCursor, DocumentHit, DocumentPage, DocumentRef, Index, IndexStats,
    TfidfRetriever,
};
pub use merge::{MergeJob, MergePolicy, MergedSegment};
pub use passage::{ChunkConfig, Span};
pub use rerank::{rerank, PassageScorer, DEFAULT_RERANK_DEPTH};
pub use retriever::{fuse, rank_documents, Fusion, Hit, Mode, Retriever, RetrieverKind, Source};
pub use search::{
    DenseRetriever, HybridRetriever, SearchOptions, DEFAULT_EF, DEFAULT_FUSION_DEPTH,
    FILTERED_EXACT_BELOW,
};
pub use store::{write_locked, DenseMeta, IndexSettings, FORMAT_VERSION};
pub use writer::{AddOutcome, CommitInfo, IndexWriter};
