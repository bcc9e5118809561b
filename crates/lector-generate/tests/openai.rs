//! The OpenAI-compatible client against a real HTTP server on the loopback interface: canned
//! completions, 429 then success, 5xx until the retries run out, malformed JSON, and a server
//! that accepts the connection and never answers.

use lector_generate::{
    Decoding, Error, FinishReason, GenerateOptions, Generator, Message, OpenAiConfig,
    OpenAiGenerator,
};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::ops::ControlFlow;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

/// What the server does with one request.
#[derive(Clone)]
enum Reply {
    Json(u16, String),
    WithHeader(u16, &'static str, String),
    Hang(Duration),
}

/// A request the server received: its headers (lower-cased names) and JSON body.
#[derive(Debug, Clone)]
struct Received {
    headers: Vec<(String, String)>,
    body: serde_json::Value,
}

struct Server {
    url: String,
    received: Arc<Mutex<Vec<Received>>>,
}

/// Serves `replies` in order, one per connection.
fn serve(replies: Vec<Reply>) -> Server {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    let received = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&received);
    thread::spawn(move || {
        for reply in replies {
            let Ok((stream, _)) = listener.accept() else {
                return;
            };
            let log = Arc::clone(&log);
            thread::spawn(move || handle(stream, reply, &log));
        }
    });
    Server { url, received }
}

fn handle(mut stream: TcpStream, reply: Reply, log: &Mutex<Vec<Received>>) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut headers = Vec::new();
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
            break;
        }
        if let Some((k, v)) = line.split_once(':') {
            headers.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
        }
    }
    let length: usize = headers
        .iter()
        .find(|(k, _)| k == "content-length")
        .map_or(0, |(_, v)| v.parse().unwrap());
    let mut body = vec![0; length];
    reader.read_exact(&mut body).unwrap();
    log.lock().unwrap().push(Received {
        headers,
        body: serde_json::from_slice(&body).unwrap(),
    });
    let (status, extra, body) = match reply {
        Reply::Hang(d) => {
            thread::sleep(d);
            return;
        }
        Reply::Json(status, body) => (status, String::new(), body),
        Reply::WithHeader(status, header, body) => (status, format!("{header}\r\n"), body),
    };
    let _ = write!(
        stream,
        "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n{extra}\r\n{body}",
        body.len()
    );
}

fn completion(text: &str, finish: &str) -> String {
    serde_json::json!({
        "id": "c1", "object": "chat.completion", "model": "m",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": finish}],
        "usage": {"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15}
    })
    .to_string()
}

fn client(url: &str) -> OpenAiGenerator {
    let mut config = OpenAiConfig::new(url, "test-model");
    config.api_key = Some("sk-test".into());
    config.backoff = Duration::from_millis(20);
    config.request_timeout = Duration::from_secs(5);
    OpenAiGenerator::new(config).unwrap()
}

fn ask(
    g: &OpenAiGenerator,
    options: &GenerateOptions,
) -> Result<(lector_generate::Generation, Vec<String>), Error> {
    let mut pieces = Vec::new();
    let out = g.generate(
        &[
            Message::system("Be brief."),
            Message::user("Capital of France?"),
        ],
        options,
        &mut |p| {
            pieces.push(p.to_string());
            ControlFlow::Continue(())
        },
    )?;
    Ok((out, pieces))
}

#[test]
fn a_completion_is_requested_and_parsed() {
    let server = serve(vec![Reply::Json(200, completion("Paris [1].", "stop"))]);
    let options = GenerateOptions {
        decoding: Decoding::Sample {
            temperature: 0.7,
            top_p: 0.9,
            seed: 42,
        },
        max_new_tokens: 20,
        stop: vec!["\n\n".into()],
        ..GenerateOptions::default()
    };
    let (g, pieces) = ask(&client(&server.url), &options).unwrap();
    assert_eq!(g.text, "Paris [1].");
    assert_eq!(pieces, ["Paris [1]."]);
    assert_eq!(g.finish_reason, FinishReason::EndOfText);
    assert_eq!(
        (g.timings.prompt_tokens, g.timings.generated_tokens),
        (12, 3)
    );
    let received = server.received.lock().unwrap();
    let r = &received[0];
    assert_eq!(r.body["model"], "test-model");
    assert_eq!(r.body["messages"][1]["content"], "Capital of France?");
    assert_eq!(r.body["max_tokens"], 20);
    assert_eq!(r.body["seed"], 42);
    assert_eq!(r.body["top_p"], 0.9);
    assert_eq!(r.body["stop"][0], "\n\n");
    let auth = r
        .headers
        .iter()
        .find(|(k, _)| k == "authorization")
        .unwrap();
    assert_eq!(auth.1, "Bearer sk-test");
}

#[test]
fn rate_limits_are_retried_with_backoff() {
    let server = serve(vec![
        Reply::Json(429, "{\"error\": {\"message\": \"slow down\"}}".into()),
        Reply::Json(503, "overloaded".into()),
        Reply::Json(200, completion("Paris", "length")),
    ]);
    let start = Instant::now();
    let (g, _) = ask(&client(&server.url), &GenerateOptions::default()).unwrap();
    assert_eq!(g.text, "Paris");
    assert_eq!(g.finish_reason, FinishReason::Length);
    assert_eq!(server.received.lock().unwrap().len(), 3);
    // 20 ms, then 40 ms.
    assert!(
        start.elapsed() >= Duration::from_millis(60),
        "{:?}",
        start.elapsed()
    );
}

#[test]
fn retry_after_is_honoured() {
    let server = serve(vec![
        Reply::WithHeader(429, "Retry-After: 1", "{}".into()),
        Reply::Json(200, completion("ok", "stop")),
    ]);
    let start = Instant::now();
    ask(&client(&server.url), &GenerateOptions::default()).unwrap();
    assert!(start.elapsed() >= Duration::from_secs(1));
}

#[test]
fn server_errors_fail_after_the_last_retry() {
    let server = serve(vec![Reply::Json(500, "boom".into()); 4]);
    let err = ask(&client(&server.url), &GenerateOptions::default()).unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, Error::Endpoint { .. }));
    assert!(text.contains("status 500 after 3 retries: boom"), "{text}");
    assert_eq!(server.received.lock().unwrap().len(), 4);
}

