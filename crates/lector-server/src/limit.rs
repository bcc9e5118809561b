//! The server's limits and the gate CPU-heavy work passes through.
//!
//! Reading is synchronous CPU work, so a request runs on tokio's blocking pool, at most
//! [`Limits::max_running`] at a time. Requests beyond that wait in a bounded queue (at most
//! [`Limits::max_queued`]); a request that finds the queue full gets 503 at once instead of
//! piling up, and one that waits and runs longer than [`Limits::timeout`] gets 504. The
//! permits travel with the blocking work, so work whose client already got a 504 still counts
//! until it ends: the limit bounds the CPU, not only the open connections.

use crate::error::ApiError;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Semaphore;
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
    /// CPU-heavy requests allowed to wait for a worker; more get 503.
    pub max_queued: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_ask_bytes: DEFAULT_MAX_ASK_BYTES,
            max_documents_bytes: DEFAULT_MAX_DOCUMENTS_BYTES,
            timeout: DEFAULT_TIMEOUT,
            max_running: default_running(),
            max_queued: DEFAULT_MAX_QUEUED,
        }
    }
}

/// One worker per CPU: the reader keeps a core busy per request.
pub fn default_running() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get())
}

/// Admits, queues and times CPU-heavy work (see the module documentation).
pub struct Gate {
    /// Permits for running or waiting: `max_running + max_queued`.
    admission: Arc<Semaphore>,
    /// Permits for running.
    running: Arc<Semaphore>,
    limits: Limits,
}

impl Gate {
    /// A gate enforcing `limits` (at least one worker).
    pub fn new(limits: Limits) -> Self {
        let running = limits.max_running.max(1);
        Gate {
            admission: Arc::new(Semaphore::new(running + limits.max_queued)),
            running: Arc::new(Semaphore::new(running)),
            limits: Limits {
                max_running: running,
                ..limits
            },
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

    /// Requests waiting for a worker now.
    pub fn queued(&self) -> usize {
        let admitted =
            self.limits.max_running + self.limits.max_queued - self.admission.available_permits();
        admitted.saturating_sub(self.running())
    }

    /// Runs `work` on the blocking pool once a worker is free: 503 when the queue is full, 504
    /// past the timeout (the work itself then still finishes, holding its worker).
    pub async fn run<T, F>(&self, work: F) -> Result<T, ApiError>
    where
        T: Send + 'static,
        F: FnOnce() -> Result<T, ApiError> + Send + 'static,
    {
        let admitted = self
            .admission
            .clone()
            .try_acquire_owned()
            .map_err(|_| ApiError::busy(self.running(), self.queued()))?;
        let deadline = Instant::now() + self.limits.timeout;
        let worker = timeout_at(deadline, self.running.clone().acquire_owned())
            .await
            .map_err(|_| ApiError::timeout(self.limits.timeout))?
            .expect("the semaphore is never closed");
        let task = tokio::task::spawn_blocking(move || {
            let _permits = (admitted, worker);
            work()
        });
        match timeout_at(deadline, task).await {
            Err(_) => Err(ApiError::timeout(self.limits.timeout)),
            Ok(Err(panic)) => Err(ApiError::internal(format!("the request failed: {panic}"))),
            Ok(Ok(result)) => result,
        }
    }
}

/// Runs short blocking work (a lookup that may wait for the index lock) off the async threads.
pub async fn blocking<T, F>(work: F) -> Result<T, ApiError>
where
    T: Send + 'static,
    F: FnOnce() -> Result<T, ApiError> + Send + 'static,
{
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|panic| ApiError::internal(format!("the request failed: {panic}")))?
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
