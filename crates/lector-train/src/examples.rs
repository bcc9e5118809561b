//! Training questions from SQuAD v1.1/v2.0 files, checked: every answer must sit where its
//! `answer_start` says, or the error names the question.

use crate::error::{io_err, Error, Result};
use lector_eval::squad;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A training file and how much its questions count in the loss.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize, PartialEq)]
pub struct TrainFile {
    pub path: PathBuf,
    pub weight: f32,
}

impl TrainFile {
    /// Parses `FILE` or `FILE:WEIGHT` (a weight must be a positive number).
    pub fn parse(spec: &str) -> Result<Self> {
        let (path, weight) = match spec.rsplit_once(':') {
            Some((path, weight)) if !path.is_empty() && weight.parse::<f32>().is_ok() => {
                (path, weight.parse::<f32>().unwrap_or(1.0))
            }
            _ => (spec, 1.0),
        };
        if !(weight.is_finite() && weight > 0.0) {
            return Err(Error::Params(format!(
                "{spec}: the weight after `:` must be a positive number"
            )));
        }
        Ok(Self {
            path: path.into(),
            weight,
        })
    }
}

/// Where an answer lies in its context, as byte offsets (the tokenizer's offsets are bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AnswerBytes {
    pub start: usize,
    pub end: usize,
}

/// One training question.
#[derive(Debug, Clone)]
pub struct Example {
    pub id: String,
    pub question: String,
    pub context: Arc<str>,
    /// The first gold answer; `None` for an unanswerable (SQuAD v2.0) question.
    pub answer: Option<AnswerBytes>,
    pub weight: f32,
    /// The question this example asks: its own index, or for a hard negative passage (see
    /// [`crate::negatives`]) that of the question it was retrieved for.
    pub group: usize,
}

/// Every question of `files`, in file order.
pub fn read_examples(files: &[TrainFile]) -> Result<Vec<Example>> {
    let mut examples = Vec::new();
    for file in files {
        let before = examples.len();
        read_file(file, &mut examples)?;
        if examples.len() == before {
            return Err(Error::Data {
                path: file.path.clone(),
                message: "holds no questions".into(),
            });
        }
    }
    Ok(examples)
}

fn read_file(file: &TrainFile, out: &mut Vec<Example>) -> Result<()> {
    let path = &file.path;
    let text = std::fs::read_to_string(path).map_err(io_err(path))?;
    for article in squad::parse_file(path, &text)?.into_articles(path)? {
        for paragraph in article.paragraphs {
            let context: Arc<str> = paragraph.context.into();
            for qa in paragraph.qas {
                let answer = match qa.answers.first() {
                    Some(gold) => Some(locate(path, &qa.id, &context, gold)?),
                    None => None,
                };
                if qa.question.trim().is_empty() {
                    return Err(question_err(path, &qa.id, "the question is empty".into()));
                }
                out.push(Example {
                    id: qa.id,
                    question: qa.question,
                    context: Arc::clone(&context),
                    answer,
                    weight: file.weight,
                    group: out.len(),
                });
            }
        }
    }
    Ok(())
}

/// Checks that `gold.text` is at character `gold.answer_start` of `context`.
fn locate(path: &Path, id: &str, context: &str, gold: &squad::GoldAnswer) -> Result<AnswerBytes> {
    let start_char = gold
        .answer_start
        .ok_or_else(|| question_err(path, id, "the answer has no `answer_start`".into()))?;
    let start = usize::try_from(start_char)
        .ok()
        .and_then(|c| byte_of_char(context, c))
        .ok_or_else(|| {
            question_err(
                path,
                id,
                format!("answer_start {start_char} is outside the context"),
            )
        })?;
    let end = start + gold.text.len();
    if gold.text.is_empty() || context.get(start..end) != Some(gold.text.as_str()) {
        let found: String = context[start..]
            .chars()
            .take(gold.text.chars().count())
            .collect();
        return Err(question_err(
            path,
            id,
            format!(
                "answer_start {start_char} does not point at the answer {:?} (the context has {found:?} there)",
                gold.text
            ),
        ));
    }
    Ok(AnswerBytes { start, end })
}

fn byte_of_char(text: &str, index: usize) -> Option<usize> {
    text.char_indices()
        .map(|(b, _)| b)
        .chain(std::iter::once(text.len()))
        .nth(index)
}

fn question_err(path: &Path, id: &str, message: String) -> Error {
    Error::Question {
        path: path.to_path_buf(),
        id: id.to_string(),
        message,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, json: &str) -> PathBuf {
        let path = dir.join("train.json");
        std::fs::write(&path, json).unwrap();
        path
    }

    #[test]
    fn weights_follow_a_colon() {
        let f = TrainFile::parse("a/b.json:0.5").unwrap();
        assert_eq!((f.path, f.weight), (PathBuf::from("a/b.json"), 0.5));
        assert_eq!(TrainFile::parse("c:/x.json").unwrap().weight, 1.0);
        assert!(TrainFile::parse("a.json:0").is_err());
        assert!(TrainFile::parse("a.json:-1").is_err());
    }

    #[test]
    fn answers_are_located_in_bytes_and_checked() {
        let dir = tempfile::tempdir().unwrap();
        let ok = r#"{"version":"v2.0","data":[{"title":"t","paragraphs":[{"context":"Café Odéon opened in 1911.",
            "qas":[{"id":"q1","question":"When?","answers":[{"text":"1911","answer_start":21}]},
                   {"id":"q2","question":"Who?","answers":[],"is_impossible":true}]}]}]}"#;
        let examples =
            read_examples(&[TrainFile::parse(write(dir.path(), ok).to_str().unwrap()).unwrap()])
                .unwrap();
        let a = examples[0].answer.unwrap();
        assert_eq!(&examples[0].context[a.start..a.end], "1911");
        assert_eq!(examples[1].answer, None);

        let shifted = ok.replace("\"answer_start\":21", "\"answer_start\":20");
        let err = read_examples(&[
            TrainFile::parse(write(dir.path(), &shifted).to_str().unwrap()).unwrap(),
        ])
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("question `q1`") && err.contains("1911"),
            "{err}"
        );

        let empty = r#"{"version":"1.1","data":[]}"#;
        let err =
            read_examples(&[TrainFile::parse(write(dir.path(), empty).to_str().unwrap()).unwrap()])
                .unwrap_err()
                .to_string();
        assert!(err.contains("holds no questions"), "{err}");
    }
}
