//! The items `lector eval judge` reads: JSON lines, one item per line.
//!
//! | field | type | used by |
//! | --- | --- | --- |
//! | `id` | string or number, optional (default: the line number) | all |
//! | `question` | string | all (optional for faithfulness) |
//! | `references` (or `reference`) | string or list of strings | correctness (required), pairwise (optional) |
//! | `answer` | string | correctness, faithfulness |
//! | `answer_a`, `answer_b` | strings | pairwise |
//! | `context` (or `contexts`) | string or list of strings (passages) | faithfulness (required) |
//! | `label` | string: a verdict of the mode (`correct`, `partially_correct`, `incorrect`; `supported`, `not_supported`; `A`, `B`, `tie`), human or derived from EM/F1 | optional: agreement |
//! | `generator` | string: the model that produced the answer(s) | optional: self-judging warning |
//!
//! Other fields (`em`, `f1`, ...) are ignored. Errors name the file and line.

use super::{parse, Mode, Verdict};
use crate::error::Result;
use lector_eval::input::invalid;
use serde::{Deserialize, Deserializer};
use std::path::Path;

/// What is judged in an item.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Candidate {
    /// One answer (correctness, faithfulness).
    Single(String),
    /// Two answers (pairwise).
    Pair(String, String),
}

/// One item, checked for its mode.
#[derive(Debug, Clone)]
pub struct Item {
    /// The line of the file it was read from (1-based).
    pub line: usize,
    /// `id`, else `line N`.
    pub id: String,
    /// The question (may be empty for faithfulness).
    pub question: String,
    /// Reference answers (empty ones dropped).
    pub references: Vec<String>,
    /// Context passages (empty ones dropped).
    pub context: Vec<String>,
    /// The answer(s) to judge.
    pub candidate: Candidate,
    /// The expected verdict, when labelled.
    pub label: Option<Verdict>,
    /// The model that produced the answer(s), when known.
    pub generator: Option<String>,
}

impl Item {
    /// Words (whitespace-separated) of the single answer, or of `answer_a` and `answer_b`.
    pub fn answer_words(&self) -> (usize, usize) {
        let words = |s: &str| s.split_whitespace().count();
        match &self.candidate {
            Candidate::Single(a) => (words(a), 0),
            Candidate::Pair(a, b) => (words(a), words(b)),
        }
    }
}

#[derive(Deserialize)]
struct RawItem {
    #[serde(default, deserialize_with = "text_or_number")]
    id: Option<String>,
    #[serde(default)]
    question: String,
    #[serde(default, alias = "reference", deserialize_with = "one_or_many")]
    references: Vec<String>,
    answer: Option<String>,
    answer_a: Option<String>,
    answer_b: Option<String>,
    #[serde(default, alias = "contexts", deserialize_with = "one_or_many")]
    context: Vec<String>,
    label: Option<String>,
    generator: Option<String>,
}

/// Reads the items of `path` for `mode`; every line must carry what the mode needs.
pub fn read_items(path: &Path, mode: Mode) -> Result<Vec<Item>> {
    let mut items = Vec::new();
    for (line, raw) in lector_eval::jsonl::read_numbered::<RawItem>(path)? {
        items.push(check(raw, line, mode).map_err(|m| invalid(path, format!("line {line}: {m}")))?);
    }
    if items.is_empty() {
        return Err(invalid(path, "no items").into());
    }
    Ok(items)
}

/// The items of JSON objects (as a JSON-lines file holds them, numbered from 1) for `mode`;
/// the error names the item (`items[i]`) and what is wrong.
pub fn items_from_json(
    values: &[serde_json::Value],
    mode: Mode,
) -> std::result::Result<Vec<Item>, String> {
    if values.is_empty() {
        return Err("no items".into());
    }
    values
        .iter()
        .enumerate()
        .map(|(i, value)| {
            let raw: RawItem =
                serde_json::from_value(value.clone()).map_err(|e| format!("items[{i}]: {e}"))?;
            check(raw, i + 1, mode).map_err(|m| format!("items[{i}]: {m}"))
        })
        .collect()
}

