//! `POST /v1/feedback`: a user's verdict on an answer, appended to the query log beside the ask
//! it judges (found by the `request_id` the ask returned) and counted in `/metrics`.

use crate::api::parse_json;
use crate::error::ApiError;
use crate::state::AppState;
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::Json;
use lector_querylog::{Entry, FeedbackRecord, Verdict};
use serde::Deserialize;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::SystemTime;

/// Largest feedback body, in bytes.
pub const MAX_FEEDBACK_BYTES: usize = 16 << 10;

/// Longest `correct_answer` or `note`, in characters.
pub const MAX_FEEDBACK_CHARS: usize = 2000;

/// The body of `POST /v1/feedback`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FeedbackRequest {
    /// The `request_id` of the ask judged.
    pub request_id: String,
    /// `up` or `down`.
    pub verdict: Verdict,
    /// The answer the user says is right.
    pub correct_answer: Option<String>,
    /// Anything else the user says.
    pub note: Option<String>,
}

/// Logs the verdict: 202 once queued for the log; 404 when the server keeps no query log; 400
/// for an id this server cannot have issued or text over [`MAX_FEEDBACK_CHARS`].
pub async fn feedback(
    State(state): State<Arc<AppState>>,
    request: Request,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    if state.query_log().is_none() {
        return Err(ApiError::not_found(
            "feedback is off: the server keeps no query log (start it with --log-queries DIR)",
        ));
    }
    // Bound to the sender's tenant: it counts only for an ask of that tenant, so another
    // tenant's request id takes the vote (202, as for any id) and it changes nothing of theirs.
    let tenant = request
        .extensions()
        .get::<crate::keys::Principal>()
        .and_then(|p| p.tenant.clone());
    let (admission, body) = state
        .gate
        .admit_and_read(request, MAX_FEEDBACK_BYTES)
        .await?;
    drop(admission);
    let feedback: FeedbackRequest = parse_json(&body)?;
    check(&feedback)?;
    let verdict = match feedback.verdict {
        Verdict::Up => "up",
        Verdict::Down => "down",
    };
    state.metrics.record_feedback(verdict);
    let response = json!({"request_id": feedback.request_id, "verdict": verdict});
    state.log(|redact| {
        let mask = |text: Option<String>| text.map(|t| lector_querylog::masked(&t, redact).0);
        Entry::Feedback(FeedbackRecord {
            time: lector_querylog::time::format(SystemTime::now()),
            request_id: feedback.request_id,
            verdict: feedback.verdict,
            correct_answer: mask(feedback.correct_answer),
            note: mask(feedback.note),
            tenant,
        })
    });
    Ok((StatusCode::ACCEPTED, Json(response)))
}

fn check(feedback: &FeedbackRequest) -> Result<(), ApiError> {
    if !lector_querylog::is_request_id(&feedback.request_id) {
        return Err(ApiError::bad_request(format!(
            "`request_id` `{}` is not an id this server issues (16 hexadecimal digits, from an ask's response)",
            feedback.request_id.chars().take(40).collect::<String>()
        )));
    }
    for (field, text) in [
        ("correct_answer", &feedback.correct_answer),
        ("note", &feedback.note),
    ] {
        if text
            .as_ref()
            .is_some_and(|t| t.chars().count() > MAX_FEEDBACK_CHARS)
        {
            return Err(ApiError::bad_request(format!(
                "`{field}` is longer than {MAX_FEEDBACK_CHARS} characters"
            )));
        }
    }
    Ok(())
}
