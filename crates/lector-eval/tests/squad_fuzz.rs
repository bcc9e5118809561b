//! Property tests (fuzzing) of the SQuAD parsers and scorer: arbitrary bytes and arbitrary
//! SQuAD-shaped JSON never panic; they either parse or give an error naming the file.

use lector_eval::squad::{self, NoAnswer};
use proptest::prelude::*;
use serde_json::{json, Value};
use std::path::Path;

fn write(dir: &Path, name: &str, bytes: &[u8]) -> std::path::PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    path
}

/// Any JSON value of small depth: what a broken or hostile file might hold in any field.
fn any_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<f64>()
            .prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
        ".{0,12}".prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 16, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map("[a-z]{1,8}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// SQuAD-shaped datasets whose fields are sometimes right and sometimes anything at all.
fn squad_like() -> impl Strategy<Value = Value> {
    let answer = prop_oneof![".{0,10}".prop_map(|t| json!({"text": t})), any_json()];
    let qa = (".{0,6}", prop::collection::vec(answer, 0..3), any_json()).prop_map(
        |(id, answers, extra)| json!({"id": id, "question": "q?", "answers": answers, "x": extra}),
    );
    let paragraph = (".{0,40}", prop::collection::vec(qa, 0..4))
        .prop_map(|(c, qas)| json!({"context": c, "qas": qas}));
    let article = prop::collection::vec(paragraph, 0..3)
        .prop_map(|ps| json!({"title": "t", "paragraphs": ps}));
    (
        prop_oneof![Just("1.1"), Just("v2.0")],
        prop::collection::vec(article, 0..3),
        any_json(),
    )
        .prop_map(|(v, data, junk)| {
            if data.is_empty() {
                junk
            } else {
                json!({"version": v, "data": data})
            }
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
        let dir = tempfile::tempdir().unwrap();
        let path = write(dir.path(), "x.json", &bytes);
        let errors = [
            squad::read_dataset(&path).err(),
            squad::read_predictions(&path).err(),
            squad::read_na_probs(&path).err(),
        ];
        for error in errors.into_iter().flatten() {
            prop_assert!(error.to_string().contains("x.json"), "{}", error);
        }
    }

    #[test]
    fn squad_shaped_input_scores_or_errors_cleanly(
        data in squad_like(),
        preds in prop::collection::btree_map(".{0,6}", any_json(), 0..6),
        probs in prop::collection::btree_map(".{0,6}", any_json(), 0..6),
        threshold in 0.0f64..1.0,
    ) {
        let dir = tempfile::tempdir().unwrap();
        let data_path = write(dir.path(), "data.json", data.to_string().as_bytes());
        let pred_path = write(dir.path(), "pred.json", Value::Object(preds.into_iter().collect()).to_string().as_bytes());
        let na_path = write(dir.path(), "na.json", Value::Object(probs.into_iter().collect()).to_string().as_bytes());
        let (Ok(dataset), Ok(predictions)) = (squad::read_dataset(&data_path), squad::read_predictions(&pred_path)) else {
            return Ok(());
        };
        let na = squad::read_na_probs(&na_path).ok();
        if let Ok(evaluation) = squad::evaluate(&dataset, &predictions, &NoAnswer { probs: na.as_ref(), threshold }) {
            prop_assert_eq!(evaluation.questions.len(), dataset.questions.len());
            for q in &evaluation.questions {
                prop_assert!((0.0..=1.0).contains(&q.f1) && (q.em == 0.0 || q.em == 1.0));
            }
        }
    }
}
