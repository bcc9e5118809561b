//! An OpenAI-compatible chat-completions endpoint as a [`Generator`].
//!
//! `POST {base_url}/chat/completions` with `model`, `messages`, `max_tokens`, `temperature`,
//! `top_p`, `seed` and `stop`; the reply's `choices[0].message.content` is the text. Timeouts:
//! one for connecting, one for the whole request (a server that accepts the connection and then
//! never answers fails after it). Status 429 and 5xx are retried with exponential backoff
//! (`backoff`, doubled each time, or the server's `Retry-After` in seconds when shorter than 30 s),
//! except 501 (the server lacks the feature: no retry changes that); other statuses, timeouts and
//! malformed replies fail at once with the endpoint's URL and what was wrong. The reply arrives whole, so `on_token` is called once with all of it.

use crate::decode::TextStream;
use crate::error::{Error, Result};
use crate::options::{Decoding, FinishReason, GenerateOptions, Generation, Timings};
use crate::{check_messages, Generator, Message, OnToken};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

/// The environment variable the API key is read from when none is given.
pub const API_KEY_ENV: &str = "OPENAI_API_KEY";

/// Where and how to reach the endpoint.
#[derive(Debug, Clone)]
pub struct OpenAiConfig {
    /// Base URL, e.g. `http://localhost:8080/v1` (`/chat/completions` is appended unless present).
    pub base_url: String,
    /// The `model` field of the request.
    pub model: String,
    /// Bearer token; `None`: `$OPENAI_API_KEY` if set, else no authorisation header.
    pub api_key: Option<String>,
    pub connect_timeout: Duration,
    /// Limit for one whole request (sending, waiting, reading the reply).
    pub request_timeout: Duration,
    /// Retries after a 429 or 5xx status (501 is never retried).
    pub max_retries: u32,
    /// The first retry's wait; doubled for each further retry.
    pub backoff: Duration,
    /// The model's context window in tokens, for fitting prompts.
    pub context_window: usize,
}

impl OpenAiConfig {
    /// Settings with the defaults: 10 s to connect, 120 s per request, 3 retries from 500 ms,
    /// a context window of 8,192 tokens.
    pub fn new(base_url: &str, model: &str) -> Self {
        OpenAiConfig {
            base_url: base_url.to_string(),
            model: model.to_string(),
            api_key: None,
            connect_timeout: Duration::from_secs(10),
            request_timeout: Duration::from_secs(120),
            max_retries: 3,
            backoff: Duration::from_millis(500),
            context_window: 8192,
        }
    }
}

/// A client of one endpoint and model.
pub struct OpenAiGenerator {
    config: OpenAiConfig,
    url: String,
    api_key: Option<String>,
    agent: ureq::Agent,
}

impl OpenAiGenerator {
    /// A client; the API key is resolved now (explicit, else the environment).
    pub fn new(config: OpenAiConfig) -> Result<Self> {
        let base = config.base_url.trim_end_matches('/');
        if !(base.starts_with("http://") || base.starts_with("https://")) {
            return Err(Error::Invalid(format!(
                "endpoint {:?} is not an http(s) URL",
                config.base_url
            )));
        }
        let url = if base.ends_with("/chat/completions") {
            base.to_string()
        } else {
            format!("{base}/chat/completions")
        };
        let api_key = config
            .api_key
            .clone()
            .or_else(|| std::env::var(API_KEY_ENV).ok())
            .filter(|k| !k.is_empty());
        let agent = ureq::AgentBuilder::new()
            .timeout_connect(config.connect_timeout)
            .timeout(config.request_timeout)
            .build();
        Ok(OpenAiGenerator {
            config,
            url,
            api_key,
            agent,
        })
    }

    /// The chat-completions URL requests go to.
    pub fn url(&self) -> &str {
        &self.url
    }

    fn error(&self, message: impl Into<String>) -> Error {
        Error::Endpoint {
            url: self.url.clone(),
            message: message.into(),
        }
    }

    fn body(&self, messages: &[Message], options: &GenerateOptions) -> Result<Value> {
        let mut body = json!({
            "model": self.config.model,
            "messages": messages,
            "max_tokens": options.max_new_tokens,
            "stream": false,
        });
        match options.decoding {
            Decoding::Greedy => body["temperature"] = json!(0.0),
            Decoding::Sample {
                temperature,
                top_p,
                seed,
            } => {
                body["temperature"] = json!(temperature);
                body["top_p"] = json!(top_p);
                body["seed"] = json!(seed);
            }
            Decoding::Beam { .. } => {
                return Err(Error::Invalid(
                    "beam search is not available on an OpenAI-compatible endpoint".into(),
                ))
            }
        }
        if !options.stop.is_empty() {
            body["stop"] = json!(options.stop);
        }
        Ok(body)
    }

    /// Sends `body`, retrying 429 and 5xx; returns the reply's text.
    fn post(&self, body: &Value) -> Result<String> {
        let mut attempt = 0;
        loop {
            let mut request = self.agent.post(&self.url);
            if let Some(key) = &self.api_key {
                request = request.set("Authorization", &format!("Bearer {key}"));
            }
            match request.send_json(body) {
                Ok(response) => {
                    return response
                        .into_string()
                        .map_err(|e| self.error(format!("cannot read the reply: {e}")))
                }
                Err(ureq::Error::Status(code, response))
                    if retryable(code) && attempt < self.config.max_retries =>
                {
                    let wait =
                        retry_after(&response).unwrap_or(self.config.backoff * 2u32.pow(attempt));
                    std::thread::sleep(wait);
                    attempt += 1;
                }
                Err(ureq::Error::Status(code, response)) => {
                    let detail = response.into_string().unwrap_or_default();
                    let tries = if retryable(code) {
                        format!(" after {} retries", attempt)
                    } else {
                        String::new()
                    };
                    return Err(self.error(format!("status {code}{tries}: {}", snippet(&detail))));
                }
                Err(ureq::Error::Transport(t)) => {
                    return Err(self.error(transport_message(&t, &self.config)))
                }
            }
        }
    }
}

