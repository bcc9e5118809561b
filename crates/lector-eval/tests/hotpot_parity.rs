//! `lector_eval::hotpot` against a faithful Python port of the official HotpotQA script
//! (tools/hotpot_evaluate_v1.py), on the 1,100 shared dev questions with varied predictions.

mod support;

use lector_eval::hotpot::{self, Predictions, Question, SupportingFact, METRIC_KEYS};
use serde_json::Value;
use std::path::Path;

const DEV_SAMPLE: &str = "hotpotqa/hotpot_dev_distractor_sample1100.json";

/// A deterministic pseudo-random number per question (splitmix64 of the index).
fn mix(i: usize) -> u64 {
    let mut z = (i as u64).wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn misses_answer(i: usize) -> bool {
    i % 37 == 3 || i % 101 == 50
}

fn misses_sp(i: usize) -> bool {
    i % 41 == 7 || i % 101 == 50
}

/// Answers of every kind the metric must handle: exact, case/punctuation variants, partial,
/// padded, empty, yes/no against content answers and back, another question's answer, context
/// words, "noanswer".
fn varied_answer(questions: &[Question], i: usize) -> String {
    let q = &questions[i];
    let gold = &q.answer;
    let words: Vec<&str> = gold.split_whitespace().collect();
    match mix(i) % 9 {
        0 => gold.clone(),
        1 => format!("The {}!!", gold.to_uppercase()),
        2 => words[..words.len().div_ceil(2)].join(" "),
        3 => format!("{gold} and an extra clause"),
        4 => String::new(),
        // Overlapping tokens that the yes/no rule must not reward.
        5 if q.is_yes_no() => format!("{gold}, it is {gold}"),
        5 => ["yes", "No."][i % 2].to_string(),
        6 => questions[(i + 7) % questions.len()].answer.clone(),
        7 => q.context[i % q.context.len()].sentences[0]
            .split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" "),
        _ => "noanswer".to_string(),
    }
}

/// Supporting facts of every kind: exact, a subset, gold plus wrong sentences, duplicates, none,
/// distractor paragraphs only, and a shifted sentence index.
fn varied_sp(q: &Question, i: usize) -> Vec<SupportingFact> {
    let gold = &q.supporting_facts;
    let gold_titles = q.gold_titles();
    let distractors: Vec<SupportingFact> = q
        .context
        .iter()
        .filter(|p| !gold_titles.contains(&p.title.as_str()))
        .take(2)
        .map(|p| SupportingFact {
            title: p.title.clone(),
            sentence: i % p.sentences.len(),
        })
        .collect();
    let shifted = |f: &SupportingFact| SupportingFact {
        title: f.title.clone(),
        sentence: f.sentence + 1,
    };
    match mix(i + 12_345) % 7 {
        0 => gold.clone(),
        1 => gold[..1].to_vec(),
        2 => [gold.clone(), distractors, vec![shifted(&gold[0])]].concat(),
        3 => [gold.clone(), gold.clone(), gold[..1].to_vec()].concat(),
        4 => Vec::new(),
        5 => distractors,
        _ => gold.iter().rev().map(shifted).collect(),
    }
}

fn varied_predictions(questions: &[Question]) -> Predictions {
    let mut predictions = Predictions::default();
    for (i, q) in questions.iter().enumerate() {
        if !misses_answer(i) {
            let answer = varied_answer(questions, i);
            predictions.answers.insert(q.id.clone(), answer);
        }
        if !misses_sp(i) {
            let facts = varied_sp(q, i);
            predictions.supporting_facts.insert(q.id.clone(), facts);
        }
    }
    // Predictions for unknown ids are ignored by both.
    predictions
        .answers
        .insert("not-a-question".into(), "x".into());
    predictions
}

/// The port's per-question rows and its metrics (the last line).
fn python_eval(pred: &Path, gold: &Path) -> (Vec<Value>, Value) {
    let script = support::repo_root().join("tools/hotpot_evaluate_v1.py");
    let stdout = support::run_python(
        &script,
        &[
            pred.as_os_str(),
            gold.as_os_str(),
            "--per-question".as_ref(),
        ],
    );
    let mut lines: Vec<Value> = stdout
        .lines()
        .map(|line| serde_json::from_str(line).expect("a JSON line"))
        .collect();
    let metrics = lines.pop().expect("the metrics line");
    (lines, metrics)
}

fn assert_close(label: &str, ours: f64, theirs: &Value) {
    let theirs = theirs
        .as_f64()
        .unwrap_or_else(|| panic!("{label}: not a number"));
    assert!(
        (ours - theirs).abs() <= 1e-9,
        "{label}: lector {ours} vs official {theirs}"
    );
}

