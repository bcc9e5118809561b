//! JSON lines: the one reader of every JSON-lines file lector reads (evaluation inputs, the
//! query log, labels, the judge's items and cache), with one rule for what a line may be.
//!
//! **The rule.** Each line holds one JSON value; blank lines are passed over; lines are
//! numbered from 1. The last line of a file may lack its newline: if it parses it is read like
//! any other; if it ends before its JSON value does, it is *torn* (its writer stopped mid-line:
//! a crash, a kill, a full disk) and is left out, since no writer acknowledged it. Any other
//! line that does not parse (or does not fit the record type) is an error naming the file, the
//! line and the column. Writers that append to a file read this
//! way must cut a torn last line off (or start a new file) before appending, so that a new
//! record never continues a torn one.
//!
//! [`read_from`] reads on from where an earlier read stopped ([`Position`]), parsing only the
//! bytes added since: a torn last line is not passed, so it is read again once it is complete.

use crate::error::{Error, Result};
use serde::de::DeserializeOwned;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

/// Where a read of a JSON-lines file stopped: the bytes consumed and the lines they hold.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Position {
    /// Bytes consumed: complete lines, and a last record without its newline. A torn last line
    /// is not consumed.
    pub offset: u64,
    /// Lines consumed.
    pub line: usize,
    /// The last line consumed has no newline yet: a newline arriving next ends it.
    open_line: bool,
}

/// The records read from some bytes of a file, each with its line number, and where the
/// read stopped.
#[derive(Debug, Clone, PartialEq)]
pub struct Lines<T> {
    /// The records, in file order, with their 1-based line numbers.
    pub records: Vec<(usize, T)>,
    /// Where the next read starts.
    pub end: Position,
    /// The torn last line left out, if any (its line number).
    pub torn: Option<usize>,
}

/// Every record of the JSON-lines file at `path` (see the module's rule).
pub fn read<T: DeserializeOwned>(path: &Path) -> Result<Vec<T>> {
    Ok(read_numbered(path)?.into_iter().map(|(_, r)| r).collect())
}

/// Every record of the file at `path` with its 1-based line number.
pub fn read_numbered<T: DeserializeOwned>(path: &Path) -> Result<Vec<(usize, T)>> {
    Ok(read_from(path, Position::default())?.records)
}

/// The records of the file at `path` after `from` (a [`Lines::end`] of an earlier read of the
/// same file; [`Position::default`] for the whole file), parsing only the bytes after it.
pub fn read_from<T: DeserializeOwned>(path: &Path, from: Position) -> Result<Lines<T>> {
    let io = |source| Error::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut file = std::fs::File::open(path).map_err(io)?;
    file.seek(SeekFrom::Start(from.offset)).map_err(io)?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes).map_err(io)?;
    parse(path, &bytes, from)
}

/// The records of `bytes`, which follow `from` in the file at `path` (named in errors).
pub fn parse<T: DeserializeOwned>(path: &Path, bytes: &[u8], from: Position) -> Result<Lines<T>> {
    let mut lines = Lines {
        records: Vec::new(),
        end: from,
        torn: None,
    };
    let mut rest = bytes;
    if from.open_line {
        match rest.first() {
            None => return Ok(lines),
            Some(b'\n') => {
                rest = &rest[1..];
                lines.end.offset += 1;
                lines.end.open_line = false;
            }
            // The record read last goes on: that line, taken whole, does not parse.
            Some(_) => return Err(continued(path, from.line)),
        }
    }
    while !rest.is_empty() {
        let (line, terminated) = match rest.iter().position(|&b| b == b'\n') {
            Some(i) => (&rest[..=i], true),
            None => (rest, false),
        };
        let number = lines.end.line + 1;
        if !line.iter().all(u8::is_ascii_whitespace) {
            match serde_json::from_slice(line) {
                Ok(record) => lines.records.push((number, record)),
                Err(e) if !terminated && e.is_eof() => {
                    lines.torn = Some(number);
                    break;
                }
                Err(e) => return Err(parse_error(path, number, &e)),
            }
        } else if !terminated {
            // Trailing blanks without a newline: wait for the line to end.
            break;
        }
        lines.end = Position {
            offset: lines.end.offset + line.len() as u64,
            line: number,
            open_line: !terminated,
        };
        rest = &rest[line.len()..];
    }
    Ok(lines)
}

fn parse_error(path: &Path, line: usize, e: &serde_json::Error) -> Error {
    let message = e.to_string();
    let message = match message.rfind(" at line ") {
        Some(i) => message[..i].to_string(),
        None => message,
    };
    Error::Parse {
        path: path.to_path_buf(),
        line,
        column: e.column(),
        message,
    }
}

