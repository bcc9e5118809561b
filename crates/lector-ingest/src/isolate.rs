//! Reading an untrusted PDF or Word file in a child process with a memory and CPU limit, so that
//! a parser's bug or a file that escapes the readers' own bounds costs that file, not the
//! process reading it (a server shared by many users).
//!
//! The parent ([`IsolatedReader::read_bytes`]) starts a worker program (the `lector` binary run
//! as `lector ingest-worker`, which calls [`serve_worker`]) with `RLIMIT_AS` (address space),
//! `RLIMIT_CPU` and no core files, writes it one request on standard input, a JSON line
//! `{"id": ..., "format": "pdf" | "docx", "max_document_bytes": ...}` then the file's bytes,
//! and reads one JSON reply on standard output: `{"document": {...}}` or `{"error": "..."}`.
//! It kills the worker past a wall-clock limit. A worker that dies (out of memory: the
//! allocator aborts; out of CPU: `SIGXCPU`) or is killed is this file's invalid-input error,
//! naming the limit.

use crate::document::Document;
use crate::error::{invalid, Result};
use crate::read::{human_size, read_bytes, IngestOptions};
use crate::walk::Format;
use serde::{Deserialize, Serialize};
use std::ffi::OsString;
use std::io::{BufRead, Read, Write};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// The limits of one worker.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct IsolationLimits {
    /// Address space of the worker, in bytes (`RLIMIT_AS`).
    pub memory_bytes: u64,
    /// CPU time of the worker, in seconds (`RLIMIT_CPU`).
    pub cpu_seconds: u64,
    /// Wall-clock time from start to reply.
    pub wall: Duration,
}

impl Default for IsolationLimits {
    /// 2 GiB of address space, 60 s of CPU, 120 s in all.
    fn default() -> Self {
        IsolationLimits {
            memory_bytes: 2 << 30,
            cpu_seconds: 60,
            wall: Duration::from_secs(120),
        }
    }
}

/// Reads files in worker processes (see the module documentation).
#[derive(Debug, Clone)]
pub struct IsolatedReader {
    program: OsString,
    args: Vec<OsString>,
    limits: IsolationLimits,
}

/// What the parent sends before the file's bytes.
#[derive(Serialize, Deserialize)]
struct Request {
    id: String,
    format: String,
    max_document_bytes: usize,
}

/// What the worker answers.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
enum Reply {
    Document(Document),
    Error(String),
}

/// The longest request line a worker accepts.
const MAX_REQUEST_LINE: u64 = 64 << 10;

impl IsolatedReader {
    /// A reader running `program args...` as its worker, within `limits`.
    pub fn new(
        program: impl Into<OsString>,
        args: impl IntoIterator<Item = impl Into<OsString>>,
        limits: IsolationLimits,
    ) -> Self {
        IsolatedReader {
            program: program.into(),
            args: args.into_iter().map(Into::into).collect(),
            limits,
        }
    }

    /// The limits each worker runs under.
    pub fn limits(&self) -> IsolationLimits {
        self.limits
    }

    /// [`read_bytes`](crate::read_bytes) in a worker: the same document or the same refusal,
    /// or a refusal naming the limit the worker ran out of. `Err` only for what is wrong with
    /// the file, or a worker that cannot be started (an I/O error naming the program).
    pub fn read_bytes(
        &self,
        id: &str,
        format: Format,
        bytes: &[u8],
        options: &IngestOptions,
    ) -> Result<Document> {
        let name = match format {
            Format::Pdf => "pdf",
            Format::Docx => "docx",
            // Refused as read_bytes refuses it, without a worker.
            _ => return read_bytes(id, format, bytes, options),
        };
        if bytes.len() > options.max_document_bytes {
            return read_bytes(id, format, bytes, options);
        }
        let request = Request {
            id: id.to_string(),
            format: name.to_string(),
            max_document_bytes: options.max_document_bytes,
        };
        let mut line = serde_json::to_vec(&request).expect("a request serializes");
        line.push(b'\n');
        let started = Instant::now();
        let mut child = self
            .command()
            .spawn()
            .map_err(crate::error::io(&self.program))?;
        let mut stdin = child.stdin.take().expect("piped");
        let stdout = child.stdout.take().expect("piped");
        // The document's text is at most the limit; JSON escapes make it up to 6 times longer.
        let reply_limit = options.max_document_bytes as u64 * 6 + (1 << 20);
        let (reply, status) = std::thread::scope(|scope| {
            scope.spawn(move || {
                // A worker that stops reading (it died, or refused early) is seen in its status.
                let _ = stdin.write_all(&line).and_then(|()| stdin.write_all(bytes));
            });
            let reader = scope.spawn(move || {
                let mut reply = Vec::new();
                stdout
                    .take(reply_limit)
                    .read_to_end(&mut reply)
                    .map(|_| reply)
            });
            let status = wait_until(&mut child, started + self.limits.wall);
            (
                reader.join().expect("the reply reader never panics"),
                status,
            )
        });
        let refused = |message: String| Err(invalid(id, None, message));
        match status {
            None => refused(format!(
                "reading took longer than {} s (the limit per file)",
                self.limits.wall.as_secs()
            )),
            Some(status) if !status.success() => refused(self.stopped(status)),
            Some(_) => match reply.ok().and_then(|r| serde_json::from_slice(&r).ok()) {
                Some(Reply::Document(document)) => Ok(document),
                Some(Reply::Error(message)) => refused(message),
                None => refused("the reading worker gave no readable answer".to_string()),
            },
        }
    }

