//! `POST /v1/chat/completions`: OpenAI's chat-completions API over the server's generator, so
//! that OpenAI clients (lector's own `OpenAiGenerator` among them) can use the local model.
//!
//! Request: `messages` (`[{role, content}]`, roles `system`, `developer` (as system), `user`,
//! `assistant`; content a string or a list of text parts), `max_tokens` (or
//! `max_completion_tokens`) [default: [`DEFAULT_MAX_TOKENS`], less when the context window has
//! less room], `temperature` (absent or 0: greedy), `top_p`, `seed`, `stop` (a string or a
//! list), `stream`, `n` (1 only). `model` is accepted and ignored (there is one model; the
//! response names it), as are the fields of OpenAI's API that have no meaning here.
//!
//! Response: `{id, object: "chat.completion", created, model, choices: [{index, message: {role:
//! "assistant", content}, finish_reason: "stop" | "length"}], usage: {prompt_tokens,
//! completion_tokens, total_tokens}}`. With `stream: true`, server-sent events of
//! `chat.completion.chunk` objects: the first `delta` carries the role, then one per piece of
//! text, the last an empty `delta` with the `finish_reason` and the `usage`; then `data: [DONE]`.
//! Errors, before or during the stream, have OpenAI's shape `{"error": {"message", "type"}}`.

use crate::api::parse_json;
use crate::error::ApiError;
use crate::generative::{self, finish_name};
use crate::state::AppState;
use crate::stream::{self, Progress, Reporter};
use axum::extract::{Request, State};
use axum::response::sse::Event;
use axum::response::{IntoResponse, Response};
use axum::Json;
use lector_generate::{Error as GenerateError, GenerateOptions, Generator, Message};
use serde::Deserialize;
use serde_json::{json, Value};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

/// Tokens a completion may take unless the request says (`max_tokens`).
pub const DEFAULT_MAX_TOKENS: usize = 256;

/// The body of `POST /v1/chat/completions` (fields not listed are ignored).
#[derive(Debug, Clone, Deserialize)]
pub struct ChatRequest {
    /// Ignored: the server has one model.
    pub model: Option<String>,
    #[serde(default)]
    pub messages: Vec<ChatMessage>,
    #[serde(alias = "max_completion_tokens")]
    pub max_tokens: Option<usize>,
    pub temperature: Option<f64>,
    pub top_p: Option<f64>,
    pub seed: Option<u64>,
    pub stop: Option<Stop>,
    pub stream: Option<bool>,
    pub n: Option<usize>,
}

/// One message of the conversation.
#[derive(Debug, Clone, Deserialize)]
pub struct ChatMessage {
    pub role: String,
    /// A string, or a list of `{"type": "text", "text": ...}` parts.
    #[serde(default)]
    pub content: Value,
}

/// `stop`: one string or several.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum Stop {
    One(String),
    Many(Vec<String>),
}

/// What every chunk of one completion repeats.
#[derive(Debug, Clone)]
struct Meta {
    id: String,
    created: u64,
    model: String,
}

/// `POST /v1/chat/completions`; every error in OpenAI's shape.
pub async fn completions(State(state): State<Arc<AppState>>, request: Request) -> Response {
    match complete(state, request).await {
        Ok(response) => response,
        Err(err) => err.into_openai_response(),
    }
}

async fn complete(state: Arc<AppState>, request: Request) -> Result<Response, ApiError> {
    let generator = state.generator()?;
    let limit = state.gate.limits().max_ask_bytes;
    let (admission, body) = state.gate.admit_and_read(request, limit).await?;
    let request: ChatRequest = parse_json(&body)?;
    drop(body);
    let messages = messages(&request)?;
    if request.n.is_some_and(|n| n != 1) {
        return Err(ApiError::bad_request("only `n` = 1 is supported"));
    }
    let stop = match request.stop.clone() {
        None => Vec::new(),
        Some(Stop::One(one)) => vec![one],
        Some(Stop::Many(list)) => list,
    };
    let options = generative::options(
        request.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS),
        request.temperature,
        request.top_p,
        request.seed,
        stop,
    )?;
    let meta = Meta {
        id: completion_id(),
        created: unix_seconds(),
        model: generator.name(),
    };
    let max_tokens = request.max_tokens;
    let (shared, work_meta) = (state.clone(), meta.clone());
    let running = stream::start(&state, admission, move |reporter| {
        let generation = Generation {
            generator: generator.as_ref(),
            messages: &messages,
            max_tokens,
            options,
        };
        generation.run(&shared, &work_meta, reporter)
    })
    .await?;
    if !request.stream.unwrap_or(false) {
        return Ok(Json(running.finish().await?).into_response());
    }
    Ok(running.events(chunks(meta)).into_response())
}

