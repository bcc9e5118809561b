//! Generation behind the gate: the blocking work sends its progress over a channel, which the
//! handler either drains into one JSON answer or turns into server-sent events.
//!
//! The work runs on the blocking pool through the same [`Gate`](crate::limit::Gate) as asks.
//! The handler waits for the first generated token (or the end) before it answers, so a full
//! queue (503), a timeout (504) and input only the work can check (a prompt longer than the
//! context window: 400) are still plain HTTP errors, also for a stream; after that, tokens go out
//! as they are generated, and an error becomes the stream's last event. When the client goes
//! away, the handler drops the receiving end, the next token finds the channel closed, and the
//! generation stops (`ControlFlow::Break`, finish reason `cancelled`). A timeout ends it the same
//! way: the handler answers 504 (or an error event) and drops the receiver.

use crate::error::ApiError;
use crate::limit::Admission;
use crate::state::AppState;
use axum::response::sse::{Event, KeepAlive, Sse};
use futures_util::stream::{self, Stream, StreamExt};
use serde_json::Value;
use std::cell::Cell;
use std::convert::Infallible;
use std::ops::ControlFlow;
use std::sync::Arc;
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver, UnboundedSender};

/// What the work reports to the handler.
#[derive(Debug)]
pub enum Progress {
    /// The first token is about to follow: the request was admitted and its prompt accepted.
    Started,
    /// A piece of generated text.
    Token(String),
    /// The finished answer.
    Done(Value),
}

/// One report, or the error that ended the work.
pub type Message = Result<Progress, ApiError>;

/// The work's end of the channel.
pub struct Reporter {
    sender: UnboundedSender<Message>,
    started: Cell<bool>,
}

impl Reporter {
    /// Whether the client is gone (checked before starting work it would not read).
    pub fn client_gone(&self) -> bool {
        self.sender.is_closed()
    }

    /// Sends a piece of text (after [`Progress::Started`], the first time); `Break` when the
    /// client is gone, which stops the generation.
    pub fn token(&self, piece: &str) -> ControlFlow<()> {
        if !self.started.replace(true) && self.sender.send(Ok(Progress::Started)).is_err() {
            return ControlFlow::Break(());
        }
        match self.sender.send(Ok(Progress::Token(piece.to_string()))) {
            Ok(()) => ControlFlow::Continue(()),
            Err(_) => ControlFlow::Break(()),
        }
    }
}

/// A generation that has produced its first token (or already ended): what is left of it.
pub struct Running {
    /// A message received while waiting for the start that is not the start itself.
    pending: Option<Message>,
    receiver: UnboundedReceiver<Message>,
}

/// Runs admitted `work` behind the gate and waits until it produces its first token or ends: the
/// error when it failed before generating anything (timeout, invalid input).
pub async fn start<F>(
    state: &Arc<AppState>,
    admission: Admission,
    work: F,
) -> Result<Running, ApiError>
where
    F: FnOnce(&Reporter) -> Result<Value, ApiError> + Send + 'static,
{
    let (sender, mut receiver) = unbounded_channel();
    let reporter = Reporter {
        sender: sender.clone(),
        started: Cell::new(false),
    };
    let shared = state.clone();
    tokio::spawn(async move {
        let result = shared
            .gate
            .run_admitted(admission, move || {
                if reporter.client_gone() {
                    return Err(ApiError::bad_request("the client went away"));
                }
                work(&reporter)
            })
            .await;
        let _ = sender.send(result.map(Progress::Done));
    });
    match receiver.recv().await {
        Some(Ok(Progress::Started)) => Ok(Running {
            pending: None,
            receiver,
        }),
        Some(Err(err)) => Err(err),
        Some(message) => Ok(Running {
            pending: Some(message),
            receiver,
        }),
        None => Err(ApiError::internal("the generation ended without an answer")),
    }
}

impl Running {
    async fn next(&mut self) -> Option<Message> {
        match self.pending.take() {
            Some(message) => Some(message),
            None => self.receiver.recv().await,
        }
    }

    /// Waits for the answer (the tokens are not needed).
    pub async fn finish(mut self) -> Result<Value, ApiError> {
        while let Some(message) = self.next().await {
            match message {
                Ok(Progress::Done(value)) => return Ok(value),
                Err(err) => return Err(err),
                Ok(_) => {}
            }
        }
        Err(ApiError::internal("the generation ended without an answer"))
    }

    /// Server-sent events: `render` turns each message (the tokens, then the answer or an
    /// error) into events. The stream ends after the answer or the error, dropping the receiver
    /// (which stops a generation still running after a timeout).
    pub fn events<R>(self, render: R) -> Sse<impl Stream<Item = Result<Event, Infallible>>>
    where
        R: FnMut(Message) -> Vec<Event> + Send + 'static,
    {
        let events = stream::unfold((Some(self), render), |(running, mut render)| async move {
            let mut running = running?;
            let message = running.next().await?;
            let last = !matches!(message, Ok(Progress::Token(_)) | Ok(Progress::Started));
            let events = render(message);
            let running = (!last).then_some(running);
            Some((stream::iter(events.into_iter().map(Ok)), (running, render)))
        })
        .flatten();
        Sse::new(events).keep_alive(KeepAlive::default())
    }
}

/// An event named `name` with `data` as JSON (one line: pieces with newlines stay one event).
pub fn json_event(name: &str, data: &Value) -> Event {
    Event::default().event(name).data(data.to_string())
}
