//! The server's limits and the gate every request with work or a body passes through.
//!
//! **Admission comes first.** A request is admitted before anything costly happens to it: a
//! slot ([`Limits::max_running`] running plus [`Limits::max_queued`] waiting) and, for a request
//! with a body, the body's bytes from a budget ([`Limits::max_buffered_bytes`]: its
//! `Content-Length`, or the route's limit when the length is not declared). A request that finds
//! no slot or not enough budget gets 503 at once, before its body is read, so memory held by
//! bodies is bounded by the budget (and by slots times the route limits), never by how many
//! clients upload at once. A body declared larger than its route allows gets 413 unread. The
//! admitted body is then read within [`Limits::body_timeout`] (408 past it: a client trickling
//! its body cannot hold a slot for long), and its bytes stay reserved until the response, since
//! the parsed request is about as large as the body.
//!
//! **Work.** Every route that does more than answer a constant (all but the pages, `/healthz`,
//! `/metrics` and `/openapi.json`) runs its work behind the gate: reading, searching, listing
//! documents, labelling (which reads the query log) and writing. The work is synchronous, so an
//! admitted request runs on tokio's blocking pool, at most [`Limits::max_running`] at a time,
//! waiting for a worker at most [`Limits::timeout`] (504 past it, also when it then runs too
//! long). The permits travel with the blocking work, so work whose client already got a 504
//! still counts until it ends: the limit bounds the CPU and the memory of work in flight, not
//! only the open connections.
//!
//! **Writes** wait for the writer before they take a worker ([`Gate::run_write`]), so writes
//! queued behind a long commit hold no worker that reads could use; and a write answered 504
//! was not applied (it had not started), while one that started answers with its outcome.
//!
//! **Connections.** At most [`Limits::max_connections`] are open at once, and each request's
//! head must arrive within [`Limits::header_timeout`] ([`crate::conn`]); further clients wait in
//! the listen backlog until a connection closes.

use crate::body::{Body, BodyGauge};
use crate::error::ApiError;
use axum::extract::Request;
use std::future::Future;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::{timeout_at, Instant};

/// Largest `POST /v1/ask` body (and of the other small JSON bodies): 1 MiB.
pub const DEFAULT_MAX_ASK_BYTES: usize = 1 << 20;
/// Largest `POST /v1/documents` body: 64 MiB.
pub const DEFAULT_MAX_DOCUMENTS_BYTES: usize = 64 << 20;
/// Longest a request may wait for a worker and run: 60 s.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);
/// Requests allowed to wait for a worker: 256 (a load test with hundreds of clients queues
/// rather than failing).
pub const DEFAULT_MAX_QUEUED: usize = 256;
/// Bytes of request bodies buffered at once, all requests together: 256 MiB (four
/// maximum-size document uploads).
pub const DEFAULT_MAX_BUFFERED_BYTES: usize = 256 << 20;
/// Longest an admitted request may take to send its body: 30 s.
pub const DEFAULT_BODY_TIMEOUT: Duration = Duration::from_secs(30);
/// Longest a client may take to send a request's head, or stay idle between requests: 30 s.
pub const DEFAULT_HEADER_TIMEOUT: Duration = Duration::from_secs(30);
/// Connections open at once: 1024.
pub const DEFAULT_MAX_CONNECTIONS: usize = 1024;
/// Most passages one question may ask for (`k`).
pub const MAX_K: usize = 100;

/// Limits on requests; [`Limits::default`] gives the documented defaults.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Largest body of `POST /v1/ask`, in bytes.
    pub max_ask_bytes: usize,
    /// Largest body of `POST /v1/documents`, in bytes.
    pub max_documents_bytes: usize,
    /// Longest a request may wait and run.
    pub timeout: Duration,
    /// CPU-heavy requests (ask, search, document writes) running at once [default: the number
    /// of CPUs].
    pub max_running: usize,
    /// CPU-heavy requests allowed to wait for a worker (or to send their body); more get 503.
    pub max_queued: usize,
    /// Bytes of request bodies admitted at once, all requests together; a body that does not
    /// fit gets 503 before it is read. Never less than the largest body limit, so that any
    /// allowed body fits an idle server.
    pub max_buffered_bytes: usize,
    /// Longest an admitted request may take to send its body; 408 past it.
    pub body_timeout: Duration,
    /// Connections open at once; more wait to be accepted.
    pub max_connections: usize,
    /// Longest a client may take to send a request's head (or keep a connection idle between
    /// requests); the connection is closed past it.
    pub header_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_ask_bytes: DEFAULT_MAX_ASK_BYTES,
            max_documents_bytes: DEFAULT_MAX_DOCUMENTS_BYTES,
            timeout: DEFAULT_TIMEOUT,
            max_running: default_running(),
            max_queued: DEFAULT_MAX_QUEUED,
            max_buffered_bytes: DEFAULT_MAX_BUFFERED_BYTES,
            body_timeout: DEFAULT_BODY_TIMEOUT,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            header_timeout: DEFAULT_HEADER_TIMEOUT,
        }
    }
}

