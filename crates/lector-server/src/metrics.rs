//! Request metrics in the Prometheus text format (version 0.0.4): counts by route, method and
//! status, a latency histogram per route, server errors, generations by how they finished and
//! the tokens generated, the gate's load and the index's size; and answer quality: answers and
//! abstentions, confidence, the top retrieval score, generated answers flagged unsupported,
//! feedback verdicts, time per ask stage and the query log's lines.

use axum::http::Method;
use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::Mutex;
use std::time::Duration;

/// Upper bounds of the latency buckets, in seconds.
pub const BUCKETS: [f64; 14] = [
    0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
];

/// Upper bounds of the confidence buckets (a probability).
pub const CONFIDENCE_BUCKETS: [f64; 10] = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0];

/// Upper bounds of the top-retrieval-score buckets: wide, as the scales differ by retrieval
/// (fused reciprocal ranks near 0.03, cosine similarities up to 1, BM25 scores in the tens).
pub const SCORE_BUCKETS: [f64; 16] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 25.0, 50.0, 100.0,
];

/// A histogram: counts per bucket (not cumulative), their sum and count.
#[derive(Debug, Clone)]
struct Histogram {
    bounds: &'static [f64],
    buckets: Vec<u64>,
    sum: f64,
    count: u64,
}

impl Histogram {
    fn new(bounds: &'static [f64]) -> Self {
        Histogram {
            bounds,
            buckets: vec![0; bounds.len()],
            sum: 0.0,
            count: 0,
        }
    }

    fn observe(&mut self, value: f64) {
        if let Some(i) = self.bounds.iter().position(|&le| value <= le) {
            self.buckets[i] += 1;
        }
        self.sum += value;
        self.count += 1;
    }
}

/// What one answered (or abstained) ask says about answer quality ([`Metrics::record_answer`]).
#[derive(Debug, Clone, Default)]
pub struct AnswerSignals {
    /// `extractive` or `generative`.
    pub mode: &'static str,
    /// No answer: an extractive abstention, or a generative refusal.
    pub abstained: bool,
    /// Extractive: the probability that the passages hold an answer (`1 - na_prob`).
    pub confidence: Option<f64>,
    /// The retrieval mode and the score of the first passage retrieved.
    pub top_score: Option<(&'static str, f64)>,
    /// Generative: whether a sentence of the answer was flagged unsupported.
    pub unsupported: Option<bool>,
    /// Time per stage in milliseconds, by stage name.
    pub stages: Vec<(&'static str, f64)>,
}

#[derive(Default)]
struct Inner {
    /// (route, method, status) -> requests.
    requests: BTreeMap<(String, String, u16), u64>,
    /// route -> latency.
    latency: BTreeMap<String, Histogram>,
    /// finish reason (`stop`, `length`, `cancelled`) -> generations.
    generations: BTreeMap<&'static str, u64>,
    /// Tokens generated, all generations together.
    generated_tokens: u64,
    /// (mode, `answered` | `abstained`) -> asks.
    answers: BTreeMap<(&'static str, &'static str), u64>,
    confidence: Option<Histogram>,
    /// retrieval mode -> the first passage's score.
    top_score: BTreeMap<&'static str, Histogram>,
    /// (generated answers, of which flagged unsupported).
    generated_answers: (u64, u64),
    /// verdict -> feedback received.
    feedback: BTreeMap<&'static str, u64>,
    /// stage -> seconds.
    stages: BTreeMap<&'static str, Histogram>,
    /// Segment merges (done, failed or panicked).
    merges: (u64, u64),
}

/// The request metrics of one server.
#[derive(Default)]
pub struct Metrics {
    inner: Mutex<Inner>,
}

/// The `method` label of a request: the methods the API uses or a client may probe with, else
/// `other`, so that made-up methods cannot add series. (Routes are labelled by their matched
/// pattern, and every unmatched path by `unmatched`, for the same reason.)
pub fn method_label(method: &Method) -> &'static str {
    match *method {
        Method::GET => "GET",
        Method::HEAD => "HEAD",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::PATCH => "PATCH",
        Method::DELETE => "DELETE",
        Method::OPTIONS => "OPTIONS",
        _ => "other",
    }
}

/// Gauges sampled when the metrics are rendered.
#[derive(Debug, Clone, Copy, Default)]
pub struct Gauges {
    /// Live documents in the index.
    pub documents: usize,
    /// Live passages in the index.
    pub passages: usize,
    /// The index's commit generation.
    pub generation: u64,
    /// CPU-heavy requests running.
    pub running: usize,
    /// Requests admitted and waiting for a worker or sending their body.
    pub queued: usize,
    /// Request body bytes buffered now.
    pub body_bytes: usize,
    /// The most request body bytes buffered at once since the start.
    pub body_bytes_peak: usize,
    /// The body budget, in bytes.
    pub body_budget: usize,
    /// Connections open.
    pub connections: usize,
    /// The query log's line counts, when the server logs.
    pub query_log: Option<LogLines>,
}

/// Lines of the query log so far.
#[derive(Debug, Clone, Copy, Default)]
pub struct LogLines {
    pub written: u64,
    pub dropped: u64,
    pub failed: u64,
}

impl Metrics {
    /// Records one finished request. `route` is the matched route pattern (e.g.
    /// `/v1/documents/{id}`), so ids do not multiply the series.
    pub fn record(&self, route: &str, method: &str, status: u16, elapsed: Duration) {
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        *inner
            .requests
            .entry((route.to_string(), method.to_string(), status))
            .or_default() += 1;
        inner
            .latency
            .entry(route.to_string())
            .or_insert_with(|| Histogram::new(&BUCKETS))
            .observe(elapsed.as_secs_f64());
    }

