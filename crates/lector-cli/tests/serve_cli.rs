//! `lector serve` as a process: writes survive SIGKILL once acknowledged, SIGTERM lets requests
//! in flight finish and releases the index, `--generate` serves chat completions (501 without
//! it), and the web page answers in headless Chromium.

mod common;

use common::{browser_or_skip, dense_index, dump_dom, headless, http, index, lector, serve};
use serde_json::{json, Value};
use std::io::Read;
use std::net::TcpStream;
use std::path::Path;
use std::time::Duration;

#[test]
fn an_acknowledged_document_survives_sigkill() {
    let dir = tempfile::tempdir().unwrap();
    let index = index(dir.path());
    let (mut server, addr) = serve(&index, &[]);
    let doc =
        json!({"id": "kill-test", "text": "The lighthouse keeper of Skagen is called Maren."});
    let (status, body) = http(&addr, "POST", "/v1/documents", Some(&doc.to_string()));
    assert_eq!(status, 201, "{body}");
    server.kill_hard(); // SIGKILL: no shutdown code runs

    let (mut server, addr) = serve(&index, &[]);
    let (status, body) = http(&addr, "GET", "/v1/documents/kill-test", None);
    assert_eq!(status, 200, "{body}");
    let stored: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(stored["text"], doc["text"]);
    let ask =
        json!({"question": "Who is the lighthouse keeper of Skagen?", "probabilities": false});
    let (status, body) = http(&addr, "POST", "/v1/ask", Some(&ask.to_string()));
    assert_eq!(status, 200, "{body}");
    let answer: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(answer["answer"]["text"], "Maren");
    server.kill_hard();
}

#[test]
fn sigterm_finishes_requests_in_flight_and_releases_the_index() {
    let dir = tempfile::tempdir().unwrap();
    let index = index(dir.path());
    let (mut server, addr) = serve(&index, &[]);
    // While the server holds the writer lock, `index add` fails at once, naming the lock.
    let note = dir.path().join("note.txt");
    std::fs::write(&note, "A note about the lighthouse keeper of Skagen.").unwrap();
    let out = lector(&["index", "add", note.to_str().unwrap(), "--index", &index]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("is being written by another process") && err.contains("write.lock"),
        "{err}"
    );
    let ask = json!({"question": "Which team won Super Bowl 50?", "k": 16}).to_string();
    let in_flight = {
        let addr = addr.clone();
        std::thread::spawn(move || http(&addr, "POST", "/v1/ask", Some(&ask)))
    };
    // Wait until the ask runs, then ask the server to stop.
    loop {
        let (_, metrics) = http(&addr, "GET", "/metrics", None);
        if metrics.lines().any(|l| l == "lector_requests_running 1") {
            break;
        }
        assert!(!in_flight.is_finished(), "the ask finished before SIGTERM");
        std::thread::sleep(Duration::from_millis(5));
    }
    server.terminate();
    let (status, body) = in_flight.join().unwrap();
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("Broncos"), "{body}");
    let exit = server.wait();
    assert!(exit.success(), "{exit:?}");
    // The writer lock is free again.
    let out = lector(&["index", "rm", "Super_Bowl_50#0", "--index", &index]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn two_hop_asks_over_http_carry_their_chain_and_bad_hops_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let index = index(dir.path());
    let (mut server, addr) = serve(&index, &[]);
    let ask = |body: Value| http(&addr, "POST", "/v1/ask", Some(&body.to_string()));
    let (status, body) = ask(json!({"question": "Which team won Super Bowl 50?", "hops": 2}));
    assert_eq!(status, 200, "{body}");
    let answer: Value = serde_json::from_str(&body).unwrap();
    let hops = &answer["hops"];
    assert_eq!(hops["hops"], 2, "{body}");
    assert_eq!(hops["kind"], "bridge");
    assert_eq!(hops["hop_ms"].as_array().unwrap().len(), 2);
    assert!(!hops["paths"].as_array().unwrap().is_empty(), "{body}");
    // One hop (the default) has no chain.
    let (status, body) = ask(json!({"question": "Which team won Super Bowl 50?"}));
    assert_eq!(status, 200, "{body}");
    assert!(serde_json::from_str::<Value>(&body)
        .unwrap()
        .get("hops")
        .is_none());
    let (status, body) = ask(json!({"question": "Which team won Super Bowl 50?", "hops": 3}));
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("hops"), "{body}");
    server.stop();
}

#[test]
fn a_silent_client_is_dropped_after_the_header_timeout_flag() {
    let dir = tempfile::tempdir().unwrap();
    let index = index(dir.path());
    let (mut server, addr) = serve(&index, &["--header-timeout-secs", "1"]);
    let started = std::time::Instant::now();
    let mut silent = TcpStream::connect(&addr).unwrap();
    silent
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let mut buf = [0u8; 64];
    // The server closes the connection: the read ends (0 bytes or a reset), not the 20 s timeout.
    let _ = silent.read(&mut buf);
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(900) && waited < Duration::from_secs(10),
        "closed after {waited:?}"
    );
    server.stop();
}