fn continued(path: &Path, line: usize) -> Error {
    Error::Parse {
        path: path.to_path_buf(),
        line,
        column: 0,
        message: "a record goes on after its JSON value ended, without a newline".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    fn values(lines: &Lines<Value>) -> Vec<(usize, Value)> {
        lines.records.clone()
    }

    fn parse_all(text: &str) -> Result<Lines<Value>> {
        parse(Path::new("f.jsonl"), text.as_bytes(), Position::default())
    }

    #[test]
    fn a_torn_last_line_is_left_out_and_not_consumed() {
        let lines = parse_all("{\"a\":1}\n\n{\"a\":2}\n{\"a\":").unwrap();
        assert_eq!(values(&lines), [(1, json!({"a": 1})), (3, json!({"a": 2}))]);
        assert_eq!(lines.torn, Some(4));
        assert_eq!(lines.end.offset, 17);
        assert_eq!(lines.end.line, 3);
    }

    #[test]
    fn a_complete_last_line_without_a_newline_is_read() {
        let lines = parse_all("{\"a\":1}\n{\"a\":2}").unwrap();
        assert_eq!(values(&lines).len(), 2);
        assert_eq!(lines.torn, None);
        assert_eq!(lines.end.offset, 15);
    }

    #[test]
    fn any_other_bad_line_names_its_line_and_column() {
        let err = parse_all("{\"a\":1}\n{\"a\" 2}\n{\"a\":3}\n").unwrap_err();
        let text = err.to_string();
        assert!(text.starts_with("f.jsonl:2:6: expected `:`"), "{text}");
        // A torn line that was later followed by more lines is no longer the last: an error.
        let err = parse_all("{\"a\":1}\n{\"a\":{\"a\":2}\n").unwrap_err();
        assert!(err.to_string().starts_with("f.jsonl:2:"), "{err}");
    }

    #[test]
    fn a_whole_last_value_of_the_wrong_shape_is_an_error_not_a_torn_line() {
        let err = parse(Path::new("f"), b"[1]\n[2]\n\"x\"", Position::default())
            .map(|l: Lines<Vec<u32>>| l.records)
            .unwrap_err();
        assert!(err.to_string().starts_with("f:3:"), "{err}");
    }

    #[test]
    fn a_torn_multibyte_character_is_a_torn_line() {
        let text = "{\"a\":\"é\"}\n{\"a\":\"é";
        let bytes = &text.as_bytes()[..text.len() - 1];
        let lines: Lines<Value> = parse(Path::new("f"), bytes, Position::default()).unwrap();
        assert_eq!((lines.records.len(), lines.torn), (1, Some(2)));
    }

    #[test]
    fn reading_on_parses_only_new_bytes_and_finishes_a_torn_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log.jsonl");
        std::fs::write(&path, "{\"a\":1}\n{\"a\":").unwrap();
        let first: Lines<Value> = read_from(&path, Position::default()).unwrap();
        assert_eq!((first.records.len(), first.torn), (1, Some(2)));
        // The writer finishes its line and adds one without a newline yet.
        std::fs::write(&path, "{\"a\":1}\n{\"a\":2}\n{\"a\":3}").unwrap();
        let second: Lines<Value> = read_from(&path, first.end).unwrap();
        assert_eq!(
            values(&second),
            [(2, json!({"a": 2})), (3, json!({"a": 3}))]
        );
        // Its newline arrives, then another record: line numbers stay those of the whole file.
        std::fs::write(&path, "{\"a\":1}\n{\"a\":2}\n{\"a\":3}\n{\"a\":4}\n").unwrap();
        let third: Lines<Value> = read_from(&path, second.end).unwrap();
        assert_eq!(values(&third), [(4, json!({"a": 4}))]);
        let whole: Vec<(usize, Value)> = read_numbered(&path).unwrap();
        assert_eq!(whole.len(), 4);
        assert_eq!(
            third.end,
            read_from::<Value>(&path, Position::default()).unwrap().end
        );
    }

    #[test]
    fn a_record_glued_onto_one_read_earlier_is_an_error_for_that_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log.jsonl");
        std::fs::write(&path, "{\"a\":1}").unwrap();
        let first: Lines<Value> = read_from(&path, Position::default()).unwrap();
        std::fs::write(&path, "{\"a\":1}{\"a\":2}\n").unwrap();
        let err = read_from::<Value>(&path, first.end).unwrap_err();
        assert!(
            err.to_string()
                .starts_with(&format!("{}:1:", path.display())),
            "{err}"
        );
        // As reading the whole file says.
        let whole = read::<Value>(&path).unwrap_err();
        assert!(
            whole
                .to_string()
                .starts_with(&format!("{}:1:", path.display())),
            "{whole}"
        );
    }
}
