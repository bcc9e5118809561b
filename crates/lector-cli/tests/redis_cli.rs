//! `--store redis://...` end to end: `lector index add`, `search`, `ask` and `eval retrieval` as
//! processes against a real Redis with RediSearch (started by this test on a loopback port and
//! killed by its pid), on a real SQuAD slice with the real embedder and the shipped reader.

mod common;

#[path = "../../lector-redis/tests/common/mod.rs"]
mod redis;

use common::{fails, get_json, http, lector, ok, serve_with};
use serde_json::Value;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

fn json(text: &str) -> Value {
    serde_json::from_str(text).expect("JSON output")
}

/// The first two articles of SQuAD v1.1 dev, written to `dir`.
fn slice(dir: &Path) -> String {
    articles(dir, 0..2, "slice.json")
}

/// Articles `range` of SQuAD v1.1 dev, written to `dir/name`.
fn articles(dir: &Path, range: std::ops::Range<usize>, name: &str) -> String {
    let path = lector_eval::data::require("squad/dev-v1.1.json");
    let mut json: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let kept: Vec<Value> = json["data"].as_array().unwrap()[range].to_vec();
    json["data"] = Value::Array(kept);
    let out = dir.join(name);
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

    // Multi-hop asks follow the same titles through either store to the same passage pairs and
    // answer (the second hop's BM25 scores are each store's own).
    let hops = |place: &[&str]| {
        let question = "Which team did the MVP of Super Bowl 50 play for?";
        let mut args = vec!["ask", question, "--hops", "2", "--mode", "dense", "--json"];
        args.extend_from_slice(place);
        let out = json(&ok(&lector(&args)));
        let paths = out["hops"]["paths"].as_array().unwrap().iter();
        let pairs: Vec<String> = paths
            .map(|p| format!("{} / {}", p["first"], p["second"]))
            .collect();
        (
            out["answer"]["text"].clone(),
            out["answer"]["evidence"].clone(),
            pairs,
        )
    };
    let (answer, evidence, pairs) = hops(&["--store", &store]);
    assert_eq!(answer, "Broncos");
    assert!(!pairs.is_empty());
    assert_eq!((answer, evidence, pairs), hops(&["--index", &index]));

    // Generated answers are grounded on the store's passages: the prompt an OpenAI-compatible
    // endpoint receives quotes them.
    let requests = Arc::new(Mutex::new(Vec::new()));
    let endpoint = common::scripted_endpoint("The Denver Broncos [1].", requests.clone());
    let generated = json(&ok(&lector(&[
        "ask",
        question,
        "--store",
        &store,
        "--mode",
        "dense",
        "--generate",
        "--endpoint",
        &endpoint,
        "--api-model",
        "scripted",
        "--json",
    ])));
    assert!(
        generated.to_string().contains("Denver Broncos"),
        "{generated}"
    );
    let prompt = requests.lock().unwrap()[0].clone();
    let best = &from_redis["passages"][0];
    let quoted = best["hit"]["text"]
        .as_str()
        .unwrap_or_else(|| best["text"].as_str().unwrap());
    assert!(prompt.contains(&quoted[..60]), "{prompt}");

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

    // Filters select in Redis; a range condition has no Redis form and says so.
    let filtered = json(&ok(&lector(&[
        "search",
        "city river",
        "--store",
        &store,
        "--filter",
        r#"title == "Super Bowl 50""#,
        "--json",
    ])));
    let hits = filtered["hits"].as_array().unwrap();
    assert!(!hits.is_empty());
    assert!(
        hits.iter().all(|h| h["title"] == "Super Bowl 50"),
        "{filtered}"
    );
    let err = fails(&lector(&[
        "search",
        "city",
        "--store",
        &store,
        "--filter",
        "year > 2000",
    ]));
    assert!(err.contains("range conditions"), "{err}");

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

/// Polls `check` every 100 ms for at most `limit`; how long it took to hold.
fn within(limit: Duration, mut check: impl FnMut() -> bool) -> Option<Duration> {
    let start = Instant::now();
    while start.elapsed() < limit {
        if check() {
            return Some(start.elapsed());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    None
}

#[test]
fn a_server_over_a_redis_store_follows_it_and_answers_503_while_redis_is_gone() {
    let dir = tempfile::tempdir().unwrap();
    let first = articles(dir.path(), 0..1, "first.json");
    let second = articles(dir.path(), 1..2, "second.json");
    let password = "s3cret-pw";
    let mut redis = redis::RedisServer::start(&["--requirepass", password]);
    let store = format!("redis://default:{password}@127.0.0.1:{}/served", redis.port);
    ok(&lector(&["index", "add", &first, "--store", &store]));
    let (_server, addr) = serve_with(&["--store", &store]);

    let ask = r#"{"question": "Which NFL team represented the AFC at Super Bowl 50?"}"#;
    let (status, body) = http(&addr, "POST", "/v1/ask", Some(ask));
    assert_eq!(status, 200, "{body}");
    let answer = json(&body);
    assert_eq!(answer["answer"]["text"], "Denver Broncos", "{answer}");
    assert_eq!(answer["calibrated"], false);
    let health = get_json(&addr, "/healthz");
    let documents = health["documents"].as_u64().unwrap();
    assert!(documents > 0, "{health}");

    // Read-only: writes go to the store through `lector index add --store`, and what only the
    // embedded index offers is refused with a reason.
    let doc = r#"{"id": "x", "text": "Some text."}"#;
    let (status, body) = http(&addr, "POST", "/v1/documents", Some(doc));
    assert_eq!(status, 403, "{body}");
    assert!(
        body.contains("read-only: write to it with `lector index add --store`")
            && !body.contains("--read-only"),
        "the 403 says why, and not a flag this server was not given: {body}"
    );
    let (status, body) = http(&addr, "GET", "/v1/documents", None);
    assert_eq!(status, 501, "{body}");
    assert!(body.contains("embedded index"), "{body}");
    let hops = r#"{"question": "Who won Super Bowl 50?", "hops": 2}"#;
    let (status, body) = http(&addr, "POST", "/v1/ask", Some(hops));
    assert_eq!(status, 200, "{body}");
    assert!(json(&body)["hops"].is_object(), "{body}");

    // A key confined to a tenant searches with its tenant's own BM25 statistics, which Redis does
    // not keep: its asks fail rather than score with every tenant's.
    let keys = dir.path().join("keys.json").to_string_lossy().into_owned();
    let tenant_key = ok(&lector(&[
        "keys", "add", "acme", "--file", &keys, "--scopes", "ask", "--tenant", "acme",
    ]));
    let (_tenants, tenant_addr) = serve_with(&["--store", &store, "--keys", &keys]);
    let bearer = format!("Authorization: Bearer {}", tenant_key.trim());
    let (status, body) = common::http_with(&tenant_addr, "POST", "/v1/ask", Some(ask), &[&bearer]);
    assert_eq!(status, 400, "{body}");
    assert!(
        body.contains("statistics of the filtered documents"),
        "{body}"
    );

    // Documents another process adds are searched at once and counted within the follow bound.
    ok(&lector(&["index", "add", &second, "--store", &store]));
    let search = "/v1/search?q=Warsaw%20University%20of%20Technology&k=1";
    assert!(get_json(&addr, search)["hits"][0]["doc_id"]
        .as_str()
        .unwrap()
        .starts_with("Warsaw"));
    let counted = within(Duration::from_secs(10), || {
        get_json(&addr, "/healthz")["documents"].as_u64() > Some(documents)
    });
    eprintln!("new documents counted after {counted:?}");
    assert!(
        counted.is_some(),
        "the server follows the store's generation"
    );

    // A calibration kept with the store is served without a restart.
    ok(&lector(&[
        "calibrate",
        "--squad",
        &first,
        "--store",
        &store,
        "--limit",
        "30",
    ]));
    let calibrated = within(Duration::from_secs(10), || {
        json(&http(&addr, "POST", "/v1/ask", Some(ask)).1)["calibrated"] == true
    });
    assert!(calibrated.is_some(), "the store's calibration is served");

    // Redis gone: 503 with the reason, within the store's timeout, and the password nowhere.
    redis.kill();
    let start = Instant::now();
    let (status, body) = http(&addr, "POST", "/v1/ask", Some(ask));
    assert_eq!(status, 503, "{body}");
    assert!(
        start.elapsed() < Duration::from_secs(15),
        "{:?}",
        start.elapsed()
    );
    assert!(body.contains("unavailable"), "{body}");
    // /healthz answers from the follower's last look at the store (every 200 ms), never
    // calling it itself, and names nothing of it: neither host, port nor user.
    let unhealthy = within(Duration::from_secs(10), || {
        http(&addr, "GET", "/healthz", None).0 == 503
    });
    assert!(unhealthy.is_some(), "/healthz says the store is gone");
    let (status, health) = http(&addr, "GET", "/healthz", None);
    assert_eq!(status, 503, "{health}");
    assert!(health.contains("cannot be reached"), "{health}");
    for named in ["127.0.0.1", &redis.port.to_string(), "redis://"] {
        assert!(!health.contains(named), "{health}");
    }
    let (_, metrics) = http(&addr, "GET", "/metrics", None);
    for shown in [&body, &health, &metrics] {
        assert!(!shown.contains(password), "{shown}");
    }

    // Back: the same server answers again.
    redis.restart();
    let back = within(Duration::from_secs(20), || {
        http(&addr, "POST", "/v1/ask", Some(ask)).0 == 200
    });
    assert!(back.is_some(), "the server recovers when Redis returns");
    assert_eq!(get_json(&addr, "/healthz")["status"], "ok");
}

#[test]
fn two_hundred_healthz_clients_do_not_slow_the_asks_of_a_server_over_redis() {
    // /healthz needs no key: before, each made three Redis calls on the one connection the
    // asks used, held under a lock, so anyone could starve the asks.
    let dir = tempfile::tempdir().unwrap();
    let first = articles(dir.path(), 0..1, "first.json");
    let redis = redis::RedisServer::start(&[]);
    let store = format!("redis://127.0.0.1:{}/flood", redis.port);
    ok(&lector(&["index", "add", &first, "--store", &store]));
    let (mut server, addr) = serve_with(&["--store", &store, "--api-key", "k-flood"]);
    let ask = r#"{"question": "Which NFL team represented the AFC at Super Bowl 50?"}"#;
    let key = "Authorization: Bearer k-flood";
    let asks = |runs| {
        let mut took: Vec<Duration> = (0..runs)
            .map(|_| {
                let started = Instant::now();
                let (status, body) = common::http_with(&addr, "POST", "/v1/ask", Some(ask), &[key]);
                assert_eq!(status, 200, "{body}");
                started.elapsed()
            })
            .collect();
        took.sort();
        took[runs / 2]
    };
    asks(3); // warm
    let quiet = asks(15);
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let answered = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let clients: Vec<_> = (0..200)
        .map(|_| {
            let (addr, stop, answered) = (addr.clone(), stop.clone(), answered.clone());
            std::thread::spawn(move || {
                // Bounded: at most 2,000 requests each, 100 ms apart (2,000 a second in all).
                for _ in 0..2_000 {
                    if stop.load(std::sync::atomic::Ordering::Relaxed) {
                        break;
                    }
                    let Ok(mut stream) = std::net::TcpStream::connect(&addr) else {
                        continue;
                    };
                    use std::io::{Read, Write};
                    let request = format!(
                        "GET /healthz HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
                    );
                    let mut reply = String::new();
                    if stream.write_all(request.as_bytes()).is_ok()
                        && stream.read_to_string(&mut reply).is_ok()
                        && reply.starts_with("HTTP/1.1 200")
                    {
                        answered.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    }
                    std::thread::sleep(Duration::from_millis(100));
                }
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    let flooded = asks(15);
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for client in clients {
        client.join().unwrap();
    }
    let answered = answered.load(std::sync::atomic::Ordering::Relaxed);
    println!(
        "median ask: {quiet:?} quiet, {flooded:?} with 200 /healthz clients ({answered} answered), ratio {:.2}",
        flooded.as_secs_f64() / quiet.as_secs_f64()
    );
    assert!(answered > 2_000, "the flood reached the server: {answered}");
    assert!(
        flooded.as_secs_f64() <= 1.5 * quiet.as_secs_f64(),
        "median ask {quiet:?} quiet, {flooded:?} flooded"
    );
    assert!(server.stop().success());
}
