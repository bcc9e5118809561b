//! The JSON routes: ask (extractive here, generative in [`crate::generative`]), search, and
//! document writes and reads.
//!
//! Bodies are read only once the request is admitted ([`crate::limit`]), and parsed here rather
//! than by axum's `Json` extractor, so every malformed body is a 400 with serde's message (which
//! names an unknown or missing field and the position), not a 415 or 422, and a body over the
//! route's limit is a 413, all with a JSON error body.

use crate::error::ApiError;
use crate::generative::{self, GenerativeAsk};
use crate::keys::{Principal, TENANT_FIELD};
use crate::limit::MAX_K;
use crate::metrics::AnswerSignals;
use crate::state::{embedded, AppState, Config};
use axum::extract::rejection::QueryRejection;
use axum::extract::{Extension, Path, Query, Request, State};
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response as HttpResponse};
use axum::Json;
use lector_index::{AddOutcome, Document, DocumentCursor, Filter, Mode, SearchOptions};
use lector_ingest::IsolatedReader;
use lector_pipeline::multihop::{Decomposition, LlmDecomposer};
use lector_pipeline::{AskOptions, Response};
use lector_querylog::{AskSettings, Entry};
use lector_reader::ReadParams;
use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Instant;

/// The body of `POST /v1/ask`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AskRequest {
    /// The question.
    pub question: String,
    /// Passages to retrieve and read (1 to [`MAX_K`]).
    #[serde(default = "default_k")]
    pub k: usize,
    /// `extractive` [default] or `generative`; `bm25`, `dense` or `hybrid` ask extractively with
    /// that retrieval (what the field meant before generation, kept working).
    pub mode: Option<String>,
    /// `bm25`, `dense` or `hybrid` [default: the server's].
    pub retrieval: Option<String>,
    /// Add up the scores of answers that normalise to the same text.
    #[serde(default)]
    pub vote: bool,
    /// Among near-tied answers, prefer the newest dated document.
    #[serde(default)]
    pub prefer_recent: bool,
    /// Retrieval-rank prior exponent (0 to [`lector_pipeline::MAX_RANK_PRIOR`]; see
    /// [`lector_pipeline::Aggregation::rank_prior`]).
    #[serde(default = "default_rank_prior")]
    pub rank_prior: f64,
    /// Flag the answer as ambiguous while it is at most this many times as likely to be right
    /// as a disagreeing runner-up from another document (at least 1; calibrated confidences, so
    /// only on an index with a confidence map; see [`lector_pipeline::ambiguity`]).
    #[serde(default = "default_ambiguity_odds")]
    pub ambiguity_odds: f64,
    /// Answers kept per passage (the runner-ups come from these).
    #[serde(default = "default_answers")]
    pub answers_per_passage: usize,
    /// Retrieval hops: 1 [default], or 2 for multi-hop questions (extractive only; see
    /// [`lector_pipeline::multihop`]); the response then carries the chain in `hops`.
    #[serde(default = "one")]
    pub hops: usize,
    /// With `hops` 2: how bridge questions are split into sub-questions: `rules` [default],
    /// `llm` (the server's generator writes them; 501 without one) or `none`.
    #[serde(default)]
    pub decompose: lector_pipeline::multihop::Decomposition,
    /// Add the reader's start/end probabilities over the answer's passage (one more reader
    /// pass over one passage).
    #[serde(default = "yes")]
    pub probabilities: bool,
    /// Generative: answer with server-sent events (`token`s, then the `answer`, then `done`).
    #[serde(default)]
    pub stream: bool,
    /// Generative: the most tokens to generate [default: the prompt's own, else
    /// [`generative::DEFAULT_MAX_TOKENS`]].
    pub max_tokens: Option<usize>,
    /// Generative: a prompt of the server's library by name (`GET /v1/prompts`) [default: the
    /// library's `default`].
    pub prompt: Option<String>,
    /// Generative: a whole prompt file's text (TOML), only where the operator allows client
    /// prompts (`lector serve --allow-client-prompts`; 403 otherwise).
    pub prompt_toml: Option<String>,
    /// Generative: sampling temperature; absent or 0: greedy.
    pub temperature: Option<f64>,
    /// Generative, sampling: nucleus probability mass [default: 1].
    pub top_p: Option<f64>,
    /// Generative, sampling: the seed [default: a new one each time].
    pub seed: Option<u64>,
    /// Only documents passing this filter: Haystack 2's JSON shape
    /// (`{"field": "meta.year", "operator": ">=", "value": 2023}`, joined with
    /// `{"operator": "AND", "conditions": [...]}`) or the command line's text syntax as a string.
    pub filter: Option<Value>,
}

