//! JSON lines, one document per line: `{id, title?, text, date?, metadata?}` or BEIR
//! `{_id, title, text}`. Lines are read with a bound, so one huge line cannot exhaust memory.

use crate::document::{nesting_depth, Document, Embedding, MAX_METADATA_DEPTH};
use crate::error::{invalid, json_message, Error, Result};
use crate::read::{checked, human_size, over_limit, IngestOptions, Item};
use crate::walk::SourceFile;
use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::path::Path;

/// Reads the documents of a JSONL file, one line at a time.
pub(crate) fn read(
    file: &SourceFile,
    options: &IngestOptions,
    emit: &mut dyn FnMut(Item, u64) -> Result<()>,
) -> Result<()> {
    let path = file.path.as_path();
    let mut reader = match std::fs::File::open(path) {
        Ok(f) => BufReader::with_capacity(1 << 16, f),
        Err(source) => return emit(io_item(path, source), file.bytes),
    };
    let (mut buf, mut line, mut offset) = (Vec::new(), 0usize, 0u64);
    loop {
        let read = match read_line_bounded(&mut reader, &mut buf, options.max_document_bytes) {
            Ok(Some(read)) => read,
            Ok(None) => return Ok(()),
            Err(source) => return emit(io_item(path, source), file.bytes),
        };
        line += 1;
        offset += read.bytes;
        let item = if let Some(length) = read.too_long {
            let message = format!("line has {}, {}", human_size(length), over_limit(options));
            Item::Invalid(invalid(path, Some(line), message))
        } else if buf.iter().all(u8::is_ascii_whitespace) {
            continue;
        } else {
            match record(&buf, path, line) {
                Ok(doc) => checked(doc, path, Some(line), options),
                Err(err) => Item::Invalid(err),
            }
        };
        emit(item, offset)?;
    }
}

fn io_item(path: &Path, source: std::io::Error) -> Item {
    Item::Invalid(Error::Io {
        path: path.to_path_buf(),
        source,
    })
}

/// One line as read by [`read_line_bounded`].
#[derive(Debug, PartialEq)]
struct LineRead {
    /// Bytes consumed, newline included.
    bytes: u64,
    /// The line's length (without its newline) when it is over the limit; it was not kept.
    too_long: Option<u64>,
}

/// Reads the next line (through its `\n`) into `buf`, keeping at most `limit` bytes of content:
/// a longer line is consumed to its end without being stored, so memory stays bounded by the
/// limit whatever the file holds. `None` at the end of the file.
fn read_line_bounded(
    reader: &mut impl BufRead,
    buf: &mut Vec<u8>,
    limit: usize,
) -> std::io::Result<Option<LineRead>> {
    buf.clear();
    let (mut total, mut overflow, mut ended) = (0u64, false, false);
    while !ended {
        let available = match reader.fill_buf() {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if available.is_empty() {
            break;
        }
        let take = match available.iter().position(|&b| b == b'\n') {
            Some(i) => {
                ended = true;
                i + 1
            }
            None => available.len(),
        };
        // Room for the content and its newline; past that, stop storing.
        overflow |= buf.len() + take > limit + 1;
        if overflow {
            buf.clear();
        } else {
            buf.extend_from_slice(&available[..take]);
        }
        reader.consume(take);
        total += take as u64;
    }
    if total == 0 {
        return Ok(None);
    }
    let content = total - u64::from(ended);
    if content > limit as u64 {
        // A last line without a newline may fill the newline's room: it is over all the same.
        buf.clear();
    }
    Ok(Some(LineRead {
        bytes: total,
        too_long: (content > limit as u64).then_some(content),
    }))
}

fn record(bytes: &[u8], path: &Path, line: usize) -> Result<Document> {
    let value: Value =
        serde_json::from_slice(bytes).map_err(|e| invalid(path, Some(line), json_message(&e)))?;
    document_from_json(&value).map_err(|message| invalid(path, Some(line), message))
}

/// A document from its JSON object `{id, title?, text, date?, metadata?, embedding?,
/// embedding_model?}` (BEIR's `_id` for `id`, Haystack's `meta` for `metadata`), as a JSONL line
/// gives it; the error says what is wrong. A document's own `embedding` (a list of numbers) needs
/// the `embedding_model` that made it.
pub fn document_from_json(value: &Value) -> std::result::Result<Document, String> {
    let Value::Object(map) = value else {
        return Err("expected a JSON object".into());
    };
    let field = |name: &str| -> std::result::Result<Option<String>, String> {
        match map.get(name) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(Value::Number(n)) if name.ends_with("id") => Ok(Some(n.to_string())),
            Some(_) => Err(format!("`{name}` is not a string")),
        }
    };
    let id = match field("id")? {
        Some(id) => id,
        None => field("_id")?.ok_or("no `id` (or BEIR `_id`) field")?,
    };
    if id.is_empty() {
        return Err("empty `id`".into());
    }
    let text = field("text")?.ok_or_else(|| format!("document `{id}` has no `text` field"))?;
    if text.trim().is_empty() {
        return Err(format!("document `{id}` has no text"));
    }
    // `meta` is Haystack's name for the same object.
    let metadata = map.get("metadata").or_else(|| map.get("meta"));
    if metadata.is_some_and(|m| !(m.is_object() || m.is_null())) {
        return Err("`metadata` must be an object".into());
    }
    if metadata.is_some_and(|m| nesting_depth(m) > MAX_METADATA_DEPTH) {
        return Err(format!(
            "document `{id}`: `metadata` nests deeper than {MAX_METADATA_DEPTH} levels"
        ));
    }
    let metadata = metadata.filter(|m| !is_empty_json(m)).cloned();
    let embedding = match map.get("embedding") {
        None | Some(Value::Null) => None,
        Some(value) => {
            let model = field("embedding_model")?.ok_or_else(|| {
                format!(
                    "document `{id}` has an `embedding` but no `embedding_model` naming its model"
                )
            })?;
            let embedding = Embedding {
                model,
                vector: numbers(value).ok_or("`embedding` must be a list of numbers")?,
            };
            embedding
                .check()
                .map_err(|why| format!("document `{id}`: {why}"))?;
            Some(embedding)
        }
    };
    Ok(Document {
        title: field("title")?.filter(|t| !t.is_empty()),
        date: field("date")?,
        metadata,
        id,
        text,
        embedding,
    })
}

