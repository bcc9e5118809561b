//! `lector train reader` end to end on a tiny checkpoint and real SQuAD questions: the output
//! loads in lector, a run killed with SIGKILL and resumed ends with the same weights as an
//! uninterrupted one, dev evaluation keeps the best checkpoint, and bad input fails clearly
//! without touching what was already written.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

fn lector() -> Command {
    Command::new(env!("CARGO_BIN_EXE_lector"))
}

fn run(args: &[&str]) -> Output {
    lector().args(args).output().expect("run lector")
}

fn tiny_bert() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../lector-models/tests/fixtures/tiny-bert")
        .to_string_lossy()
        .into_owned()
}

/// The first `n` questions of SQuAD v1.1 train (paragraphs with their questions) as a file.
fn squad_slice(dir: &Path, n: usize) -> String {
    let path = lector_eval::data::require("squad/train-v1.1.json");
    let data: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let mut paragraphs = Vec::new();
    let mut count = 0;
    'outer: for article in data["data"].as_array().unwrap() {
        for paragraph in article["paragraphs"].as_array().unwrap() {
            count += paragraph["qas"].as_array().unwrap().len();
            paragraphs.push(paragraph.clone());
            if count >= n {
                break 'outer;
            }
        }
    }
    let file = serde_json::json!({"version": "1.1", "data": [{"title": "slice", "paragraphs": paragraphs}]});
    let out = dir.join(format!("squad-{n}.json"));
    std::fs::write(&out, file.to_string()).unwrap();
    out.to_string_lossy().into_owned()
}

/// Settings shared by the runs compared below: tiny windows, one thread (bit-for-bit).
fn train_args<'a>(train: &'a str, out: &'a str) -> Vec<&'a str> {
    let model: &'static str = Box::leak(tiny_bert().into_boxed_str());
    let mut args = vec!["train", "reader", "--model", model];
    args.extend([
        "--train",
        train,
        "--out",
        out,
        "--epochs",
        "3",
        "--batch-size",
        "4",
        "--save-every",
        "4",
        "--max-seq-len",
        "64",
        "--doc-stride",
        "16",
        "--lr",
        "1e-3",
        "--seed",
        "7",
        "--threads",
        "1",
    ]);
    args
}

fn ok(out: &Output) {
    assert!(
        out.status.success(),
        "lector failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn log_steps(out: &Path) -> Vec<u64> {
    std::fs::read_to_string(out.join("train-log.jsonl"))
        .unwrap_or_default()
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["step"]
                .as_u64()
                .unwrap()
        })
        .collect()
}

#[test]
fn killed_and_resumed_run_ends_with_the_uninterrupted_weights() {
    let tmp = tempfile::tempdir().unwrap();
    let train = squad_slice(tmp.path(), 60);
    let whole: PathBuf = tmp.path().join("whole");
    let killed: PathBuf = tmp.path().join("killed");
    ok(&run(&train_args(&train, whole.to_str().unwrap())));
    let steps = log_steps(&whole);
    assert!(
        steps.len() > 12,
        "expected a run of many steps, got {}",
        steps.len()
    );
    assert_eq!(steps, (1..=steps.len() as u64).collect::<Vec<_>>());

    let mut child = lector()
        .args(train_args(&train, killed.to_str().unwrap()))
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(300);
    // Kill once a checkpoint exists and a few steps past it have run (so some work is lost).
    while !(killed.join("checkpoint/state.json").is_file() && log_steps(&killed).len() >= 6) {
        assert!(Instant::now() < deadline, "no checkpoint within 5 minutes");
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(
        child.try_wait().unwrap().is_none(),
        "the run ended before it could be killed"
    );
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let at_kill = log_steps(&killed).len();
    assert!(at_kill < steps.len(), "killed after the last step");

    ok(&run(&[
        "train",
        "reader",
        "--resume",
        killed.to_str().unwrap(),
    ]));
    assert_eq!(log_steps(&killed), steps, "the log after resuming");
    let weights = |dir: &Path| std::fs::read(dir.join("model.safetensors")).unwrap();
    assert!(
        weights(&whole) == weights(&killed),
        "resumed weights differ from the uninterrupted run's"
    );
    assert!(
        weights(&whole)
            != std::fs::read(Path::new(&tiny_bert()).join("model.safetensors")).unwrap()
    );

    // The trained checkpoint is a reader lector loads.
    let context = tmp.path().join("context.txt");
    std::fs::write(&context, "The Rhine flows through Bonn.").unwrap();
    let read = run(&[
        "read",
        "--model",
        whole.to_str().unwrap(),
        "--context",
        context.to_str().unwrap(),
        "--question",
        "What flows through Bonn?",
        "--json",
    ]);
    ok(&read);
}

#[test]
fn dev_evaluation_keeps_the_best_checkpoint_with_its_scores() {
    let tmp = tempfile::tempdir().unwrap();
    let train = squad_slice(tmp.path(), 24);
    let out = tmp.path().join("out");
    let mut args = train_args(&train, out.to_str().unwrap());
    args.extend(["--dev", &train, "--json"]);
    let result = run(&args);
    ok(&result);
    let summary: Value = serde_json::from_slice(&result.stdout).unwrap();
    let best = &summary["best"];
    assert!(best["f1"].as_f64().is_some(), "{summary}");
    let saved: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("best/dev-scores.json")).unwrap())
            .unwrap();
    assert_eq!(&saved, best);
    let evaluations = std::fs::read_to_string(out.join("dev-scores.jsonl")).unwrap();
    assert_eq!(evaluations.lines().count(), 3, "one evaluation per epoch");
    assert!(
        out.join("best/model.safetensors").is_file() && out.join("best/tokenizer.json").is_file()
    );
}

