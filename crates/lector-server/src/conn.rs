//! The connections: HTTP/1.1 with a timeout on each request's head, and a connection limit.
//!
//! [`LimitedListener`] accepts a connection only while fewer than
//! [`Limits::max_connections`](crate::Limits::max_connections) are open, so that each open
//! connection's buffers count against a known bound; clients beyond it wait in the kernel's
//! listen backlog until a connection closes. [`serve`] gives a client
//! [`Limits::header_timeout`](crate::Limits::header_timeout) to send each request's head (and
//! closes an idle keep-alive connection after as long), so a client trickling its headers, or
//! holding connections open doing nothing, cannot keep the connection slots.

use axum::Router;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Serves `app` on the connections `listener` accepts until `shutdown` completes, then stops
/// accepting and waits for the open connections to finish their requests.
pub async fn serve(
    listener: LimitedListener,
    app: Router,
    header_timeout: Duration,
    shutdown: impl Future<Output = ()>,
) {
    let graceful = GracefulShutdown::new();
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let stream = tokio::select! {
            stream = listener.accept() => stream,
            () = &mut shutdown => break,
        };
        let connection = http1::Builder::new()
            .timer(TokioTimer::new())
            .header_read_timeout(header_timeout)
            .serve_connection(TokioIo::new(stream), TowerToHyperService::new(app.clone()));
        let connection = graceful.watch(connection);
        // An error is the client's doing (a reset, a timed-out head): nothing to report.
        tokio::spawn(async move {
            let _ = connection.await;
        });
    }
    drop(listener);
    graceful.shutdown().await;
}

/// A TCP listener that holds one permit per open connection.
pub struct LimitedListener {
    inner: TcpListener,
    permits: Arc<Semaphore>,
}

impl LimitedListener {
    /// Accepts from `inner` while `permits` has one to give.
    pub fn new(inner: TcpListener, permits: Arc<Semaphore>) -> Self {
        LimitedListener { inner, permits }
    }

    /// The next connection, once one of the permits is free (accept errors, e.g. too many open
    /// files, are retried after a pause).
    pub async fn accept(&self) -> LimitedStream {
        let permit = self
            .permits
            .clone()
            .acquire_owned()
            .await
            .expect("the semaphore is never closed");
        loop {
            match self.inner.accept().await {
                Ok((stream, _)) => {
                    return LimitedStream {
                        stream,
                        _permit: permit,
                    }
                }
                Err(err) => {
                    eprintln!("warning: accepting a connection failed: {err}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        }
    }
}

/// A connection; its permit returns when it closes.
pub struct LimitedStream {
    stream: TcpStream,
    _permit: OwnedSemaphorePermit,
}

impl AsyncRead for LimitedStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for LimitedStream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }
}
