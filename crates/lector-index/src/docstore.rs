//! The document-store boundary: what the rest of lector needs from wherever passages live.
//!
//! Reading, aggregation, calibration and evaluation see passages only through a
//! [`DocumentStore`] (search, fetch by id, counts, generation) and add documents only through a
//! [`StoreWriter`] (add or replace, remove, commit). lector keeps chunking and embedding on its
//! side of the boundary ([`passages_of`], [`embedding_text`]), so every store holds the same
//! passages with the same offsets, and fuses hybrid rankings itself ([`crate::fuse`]).
//!
//! Two stores implement it: the embedded [`Index`] (its [`IndexWriter`]) and, in `lector-redis`,
//! the Redis Query Engine. Another engine (OpenSearch, Qdrant, ...) is a third pair of impls.

use crate::document::Document;
use crate::embed::Embedder;
use crate::error::Result;
use crate::index::Index;
use crate::passage::{chunk_within, ChunkConfig, Span};
use crate::retriever::{Hit, Retriever};
use crate::search::SearchOptions;
use crate::store::{DenseMeta, IndexSettings};
use crate::writer::{AddOutcome, CommitInfo, IndexWriter};

/// Live documents and passages in a store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoreCounts {
    /// Live documents.
    pub documents: usize,
    /// Their passages.
    pub passages: usize,
}

/// Where passages are kept and searched.
pub trait DocumentStore: Send + Sync {
    /// Where the store is, for messages and logs: a directory or a URL without its credentials.
    fn location(&self) -> String;
    /// How documents are cut into passages and analysed, and the default BM25 parameters.
    fn settings(&self) -> IndexSettings;
    /// The embedding model of the stored passage vectors; `None` when the store has none.
    fn dense_meta(&self) -> Option<DenseMeta>;
    /// A number that grows with every commit, so a reader can tell that the data changed.
    fn generation(&self) -> Result<u64>;
    /// Live documents and passages.
    fn counts(&self) -> Result<StoreCounts>;
    /// The retriever for `options.mode` (BM25, dense or hybrid); dense and hybrid embed queries
    /// with `embedder`, which must be the model the passages were embedded with.
    fn retriever<'a>(
        &'a self,
        options: &SearchOptions,
        embedder: Option<&'a dyn Embedder>,
    ) -> Result<Box<dyn Retriever + 'a>>;
    /// The passages of document `id` in order (score 0, no sources); empty when there is no
    /// such document.
    fn passages(&self, id: &str) -> Result<Vec<Hit>>;
    /// The date of document `id`, when it has one.
    fn document_date(&self, id: &str) -> Result<Option<String>>;
    /// The id and title of every document that has a title (multi-hop asks follow titles).
    fn titles(&self) -> Result<Vec<(String, String)>>;
    /// A small file kept with the store (lector's calibration), `None` when there is none.
    fn read_file(&self, name: &str) -> Result<Option<String>>;
    /// Keeps a small file with the store, replacing the old one at once (the embedded index
    /// writes it durably under its writer lock).
    fn write_file(&self, name: &str, text: &str) -> Result<()>;
    /// The embedded index this store is, for what only it offers (listing documents, following
    /// titles in multi-hop asks); `None` for an external store.
    fn as_index(&self) -> Option<&Index> {
        None
    }
}

/// Adds documents to a store; nothing is visible to searches before [`StoreWriter::commit`].
pub trait StoreWriter {
    /// Stages `doc`: a new id is added, a known id with other content replaces the document,
    /// and a known id with the same content is left alone.
    fn add(&mut self, doc: Document) -> Result<AddOutcome>;
    /// Stages the removal of document `id`; false when the store has no such document.
    fn remove(&mut self, id: &str) -> Result<bool>;
    /// Documents staged since the last commit.
    fn pending(&self) -> usize;
    /// Stores every staged change, reporting embedding progress as (passages embedded, passages
    /// to embed). Committing the same documents again stores them once (writes are idempotent
    /// per document id), so a failed commit can be retried.
    fn commit(&mut self, progress: &mut dyn FnMut(usize, usize)) -> Result<CommitInfo>;
    /// Live documents as of the last commit.
    fn committed_documents(&self) -> usize;
}

/// One passage of a document as every store keeps it.
#[derive(Debug, Clone, PartialEq)]
pub struct Passage {
    /// Position in the document (0-based).
    pub n: usize,
    /// Where it lies in the document text.
    pub span: Span,
    /// The passage text.
    pub text: String,
    /// The page it starts on (PDF).
    pub page: Option<usize>,
    /// The headings above its start: `Installation > Linux`.
    pub section: Option<String>,
    /// The text BM25 indexes for it ([`indexed_parts`] joined by spaces).
    pub searchable: String,
}

/// The passages of `doc` as the embedded index cuts them: sections first when `chunking.sections`,
/// with the heading path of each passage when `chunking.headings`.
pub fn passages_of(doc: &Document, chunking: ChunkConfig) -> Vec<Passage> {
    let (spans, headings) = spans_and_headings(doc, chunking);
    let metadata = doc.metadata.as_ref();
    spans
        .into_iter()
        .enumerate()
        .map(|(n, span)| {
            let heading = headings.get(n).and_then(Option::as_deref);
            Passage {
                n,
                span,
                text: doc.text[span.byte_start..span.byte_end].to_string(),
                page: lector_ingest::page_of(metadata, span.char_start),
                section: lector_ingest::section_path(metadata, span.char_start),
                searchable: indexed_parts(doc, span, heading)
                    .collect::<Vec<_>>()
                    .join(" "),
            }
        })
        .collect()
}