/// What an ask does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum AnswerMode {
    Extractive,
    Generative,
}

impl AskRequest {
    /// The answer mode and the retrieval mode asked for (400 when `mode` and `retrieval` both
    /// name a retrieval).
    fn modes(&self) -> Result<(AnswerMode, Option<&str>), ApiError> {
        let retrieval = self.retrieval.as_deref();
        match self.mode.as_deref() {
            None | Some("extractive") => Ok((AnswerMode::Extractive, retrieval)),
            Some("generative") => Ok((AnswerMode::Generative, retrieval)),
            Some(mode) if retrieval.is_some() => Err(ApiError::bad_request(format!(
                "`mode` `{mode}` and `retrieval` both name the retrieval: send only `retrieval`"
            ))),
            Some(mode) => Ok((AnswerMode::Extractive, Some(mode))),
        }
    }

    /// The generation fields sent, which an extractive ask refuses.
    fn generation_fields(&self) -> Vec<&'static str> {
        let mut sent = Vec::new();
        for (name, given) in [
            ("stream", self.stream),
            ("max_tokens", self.max_tokens.is_some()),
            ("prompt", self.prompt.is_some()),
            ("prompt_toml", self.prompt_toml.is_some()),
            ("temperature", self.temperature.is_some()),
            ("top_p", self.top_p.is_some()),
            ("seed", self.seed.is_some()),
        ] {
            if given {
                sent.push(name);
            }
        }
        sent
    }
}
fn default_k() -> usize {
    5
}

fn default_rank_prior() -> f64 {
    lector_pipeline::DEFAULT_RANK_PRIOR
}

fn default_ambiguity_odds() -> f64 {
    lector_pipeline::DEFAULT_AMBIGUITY_ODDS
}

fn default_answers() -> usize {
    3
}

fn yes() -> bool {
    true
}

fn one() -> usize {
    1
}

/// The query of `GET /v1/search`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SearchParams {
    /// The query.
    pub q: String,
    /// Passages to return (1 to [`MAX_K`]).
    #[serde(default = "default_search_k")]
    pub k: usize,
    /// `bm25`, `dense` or `hybrid` [default: the server's].
    pub mode: Option<String>,
    /// Only documents passing this filter (the command line's text syntax).
    pub filter: Option<String>,
}

fn default_search_k() -> usize {
    10
}

/// The most documents one `GET /v1/documents` page lists.
pub const MAX_LIST_LIMIT: usize = 1000;

/// The query of `GET /v1/documents`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListParams {
    /// Where the page starts: the `next_cursor` of the page before (opaque); the first
    /// document when absent.
    pub cursor: Option<String>,
    /// Documents to skip (after `cursor`), in the index's own order.
    #[serde(default)]
    pub offset: usize,
    /// Documents to list (1 to [`MAX_LIST_LIMIT`]).
    #[serde(default = "default_list_limit")]
    pub limit: usize,
}

fn default_list_limit() -> usize {
    100
}

/// A document in the body of `POST /v1/documents`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DocumentIn {
    pub id: String,
    pub title: Option<String>,
    /// The text; empty when `file` is sent instead.
    #[serde(default)]
    pub text: String,
    pub date: Option<String>,
    /// Filterable fields (an object); `meta`, Haystack's name for it, is taken too.
    #[serde(alias = "meta")]
    pub metadata: Option<Value>,
    /// A PDF or Word file instead of `text`, read as `lector index add` reads one.
    pub file: Option<FileIn>,
}

/// An uploaded file: its name (whose extension, `.pdf` or `.docx`, says how to read it) and its
/// bytes in base64 (the routes take JSON only, see [`crate::access`]).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileIn {
    pub name: String,
    pub base64: String,
}