#[test]
fn bad_input_is_named_and_nothing_written_is_lost() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let bad = dir.join("bad.json");
    std::fs::write(
        &bad,
        r#"{"version":"1.1","data":[{"title":"t","paragraphs":[{"context":"Bonn lies on the Rhine.",
            "qas":[{"id":"q-misplaced","question":"On which river?","answers":[{"text":"Rhine","answer_start":3}]}]}]}]}"#,
    )
    .unwrap();
    let out = dir.join("out");
    let failed = run(&train_args(bad.to_str().unwrap(), out.to_str().unwrap()));
    let err = String::from_utf8_lossy(&failed.stderr);
    assert!(!failed.status.success());
    assert!(
        err.contains("q-misplaced") && err.contains("bad.json"),
        "{err}"
    );

    let empty = dir.join("empty.json");
    std::fs::write(&empty, r#"{"version":"1.1","data":[]}"#).unwrap();
    let failed = run(&train_args(
        empty.to_str().unwrap(),
        dir.join("out2").to_str().unwrap(),
    ));
    assert!(String::from_utf8_lossy(&failed.stderr).contains("holds no questions"));

    // A checkpoint without its tokenizer.
    let no_tokenizer = dir.join("no-tokenizer");
    std::fs::create_dir(&no_tokenizer).unwrap();
    for name in ["config.json", "model.safetensors"] {
        std::fs::copy(Path::new(&tiny_bert()).join(name), no_tokenizer.join(name)).unwrap();
    }
    let train = squad_slice(dir, 8);
    let failed = run(&[
        "train",
        "reader",
        "--model",
        no_tokenizer.to_str().unwrap(),
        "--train",
        &train,
        "--out",
        dir.join("out3").to_str().unwrap(),
    ]);
    assert!(String::from_utf8_lossy(&failed.stderr).contains("tokenizer.json"));

    // A finished run is not overwritten by a second one into the same directory.
    let done = dir.join("done");
    let mut args = train_args(&train, done.to_str().unwrap());
    args.extend(["--max-steps", "2"]);
    ok(&run(&args));
    let before = std::fs::read(done.join("model.safetensors")).unwrap();
    let again = run(&args);
    assert!(!again.status.success());
    assert!(String::from_utf8_lossy(&again.stderr).contains("--resume"));
    assert_eq!(
        std::fs::read(done.join("model.safetensors")).unwrap(),
        before
    );
}