/// Renders a streamed completion: the role with the first piece, a chunk per piece, the last
/// chunk with the finish reason and usage, `[DONE]`; or the error.
fn chunks(meta: Meta) -> impl FnMut(stream::Message) -> Vec<Event> + Send + 'static {
    let mut first = true;
    move |message| {
        let mut events = Vec::new();
        if first && message.is_ok() {
            first = false;
            let role = json!({"role": "assistant", "content": ""});
            events.push(chunk(&meta, role, Value::Null));
        }
        match message {
            Ok(Progress::Started) => {}
            Ok(Progress::Token(text)) => {
                events.push(chunk(&meta, json!({ "content": text }), Value::Null))
            }
            Ok(Progress::Done(completion)) => {
                let finish = completion["choices"][0]["finish_reason"].clone();
                let mut last = chunk_value(&meta, json!({}), finish);
                last["usage"] = completion["usage"].clone();
                events.push(Event::default().data(last.to_string()));
                events.push(Event::default().data("[DONE]"));
            }
            Err(err) => events.push(Event::default().data(err.openai_body().to_string())),
        }
        events
    }
}

/// The messages of the request, checked: 400 for none, an unknown role or empty content.
fn messages(request: &ChatRequest) -> Result<Vec<Message>, ApiError> {
    if request.messages.is_empty() {
        return Err(ApiError::bad_request(
            "`messages` is empty: a chat completion needs at least one message",
        ));
    }
    let bad = |i: usize, what: String| Err(ApiError::bad_request(format!("messages[{i}]: {what}")));
    let mut out = Vec::with_capacity(request.messages.len());
    for (i, m) in request.messages.iter().enumerate() {
        let role = match m.role.as_str() {
            "system" | "developer" => "system",
            "user" => "user",
            "assistant" => "assistant",
            other => {
                return bad(
                    i,
                    format!("unknown role `{other}` (system, developer, user or assistant)"),
                )
            }
        };
        let Some(content) = text(&m.content) else {
            return bad(
                i,
                "`content` must be a string or a list of text parts".into(),
            );
        };
        if content.trim().is_empty() {
            return bad(i, "`content` is empty".into());
        }
        out.push(Message {
            role: role.into(),
            content,
        });
    }
    Ok(out)
}

/// The text of a message's content: a string, or text parts joined by newlines.
fn text(content: &Value) -> Option<String> {
    match content {
        Value::String(s) => Some(s.clone()),
        Value::Array(parts) => parts
            .iter()
            .map(|p| match (p["type"].as_str(), p["text"].as_str()) {
                (Some("text"), Some(text)) => Some(text.to_string()),
                _ => None,
            })
            .collect::<Option<Vec<_>>>()
            .map(|texts| texts.join("\n")),
        _ => None,
    }
}

/// One completion, run on the blocking pool.
struct Generation<'a> {
    generator: &'a dyn Generator,
    messages: &'a [Message],
    /// As requested (`None`: the default, within the context window).
    max_tokens: Option<usize>,
    options: GenerateOptions,
}

impl Generation<'_> {
    /// Checks the prompt against the context window, generates (reporting each piece) and
    /// returns the completion object.
    fn run(
        mut self,
        state: &AppState,
        meta: &Meta,
        reporter: &Reporter,
    ) -> Result<Value, ApiError> {
        let prompt = self.generator.count_tokens(self.messages)?;
        self.options.max_new_tokens = self.room(prompt)?;
        let generation = self
            .generator
            .generate(self.messages, &self.options, &mut |piece| {
                reporter.token(piece)
            })?;
        let finish = finish_name(&generation.finish_reason);
        let completion = generation.timings.generated_tokens;
        state.metrics.record_generation(finish, completion);
        Ok(json!({
            "id": meta.id,
            "object": "chat.completion",
            "created": meta.created,
            "model": meta.model,
            "choices": [{
                "index": 0,
                "message": {"role": "assistant", "content": generation.text},
                "logprobs": null,
                "finish_reason": finish,
            }],
            "usage": {
                "prompt_tokens": generation.timings.prompt_tokens,
                "completion_tokens": completion,
                "total_tokens": generation.timings.prompt_tokens + completion,
            },
        }))
    }

    /// The tokens to generate after a prompt of `prompt` tokens: 400 when the prompt leaves no
    /// room, or less than an explicit `max_tokens`.
    fn room(&self, prompt: usize) -> Result<usize, ApiError> {
        let window = self.generator.context_window();
        if prompt >= window {
            return Err(ApiError::bad_request(format!(
                "the prompt is {prompt} tokens, longer than the context window of {window} tokens"
            )));
        }
        match self.max_tokens {
            None => Ok(DEFAULT_MAX_TOKENS.min(window - prompt)),
            Some(max_new) if prompt.saturating_add(max_new) > window => {
                Err(GenerateError::ContextOverflow {
                    prompt,
                    max_new,
                    window,
                }
                .into())
            }
            Some(max_new) => Ok(max_new),
        }
    }
}

fn chunk_value(meta: &Meta, delta: Value, finish: Value) -> Value {
    json!({
        "id": meta.id,
        "object": "chat.completion.chunk",
        "created": meta.created,
        "model": meta.model,
        "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}],
    })
}

fn chunk(meta: &Meta, delta: Value, finish: Value) -> Event {
    Event::default().data(chunk_value(meta, delta, finish).to_string())
}

/// `chatcmpl-` and a number unique within this server's run.
fn completion_id() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    format!("chatcmpl-{:x}-{n}", unix_seconds())
}

fn unix_seconds() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}
