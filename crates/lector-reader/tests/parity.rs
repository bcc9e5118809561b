//! The reference reader against the Hugging Face pipeline's own answers on the first 500 questions
//! of SQuAD v1.1 and v2.0 dev (fixtures made by tools/hf_qa_reference.py).
mod common;

use common::{reader, squad_questions};
use lector_reader::{Prediction, Query, ReadParams};
use serde_json::Value;

const N: usize = 500;

fn fixture(name: &str) -> serde_json::Map<String, Value> {
    let path = common::workspace()
        .join("crates/lector-reader/tests/fixtures/hf")
        .join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap()
}

fn predict(data: &str, handle_impossible_answer: bool) -> Vec<(String, Prediction)> {
    let questions = squad_questions(data, N);
    let queries: Vec<Query> = questions
        .iter()
        .map(|(_, q, c)| Query {
            question: q,
            context: c,
        })
        .collect();
    let params = ReadParams {
        handle_impossible_answer,
        ..ReadParams::default()
    };
    let predictions = reader()
        .answer_batch(&queries, &params, &mut |_| {})
        .unwrap();
    questions
        .into_iter()
        .map(|(id, _, _)| id)
        .zip(predictions)
        .collect()
}

/// The same answer text on every question, as the README claims, with the same offsets; scores
/// within 1e-3 on at least 99% of them (float summation order differs from PyTorch's).
fn check(data: &str, fixture_name: &str, handle_impossible_answer: bool) {
    let expected = fixture(fixture_name);
    let mut mismatches = Vec::new();
    let mut far_scores = 0;
    for (id, p) in predict(data, handle_impossible_answer) {
        let want = &expected[&id];
        let got = &p.answers[0];
        if got.answer != want["answer"].as_str().unwrap() {
            mismatches.push(format!(
                "{id}: got {:?} ({:.5}), pipeline {:?} ({:.5})",
                got.answer, got.score, want["answer"], want["score"]
            ));
            continue;
        }
        if !got.answer.is_empty() {
            assert_eq!(
                (got.start as u64, got.end as u64),
                (
                    want["start"].as_u64().unwrap(),
                    want["end"].as_u64().unwrap()
                ),
                "{id}"
            );
        }
        let score_ok = (got.score - want["score"].as_f64().unwrap()).abs() < 1e-3;
        let null_ok = want
            .get("null_score")
            .is_none_or(|n| (p.null_score - n.as_f64().unwrap()).abs() < 1e-3);
        far_scores += usize::from(!(score_ok && null_ok));
    }
    eprintln!(
        "{data}: {} / {N} answers differ from the pipeline:\n{}",
        mismatches.len(),
        mismatches.join("\n")
    );
    assert!(mismatches.is_empty(), "answers differ from the pipeline's");
    assert!(
        far_scores * 100 <= N,
        "{far_scores} scores differ by more than 1e-3"
    );
}

#[test]
fn squad_v1_first_500_match_the_pipeline() {
    check("dev-v1.1.json", "dev-v1.1.first500.json", false);
}

#[test]
fn squad_v2_first_500_match_the_pipeline_with_impossible_answers() {
    check("dev-v2.0.json", "dev-v2.0.first500.json", true);
}
