//! Reading an admitted request's body: within its reserved size and the body timeout, counted
//! in the `lector_body_bytes_buffered` gauges while it is held (see [`crate::limit`]).

use crate::error::ApiError;
use axum::http::{header, HeaderMap};
use futures_util::StreamExt;
use std::ops::Deref;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::time::{timeout_at, Instant};

/// Body bytes buffered by all requests: now, and the most at once.
#[derive(Debug, Default)]
pub struct BodyGauge {
    now: AtomicUsize,
    peak: AtomicUsize,
}

impl BodyGauge {
    fn add(&self, bytes: usize) {
        let now = self.now.fetch_add(bytes, Ordering::SeqCst) + bytes;
        self.peak.fetch_max(now, Ordering::SeqCst);
    }

    fn sub(&self, bytes: usize) {
        self.now.fetch_sub(bytes, Ordering::SeqCst);
    }

    /// (bytes buffered now, most bytes buffered at once).
    pub fn now_and_peak(&self) -> (usize, usize) {
        (
            self.now.load(Ordering::SeqCst),
            self.peak.load(Ordering::SeqCst),
        )
    }
}

/// A request body read whole; its bytes leave the gauge when it is dropped.
pub struct Body {
    bytes: Vec<u8>,
    gauge: Arc<BodyGauge>,
}

impl Deref for Body {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        &self.bytes
    }
}

impl Drop for Body {
    fn drop(&mut self) {
        self.gauge.sub(self.bytes.len());
    }
}

/// The bytes to reserve for a body: its `Content-Length`, or `limit` when it declares none
/// (chunked); 413 when it declares more than `limit`.
pub fn declared_length(headers: &HeaderMap, limit: usize) -> Result<usize, ApiError> {
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    match declared {
        None => Ok(limit),
        Some(n) if n > limit as u64 => Err(ApiError::too_large(n, limit)),
        Some(n) => Ok(n as usize),
    }
}

/// Reads `body` whole, at most `reserved` bytes (413 beyond), by `deadline` (408 after it; the
/// timeout is `timeout`, for the message).
pub(crate) async fn read(
    body: axum::body::Body,
    reserved: usize,
    deadline: Instant,
    timeout: Duration,
    gauge: &Arc<BodyGauge>,
) -> Result<Body, ApiError> {
    let mut out = Body {
        bytes: Vec::with_capacity(reserved),
        gauge: gauge.clone(),
    };
    let mut chunks = body.into_data_stream();
    loop {
        let chunk = match timeout_at(deadline, chunks.next()).await {
            Err(_) => return Err(ApiError::body_timeout(timeout)),
            Ok(None) => return Ok(out),
            Ok(Some(Err(err))) => {
                return Err(ApiError::bad_request(format!(
                    "the body could not be read: {err}"
                )))
            }
            Ok(Some(Ok(chunk))) => chunk,
        };
        if out.bytes.len() + chunk.len() > reserved {
            return Err(ApiError::too_large(
                (out.bytes.len() + chunk.len()) as u64,
                reserved,
            ));
        }
        out.bytes.extend_from_slice(&chunk);
        gauge.add(chunk.len());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    #[test]
    fn the_declared_length_is_reserved_and_checked() {
        let mut headers = HeaderMap::new();
        assert_eq!(declared_length(&headers, 100).unwrap(), 100, "chunked");
        headers.insert(header::CONTENT_LENGTH, HeaderValue::from_static("40"));
        assert_eq!(declared_length(&headers, 100).unwrap(), 40);
        headers.insert(header::CONTENT_LENGTH, HeaderValue::from_static("101"));
        let err = declared_length(&headers, 100).unwrap_err();
        assert_eq!(err.status, axum::http::StatusCode::PAYLOAD_TOO_LARGE);
    }

    #[tokio::test]
    async fn the_gauge_counts_bodies_while_they_are_held() {
        let gauge = Arc::new(BodyGauge::default());
        let deadline = Instant::now() + Duration::from_secs(5);
        let read_one = |text: &'static str| {
            read(
                axum::body::Body::from(text),
                10,
                deadline,
                Duration::from_secs(5),
                &gauge,
            )
        };
        let first = read_one("12345").await.unwrap();
        let second = read_one("123").await.unwrap();
        assert_eq!(&first[..], b"12345");
        assert_eq!(gauge.now_and_peak(), (8, 8));
        drop(first);
        drop(second);
        assert_eq!(gauge.now_and_peak(), (0, 8));
        let err = read_one("more than ten bytes").await.err().unwrap();
        assert_eq!(err.status, axum::http::StatusCode::PAYLOAD_TOO_LARGE);
        assert_eq!(gauge.now_and_peak().0, 0, "a refused body leaves the gauge");
    }
}