/// What BM25 indexes for the passage at `span`: the document title (a passage alone often omits
/// the topic), the headings of `heading_path` except one that repeats the title, and the passage.
pub(crate) fn indexed_parts<'a>(
    doc: &'a Document,
    span: Span,
    heading_path: Option<&'a str>,
) -> impl Iterator<Item = &'a str> {
    let title = doc.title.as_deref();
    let headings = heading_path
        .into_iter()
        .flat_map(|path| path.split(" > "))
        .filter(move |&h| title != Some(h));
    title
        .into_iter()
        .chain(headings)
        .chain(std::iter::once(&doc.text[span.byte_start..span.byte_end]))
}

/// The spans of `doc`'s passages and, with `chunking.headings`, each one's heading path (the
/// headings BM25 indexes with the passage); an empty list without.
pub(crate) fn spans_and_headings(
    doc: &Document,
    chunking: ChunkConfig,
) -> (Vec<Span>, Vec<Option<String>>) {
    let sections = if chunking.sections {
        lector_ingest::section_starts(doc.metadata.as_ref())
    } else {
        Vec::new()
    };
    let spans = chunk_within(&doc.text, &sections, chunking);
    let headings = if chunking.headings {
        let starts: Vec<usize> = spans.iter().map(|s| s.char_start).collect();
        lector_ingest::sections::section_paths(doc.metadata.as_ref(), &starts)
    } else {
        Vec::new()
    };
    (spans, headings)
}

/// The text a passage is embedded as: the document title and the passage, as the embedded index
/// embeds it.
pub fn embedding_text(title: Option<&str>, passage: &str) -> String {
    crate::embed::passage_text(title, passage)
}

impl DocumentStore for Index {
    fn location(&self) -> String {
        self.dir().display().to_string()
    }

    fn settings(&self) -> IndexSettings {
        Index::settings(self)
    }

    fn dense_meta(&self) -> Option<DenseMeta> {
        Index::dense_meta(self).cloned()
    }

    fn generation(&self) -> Result<u64> {
        Ok(Index::generation(self))
    }

    fn counts(&self) -> Result<StoreCounts> {
        let stats = self.stats();
        Ok(StoreCounts {
            documents: stats.documents,
            passages: stats.passages,
        })
    }

    fn retriever<'a>(
        &'a self,
        options: &SearchOptions,
        embedder: Option<&'a dyn Embedder>,
    ) -> Result<Box<dyn Retriever + 'a>> {
        Index::retriever(self, options, embedder)
    }

    fn passages(&self, id: &str) -> Result<Vec<Hit>> {
        Ok(self.document_passages(id))
    }

    fn document_date(&self, id: &str) -> Result<Option<String>> {
        Ok(self.document(id).and_then(|d| d.date.map(str::to_string)))
    }

    fn titles(&self) -> Result<Vec<(String, String)>> {
        Ok((self.documents())
            .filter_map(|d| Some((d.id.to_string(), d.title?.to_string())))
            .collect())
    }

    fn read_file(&self, name: &str) -> Result<Option<String>> {
        let path = self.dir().join(name);
        match std::fs::read_to_string(&path) {
            Ok(text) => Ok(Some(text)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(source) => Err(crate::Error::Io { path, source }),
        }
    }

    fn write_file(&self, name: &str, text: &str) -> Result<()> {
        crate::write_locked(self.dir(), name, text.as_bytes())
    }

    fn as_index(&self) -> Option<&Index> {
        Some(self)
    }
}

/// A boxed or shared store (one chosen at run time: a directory or a URL) and a borrowed one are
/// stores.
macro_rules! delegate_store {
    ($($wrapper:ty),*) => {$(
        impl<T: DocumentStore + ?Sized> DocumentStore for $wrapper {
            fn location(&self) -> String {
                (**self).location()
            }
            fn settings(&self) -> IndexSettings {
                (**self).settings()
            }
            fn dense_meta(&self) -> Option<DenseMeta> {
                (**self).dense_meta()
            }
            fn generation(&self) -> Result<u64> {
                (**self).generation()
            }
            fn counts(&self) -> Result<StoreCounts> {
                (**self).counts()
            }
            fn retriever<'a>(
                &'a self,
                options: &SearchOptions,
                embedder: Option<&'a dyn Embedder>,
            ) -> Result<Box<dyn Retriever + 'a>> {
                (**self).retriever(options, embedder)
            }
            fn passages(&self, id: &str) -> Result<Vec<Hit>> {
                (**self).passages(id)
            }
            fn document_date(&self, id: &str) -> Result<Option<String>> {
                (**self).document_date(id)
            }
            fn titles(&self) -> Result<Vec<(String, String)>> {
                (**self).titles()
            }
            fn read_file(&self, name: &str) -> Result<Option<String>> {
                (**self).read_file(name)
            }
            fn write_file(&self, name: &str, text: &str) -> Result<()> {
                (**self).write_file(name, text)
            }
            fn as_index(&self) -> Option<&Index> {
                (**self).as_index()
            }
        }
    )*};
}

delegate_store!(Box<T>, &T, std::sync::Arc<T>);

impl StoreWriter for IndexWriter {
    fn add(&mut self, doc: Document) -> Result<AddOutcome> {
        Ok(IndexWriter::add(self, doc))
    }

    fn remove(&mut self, id: &str) -> Result<bool> {
        Ok(IndexWriter::remove(self, id))
    }

    fn pending(&self) -> usize {
        IndexWriter::pending(self)
    }

    fn commit(&mut self, progress: &mut dyn FnMut(usize, usize)) -> Result<CommitInfo> {
        self.commit_with_progress(progress)
    }

    fn committed_documents(&self) -> usize {
        self.committed().len()
    }
}
