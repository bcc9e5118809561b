//! HTTP request bodies as the server parses them: any JSON value, `POST /v1/ask`, `POST
//! /v1/documents` (one object or an array, told apart by the first non-blank byte as the route
//! does) and `POST /v1/chat/completions` with its generation settings checked.
#![no_main]
use lector_server::api::{parse_json, AskRequest, DocumentIn};
use lector_server::chat::{ChatRequest, Stop, DEFAULT_MAX_TOKENS};
use lector_server::generative;

libfuzzer_sys::fuzz_target!(|body: &[u8]| {
    let _ = serde_json::from_slice::<serde_json::Value>(body);
    let _ = parse_json::<AskRequest>(body);
    let _ = match body.iter().find(|b| !b.is_ascii_whitespace()) {
        Some(b'[') => parse_json::<Vec<DocumentIn>>(body),
        _ => parse_json::<DocumentIn>(body).map(|d| vec![d]),
    };
    if let Ok(chat) = parse_json::<ChatRequest>(body) {
        check_generation_settings(chat);
    }
});

/// The chat route's settings: accepted or a 400, never a panic.
fn check_generation_settings(chat: ChatRequest) {
    let stop = match chat.stop {
        None => Vec::new(),
        Some(Stop::One(one)) => vec![one],
        Some(Stop::Many(list)) => list,
    };
    let _ = generative::options(
        chat.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS),
        chat.temperature,
        chat.top_p,
        chat.seed,
        stop,
    );
}
