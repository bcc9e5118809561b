//! Fetching a reader checkpoint from the Hugging Face hub.

use crate::error::{Error, Result};
use std::path::PathBuf;

/// Downloads `config.json`, the weights and `tokenizer.json` of hub repository `name` into the
/// hub cache and returns the snapshot directory.
pub fn pull_reader(name: &str) -> Result<PathBuf> {
    Err(Error::Fetch(format!(
        "cannot fetch {name:?}: this build has no Hugging Face hub client; download the checkpoint \
         directory yourself and pass it with --model DIR or LECTOR_READER"
    )))
}