#[test]
fn dev_sample_matches_the_official_script() {
    let gold_path = lector_eval::data::require(DEV_SAMPLE);
    let questions = hotpot::read_dataset(&gold_path).unwrap();
    assert_eq!(questions.len(), 1_100);
    let predictions = varied_predictions(&questions);
    let dir = tempfile::tempdir().unwrap();
    let pred_path = dir.path().join("pred.json");
    predictions.write(&pred_path).unwrap();
    assert_eq!(hotpot::read_predictions(&pred_path).unwrap(), predictions);

    let ours = hotpot::evaluate(&questions, &predictions);
    let (rows, metrics) = python_eval(&pred_path, &gold_path);

    let their_keys: Vec<&String> = metrics.as_object().unwrap().keys().collect();
    assert_eq!(their_keys, METRIC_KEYS, "the port's metric names");
    assert_eq!(ours.metrics.len(), METRIC_KEYS.len());
    for key in METRIC_KEYS {
        assert_close(key, ours.metrics[key], &metrics[key]);
    }
    assert_eq!(rows.len(), ours.questions.len());
    for (scores, row) in ours.questions.iter().zip(&rows) {
        assert_eq!(row["_id"], scores.id.as_str());
        assert_eq!(row["answered"], scores.answered, "{}", scores.id);
        assert_eq!(row["has_sp"], scores.has_sp, "{}", scores.id);
        for key in METRIC_KEYS {
            let label = format!("{} {key}", scores.id);
            assert_close(&label, scores.get(key).unwrap(), &row[key]);
        }
    }

    let expected_missing =
        |rule: fn(usize) -> bool| (0..questions.len()).filter(|&i| rule(i)).count();
    assert_eq!(ours.missing_answers, expected_missing(misses_answer));
    assert_eq!(ours.missing_sp, expected_missing(misses_sp));
    // Sanity: the mix lands in a plausible middle range, not at 0 or 1.
    for key in ["em", "sp_em", "joint_f1"] {
        let value = ours.metrics[key];
        assert!((0.05..0.6).contains(&value), "{key} {value}");
    }
}

#[test]
fn metrics_are_the_means_of_the_question_values() {
    let questions = hotpot::read_dataset(&lector_eval::data::require(DEV_SAMPLE)).unwrap();
    let ours = hotpot::evaluate(&questions, &varied_predictions(&questions));
    for key in METRIC_KEYS {
        let sum: f64 = ours.questions.iter().map(|q| q.get(key).unwrap()).sum();
        assert_eq!(ours.metrics[key], sum / questions.len() as f64, "{key}");
    }
    let unanswered = ours.questions.iter().find(|q| !q.answered).unwrap();
    assert_eq!((unanswered.em, unanswered.joint_f1), (0.0, 0.0));
}

#[test]
fn malformed_questions_are_named_in_errors() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("gold.json");
    let question = |id: &str, facts: &str| {
        format!(
            r#"{{"_id": "{id}", "question": "?", "answer": "a", "type": "bridge", "level": "hard",
                "supporting_facts": {facts}, "context": [["T", ["s0", " s1"]]]}}"#
        )
    };
    let good = question("q-good", r#"[["T", 1]]"#);
    let bad = question("q-bad", r#"[["T", 0], ["T", "1"]]"#);
    std::fs::write(&path, format!("[{good}, {bad}]")).unwrap();
    let message = hotpot::read_dataset(&path).unwrap_err().to_string();
    for part in [
        "gold.json",
        "question 1",
        "\"q-bad\"",
        "supporting_facts[1]",
    ] {
        assert!(message.contains(part), "{part} not in: {message}");
    }

    std::fs::write(
        &path,
        format!("[{}]", good.replace("\"bridge\"", "\"other\"")),
    )
    .unwrap();
    let message = hotpot::read_dataset(&path).unwrap_err().to_string();
    assert!(
        message.contains("question 0 (`_id` \"q-good\"): field `type`"),
        "{message}"
    );

    std::fs::write(&path, "[]").unwrap();
    let message = hotpot::read_dataset(&path).unwrap_err().to_string();
    assert!(message.contains("no questions"), "{message}");

    std::fs::write(&path, format!("[{good}]")).unwrap();
    let read = hotpot::read_dataset(&path).unwrap();
    assert_eq!(read[0].context[0].text(), "s0 s1");
    assert_eq!(read[0].level.as_deref(), Some("hard"));
}
