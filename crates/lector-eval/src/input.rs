//! Reading evaluation inputs with errors that point at the file, line and column.

use crate::error::{Error, Result};
use serde::de::DeserializeOwned;
use std::path::Path;

/// Reads a whole file as UTF-8 text.
pub fn read_text(path: &Path) -> Result<String> {
    let bytes = std::fs::read(path).map_err(|source| Error::Io {
        path: path.to_path_buf(),
        source,
    })?;
    String::from_utf8(bytes).map_err(|e| {
        let (line, column) = line_col(&e.as_bytes()[..e.utf8_error().valid_up_to()]);
        Error::Parse {
            path: path.to_path_buf(),
            line,
            column,
            message: "invalid UTF-8".into(),
        }
    })
}

/// Parses a whole file as one JSON value of type `T`.
pub fn read_json<T: DeserializeOwned>(path: &Path) -> Result<T> {
    let text = read_text(path)?;
    parse_json(path, &text, 0)
}

/// Parses `text` as JSON; `line_offset` is added to reported line numbers (for JSONL lines).
pub fn parse_json<T: DeserializeOwned>(path: &Path, text: &str, line_offset: usize) -> Result<T> {
    serde_json::from_str(text).map_err(|e| Error::Parse {
        path: path.to_path_buf(),
        line: e.line() + line_offset,
        column: e.column(),
        message: strip_position(&e.to_string()),
    })
}

/// Reads a JSONL file: one `T` per non-blank line, errors naming the line.
pub fn read_jsonl<T: DeserializeOwned>(path: &Path) -> Result<Vec<T>> {
    let text = read_text(path)?;
    text.lines()
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty())
        .map(|(i, line)| parse_json(path, line, i))
        .collect()
}

/// An `Invalid` error for `path`.
pub fn invalid(path: &Path, message: impl Into<String>) -> Error {
    Error::Invalid {
        path: path.to_path_buf(),
        message: message.into(),
    }
}

/// serde_json appends " at line L column C"; we report the position ourselves.
fn strip_position(message: &str) -> String {
    match message.rfind(" at line ") {
        Some(i) => message[..i].to_string(),
        None => message.to_string(),
    }
}

fn line_col(prefix: &[u8]) -> (usize, usize) {
    let line = prefix.iter().filter(|&&b| b == b'\n').count() + 1;
    let column = prefix.iter().rev().take_while(|&&b| b != b'\n').count() + 1;
    (line, column)
}