#[test]
fn hard_negatives_from_an_index_train_with_shared_normalisation() {
    let tmp = tempfile::tempdir().unwrap();
    let train = squad_slice(tmp.path(), 40);
    let index = tmp.path().join("index");
    // The passages of the whole first article: the slice's paragraphs and their neighbours.
    ok(&run(&[
        "index",
        "add",
        &train,
        "--index",
        index.to_str().unwrap(),
    ]));
    let windows = |extra: &[&str], out: &str| -> u64 {
        let out = tmp.path().join(out);
        let mut args = train_args(&train, out.to_str().unwrap());
        args.extend(["--max-steps", "3", "--json"]);
        args.extend(extra);
        let result = run(&args);
        ok(&result);
        let summary: Value = serde_json::from_slice(&result.stdout).unwrap();
        summary["windows"].as_u64().unwrap()
    };
    let plain = windows(&[], "plain");
    let index_arg = index.to_str().unwrap();
    let with_negatives = windows(
        &[
            "--negatives-from",
            index_arg,
            "--negatives",
            "2",
            "--shared-norm",
        ],
        "negatives",
    );
    // Each answerable question gains up to two passages that do not hold its answer.
    assert!(
        with_negatives > plain + 40,
        "{plain} windows without, {with_negatives} with negatives"
    );
    let run_file: Value = serde_json::from_str(
        &std::fs::read_to_string(tmp.path().join("negatives/run.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(run_file["negatives"]["per_question"], 2);
    assert_eq!(run_file["shared_norm"], true);
}

/// Mean loss of the first and last `n` steps of a run's log.
fn loss_trend(out: &Path, n: usize) -> (f64, f64) {
    let losses: Vec<f64> = std::fs::read_to_string(out.join("train-log.jsonl"))
        .unwrap()
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["loss"]
                .as_f64()
                .unwrap()
        })
        .collect();
    assert!(losses.len() >= 2 * n, "{} steps", losses.len());
    let mean = |xs: &[f64]| xs.iter().sum::<f64>() / xs.len() as f64;
    (mean(&losses[..n]), mean(&losses[losses.len() - n..]))
}

#[test]
fn embedder_and_reranker_train_and_load_where_lector_uses_them() {
    let tmp = tempfile::tempdir().unwrap();
    let train = squad_slice(tmp.path(), 40);
    let index = tmp.path().join("index");
    ok(&run(&[
        "index",
        "add",
        &train,
        "--index",
        index.to_str().unwrap(),
    ]));
    let common = [
        "--model",
        Box::leak(tiny_bert().into_boxed_str()),
        "--train",
        &train,
        "--negatives-from",
        index.to_str().unwrap(),
        "--epochs",
        "6",
        "--batch-size",
        "8",
        "--lr",
        "2e-3",
        "--max-tokens",
        "64",
        "--no-dropout",
        "--threads",
        "1",
    ];
    for kind in ["embedder", "reranker"] {
        let out = tmp.path().join(kind);
        let mut args = vec!["train", kind, "--out", out.to_str().unwrap()];
        args.extend(common);
        ok(&run(&args));
        let (first, last) = loss_trend(&out, 3);
        assert!(last < 0.8 * first, "{kind}: loss {first} -> {last}");
    }
    // The embedder indexes passages densely; the reranker reorders search results.
    let dense = tmp.path().join("dense-index");
    let embedder = tmp.path().join("embedder");
    ok(&run(&[
        "index",
        "add",
        &train,
        "--index",
        dense.to_str().unwrap(),
        "--dense",
        "--embedder",
        embedder.to_str().unwrap(),
    ]));
    let reranker = tmp.path().join("reranker");
    let searched = run(&[
        "search",
        "When did Beyonce become popular?",
        "--index",
        index.to_str().unwrap(),
        "--rerank",
        reranker.to_str().unwrap(),
        "--k",
        "3",
        "--json",
    ]);
    ok(&searched);
    let config: Value =
        serde_json::from_str(&std::fs::read_to_string(reranker.join("config.json")).unwrap())
            .unwrap();
    assert_eq!(config["architectures"][0], "BertForSequenceClassification");

    // Without negatives a reranker has nothing to learn from.
    let failed = run(&[
        "train",
        "reranker",
        "--model",
        &tiny_bert(),
        "--train",
        &train,
        "--out",
        tmp.path().join("none").to_str().unwrap(),
    ]);
    assert!(String::from_utf8_lossy(&failed.stderr).contains("--negatives-from"));
}
