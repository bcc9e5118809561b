//! Short answers of real SmolLM2 output (captured once into a fixture: see its `how_produced`):
//! a numbered list shortens to its first item, never to the list number, a citation marker or
//! punctuation, and a plain sentence shortens as before.

use lector_generate::grounded::{self, Passage};
use serde_json::Value;

fn fixture() -> Value {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/smollm2_numbered_lists.json"
    );
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn smollm2s_numbered_lists_shorten_to_their_first_item() {
    let fixture = fixture();
    for case in fixture["answers"].as_array().unwrap() {
        let text = case["text"].as_str().unwrap();
        let short = grounded::short_answer(text);
        assert_eq!(short, case["short_answer"].as_str().unwrap(), "{text:?}");
        assert!(short.chars().any(char::is_alphabetic), "{short:?}");
        // The checked answer carries the same short answer.
        let passages = [Passage {
            doc_id: "Super_Bowl_50#0".into(),
            title: Some("Super Bowl 50".into()),
            text: "Super Bowl 50 was played at Levi's Stadium.".into(),
        }];
        assert_eq!(grounded::check(text, &passages, None).short_answer, short);
    }
}