/// The item of `raw` read on `line`, or what is wrong with it.
fn check(raw: RawItem, line: usize, mode: Mode) -> std::result::Result<Item, String> {
    let candidate = match mode {
        Mode::Pairwise => match (raw.answer_a, raw.answer_b) {
            (Some(a), Some(b)) => Candidate::Pair(a, b),
            _ => return Err("pairwise judging needs `answer_a` and `answer_b`".into()),
        },
        Mode::Correctness | Mode::Faithfulness | Mode::Equivalence => match raw.answer {
            Some(a) => Candidate::Single(a),
            None => return Err(format!("{} judging needs `answer`", mode.name())),
        },
    };
    if mode != Mode::Faithfulness && raw.question.trim().is_empty() {
        return Err("`question` is missing or empty".into());
    }
    let needs_references = matches!(mode, Mode::Correctness | Mode::Equivalence);
    if needs_references && raw.references.iter().all(|r| r.trim().is_empty()) {
        return Err(format!(
            "{} judging needs `references` (a string or a list)",
            mode.name()
        ));
    }
    if mode == Mode::Faithfulness && raw.context.iter().all(|c| c.trim().is_empty()) {
        return Err("faithfulness judging needs `context` (a passage or a list)".into());
    }
    let label = match raw.label {
        None => None,
        Some(text) => Some(parse::verdict_of(mode, &text).ok_or_else(|| {
            let allowed: Vec<&str> = mode.verdicts().iter().map(|v| v.name()).collect();
            format!(
                "label {text:?} is not a {} verdict ({})",
                mode.name(),
                allowed.join(", ")
            )
        })?),
    };
    Ok(Item {
        line,
        id: raw.id.unwrap_or_else(|| format!("line {line}")),
        question: raw.question,
        references: raw
            .references
            .into_iter()
            .filter(|r| !r.trim().is_empty())
            .collect(),
        context: raw
            .context
            .into_iter()
            .filter(|c| !c.trim().is_empty())
            .collect(),
        candidate,
        label,
        generator: raw.generator,
    })
}

/// A string, or a list of strings.
fn one_or_many<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<Vec<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum OneOrMany {
        One(String),
        Many(Vec<String>),
    }
    Ok(match OneOrMany::deserialize(d)? {
        OneOrMany::One(s) => vec![s],
        OneOrMany::Many(v) => v,
    })
}

/// A string or a number, as text.
fn text_or_number<'de, D: Deserializer<'de>>(
    d: D,
) -> std::result::Result<Option<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Id {
        Text(String),
        Number(serde_json::Number),
    }
    Ok(Some(match Id::deserialize(d)? {
        Id::Text(s) => s,
        Id::Number(n) => n.to_string(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(mode: Mode, text: &str) -> Result<Vec<Item>> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("items.jsonl");
        std::fs::write(&path, text).unwrap();
        read_items(&path, mode)
    }

    #[test]
    fn items_of_each_mode_are_read() {
        let items = read(
            Mode::Correctness,
            "{\"id\": 7, \"question\": \"Who?\", \"reference\": \"Denver\", \"answer\": \"Denver Broncos\", \"label\": \"Partially correct\", \"f1\": 0.67}\n\n{\"question\": \"Q\", \"references\": [\"a\", \"b\"], \"answer\": \"c\", \"generator\": \"m\"}\n",
        )
        .unwrap();
        assert_eq!(items.len(), 2);
        assert_eq!(items[0].id, "7");
        assert_eq!(items[0].label, Some(Verdict::PartiallyCorrect));
        assert_eq!(items[0].answer_words(), (2, 0));
        assert_eq!((items[1].id.as_str(), items[1].line), ("line 3", 3));
        assert_eq!(items[1].references, ["a", "b"]);
        let pairs = read(
            Mode::Pairwise,
            "{\"question\": \"Q\", \"answer_a\": \"x y\", \"answer_b\": \"z\", \"label\": \"B\"}",
        )
        .unwrap();
        assert_eq!(
            pairs[0].candidate,
            Candidate::Pair("x y".into(), "z".into())
        );
        assert_eq!(pairs[0].label, Some(Verdict::B));
        let claims = read(
            Mode::Faithfulness,
            "{\"context\": \"The sky is blue.\", \"answer\": \"The sky is blue.\"}",
        )
        .unwrap();
        assert_eq!(claims[0].context, ["The sky is blue."]);
    }

    #[test]
    fn errors_name_the_file_and_line() {
        let err = |mode, text| read(mode, text).unwrap_err().to_string();
        let missing = err(
            Mode::Correctness,
            "{\"question\": \"Q\", \"references\": [\"a\"], \"answer\": \"a\"}\n{\"question\": \"Q\", \"answer\": \"a\"}",
        );
        assert!(
            missing.contains("items.jsonl: line 2: correctness judging needs `references`"),
            "{missing}"
        );
        let label = err(
            Mode::Pairwise,
            "{\"question\": \"Q\", \"answer_a\": \"a\", \"answer_b\": \"b\", \"label\": \"correct\"}",
        );
        assert!(
            label.contains("line 1: label \"correct\" is not a pairwise verdict (A, B, tie)"),
            "{label}"
        );
        let syntax = err(Mode::Correctness, "\n{\"question\" 1}");
        assert!(syntax.contains("items.jsonl:2:"), "{syntax}");
        // A torn last line (ending before its value does) is left out, as in every JSON-lines file.
        let torn = err(Mode::Correctness, "{\"question\": ");
        assert!(torn.contains("no items"), "{torn}");
        assert!(err(Mode::Faithfulness, "{\"answer\": \"a\"}").contains("needs `context`"));
        assert!(err(Mode::Correctness, "\n\n").contains("no items"));
    }
}