/// Parses a JSON body: 400 with serde's message when it does not fit `T`.
pub fn parse_json<T: DeserializeOwned>(body: &[u8]) -> Result<T, ApiError> {
    serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("invalid JSON body: {e}")))
}

/// `POST /v1/ask`: extractive, the pipeline's response, plus `token_probabilities` (per reader
/// window over the answer's passage, or the best candidate's when abstaining) unless turned off;
/// generative, see [`crate::generative`].
pub async fn ask(
    State(state): State<Arc<AppState>>,
    request: Request,
) -> Result<HttpResponse, ApiError> {
    let started = Instant::now();
    let principal = request.extensions().get::<Principal>().cloned();
    let limit = state.gate.limits().max_ask_bytes;
    let (admission, body) = state.gate.admit_and_read(request, limit).await?;
    let request: AskRequest = parse_json(&body)?;
    drop(body);
    if request.question.trim().is_empty() {
        return Err(ApiError::bad_request("the question is empty"));
    }
    let (mode, retrieval) = request.modes()?;
    let filter = request_filter(request.filter.as_ref())?;
    let search = search_options(&state, retrieval, filter, principal.as_ref())?;
    if mode == AnswerMode::Generative {
        let tenant = principal.as_ref().and_then(|p| p.tenant.clone());
        let ask = generative_ask(&state.config, &request, search, tenant)?;
        return generative::ask(state, admission, ask, started).await;
    }
    if let Some(field) = request.generation_fields().first() {
        return Err(ApiError::bad_request(format!(
            "`{field}` needs \"mode\": \"generative\""
        )));
    }
    let options = ask_options(&request, search)?;
    let shared = state.clone();
    let id = lector_querylog::request_id();
    let response_id = id.clone();
    let tenant = principal.and_then(|p| p.tenant);
    let out = state
        .gate
        .run_admitted(admission, move || {
            answer(&shared, &request, &options, &id, started, tenant)
        })
        .await?;
    Ok(with_request_id(Json(out).into_response(), &response_id))
}

/// `response` with the `x-request-id` header (the id feedback refers to).
pub fn with_request_id(mut response: HttpResponse, id: &str) -> HttpResponse {
    if let Ok(value) = HeaderValue::from_str(id) {
        response.headers_mut().insert(REQUEST_ID, value);
    }
    response
}

/// The header carrying an ask's request id.
pub const REQUEST_ID: &str = "x-request-id";

fn generative_ask(
    config: &Config,
    request: &AskRequest,
    search: SearchOptions,
    tenant: Option<String>,
) -> Result<GenerativeAsk, ApiError> {
    check_k(request.k)?;
    let prompt = generative::prompt(
        config,
        request.prompt.as_deref(),
        request.prompt_toml.as_deref(),
    )?;
    let options = generative::options(
        prompt.max_new_tokens_for(request.max_tokens),
        request.temperature,
        request.top_p,
        request.seed,
        Vec::new(),
    )?;
    Ok(GenerativeAsk {
        question: request.question.clone(),
        prompt,
        k: request.k,
        search,
        options,
        stream: request.stream,
        tenant,
    })
}

fn ask_options(request: &AskRequest, search: SearchOptions) -> Result<AskOptions, ApiError> {
    check_k(request.k)?;
    if !(1..=2).contains(&request.hops) {
        return Err(ApiError::bad_request("hops must be 1 or 2"));
    }
    let options = AskOptions {
        search: Some(search),
        k: request.k,
        vote: request.vote,
        prefer_recent: request.prefer_recent,
        rank_prior: request.rank_prior,
        read: ReadParams {
            top_k: request.answers_per_passage,
            ..ReadParams::default()
        },
        ambiguity_odds: request.ambiguity_odds,
    };
    options.validate()?;
    Ok(options)
}

fn check_k(k: usize) -> Result<(), ApiError> {
    if (1..=MAX_K).contains(&k) {
        Ok(())
    } else {
        Err(ApiError::bad_request(format!(
            "k must be between 1 and {MAX_K}"
        )))
    }
}

