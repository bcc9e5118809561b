//! lector-server: the HTTP API and web page of lector (`lector serve`).
//!
//! | route | does |
//! | --- | --- |
//! | `GET /` | the web page (embedded; no external resources) |
//! | `POST /v1/ask` | answer a question: answer or abstention, evidence, runner-ups, timings, token probabilities; with `"mode": "generative"` a generated answer with citations (JSON, or server-sent events with `"stream": true`) |
//! | `POST /v1/chat/completions` | OpenAI-compatible chat completions with the server's generator, streamed with `"stream": true` |
//! | `GET /v1/search` | ranked passages for `q` |
//! | `POST /v1/documents` | add or replace documents; answers after the commit is on disk |
//! | `GET /v1/documents/{id}` | a stored document |
//! | `DELETE /v1/documents/{id}` | remove a document; answers after the commit is on disk |
//! | `GET /healthz` | liveness (never needs the API key) |
//! | `GET /metrics` | Prometheus metrics |
//! | `GET /openapi.json` | the OpenAPI 3 description of these routes |
//!
//! Reading and generating are CPU work on tokio's blocking pool behind a bounded gate ([`limit`]);
//! a generation stops when its client goes away ([`stream`]). Without a generator
//! ([`AppState::with_generator`]), generative asks and chat completions get 501. Document
//! writes go through the index's single writer and each commits before it answers; after a
//! commit, later requests see the new documents (the pipeline's index is swapped for the
//! writer's new snapshot, see [`state`]).

pub mod api;
pub mod chat;
pub mod error;
pub mod generative;
pub mod limit;
pub mod metrics;
pub mod state;
pub mod stream;

pub use error::{ApiError, Error};
pub use limit::Limits;
pub use state::{AppState, Config, SharedEmbedder};

use axum::extract::{DefaultBodyLimit, MatchedPath, Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use lector_index::CommitInfo;
use std::future::Future;
use std::sync::Arc;
use std::time::Instant;

/// The web page.
pub const PAGE: &str = include_str!("../assets/index.html");
/// The OpenAPI 3 document.
pub const OPENAPI: &str = include_str!("../assets/openapi.json");

/// Every route with its middleware: metrics (outermost, so refusals count too), then the API
/// key check, then per-route body limits.
pub fn router(state: Arc<AppState>) -> Router {
    let limits = state.gate.limits();
    Router::new()
        .route("/", get(page))
        .route(
            "/v1/ask",
            post(api::ask).layer(DefaultBodyLimit::max(limits.max_ask_bytes)),
        )
        .route(
            "/v1/chat/completions",
            post(chat::completions).layer(DefaultBodyLimit::max(limits.max_ask_bytes)),
        )
        .route("/v1/search", get(api::search))
        .route(
            "/v1/documents",
            post(api::put_documents).layer(DefaultBodyLimit::max(limits.max_documents_bytes)),
        )
        .route(
            "/v1/documents/{id}",
            get(api::get_document).delete(api::delete_document),
        )
        .route("/healthz", get(healthz))
        .route("/metrics", get(metrics))
        .route("/openapi.json", get(openapi))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(middleware::from_fn_with_state(state.clone(), authorize))
        .layer(middleware::from_fn_with_state(state.clone(), record))
        .with_state(state)
}

/// Serves on `listener` until `shutdown` completes, then lets requests in flight finish and
/// closes the index writer (committing anything staged). Returns the final commit.
pub async fn serve(
    listener: tokio::net::TcpListener,
    state: Arc<AppState>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<Option<CommitInfo>, Error> {
    axum::serve(listener, router(state.clone()))
        .with_graceful_shutdown(shutdown)
        .await?;
    let info = tokio::task::spawn_blocking(move || state.shutdown())
        .await
        .map_err(std::io::Error::other)??;
    Ok(info)
}

/// Completes at the first SIGINT (Ctrl-C) or SIGTERM.
pub async fn shutdown_signal() {
    let interrupt = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        let mut term = signal(SignalKind::terminate()).expect("SIGTERM handler");
        tokio::select! {
            _ = interrupt => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = interrupt.await;
}

async fn page() -> Html<&'static str> {
    Html(PAGE)
}

async fn openapi() -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "application/json")], OPENAPI)
}

