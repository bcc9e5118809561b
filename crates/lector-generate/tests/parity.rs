//! lector against llama.cpp on the same GGUF (SmolLM2-135M-Instruct Q4_1): exact token ids on
//! varied text (Unicode, accents, CJK, emoji, code, numbers, whitespace runs, chat markup), and
//! the greedy continuation of a few prompts. The fixture is written by
//! `tools/gguf_tokens_reference.py` (llama-cpp-python built from source, see its header).

mod common;

use common::generator;
use lector_generate::GenerateOptions;
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
fn token_ids_equal_llama_cpp() {
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
                "{text:?}\n  llama.cpp {expected:?}\n  lector    {actual:?}"
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
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
fn greedy_continuations_follow_llama_cpp() {
    // Both compute Q4_1 weights against 8-bit-quantised activations, but in different orders,
    // so logits differ in the last bits and a near-tie can flip late; the first tokens agree.
    for case in fixture()["greedy"].as_array().unwrap() {
        let prompt = case["prompt"].as_str().unwrap();
        let expected = ids(&case["generated"]);
        let g = generator();
        assert_eq!(
            g.tokenizer().encode(prompt).unwrap(),
            ids(&case["prompt_ids"])
        );
        let options = GenerateOptions {
            max_new_tokens: expected.len().max(1),
            ..GenerateOptions::default()
        };
        let out = g
            .complete(prompt, &options, &mut |_| ControlFlow::Continue(()))
            .unwrap();
        let head = g
            .tokenizer()
            .decode(&expected[..8.min(expected.len())])
            .unwrap();
        let reference = g.tokenizer().decode(&expected).unwrap();
        assert!(
            out.text.starts_with(&head),
            "prompt {prompt:?}\n  llama.cpp {reference:?}\n  lector    {:?}",
            out.text
        );
    }
}
