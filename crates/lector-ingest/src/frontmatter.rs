//! Markdown front matter: a YAML block between `---` lines at the top of the file, as static-site
//! generators and note-taking tools write it. Its fields become the document's metadata.
//!
//! The YAML read is the subset front matter uses in practice: one `key: value` per line, where
//! the value is a double- or single-quoted string, a number, `true`/`false`, `null`/`~`, a flow
//! list `[a, "b", 3]`, plain text, or nothing followed by an indented block list (`  - item`
//! lines); blank lines and `#` comments are skipped. Anything else (nested mappings, multi-line
//! strings, anchors) is refused with the line it is on, rather than read wrongly.
//!
//! The block is then blanked in the document text (every character but line breaks becomes a
//! space), so it is not indexed as text while character offsets and line numbers still match
//! the file.

use serde_json::{Map, Number, Value};

/// What cannot be read: the 1-based line and why.
type Problem = (usize, String);

/// The block's fields and the text with the block blanked.
type Split = (Map<String, Value>, String);

/// The front matter of `text`, if it opens with one: its fields, and the text with the block
/// blanked. `Err((line, reason))` for a block this reader cannot read.
pub(crate) fn split(text: &str) -> Result<Option<Split>, Problem> {
    let mut lines = text.split_inclusive('\n');
    match lines.next() {
        Some(first) if first.trim_end() == "---" => {}
        _ => return Ok(None),
    }
    let mut fields = Map::new();
    let mut end = None;
    let mut consumed = text.split_inclusive('\n').next().map_or(0, str::len);
    let mut list_key: Option<String> = None;
    for (i, line) in lines.enumerate() {
        let number = i + 2;
        consumed += line.len();
        let content = line.trim_end();
        if content == "---" || content == "..." {
            end = Some(consumed);
            break;
        }
        let trimmed = content.trim_start();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        if let Some(item) = trimmed
            .strip_prefix("- ")
            .or((trimmed == "-").then_some(""))
        {
            let Some(key) = &list_key else {
                return Err((number, "a list item outside a list".into()));
            };
            if let Some(Value::Array(items)) = fields.get_mut(key) {
                items.push(scalar(item.trim(), number)?);
            }
            continue;
        }
        if content.starts_with(char::is_whitespace) {
            return Err((
                number,
                "nested mappings are not supported in front matter".into(),
            ));
        }
        let Some((key, value)) = content.split_once(':') else {
            return Err((number, format!("expected `key: value`, found `{content}`")));
        };
        let key = key.trim().to_string();
        let value = value.trim();
        list_key = None;
        if value.is_empty() {
            fields.insert(key.clone(), Value::Array(Vec::new()));
            list_key = Some(key);
            continue;
        }
        fields.insert(key, value_of(value, number)?);
    }
    let Some(end) = end else {
        return Err((1, "the front matter opened by `---` is never closed".into()));
    };
    // An empty block list was a key with no value.
    for value in fields.values_mut() {
        if matches!(value, Value::Array(items) if items.is_empty()) {
            *value = Value::Null;
        }
    }
    let blanked: String = text[..end]
        .chars()
        .map(|c| if c == '\n' || c == '\r' { c } else { ' ' })
        .chain(text[end..].chars())
        .collect();
    Ok(Some((fields, blanked)))
}

fn value_of(value: &str, line: usize) -> Result<Value, Problem> {
    let Some(inner) = value.strip_prefix('[') else {
        return scalar(value, line);
    };
    let Some(inner) = inner.strip_suffix(']') else {
        return Err((line, "a flow list must close on its line with `]`".into()));
    };
    if inner.trim().is_empty() {
        return Ok(Value::Array(Vec::new()));
    }
    split_items(inner)
        .into_iter()
        .map(|item| scalar(item.trim(), line))
        .collect::<Result<Vec<_>, _>>()
        .map(Value::Array)
}

