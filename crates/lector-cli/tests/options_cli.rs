//! Numeric options that cannot work are refused when the arguments are parsed, naming the option,
//! instead of panicking (`--timeout-secs 1e20`) or silently refusing everything (`--max-doc-mb -1`).

use std::process::Command;

fn refused(args: &[&str], option: &str) {
    let out = Command::new(env!("CARGO_BIN_EXE_lector"))
        .args(args)
        .output()
        .expect("lector runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
    assert!(
        stderr.contains(option),
        "{args:?} should name {option}: {stderr}"
    );
    assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
}

#[test]
fn impossible_numbers_are_refused_with_the_option_named() {
    let dir = tempfile::tempdir().unwrap();
    let index = dir.path().join("index");
    let index = index.to_str().unwrap();
    refused(
        &["serve", "--index", index, "--timeout-secs", "1e20"],
        "--timeout-secs",
    );
    refused(
        &["serve", "--index", index, "--timeout-secs", "NaN"],
        "--timeout-secs",
    );
    refused(&["serve", "--index", index, "--workers", "0"], "--workers");
    refused(
        &["serve", "--index", index, "--body-timeout-secs", "0"],
        "--body-timeout-secs",
    );
    refused(
        &["serve", "--index", index, "--header-timeout-secs", "inf"],
        "--header-timeout-secs",
    );
    refused(
        &["serve", "--index", index, "--max-connections", "0"],
        "--max-connections",
    );
    refused(
        &["ask", "q", "--index", index, "--path-weights", "1,2"],
        "--path-weights",
    );
    refused(
        &["index", "add", "x.txt", "--index", index, "--max-doc-mb=-1"],
        "--max-doc-mb",
    );
    refused(
        &["index", "add", "x.txt", "--index", index, "--b", "1.5"],
        "--b",
    );
    refused(&["ask", "q", "--index", index, "--k", "0"], "--k");
    refused(&["search", "q", "--index", index, "--rrf-k=-1"], "--rrf-k");
    refused(
        &["read", "--squad", "x.json", "--max-seq-len", "0"],
        "--max-seq-len",
    );
    // Nothing was created by a refused command.
    assert!(!dir.path().join("index").exists());
}

/// `lector ... | head` closes the pipe early: lector must end as `cat` does (killed by SIGPIPE,
/// silently), not panic in `println!`.
#[cfg(unix)]
#[test]
fn models_pull_offers_no_hub_download_it_cannot_do() {
    // `--hub` only ever failed ("no hub client") while its help said it fetched. The real client
    // takes the repository as a positional argument (tests/hub_cli.rs); `--hub` stays refused.
    let help = Command::new(env!("CARGO_BIN_EXE_lector"))
        .args(["models", "pull", "--help"])
        .output()
        .expect("lector runs");
    let help = String::from_utf8_lossy(&help.stdout);
    assert!(!help.contains("--hub"), "{help}");
    assert!(
        help.contains("REPO[@REVISION]") && help.contains("HF_TOKEN"),
        "{help}"
    );
    refused(
        &[
            "models",
            "pull",
            "reader",
            "--hub",
            "deepset/roberta-base-squad2",
        ],
        "unexpected argument '--hub'",
    );
}

#[test]
fn a_closed_stdout_ends_lector_quietly() {
    use std::os::unix::process::ExitStatusExt;
    use std::process::Stdio;
    let dir = tempfile::tempdir().unwrap();
    let index = dir.path().join("index");
    let sample = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../samples/squad-v1.1-sample.json"
    );
    let added = Command::new(env!("CARGO_BIN_EXE_lector"))
        .args(["index", "add", sample, "--index"])
        .arg(&index)
        .output()
        .unwrap();
    assert!(added.status.success(), "{added:?}");
    let mut search = Command::new(env!("CARGO_BIN_EXE_lector"))
        .args(["search", "Super Bowl", "--index"])
        .arg(&index)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(search.stdout.take()); // the reader is gone before lector writes
    let out = search.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    const SIGPIPE: i32 = 13; // on Linux and the BSDs
    assert_eq!(out.status.signal(), Some(SIGPIPE), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}