    /// Records the answer-quality signals of one ask.
    pub fn record_answer(&self, signals: &AnswerSignals) {
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let outcome = if signals.abstained {
            "abstained"
        } else {
            "answered"
        };
        *inner.answers.entry((signals.mode, outcome)).or_default() += 1;
        if let Some(confidence) = signals.confidence {
            inner
                .confidence
                .get_or_insert_with(|| Histogram::new(&CONFIDENCE_BUCKETS))
                .observe(confidence);
        }
        if let Some((retrieval, score)) = signals.top_score {
            inner
                .top_score
                .entry(retrieval)
                .or_insert_with(|| Histogram::new(&SCORE_BUCKETS))
                .observe(score);
        }
        if let Some(unsupported) = signals.unsupported {
            inner.generated_answers.0 += 1;
            inner.generated_answers.1 += u64::from(unsupported);
        }
        for &(stage, ms) in &signals.stages {
            inner
                .stages
                .entry(stage)
                .or_insert_with(|| Histogram::new(&BUCKETS))
                .observe(ms / 1000.0);
        }
    }

    /// Records one feedback verdict (`up` or `down`).
    pub fn record_feedback(&self, verdict: &'static str) {
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        *inner.feedback.entry(verdict).or_default() += 1;
    }

    /// Records one finished generation: `finish` is `stop` (the model ended or a stop sequence
    /// appeared), `length` (`max_tokens` reached) or `cancelled` (the client went away).
    pub fn record_generation(&self, finish: &'static str, tokens: usize) {
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        *inner.generations.entry(finish).or_default() += 1;
        inner.generated_tokens += tokens as u64;
    }

    /// Records one segment merge that was listed (`done`) or failed (an error or a panic).
    pub fn record_merge(&self, done: bool) {
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        match done {
            true => inner.merges.0 += 1,
            false => inner.merges.1 += 1,
        }
    }

