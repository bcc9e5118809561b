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

/// Reads a JSON object as its (key, value) entries in file order, without hashing the keys
/// (a repeated key keeps its first position and its last value, as Python's `json.load` does).
pub fn read_json_entries(path: &Path) -> Result<Vec<(String, serde_json::Value)>> {
    let text = read_text(path)?;
    let Entries(entries) = parse_json(path, &text, 0)?;
    Ok(entries)
}

struct Entries(Vec<(String, serde_json::Value)>);

impl<'de> serde::Deserialize<'de> for Entries {
    fn deserialize<D: serde::Deserializer<'de>>(
        deserializer: D,
    ) -> std::result::Result<Self, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = Entries;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> std::result::Result<Entries, A::Error> {
                let mut entries: Vec<(String, serde_json::Value)> =
                    Vec::with_capacity(map.size_hint().unwrap_or(0));
                while let Some(entry) = map.next_entry::<String, serde_json::Value>()? {
                    entries.push(entry);
                }
                Ok(Entries(keep_last_of_repeated_keys(entries)))
            }
        }
        deserializer.deserialize_map(Visitor)
    }
}

/// Python's dict semantics for a repeated key: first position, last value. Repeats are rare, so
/// the common case only checks that keys are unique.
fn keep_last_of_repeated_keys(
    entries: Vec<(String, serde_json::Value)>,
) -> Vec<(String, serde_json::Value)> {
    let unique: rustc_hash::FxHashSet<&str> = entries.iter().map(|(k, _)| k.as_str()).collect();
    if unique.len() == entries.len() {
        return entries;
    }
    let mut position: rustc_hash::FxHashMap<String, usize> = rustc_hash::FxHashMap::default();
    let mut kept: Vec<(String, serde_json::Value)> = Vec::new();
    for (key, value) in entries {
        match position.get(&key) {
            Some(&i) => kept[i].1 = value,
            None => {
                position.insert(key.clone(), kept.len());
                kept.push((key, value));
            }
        }
    }
    kept
}

/// Reads a JSONL file: one `T` per non-blank line, errors naming the line (the rule of
/// [`crate::jsonl`], whose reader this is).
pub fn read_jsonl<T: DeserializeOwned>(path: &Path) -> Result<Vec<T>> {
    crate::jsonl::read(path)
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

/// What a JSON value is, for messages ("expected an array, found a string").
pub(crate) fn json_kind(value: &serde_json::Value) -> &'static str {
    use serde_json::Value;
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}