/// One worker per CPU: the reader keeps a core busy per request.
pub fn default_running() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get())
}

/// Admits, queues and times requests (see the module documentation).
pub struct Gate {
    /// Permits for running or waiting: `max_running + max_queued`.
    admission: Arc<Semaphore>,
    /// Permits for running.
    running: Arc<Semaphore>,
    /// The body budget, one permit per KiB (a semaphore counts in `u32` at a time).
    body_budget: Arc<Semaphore>,
    /// Body bytes actually buffered, now and at the peak.
    buffered: Arc<BodyGauge>,
    /// Permits for open connections.
    connections: Arc<Semaphore>,
    limits: Limits,
}

/// A request let in: its slot and the bytes reserved for its body, released when dropped.
pub struct Admission {
    _slot: OwnedSemaphorePermit,
    _body: Option<OwnedSemaphorePermit>,
}

impl Gate {
    /// A gate enforcing `limits` (at least one worker, one connection, and a body budget that
    /// holds the largest allowed body).
    pub fn new(limits: Limits) -> Self {
        let running = limits.max_running.max(1);
        let largest_body = limits.max_ask_bytes.max(limits.max_documents_bytes);
        let limits = Limits {
            max_running: running,
            max_buffered_bytes: limits.max_buffered_bytes.max(largest_body),
            max_connections: limits.max_connections.max(1),
            ..limits
        };
        Gate {
            admission: Arc::new(Semaphore::new(running + limits.max_queued)),
            running: Arc::new(Semaphore::new(running)),
            body_budget: Arc::new(Semaphore::new(kib(limits.max_buffered_bytes) as usize)),
            buffered: Arc::default(),
            connections: Arc::new(Semaphore::new(limits.max_connections)),
            limits,
        }
    }

    /// The limits in force.
    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// Requests running now.
    pub fn running(&self) -> usize {
        self.limits.max_running - self.running.available_permits()
    }

    /// Requests admitted and not running now: waiting for a worker or sending their body.
    pub fn queued(&self) -> usize {
        let admitted =
            self.limits.max_running + self.limits.max_queued - self.admission.available_permits();
        admitted.saturating_sub(self.running())
    }

    /// Body bytes buffered now and the most buffered at once since the start.
    pub fn buffered_bytes(&self) -> (usize, usize) {
        self.buffered.now_and_peak()
    }

    /// Connections open now.
    pub fn open_connections(&self) -> usize {
        self.limits.max_connections - self.connections.available_permits()
    }

    /// The connection permits the listener takes one of per connection.
    pub(crate) fn connection_permits(&self) -> Arc<Semaphore> {
        self.connections.clone()
    }

    /// Admits a request whose body is at most `body_bytes` (0 without a body): 503 at once when
    /// no slot or not enough of the body budget is free.
    pub fn admit(&self, body_bytes: usize) -> Result<Admission, ApiError> {
        let slot = self
            .admission
            .clone()
            .try_acquire_owned()
            .map_err(|_| ApiError::busy(self.running(), self.queued()))?;
        let body = match body_bytes {
            0 => None,
            n => Some(
                self.body_budget
                    .clone()
                    .try_acquire_many_owned(kib(n))
                    .map_err(|_| ApiError::bodies_full(self.limits.max_buffered_bytes))?,
            ),
        };
        Ok(Admission {
            _slot: slot,
            _body: body,
        })
    }

    /// Admits `request` by its declared body size (413 unread above `limit`, 503 when it does
    /// not fit now), then reads its body within the body timeout (408).
    pub async fn admit_and_read(
        &self,
        request: Request,
        limit: usize,
    ) -> Result<(Admission, Body), ApiError> {
        let reserved = crate::body::declared_length(request.headers(), limit)?;
        let admission = self.admit(reserved)?;
        let deadline = Instant::now() + self.limits.body_timeout;
        let body = crate::body::read(
            request.into_body(),
            reserved,
            deadline,
            self.limits.body_timeout,
            &self.buffered,
        )
        .await?;
        Ok((admission, body))
    }

    /// Admits work without a body and runs it (see [`Gate::run_admitted`]).
    pub async fn run<T, F>(&self, work: F) -> Result<T, ApiError>
    where
        T: Send + 'static,
        F: FnOnce() -> Result<T, ApiError> + Send + 'static,
    {
        self.run_admitted(self.admit(0)?, work).await
    }