async fn healthz() -> impl IntoResponse {
    axum::Json(serde_json::json!({"status": "ok"}))
}

async fn metrics(State(state): State<Arc<AppState>>) -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        state.metrics.render(state.gauges()),
    )
}

async fn not_found(request: Request) -> Response {
    let path = request.uri().path();
    ApiError::not_found(format!("no route {path}")).into_response_for(path)
}

async fn method_not_allowed(request: Request) -> Response {
    let path = request.uri().path();
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        format!("{} is not allowed on {path}", request.method()),
    )
    .into_response_for(path)
}

/// Routes whose errors take OpenAI's shape, for OpenAI clients.
pub fn is_openai_route(path: &str) -> bool {
    path.starts_with("/v1/chat/")
}

/// Routes that never need the API key: the liveness probe, and the page (static, no data; it
/// asks for the key and sends it with its API calls).
fn is_public(path: &str) -> bool {
    path == "/healthz" || path == "/"
}

/// 401 unless the request carries `Authorization: Bearer <key>` (when a key is set).
async fn authorize(State(state): State<Arc<AppState>>, request: Request, next: Next) -> Response {
    let Some(key) = &state.config.api_key else {
        return next.run(request).await;
    };
    if is_public(request.uri().path()) {
        return next.run(request).await;
    }
    let given = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    if given.is_some_and(|g| same(g.as_bytes(), key.as_bytes())) {
        return next.run(request).await;
    }
    let mut response = ApiError::new(
        StatusCode::UNAUTHORIZED,
        "this server needs an API key: send `Authorization: Bearer <key>`",
    )
    .into_response_for(request.uri().path());
    response
        .headers_mut()
        .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    response
}

/// Equality in time independent of where the inputs differ.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Counts the request and its latency under its route pattern.
async fn record(State(state): State<Arc<AppState>>, request: Request, next: Next) -> Response {
    let start = Instant::now();
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or("unmatched", |p| p.as_str())
        .to_string();
    let method = request.method().to_string();
    let response = next.run(request).await;
    state
        .metrics
        .record(&route, &method, response.status().as_u16(), start.elapsed());
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn openapi_is_json_and_describes_every_route() {
        let doc: serde_json::Value = serde_json::from_str(OPENAPI).expect("valid JSON");
        assert!(doc["openapi"].as_str().unwrap().starts_with("3."));
        for (path, method) in [
            ("/", "get"),
            ("/v1/ask", "post"),
            ("/v1/chat/completions", "post"),
            ("/v1/search", "get"),
            ("/v1/documents", "post"),
            ("/v1/documents/{id}", "get"),
            ("/v1/documents/{id}", "delete"),
            ("/healthz", "get"),
            ("/metrics", "get"),
            ("/openapi.json", "get"),
        ] {
            let op = &doc["paths"][path][method];
            assert!(op.is_object(), "{method} {path} is not described");
            assert!(
                op["responses"].is_object(),
                "{method} {path} has no responses"
            );
        }
        // Every schema reference resolves.
        let text = OPENAPI;
        for part in text.split("\"$ref\": \"#/components/schemas/").skip(1) {
            let name = &part[..part.find('"').unwrap()];
            assert!(
                doc["components"]["schemas"][name].is_object(),
                "unresolved schema {name}"
            );
        }
    }

    #[test]
    fn compares_keys_fully() {
        assert!(same(b"secret", b"secret"));
        assert!(!same(b"secret", b"secreT"));
        assert!(!same(b"secret", b"secret2"));
    }
}
