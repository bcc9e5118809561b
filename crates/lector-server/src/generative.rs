//! `POST /v1/ask` with `"mode": "generative"`: retrieve the top `k` passages, prompt the
//! generator with them (numbered `[1]`..`[k]`, fitted to its context window, see
//! [`lector_generate::grounded`]), generate, and check the answer: its citations mapped to the
//! documents, sentences the passages do not support flagged, a refusal recognised. One JSON
//! answer, or with `"stream": true` server-sent events: `token` events with each piece of text,
//! then an `answer` event with the same JSON, then `done`.

use crate::api::with_request_id;
use crate::error::ApiError;
use crate::limit::Admission;
use crate::metrics::AnswerSignals;
use crate::state::{AppState, Config};
use crate::stream::{self, json_event, Progress, Reporter};
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::sse::Event;
use axum::response::{IntoResponse, Response};
use axum::Json;
use lector_generate::grounded::Layout;
use lector_generate::prompt::Prompt;
use lector_generate::{Decoding, FinishReason, GenerateOptions, Generator, MAX_NEW_TOKENS};
use lector_index::SearchOptions;
use lector_pipeline::AskOptions;
use lector_querylog::{AskRecord, AskSettings, Entry, LoggedAnswer, LoggedPassage, LoggedTimings};
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// Tokens a generative answer may take unless the request says (`max_tokens`): a short answer
/// with its citations fits.
pub const DEFAULT_MAX_TOKENS: usize = lector_generate::prompt::DEFAULT_MAX_NEW_TOKENS;

/// A generative ask, checked.
#[derive(Debug, Clone)]
pub struct GenerativeAsk {
    pub question: String,
    /// The prompt asked with (named from the server's library, or a client's where allowed).
    pub prompt: Arc<Prompt>,
    /// Passages to retrieve.
    pub k: usize,
    pub search: SearchOptions,
    pub options: GenerateOptions,
    /// Answer with server-sent events.
    pub stream: bool,
    /// The asking key's tenant, logged with the ask.
    pub tenant: Option<String>,
}

/// Answers `ask` as JSON, or as server-sent events; 501 without a generator.
pub async fn ask(
    state: Arc<AppState>,
    admission: Admission,
    ask: GenerativeAsk,
    started: Instant,
) -> Result<Response, ApiError> {
    let generator = state.generator()?;
    let stream = ask.stream;
    let shared = state.clone();
    let id = lector_querylog::request_id();
    let response_id = id.clone();
    let running = stream::start(&state, admission, move |reporter| {
        let (mut out, passages) = answer(&shared, generator.as_ref(), &ask, reporter)?;
        record(&shared, &ask, &out, passages, &id, started);
        out["request_id"] = id.into();
        Ok(out)
    })
    .await?;
    let response = match stream {
        false => Json(running.finish().await?).into_response(),
        true => running.events(render).into_response(),
    };
    Ok(with_request_id(response, &response_id))
}