/// The server's search options with the request's mode and filter. A filter the server was
/// started with, and a tenant key's, stay: the request's can only narrow them.
fn search_options(
    state: &AppState,
    mode: Option<&str>,
    filter: Option<Filter>,
    principal: Option<&Principal>,
) -> Result<SearchOptions, ApiError> {
    let mut options = state.config.search.clone();
    if let Some(mode) = mode {
        options.mode = mode.parse::<Mode>().map_err(ApiError::bad_request)?;
    }
    let tenant = principal.and_then(Principal::filter);
    let mut all: Vec<Filter> = [options.filter.take(), tenant, filter]
        .into_iter()
        .flatten()
        .collect();
    options.filter = match all.len() {
        0 | 1 => all.pop(),
        _ => Some(Filter::And(all)),
    };
    // A tenant's scores must not move with documents it cannot see.
    options.statistics_within_filter |= principal.is_some_and(|p| p.tenant.is_some());
    Ok(options)
}

/// An ask's `filter`: a JSON filter object, or a string in the text syntax.
fn request_filter(filter: Option<&Value>) -> Result<Option<Filter>, ApiError> {
    let parsed = match filter {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::String(text)) => Filter::parse(text),
        Some(json) => Filter::from_json(json),
    };
    parsed
        .map(Some)
        .map_err(|e| ApiError::bad_request(e.to_string()))
}

fn answer(
    state: &AppState,
    request: &AskRequest,
    options: &AskOptions,
    request_id: &str,
    started: Instant,
    tenant: Option<String>,
) -> Result<Value, ApiError> {
    let pipeline = state.pipeline();
    let response: Response = match request.hops {
        1 => pipeline.ask(&request.question, options)?,
        hops => {
            let hops = lector_pipeline::HopOptions {
                hops,
                ..lector_pipeline::HopOptions::default()
            };
            let llm = match request.decompose {
                Decomposition::Llm => Some(LlmDecomposer::new(state.generator()?)),
                _ => None,
            };
            let decomposer = request.decompose.decomposer(llm.as_ref());
            pipeline.ask_hops_with(&request.question, options, &hops, decomposer)?
        }
    };
    let mut out = to_json(&response)?;
    let explained = response.answer.as_ref().or(response.candidates.first());
    if let (true, Some(candidate)) = (request.probabilities, explained) {
        let windows = pipeline.token_probabilities(
            &request.question,
            &candidate.evidence.passage_text,
            options,
        )?;
        out["token_probabilities"] = to_json(&windows)?;
    }
    record_extractive(
        state, request, options, &response, request_id, started, tenant,
    );
    out["request_id"] = request_id.into();
    Ok(out)
}

/// Counts the answer's quality signals and logs the ask (when the server logs).
fn record_extractive(
    state: &AppState,
    request: &AskRequest,
    options: &AskOptions,
    response: &Response,
    request_id: &str,
    started: Instant,
    tenant: Option<String>,
) {
    let retrieval = options.search.as_ref().map_or("bm25", |s| s.mode.name());
    let t = &response.timings;
    let mut stages = vec![("retrieve", t.retrieve_ms), ("read", t.read_ms)];
    if t.rerank_ms > 0.0 {
        stages.push(("rerank", t.rerank_ms));
    }
    stages.push(("aggregate", t.aggregate_ms));
    state.metrics.record_answer(&AnswerSignals {
        mode: "extractive",
        abstained: response.answer.is_none(),
        confidence: Some(1.0 - response.na_prob),
        top_score: response.passages.first().map(|p| (retrieval, p.hit.score)),
        unsupported: None,
        stages,
    });
    let settings = AskSettings {
        mode: "extractive".into(),
        retrieval: retrieval.into(),
        k: request.k,
        hops: request.hops,
        vote: request.vote,
        prefer_recent: request.prefer_recent,
        rank_prior: request.rank_prior,
        tenant,
    };
    let total_ms = started.elapsed().as_secs_f64() * 1000.0;
    state.log(|redact| {
        Entry::Ask(lector_querylog::extractive_record(
            request_id, settings, response, total_ms, redact,
        ))
    });
}

fn to_json(value: &impl serde::Serialize) -> Result<Value, ApiError> {
    serde_json::to_value(value).map_err(|e| ApiError::internal(e.to_string()))
}

