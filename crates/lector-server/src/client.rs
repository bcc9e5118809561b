//! A client of a running server's `POST /v1/ask`, for programs that check a server from the
//! outside (`lector eval canary --against URL`): the request body as JSON, the reply as JSON
//! with its answer read out.

use crate::access::API_KEY_ENV;
use serde_json::Value;
use std::time::Duration;

/// Seconds to wait for a connection.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Seconds to wait for a whole reply: a busy server queues the request, and reading itself
/// takes well under a minute.
const REPLY_TIMEOUT: Duration = Duration::from_secs(300);

/// What can go wrong asking a server; each names the endpoint.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The server answered with an error status (its JSON error body is the detail).
    #[error("{endpoint}: status {status}: {detail}")]
    Status {
        endpoint: String,
        status: u16,
        detail: String,
    },
    /// No reply: the server is not there, refused or timed out.
    #[error("{endpoint}: {message}")]
    Transport { endpoint: String, message: String },
    /// A reply that is not an ask's.
    #[error("{endpoint}: unexpected reply: {message}")]
    Reply { endpoint: String, message: String },
}

/// A reply to an ask: the answer's text, and the whole reply (evidence, calibration, timings).
#[derive(Debug, Clone, PartialEq)]
pub struct Asked {
    /// `answer.text`; `None` for an abstention (`"answer": null`).
    pub answer: Option<String>,
    /// The reply as the server sent it.
    pub reply: Value,
}

/// `POST /v1/ask` of a running server, one request at a time.
pub struct AskClient {
    endpoint: String,
    api_key: Option<String>,
    agent: ureq::Agent,
}

impl AskClient {
    /// A client of the server at `base_url` (`http://HOST:PORT`, a trailing `/` allowed),
    /// sending `Authorization: Bearer KEY` when `api_key` is given.
    pub fn new(base_url: &str, api_key: Option<String>) -> Self {
        let agent = ureq::AgentBuilder::new()
            .timeout_connect(CONNECT_TIMEOUT)
            .timeout(REPLY_TIMEOUT)
            .build();
        AskClient {
            endpoint: format!("{}/v1/ask", base_url.trim_end_matches('/')),
            api_key,
            agent,
        }
    }

    /// [`AskClient::new`] with the key of `$LECTOR_API_KEY`, the variable the server reads its
    /// own key from (unset or blank: no key).
    pub fn from_env(base_url: &str) -> Self {
        let api_key = std::env::var(API_KEY_ENV)
            .ok()
            .map(|k| k.trim().to_string())
            .filter(|k| !k.is_empty());
        AskClient::new(base_url, api_key)
    }

    /// The URL asked (`BASE/v1/ask`).
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// Sends one ask `body` (the route's JSON request: `question`, `k`, ...) and reads the
    /// answer from the reply.
    pub fn ask(&self, body: &Value) -> Result<Asked, ClientError> {
        let reply = self.post(body)?;
        let answer = answer_text(&reply).map_err(|message| ClientError::Reply {
            endpoint: self.endpoint.clone(),
            message: message.into(),
        })?;
        Ok(Asked { answer, reply })
    }

    /// The reply to `body` as JSON.
    fn post(&self, body: &Value) -> Result<Value, ClientError> {
        let mut request = self.agent.post(&self.endpoint);
        if let Some(key) = &self.api_key {
            request = request.set("Authorization", &format!("Bearer {key}"));
        }
        let reply = request.send_json(body).map_err(|e| self.failed(e))?;
        let text = reply.into_string().map_err(|e| ClientError::Transport {
            endpoint: self.endpoint.clone(),
            message: format!("cannot read the reply: {e}"),
        })?;
        serde_json::from_str(&text).map_err(|e| ClientError::Reply {
            endpoint: self.endpoint.clone(),
            message: format!("not JSON: {e}"),
        })
    }

    fn failed(&self, error: ureq::Error) -> ClientError {
        let endpoint = self.endpoint.clone();
        match error {
            ureq::Error::Status(status, reply) => ClientError::Status {
                endpoint,
                status,
                detail: reply.into_string().unwrap_or_default().trim().to_string(),
            },
            ureq::Error::Transport(t) => ClientError::Transport {
                endpoint,
                message: t.to_string(),
            },
        }
    }
}

/// `answer.text` of an ask reply, or `None` for `"answer": null` (an abstention).
fn answer_text(reply: &Value) -> Result<Option<String>, &'static str> {
    match reply.get("answer") {
        Some(Value::Null) => Ok(None),
        Some(answer) => answer["text"]
            .as_str()
            .map(|text| Some(text.to_string()))
            .ok_or("`answer` has no string `text`"),
        None => Err("no `answer` field"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_answer_is_its_text_and_null_an_abstention() {
        let reply = json!({"answer": {"text": "Denver Broncos", "score": 0.9}});
        assert_eq!(answer_text(&reply), Ok(Some("Denver Broncos".into())));
        assert_eq!(answer_text(&json!({"answer": null})), Ok(None));
        assert!(answer_text(&json!({"answer": {"score": 1}})).is_err());
        assert!(answer_text(&json!({"error": "x"})).is_err());
    }

    #[test]
    fn the_endpoint_is_the_base_url_and_the_route() {
        let client = AskClient::new("http://127.0.0.1:8080/", None);
        assert_eq!(client.endpoint(), "http://127.0.0.1:8080/v1/ask");
    }
}
