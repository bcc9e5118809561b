//! The labelling routes: `GET /label` (the page), `GET /v1/label/next` and `POST /v1/labels`.
//!
//! Each log directory has one [`Labelling`] per process (a registry keyed by the directory),
//! holding the open label store behind a lock, so labels from concurrent requests are appended
//! one at a time, and the parsed query log, which each request brings up to date by parsing only
//! what was logged since ([`LogReader`]). Both routes run behind the admission gate like
//! every route with work ([`crate::limit`]): a request's working set (the queue of asks left to
//! label) grows with the log, so at most `max_running` of them are in memory at once.

use crate::api::parse_json;
use crate::error::ApiError;
use crate::keys::{tenant_filter, Principal};
use crate::state::AppState;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Extension, Query, Request, State};
use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Response};
use axum::Json;
use lector_index::{Filter, Index};
use lector_querylog::label::{
    char_slice, margin, order, Label, LabelCounts, LabelStore, LabelVerdict, Sample,
};
use lector_querylog::{AskRecord, Entry, LogEntries, LogReader, LoggedPassage, Verdict};
use serde::Deserialize;
use serde_json::{json, Value};
use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::SystemTime;

/// The labelling page.
pub const PAGE: &str = include_str!("../../assets/label.html");

/// The most bytes a `POST /v1/labels` body may have.
pub const MAX_LABEL_BYTES: usize = 64 << 10;

/// `GET /label`: the page (404 without a query log).
pub async fn page(State(state): State<Arc<AppState>>) -> Response {
    match state.config.query_log {
        Some(_) => Html(PAGE).into_response(),
        None => (StatusCode::NOT_FOUND, Html(format!("<p>{NO_LOG}</p>"))).into_response(),
    }
}

const NO_LOG: &str = "labelling needs the query log: start the server with \
                      `lector serve --log-queries DIR`";

/// The query of `GET /v1/label/next`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NextParams {
    /// `uncertain` [default], `down-voted` or `random`.
    pub sample: Option<String>,
    /// The shuffle of `random`.
    pub seed: Option<u64>,
}

/// `GET /v1/label/next`: the next logged ask to label with its passages' current text, plus how
/// many remain and the label counts; when every logged question is labelled, `done` is true and
/// there is no `request_id`.
pub async fn next(
    State(state): State<Arc<AppState>>,
    principal: Option<Extension<Principal>>,
    params: Result<Query<NextParams>, QueryRejection>,
) -> Result<Json<Value>, ApiError> {
    let tenant = principal.and_then(|Extension(p)| p.tenant);
    let labelling = Labelling::of(&state)?;
    let Query(params) = params?;
    let name = params.sample.as_deref().unwrap_or("uncertain");
    let sample = Sample::parse(name, params.seed).map_err(ApiError::bad_request)?;
    let shared = state.clone();
    let out = state
        .gate
        .run(move || labelling.next(&shared, sample, tenant.as_deref()))
        .await?;
    Ok(Json(out))
}

/// The body of `POST /v1/labels`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LabelRequest {
    /// The logged ask labelled.
    pub request_id: String,
    /// `answer`, `unanswerable` or `skip`.
    pub verdict: LabelVerdict,
    /// With `answer`: the document, the character range, and the text it holds.
    pub doc_id: Option<String>,
    pub start: Option<usize>,
    pub end: Option<usize>,
    pub text: Option<String>,
}

/// `POST /v1/labels`: checks the label against the log and the index, stores it on disk, then
/// answers 201 with the stored label and the counts.
pub async fn save(
    State(state): State<Arc<AppState>>,
    request: Request,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let tenant = request
        .extensions()
        .get::<Principal>()
        .and_then(|p| p.tenant.clone());
    let labelling = Labelling::of(&state)?;
    let (admission, body) = state.gate.admit_and_read(request, MAX_LABEL_BYTES).await?;
    let request: LabelRequest = parse_json(&body)?;
    drop(body);
    let shared = state.clone();
    let out = state
        .gate
        .run_admitted(admission, move || {
            labelling.save(&shared, request, tenant.as_deref())
        })
        .await?;
    Ok((StatusCode::CREATED, Json(out)))
}

/// The labelling state of one log directory.
pub struct Labelling {
    dir: PathBuf,
    /// Opened at first use (loading the labels written before).
    store: Mutex<Option<LabelStore>>,
    log: Mutex<LogReader>,
}

impl Labelling {
    /// The labelling state of the log in `dir` (the store opens at first use).
    pub fn new(dir: PathBuf) -> Self {
        Labelling {
            log: Mutex::new(LogReader::new(dir.clone())),
            dir,
            store: Mutex::new(None),
        }
    }

    /// The labelling state of the server's log directory; 404 when it keeps no log.
    pub fn of(state: &AppState) -> Result<Arc<Labelling>, ApiError> {
        state
            .labelling()
            .cloned()
            .ok_or_else(|| ApiError::not_found(NO_LOG))
    }

