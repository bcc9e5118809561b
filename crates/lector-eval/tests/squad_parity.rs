//! `lector_eval::squad` against a faithful Python port of the official SQuAD scripts
//! (tools/squad_official.py), on the full SQuAD v1.1 and v2.0 dev sets with varied predictions.

mod support;

use lector_eval::squad::{self, Dataset, NaProbs, NoAnswer, Predictions};
use serde_json::{Map, Value};
use std::path::{Path, PathBuf};

/// A deterministic pseudo-random number per question (splitmix64 of the index).
fn mix(i: usize) -> u64 {
    let mut z = (i as u64).wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Predictions of every kind the metric must handle: exact, case/punctuation variants, partial,
/// padded, empty, wrong, Unicode-spaced, and (where `skip_some`) missing.
fn varied_predictions(dataset: &Dataset, skip_some: bool) -> Predictions {
    let n = dataset.questions.len();
    dataset
        .questions
        .iter()
        .enumerate()
        .filter(|(i, _)| !(skip_some && i % 97 == 5))
        .map(|(i, q)| {
            let gold = q.answers.first().cloned().unwrap_or_default();
            let other = dataset.questions[(i + 7) % n]
                .answers
                .first()
                .cloned()
                .unwrap_or_default();
            let words: Vec<&str> = gold.split_whitespace().collect();
            let context_words: Vec<&str> = q.context.split_whitespace().take(4).collect();
            let prediction = match mix(i) % 9 {
                0 => gold.clone(),
                1 => format!("The {}!!", gold.to_uppercase()),
                2 => words[..words.len().div_ceil(2)].join(" "),
                3 => format!("{gold} and an extra clause"),
                4 => String::new(),
                5 => other,
                6 => context_words.join(" "),
                7 => words.join("\u{a0} "),
                _ => format!("({gold}), a"),
            };
            (q.id.clone(), prediction)
        })
        .collect()
}

/// No-answer probabilities on a coarse grid (many ties), written in a scrambled order so that the
/// sweep's stable tie order matters.
fn varied_na_probs(predictions: &Predictions) -> NaProbs {
    let mut probs: NaProbs = predictions
        .iter()
        .enumerate()
        .map(|(i, (id, _))| (id.clone(), (mix(i + 1_000_003) % 11) as f64 / 10.0))
        .collect();
    probs.sort_by_key(|(id, _)| mix(id.len() * 31 + id.bytes().map(usize::from).sum::<usize>()));
    probs
}

fn write_json(dir: &Path, name: &str, pairs: &[(String, Value)]) -> PathBuf {
    let map: Map<String, Value> = pairs.iter().cloned().collect();
    let path = dir.join(name);
    std::fs::write(&path, serde_json::to_string(&map).unwrap()).unwrap();
    path
}

fn python_eval(data: &Path, pred: &Path, na: Option<(&Path, f64)>) -> Map<String, Value> {
    let script = support::repo_root().join("tools/squad_official.py");
    let mut args: Vec<std::ffi::OsString> = vec![data.into(), pred.into()];
    if let Some((na, thresh)) = na {
        args.extend([
            "--na-prob-file".into(),
            na.into(),
            "--na-prob-thresh".into(),
            thresh.to_string().into(),
        ]);
    }
    let refs: Vec<&std::ffi::OsStr> = args.iter().map(|a| a.as_os_str()).collect();
    serde_json::from_str(&support::run_python(&script, &refs)).unwrap()
}

fn assert_same(label: &str, ours: &Map<String, Value>, official: &Map<String, Value>) {
    let our_keys: Vec<&String> = ours.keys().collect();
    let their_keys: Vec<&String> = official.keys().collect();
    assert_eq!(our_keys, their_keys, "{label}: keys differ");
    for (key, theirs) in official {
        let (a, b) = (ours[key].as_f64().unwrap(), theirs.as_f64().unwrap());
        assert!(
            (a - b).abs() <= 1e-9,
            "{label}: {key}: lector {a} vs official {b}"
        );
    }
}

#[test]
fn squad_v1_1_dev_matches_the_official_script() {
    let data = support::shared_data().join("squad/dev-v1.1.json");
    let dataset = squad::read_dataset(&data).unwrap();
    assert_eq!(dataset.questions.len(), 10_570);
    let predictions = varied_predictions(&dataset, true);
    let dir = tempfile::tempdir().unwrap();
    let pred_pairs: Vec<(String, Value)> = predictions
        .iter()
        .map(|(k, v)| (k.clone(), v.clone().into()))
        .collect();
    let pred_file = write_json(dir.path(), "pred.json", &pred_pairs);

    let ours = squad::evaluate(&dataset, &predictions, &NoAnswer::default()).unwrap();
    assert_eq!(ours.missing.len(), 109);
    assert_same("v1.1", &ours.summary, &python_eval(&data, &pred_file, None));
    // Sanity: the mix of predictions lands in a plausible middle range, not at 0 or 100.
    let em = ours.summary["exact_match"].as_f64().unwrap();
    assert!((20.0..60.0).contains(&em), "exact_match {em}");
}

#[test]
fn squad_v2_0_dev_matches_the_official_script_with_and_without_thresholds() {
    let data = support::shared_data().join("squad/dev-v2.0.json");
    let dataset = squad::read_dataset(&data).unwrap();
    assert_eq!(dataset.questions.len(), 11_873);
    let predictions = varied_predictions(&dataset, false);
    let na_probs = varied_na_probs(&predictions);
    let dir = tempfile::tempdir().unwrap();
    let pred_pairs: Vec<(String, Value)> = predictions
        .iter()
        .map(|(k, v)| (k.clone(), v.clone().into()))
        .collect();
    let na_pairs: Vec<(String, Value)> = na_probs
        .iter()
        .map(|(k, v)| (k.clone(), (*v).into()))
        .collect();
    let pred_file = write_json(dir.path(), "pred.json", &pred_pairs);
    let na_file = write_json(dir.path(), "na.json", &na_pairs);

    let plain = squad::evaluate(&dataset, &predictions, &NoAnswer::default()).unwrap();
    assert_same(
        "v2.0 no na file",
        &plain.summary,
        &python_eval(&data, &pred_file, None),
    );
    for threshold in [1.0, 0.5, 0.0] {
        let options = NoAnswer {
            probs: Some(&na_probs),
            threshold,
        };
        let ours = squad::evaluate(&dataset, &predictions, &options).unwrap();
        let official = python_eval(&data, &pred_file, Some((&na_file, threshold)));
        assert_same(
            &format!("v2.0 threshold {threshold}"),
            &ours.summary,
            &official,
        );
        assert!(official.contains_key("best_f1_thresh"));
    }
}

#[test]
fn per_question_scores_add_up_to_the_summary() {
    let data = support::shared_data().join("squad/dev-v2.0.json");
    let dataset = squad::read_dataset(&data).unwrap();
    let predictions = varied_predictions(&dataset, false);
    let ours = squad::evaluate(&dataset, &predictions, &NoAnswer::default()).unwrap();
    let f1: f64 =
        ours.questions.iter().map(|q| q.f1).sum::<f64>() * 100.0 / ours.questions.len() as f64;
    assert!((f1 - ours.summary["f1"].as_f64().unwrap()).abs() < 1e-9);
    let exact_gold = ours
        .questions
        .iter()
        .find(|q| q.has_ans && q.em == 1.0)
        .unwrap();
    assert!(!exact_gold.best_gold.is_empty());
}
