//! The MRQA 2019 shared task's format: one JSON-lines file (usually gzipped, `.jsonl.gz`) for
//! SQuAD, NewsQA, TriviaQA, SearchQA, HotpotQA, NaturalQuestions, BioASQ, DROP, DuoRC, RACE,
//! RelationExtraction and TextbookQA alike.
//!
//! The first line may be a header (`{"header": {"dataset": .., "mrqa_split": ..}}`); every other
//! line is a context with its questions: `{"context", "qas": [{"qid", "question", "answers":
//! [raw text, ..], "detected_answers": [..]}]}`. Read here into a [`Dataset`] scored with the
//! rules of `mrqa_official_eval.py`, which are those of SQuAD v1.1's script over a dictionary of
//! questions: keys `exact_match` and `f1`, the best score over the `answers` strings, a question
//! without a prediction scoring 0 (or left out of the total with `--skip-no-answer`). A `qid`
//! given twice is one question, at its first position with its last answers, as the script's
//! dictionary keeps it. A question without answers is an error here; the script would fail on it.

use crate::error::{Error, Result};
use crate::input::{invalid, parse_json};
use crate::squad::{Dataset, Question, SquadVersion};
use rustc_hash::FxHashMap;
use serde::Deserialize;
use std::io::Read;
use std::path::Path;
use std::sync::Arc;

/// Whether `path` names an MRQA file: `.jsonl`, or `.jsonl.gz` as the task distributes them.
pub fn is_mrqa_path(path: &Path) -> bool {
    let name = path.file_name().map(|n| n.to_string_lossy().to_lowercase());
    name.is_some_and(|n| n.ends_with(".jsonl") || n.ends_with(".jsonl.gz"))
}

/// Reads an MRQA file, gzipped or not (told by its first bytes, not its name).
pub fn read_dataset(path: &Path) -> Result<Dataset> {
    let io = |source| Error::Io {
        path: path.to_path_buf(),
        source,
    };
    let raw = std::fs::read(path).map_err(io)?;
    let bytes = if raw.starts_with(&[0x1f, 0x8b]) {
        let mut out = Vec::new();
        flate2::read::MultiGzDecoder::new(raw.as_slice())
            .read_to_end(&mut out)
            .map_err(io)?;
        out
    } else {
        raw
    };
    let text = String::from_utf8(bytes).map_err(|e| {
        invalid(
            path,
            format!("invalid UTF-8 at byte {}", e.utf8_error().valid_up_to()),
        )
    })?;
    parse_dataset(path, &text)
}

#[derive(Deserialize)]
struct Line {
    header: Option<Header>,
    #[serde(default)]
    context: String,
    #[serde(default)]
    qas: Vec<Qa>,
}

#[derive(Deserialize)]
struct Header {
    #[serde(default)]
    dataset: String,
}

#[derive(Deserialize)]
struct Qa {
    qid: String,
    #[serde(default)]
    question: String,
    answers: Vec<String>,
}

/// [`read_dataset`] of the file's text (`path` names it in errors, with the line).
pub fn parse_dataset(path: &Path, text: &str) -> Result<Dataset> {
    let mut questions: Vec<Question> = Vec::new();
    let mut position: FxHashMap<String, usize> = FxHashMap::default();
    let mut dataset_name = String::from("MRQA");
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let parsed: Line = parse_json(path, line, i)?;
        if let Some(header) = parsed.header {
            if i == 0 && !header.dataset.is_empty() {
                dataset_name = header.dataset;
            }
            continue;
        }
        let context: Arc<str> = parsed.context.as_str().into();
        let title: Arc<str> = title_of(&parsed.context)
            .unwrap_or_else(|| format!("{dataset_name} line {}", i + 1))
            .into();
        for qa in parsed.qas {
            if qa.answers.is_empty() {
                return Err(invalid(
                    path,
                    format!(
                        "line {}: question `{}` has no answers (MRQA questions all have one)",
                        i + 1,
                        qa.qid
                    ),
                ));
            }
            let question = Question {
                id: qa.qid,
                question: qa.question,
                answers: qa.answers,
                context: Arc::clone(&context),
                title: Arc::clone(&title),
            };
            match position.get(&question.id) {
                Some(&at) => questions[at] = question,
                None => {
                    position.insert(question.id.clone(), questions.len());
                    questions.push(question);
                }
            }
        }
    }
    Ok(Dataset {
        version: SquadVersion::V1_1,
        questions,
    })
}

/// The document title the task marks with `[TLE]` (TriviaQA, SearchQA, HotpotQA contexts).
fn title_of(context: &str) -> Option<String> {
    let after = &context[context.find("[TLE]")? + "[TLE]".len()..];
    let end = ["[PAR]", "[DOC]", "[SEP]", "[TLE]"]
        .iter()
        .filter_map(|mark| after.find(mark))
        .min()
        .unwrap_or(after.len());
    let title = after[..end].trim();
    (!title.is_empty()).then(|| title.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = r#"{"header": {"dataset": "TriviaQA", "mrqa_split": "dev"}}
{"context": "[TLE] Paris [PAR] Paris is the capital of France.", "qas": [{"qid": "q1", "question": "Capital of France?", "answers": ["Paris", "City of Paris"], "detected_answers": [{"text": "Paris", "char_spans": [[14, 18]], "token_spans": [[3, 3]]}]}]}
{"context": "Rome is old.", "qas": [{"qid": "q2", "question": "What is old?", "answers": ["Rome"]}, {"qid": "q1", "question": "Again?", "answers": ["Lutetia"]}]}
"#;

    #[test]
    fn reads_questions_titles_and_keeps_a_repeated_qid_once_with_its_last_answers() {
        let dataset = parse_dataset(Path::new("s.jsonl"), SAMPLE).unwrap();
        assert_eq!(dataset.version, SquadVersion::V1_1);
        let ids: Vec<&str> = dataset.questions.iter().map(|q| q.id.as_str()).collect();
        assert_eq!(ids, ["q1", "q2"]);
        assert_eq!(dataset.questions[0].answers, ["Lutetia"]);
        assert_eq!(dataset.questions[1].answers, ["Rome"]);
        assert_eq!(&*dataset.questions[1].title, "TriviaQA line 3");
        let first = parse_dataset(
            Path::new("s.jsonl"),
            &SAMPLE[..SAMPLE.find("\n{\"context\": \"Rome").unwrap()],
        )
        .unwrap();
        assert_eq!(&*first.questions[0].title, "Paris");
    }

    #[test]
    fn errors_name_the_file_and_line() {
        let text = "{\"header\": {}}\n{\"context\": \"x\", \"qas\": [{\"qid\": \"a\", \"answers\": []}]}\n";
        let err = parse_dataset(Path::new("d.jsonl"), text)
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            "d.jsonl: line 2: question `a` has no answers (MRQA questions all have one)"
        );
        let err = parse_dataset(Path::new("d.jsonl"), "{\"header\": {}}\n{\"context\": 3}\n")
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("d.jsonl:2:"), "{err}");
        assert!(
            is_mrqa_path(Path::new("dev/SQuAD.jsonl.gz"))
                && !is_mrqa_path(Path::new("dev-v1.1.json"))
        );
    }
}
