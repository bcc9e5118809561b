//! lector against Hugging Face transformers on the same GGUF (SmolLM2-135M-Instruct Q4_1), from
//! the checked-in fixture `tests/fixtures/smollm2_reference.json` written by
//! `tools/gguf_tokens_reference.py` (transformers 4.57 rebuilding the tokenizer and dequantizing
//! the weights from the GGUF file, independently of lector's code):
//!
//! - exact token ids on varied text (Unicode, accents, CJK, emoji, code, numbers, whitespace
//!   runs, chat markup) and their decoding back to the text;
//! - with the weights dequantized to f32 on both sides: the largest next-token logits after
//!   each prompt (to 1e-2) and the greedy continuation (exact ids).
//!
//! Not covered: llama.cpp itself. lector's default (quantized) products compute against
//! 8-bit-quantized activations as llama.cpp does, which moves logits by a few tenths and can flip
//! near-ties, so greedy text from the quantized model is not compared with any reference.

mod common;

use common::{generator, gguf_path};
use lector_generate::gguf::Gguf;
use lector_generate::model::Model;
use lector_generate::{FinishReason, GenerateOptions, LocalGenerator};
use serde_json::Value;
use std::ops::ControlFlow;

fn fixture() -> Value {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/smollm2_reference.json"
    );
    serde_json::from_str(&std::fs::read_to_string(path).expect("fixture")).expect("fixture JSON")
}

fn ids(value: &Value) -> Vec<u32> {
    value
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap() as u32)
        .collect()
}

#[test]
fn token_ids_equal_transformers() {
    let fixture = fixture();
    let tokenizer = generator().tokenizer();
    let cases = fixture["tokens"].as_array().unwrap();
    assert!(cases.len() >= 15);
    let mut failures = Vec::new();
    for case in cases {
        let text = case["text"].as_str().unwrap();
        let expected = ids(&case["ids"]);
        let actual = tokenizer.encode(text).unwrap();
        if actual != expected {
            failures.push(format!(
                "{text:?}\n  transformers {expected:?}\n  lector       {actual:?}"
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn digits_are_single_tokens() {
    // SmolLM2's pre-tokenizer (`tokenizer.ggml.pre = "smollm"`) splits every digit off.
    let tokenizer = generator().tokenizer();
    let ids = tokenizer.encode("In 2015, 1234567890 fans").unwrap();
    for digit in "20151234567890".chars() {
        let id = tokenizer.encode(&digit.to_string()).unwrap();
        assert_eq!(id.len(), 1);
        assert!(ids.contains(&id[0]));
    }
    let digits = ids
        .iter()
        .filter(|&&id| {
            let text = tokenizer.decode(&[id]).unwrap();
            text.chars().any(|c| c.is_ascii_digit())
        })
        .map(|&id| tokenizer.decode(&[id]).unwrap())
        .collect::<Vec<_>>();
    assert!(digits.iter().all(|d| d.len() == 1), "{digits:?}");
    assert_eq!(digits.len(), 14);
}

#[test]
fn decoding_round_trips_the_reference_texts() {
    let tokenizer = generator().tokenizer();
    for case in fixture()["tokens"].as_array().unwrap() {
        let text = case["text"].as_str().unwrap();
        if text.contains("<|") {
            continue; // special tokens are dropped when decoding
        }
        assert_eq!(tokenizer.decode(&ids(&case["ids"])).unwrap(), text);
    }
}

#[test]
fn dequantized_logits_equal_transformers() {
    let gguf = Gguf::open(&gguf_path()).unwrap();
    let model = Model::load_with(&gguf, true).unwrap();
    for case in fixture()["greedy"].as_array().unwrap() {
        let prompt = ids(&case["prompt_ids"]);
        let mut cache = model.cache(1, prompt.len()).unwrap();
        let logits: Vec<f32> = model
            .forward(&[prompt], &mut cache)
            .unwrap()
            .squeeze(0)
            .unwrap()
            .to_vec1()
            .unwrap();
        for pair in case["top_logits"].as_array().unwrap() {
            let (id, expected) = (
                pair[0].as_u64().unwrap() as usize,
                pair[1].as_f64().unwrap(),
            );
            let actual = f64::from(logits[id]);
            assert!(
                (actual - expected).abs() < 1e-2,
                "prompt {:?}: token {id} logit {actual}, transformers {expected}",
                case["prompt"]
            );
        }
        let best = pair_id(&case["top_logits"][0]);
        let argmax = (0..logits.len())
            .max_by(|&a, &b| logits[a].total_cmp(&logits[b]))
            .unwrap();
        assert_eq!(argmax, best);
    }
}

fn pair_id(pair: &Value) -> usize {
    pair[0].as_u64().unwrap() as usize
}

#[test]
fn dequantized_greedy_continuations_equal_transformers() {
    let g = LocalGenerator::load_dequantized(&gguf_path()).unwrap();
    for case in fixture()["greedy"].as_array().unwrap() {
        let prompt = case["prompt"].as_str().unwrap();
        let expected = ids(&case["generated"]);
        assert_eq!(
            g.tokenizer().encode(prompt).unwrap(),
            ids(&case["prompt_ids"])
        );
        let ended = case["ended"].as_bool().unwrap();
        let options = GenerateOptions {
            max_new_tokens: expected.len() + usize::from(ended),
            ..GenerateOptions::default()
        };
        let out = g
            .complete(prompt, &options, &mut |_| ControlFlow::Continue(()))
            .unwrap();
        let reference = g.tokenizer().decode(&expected).unwrap();
        assert_eq!(out.text, reference, "prompt {prompt:?}");
        assert_eq!(out.timings.generated_tokens, expected.len());
        let finish = if ended {
            FinishReason::EndOfText
        } else {
            FinishReason::Length
        };
        assert_eq!(out.finish_reason, finish, "prompt {prompt:?}");
    }
}
