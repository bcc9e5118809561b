//! `lector generate-questions` on the bundled sample indexed on disk, with the shipped reader:
//! every question written survives the round trip it claims (the reader recovers its answer from
//! its passage; retrieval ranks the passage within k), its answer offset points at the answer in
//! its context, and the file is a SQuAD dataset that `lector read` and `lector eval squad` take.

mod common;

use common::{fails, index, lector, ok};
use serde_json::Value;

#[test]
fn generated_questions_pass_their_round_trip_and_make_a_squad_file() {
    let dir = tempfile::tempdir().unwrap();
    let index = index(dir.path());
    let set = dir.path().join("set.json");
    let set_arg = set.to_string_lossy().into_owned();
    let report: Value = serde_json::from_str(&ok(&lector(&[
        "generate-questions",
        "--index",
        &index,
        "--out",
        &set_arg,
        "--k",
        "3",
        "--json",
    ])))
    .unwrap();
    let kept = report["kept"].as_u64().unwrap();
    assert!(kept >= 10, "{report}");
    assert!(
        report["proposed"].as_u64().unwrap() > kept,
        "the round trip drops some: {report}"
    );
    let rate = report["round_trip_rate"].as_f64().unwrap();
    assert!(rate > 0.0 && rate < 1.0, "{report}");

    let data: Value = serde_json::from_str(&std::fs::read_to_string(&set).unwrap()).unwrap();
    let mut seen = 0;
    for article in data["data"].as_array().unwrap() {
        for paragraph in article["paragraphs"].as_array().unwrap() {
            let context = paragraph["context"].as_str().unwrap();
            for qa in paragraph["qas"].as_array().unwrap() {
                seen += 1;
                let answer = &qa["answers"][0];
                let text = answer["text"].as_str().unwrap();
                let start = answer["answer_start"].as_u64().unwrap() as usize;
                let at: String = context
                    .chars()
                    .skip(start)
                    .take(text.chars().count())
                    .collect();
                assert_eq!(at, text, "the offset points at the answer");
                assert!(qa["question"].as_str().unwrap().ends_with('?'));
                let rank = qa["source"]["retrieval_rank"].as_u64().unwrap();
                assert!((1..=3).contains(&rank));
                assert_eq!(qa["source"]["reader_answer"], answer["text"]);
            }
        }
    }
    assert_eq!(seen as u64, kept);

    // The reader answers every question as the round trip said: exact match 100.
    let predictions = dir.path().join("predictions.json");
    ok(&lector(&[
        "read",
        "--squad",
        &set_arg,
        "--out",
        &predictions.to_string_lossy(),
    ]));
    let scores: Value = serde_json::from_str(&ok(&lector(&[
        "eval",
        "squad",
        &set_arg,
        &predictions.to_string_lossy(),
        "--json",
    ])))
    .unwrap();
    assert_eq!(scores["exact_match"], 100.0, "{scores}");

    // An index that does not exist is named.
    let err = fails(&lector(&[
        "generate-questions",
        "--index",
        &dir.path().join("none").to_string_lossy(),
        "--out",
        &set_arg,
    ]));
    assert!(err.contains("none"), "{err}");
}
