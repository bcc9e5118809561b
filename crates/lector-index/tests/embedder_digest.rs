//! A dense index records its embedder's weights digest and refuses the same model name with other
//! weights (a model retrained into the same folder), for search and for new documents alike.

use lector_index::{Document, Embedder, Index, IndexSettings, IndexWriter, Mode, SearchOptions};
use std::sync::Arc;

/// A toy embedder (letter counts) whose digest stands for its weights.
struct Letters {
    digest: Option<&'static str>,
}

impl Embedder for Letters {
    fn model(&self) -> &str {
        "letters"
    }
    fn dim(&self) -> usize {
        26
    }
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, String> {
        Ok(texts
            .iter()
            .map(|t| {
                let mut v = [0.0f32; 26];
                for b in t.bytes().filter(u8::is_ascii_lowercase) {
                    v[usize::from(b - b'a')] += 1.0;
                }
                let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-6);
                v.iter().map(|x| x / norm).collect()
            })
            .collect())
    }
    fn digest(&self) -> Option<&str> {
        self.digest
    }
}

fn dense_index(dir: &std::path::Path, digest: Option<&'static str>) {
    let mut writer = IndexWriter::open_or_create(dir, IndexSettings::default()).unwrap();
    writer.set_embedder(Arc::new(Letters { digest })).unwrap();
    writer.add(Document::new("a", "The ribosome translates messenger RNA."));
    writer.commit().unwrap();
}

#[test]
fn the_same_name_with_other_weights_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    dense_index(dir.path(), Some("sha256:aaaa"));
    let index = Index::open(dir.path()).unwrap();
    assert_eq!(
        index.dense_meta().unwrap().digest.as_deref(),
        Some("sha256:aaaa")
    );
    let options = SearchOptions::for_index(&index, Mode::Dense);

    let same = Letters {
        digest: Some("sha256:aaaa"),
    };
    let hits = index
        .retriever(&options, Some(&same))
        .unwrap()
        .retrieve("ribosome", 1)
        .unwrap();
    assert_eq!(hits[0].doc_id, "a");

    let retrained = Letters {
        digest: Some("sha256:bbbb"),
    };
    let err = index
        .retriever(&options, Some(&retrained))
        .err()
        .unwrap()
        .to_string();
    assert!(
        err.contains("sha256:aaaa") && err.contains("sha256:bbbb"),
        "{err}"
    );
    let mut writer = IndexWriter::open(dir.path()).unwrap();
    let err = writer
        .set_embedder(Arc::new(retrained))
        .unwrap_err()
        .to_string();
    assert!(err.contains("retrained"), "{err}");
    // Nothing stored was touched.
    assert_eq!(Index::open(dir.path()).unwrap().len(), 1);
}

#[test]
fn an_index_without_a_digest_is_checked_by_name_only() {
    let dir = tempfile::tempdir().unwrap();
    dense_index(dir.path(), None);
    let index = Index::open(dir.path()).unwrap();
    assert_eq!(index.dense_meta().unwrap().digest, None);
    let options = SearchOptions::for_index(&index, Mode::Dense);
    let with_digest = Letters {
        digest: Some("sha256:cccc"),
    };
    assert!(index.retriever(&options, Some(&with_digest)).is_ok());
}