/// `GET /v1/search?q=...&k=10&mode=bm25`: ranked passages with scores and offsets.
pub async fn search(
    State(state): State<Arc<AppState>>,
    principal: Option<Extension<Principal>>,
    params: Result<Query<SearchParams>, QueryRejection>,
) -> Result<Json<Value>, ApiError> {
    let Query(params) = params?;
    if params.q.trim().is_empty() {
        return Err(ApiError::bad_request("the query `q` is empty"));
    }
    check_k(params.k)?;
    let filter = params.filter.as_deref().map(Filter::parse).transpose();
    let filter = filter.map_err(|e| ApiError::bad_request(e.to_string()))?;
    let principal = principal.map(|Extension(p)| p);
    let options = search_options(&state, params.mode.as_deref(), filter, principal.as_ref())?;
    let shared = state.clone();
    let out = state
        .gate
        .run(move || {
            let pipeline = shared.pipeline();
            let hits = pipeline.retrieve(&params.q, &options, params.k)?;
            Ok(json!({"query": params.q, "mode": options.mode.name(), "hits": hits}))
        })
        .await?;
    Ok(Json(out))
}

/// `POST /v1/documents`: adds or replaces one document (a JSON object) or many (an array), in
/// one commit. Answers only once the commit is on disk: 201 when a document was new, else 200.
/// The batch is checked first; one invalid document rejects it all.
pub async fn put_documents(
    State(state): State<Arc<AppState>>,
    request: Request,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    // Refused before the body is read: no upload can change that answer.
    state.check_writable()?;
    let principal = request.extensions().get::<Principal>().cloned();
    let limit = state.gate.limits().max_documents_bytes;
    let (admission, body) = state.gate.admit_and_read(request, limit).await?;
    // Parsing the body and reading uploaded files is work like any other: on a worker, within
    // the timeout, never on the threads that answer every other request.
    let uploads = state.config.upload_reader.clone();
    let owner = principal.clone();
    let (admission, documents) = state
        .gate
        .run_keeping(admission, move || {
            let batch: Vec<DocumentIn> = match body.iter().find(|b| !b.is_ascii_whitespace()) {
                Some(b'[') => parse_json(&body)?,
                _ => vec![parse_json(&body)?],
            };
            drop(body);
            batch
                .into_iter()
                .enumerate()
                .map(|(i, d)| checked(i, d, uploads.as_deref()).map(|d| owned(d, owner.as_ref())))
                .collect::<Result<Vec<_>, _>>()
        })
        .await?;
    let tenant = principal.as_ref().and_then(Principal::filter);
    if documents.is_empty() {
        return Err(ApiError::bad_request("no documents in the body"));
    }
    let (results, info, documents) = state
        .gate
        .run_write(admission, state.lock_writer(), move |mut writer| {
            let results: Vec<(String, AddOutcome)> = documents
                .into_iter()
                .map(|d| (d.id.clone(), writer.writer().add(d)))
                .collect();
            let info = writer.commit()?;
            let documents = writer.writer().committed().count(tenant.as_ref());
            Ok((results, info, documents))
        })
        .await?;
    let count = |o: AddOutcome| results.iter().filter(|(_, r)| *r == o).count();
    let added = count(AddOutcome::Added);
    let status = if added > 0 {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    let listed: Vec<Value> = results
        .iter()
        .map(|(id, outcome)| json!({"id": id, "outcome": outcome_name(*outcome)}))
        .collect();
    let body = json!({
        "added": added,
        "replaced": count(AddOutcome::Replaced),
        "unchanged": count(AddOutcome::Unchanged),
        "generation": info.generation,
        "documents": documents,
        "results": listed,
    });
    let is_tenant = principal.as_ref().is_some_and(|p| p.tenant.is_some());
    Ok((status, Json(tenant_view(body, is_tenant))))
}

/// A response as a tenant's key sees it: without the index's generation, which moves with
/// every tenant's writes.
fn tenant_view(mut body: Value, tenant: bool) -> Value {
    if tenant {
        if let Some(fields) = body.as_object_mut() {
            fields.remove("generation");
        }
    }
    body
}

fn outcome_name(outcome: AddOutcome) -> &'static str {
    match outcome {
        AddOutcome::Added => "added",
        AddOutcome::Replaced => "replaced",
        AddOutcome::Unchanged => "unchanged",
    }
}

