//! `client::AskClient` against a real server on a loopback port: the shipped reader over the
//! bundled sample (ten paragraphs about Super Bowl 50), guarded by an API key.

mod common;

use common::workspace;
use lector_index::{Mode, SearchOptions};
use lector_pipeline::Pipeline;
use lector_reader::Reader;
use lector_server::client::{AskClient, ClientError};
use lector_server::{ApiKey, AppState, Config, Limits};
use serde_json::json;
use std::sync::Arc;

const KEY: &str = "canary-key-for-tests";

/// A server with the API key [`KEY`]; stops when the returned sender is dropped.
fn start_server(dir: &std::path::Path) -> (String, tokio::sync::oneshot::Sender<()>) {
    let writer = common::sample_writer(dir);
    let index = writer.committed().clone();
    let reader = Reader::load(&workspace().join("models/reader-minilm-squad")).unwrap();
    let mut config = Config::new(
        SearchOptions::for_index(&index, Mode::Bm25),
        Limits::default(),
    );
    config.api_key = Some(ApiKey::new(KEY).unwrap());
    let state = AppState::new(Pipeline::new(index, reader), Some(writer), None, config).unwrap();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let listener = runtime
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    std::thread::spawn(move || {
        let shutdown = async {
            let _ = stopped.await;
        };
        runtime
            .block_on(lector_server::serve(listener, Arc::new(state), shutdown))
            .unwrap();
    });
    (base, stop)
}

#[test]
fn the_client_reads_answers_abstentions_and_refusals_of_a_real_server() {
    let dir = tempfile::tempdir().unwrap();
    let (base, _stop) = start_server(dir.path());

    let client = AskClient::new(&format!("{base}/"), Some(KEY.into()));
    assert_eq!(client.endpoint(), format!("{base}/v1/ask"));
    let asked = client
        .ask(&json!({"question": "Which team won Super Bowl 50?", "k": 5}))
        .unwrap();
    let answer = asked.answer.expect("an answer");
    assert!(answer.contains("Broncos"), "{answer}");
    assert_eq!(asked.reply["answer"]["text"], answer.as_str());

    // Nothing in the sample matches: the server abstains, `answer: null`.
    let asked = client
        .ask(&json!({"question": "xylophone quokka zeppelin?"}))
        .unwrap();
    assert_eq!(asked.answer, None, "{}", asked.reply);
    assert_eq!(asked.reply["abstention"], "no_passages");

    // Without the key: the server's 401, with its reason and the endpoint.
    let keyless = AskClient::new(&base, None);
    match keyless.ask(&json!({"question": "Who won?"})) {
        Err(ClientError::Status {
            endpoint,
            status,
            detail,
        }) => {
            assert_eq!((endpoint.as_str(), status), (client.endpoint(), 401));
            assert!(detail.contains("error"), "{detail}");
        }
        other => panic!("expected a 401, got {other:?}"),
    }
    // A bad body: the server's 400.
    let bad = client.ask(&json!({"question": "Who won?", "k": 0}));
    assert!(
        matches!(bad, Err(ClientError::Status { status: 400, .. })),
        "{bad:?}"
    );
}

#[test]
fn a_server_that_is_not_there_is_a_transport_error_naming_the_endpoint() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let client = AskClient::new(&format!("http://127.0.0.1:{port}"), None);
    let error = client.ask(&json!({"question": "Who won?"})).unwrap_err();
    assert!(matches!(error, ClientError::Transport { .. }), "{error:?}");
    assert!(
        error
            .to_string()
            .contains(&format!("127.0.0.1:{port}/v1/ask")),
        "{error}"
    );
}