/// The values of a JSON list of numbers, as f32.
fn numbers(value: &Value) -> Option<Vec<f32>> {
    value
        .as_array()?
        .iter()
        .map(|x| x.as_f64().map(|x| x as f32))
        .collect()
}

fn is_empty_json(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Object(m) => m.is_empty(),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nested(levels: usize) -> Value {
        let mut value = serde_json::json!(1);
        for _ in 0..levels {
            value = serde_json::json!({ "a": value });
        }
        value
    }

    #[test]
    fn metadata_deeper_than_the_limit_and_empty_text_are_refused() {
        let doc = |metadata: Value, text: &str| {
            document_from_json(&serde_json::json!({"id": "d", "text": text, "metadata": metadata}))
        };
        assert_eq!(
            nesting_depth(&nested(MAX_METADATA_DEPTH)),
            MAX_METADATA_DEPTH
        );
        assert!(doc(nested(MAX_METADATA_DEPTH), "fine").is_ok());
        let err = doc(nested(MAX_METADATA_DEPTH + 1), "fine").unwrap_err();
        assert_eq!(err, "document `d`: `metadata` nests deeper than 100 levels");
        let err = doc(Value::Null, " \n ").unwrap_err();
        assert_eq!(err, "document `d` has no text");
    }

    fn lines(input: &[u8], limit: usize) -> Vec<(LineRead, Vec<u8>)> {
        // A tiny buffer, so lines span many `fill_buf` calls.
        let mut reader = BufReader::with_capacity(3, input);
        let (mut out, mut buf) = (Vec::new(), Vec::new());
        while let Some(read) = read_line_bounded(&mut reader, &mut buf, limit).unwrap() {
            out.push((read, buf.clone()));
        }
        out
    }

    #[test]
    fn bounded_lines_keep_short_ones_and_drop_long_ones_whole() {
        let read = lines(b"abcd\nabcdefghij\nabcde\n\nxyz", 5);
        let kept = |bytes, text: &[u8]| {
            (
                LineRead {
                    bytes,
                    too_long: None,
                },
                text.to_vec(),
            )
        };
        let dropped = |bytes, length| {
            let read = LineRead {
                bytes,
                too_long: Some(length),
            };
            (read, Vec::new())
        };
        assert_eq!(
            read,
            [
                kept(5, b"abcd\n"),
                dropped(11, 10),
                kept(6, b"abcde\n"),
                kept(1, b"\n"),
                kept(3, b"xyz"),
            ]
        );
        // A last line without a newline is measured without one.
        assert_eq!(lines(b"abcdef", 5), [dropped(6, 6)]);
        assert_eq!(lines(b"", 5), []);
    }

    #[test]
    fn an_own_embedding_needs_its_model_and_usable_numbers() {
        let doc = |extra: Value| {
            let mut value = serde_json::json!({"id": "d", "text": "Some text."});
            value
                .as_object_mut()
                .unwrap()
                .extend(extra.as_object().unwrap().clone());
            document_from_json(&value)
        };
        let ok = doc(serde_json::json!({"embedding": [0.5, -1, 2e-3], "embedding_model": "m"}));
        let embedding = ok.unwrap().embedding.unwrap();
        assert_eq!(
            (embedding.model.as_str(), embedding.vector),
            ("m", vec![0.5, -1.0, 0.002])
        );
        let err = |extra| doc(extra).unwrap_err();
        assert!(err(serde_json::json!({"embedding": [1.0]})).contains("embedding_model"));
        assert!(
            err(serde_json::json!({"embedding": [1, "x"], "embedding_model": "m"}))
                .contains("list of numbers")
        );
        assert!(
            err(serde_json::json!({"embedding": [0, 0], "embedding_model": "m"}))
                .contains("all zeros")
        );
        assert!(
            err(serde_json::json!({"embedding": [1e300], "embedding_model": "m"}))
                .contains("not a finite number")
        );
        assert_eq!(
            doc(serde_json::json!({"embedding": null}))
                .unwrap()
                .embedding,
            None
        );
    }
}