/// Statuses worth another try: overload and server errors, but not 501 Not Implemented (e.g. a
/// server started without a generator), which stays so however often it is asked.
fn retryable(code: u16) -> bool {
    code == 429 || ((500..600).contains(&code) && code != 501)
}

/// The server's `Retry-After` in seconds, when short enough to honour.
fn retry_after(response: &ureq::Response) -> Option<Duration> {
    let seconds: f64 = response.header("Retry-After")?.trim().parse().ok()?;
    (0.0..30.0)
        .contains(&seconds)
        .then(|| Duration::from_secs_f64(seconds))
}

fn transport_message(t: &ureq::Transport, config: &OpenAiConfig) -> String {
    let text = t.to_string();
    if text.contains("timed out") || text.contains("WouldBlock") || text.contains("Timeout") {
        format!(
            "no reply within the timeout (connect {:?}, request {:?}): {text}",
            config.connect_timeout, config.request_timeout
        )
    } else {
        text
    }
}

/// The first 200 characters of `text`, for error messages.
fn snippet(text: &str) -> String {
    let mut s: String = text.chars().take(200).collect();
    if s.len() < text.len() {
        s.push_str("...");
    }
    s
}

/// The text, finish reason and token counts of a chat-completions reply.
fn parse_reply(reply: &str) -> std::result::Result<(String, Option<String>, Value), String> {
    let value: Value = serde_json::from_str(reply)
        .map_err(|e| format!("malformed JSON in the reply ({e}): {}", snippet(reply)))?;
    if let Some(error) = value.get("error") {
        return Err(format!("the endpoint returned an error: {error}"));
    }
    let choice = value
        .get("choices")
        .and_then(|c| c.get(0))
        .ok_or_else(|| format!("no `choices[0]` in the reply: {}", snippet(reply)))?;
    let text = choice
        .pointer("/message/content")
        .and_then(Value::as_str)
        .ok_or_else(|| {
            format!(
                "no string `choices[0].message.content` in the reply: {}",
                snippet(reply)
            )
        })?;
    let finish = choice
        .get("finish_reason")
        .and_then(Value::as_str)
        .map(str::to_string);
    Ok((
        text.to_string(),
        finish,
        value.get("usage").cloned().unwrap_or(Value::Null),
    ))
}

impl Generator for OpenAiGenerator {
    fn name(&self) -> String {
        self.config.model.clone()
    }

    fn context_window(&self) -> usize {
        self.config.context_window
    }

    fn count_tokens(&self, messages: &[Message]) -> Result<usize> {
        Ok(messages
            .iter()
            .map(|m| m.content.chars().count().div_ceil(3) + 8)
            .sum())
    }

    fn generate(
        &self,
        messages: &[Message],
        options: &GenerateOptions,
        on_token: &mut OnToken<'_>,
    ) -> Result<Generation> {
        check_messages(messages)?;
        options.validate()?;
        let body = self.body(messages, options)?;
        let start = Instant::now();
        let reply = self.post(&body)?;
        let elapsed = start.elapsed().as_secs_f64() * 1000.0;
        let (text, finish, usage) = parse_reply(&reply).map_err(|m| self.error(m))?;
        let mut stream = TextStream::new(&options.stop);
        let step = stream.push(&text);
        let text = stream.final_text(&text).to_string();
        let mut finish_reason = match (step.stop, finish.as_deref()) {
            (Some(stop), _) => FinishReason::Stop(stop),
            (None, Some("length")) => FinishReason::Length,
            _ => FinishReason::EndOfText,
        };
        if on_token(&text).is_break() {
            finish_reason = FinishReason::Cancelled;
        }
        let count = |key: &str| usage.get(key).and_then(Value::as_u64).unwrap_or(0) as usize;
        Ok(Generation {
            text,
            finish_reason,
            timings: Timings {
                prompt_tokens: count("prompt_tokens"),
                prompt_ms: 0.0,
                generated_tokens: count("completion_tokens"),
                generate_ms: elapsed,
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reply_parsing_names_what_is_missing() {
        assert!(parse_reply("{").unwrap_err().contains("malformed JSON"));
        assert!(parse_reply("{\"choices\": []}")
            .unwrap_err()
            .contains("choices[0]"));
        assert!(
            parse_reply("{\"choices\": [{\"message\": {\"content\": 3}}]}")
                .unwrap_err()
                .contains("content")
        );
        let (text, finish, _) = parse_reply(
            "{\"choices\": [{\"message\": {\"role\": \"assistant\", \"content\": \"Paris\"}, \"finish_reason\": \"stop\"}]}",
        )
        .unwrap();
        assert_eq!((text.as_str(), finish.as_deref()), ("Paris", Some("stop")));
    }

    #[test]
    fn overload_and_server_errors_are_retried_but_not_501() {
        assert!(retryable(429) && retryable(500) && retryable(503) && retryable(504));
        assert!(!retryable(501) && !retryable(400) && !retryable(404));
    }

    #[test]
    fn only_http_urls_are_endpoints() {
        assert!(OpenAiGenerator::new(OpenAiConfig::new("localhost:8080", "m")).is_err());
        let g = OpenAiGenerator::new(OpenAiConfig::new("http://127.0.0.1:9/v1/", "m")).unwrap();
        assert_eq!(g.url(), "http://127.0.0.1:9/v1/chat/completions");
    }
}