    /// The log's entries, brought up to date by parsing what was logged since the last call.
    fn entries(&self) -> Result<LogEntries, ApiError> {
        lock(&self.log)
            .refresh()
            .map_err(|e| ApiError::internal(e.to_string()))
    }

    /// Runs `work` with the store, opening it first if needed.
    fn with_store<T>(&self, work: impl FnOnce(&mut LabelStore) -> T) -> Result<T, ApiError> {
        let mut guard = lock(&self.store);
        if guard.is_none() {
            let store =
                LabelStore::open(&self.dir).map_err(|e| ApiError::internal(e.to_string()))?;
            *guard = Some(store);
        }
        Ok(work(guard.as_mut().expect("opened above")))
    }

    /// The last label of each request id that `tenant` may see (all without one), oldest first.
    fn latest(&self, entries: &LogEntries, tenant: Option<&str>) -> Result<Vec<Label>, ApiError> {
        let own: Option<HashSet<&str>> = tenant.map(|_| {
            entries
                .iter()
                .filter_map(|e| match e {
                    Entry::Ask(ask) if visible(e, tenant) => Some(ask.request_id.as_str()),
                    _ => None,
                })
                .collect()
        });
        self.with_store(|store| {
            store
                .latest()
                .into_iter()
                .filter(|l| {
                    own.as_ref()
                        .is_none_or(|own| own.contains(l.request_id.as_str()))
                })
                .cloned()
                .collect()
        })
    }

    fn next(
        &self,
        state: &AppState,
        sample: Sample,
        tenant: Option<&str>,
    ) -> Result<Value, ApiError> {
        let entries = self.entries()?;
        let labels = self.latest(&entries, tenant)?;
        let refs: Vec<&Label> = labels.iter().collect();
        let queue = order(entries.iter().filter(|e| visible(e, tenant)), &refs, sample);
        let mut out = match queue.next() {
            Some(ask) => {
                let pipeline = state.pipeline();
                let skipped = queue.fresh.is_empty();
                let index = crate::state::embedded(&pipeline)?;
                item(ask, index, down_voted(&entries, ask), skipped, tenant)
            }
            None => json!({"message": "every logged question is labelled"}),
        };
        out["done"] = queue.is_empty().into();
        out["sample"] = sample.name().into();
        if let Sample::Random { seed } = sample {
            out["seed"] = seed.into();
        }
        out["remaining"] = queue.len().into();
        out["remaining_skipped"] = queue.skipped.len().into();
        out["labels"] = json!(LabelCounts::of(&labels));
        Ok(out)
    }

    fn save(
        &self,
        state: &AppState,
        request: LabelRequest,
        tenant: Option<&str>,
    ) -> Result<Value, ApiError> {
        let entries = self.entries()?;
        // Another tenant's ask is answered exactly as one that was never logged.
        let ask = entries
            .iter()
            .filter(|e| visible(e, tenant))
            .filter_map(|e| match e {
                Entry::Ask(ask) if ask.request_id == request.request_id => Some(ask),
                _ => None,
            })
            .last()
            .ok_or_else(|| {
                ApiError::bad_request(format!(
                    "no ask with request_id `{}` in the query log",
                    request.request_id
                ))
            })?;
        let pipeline = state.pipeline();
        let label = checked_label(crate::state::embedded(&pipeline)?, ask, request, tenant)?;
        self.with_store(|store| {
            store
                .append(label.clone())
                .map_err(|e| ApiError::internal(e.to_string()))
        })??;
        let labels = self.latest(&entries, tenant)?;
        Ok(json!({"stored": label, "labels": LabelCounts::of(&labels)}))
    }
}

