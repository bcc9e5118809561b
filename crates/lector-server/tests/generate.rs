//! Generation over HTTP on a loopback port with the real SmolLM2-135M-Instruct (Q4_1 GGUF,
//! fetched like `lector models pull generator`): lector's own OpenAI client against lector's
//! `/v1/chat/completions`, streamed and whole completions, `"mode": "generative"` asks over a
//! real index (the bundled SQuAD sample plus two short documents, so prompts stay short), bad
//! input, a server without a generator, and generations stopped by a client that leaves or by
//! the timeout. Generations are kept to a few tokens: this machine decodes slowly.

mod common;

use common::{smollm2, workspace};
use lector_generate::{
    Decoding, FinishReason, GenerateOptions, Generation, Generator, Message, OpenAiConfig,
    OpenAiGenerator, Timings,
};
use lector_index::{Document, IndexSettings, IndexWriter, Mode, SearchOptions};
use lector_ingest::{self as ingest, IngestOptions, Item};
use lector_pipeline::Pipeline;
use lector_reader::Reader;
use lector_server::{AppState, Config, Limits};
use serde_json::{json, Value};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::ops::ControlFlow;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Generous: a loaded 2-core machine prefills at a few tokens per second.
fn limits() -> Limits {
    Limits {
        timeout: Duration::from_secs(600),
        ..Limits::default()
    }
}