    /// Runs admitted `work` on the blocking pool once a worker is free: 504 past the timeout
    /// (the work itself then still finishes, holding its worker and its admission).
    pub async fn run_admitted<T, F>(&self, admitted: Admission, work: F) -> Result<T, ApiError>
    where
        T: Send + 'static,
        F: FnOnce() -> Result<T, ApiError> + Send + 'static,
    {
        Ok(self.run_keeping(admitted, work).await?.1)
    }

    /// Runs admitted `work` as [`Gate::run_admitted`] does and gives the admission back with
    /// its result, for a request whose work comes in two steps (an upload read, then written).
    pub async fn run_keeping<T, F>(
        &self,
        admitted: Admission,
        work: F,
    ) -> Result<(Admission, T), ApiError>
    where
        T: Send + 'static,
        F: FnOnce() -> Result<T, ApiError> + Send + 'static,
    {
        let deadline = Instant::now() + self.limits.timeout;
        let worker = timeout_at(deadline, self.running.clone().acquire_owned())
            .await
            .map_err(|_| ApiError::timeout(self.limits.timeout))?
            .expect("the semaphore is never closed");
        let task = tokio::task::spawn_blocking(move || {
            let _worker = worker;
            work().map(|done| (admitted, done))
        });
        match timeout_at(deadline, task).await {
            Err(_) => Err(ApiError::timeout(self.limits.timeout)),
            Ok(Err(panic)) => Err(ApiError::internal(format!("the request failed: {panic}"))),
            Ok(Ok(result)) => result,
        }
    }

    /// Runs an admitted write: waits for `lock` (the writer, one write at a time) and then for
    /// a worker, both without holding a worker and within the timeout, then runs `work` with
    /// what `lock` gave. A write whose client got 504 changed nothing: it is answered 504 only
    /// while it has not started, and once started it can no longer be cancelled, so its
    /// client waits for its outcome past the timeout (see [`ApiError::write_timeout`]).
    pub async fn run_write<L, T, F>(
        &self,
        admitted: Admission,
        lock: impl Future<Output = Result<L, ApiError>>,
        work: F,
    ) -> Result<T, ApiError>
    where
        L: Send + 'static,
        T: Send + 'static,
        F: FnOnce(L) -> Result<T, ApiError> + Send + 'static,
    {
        let limit = self.limits.timeout;
        let deadline = Instant::now() + limit;
        let locked = timeout_at(deadline, lock)
            .await
            .map_err(|_| ApiError::write_timeout(limit))??;
        let worker = timeout_at(deadline, self.running.clone().acquire_owned())
            .await
            .map_err(|_| ApiError::write_timeout(limit))?
            .expect("the semaphore is never closed");
        let start = Arc::new(WriteStart::default());
        let started = start.clone();
        let mut task = tokio::task::spawn_blocking(move || {
            let _permits = (admitted, worker);
            // Dropping `locked` unused releases the writer: the client already got its 504.
            started
                .begin()
                .ok_or_else(|| ApiError::write_timeout(limit))?;
            work(locked)
        });
        let joined = match timeout_at(deadline, &mut task).await {
            Ok(joined) => joined,
            Err(_) if start.abandon() => return Err(ApiError::write_timeout(limit)),
            Err(_) => task.await,
        };
        joined.map_err(|panic| ApiError::internal(format!("the request failed: {panic}")))?
    }
}

/// Whether a write started (and may then commit) or was abandoned by its timed-out client:
/// whichever comes first wins, so a 504 and a commit never both happen.
#[derive(Default)]
struct WriteStart(AtomicU8);

const WAITING: u8 = 0;
const STARTED: u8 = 1;
const ABANDONED: u8 = 2;

impl WriteStart {
    /// Marks the write started; `None` when its client was already answered 504.
    fn begin(&self) -> Option<()> {
        self.0
            .compare_exchange(WAITING, STARTED, Ordering::AcqRel, Ordering::Acquire)
            .ok()
            .map(drop)
    }

    /// Abandons a write that has not started; false when it has.
    fn abandon(&self) -> bool {
        self.0
            .compare_exchange(WAITING, ABANDONED, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }
}

/// `bytes` in KiB, rounded up, as semaphore permits.
fn kib(bytes: usize) -> u32 {
    u32::try_from(bytes.div_ceil(1024)).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::StatusCode;

    fn gate(running: usize, queued: usize, timeout_ms: u64) -> Arc<Gate> {
        Arc::new(Gate::new(Limits {
            max_running: running,
            max_queued: queued,
            timeout: Duration::from_millis(timeout_ms),
            ..Limits::default()
        }))
    }

    fn sleeper(ms: u64) -> impl FnOnce() -> Result<(), ApiError> + Send + 'static {
        move || {
            std::thread::sleep(Duration::from_millis(ms));
            Ok(())
        }
    }

