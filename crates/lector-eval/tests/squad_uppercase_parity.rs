//! Every SQuAD v1.1 and v2.0 dev gold answer, upper-cased, scored by `lector_eval::squad` and by
//! the official script's port (tools/squad_official.py): the scores hinge on lowercasing exactly
//! like Python's `str.lower()` (Greek final sigma: "ΚΤΕΊΣ" must lower to "κτείς").

mod support;

use lector_eval::normalize::normalize_answer;
use lector_eval::squad::{self, Dataset, NoAnswer, Predictions};
use serde_json::{Map, Value};
use std::path::Path;

/// Round `round` predicts, for each question, its gold answer number `round` (cycling through
/// the question's answers) upper-cased; questions without an answer predict "".
fn uppercased_gold(dataset: &Dataset, round: usize) -> Predictions {
    dataset
        .questions
        .iter()
        .map(|q| {
            let answer = match q.answers.len() {
                0 => String::new(),
                n => q.answers[round % n].to_uppercase(),
            };
            (q.id.clone(), answer)
        })
        .collect()
}

fn official_scores(data: &Path, predictions: &Predictions, dir: &Path) -> Map<String, Value> {
    let map: Map<String, Value> = predictions
        .iter()
        .map(|(id, answer)| (id.clone(), Value::from(answer.as_str())))
        .collect();
    let pred = dir.join("pred.json");
    std::fs::write(&pred, serde_json::to_string(&map).unwrap()).unwrap();
    let script = support::repo_root().join("tools/squad_official.py");
    serde_json::from_str(&support::run_python(
        &script,
        &[data.as_os_str(), pred.as_os_str()],
    ))
    .unwrap()
}

fn assert_same_scores(label: &str, ours: &Map<String, Value>, official: &Map<String, Value>) {
    assert_eq!(
        ours.keys().collect::<Vec<_>>(),
        official.keys().collect::<Vec<_>>(),
        "{label}: keys differ"
    );
    for (key, theirs) in official {
        let (a, b) = (ours[key].as_f64().unwrap(), theirs.as_f64().unwrap());
        assert!(
            (a - b).abs() <= 1e-9,
            "{label}: {key}: lector {a} vs official {b}"
        );
    }
}

fn check_every_gold_answer(relative: &str) {
    let data = lector_eval::data::require(relative);
    let dataset = squad::read_dataset(&data).unwrap();
    let rounds = dataset
        .questions
        .iter()
        .map(|q| q.answers.len())
        .max()
        .unwrap();
    assert_eq!(rounds, 6, "{relative}: the most answers a question has");
    let dir = tempfile::tempdir().unwrap();
    for round in 0..rounds {
        let predictions = uppercased_gold(&dataset, round);
        let ours = squad::evaluate(&dataset, &predictions, &NoAnswer::default()).unwrap();
        let official = official_scores(&data, &predictions, dir.path());
        assert_same_scores(
            &format!("{relative} round {round}"),
            &ours.summary,
            &official,
        );
    }
}

#[test]
fn uppercased_squad_v1_1_dev_answers_score_like_the_official_script() {
    check_every_gold_answer("squad/dev-v1.1.json");
}

#[test]
fn uppercased_squad_v2_0_dev_answers_score_like_the_official_script() {
    check_every_gold_answer("squad/dev-v2.0.json");
}

#[test]
fn a_word_final_capital_sigma_lowers_to_final_sigma() {
    let dataset = squad::read_dataset(&lector_eval::data::require("squad/dev-v2.0.json")).unwrap();
    let with_final_sigma: Vec<&String> = dataset
        .questions
        .iter()
        .flat_map(|q| &q.answers)
        .filter(|a| a.contains('ς'))
        .collect();
    assert!(!with_final_sigma.is_empty());
    for answer in with_final_sigma {
        assert_eq!(
            normalize_answer(&answer.to_uppercase()),
            normalize_answer(answer),
            "{answer}"
        );
    }
}