    fn command(&self) -> Command {
        let mut command = Command::new(&self.program);
        command
            .args(&self.args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        #[cfg(unix)]
        {
            use std::os::unix::process::CommandExt;
            let limits = self.limits;
            // SAFETY: only setrlimit, which is async-signal-safe, runs between fork and exec.
            unsafe {
                command.pre_exec(move || set_limits(limits));
            }
        }
        command
    }

    /// Why a worker that did not exit cleanly stopped.
    fn stopped(&self, status: ExitStatus) -> String {
        #[cfg(unix)]
        {
            use std::os::unix::process::ExitStatusExt;
            match status.signal() {
                Some(libc::SIGXCPU) | Some(libc::SIGKILL) => {
                    return format!(
                        "reading used more than {} s of CPU (the limit per file)",
                        self.limits.cpu_seconds
                    )
                }
                Some(signal) => {
                    return format!(
                        "the reading worker stopped (signal {signal}): out of its memory limit \
                         of {} per file, or a parser failure",
                        human_size(self.limits.memory_bytes)
                    )
                }
                None => {}
            }
        }
        format!("the reading worker failed ({status})")
    }
}

#[cfg(unix)]
fn set_limits(limits: IsolationLimits) -> std::io::Result<()> {
    let set = |resource, soft: u64, hard: u64| {
        let limit = libc::rlimit {
            rlim_cur: soft as libc::rlim_t,
            rlim_max: hard as libc::rlim_t,
        };
        // SAFETY: a plain system call on a valid struct.
        match unsafe { libc::setrlimit(resource, &limit) } {
            0 => Ok(()),
            _ => Err(std::io::Error::last_os_error()),
        }
    };
    set(libc::RLIMIT_AS, limits.memory_bytes, limits.memory_bytes)?;
    // SIGXCPU at the soft limit, SIGKILL a second later.
    set(libc::RLIMIT_CPU, limits.cpu_seconds, limits.cpu_seconds + 1)?;
    set(libc::RLIMIT_CORE, 0, 0)
}

/// The child's exit status, or `None` when it was still running at `deadline` (it is then
/// killed and reaped).
fn wait_until(child: &mut std::process::Child, deadline: Instant) -> Option<ExitStatus> {
    let mut pause = Duration::from_millis(1);
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            return Some(status);
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(20));
    }
}

/// The worker's side: reads one request from `input` and writes its reply to `output`. Every
/// problem with the file is a reply; `Err` only when the request itself cannot be read.
pub fn serve_worker(input: impl Read, mut output: impl Write) -> std::io::Result<()> {
    let mut input = std::io::BufReader::new(input);
    let mut line = Vec::new();
    (&mut input)
        .take(MAX_REQUEST_LINE)
        .read_until(b'\n', &mut line)?;
    let request: Request = serde_json::from_slice(&line)
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))?;
    let format = match request.format.as_str() {
        "pdf" => Format::Pdf,
        "docx" => Format::Docx,
        other => {
            let message = format!("unknown format `{other}`");
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                message,
            ));
        }
    };
    let options = IngestOptions {
        max_document_bytes: request.max_document_bytes,
    };
    let mut bytes = Vec::new();
    input
        .take(options.max_document_bytes as u64 + 1)
        .read_to_end(&mut bytes)?;
    let reply = match read_bytes(&request.id, format, &bytes, &options) {
        Ok(document) => Reply::Document(document),
        Err(crate::Error::InvalidInput { message, .. }) => Reply::Error(message),
        Err(other) => Reply::Error(other.to_string()),
    };
    drop(bytes);
    serde_json::to_writer(&mut output, &reply)?;
    output.flush()
}