/// `doc` as a tenant's key stores it: under `<tenant>/<id>`, with its `tenant` field set.
fn owned(mut doc: Document, principal: Option<&Principal>) -> Document {
    if let Some(
        principal @ Principal {
            tenant: Some(tenant),
            ..
        },
    ) = principal
    {
        doc.id = principal.document_id(&doc.id);
        doc.set_field(TENANT_FIELD, tenant.as_str().into());
    }
    doc
}

/// The stored id a request's document id names, and the filter its documents must pass (a
/// tenant's key: its own documents only).
fn addressed(principal: Option<Extension<Principal>>, id: &str) -> (String, Option<Filter>) {
    match principal {
        Some(Extension(principal)) => (principal.document_id(id), principal.filter()),
        None => (id.to_string(), None),
    }
}

/// A document with an id and some text, or a 400 naming it by position.
fn checked(
    position: usize,
    doc: DocumentIn,
    uploads: Option<&IsolatedReader>,
) -> Result<Document, ApiError> {
    let problem = if doc.id.trim().is_empty() {
        Some("the id is empty")
    } else if doc.text.trim().is_empty() && doc.file.is_none() {
        Some("the text is empty")
    } else if !doc.text.is_empty() && doc.file.is_some() {
        Some("send `text` or `file`, not both")
    } else if doc
        .metadata
        .as_ref()
        .is_some_and(|m| !(m.is_object() || m.is_null()))
    {
        Some("`metadata` must be an object")
    } else if doc
        .metadata
        .as_ref()
        .is_some_and(|m| lector_ingest::nesting_depth(m) > lector_ingest::MAX_METADATA_DEPTH)
    {
        Some("`metadata` nests too deep")
    } else {
        None
    };
    if let Some(problem) = problem {
        return Err(ApiError::bad_request(format!(
            "document {position} (`{}`): {problem}",
            doc.id
        )));
    }
    let metadata = doc.metadata.filter(|m| !m.is_null());
    let Some(file) = doc.file else {
        return Ok(Document {
            id: doc.id,
            title: doc.title,
            text: doc.text,
            date: doc.date,
            metadata,
            embedding: None,
        });
    };
    let mut read = read_upload(position, &doc.id, &file, uploads)?;
    // The request's own fields win over what the file says of itself.
    read.title = doc.title.or(read.title);
    read.date = doc.date.or(read.date);
    if let Some(Value::Object(fields)) = metadata {
        for (key, value) in fields {
            read.set_field(&key, value);
        }
    }
    Ok(read)
}

/// The document of an uploaded PDF or Word file (read by `uploads`' workers when there are
/// some), or a 400 naming it and what is wrong.
fn read_upload(
    position: usize,
    id: &str,
    file: &FileIn,
    uploads: Option<&IsolatedReader>,
) -> Result<Document, ApiError> {
    use base64::Engine;
    let refused =
        |problem: String| ApiError::bad_request(format!("document {position} (`{id}`): {problem}"));
    let format = match lector_ingest::Format::of(std::path::Path::new(&file.name)) {
        Some(f @ (lector_ingest::Format::Pdf | lector_ingest::Format::Docx)) => f,
        _ => {
            return Err(refused(format!(
                "`file.name` `{}` is not a .pdf or .docx file (send other formats as `text`)",
                file.name
            )))
        }
    };
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(file.base64.trim())
        .map_err(|e| refused(format!("`file.base64` is not base64: {e}")))?;
    let options = lector_ingest::IngestOptions::default();
    let read = match uploads {
        Some(reader) => reader.read_bytes(id, format, &bytes, &options),
        None => lector_ingest::read_bytes(id, format, &bytes, &options),
    };
    read.map_err(|e| match e {
        lector_ingest::Error::InvalidInput { .. } => refused(e.to_string()),
        // The worker could not be started: the server's fault, not the file's.
        other => ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            format!("cannot read uploads now: {other}"),
        ),
    })
}

