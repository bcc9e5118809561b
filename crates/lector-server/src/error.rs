//! Errors: [`ApiError`] is what a client sees (a status and a JSON body `{"error": "..."}`, or
//! on the OpenAI-compatible routes OpenAI's `{"error": {"message": "...", "type": "..."}}`, see
//! [`ApiError::into_openai_response`]); [`Error`] is what can stop the server itself.

use axum::extract::rejection::QueryRejection;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;
use std::time::Duration;

/// An HTTP error response: the status and a message for the `error` field of the JSON body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    /// The HTTP status.
    pub status: StatusCode,
    /// What went wrong, for a person.
    pub message: String,
}

impl ApiError {
    /// An error with this status and message.
    pub fn new(status: StatusCode, message: impl Into<String>) -> Self {
        ApiError {
            status,
            message: message.into(),
        }
    }

    /// 400: the request cannot be served as sent.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, message)
    }

    /// 404.
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, message)
    }

    /// 500: a bug or a broken index or model; the details go to the server log too.
    pub fn internal(message: impl Into<String>) -> Self {
        let message = message.into();
        eprintln!("error: {message}");
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, message)
    }

    /// 503: every worker is busy and the queue is full.
    pub fn busy(running: usize, queued: usize) -> Self {
        Self::new(
            StatusCode::SERVICE_UNAVAILABLE,
            format!("the server is saturated ({running} requests running, {queued} waiting); retry shortly"),
        )
    }

    /// 503: the bodies admitted already fill the body budget.
    pub fn bodies_full(budget: usize) -> Self {
        Self::new(
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "the server is saturated: request bodies already fill its budget of {budget} bytes; retry shortly"
            ),
        )
    }

    /// 413: the body is (or declares itself) larger than the route allows.
    pub fn too_large(bytes: u64, limit: usize) -> Self {
        Self::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("the body of {bytes} bytes is over the length limit of {limit} bytes"),
        )
    }

    /// 408: the client took longer than the limit to send its body.
    pub fn body_timeout(limit: Duration) -> Self {
        Self::new(
            StatusCode::REQUEST_TIMEOUT,
            format!(
                "the body took longer than the limit of {} s to arrive",
                limit.as_secs_f64()
            ),
        )
    }

    /// 504: the request waited and ran longer than the limit.
    pub fn timeout(limit: Duration) -> Self {
        Self::new(
            StatusCode::GATEWAY_TIMEOUT,
            format!(
                "the request took longer than the limit of {} s (--timeout-secs)",
                limit.as_secs_f64()
            ),
        )
    }

    /// 504 for a document write: it waited (for the writer or a worker) longer than the limit
    /// and was cancelled before it started, so nothing of it was stored and it can be retried.
    pub fn write_timeout(limit: Duration) -> Self {
        Self::new(
            StatusCode::GATEWAY_TIMEOUT,
            format!(
                "the write waited longer than the limit of {} s (--timeout-secs) and was \
                 cancelled before it started: nothing of it was stored, so it is safe to retry",
                limit.as_secs_f64()
            ),
        )
    }
}

impl ApiError {
    /// The body in OpenAI's error shape, `{"error": {"message", "type", "param", "code"}}`,
    /// which OpenAI clients parse.
    pub fn openai_body(&self) -> serde_json::Value {
        let kind = match self.status.as_u16() {
            401 => "authentication_error",
            501 => "not_supported_error",
            500.. => "server_error",
            _ => "invalid_request_error",
        };
        json!({"error": {"message": self.message, "type": kind, "param": null, "code": null}})
    }

    /// The response in OpenAI's error shape; status and headers as in lector's shape.
    pub fn into_openai_response(self) -> Response {
        let body = self.openai_body();
        with_retry_after(self.status, (self.status, Json(body)).into_response())
    }

    /// The response in the shape `path` answers in: OpenAI's on the OpenAI-compatible routes,
    /// lector's on the others.
    pub fn into_response_for(self, path: &str) -> Response {
        if crate::is_openai_route(path) {
            self.into_openai_response()
        } else {
            self.into_response()
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let response = (self.status, Json(json!({ "error": self.message }))).into_response();
        with_retry_after(self.status, response)
    }
}

/// 503 tells the client when to retry.
fn with_retry_after(status: StatusCode, mut response: Response) -> Response {
    if status == StatusCode::SERVICE_UNAVAILABLE {
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    }
    response
}

impl From<lector_pipeline::Error> for ApiError {
    fn from(err: lector_pipeline::Error) -> Self {
        use lector_pipeline::Error as E;
        match err {
            E::EmptyQuestion | E::Options(_) => ApiError::bad_request(err.to_string()),
            E::Index(err) => err.into(),
            E::Generate(err) => err.into(),
            E::Reader(lector_reader::Error::Params(_)) => ApiError::bad_request(err.to_string()),
            _ => ApiError::internal(err.to_string()),
        }
    }
}

impl From<lector_index::Error> for ApiError {
    fn from(err: lector_index::Error) -> Self {
        match err {
            // A request the index cannot serve, e.g. dense search of a BM25-only index.
            lector_index::Error::Config(_) => ApiError::bad_request(err.to_string()),
            // An external store is down or timed out: retry once it is back.
            lector_index::Error::Unavailable { .. } => {
                ApiError::new(StatusCode::SERVICE_UNAVAILABLE, err.to_string())
            }
            _ => ApiError::internal(err.to_string()),
        }
    }
}

impl From<lector_generate::Error> for ApiError {
    fn from(err: lector_generate::Error) -> Self {
        use lector_generate::Error as E;
        match err {
            // Bad settings, an empty prompt, a prompt longer than the context window.
            E::Invalid(_) | E::ContextOverflow { .. } => ApiError::bad_request(err.to_string()),
            // A generator behind another endpoint failed.
            E::Endpoint { .. } => ApiError::new(StatusCode::BAD_GATEWAY, err.to_string()),
            _ => ApiError::internal(err.to_string()),
        }
    }
}

/// Query parameters that do not parse, name an unknown field, or miss a required one: 400.
impl From<QueryRejection> for ApiError {
    fn from(rejection: QueryRejection) -> Self {
        ApiError::bad_request(rejection.body_text())
    }
}

/// What can stop the server.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Binding or serving the socket failed.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// The index could not be opened, or the final commit at shutdown failed.
    #[error(transparent)]
    Index(#[from] lector_index::Error),
    /// The pipeline could not be built (a model, a calibration, the retrieval settings).
    #[error(transparent)]
    Pipeline(#[from] lector_pipeline::Error),
    /// The API key could not be read, or is empty.
    #[error("{0}")]
    ApiKey(String),
    /// An `--allowed-host` entry is not a host name, `NAME:PORT` or an `http(s)://` origin.
    #[error("{0}")]
    AllowedHost(String),
    /// Asked to serve beyond this machine without an API key.
    #[error("refusing to listen on {0}, beyond this machine, without an API key: anyone who can reach it could read and change the index; set --api-key-file or $LECTOR_API_KEY, or pass --insecure-no-auth to serve without one")]
    Exposed(std::net::SocketAddr),
}