/// Whether a key of `tenant` may see `entry`: everything without a tenant; with one, that
/// tenant's asks and the feedback its keys sent.
fn visible(entry: &Entry, tenant: Option<&str>) -> bool {
    match (tenant, entry) {
        (Some(tenant), Entry::Ask(ask)) => ask.settings.tenant.as_deref() == Some(tenant),
        (Some(tenant), Entry::Feedback(f)) => f.tenant.as_deref() == Some(tenant),
        _ => true,
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

/// The label `request` describes for `ask`, or a 400 saying what does not fit.
fn checked_label(
    index: &Index,
    ask: &AskRecord,
    request: LabelRequest,
    tenant: Option<&str>,
) -> Result<Label, ApiError> {
    let span_given = request.doc_id.is_some()
        || request.start.is_some()
        || request.end.is_some()
        || request.text.is_some();
    let mut label = Label {
        time: lector_querylog::time::format(SystemTime::now()),
        request_id: request.request_id,
        question: ask.question.clone(),
        verdict: request.verdict,
        doc_id: None,
        start: None,
        end: None,
        text: None,
    };
    if request.verdict != LabelVerdict::Answer {
        if span_given {
            return Err(ApiError::bad_request(format!(
                "`doc_id`, `start`, `end` and `text` go only with verdict `answer`, not `{}`",
                request.verdict.name()
            )));
        }
        return Ok(label);
    }
    let missing = |field: &str| {
        ApiError::bad_request(format!(
            "verdict `answer` needs `{field}` (the answer span)"
        ))
    };
    let doc_id = request.doc_id.ok_or_else(|| missing("doc_id"))?;
    let start = request.start.ok_or_else(|| missing("start"))?;
    let end = request.end.ok_or_else(|| missing("end"))?;
    let text = request.text.ok_or_else(|| missing("text"))?;
    // A tenant's key labels only its own documents: another's is answered as a missing one.
    let allowed = tenant.map(tenant_filter);
    let document = index
        .document(&doc_id)
        .filter(|d| allowed.as_ref().is_none_or(|f| d.passes(f)))
        .ok_or_else(|| ApiError::bad_request(format!("no document `{doc_id}` in the index")))?;
    let found = char_slice(document.text, start, end);
    if text.is_empty() || found != Some(text.as_str()) {
        let found = found.map_or(
            "nothing (the range is empty or past the end)".to_string(),
            |f| format!("{f:?}"),
        );
        return Err(ApiError::bad_request(format!(
            "characters {start}..{end} of `{doc_id}` are {found}, not the `text` {text:?} \
             (offsets count Unicode scalar values)"
        )));
    }
    label.doc_id = Some(doc_id);
    label.start = Some(start);
    label.end = Some(end);
    label.text = Some(text);
    Ok(label)
}

fn down_voted(entries: &LogEntries, ask: &AskRecord) -> bool {
    entries
        .iter()
        .any(|e| matches!(e, Entry::Feedback(f) if f.judges(ask) && f.verdict == Verdict::Down))
}

/// An ask as the page shows it (to a key of `tenant`: only its own documents' text).
fn item(
    ask: &AskRecord,
    index: &Index,
    down_voted: bool,
    skipped: bool,
    tenant: Option<&str>,
) -> Value {
    let allowed = tenant.map(tenant_filter);
    let passages: Vec<Value> = ask
        .passages
        .iter()
        .map(|p| passage(p, index, allowed.as_ref()))
        .collect();
    let margin = margin(ask);
    json!({
        "request_id": ask.request_id,
        "time": ask.time,
        "question": ask.question,
        "answer": ask.answer,
        "abstention": ask.abstention,
        "na_prob": ask.na_prob,
        "threshold": ask.threshold,
        "confidence": ask.confidence,
        "runner_ups": ask.runner_ups,
        "margin": margin.is_finite().then_some(margin),
        "down_voted": down_voted,
        "skipped": skipped,
        "passages": passages,
    })
}

/// A logged passage with its text as the document holds it now (the log keeps offsets only),
/// and a `problem` when the document is gone or no longer reaches the passage's end.
fn passage(logged: &LoggedPassage, index: &Index, allowed: Option<&Filter>) -> Value {
    let mut out = json!({
        "doc_id": logged.doc_id,
        "passage": logged.passage,
        "start": logged.start,
        "end": logged.end,
        "score": logged.score,
        "title": null,
        "text": null,
        "problem": null,
    });
    // Another tenant's document (one written since under this id by a key without a tenant)
    // is shown as a missing one.
    let document = index
        .document(&logged.doc_id)
        .filter(|d| allowed.is_none_or(|f| d.passes(f)));
    let Some(document) = document else {
        out["problem"] =
            format!("the document `{}` is no longer in the index", logged.doc_id).into();
        return out;
    };
    out["title"] = document.title.into();
    let (text, problem) = passage_text(document.text, logged.start, logged.end);
    out["text"] = text.into();
    out["problem"] = problem.into();
    out
}

/// Characters `start..end` of `document`, cut at its end, and what is wrong if it is shorter.
fn passage_text(document: &str, start: usize, end: usize) -> (Option<&str>, Option<String>) {
    let length = document.chars().count();
    if start >= length {
        let problem = format!(
            "the document is shorter now ({length} characters): the passage started at character {start}"
        );
        return (None, Some(problem));
    }
    let text = char_slice(document, start, end.min(length));
    let problem = (end > length).then(|| {
        format!("the document is shorter now ({length} characters): the passage is cut at its end")
    });
    (text, problem)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passage_text_says_when_the_document_is_shorter() {
        let doc = "añb😀cd";
        assert_eq!(passage_text(doc, 1, 4), (Some("ñb😀"), None));
        let (text, problem) = passage_text(doc, 4, 9);
        assert_eq!(text, Some("cd"));
        assert!(problem.unwrap().contains("6 characters"));
        let (text, problem) = passage_text(doc, 6, 9);
        assert_eq!(text, None);
        assert!(problem.unwrap().contains("started at character 6"));
    }
}