#[test]
fn client_errors_are_not_retried() {
    let server = serve(vec![Reply::Json(401, "{\"error\": \"bad key\"}".into())]);
    let text = ask(&client(&server.url), &GenerateOptions::default())
        .unwrap_err()
        .to_string();
    assert!(
        text.contains("status 401: {\"error\": \"bad key\"}"),
        "{text}"
    );
    assert_eq!(server.received.lock().unwrap().len(), 1);
}

#[test]
fn malformed_json_is_a_clear_error() {
    let server = serve(vec![
        Reply::Json(200, "{\"choices\": [".into()),
        Reply::Json(200, "{\"choices\": []}".into()),
    ]);
    let g = client(&server.url);
    let text = ask(&g, &GenerateOptions::default())
        .unwrap_err()
        .to_string();
    assert!(text.contains("malformed JSON in the reply"), "{text}");
    assert!(text.contains(&server.url), "names the endpoint: {text}");
    let text = ask(&g, &GenerateOptions::default())
        .unwrap_err()
        .to_string();
    assert!(text.contains("no `choices[0]`"), "{text}");
}

#[test]
fn a_hanging_server_times_out() {
    let server = serve(vec![Reply::Hang(Duration::from_secs(10))]);
    let mut config = OpenAiConfig::new(&server.url, "m");
    config.request_timeout = Duration::from_millis(300);
    let g = OpenAiGenerator::new(config).unwrap();
    let start = Instant::now();
    let text = ask(&g, &GenerateOptions::default())
        .unwrap_err()
        .to_string();
    let elapsed = start.elapsed();
    assert!(elapsed < Duration::from_secs(3), "{elapsed:?}");
    assert!(
        text.contains("timed out") || text.contains("timeout"),
        "{text}"
    );
}

#[test]
fn an_unreachable_endpoint_fails_fast() {
    // A port nothing listens on.
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let g = client(&format!("http://127.0.0.1:{port}/v1"));
    let err = ask(&g, &GenerateOptions::default()).unwrap_err();
    assert!(matches!(err, Error::Endpoint { .. }), "{err}");
}

#[test]
fn stop_sequences_are_applied_to_the_reply_and_beams_refused() {
    let server = serve(vec![Reply::Json(
        200,
        completion("Paris.\n\nMore text", "stop"),
    )]);
    let options = GenerateOptions {
        stop: vec!["\n\n".into()],
        ..GenerateOptions::default()
    };
    let (g, _) = ask(&client(&server.url), &options).unwrap();
    assert_eq!(g.text, "Paris.");
    assert_eq!(g.finish_reason, FinishReason::Stop("\n\n".into()));
    let beams = GenerateOptions {
        decoding: Decoding::Beam {
            beams: 2,
            length_penalty: 1.0,
        },
        ..GenerateOptions::default()
    };
    let text = ask(&client(&server.url), &beams).unwrap_err().to_string();
    assert!(text.contains("beam search"), "{text}");
}
