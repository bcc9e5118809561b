//! Shared helpers for the parity tests: the reference Python environment and the shared data.
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::Command;

/// The repository root.
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The shared data directory (see `lector_eval::data`); fails the test when it is missing.
pub fn shared_data() -> PathBuf {
    lector_eval::data::shared_data_dir().unwrap_or_else(|e| panic!("{e}"))
}

/// The Python interpreter of the reference environment (`tools/setup-python.sh`, cached after the first run).
pub fn python() -> PathBuf {
    let out = Command::new("bash")
        .arg(repo_root().join("tools/setup-python.sh"))
        .output()
        .expect("run tools/setup-python.sh");
    assert!(
        out.status.success(),
        "tools/setup-python.sh failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8(out.stdout).expect("utf-8");
    PathBuf::from(stdout.lines().last().expect("interpreter path").trim())
}

/// Runs `python script args...` and returns stdout, failing the test on a non-zero exit.
pub fn run_python(script: &std::path::Path, args: &[&std::ffi::OsStr]) -> String {
    let out = Command::new(python())
        .arg(script)
        .args(args)
        .output()
        .expect("run python");
    assert!(
        out.status.success(),
        "{} failed: {}",
        script.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8")
}
