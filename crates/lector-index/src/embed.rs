//! The seam between the index and an embedding model.
//!
//! The index stores and searches vectors but does not compute them: an [`Embedder`] does (in
//! lector, `lector_models::SentenceEmbedder`), so this crate needs no ML runtime.

/// Turns texts into unit-length vectors (dot product = cosine similarity).
pub trait Embedder: Send + Sync {
    /// A stable name of the model. It is stored with the vectors, and an index refuses to mix
    /// vectors of two models.
    fn model(&self) -> &str;
    /// The vector dimension.
    fn dim(&self) -> usize;
    /// One vector of [`Self::dim`] values per passage text, in order.
    fn embed(&self, texts: &[&str]) -> std::result::Result<Vec<Vec<f32>>, String>;
    /// One vector per query, in order: as [`Self::embed`] unless the model embeds queries
    /// differently (a `query: ` prefix, as E5 and BGE models expect).
    fn embed_queries(&self, queries: &[&str]) -> std::result::Result<Vec<Vec<f32>>, String> {
        self.embed(queries)
    }
    /// A digest of the model's weights and configuration, stored with the vectors so that an
    /// index refuses a model retrained under the same name. `None`: checked by name only.
    fn digest(&self) -> Option<&str> {
        None
    }
}

/// A query's own vector, made by the model whose vectors an index holds
/// ([`crate::DenseMeta::external`]): dense and hybrid search take it as their embedder, and the
/// index refuses it when the model's name or the dimension differ from its own.
#[derive(Debug, Clone, PartialEq)]
pub struct QueryVector {
    /// The model's name, as the documents' vectors give it.
    pub model: String,
    /// The query's vector.
    pub vector: Vec<f32>,
}

impl Embedder for QueryVector {
    fn model(&self) -> &str {
        &self.model
    }

    fn dim(&self) -> usize {
        self.vector.len()
    }

    fn embed(&self, _texts: &[&str]) -> std::result::Result<Vec<Vec<f32>>, String> {
        Err(format!(
            "`{}` vectors come with the documents; lector cannot embed passages with it",
            self.model
        ))
    }

    fn embed_queries(&self, queries: &[&str]) -> std::result::Result<Vec<Vec<f32>>, String> {
        Ok(vec![self.vector.clone(); queries.len()])
    }
}

/// `query`'s vector, by `embedder`.
pub fn embed_query(embedder: &dyn Embedder, query: &str) -> crate::Result<Vec<f32>> {
    let mut embedded = embedder
        .embed_queries(&[query])
        .map_err(crate::Error::Embed)?;
    match embedded.pop() {
        Some(vector) if embedded.is_empty() => Ok(vector),
        _ => Err(crate::Error::Embed(format!(
            "the embedder `{}` did not return one vector for the query",
            embedder.model()
        ))),
    }
}

/// The text embedded for a passage: the document title (a passage alone often omits its topic,
/// as BM25 indexes the title with every passage) and the passage, joined by a space as BEIR does.
pub(crate) fn passage_text(title: Option<&str>, passage: &str) -> String {
    match title {
        Some(title) if !title.trim().is_empty() => format!("{title} {passage}"),
        _ => passage.to_string(),
    }
}
