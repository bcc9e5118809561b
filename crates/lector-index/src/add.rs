//! Adding walked files to an index: the ingestion loop of `lector index add` without its
//! printing, so every front end adds files the same way.
//!
//! [`add_files`] stages the documents of every file of a [`Walk`], commits whenever
//! [`AddOptions::commit_every`] documents are staged (a crash loses at most one batch) and
//! reports what happens as [`AddEvent`]s. It leaves the last batch staged: the caller commits it,
//! which also lets it show embedding progress or decide not to commit after all.

use crate::docstore::StoreWriter;
use crate::error::{Error, Result};
use crate::writer::{AddOutcome, CommitInfo};
use lector_ingest::{read_file, IngestOptions, Item, SourceFile, Walk};
use std::ops::ControlFlow;

/// How [`add_files`] reads and commits.
#[derive(Debug, Clone)]
pub struct AddOptions {
    /// Limits applied while reading each file.
    pub ingest: IngestOptions,
    /// Commit once this many new or changed documents are staged (0 counts as 1).
    pub commit_every: usize,
    /// Stop at the first walk error or invalid file or line instead of skipping it.
    pub strict: bool,
    /// Metadata fields set on every document read (replacing a document's own of that name).
    pub fields: serde_json::Map<String, serde_json::Value>,
}

/// What [`add_files`] did with the documents and files it was given.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct AddCounts {
    /// Documents with a new id.
    pub added: usize,
    /// Documents that replace one with the same id and other content.
    pub replaced: usize,
    /// Documents already in the index with the same content.
    pub unchanged: usize,
    /// Walk errors and invalid files or lines that were skipped.
    pub invalid: usize,
    /// Files of other types that the walk left out.
    pub ignored: usize,
}

/// Progress of [`add_files`], reported as it happens.
#[derive(Debug)]
pub enum AddEvent<'a> {
    /// Bytes of all files read so far, for a progress bar: never decreases, and ends at the sum
    /// of the walked files' `bytes`.
    Read { bytes: u64 },
    /// A walk error or an invalid file or line was skipped and counted as invalid (never sent
    /// with [`AddOptions::strict`], which stops there instead).
    Skipped(&'a lector_ingest::Error),
    /// A batch commit of a dense index has embedded `done` of `total` new passages.
    Embedding { done: usize, total: usize },
    /// A batch commit finished.
    Committed(&'a CommitInfo),
}

/// Stages the documents of `walk`'s files in `writer`, committing full batches, and counts them.
/// The last batch stays staged for the caller to commit. `on_event` returning
/// `ControlFlow::Break` (a user's interrupt) stops it before the next document, with
/// [`Error::AddStopped`] caused by [`Error::Interrupted`].
///
/// Fails with [`Error::AddStopped`] (with nothing committed since the last batch) at a failed
/// batch commit, and with `strict` at the first walk error (before adding anything) or invalid
/// file or line. The documents staged since the last commit are then still pending in `writer`:
/// dropping it without committing keeps the index as it was at that commit.
pub fn add_files(
    writer: &mut dyn StoreWriter,
    walk: Walk,
    options: &AddOptions,
    on_event: &mut dyn FnMut(AddEvent<'_>) -> ControlFlow<()>,
) -> Result<AddCounts> {
    let mut counts = AddCounts {
        ignored: walk.ignored.len(),
        ..AddCounts::default()
    };
    for err in walk.errors {
        if options.strict {
            return Err(stopped(writer, err, true));
        }
        counts.invalid += 1;
        send(on_event, AddEvent::Skipped(&err)).map_err(|err| stopped(writer, err, true))?;
    }
    let mut done = 0;
    for file in &walk.files {
        add_file(writer, file, done, options, &mut counts, on_event)
            .map_err(|err| stopped(writer, err, false))?;
        done += file.bytes;
        // A file without documents (or an empty one) sends no event of its own.
        send(on_event, AddEvent::Read { bytes: done })
            .map_err(|err| stopped(writer, err, false))?;
    }
    Ok(counts)
}

/// Reads one file into `writer`; `done` is the bytes of the files before it.
fn add_file(
    writer: &mut dyn StoreWriter,
    file: &SourceFile,
    done: u64,
    options: &AddOptions,
    counts: &mut AddCounts,
    on_event: &mut dyn FnMut(AddEvent<'_>) -> ControlFlow<()>,
) -> lector_ingest::Result<()> {
    read_file(file, &options.ingest, &mut |item, read| {
        // A file that grew since the walk must not run past where the next file starts.
        let read = AddEvent::Read {
            bytes: done + read.min(file.bytes),
        };
        send(on_event, read)?;
        let item = with_fields(item, &options.fields, &file.path);
        stage(writer, item, options, counts, on_event)
    })
}

/// Stages, skips or refuses one item, then commits if the batch is full. An error returned here
/// stops `read_file`.
fn stage(
    writer: &mut dyn StoreWriter,
    item: Item,
    options: &AddOptions,
    counts: &mut AddCounts,
    on_event: &mut dyn FnMut(AddEvent<'_>) -> ControlFlow<()>,
) -> lector_ingest::Result<()> {
    match item {
        Item::Document(doc) => match writer.add(doc)? {
            AddOutcome::Added => counts.added += 1,
            AddOutcome::Replaced => counts.replaced += 1,
            AddOutcome::Unchanged => counts.unchanged += 1,
        },
        Item::Invalid(err) if options.strict => return Err(err),
        Item::Invalid(err) => {
            counts.invalid += 1;
            send(on_event, AddEvent::Skipped(&err))?;
        }
    }
    if writer.pending() >= options.commit_every.max(1) {
        // A commit runs to its end: the interrupt is seen after it.
        let info = writer.commit(&mut |done, total| {
            let _ = on_event(AddEvent::Embedding { done, total });
        })?;
        send(on_event, AddEvent::Committed(&info))?;
    }
    Ok(())
}

/// Sends `event`; an interrupt when the caller answers `Break`.
fn send(
    on_event: &mut dyn FnMut(AddEvent<'_>) -> ControlFlow<()>,
    event: AddEvent<'_>,
) -> lector_ingest::Result<()> {
    match on_event(event) {
        ControlFlow::Continue(()) => Ok(()),
        ControlFlow::Break(()) => Err(Error::Interrupted.into()),
    }
}

/// `item` with `fields` set; invalid when the document's metadata is not an object.
fn with_fields(
    item: Item,
    fields: &serde_json::Map<String, serde_json::Value>,
    path: &std::path::Path,
) -> Item {
    let Item::Document(mut doc) = item else {
        return item;
    };
    for (key, value) in fields {
        if !doc.set_field(key, value.clone()) {
            return Item::Invalid(lector_ingest::Error::InvalidInput {
                path: path.to_path_buf(),
                line: None,
                message: format!(
                    "document `{}`: its metadata is not an object, so `{key}` cannot be set",
                    doc.id
                ),
            });
        }
    }
    Item::Document(doc)
}

fn stopped(writer: &dyn StoreWriter, cause: lector_ingest::Error, before_adding: bool) -> Error {
    Error::AddStopped {
        cause,
        kept: writer.committed_documents(),
        before_adding,
    }
}
