//! Token states at a layer (`TokenEncoder`) on the tiny fixtures: tokenisation as the
//! `bert-score` package's `sent_encode`, layer bounds, truncation, and agreement with the full
//! forward pass. Parity of the scores with the package is in tests/bertscore.rs and lector-cli's
//! tests/bertscore_cli.rs.

use lector_models::{SentenceEmbedder, TokenEncoder};
use std::path::{Path, PathBuf};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

fn encoder(name: &str) -> TokenEncoder {
    TokenEncoder::load(&fixture(name)).expect("load the fixture")
}

#[test]
fn empty_and_blank_texts_are_their_special_tokens() {
    for name in ["tiny-bert", "tiny-roberta", "tiny-distilbert"] {
        let enc = encoder(name);
        let ids = enc.tokenize(&["", " \n\u{1f}"]).unwrap();
        let (cls, sep) = (enc.cls_token_id().unwrap(), enc.sep_token_id().unwrap());
        assert_eq!(ids[0], [cls, sep], "{name}");
        assert_eq!(ids[1], [cls, sep], "{name}");
    }
}

#[test]
fn roberta_texts_get_a_prefix_space_and_surrounding_whitespace_goes() {
    let enc = encoder("tiny-roberta");
    let ids = enc
        .tokenize(&["Denver Broncos", " Denver Broncos", "  Denver Broncos \t"])
        .unwrap();
    assert_eq!(ids[0], ids[1]);
    assert_eq!(ids[0], ids[2]);
    // With the space, "Denver" is the word-initial piece ("ĠDenver"), not the bare one.
    let tokenizer =
        lector_models::Tokenizer::from_file(fixture("tiny-roberta/tokenizer.json")).unwrap();
    let bare = tokenizer.encode("Denver Broncos", true).unwrap();
    assert_ne!(ids[0], bare.get_ids());
}

#[test]
fn long_texts_are_cut_at_model_max_length() {
    let enc = encoder("tiny-bert");
    assert_eq!(enc.max_tokens(), 128);
    let long = "touchdown ".repeat(300);
    let out = enc.encode(&[long.as_str()], 1).unwrap();
    assert_eq!(out[0].ids.len(), 128);
    assert_eq!(out[0].ids.last().copied(), enc.sep_token_id());
    assert_eq!(out[0].states.len(), 128 * enc.dim());
}

#[test]
fn layers_are_bounded_and_distinct() {
    let enc = encoder("tiny-distilbert");
    assert_eq!(enc.layers(), 2);
    let texts = ["The Broncos won.", "Santa Clara"];
    let by_layer: Vec<_> = (0..=2).map(|l| enc.encode(&texts, l).unwrap()).collect();
    assert_ne!(by_layer[0][0].states, by_layer[1][0].states);
    assert_ne!(by_layer[1][0].states, by_layer[2][0].states);
    assert_eq!(by_layer[0][1].ids, by_layer[2][1].ids);
    let message = enc.encode(&texts, 3).unwrap_err().to_string();
    assert!(
        message.contains("layer 3") && message.contains("2 layers"),
        "{message}"
    );
}

#[test]
fn the_last_layer_is_the_full_forward_pass() {
    // Mean-pooled and normalised, the last layer's states are the sentence embedding.
    let texts = ["Which NFL team won Super Bowl 50?", "Levi's Stadium"];
    let enc = encoder("tiny-bert");
    let embedder = SentenceEmbedder::load(&fixture("tiny-bert")).unwrap();
    let sentences = embedder.embed(&texts).unwrap();
    for (encoded, sentence) in enc
        .encode(&texts, enc.layers())
        .unwrap()
        .iter()
        .zip(sentences)
    {
        let mut mean = vec![0f32; enc.dim()];
        for token in encoded.states.chunks_exact(enc.dim()) {
            mean.iter_mut().zip(token).for_each(|(m, x)| *m += x);
        }
        let norm = mean.iter().map(|x| x * x).sum::<f32>().sqrt();
        for (m, s) in mean.iter().zip(&sentence) {
            assert!((m / norm - s).abs() < 1e-5, "{m} {s}");
        }
    }
}
