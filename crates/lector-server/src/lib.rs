//! lector-server: the HTTP API and web page of lector (`lector serve`).
//!
//! | route | does |
//! | --- | --- |
//! | `GET /` | the web page (embedded; no external resources) |
//! | `POST /v1/ask` | answer a question: answer or abstention, evidence, runner-ups, timings, token probabilities; with `"mode": "generative"` a generated answer with citations (JSON, or server-sent events with `"stream": true`) |
//! | `POST /v1/chat/completions` | OpenAI-compatible chat completions with the server's generator, streamed with `"stream": true` |
//! | `GET /v1/search` | ranked passages for `q` |
//! | `GET /v1/documents` | the documents in the index's own order, a page at a time (`limit` up to 1000, `cursor` from the last page's `next_cursor`, `offset`), with `total` |
//! | `POST /v1/documents` | add or replace documents; answers after the commit is on disk |
//! | `GET /v1/documents/{id}` | a stored document |
//! | `DELETE /v1/documents/{id}` | remove a document; answers after the commit is on disk |
//! | `POST /v1/feedback` | a verdict (up/down, a correct answer, a note) on an ask, by its `request_id`; logged (needs `--log-queries`) |
//! | `GET /label` | the labelling page: mark the answer span of logged questions, or mark them unanswerable (needs `--log-queries`; see [`label`]) |
//! | `GET /v1/label/next` | the next logged question to label (`sample=uncertain\|down-voted\|random`, `seed`), its passages' current text, how many remain |
//! | `POST /v1/labels` | store a label (answer span, unanswerable or skip), checked against the log and the index; fsynced before 201 |
//! | `GET /healthz` | liveness (never needs the API key) |
//! | `GET /metrics` | Prometheus metrics |
//! | `GET /openapi.json` | the OpenAPI 3 description of these routes |
//!
//! Every request passes [`access`]: its `Host` must name this server and its `Origin`, when
//! present, be the server's own (403 otherwise, against DNS rebinding and cross-site pages),
//! `POST` bodies must be JSON (415), and with an API key every route but `/healthz` and the
//! page needs it (401). Every response forbids framing and carries a Content-Security-Policy
//! that lets the pages run only their own inline script and style ([`headers`]). Without a
//! key, [`serve`] refuses addresses beyond loopback unless [`Config::insecure_no_auth`] is set.
//! Metric labels are bounded: unmatched paths are `unmatched` and made-up methods `other`.
//!
//! A request is admitted before its body is read: a slot and its body's bytes from a budget, 503
//! at once when either is short, 413 unread when the body declares more than its route allows,
//! 408 when an admitted body does not arrive in time; connections are capped ([`limit`],
//! [`body`], [`conn`]). Reading and generating are CPU work on tokio's blocking pool behind the
//! same bounded gate; a generation stops when its client goes away ([`stream`]). Without a generator
//! ([`AppState::with_generator`]), generative asks and chat completions get 501. Document
//! writes go through the index's single writer and each commits before it answers; after a
//! commit, later requests see the new documents. Asks read an immutable snapshot, so a write
//! never waits for asks in flight, which finish on the snapshot they started with (see
//! [`state`]).
//!
//! With a query log ([`Config::query_log`]), asks and feedback are logged and labels stored through
//! [`lector_querylog`], which holds the log's records, its writer and the labels.
//!
//! [`open()`] builds a server's state from an index directory and a
//! [`lector_pipeline::PipelineConfig`] (what `lector serve` does), so other programs can serve
//! an index without the binary.
//!
//! [`client::AskClient`] asks a running server's `POST /v1/ask` from another program (what
//! `lector eval canary --against` does).

pub mod access;
pub mod api;
pub mod body;
pub mod chat;
pub mod client;
pub mod conn;
mod cursor;
pub mod error;
pub mod feedback;
pub mod generative;
pub mod headers;
pub mod keys;
pub mod label;
pub mod limit;
pub mod metrics;
pub mod open;
pub mod state;
pub mod stream;

pub use access::ApiKey;
pub use error::{ApiError, Error};
pub use keys::{KeyFile, Principal, Scope};
pub use limit::Limits;
pub use open::{open, open_store, Opened};
pub use state::{AppState, Config, Served, FOLLOW_EVERY};