/// `DELETE /v1/documents/{id}`: removes a document and commits; 404 when there is none.
pub async fn delete_document(
    State(state): State<Arc<AppState>>,
    principal: Option<Extension<Principal>>,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let (id, tenant) = addressed(principal, &id);
    let admission = state.gate.admit(0)?;
    let out = state
        .gate
        .run_write(admission, state.lock_writer(), move |mut writer| {
            // Another tenant's document is answered exactly as a missing one.
            let visible = writer
                .writer()
                .committed()
                .document(&id)
                .is_some_and(|d| tenant.as_ref().is_none_or(|t| d.passes(t)));
            if !visible || !writer.writer().remove(&id) {
                return Err(ApiError::not_found(format!("no document `{id}`")));
            }
            let info = writer.commit()?;
            let documents = writer.writer().committed().count(tenant.as_ref());
            let body =
                json!({"deleted": id, "generation": info.generation, "documents": documents});
            Ok(tenant_view(body, tenant.is_some()))
        })
        .await?;
    Ok(Json(out))
}

/// `GET /v1/documents/{id}`: the stored document with its passages' offsets.
pub async fn get_document(
    State(state): State<Arc<AppState>>,
    principal: Option<Extension<Principal>>,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let (id, tenant) = addressed(principal, &id);
    let shared = state.clone();
    let out = state
        .gate
        .run(move || {
            let pipeline = shared.pipeline();
            let doc = embedded(&pipeline)?
                .document(&id)
                .filter(|d| tenant.as_ref().is_none_or(|t| d.passes(t)))
                .ok_or_else(|| ApiError::not_found(format!("no document `{id}`")))?;
            let metadata: Option<Value> = doc.metadata.and_then(|m| serde_json::from_str(m).ok());
            Ok(json!({
                "id": doc.id,
                "title": doc.title,
                "text": doc.text,
                "date": doc.date,
                "metadata": metadata,
                "passages": doc.passages,
            }))
        })
        .await?;
    Ok(Json(out))
}

/// `GET /v1/documents?limit=100&cursor=...`: one page of the documents in the index's own order
/// (segments oldest first, documents in the order they were added; see
/// [`lector_index::Index::documents_page`]), each with its title, date, passage count and
/// character count (Unicode code points, as offsets count), the `total` in the snapshot read,
/// and `next_cursor`, where the next page starts (`null` after the last page). The work is the
/// page, never the whole index: nothing is sorted or collected per request.
pub async fn list_documents(
    State(state): State<Arc<AppState>>,
    principal: Option<Extension<Principal>>,
    params: Result<Query<ListParams>, QueryRejection>,
) -> Result<Json<Value>, ApiError> {
    let tenant = principal.and_then(|Extension(p)| p.filter());
    let Query(ListParams {
        cursor,
        offset,
        limit,
    }) = params?;
    if !(1..=MAX_LIST_LIMIT).contains(&limit) {
        return Err(ApiError::bad_request(format!(
            "limit must be between 1 and {MAX_LIST_LIMIT}"
        )));
    }
    let from = match cursor.as_deref() {
        Some(text) => Some(
            crate::cursor::open(text)
                .and_then(|place| DocumentCursor::decode(&place))
                .ok_or_else(|| {
                    ApiError::bad_request(
                        "`cursor` is not a cursor this server gave (`next_cursor`)",
                    )
                })?,
        ),
        None => None,
    };
    let shared = state.clone();
    let out = state
        .gate
        .run(move || {
            let pipeline = shared.pipeline();
            let index = embedded(&pipeline)?;
            let page = index.documents_page(from.as_ref(), offset, limit, tenant.as_ref());
            let documents: Vec<Value> = page.documents.iter().map(listed).collect();
            // Sealed: the place it names counts every tenant's documents (see `cursor`).
            let next = page
                .next
                .map(|c| {
                    crate::cursor::seal(&c.encode())
                        .ok_or_else(|| ApiError::internal("no random source to seal the cursor"))
                })
                .transpose()?;
            let body = json!({
                "total": index.count(tenant.as_ref()),
                "offset": offset,
                "limit": limit,
                "generation": index.generation(),
                "documents": documents,
                "next_cursor": next,
            });
            Ok(tenant_view(body, tenant.is_some()))
        })
        .await?;
    Ok(Json(out))
}

/// A document as `GET /v1/documents` lists it.
fn listed(doc: &lector_index::DocumentRef) -> Value {
    json!({
        "id": doc.id,
        "title": doc.title,
        "date": doc.date,
        "passage_count": doc.passages.len(),
        "char_count": doc.text.chars().count(),
    })
}
