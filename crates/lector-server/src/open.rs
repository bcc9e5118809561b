//! Starting a server from an index directory (or an external store) and a pipeline
//! configuration, without the binary: the writer (or read-only access), the pipeline built over
//! the index's last commit, and the state every request shares.

use crate::error::Error;
use crate::state::{AppState, Config};
use lector_index::{DocumentStore, Index, IndexSettings, IndexWriter, SearchOptions};
use lector_pipeline::{Built, Calibration, PipelineConfig};
use std::path::Path;

/// A server's state, ready for [`crate::serve`], and what the user should know about how it
/// was put together (for example, a calibration made with another reader).
pub struct Opened {
    pub state: AppState,
    pub warnings: Vec<String>,
}

/// Opens the index in `dir` and builds `pipeline` over it. Read-write takes the index's writer
/// lock and creates an empty index when `dir` has none (documents come over HTTP); read-only
/// needs an index and leaves the lock to others. `config` makes the server's settings from the
/// search options the pipeline was configured with (e.g. `|search| Config::new(search, limits)`).
/// `notify` hears of model fetches and of an index created empty.
pub fn open(
    dir: &Path,
    pipeline: &PipelineConfig,
    read_only: bool,
    config: impl FnOnce(SearchOptions) -> Config,
    notify: &dyn Fn(&str),
) -> Result<Opened, Error> {
    let writer = match read_only {
        true => None,
        false => Some(open_writer(dir, notify)?),
    };
    let index = match &writer {
        Some(w) => w.committed().clone(),
        None => Index::open(dir)?,
    };
    opened(pipeline.build(index, notify)?, writer, config)
}

/// Serves an external store (e.g. Redis) read-only, with the calibration kept in it: document
/// writes get 403 (they go to the store through `lector index add --store`), and every ask
/// reads the store as it is then. `config` and `notify` as for [`open`].
pub fn open_store(
    store: impl DocumentStore + 'static,
    pipeline: &PipelineConfig,
    config: impl FnOnce(SearchOptions) -> Config,
    notify: &dyn Fn(&str),
) -> Result<Opened, Error> {
    let calibration = Calibration::load_from(&store)?;
    let built = pipeline.build_over(store, calibration, notify)?;
    opened(built, None, config)
}

fn opened<S: DocumentStore + 'static>(
    built: Built<S>,
    writer: Option<IndexWriter>,
    config: impl FnOnce(SearchOptions) -> Config,
) -> Result<Opened, Error> {
    let Built {
        pipeline,
        search,
        embedder,
        warnings,
    } = built;
    let state = AppState::new(pipeline, writer, embedder, config(search))?;
    Ok(Opened { state, warnings })
}

/// The index's writer; a missing index is created empty.
fn open_writer(dir: &Path, notify: &dyn Fn(&str)) -> Result<IndexWriter, Error> {
    match IndexWriter::open(dir) {
        Err(lector_index::Error::NoIndex { .. }) => {
            let writer = IndexWriter::open_or_create(dir, IndexSettings::default())?;
            notify(&format!("created an empty index at {}", dir.display()));
            Ok(writer)
        }
        opened => Ok(opened?),
    }
}
