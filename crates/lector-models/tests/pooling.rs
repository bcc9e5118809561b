//! Embedders described by sentence-transformers files: tiny checkpoints saved by
//! sentence-transformers 5.1.2 with mean pooling + Normalize, CLS pooling without it (and
//! E5-style prompts), and max pooling (refused), against sentence-transformers' own embeddings
//! (`tools/make_tiny_embedders.py`).

use lector_models::{Pooling, SentenceEmbedder};
use serde_json::Value;
use std::path::PathBuf;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

fn expected(name: &str) -> Value {
    let text = std::fs::read_to_string(fixture(name).join("expected.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn rows(value: &Value) -> Vec<Vec<f32>> {
    value
        .as_array()
        .unwrap()
        .iter()
        .map(|row| {
            row.as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_f64().unwrap() as f32)
                .collect()
        })
        .collect()
}

fn assert_close(ours: &[Vec<f32>], theirs: &[Vec<f32>], what: &str) {
    assert_eq!(ours.len(), theirs.len(), "{what}");
    for (i, (a, b)) in ours.iter().zip(theirs).enumerate() {
        let worst = a
            .iter()
            .zip(b)
            .map(|(x, y)| (x - y).abs())
            .fold(0f32, f32::max);
        assert!(worst < 1e-4, "{what}: text {i} differs by {worst}");
    }
}

#[test]
fn each_pooling_recipe_embeds_as_sentence_transformers_does() {
    for (name, pooling, normalize) in [
        ("tiny-embed-mean", Pooling::Mean, true),
        ("tiny-embed-cls", Pooling::Cls, false),
    ] {
        let expected = expected(name);
        let texts: Vec<&str> = expected["texts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t.as_str().unwrap())
            .collect();
        let embedder = SentenceEmbedder::load(&fixture(name)).unwrap();
        let recipe = embedder.recipe();
        assert_eq!(
            (recipe.pooling, recipe.normalize),
            (pooling, normalize),
            "{name}"
        );
        assert_close(
            &embedder.embed(&texts).unwrap(),
            &rows(&expected["embeddings"]),
            name,
        );
        if expected["prompts"]
            .as_object()
            .is_some_and(|p| !p.is_empty())
        {
            let queries = embedder.embed_queries(&texts).unwrap();
            assert_close(&queries, &rows(&expected["queries"]), "queries");
            let passages = embedder.embed_passages(&texts).unwrap();
            assert_close(&passages, &rows(&expected["passages"]), "passages");
        }
    }
    // The two recipes give different vectors of the same weights: pooling is not ignored.
    let mean = rows(&expected("tiny-embed-mean")["embeddings"]);
    let cls = rows(&expected("tiny-embed-cls")["embeddings"]);
    assert!(mean[0]
        .iter()
        .zip(&cls[0])
        .any(|(a, b)| (a - b).abs() > 1e-2));
}

#[test]
fn a_pooling_lector_cannot_run_is_refused_by_name() {
    let err = SentenceEmbedder::load(&fixture("tiny-embed-max"))
        .err()
        .unwrap()
        .to_string();
    assert!(
        err.contains("1_Pooling/config.json") && err.contains("pooling_mode_max_tokens"),
        "{err}"
    );
}