    #[tokio::test]
    async fn queues_up_to_the_bound_then_refuses() {
        let gate = gate(1, 1, 5_000);
        let first = tokio::spawn({
            let gate = gate.clone();
            async move { gate.run(sleeper(300)).await }
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        let second = tokio::spawn({
            let gate = gate.clone();
            async move { gate.run(sleeper(10)).await }
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!((gate.running(), gate.queued()), (1, 1));
        let third = gate.run(sleeper(10)).await.unwrap_err();
        assert_eq!(third.status, StatusCode::SERVICE_UNAVAILABLE);
        assert!(first.await.unwrap().is_ok());
        assert!(second.await.unwrap().is_ok());
        assert_eq!((gate.running(), gate.queued()), (0, 0));
    }

    #[test]
    fn bodies_hold_their_bytes_of_the_budget_until_dropped() {
        let gate = Gate::new(Limits {
            max_running: 1,
            max_queued: 8,
            max_ask_bytes: 1024,
            max_documents_bytes: 4096,
            max_buffered_bytes: 6000,
            ..Limits::default()
        });
        let first = gate.admit(4096).unwrap();
        let err = gate.admit(4096).err().unwrap();
        assert_eq!(err.status, StatusCode::SERVICE_UNAVAILABLE);
        assert!(err.message.contains("6000 bytes"), "{}", err.message);
        let small = gate.admit(1024).unwrap();
        drop(first);
        let _second = gate.admit(4096).unwrap();
        drop(small);
        // A budget below the largest body would refuse that body forever: it is raised.
        let gate = Gate::new(Limits {
            max_ask_bytes: 1024,
            max_documents_bytes: 4096,
            max_buffered_bytes: 1,
            ..Limits::default()
        });
        assert_eq!(gate.limits().max_buffered_bytes, 4096);
        assert!(gate.admit(4096).is_ok());
    }

    #[tokio::test]
    async fn a_write_that_waits_past_the_timeout_is_cancelled_unstarted() {
        let gate = gate(1, 4, 100);
        let ran = Arc::new(AtomicU8::new(0));
        let write = |ran: Arc<AtomicU8>| {
            move |()| {
                ran.fetch_add(1, Ordering::SeqCst);
                Ok(())
            }
        };
        // The writer never comes free.
        let never = std::future::pending::<Result<(), ApiError>>();
        let admitted = gate.admit(0).unwrap();
        let err = gate
            .run_write(admitted, never, write(ran.clone()))
            .await
            .unwrap_err();
        assert_eq!(err.status, StatusCode::GATEWAY_TIMEOUT);
        assert!(
            err.message.contains("nothing of it was stored"),
            "{}",
            err.message
        );
        // The writer is free but the only worker is busy past the deadline.
        let busy = tokio::spawn({
            let gate = gate.clone();
            async move { gate.run(sleeper(300)).await }
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        let admitted = gate.admit(0).unwrap();
        let err = gate
            .run_write(admitted, async { Ok(()) }, write(ran.clone()))
            .await
            .unwrap_err();
        assert_eq!(err.status, StatusCode::GATEWAY_TIMEOUT);
        // The busy work (answered 504 itself) ends at 300 ms.
        let _ = busy.await;
        tokio::time::sleep(Duration::from_millis(400)).await;
        assert_eq!(ran.load(Ordering::SeqCst), 0, "a write answered 504 ran");
        assert_eq!((gate.running(), gate.queued()), (0, 0));
    }

    #[tokio::test]
    async fn a_write_that_started_answers_with_its_outcome_past_the_timeout() {
        let gate = gate(1, 4, 100);
        let admitted = gate.admit(0).unwrap();
        let out = gate
            .run_write(admitted, async { Ok(()) }, |()| {
                std::thread::sleep(Duration::from_millis(300));
                Ok(7)
            })
            .await;
        assert_eq!(out.unwrap(), 7);
    }

    #[tokio::test]
    async fn times_out_but_keeps_the_worker_until_the_work_ends() {
        let gate = gate(1, 4, 100);
        let err = gate.run(sleeper(400)).await.unwrap_err();
        assert_eq!(err.status, StatusCode::GATEWAY_TIMEOUT);
        assert_eq!(
            gate.running(),
            1,
            "the abandoned work still holds its worker"
        );
        // Waiting for that worker also counts against the timeout.
        let err = gate.run(sleeper(1)).await.unwrap_err();
        assert_eq!(err.status, StatusCode::GATEWAY_TIMEOUT);
        tokio::time::sleep(Duration::from_millis(400)).await;
        assert_eq!(gate.running(), 0);
        assert!(gate.run(sleeper(1)).await.is_ok());
    }
}