/// Splits a flow list's inside at commas outside quotes.
fn split_items(inner: &str) -> Vec<&str> {
    let (mut items, mut start, mut quote) = (Vec::new(), 0, None);
    for (i, c) in inner.char_indices() {
        match (quote, c) {
            (None, '"' | '\'') => quote = Some(c),
            (Some(q), _) if c == q => quote = None,
            (None, ',') => {
                items.push(&inner[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    items.push(&inner[start..]);
    items
}

fn scalar(value: &str, line: usize) -> Result<Value, Problem> {
    let value = strip_comment(value);
    if let Some(quoted) = value.strip_prefix('"') {
        return match quoted.strip_suffix('"') {
            Some(inner) => serde_json::from_str(&format!("\"{inner}\""))
                .map_err(|e| (line, format!("bad double-quoted string: {e}"))),
            None => Err((line, "a double-quoted string must close on its line".into())),
        };
    }
    if let Some(quoted) = value.strip_prefix('\'') {
        return match quoted.strip_suffix('\'') {
            Some(inner) => Ok(Value::String(inner.replace("''", "'"))),
            None => Err((line, "a single-quoted string must close on its line".into())),
        };
    }
    if value.starts_with(['|', '>', '&', '*', '{', '!']) {
        return Err((
            line,
            format!(
                "`{value}`: multi-line strings, anchors, tags and flow mappings are not supported"
            ),
        ));
    }
    Ok(match value {
        "true" | "True" | "TRUE" => Value::Bool(true),
        "false" | "False" | "FALSE" => Value::Bool(false),
        "null" | "Null" | "NULL" | "~" | "" => Value::Null,
        _ => match value.parse::<i64>() {
            Ok(n) => Value::Number(n.into()),
            Err(_) => match value.parse::<f64>().ok().and_then(Number::from_f64) {
                Some(n)
                    if value.starts_with(|c: char| c.is_ascii_digit() || c == '-' || c == '.') =>
                {
                    Value::Number(n)
                }
                _ => Value::String(value.to_string()),
            },
        },
    })
}

/// A plain value without a trailing ` # comment`.
fn strip_comment(value: &str) -> &str {
    if value.starts_with(['"', '\'']) {
        return value;
    }
    value.split(" #").next().unwrap_or(value).trim_end()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn fields_are_read_and_the_block_blanked_keeping_offsets() {
        let text = "---\ntitle: \"Install: Linux\"\ndate: 2024-03-01\nversion: 2.1\nyear: 2024\ndraft: false # not yet\ntags: [setup, 'linux', \"a, b\"]\nowners:\n  - ana\n  - bo\nempty:\n---\n# Heading\nBody é.\n";
        let (fields, blanked) = split(text).unwrap().unwrap();
        assert_eq!(
            Value::Object(fields),
            json!({"title": "Install: Linux", "date": "2024-03-01", "version": 2.1, "year": 2024,
                   "draft": false, "tags": ["setup", "linux", "a, b"], "owners": ["ana", "bo"], "empty": null})
        );
        assert_eq!(blanked.chars().count(), text.chars().count());
        assert_eq!(blanked.lines().count(), text.lines().count());
        assert!(blanked.trim_start().starts_with("# Heading"));
        assert!(!blanked.contains("title"));
    }

    #[test]
    fn no_front_matter_and_unsupported_yaml() {
        assert_eq!(split("# Title\n---\nx: 1\n---\n").unwrap(), None);
        assert_eq!(split("--- \nx: 1\n").unwrap_err().0, 1);
        let (line, reason) = split("---\na: 1\nnested:\n  b: 2\n---\n").unwrap_err();
        assert_eq!(line, 4, "{reason}");
        assert!(reason.contains("nested"), "{reason}");
        let (line, reason) = split("---\nbody: |\n  text\n---\n").unwrap_err();
        assert_eq!(line, 2);
        assert!(reason.contains("multi-line"), "{reason}");
    }
}