#[test]
fn generate_serves_chat_completions_and_without_it_they_are_501() {
    let dir = tempfile::tempdir().unwrap();
    let index = index(dir.path());
    let chat = json!({
        "messages": [{"role": "user", "content": "What is the capital of France?"}],
        "max_tokens": 3,
    })
    .to_string();
    let (mut server, addr) = serve(&index, &[]);
    let (status, body) = http(&addr, "POST", "/v1/chat/completions", Some(&chat));
    assert_eq!(status, 501, "{body}");
    assert!(body.contains("lector serve --generate"), "{body}");
    server.kill_hard();

    // The registry's SmolLM2, fetched like `lector models pull generator`.
    let (mut server, addr) = serve(&index, &["--generate"]);
    let (status, body) = http(&addr, "POST", "/v1/chat/completions", Some(&chat));
    assert_eq!(status, 200, "{body}");
    let out: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(out["object"], "chat.completion");
    assert_eq!(out["usage"]["completion_tokens"], 3);
    assert_eq!(out["choices"][0]["finish_reason"], "length");
    server.kill_hard();
}

#[test]
fn the_web_page_answers_in_headless_chromium() {
    let Some(browser) = browser_or_skip("the_web_page_answers_in_headless_chromium") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let index = index(dir.path());
    let (mut server, addr) = serve(&index, &[]);
    let url = format!("http://{addr}/?q=Which%20team%20won%20Super%20Bowl%2050%3F");
    let profile = dir.path().join("chromium-profile");
    let dom = dump_dom(&browser, &profile, &url, "data-state=\"answered\"");
    let mark = dom
        .split("<mark id=\"answer-mark\">")
        .nth(1)
        .and_then(|rest| rest.split("</mark>").next())
        .expect("the answer is highlighted in its passage");
    assert!(mark.contains("Broncos"), "highlighted `{mark}`");
    assert!(dom.contains("<svg id=\"chart\""), "the probability chart");
    assert!(dom.contains("<rect"), "the chart has bars");

    // `rank_prior=0` in the address selects the control, and the request carries it: answers
    // from passages below the first score differently among the runner-ups.
    let runners = |dom: &str| -> String {
        let table = dom
            .split("<table id=\"runners\">")
            .nth(1)
            .expect("runner-ups");
        table.split("</table>").next().unwrap().to_string()
    };
    let flat = format!("{url}&rank_prior=0");
    let flat = dump_dom(&browser, &profile, &flat, "data-state=\"answered\"");
    assert_ne!(
        runners(&flat),
        runners(&dom),
        "rank_prior=0 changed no score"
    );

    // A screenshot for people, kept under target/.
    let shots = Path::new(env!("CARGO_TARGET_TMPDIR")).join("web");
    std::fs::create_dir_all(&shots).unwrap();
    let shot = shots.join("answer.png");
    let _ = std::fs::remove_file(&shot);
    let out = headless(
        &browser,
        &profile,
        &url,
        &[&format!("--screenshot={}", shot.display())],
    );
    assert!(
        shot.metadata().map(|m| m.len() > 10_000).unwrap_or(false),
        "no screenshot: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!("screenshot: {}", shot.display());

    // Abstention shows the no-answer state.
    let url = format!("http://{addr}/?q=xylophone%20quokka%20zeppelin%3F");
    let dom = dump_dom(&browser, &profile, &url, "data-state=\"abstained\"");
    assert!(dom.contains("No answer in these documents"));

    // The filter in the address fills the filter control and goes with the ask: the question
    // answered above finds nothing in documents that no document's title matches.
    let url = format!("http://{addr}/?q=Which%20team%20won%20Super%20Bowl%2050%3F&filter=title%20%3D%3D%20%22Nowhere%22");
    let dom = dump_dom(&browser, &profile, &url, "data-state=\"abstained\"");
    assert!(dom.contains("No answer in these documents"));
    server.kill_hard();
}

fn retrievers(hit: &Value) -> Vec<String> {
    hit["sources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["retriever"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn dense_and_hybrid_retrieval_over_http_include_documents_written_through_the_api() {
    let dir = tempfile::tempdir().unwrap();
    let index = dense_index(dir.path());
    let (mut server, addr) = serve(&index, &[]);

    let ask = json!({"question": "Which team won Super Bowl 50?", "mode": "hybrid", "probabilities": false});
    let (status, body) = http(&addr, "POST", "/v1/ask", Some(&ask.to_string()));
    assert_eq!(status, 200, "{body}");
    let answer: Value = serde_json::from_str(&body).unwrap();
    assert!(
        answer["answer"]["text"]
            .as_str()
            .is_some_and(|t| t.contains("Broncos")),
        "{body}"
    );
    let sources: Vec<Vec<String>> = answer["passages"]
        .as_array()
        .unwrap()
        .iter()
        .map(retrievers)
        .collect();
    assert!(
        sources.iter().any(|s| s.len() == 2),
        "a passage found by both retrievers: {sources:?}"
    );

    // A document written through the API is embedded in the same commit: dense search finds it
    // by meaning, with no word of the query in common but "Skagen".
    let doc = json!({"id": "skagen", "text": "The lighthouse of Skagen is kept by Maren Holm."});
    let (status, body) = http(&addr, "POST", "/v1/documents", Some(&doc.to_string()));
    assert_eq!(status, 201, "{body}");
    let (status, body) = http(
        &addr,
        "GET",
        "/v1/search?q=who%20looks%20after%20the%20beacon%20at%20Skagen&mode=dense&k=3",
        None,
    );
    assert_eq!(status, 200, "{body}");
    let hits: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(hits["mode"], "dense", "{body}");
    assert_eq!(hits["hits"][0]["doc_id"], "skagen", "{body}");
    assert_eq!(retrievers(&hits["hits"][0]), ["dense"]);

    assert!(server.stop().success());
}