    /// The metrics in the Prometheus text format.
    pub fn render(&self, gauges: Gauges) -> String {
        let inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let mut out = String::new();
        header(
            &mut out,
            "lector_http_requests_total",
            "counter",
            "HTTP requests by route, method and status.",
        );
        for ((route, method, status), n) in &inner.requests {
            let _ = writeln!(
                out,
                "lector_http_requests_total{{route=\"{}\",method=\"{method}\",status=\"{status}\"}} {n}",
                escape(route)
            );
        }
        header(
            &mut out,
            "lector_http_errors_total",
            "counter",
            "HTTP responses with a 5xx status (server errors, saturation, timeouts), by route.",
        );
        let mut errors: BTreeMap<&str, u64> = BTreeMap::new();
        for ((route, _, status), n) in &inner.requests {
            if *status >= 500 {
                *errors.entry(route).or_default() += n;
            }
        }
        for (route, n) in errors {
            let _ = writeln!(
                out,
                "lector_http_errors_total{{route=\"{}\"}} {n}",
                escape(route)
            );
        }
        header(
            &mut out,
            "lector_http_request_duration_seconds",
            "histogram",
            "Time from request to response, by route.",
        );
        for (route, h) in &inner.latency {
            let labels = format!("route=\"{}\"", escape(route));
            histogram(&mut out, "lector_http_request_duration_seconds", &labels, h);
        }
        header(
            &mut out,
            "lector_generations_total",
            "counter",
            "Generations by finish reason: stop (the model ended), length (max_tokens), cancelled (the client went away).",
        );
        for (finish, n) in &inner.generations {
            let _ = writeln!(
                out,
                "lector_generations_total{{finish_reason=\"{finish}\"}} {n}"
            );
        }
        header(
            &mut out,
            "lector_generated_tokens_total",
            "counter",
            "Tokens generated.",
        );
        let _ = writeln!(
            out,
            "lector_generated_tokens_total {}",
            inner.generated_tokens
        );
        header(
            &mut out,
            "lector_segment_merges_total",
            "counter",
            "Segment merges run beside writes: done (listed) or failed (an error or a panic; the index is unchanged and the merge is planned again).",
        );
        let (done, failed) = inner.merges;
        let _ = writeln!(
            out,
            "lector_segment_merges_total{{outcome=\"done\"}} {done}"
        );
        let _ = writeln!(
            out,
            "lector_segment_merges_total{{outcome=\"failed\"}} {failed}"
        );
        render_quality(&mut out, &inner, &gauges);
        gauge(
            &mut out,
            "lector_index_documents",
            "Live documents in the index.",
            gauges.documents as f64,
        );
        gauge(
            &mut out,
            "lector_index_passages",
            "Live passages in the index.",
            gauges.passages as f64,
        );
        gauge(
            &mut out,
            "lector_index_generation",
            "Commit generation of the index being served.",
            gauges.generation as f64,
        );
        gauge(
            &mut out,
            "lector_requests_running",
            "CPU-heavy requests running now.",
            gauges.running as f64,
        );
        gauge(
            &mut out,
            "lector_requests_queued",
            "Requests admitted and waiting for a worker or sending their body now.",
            gauges.queued as f64,
        );
        gauge(
            &mut out,
            "lector_body_bytes_buffered",
            "Request body bytes buffered now.",
            gauges.body_bytes as f64,
        );
        gauge(
            &mut out,
            "lector_body_bytes_buffered_peak",
            "The most request body bytes buffered at once since the start.",
            gauges.body_bytes_peak as f64,
        );
        gauge(
            &mut out,
            "lector_body_bytes_budget",
            "Request body bytes that may be buffered at once (more get 503 unread).",
            gauges.body_budget as f64,
        );
        gauge(
            &mut out,
            "lector_connections_open",
            "Connections open now.",
            gauges.connections as f64,
        );
        out
    }
}

fn header(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

fn gauge(out: &mut String, name: &str, help: &str, value: f64) {
    header(out, name, "gauge", help);
    let _ = writeln!(out, "{name} {value}");
}

/// The answer-quality series (all label values are fixed names, never request data).
fn render_quality(out: &mut String, inner: &Inner, gauges: &Gauges) {
    header(
        out,
        "lector_answers_total",
        "counter",
        "Asks by mode and outcome (answered, abstained); the abstention rate is abstained / all.",
    );
    for ((mode, outcome), n) in &inner.answers {
        let _ = writeln!(
            out,
            "lector_answers_total{{mode=\"{mode}\",outcome=\"{outcome}\"}} {n}"
        );
    }
    header(
        out,
        "lector_answer_confidence",
        "histogram",
        "Extractive asks: the probability that the passages hold an answer (1 - na_prob).",
    );
    if let Some(h) = &inner.confidence {
        histogram(out, "lector_answer_confidence", "", h);
    }
    header(
        out,
        "lector_top_retrieval_score",
        "histogram",
        "The first retrieved passage's score, by retrieval (scales differ: bm25, dense cosine, fused).",
    );
    for (retrieval, h) in &inner.top_score {
        let labels = format!("retrieval=\"{retrieval}\"");
        histogram(out, "lector_top_retrieval_score", &labels, h);
    }
    header(
        out,
        "lector_generated_answers_total",
        "counter",
        "Generated answers, and those with a sentence no passage supports (flagged=\"unsupported\").",
    );
    let (generated, unsupported) = inner.generated_answers;
    let _ = writeln!(
        out,
        "lector_generated_answers_total{{flagged=\"any\"}} {generated}"
    );
    let _ = writeln!(
        out,
        "lector_generated_answers_total{{flagged=\"unsupported\"}} {unsupported}"
    );
    header(
        out,
        "lector_feedback_total",
        "counter",
        "Feedback received by verdict (up, down); the down-vote rate is down / all.",
    );
    for (verdict, n) in &inner.feedback {
        let _ = writeln!(out, "lector_feedback_total{{verdict=\"{verdict}\"}} {n}");
    }
    header(
        out,
        "lector_ask_stage_seconds",
        "histogram",
        "Time per ask stage: retrieve, rerank, read, aggregate, generate.",
    );
    for (stage, h) in &inner.stages {
        let labels = format!("stage=\"{stage}\"");
        histogram(out, "lector_ask_stage_seconds", &labels, h);
    }
    if let Some(log) = gauges.query_log {
        header(
            out,
            "lector_query_log_lines_total",
            "counter",
            "Query log lines written, dropped (the writer's queue was full) and failed (write errors).",
        );
        for (outcome, n) in [
            ("written", log.written),
            ("dropped", log.dropped),
            ("failed", log.failed),
        ] {
            let _ = writeln!(
                out,
                "lector_query_log_lines_total{{outcome=\"{outcome}\"}} {n}"
            );
        }
    }
}

/// One histogram's series; `labels` are put before `le` (empty: none).
fn histogram(out: &mut String, name: &str, labels: &str, h: &Histogram) {
    let sep = if labels.is_empty() { "" } else { "," };
    let mut cumulative = 0;
    for (le, n) in h.bounds.iter().zip(&h.buckets) {
        cumulative += n;
        let _ = writeln!(
            out,
            "{name}_bucket{{{labels}{sep}le=\"{le}\"}} {cumulative}"
        );
    }
    let _ = writeln!(out, "{name}_bucket{{{labels}{sep}le=\"+Inf\"}} {}", h.count);
    let braces = |labels: &str| {
        if labels.is_empty() {
            String::new()
        } else {
            format!("{{{labels}}}")
        }
    };
    let _ = writeln!(out, "{name}_sum{} {}", braces(labels), h.sum);
    let _ = writeln!(out, "{name}_count{} {}", braces(labels), h.count);
}

/// A label value with `\`, `"` and newlines escaped.
fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_counts_cumulative_buckets_and_gauges() {
        let metrics = Metrics::default();
        let ms = Duration::from_millis;
        metrics.record("/v1/ask", "POST", 200, ms(30));
        metrics.record("/v1/ask", "POST", 200, ms(700));
        metrics.record("/v1/ask", "POST", 503, ms(1));
        metrics.record_generation("length", 16);
        metrics.record_generation("cancelled", 3);
        let text = metrics.render(Gauges {
            documents: 10,
            passages: 16,
            ..Gauges::default()
        });
        for line in [
            "lector_http_requests_total{route=\"/v1/ask\",method=\"POST\",status=\"200\"} 2",
            "lector_http_requests_total{route=\"/v1/ask\",method=\"POST\",status=\"503\"} 1",
            "lector_http_errors_total{route=\"/v1/ask\"} 1",
            "lector_http_request_duration_seconds_bucket{route=\"/v1/ask\",le=\"0.001\"} 1",
            "lector_http_request_duration_seconds_bucket{route=\"/v1/ask\",le=\"0.05\"} 2",
            "lector_http_request_duration_seconds_bucket{route=\"/v1/ask\",le=\"1\"} 3",
            "lector_http_request_duration_seconds_bucket{route=\"/v1/ask\",le=\"+Inf\"} 3",
            "lector_http_request_duration_seconds_count{route=\"/v1/ask\"} 3",
            "lector_generations_total{finish_reason=\"cancelled\"} 1",
            "lector_generations_total{finish_reason=\"length\"} 1",
            "lector_generated_tokens_total 19",
            "lector_index_documents 10",
            "lector_index_passages 16",
        ] {
            assert!(
                text.lines().any(|l| l == line),
                "missing `{line}` in\n{text}"
            );
        }
    }

    #[test]
    fn made_up_methods_share_one_label() {
        assert_eq!(method_label(&Method::POST), "POST");
        for made_up in ["FOO", "PROPFIND", "get"] {
            let method = Method::from_bytes(made_up.as_bytes()).unwrap();
            assert_eq!(method_label(&method), "other", "{made_up}");
        }
        assert_eq!(method_label(&Method::TRACE), "other");
    }

    #[test]
    fn escapes_label_values() {
        assert_eq!(escape("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
    }
}