/// Counts the generated answer's quality signals and logs the ask (when the server logs).
fn record(
    state: &AppState,
    ask: &GenerativeAsk,
    out: &Value,
    passages: Vec<LoggedPassage>,
    request_id: &str,
    started: Instant,
) {
    let answer = &out["answer"];
    let refused = answer["refused"].as_bool().unwrap_or(false);
    let unsupported: Vec<String> = answer["unsupported"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default();
    let ms = |field: &str| out["timings"][field].as_f64().unwrap_or(0.0);
    let retrieval = ask.search.mode.name();
    state.metrics.record_answer(&AnswerSignals {
        mode: "generative",
        abstained: refused,
        confidence: None,
        top_score: passages.first().map(|p| (retrieval, p.score)),
        unsupported: Some(!unsupported.is_empty()),
        stages: vec![
            ("retrieve", ms("retrieve_ms")),
            ("generate", ms("prompt_ms") + ms("generate_ms")),
        ],
    });
    let total_ms = started.elapsed().as_secs_f64() * 1000.0;
    state.log(|redact| {
        // The generated answer and its unsupported sentences are masked like the question: a
        // model often repeats the question, e-mail address and all.
        let record = AskRecord {
            time: lector_querylog::time::format(SystemTime::now()),
            request_id: request_id.to_string(),
            question: ask.question.clone(),
            redacted: false,
            settings: AskSettings {
                mode: "generative".into(),
                retrieval: retrieval.into(),
                k: ask.k,
                hops: 1,
                vote: false,
                prefer_recent: false,
                rank_prior: 0.0,
                tenant: ask.tenant.clone(),
            },
            answer: (!refused).then(|| LoggedAnswer {
                text: out["text"].as_str().unwrap_or_default().to_string(),
                score: None,
                doc_id: None,
                passage: None,
                start: None,
                end: None,
            }),
            abstention: refused.then(|| "refused".to_string()),
            na_prob: None,
            threshold: None,
            confidence: None,
            runner_ups: Vec::new(),
            passages,
            unsupported,
            timings: LoggedTimings {
                retrieve_ms: ms("retrieve_ms"),
                generate_ms: ms("prompt_ms") + ms("generate_ms"),
                total_ms,
                ..LoggedTimings::default()
            },
        };
        Entry::Ask(lector_querylog::masked_record(record, redact))
    });
}

/// The events of one message of a generative ask.
fn render(message: stream::Message) -> Vec<Event> {
    match message {
        Ok(Progress::Started) => Vec::new(),
        Ok(Progress::Token(text)) => vec![json_event("token", &json!({ "text": text }))],
        Ok(Progress::Done(answer)) => vec![
            json_event("answer", &answer),
            Event::default().event("done").data("[DONE]"),
        ],
        Err(err) => vec![json_event(
            "error",
            &json!({"error": err.message, "status": err.status.as_u16()}),
        )],
    }
}

/// Retrieves, generates (reporting each token) and checks; the answer's JSON, and the passages
/// given to the generator as logged.
fn answer(
    state: &AppState,
    generator: &dyn Generator,
    ask: &GenerativeAsk,
    reporter: &Reporter,
) -> Result<(Value, Vec<LoggedPassage>), ApiError> {
    let options = AskOptions {
        search: Some(ask.search.clone()),
        k: ask.k,
        ..AskOptions::default()
    };
    let generated = state.pipeline().generate(
        generator,
        &ask.question,
        &options,
        &ask.options,
        layout_with(ask),
        &mut |piece| reporter.token(piece),
    )?;
    let (answered, hits, retrieve_ms) = (generated.answered, generated.hits, generated.retrieve_ms);
    let generation = &answered.generation;
    state.metrics.record_generation(
        finish_name(&generation.finish_reason),
        generation.timings.generated_tokens,
    );
    let mut out = to_json(&answered)?;
    // The answer as the user got it (with lector's sentence naming the readings, if any).
    out["text"] = answered.text().into();
    out["mode"] = "generative".into();
    out["prompt_name"] = ask.prompt.name().into();
    out["generator"] = generator.name().into();
    // Each citation with its passage: the position in the document and the text.
    let citations: Vec<Value> = answered
        .answer
        .citations
        .iter()
        .map(|c| {
            let hit = &hits[c.number - 1];
            json!({"number": c.number, "doc_id": c.doc_id, "title": c.title, "passage": hit.passage, "text": hit.text})
        })
        .collect();
    out["answer"]["citations"] = citations.into();
    let unsupported: Vec<&str> = answered
        .answer
        .flagged
        .iter()
        .map(|&i| answered.answer.sentences[i].text.as_str())
        .collect();
    out["answer"]["unsupported"] = unsupported.into();
    out["passages"] = to_json(&hits)?;
    let t = &generation.timings;
    out["timings"] = json!({
        "retrieve_ms": retrieve_ms,
        "prompt_tokens": t.prompt_tokens,
        "prompt_ms": t.prompt_ms,
        "generated_tokens": t.generated_tokens,
        "generate_ms": t.generate_ms,
    });
    Ok((out, hits.iter().map(lector_querylog::logged).collect()))
}

/// How the prompt shows the passages (the grounding adds the readings it must name).
fn layout_with(ask: &GenerativeAsk) -> Layout {
    Layout {
        prompt: Arc::clone(&ask.prompt),
        ..Layout::default()
    }
}

/// The prompt a request asks for: a name from the server's library, or (where the operator
/// allows it) a prompt file's text, bounded like a prompt file and rendered with bounded work;
/// none: the library's default. 400 for an unknown name or a bad prompt, 403 for text the
/// server does not take.
pub fn prompt(
    config: &Config,
    name: Option<&str>,
    text: Option<&str>,
) -> Result<Arc<Prompt>, ApiError> {
    match (name, text) {
        (Some(_), Some(_)) => Err(ApiError::bad_request(
            "send `prompt` (a name) or `prompt_toml`, not both",
        )),
        (Some(name), None) => config.prompts.get(name).ok_or_else(|| {
            let names: Vec<&str> = config.prompts.prompts().map(Prompt::name).collect();
            ApiError::bad_request(format!(
                "no prompt named {name:?} on this server (it has: {})",
                names.join(", ")
            ))
        }),
        (None, Some(_)) if !config.client_prompts => Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "this server takes named prompts only (`prompt`, listed by GET /v1/prompts); its \
             operator may allow prompt text with `lector serve --allow-client-prompts`",
        )),
        (None, Some(text)) => Prompt::from_toml(text, "prompt_toml")
            .map(Arc::new)
            .map_err(|e| ApiError::bad_request(e.to_string())),
        (None, None) => Ok(config.prompts.default_prompt()),
    }
}

