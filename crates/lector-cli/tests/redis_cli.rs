//! `--store redis://...` end to end: `lector index add`, `search`, `ask` and `eval retrieval` as
//! processes against a real Redis with RediSearch (started by this test on a loopback port and
//! killed by its pid), on a real SQuAD slice with the real embedder and the shipped reader.

mod common;

#[path = "../../lector-redis/tests/common/mod.rs"]
mod redis;

use common::{fails, lector, ok};
use serde_json::Value;
use std::path::Path;

fn json(text: &str) -> Value {
    serde_json::from_str(text).expect("JSON output")
}

/// The first two articles of SQuAD v1.1 dev, written to `dir`.
fn slice(dir: &Path) -> String {
    let path = lector_eval::data::require("squad/dev-v1.1.json");
    let mut json: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    json["data"].as_array_mut().unwrap().truncate(2);
    let out = dir.join("slice.json");
    std::fs::write(&out, json.to_string()).unwrap();
    out.to_string_lossy().into_owned()
}

/// Doc ids and passages of a `--json` search or ask's passages.
fn ranked(hits: &Value) -> Vec<(String, u64)> {
    let hits = hits.as_array().unwrap();
    hits.iter()
        .map(|h| {
            let h = h.get("hit").unwrap_or(h);
            (
                h["doc_id"].as_str().unwrap().to_string(),
                h["passage"].as_u64().unwrap(),
            )
        })
        .collect()
}

#[test]
fn a_redis_store_answers_like_the_embedded_index_and_fails_clearly_without_redis() {
    let dir = tempfile::tempdir().unwrap();
    let data = slice(dir.path());
    let mut server = redis::RedisServer::start(&[]);
    let store = server.url("squad");
    let index = dir.path().join("index").to_string_lossy().into_owned();
    let added = json(&ok(&lector(&[
        "index", "add", &data, "--dense", "--store", &store, "--json",
    ])));
    let embedded = json(&ok(&lector(&[
        "index", "add", &data, "--dense", "--index", &index, "--json",
    ])));
    assert_eq!(added["documents"], embedded["documents"]);
    assert_eq!(added["passages"], embedded["passages"]);
    assert_eq!(added["index"], store.as_str());

    // Dense retrieval ranks the same vectors: the same passages, so the same answer.
    let question = "Which NFL team represented the AFC at Super Bowl 50?";
    let ask = |place: &[&str], mode: &str| {
        let mut args = vec!["ask", question, "--mode", mode, "--json"];
        args.extend_from_slice(place);
        json(&ok(&lector(&args)))
    };
    let from_redis = ask(&["--store", &store], "dense");
    let from_index = ask(&["--index", &index], "dense");
    assert_eq!(from_redis["answer"]["text"], "Denver Broncos");
    assert_eq!(
        from_redis["answer"]["evidence"],
        from_index["answer"]["evidence"]
    );
    assert_eq!(
        ranked(&from_redis["passages"]),
        ranked(&from_index["passages"])
    );
    let hybrid = ask(&["--store", &store], "hybrid");
    assert_eq!(hybrid["answer"]["text"], "Denver Broncos");

    let search = |place: &[&str]| {
        let mut args = vec![
            "search",
            "Carolina Panthers defense",
            "--mode",
            "dense",
            "--json",
        ];
        args.extend_from_slice(place);
        json(&ok(&lector(&args)))
    };
    assert_eq!(
        ranked(&search(&["--store", &store])["hits"]),
        ranked(&search(&["--index", &index])["hits"])
    );

    // Answer containment of the slice's own questions, through the store.
    let recall = json(&ok(&lector(&[
        "eval",
        "retrieval",
        "--store",
        &store,
        "--queries",
        &data,
        "--mode",
        "bm25",
        "--json",
    ])));
    assert!(recall.to_string().contains("recall"), "{recall}");

    // End-to-end evaluation over the store: the same questions, passages and answers.
    let odqa = |place: &[&str]| {
        let mut args = vec![
            "eval",
            "odqa",
            "--questions",
            &data,
            "--limit",
            "12",
            "--mode",
            "dense",
            "--json",
        ];
        args.extend_from_slice(place);
        let mut out = json(&ok(&lector(&args)));
        for timing in ["seconds", "mean_timings_ms"] {
            out.as_object_mut().unwrap().remove(timing);
        }
        out
    };
    let through_redis = odqa(&["--store", &store]);
    assert_eq!(through_redis["questions"], 12);
    assert_eq!(through_redis, odqa(&["--index", &index]));

    // A calibration kept with the store, and used by asks through it.
    assert_eq!(from_redis["calibrated"], false);
    let calibrated = json(&ok(&lector(&[
        "calibrate",
        "--squad",
        &data,
        "--store",
        &store,
        "--limit",
        "60",
        "--json",
    ])));
    assert_eq!(calibrated["written"], format!("{store}/calibration.json"));
    let answer = ask(&["--store", &store], "dense");
    assert_eq!(answer["calibrated"], true);
    assert!(
        answer["answer"]["confidence"].as_f64().is_some(),
        "{answer}"
    );

    // Stats and removal through the store.
    let stats = |place: &[&str]| {
        let mut args = vec!["index", "stats", "--json"];
        args.extend_from_slice(place);
        json(&ok(&lector(&args)))
    };
    let before = stats(&["--store", &store]);
    assert_eq!(before["documents"], added["documents"]);
    assert_eq!(before["dense"]["dim"], 384);
    ok(&lector(&[
        "index",
        "rm",
        "Super_Bowl_50#0",
        "--store",
        &store,
    ]));
    let after = stats(&["--store", &store]);
    assert_eq!(
        after["documents"].as_u64().unwrap() + 1,
        before["documents"].as_u64().unwrap()
    );
    assert!(after["generation"].as_u64() > before["generation"].as_u64());

    // Redis gone: a clear error naming the store, exit code 2, no hang.
    server.kill();
    let err = fails(&lector(&["ask", question, "--store", &store]));
    assert!(
        err.contains(&format!("the document store {store} is unavailable")),
        "{err}"
    );
}
