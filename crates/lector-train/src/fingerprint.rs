//! What `--resume` checks before it continues a run: that the training files and the hard
//! negatives are the ones the run started with. A resumed run replays its seeded order over item
//! indices; over other data it would train something else under the old run's checkpoint, without
//! an error. The fingerprints are recorded in `inputs.json` beside `run.json` when a run starts.
//!
//! - A training file's fingerprint is the sha256 of its bytes.
//! - The index's is the sha256 of what training takes from it: every training example after
//!   retrieval, hard negatives included. An index that changed without changing these negatives
//!   (documents no question retrieves, say) still resumes, since the run would be the same; any
//!   change to a negative is refused.

use crate::error::{io_err, Error, Result};
use crate::examples::{Example, TrainFile};
use crate::negatives::Negatives;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::path::Path;

const INPUTS_FILE: &str = "inputs.json";

/// The fingerprints of a run's inputs, as `inputs.json` holds them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Inputs {
    /// sha256 of each training file, in the run's order.
    pub train: Vec<String>,
    /// sha256 of the training examples with their hard negatives (runs with negatives only).
    pub negatives: Option<String>,
}

/// The sha256 of each of `train`'s files.
pub(crate) fn train_files(train: &[TrainFile]) -> Result<Vec<String>> {
    train
        .iter()
        .map(|file| {
            let bytes = std::fs::read(&file.path).map_err(io_err(&file.path))?;
            Ok(hex(&Sha256::digest(&bytes)))
        })
        .collect()
}

/// The sha256 of `examples` (ids, texts, answers, weights and groups, in order).
pub(crate) fn examples(examples: &[Example]) -> String {
    let mut hash = Sha256::new();
    for e in examples {
        for text in [e.id.as_str(), e.question.as_str(), &e.context] {
            hash.update((text.len() as u64).to_le_bytes());
            hash.update(text.as_bytes());
        }
        let (start, end) = e
            .answer
            .map_or((u64::MAX, u64::MAX), |a| (a.start as u64, a.end as u64));
        for n in [start, end, e.group as u64] {
            hash.update(n.to_le_bytes());
        }
        hash.update(e.weight.to_le_bytes());
    }
    hex(&hash.finalize())
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The fingerprints recorded in `out`, if any (runs started before lector recorded them have none).
pub(crate) fn read(out: &Path) -> Result<Option<Inputs>> {
    let path = out.join(INPUTS_FILE);
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io_err(&path)(e)),
    };
    serde_json::from_str(&text)
        .map(Some)
        .map_err(|e| Error::Checkpoint {
            path,
            message: e.to_string(),
        })
}

/// Records `inputs` in `out`.
pub(crate) fn write(out: &Path, inputs: &Inputs) -> Result<()> {
    let path = out.join(INPUTS_FILE);
    let text = serde_json::to_vec_pretty(inputs).expect("fingerprints serialise");
    lector_index::write_durably(&path, &text).map_err(io_err(&path))
}

/// What a refused resume tells the user to do.
fn remedy(out: &Path) -> String {
    format!(
        "--resume {} continues a run only on the data it started with: restore it, or train into another directory",
        out.display()
    )
}

/// Refuses training files that differ from those `recorded` when the run in `out` started.
pub(crate) fn check_train_files(
    recorded: &Inputs,
    train: &[TrainFile],
    now: &[String],
    out: &Path,
) -> Result<()> {
    if recorded.train.len() != now.len() {
        return Err(Error::Params(format!(
            "the run in {} started with {} training files, run.json now lists {}; {}",
            out.display(),
            recorded.train.len(),
            now.len(),
            remedy(out)
        )));
    }
    let changed = train
        .iter()
        .zip(recorded.train.iter().zip(now))
        .find(|(_, (then, now))| then != now);
    match changed {
        Some((file, (then, now))) => Err(Error::Data {
            path: file.path.clone(),
            message: format!(
                "changed since the run in {} started (sha256 {now}, then {then}); {}",
                out.display(),
                remedy(out)
            ),
        }),
        None => Ok(()),
    }
}

/// Refuses hard negatives that differ from those `recorded` when the run in `out` started.
pub(crate) fn check_negatives(
    recorded: &Inputs,
    negatives: &Negatives,
    now: Option<&str>,
    out: &Path,
) -> Result<()> {
    if recorded.negatives.as_deref() == now {
        return Ok(());
    }
    Err(Error::Data {
        path: negatives.index.clone(),
        message: format!(
            "the hard negatives retrieved from this index differ from those the run in {} started with (the index changed); {}",
            out.display(),
            remedy(out)
        ),
    })
}