/// `GET /v1/prompts`: the prompts a request may name, with whether the server takes prompt
/// text too.
pub async fn prompts(State(state): State<Arc<AppState>>) -> Json<Value> {
    let config = &state.config;
    let prompts: Vec<Value> = config
        .prompts
        .prompts()
        .map(|p| {
            json!({
                "name": p.name(),
                "description": p.description(),
                "reasoning": p.reasoning().is_some(),
                "max_tokens": p.max_new_tokens(),
            })
        })
        .collect();
    Json(json!({ "prompts": prompts, "client_prompts": config.client_prompts }))
}

/// Generation settings from a request's OpenAI-style fields: greedy without a `temperature` or
/// with 0 (deterministic: the same request, the same text), else sampling with `top_p` [1] and
/// `seed` [a new one each time]. 400 for settings that cannot work, `max_tokens` outside 1 to
/// [`MAX_NEW_TOKENS`] among them (it must also fit the context window beside the prompt).
pub fn options(
    max_tokens: usize,
    temperature: Option<f64>,
    top_p: Option<f64>,
    seed: Option<u64>,
    stop: Vec<String>,
) -> Result<GenerateOptions, ApiError> {
    if max_tokens == 0 {
        return Err(ApiError::bad_request("`max_tokens` must be at least 1"));
    }
    if max_tokens > MAX_NEW_TOKENS {
        return Err(ApiError::bad_request(format!(
            "`max_tokens` {max_tokens} is more than the limit of {MAX_NEW_TOKENS}"
        )));
    }
    let decoding = match temperature {
        None | Some(0.0) => Decoding::Greedy,
        Some(temperature) => Decoding::Sample {
            temperature,
            top_p: top_p.unwrap_or(1.0),
            seed: seed.unwrap_or_else(fresh_seed),
        },
    };
    let options = GenerateOptions {
        decoding,
        max_new_tokens: max_tokens,
        stop,
        ..GenerateOptions::default()
    };
    options.validate()?;
    Ok(options)
}

/// A seed that differs from request to request.
fn fresh_seed() -> u64 {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    now.as_secs() ^ u64::from(now.subsec_nanos()).rotate_left(32)
}

/// The finish reason as OpenAI names it (and the metrics count it): `stop`, `length`, or
/// `cancelled` when the client went away.
pub fn finish_name(finish: &FinishReason) -> &'static str {
    match finish {
        FinishReason::EndOfText | FinishReason::Stop(_) => "stop",
        FinishReason::Length => "length",
        FinishReason::Cancelled => "cancelled",
    }
}

fn to_json(value: &impl serde::Serialize) -> Result<Value, ApiError> {
    serde_json::to_value(value).map_err(|e| ApiError::internal(e.to_string()))
}