/// A server on a free loopback port; shut down (gracefully) when dropped.
struct Server {
    base: String,
    _dir: tempfile::TempDir,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Server {
    fn start(generator: Option<Arc<dyn Generator>>, limits: Limits, key: Option<&str>) -> Server {
        Server::start_with(generator, limits, key, |_| {})
    }

    /// [`Server::start`] with `configure` changing the settings.
    fn start_with(
        generator: Option<Arc<dyn Generator>>,
        limits: Limits,
        key: Option<&str>,
        configure: impl FnOnce(&mut Config),
    ) -> Server {
        let dir = tempfile::tempdir().unwrap();
        let mut writer = IndexWriter::open_or_create(dir.path(), IndexSettings::default()).unwrap();
        let walk = ingest::walk(&[workspace().join("samples/squad-v1.1-sample.json")]);
        for file in &walk.files {
            ingest::read_file(file, &IngestOptions::default(), &mut |item, _| {
                if let Item::Document(doc) = item {
                    writer.add(doc);
                }
                Ok(())
            })
            .unwrap();
        }
        for (id, title, text) in [
            (
                "zebra",
                "Quagga",
                "The zebra named Quagga lives in Lisbon since 2019.",
            ),
            ("okapi", "Ruth", "The okapi Ruth lives in Antwerp."),
        ] {
            writer.add(Document {
                id: id.into(),
                title: Some(title.into()),
                text: text.into(),
                date: None,
                metadata: None,
                embedding: None,
            });
        }
        writer.commit().unwrap();
        let index = writer.committed().clone();
        let reader = Reader::load(&workspace().join("models/reader-minilm-squad")).unwrap();
        let mut config = Config::new(SearchOptions::for_index(&index, Mode::Bm25), limits);
        config.api_key = key.map(|k| lector_server::ApiKey::new(k).unwrap());
        configure(&mut config);
        let mut state =
            AppState::new(Pipeline::new(index, reader), Some(writer), None, config).expect("state");
        if let Some(generator) = generator {
            state = state.with_generator(generator);
        }
        let state = Arc::new(state);
        let runtime = tokio::runtime::Runtime::new().unwrap();
        let listener = runtime
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            let shutdown = async {
                let _ = stopped.await;
            };
            runtime
                .block_on(lector_server::serve(listener, state, shutdown))
                .unwrap();
        });
        Server {
            base,
            _dir: dir,
            stop: Some(stop),
            thread: Some(thread),
        }
    }

    fn with_smollm2() -> Server {
        Server::start(Some(smollm2()), limits(), None)
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    fn post(&self, path: &str, body: &Value) -> Reply {
        call("POST", &self.url(path), Some(&body.to_string()), None)
    }

    /// A POST answered 200 with JSON.
    fn post_ok(&self, path: &str, body: &Value) -> Value {
        let reply = self.post(path, body);
        assert_eq!(reply.status, 200, "{}", reply.body);
        serde_json::from_str(&reply.body).unwrap()
    }

    fn metrics(&self) -> String {
        call("GET", &self.url("/metrics"), None, None).body
    }

    fn metric(&self, line_start: &str) -> Option<f64> {
        self.metrics()
            .lines()
            .find_map(|l| l.strip_prefix(line_start))
            .map(|v| v.trim().parse().unwrap())
    }

    /// Waits until no generation runs (or fails after `limit`).
    fn wait_idle(&self, limit: Duration) {
        let start = Instant::now();
        while self.metric("lector_requests_running ") != Some(0.0) {
            assert!(start.elapsed() < limit, "still generating after {limit:?}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// A response read whole (chunked bodies decoded).
struct Reply {
    status: u16,
    headers: String,
    body: String,
}

/// The request's bytes.
fn request(method: &str, addr: &str, path: &str, body: &str, key: Option<&str>) -> String {
    let auth = key.map_or(String::new(), |k| format!("Authorization: Bearer {k}\r\n"));
    format!(
        "{method} /{path} HTTP/1.1\r\nHost: {addr}\r\n{auth}Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
}

fn split_url(url: &str) -> (&str, &str) {
    url.strip_prefix("http://")
        .and_then(|rest| rest.split_once('/'))
        .expect("an http URL")
}

/// One HTTP/1.1 request over a raw socket.
fn call(method: &str, url: &str, body: Option<&str>, key: Option<&str>) -> Reply {
    let (addr, path) = split_url(url);
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(600)))
        .unwrap();
    stream
        .write_all(request(method, addr, path, body.unwrap_or(""), key).as_bytes())
        .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let (head, body) = response
        .split_once("\r\n\r\n")
        .expect("a complete response");
    let chunked = head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked");
    Reply {
        status: head[9..12].parse().unwrap(),
        headers: head.to_string(),
        body: if chunked {
            dechunk(body)
        } else {
            body.to_string()
        },
    }
}

/// The payload of a chunked body.
fn dechunk(mut raw: &str) -> String {
    let mut out = String::new();
    loop {
        let (size, rest) = raw.split_once("\r\n").expect("a chunk size line");
        let size = usize::from_str_radix(size.trim(), 16).expect("a hex chunk size");
        if size == 0 {
            return out;
        }
        out.push_str(&rest[..size]);
        raw = &rest[size + 2..];
    }
}

/// Server-sent events as (event name, data); keep-alive comments left out.
fn events(body: &str) -> Vec<(String, String)> {
    body.split("\n\n")
        .filter(|block| !block.trim().is_empty())
        .filter_map(|block| {
            let (mut name, mut data) = (String::new(), Vec::new());
            for line in block.lines() {
                if let Some(v) = line.strip_prefix("event:") {
                    name = v.trim().to_string();
                } else if let Some(v) = line.strip_prefix("data:") {
                    data.push(v.strip_prefix(' ').unwrap_or(v).to_string());
                }
            }
            (!data.is_empty() || !name.is_empty()).then(|| (name, data.join("\n")))
        })
        .collect()
}

fn france() -> Vec<Message> {
    vec![Message::user("What is the capital of France?")]
}

fn greedy(max_new_tokens: usize) -> GenerateOptions {
    GenerateOptions {
        decoding: Decoding::Greedy,
        max_new_tokens,
        ..GenerateOptions::default()
    }
}

/// The model's own greedy text for `messages`, in process.
fn in_process(messages: &[Message], max_new_tokens: usize) -> Generation {
    smollm2()
        .generate(messages, &greedy(max_new_tokens), &mut |_| {
            ControlFlow::Continue(())
        })
        .unwrap()
}

fn client(server: &Server, key: Option<&str>) -> OpenAiGenerator {
    let mut config = OpenAiConfig::new(&server.url("/v1"), "smollm2");
    config.api_key = Some(key.unwrap_or("").to_string());
    config.max_retries = 0;
    config.request_timeout = Duration::from_secs(600);
    OpenAiGenerator::new(config).unwrap()
}

#[test]
fn lectors_openai_client_gets_the_models_completion_from_lectors_server() {
    let server = Server::start(Some(smollm2()), limits(), Some("s3cret"));
    let generator = client(&server, Some("s3cret"));
    let mut pieces = Vec::new();
    let over_http = generator
        .generate(&france(), &greedy(6), &mut |p| {
            pieces.push(p.to_string());
            ControlFlow::Continue(())
        })
        .expect("a completion from lector's server");
    let local = in_process(&france(), 6);
    assert!(!over_http.text.trim().is_empty());
    assert_eq!(over_http.text, local.text, "the same greedy text");
    assert_eq!(pieces.concat(), over_http.text);
    assert_eq!(over_http.finish_reason, local.finish_reason);
    assert_eq!(over_http.finish_reason, FinishReason::Length);
    assert_eq!(over_http.timings.prompt_tokens, local.timings.prompt_tokens);
    assert_eq!(over_http.timings.generated_tokens, 6);

    // A wrong key: 401 in OpenAI's shape, named in the client's error.
    let err = client(&server, Some("wrong"))
        .generate(&france(), &greedy(6), &mut |_| ControlFlow::Continue(()))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("status 401") && err.contains("API key"),
        "{err}"
    );
    let reply = call(
        "POST",
        &server.url("/v1/chat/completions"),
        Some(r#"{"messages": [{"role": "user", "content": "hi"}]}"#),
        None,
    );
    assert_eq!(reply.status, 401);
    let body: Value = serde_json::from_str(&reply.body).unwrap();
    assert_eq!(body["error"]["type"], "authentication_error");
}

#[test]
fn streamed_chunks_add_up_to_the_whole_greedy_completion() {
    let server = Server::with_smollm2();
    let request = json!({
        "model": "anything",
        "messages": [{"role": "user", "content": "What is the capital of France?"}],
        "max_tokens": 8,
        "temperature": 0,
    });
    let whole = server.post_ok("/v1/chat/completions", &request);
    assert_eq!(whole["object"], "chat.completion");
    assert!(whole["id"].as_str().unwrap().starts_with("chatcmpl-"));
    assert_eq!(whole["model"], smollm2().name());
    let choice = &whole["choices"][0];
    assert_eq!(choice["index"], 0);
    assert_eq!(choice["message"]["role"], "assistant");
    let text = choice["message"]["content"].as_str().unwrap();
    // Whether the greedy answer ends within 8 tokens depends on the model's near-ties (quantized
    // arithmetic); the server must report exactly what the model did in process.
    let local = in_process(&france(), 8);
    assert_eq!(text, local.text);
    let finish = match local.finish_reason {
        FinishReason::Length => "length",
        _ => "stop",
    };
    let generated = local.timings.generated_tokens as u64;
    assert_eq!(choice["finish_reason"], finish);
    let usage = &whole["usage"];
    assert_eq!(usage["completion_tokens"].as_u64(), Some(generated));
    assert_eq!(
        usage["total_tokens"].as_u64(),
        Some(usage["prompt_tokens"].as_u64().unwrap() + generated)
    );

    let mut streamed = request.clone();
    streamed["stream"] = json!(true);
    let reply = server.post("/v1/chat/completions", &streamed);
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert!(
        reply.headers.contains("text/event-stream"),
        "{}",
        reply.headers
    );
    let events = events(&reply.body);
    let (last, chunks) = events.split_last().unwrap();
    assert_eq!(last.1, "[DONE]");
    let chunks: Vec<Value> = chunks
        .iter()
        .map(|(_, data)| serde_json::from_str(data).unwrap())
        .collect();
    assert!(chunks.len() > 3, "{chunks:?}");
    assert_eq!(chunks[0]["choices"][0]["delta"]["role"], "assistant");
    let mut concatenated = String::new();
    for chunk in &chunks {
        assert_eq!(chunk["object"], "chat.completion.chunk");
        assert_eq!(chunk["id"], chunks[0]["id"]);
        if let Some(piece) = chunk["choices"][0]["delta"]["content"].as_str() {
            concatenated.push_str(piece);
        }
    }
    assert_eq!(concatenated, text, "the chunks add up to the whole text");
    let final_chunk = chunks.last().unwrap();
    assert_eq!(final_chunk["choices"][0]["finish_reason"], finish);
    assert_eq!(final_chunk["usage"], whole["usage"]);

    let metrics = server.metrics();
    for line in [
        "lector_http_requests_total{route=\"/v1/chat/completions\",method=\"POST\",status=\"200\"} 2"
            .to_string(),
        format!("lector_generations_total{{finish_reason=\"{finish}\"}} 2"),
        format!("lector_generated_tokens_total {}", 2 * generated),
    ] {
        assert!(metrics.lines().any(|l| l == line), "no `{line}` in\n{metrics}");
    }
}

/// The passage a citation or hit names is that document's text, sliced.
fn assert_real_passage(server: &Server, doc_id: &str, text: &str) {
    let reply = call(
        "GET",
        &server.url(&format!("/v1/documents/{}", doc_id.replace('#', "%23"))),
        None,
        None,
    );
    assert_eq!(reply.status, 200, "{doc_id}: {}", reply.body);
    let doc: Value = serde_json::from_str(&reply.body).unwrap();
    assert!(
        doc["text"].as_str().unwrap().contains(text),
        "{doc_id} does not hold `{text}`"
    );
}

#[test]
fn a_generative_ask_answers_from_real_documents_whole_and_streamed() {
    let server = Server::with_smollm2();
    let ask = json!({"question": "Where does the zebra named Quagga live?", "mode": "generative", "k": 2, "max_tokens": 16});
    let out = server.post_ok("/v1/ask", &ask);
    assert_eq!(out["mode"], "generative");
    assert_eq!(out["generator"], smollm2().name());
    let answer = &out["answer"];
    let text = answer["text"].as_str().unwrap();
    assert!(text.contains("Lisbon"), "{out:#}");
    assert_eq!(answer["refused"], false);
    assert!(answer["unsupported"].is_array() && answer["flagged"].is_array());
    // The passages shown are real documents, the strongest first.
    let passages = out["passages"].as_array().unwrap();
    assert_eq!(passages.len(), 2);
    assert_eq!(passages[0]["doc_id"], "zebra");
    for hit in passages {
        assert_real_passage(
            &server,
            hit["doc_id"].as_str().unwrap(),
            hit["text"].as_str().unwrap(),
        );
    }
    assert_eq!(out["prompt"]["included"][0]["doc_id"], "zebra");
    assert_eq!(out["prompt"]["cut"], json!([]));
    // SmolLM2-135M seldom cites; whatever it cites is a passage of a real document.
    for c in answer["citations"].as_array().unwrap() {
        assert_real_passage(
            &server,
            c["doc_id"].as_str().unwrap(),
            c["text"].as_str().unwrap(),
        );
    }
    let t = &out["timings"];
    assert!(t["retrieve_ms"].as_f64().unwrap() >= 0.0);
    assert!(t["prompt_tokens"].as_u64().unwrap() > 50);
    let generated = t["generated_tokens"].as_u64().unwrap();
    assert!((1..=16).contains(&generated), "{t}");

    // Streamed: token events adding up to the same text, the same answer, then done.
    let mut streamed = ask.clone();
    streamed["stream"] = json!(true);
    let reply = server.post("/v1/ask", &streamed);
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert!(reply.headers.contains("text/event-stream"));
    let events = events(&reply.body);
    let names: Vec<&str> = events.iter().map(|(n, _)| n.as_str()).collect();
    let tokens = names.iter().take_while(|n| **n == "token").count();
    assert!(tokens > 1, "{names:?}");
    assert_eq!(&names[tokens..], ["answer", "done"]);
    let pieces: String = events[..tokens]
        .iter()
        .map(|(_, data)| {
            let piece: Value = serde_json::from_str(data).unwrap();
            piece["text"].as_str().unwrap().to_string()
        })
        .collect();
    assert_eq!(pieces, text);
    let final_answer: Value = serde_json::from_str(&events[tokens].1).unwrap();
    assert_eq!(final_answer["answer"], out["answer"]);
    // The same passages (their BM25 scores may differ in the last bit from run to run).
    let ids = |v: &Value| -> Vec<Value> {
        v["passages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| h["doc_id"].clone())
            .collect()
    };
    assert_eq!(ids(&final_answer), ids(&out));
    assert_eq!(events[tokens + 1].1, "[DONE]");
}

/// A generator that says what it is told, piece by piece: SmolLM2-135M does not cite passages
/// (see the README), so the citation mapping is checked with a scripted answer.
struct Scripted(&'static [&'static str]);

impl Generator for Scripted {
    fn name(&self) -> String {
        "scripted".into()
    }

    fn context_window(&self) -> usize {
        4096
    }

    fn count_tokens(&self, messages: &[Message]) -> lector_generate::Result<usize> {
        Ok(messages.iter().map(|m| m.content.len() / 4 + 4).sum())
    }

    fn generate(
        &self,
        messages: &[Message],
        _options: &GenerateOptions,
        on_token: &mut lector_generate::OnToken<'_>,
    ) -> lector_generate::Result<Generation> {
        let mut finish_reason = FinishReason::EndOfText;
        for piece in self.0 {
            if on_token(piece).is_break() {
                finish_reason = FinishReason::Cancelled;
                break;
            }
        }
        Ok(Generation {
            text: self.0.concat(),
            finish_reason,
            timings: Timings {
                prompt_tokens: self.count_tokens(messages)?,
                generated_tokens: self.0.len(),
                ..Timings::default()
            },
        })
    }
}

#[test]
fn citations_map_to_the_retrieved_documents() {
    let scripted = Scripted(&[
        "It lives in Lisbon ",
        "[1]. ",
        "Ruth lives in Antwerp [2]. ",
        "The moon is cheese [1]. See [7].",
    ]);
    let server = Server::start(Some(Arc::new(scripted)), limits(), None);
    let out = server.post_ok(
        "/v1/ask",
        &json!({"question": "Where do Quagga the zebra and Ruth the okapi live?", "mode": "generative", "k": 3}),
    );
    let passages = out["passages"].as_array().unwrap();
    let mut top: Vec<&str> = passages[..2]
        .iter()
        .map(|h| h["doc_id"].as_str().unwrap())
        .collect();
    top.sort_unstable();
    assert_eq!(top, ["okapi", "zebra"]);
    let answer = &out["answer"];
    let citations = answer["citations"].as_array().unwrap();
    let numbers: Vec<u64> = citations
        .iter()
        .map(|c| c["number"].as_u64().unwrap())
        .collect();
    assert_eq!(numbers, [1, 2], "{answer:#}");
    for c in citations {
        let hit = &passages[c["number"].as_u64().unwrap() as usize - 1];
        assert_eq!(c["doc_id"], hit["doc_id"]);
        assert_eq!(c["title"], hit["title"]);
        assert_eq!(c["passage"], hit["passage"]);
        assert_eq!(c["text"], hit["text"]);
        assert_real_passage(
            &server,
            c["doc_id"].as_str().unwrap(),
            c["text"].as_str().unwrap(),
        );
    }
    assert_eq!(answer["invalid_citations"], json!([7]));
    let unsupported = answer["unsupported"].as_array().unwrap();
    for sentence in ["The moon is cheese [1].", "See [7]."] {
        assert!(unsupported.contains(&json!(sentence)), "{answer:#}");
    }
    assert_eq!(out["generator"], "scripted");
}

#[test]
fn bad_input_is_400_with_the_reason() {
    let server = Server::with_smollm2();
    let user = |content: &str| json!([{"role": "user", "content": content}]);
    let long = "word ".repeat(9000);
    let chat: Vec<(Value, &str)> = vec![
        (json!({}), "`messages` is empty"),
        (json!({"messages": []}), "`messages` is empty"),
        (
            json!({"messages": user("  ")}),
            "messages[0]: `content` is empty",
        ),
        (
            json!({"messages": [{"role": "user", "content": "hi"}, {"role": "tool", "content": "x"}]}),
            "messages[1]: unknown role `tool`",
        ),
        (
            json!({"messages": [{"role": "user", "content": 3}]}),
            "must be a string",
        ),
        (
            json!({"messages": user(&long)}),
            "longer than the context window of 8192 tokens",
        ),
        (
            json!({"messages": user(&long), "stream": true}),
            "longer than the context window",
        ),
        (
            json!({"messages": user("hi"), "max_tokens": 9000}),
            "exceeds the context window of 8192 tokens",
        ),
        (
            json!({"messages": user("hi"), "max_tokens": 0}),
            "`max_tokens` must be at least 1",
        ),
        // Past the bound, up to the largest number JSON gives a u64: refused, never added.
        (
            json!({"messages": user("hi"), "max_tokens": u64::MAX}),
            "`max_tokens` 18446744073709551615 is more than the limit of 1048576",
        ),
        (
            json!({"messages": user("hi"), "max_tokens": 1048577, "stream": true}),
            "`max_tokens` 1048577 is more than the limit",
        ),
        (
            json!({"messages": user("hi"), "temperature": -1.0}),
            "temperature -1 must be positive",
        ),
        (json!({"messages": user("hi"), "n": 2}), "only `n` = 1"),
        (
            json!({"messages": user("hi"), "stop": ""}),
            "a stop sequence is empty",
        ),
        (json!("not an object"), "invalid JSON body"),
    ];
    for (body, expected) in chat {
        let reply = server.post("/v1/chat/completions", &body);
        assert_eq!(reply.status, 400, "{body}: {}", reply.body);
        let error: Value = serde_json::from_str(&reply.body).expect("a JSON error");
        let message = error["error"]["message"].as_str().unwrap();
        assert!(message.contains(expected), "`{message}` lacks `{expected}`");
        assert_eq!(error["error"]["type"], "invalid_request_error");
    }
    let reply = call("GET", &server.url("/v1/chat/completions"), None, None);
    assert_eq!(reply.status, 405);
    let error: Value = serde_json::from_str(&reply.body).unwrap();
    assert!(error["error"]["message"].as_str().unwrap().contains("GET"));

    let q = "Where does Ruth live?";
    let ask: Vec<(Value, &str)> = vec![
        (
            json!({"question": q, "stream": true}),
            "`stream` needs \"mode\": \"generative\"",
        ),
        (
            json!({"question": q, "max_tokens": 5}),
            "`max_tokens` needs \"mode\": \"generative\"",
        ),
        (
            json!({"question": q, "mode": "bm25", "retrieval": "dense"}),
            "both name the retrieval",
        ),
        (
            json!({"question": q, "mode": "generative", "retrieval": "magic"}),
            "unknown mode `magic`",
        ),
        (
            json!({"question": q, "mode": "generative", "k": 0}),
            "k must be between 1",
        ),
        (
            json!({"question": q, "mode": "generative", "max_tokens": 0}),
            "`max_tokens` must be at least 1",
        ),
        (
            json!({"question": q, "mode": "generative", "max_tokens": 9000, "stream": true}),
            "exceeds the context window",
        ),
        (
            json!({"question": q, "mode": "generative", "max_tokens": u64::MAX}),
            "`max_tokens` 18446744073709551615 is more than the limit of 1048576",
        ),
        (
            json!({"question": q, "mode": "generative", "temprature": 0}),
            "unknown field `temprature`",
        ),
    ];
    for (body, expected) in ask {
        let reply = server.post("/v1/ask", &body);
        assert_eq!(reply.status, 400, "{body}: {}", reply.body);
        let error: Value = serde_json::from_str(&reply.body).expect("a JSON error");
        let message = error["error"].as_str().unwrap();
        assert!(message.contains(expected), "`{message}` lacks `{expected}`");
    }
    assert_eq!(
        server.metric("lector_generated_tokens_total "),
        Some(0.0),
        "nothing was generated"
    );
}

#[test]
fn without_a_generator_generation_is_501() {
    let server = Server::start(None, limits(), None);
    let reply = server.post(
        "/v1/chat/completions",
        &json!({"messages": [{"role": "user", "content": "hi"}]}),
    );
    assert_eq!(reply.status, 501, "{}", reply.body);
    let error: Value = serde_json::from_str(&reply.body).unwrap();
    assert_eq!(error["error"]["type"], "not_supported_error");
    let message = error["error"]["message"].as_str().unwrap();
    assert!(message.contains("lector serve --generate"), "{message}");
    for stream in [false, true] {
        let reply = server.post(
            "/v1/ask",
            &json!({"question": "Who won?", "mode": "generative", "stream": stream}),
        );
        assert_eq!(reply.status, 501, "{}", reply.body);
        let error: Value = serde_json::from_str(&reply.body).unwrap();
        assert!(error["error"]
            .as_str()
            .unwrap()
            .contains("started without a generator"));
    }
    // lector's client does not retry a 501 (its default is 3 retries of 5xx).
    let mut config = OpenAiConfig::new(&server.url("/v1"), "smollm2");
    config.api_key = Some(String::new());
    let err = OpenAiGenerator::new(config)
        .unwrap()
        .generate(&france(), &greedy(4), &mut |_| ControlFlow::Continue(()))
        .unwrap_err()
        .to_string();
    assert!(err.contains("status 501: "), "{err}");
    assert!(!err.contains("retries"), "{err}");
    // Extractive asks are unaffected, but sub-questions written by a language model need one.
    let out = server.post_ok(
        "/v1/ask",
        &json!({"question": "Where does the okapi Ruth live?", "k": 2, "probabilities": false}),
    );
    assert_eq!(out["answer"]["text"], "Antwerp");
    let reply = server.post(
        "/v1/ask",
        &json!({"question": BRIDGE_QUESTION, "hops": 2, "decompose": "llm"}),
    );
    assert_eq!(reply.status, 501, "{}", reply.body);
    for decompose in ["rules", "none"] {
        let ask = json!({"question": BRIDGE_QUESTION, "hops": 2, "decompose": decompose, "probabilities": false});
        assert!(server.post_ok("/v1/ask", &ask)["hops"].is_object());
    }
    let reply = server.post(
        "/v1/ask",
        &json!({"question": BRIDGE_QUESTION, "hops": 2, "decompose": "magic"}),
    );
    assert_eq!(reply.status, 400, "{}", reply.body);
}

/// A bridge question over the sample (the zebra's keeper, then where they live).
const BRIDGE_QUESTION: &str = "Where does the keeper of the zebra named Quagga live?";

#[test]
fn a_client_that_goes_away_stops_the_generation() {
    let server = Server::with_smollm2();
    let body = json!({
        "messages": [{"role": "user", "content": "Write a long story about a dragon."}],
        "max_tokens": 400,
        "stream": true,
    })
    .to_string();
    let url = server.url("/v1/chat/completions");
    let (addr, path) = split_url(&url);
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(600)))
        .unwrap();
    stream
        .write_all(request("POST", addr, path, &body, None).as_bytes())
        .unwrap();
    let mut seen = Vec::new();
    let mut buffer = [0u8; 4096];
    while !String::from_utf8_lossy(&seen).contains("\"content\":\"") {
        let n = stream.read(&mut buffer).unwrap();
        assert!(n > 0, "the stream ended early");
        seen.extend_from_slice(&buffer[..n]);
    }
    drop(stream);
    server.wait_idle(Duration::from_secs(300));
    assert_eq!(
        server.metric("lector_generations_total{finish_reason=\"cancelled\"} "),
        Some(1.0),
        "{}",
        server.metrics()
    );
    let generated = server.metric("lector_generated_tokens_total ").unwrap();
    assert!(generated < 400.0, "{generated} tokens");

    // Not streamed: leaving while the model reads the prompt stops it too.
    let mut whole: Value = serde_json::from_str(&body).unwrap();
    whole["stream"] = json!(false);
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .write_all(request("POST", addr, path, &whole.to_string(), None).as_bytes())
        .unwrap();
    while server.metric("lector_requests_running ") != Some(1.0) {
        std::thread::sleep(Duration::from_millis(10));
    }
    std::thread::sleep(Duration::from_millis(300)); // past the check before the work starts
    drop(stream);
    server.wait_idle(Duration::from_secs(300));
    assert_eq!(
        server.metric("lector_generations_total{finish_reason=\"cancelled\"} "),
        Some(2.0),
        "{}",
        server.metrics()
    );
    let more = server.metric("lector_generated_tokens_total ").unwrap() - generated;
    assert!(more < 400.0, "{more} tokens");
}

#[test]
fn a_generation_past_the_timeout_is_504_and_stops() {
    let limits = Limits {
        timeout: Duration::from_millis(1),
        ..Limits::default()
    };
    let server = Server::start(Some(smollm2()), limits, None);
    let reply = server.post(
        "/v1/chat/completions",
        &json!({
            "messages": [{"role": "user", "content": "Write a long story about a dragon."}],
            "max_tokens": 2000,
            "stream": true,
        }),
    );
    assert_eq!(reply.status, 504, "{}", reply.body);
    let error: Value = serde_json::from_str(&reply.body).unwrap();
    assert!(error["error"]["message"]
        .as_str()
        .unwrap()
        .contains("longer than the limit"));
    // The work notices at its first token that nobody waits for it (or before it starts).
    server.wait_idle(Duration::from_secs(300));
    assert!(server.metric("lector_generated_tokens_total ").unwrap() <= 1.0);
    let metrics = server.metrics();
    assert!(
        !metrics.contains("finish_reason=\"length\"")
            && !metrics.contains("finish_reason=\"stop\""),
        "{metrics}"
    );
}

#[test]
fn named_prompts_steer_the_answer_and_client_prompt_text_needs_the_operator() {
    let folder = tempfile::tempdir().unwrap();
    std::fs::write(
        folder.path().join("zoo.toml"),
        "name = \"zoo\"\ndescription = \"Zoo answers\"\n[open_book]\nsystem = \"Answer with the city only.\"\n\
         user = \"\"\"<zoo>\n{{ passages }}</zoo>\nQ: {{ question }}\"\"\"\n",
    )
    .unwrap();
    let library = lector_generate::prompt::PromptLibrary::with_folder(folder.path()).unwrap();
    let server = Server::start_with(Some(smollm2()), limits(), None, |c| c.prompts = library);
    let listed = call("GET", &server.url("/v1/prompts"), None, None);
    assert_eq!(listed.status, 200, "{}", listed.body);
    let listed: Value = serde_json::from_str(&listed.body).unwrap();
    let names: Vec<&str> = listed["prompts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["chain-of-thought", "default", "zoo"]);
    assert_eq!(listed["client_prompts"], false);

    let question = "Where does the zebra named Quagga live?";
    let ask = |extra: Value| {
        let mut body =
            json!({"question": question, "mode": "generative", "k": 1, "max_tokens": 24});
        body.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        body
    };
    let zoo = server.post_ok("/v1/ask", &ask(json!({"prompt": "zoo"})));
    assert_eq!(zoo["prompt_name"], "zoo");
    let plain = server.post_ok("/v1/ask", &ask(json!({})));
    assert_eq!(plain["prompt_name"], "default");
    // The named prompt is what the model saw: its own, shorter, system message.
    let tokens = |out: &Value| out["timings"]["prompt_tokens"].as_u64().unwrap();
    assert!(
        tokens(&zoo) + 40 < tokens(&plain),
        "{} vs {}",
        tokens(&zoo),
        tokens(&plain)
    );

    // Chain of thought, streamed: the tokens are the answer only; the reasoning comes apart.
    let mut cot = ask(json!({"prompt": "chain-of-thought", "stream": true}));
    cot.as_object_mut().unwrap().remove("max_tokens");
    let reply = server.post("/v1/ask", &cot);
    assert_eq!(reply.status, 200, "{}", reply.body);
    let events = events(&reply.body);
    let streamed: String = events
        .iter()
        .filter(|(name, _)| name == "token")
        .map(|(_, data)| {
            serde_json::from_str::<Value>(data).unwrap()["text"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    let answer: Value =
        serde_json::from_str(&events.iter().find(|(n, _)| n == "answer").unwrap().1).unwrap();
    assert_eq!(answer["prompt_name"], "chain-of-thought");
    assert!(answer["reasoning"].is_string(), "{answer:#}");
    assert_eq!(streamed.trim(), answer["text"].as_str().unwrap().trim());
    assert!(!streamed.contains(answer["reasoning"].as_str().unwrap()) || answer["reasoning"] == "");

    // Unknown names are 400 with the names there are; prompt text is 403 unless allowed.
    let unknown = server.post("/v1/ask", &ask(json!({"prompt": "nope"})));
    assert_eq!(unknown.status, 400);
    assert!(
        unknown.body.contains("chain-of-thought, default, zoo"),
        "{}",
        unknown.body
    );
    let text = "[open_book]\nsystem = \"Be brief.\"\nuser = \"{{ passages }}{{ question }}\"\n";
    let refused = server.post("/v1/ask", &ask(json!({"prompt_toml": text})));
    assert_eq!(refused.status, 403, "{}", refused.body);
    assert!(
        refused.body.contains("--allow-client-prompts"),
        "{}",
        refused.body
    );
    let extractive = server.post("/v1/ask", &json!({"question": question, "prompt": "zoo"}));
    assert_eq!(extractive.status, 400, "{}", extractive.body);

    let open = Server::start_with(Some(smollm2()), limits(), None, |c| c.client_prompts = true);
    let taken = open.post_ok("/v1/ask", &ask(json!({"prompt_toml": text})));
    assert_eq!(taken["prompt_name"], "");
    let bad = open.post(
        "/v1/ask",
        &ask(json!({"prompt_toml": "[open_book]\nsystem = \"s\"\nuser = \"{{ secrets }}\"\n"})),
    );
    assert_eq!(bad.status, 400);
    assert!(
        bad.body.contains("unknown variable `secrets`"),
        "{}",
        bad.body
    );
    let spin = "[open_book]\nsystem = \"s\"\nuser = \"{% for i in range(10000) %}{% for j in range(10000) %}x{% endfor %}{% endfor %}{{ passages }}{{ question }}\"\n";
    let spun = open.post("/v1/ask", &ask(json!({"prompt_toml": spin})));
    assert_eq!(
        spun.status, 400,
        "a looping template runs out of fuel: {}",
        spun.body
    );
}