use axum::extract::{MatchedPath, Request, State};
use axum::http::{header, StatusCode};
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

/// Every route with its middleware: the security headers (outermost, on every response,
/// [`headers`]), metrics (so refusals count too), the `Host` and `Origin` checks, the API key
/// check and the JSON-only rule for bodies (see [`access`]).
/// None of them reads a body: handlers read theirs once admitted ([`limit::Gate::admit_and_read`]).
pub fn router(state: Arc<AppState>) -> Router {
    Router::new()
        .route("/", get(page))
        .route("/v1/ask", post(api::ask))
        .route("/v1/chat/completions", post(chat::completions))
        .route("/v1/search", get(api::search))
        .route("/v1/prompts", get(generative::prompts))
        .route("/v1/feedback", post(feedback::feedback))
        .route("/label", get(label::page))
        .route("/v1/label/next", get(label::next))
        .route("/v1/labels", post(label::save))
        .route(
            "/v1/documents",
            get(api::list_documents).post(api::put_documents),
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
        .layer(middleware::from_fn(access::require_json))
        .layer(middleware::from_fn_with_state(
            state.clone(),
            access::authorize,
        ))
        .layer(middleware::from_fn_with_state(
            state.clone(),
            access::check_host_and_origin,
        ))
        .layer(middleware::from_fn_with_state(state.clone(), record))
        .layer(middleware::from_fn(headers::secure))
        .with_state(state)
}

/// Serves on `listener` until `shutdown` completes, then lets requests in flight finish and
/// closes the index writer (committing anything staged). Returns the final commit. Refuses
/// ([`Error::Exposed`]) to serve beyond loopback without an API key unless
/// [`Config::insecure_no_auth`] is set, and ([`Error::AllowedHost`]) allowed hosts it cannot
/// read.
pub async fn serve(
    listener: tokio::net::TcpListener,
    state: Arc<AppState>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<Option<CommitInfo>, Error> {
    let addr = listener.local_addr()?;
    let config = &state.config;
    access::check_exposure(addr, config.authenticates(), config.insecure_no_auth)?;
    access::check_allowed_hosts(&config.allowed_hosts)?;
    state.set_bound(addr.ip());
    state.follow_commits();
    let listener = conn::LimitedListener::new(listener, state.gate.connection_permits());
    let header_timeout = state.gate.limits().header_timeout;
    conn::serve(listener, router(state.clone()), header_timeout, shutdown).await;
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

/// Liveness, and the commit served (a read-only server's follows its writer's). Over an
/// external store, 503 while the store cannot be reached, so a load balancer sends asks to
/// servers that can answer them. Answered from what the server already knows (the follower
/// looks at the store every [`state::FOLLOW_EVERY`]): this route, which needs no key, never
/// makes a call to the store itself, nor names it. Admitted like any route (503 when full).
async fn healthz(State(state): State<Arc<AppState>>) -> Response {
    let _admitted = match state.gate.admit(0) {
        Ok(admitted) => admitted,
        Err(err) => return err.into_response(),
    };
    if state.unreachable().is_some() {
        // The reason (with the store's address) is in the server's log, said by the follower.
        let message = "the document store cannot be reached; asks wait for it to return";
        return ApiError::new(StatusCode::SERVICE_UNAVAILABLE, message).into_response();
    }
    // With tenants, this route (which needs no key) tells nothing of the index: neither how many
    // documents it holds nor, through the generation, when anyone wrote.
    match state.config.keys {
        Some(_) => axum::Json(serde_json::json!({"status": "ok"})).into_response(),
        None => axum::Json(serde_json::json!({
            "status": "ok",
            "generation": state.generation(),
            "documents": state.documents(),
        }))
        .into_response(),
    }
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

/// Counts the request and its latency under its route pattern.
async fn record(State(state): State<Arc<AppState>>, request: Request, next: Next) -> Response {
    let start = Instant::now();
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or("unmatched", |p| p.as_str())
        .to_string();
    let method = metrics::method_label(request.method());
    let response = next.run(request).await;
    state
        .metrics
        .record(&route, method, response.status().as_u16(), start.elapsed());
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
            ("/v1/feedback", "post"),
            ("/label", "get"),
            ("/v1/label/next", "get"),
            ("/v1/labels", "post"),
            ("/v1/documents", "get"),
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
}
