//! Where the shared evaluation data lives: resolved here and nowhere else.
//!
//! `$LECTOR_DATA_DIR` when set, else `../shared/data` beside the repository (the layout of a
//! developer's checkout and of CI). Tests call [`require`], which fails loudly when the data is
//! missing rather than skipping: a test that silently skips proves nothing.

use std::path::{Path, PathBuf};

/// The environment variable that points at the shared data directory.
pub const DATA_DIR_VAR: &str = "LECTOR_DATA_DIR";

/// The shared data directory, or a message saying where it was looked for.
pub fn shared_data_dir() -> Result<PathBuf, String> {
    if let Some(dir) = std::env::var_os(DATA_DIR_VAR).filter(|d| !d.is_empty()) {
        let dir = PathBuf::from(dir);
        return if dir.is_dir() {
            Ok(dir)
        } else {
            Err(format!(
                "${DATA_DIR_VAR} is {}, which is not a directory",
                dir.display()
            ))
        };
    }
    // This crate sits at <repo>/crates/lector-eval; the data beside the repository.
    let beside = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data");
    match beside.canonicalize() {
        Ok(dir) if dir.is_dir() => Ok(dir),
        _ => Err(format!(
            "the shared data is missing: set ${DATA_DIR_VAR}, or put it at {} (../shared/data beside the checkout)",
            beside.display()
        )),
    }
}

/// `relative` inside the shared data directory; panics with where it looked when it is missing.
/// For tests and benchmarks, which must fail, not skip, without their data.
pub fn require(relative: &str) -> PathBuf {
    let dir = shared_data_dir().unwrap_or_else(|e| panic!("{e}"));
    let path = dir.join(relative);
    assert!(
        path.exists(),
        "{} is missing from the shared data at {}",
        relative,
        dir.display()
    );
    path
}
