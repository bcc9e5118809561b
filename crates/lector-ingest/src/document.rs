//! The unit of ingestion: a document with an id, optional title/date/metadata and its text.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// A document to index. Its `id` is unique within an index: adding another document with the same
/// id replaces it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Document {
    /// Unique id (for plain files: the path relative to the argument given to `index add`).
    pub id: String,
    /// Optional title; indexed with every passage of the document.
    pub title: Option<String>,
    /// The text that passages are cut from; passage offsets index into it.
    pub text: String,
    /// Optional date, kept verbatim (no calendar parsing).
    pub date: Option<String>,
    /// Optional metadata: a JSON object whose fields filters can test
    /// (see `lector_index::filter`).
    pub metadata: Option<serde_json::Value>,
    /// The document's own vector, made by a model outside lector (OpenAI, Cohere, any
    /// sentence-transformers model): an index keeps it for every passage of the document instead
    /// of embedding them itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub embedding: Option<Embedding>,
}

/// A vector made by a named model; vectors of two models are never compared.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Embedding {
    /// The model's name, as the user calls it (`text-embedding-3-small`).
    pub model: String,
    /// The values, scored by inner product (unit vectors give cosine similarity).
    pub vector: Vec<f32>,
}

impl Embedding {
    /// Refuses a vector no search could use: empty, with a value that is not finite, or all
    /// zeros (no direction); the message names the problem.
    pub fn check(&self) -> std::result::Result<(), String> {
        if self.model.trim().is_empty() {
            return Err("the embedding's model name is empty".into());
        }
        if self.vector.is_empty() {
            return Err("the embedding is empty".into());
        }
        if let Some(i) = self.vector.iter().position(|x| !x.is_finite()) {
            return Err(format!("the embedding's value {i} is not a finite number"));
        }
        if self.vector.iter().all(|&x| x == 0.0) {
            return Err("the embedding is all zeros".into());
        }
        Ok(())
    }
}

/// The metadata field that holds the attributes of the file a document was read from (`path`,
/// `bytes`, `modified`). Left out of [`Document::content_hash`]: a file touched but not changed
/// is still unchanged (its stored `modified` is that of the content indexed).
pub const FILE_FIELD: &str = "file";

/// The deepest nesting of objects and lists in a document's metadata (`{"a": {"b": 1}}` is 2
/// deep). Every face refuses deeper metadata; the index's JSON reader stops at 128.
pub const MAX_METADATA_DEPTH: usize = 100;

/// How deeply `value`'s objects and lists nest (a scalar is 0), counted without recursion.
pub fn nesting_depth(value: &serde_json::Value) -> usize {
    let mut deepest = 0;
    let mut stack = vec![(value, 0)];
    while let Some((value, depth)) = stack.pop() {
        let children: Box<dyn Iterator<Item = &serde_json::Value>> = match value {
            serde_json::Value::Array(items) => Box::new(items.iter()),
            serde_json::Value::Object(fields) => Box::new(fields.values()),
            _ => continue,
        };
        deepest = deepest.max(depth + 1);
        stack.extend(children.map(|child| (child, depth + 1)));
    }
    deepest
}

/// A 128-bit content digest: documents with equal digests are treated as unchanged.
pub type ContentHash = [u8; 16];

impl Document {
    /// A document with only an id and a text.
    pub fn new(id: impl Into<String>, text: impl Into<String>) -> Self {
        Document {
            id: id.into(),
            title: None,
            text: text.into(),
            date: None,
            metadata: None,
            embedding: None,
        }
    }

    /// Sets metadata field `key` (replacing one of that name); `false`, changing nothing, when
    /// the metadata is not a JSON object.
    pub fn set_field(&mut self, key: &str, value: serde_json::Value) -> bool {
        let metadata = self
            .metadata
            .get_or_insert_with(|| serde_json::Value::Object(Default::default()));
        match metadata.as_object_mut() {
            Some(fields) => {
                fields.insert(key.to_string(), value);
                true
            }
            None => false,
        }
    }

    /// SHA-256 (truncated to 128 bits) over every field but the id. Each field is length-prefixed
    /// so that moving text between fields changes the digest.
    pub fn content_hash(&self) -> ContentHash {
        let mut hasher = Sha256::new();
        // Without the file's attributes; metadata holding nothing else hashes as none, as
        // documents indexed before the attributes existed did.
        let metadata = self.metadata.as_ref().and_then(|m| match m.as_object() {
            Some(fields) if fields.contains_key(FILE_FIELD) => {
                let mut kept = fields.clone();
                kept.remove(FILE_FIELD);
                (!kept.is_empty()).then(|| serde_json::Value::Object(kept).to_string())
            }
            _ => Some(m.to_string()),
        });
        for field in [
            self.title.as_deref(),
            Some(self.text.as_str()),
            self.date.as_deref(),
            metadata.as_deref(),
        ] {
            match field {
                Some(value) => {
                    hasher.update([1u8]);
                    hasher.update((value.len() as u64).to_le_bytes());
                    hasher.update(value.as_bytes());
                }
                None => hasher.update([0u8]),
            }
        }
        // Only when there is one, so that documents without vectors keep their digests.
        if let Some(embedding) = &self.embedding {
            hasher.update([2u8]);
            hasher.update((embedding.model.len() as u64).to_le_bytes());
            hasher.update(embedding.model.as_bytes());
            for x in &embedding.vector {
                hasher.update(x.to_le_bytes());
            }
        }
        let digest = hasher.finalize();
        let mut out = [0u8; 16];
        out.copy_from_slice(&digest[..16]);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_depends_on_content_not_id() {
        let a = Document::new("a", "same text");
        let b = Document::new("b", "same text");
        assert_eq!(a.content_hash(), b.content_hash());
        let mut c = a.clone();
        c.title = Some(String::new());
        assert_ne!(a.content_hash(), c.content_hash());
        let embedded = |vector: Vec<f32>| Document {
            embedding: Some(Embedding {
                model: "m".into(),
                vector,
            }),
            ..a.clone()
        };
        assert_ne!(a.content_hash(), embedded(vec![1.0]).content_hash());
        assert_ne!(
            embedded(vec![1.0]).content_hash(),
            embedded(vec![0.5]).content_hash()
        );
    }
}
