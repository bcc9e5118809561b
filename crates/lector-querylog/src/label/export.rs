//! Labels as SQuAD v2.0 training data: one article per document, whose one paragraph's context
//! is the document's full current text; a question's id is its request id.
//!
//! An answer's `answer_start` is its character offset (Unicode scalar values, as Python indexes
//! strings, which is what SQuAD tools expect). Every answer is checked against the document as
//! it is now: a label whose document is gone, or whose text is no longer at its offsets (the
//! document was replaced since), is left out with a warning rather than exported wrong. An
//! unanswerable question goes under the document of its first logged passage (the first place
//! the system looked); without a logged ask or passage for it, it is left out with a warning.

use super::store::{latest, Label, LabelVerdict};
use crate::{AskRecord, Entry};
use serde::Serialize;
use serde_json::{json, Value};
use std::collections::HashMap;

/// Where the export finds documents' texts.
pub trait DocumentSource {
    /// The full text of document `doc_id`; `None` when there is none.
    fn text(&self, doc_id: &str) -> Option<&str>;
}

impl DocumentSource for lector_index::Index {
    fn text(&self, doc_id: &str) -> Option<&str> {
        self.document(doc_id).map(|d| d.text)
    }
}

impl DocumentSource for HashMap<String, String> {
    fn text(&self, doc_id: &str) -> Option<&str> {
        self.get(doc_id).map(String::as_str)
    }
}

/// The characters `start..end` (Unicode scalar values) of `text`; `None` when the range is
/// empty, reversed or past the end.
pub fn char_slice(text: &str, start: usize, end: usize) -> Option<&str> {
    if start >= end {
        return None;
    }
    let mut bytes = text
        .char_indices()
        .map(|(b, _)| b)
        .chain(std::iter::once(text.len()));
    let from = bytes.nth(start)?;
    let to = bytes.nth(end - start - 1)?;
    Some(&text[from..to])
}

/// The SQuAD file and what went into it.
#[derive(Debug, Clone, Serialize)]
pub struct Export {
    /// `{"version": "v2.0", "data": [...]}`.
    pub squad: Value,
    /// Questions exported with an answer.
    pub answers: usize,
    /// Questions exported as unanswerable.
    pub unanswerable: usize,
    /// Questions whose last label is a skip (never exported).
    pub skipped: usize,
    /// Labels left out, and why.
    pub warnings: Vec<String>,
}

/// One document's article while it is built.
struct Article<'a> {
    doc_id: &'a str,
    context: &'a str,
    qas: Vec<Value>,
}

/// The last label of each request id in `labels` as SQuAD v2.0, with contexts from
/// `documents` and unanswerable questions placed by the log `entries` (see the module
/// documentation). Skips are counted, never exported.
pub fn export_squad(
    labels: &[Label],
    entries: &[Entry],
    documents: &impl DocumentSource,
) -> Export {
    let asks: HashMap<&str, &AskRecord> = entries
        .iter()
        .filter_map(|e| match e {
            Entry::Ask(ask) => Some((ask.request_id.as_str(), ask)),
            Entry::Feedback(_) => None,
        })
        .collect();
    let mut export = Export {
        squad: Value::Null,
        answers: 0,
        unanswerable: 0,
        skipped: 0,
        warnings: Vec::new(),
    };
    let mut articles: Vec<Article> = Vec::new();
    for label in latest(labels) {
        let placed = match label.verdict {
            LabelVerdict::Skip => {
                export.skipped += 1;
                continue;
            }
            LabelVerdict::Answer => answer(label, documents),
            LabelVerdict::Unanswerable => unanswerable(label, &asks, documents),
        };
        let (doc_id, context, qa) = match placed {
            Ok(placed) => placed,
            Err(why) => {
                export
                    .warnings
                    .push(format!("left out `{}`: {why}", label.request_id));
                continue;
            }
        };
        match label.verdict {
            LabelVerdict::Answer => export.answers += 1,
            _ => export.unanswerable += 1,
        }
        match articles.iter_mut().find(|a| a.doc_id == doc_id) {
            Some(article) => article.qas.push(qa),
            None => articles.push(Article {
                doc_id,
                context,
                qas: vec![qa],
            }),
        }
    }
    let data: Vec<Value> = articles
        .into_iter()
        .map(|a| {
            json!({
                "title": a.doc_id,
                "paragraphs": [{"context": a.context, "qas": a.qas}],
            })
        })
        .collect();
    export.squad = json!({"version": "v2.0", "data": data});
    export
}

/// A labelled answer's document, its text, and its question; or why it cannot be exported.
fn answer<'a>(
    label: &'a Label,
    documents: &'a impl DocumentSource,
) -> Result<(&'a str, &'a str, Value), String> {
    let (Some(doc_id), Some(start), Some(end), Some(text)) =
        (&label.doc_id, label.start, label.end, &label.text)
    else {
        return Err("the answer label lacks doc_id, start, end or text".into());
    };
    let context = documents
        .text(doc_id)
        .ok_or_else(|| format!("the document `{doc_id}` is no longer in the index"))?;
    if char_slice(context, start, end) != Some(text.as_str()) {
        return Err(format!(
            "the document `{doc_id}` changed: characters {start}..{end} no longer hold {text:?}"
        ));
    }
    let qa = json!({
        "id": label.request_id,
        "question": label.question,
        "answers": [{"text": text, "answer_start": start}],
        "is_impossible": false,
    });
    Ok((doc_id, context, qa))
}

/// An unanswerable question under its first logged passage's document.
fn unanswerable<'a>(
    label: &'a Label,
    asks: &HashMap<&str, &'a AskRecord>,
    documents: &'a impl DocumentSource,
) -> Result<(&'a str, &'a str, Value), String> {
    let ask = asks
        .get(label.request_id.as_str())
        .ok_or("the ask is no longer in the query log, so no document to put it under")?;
    let passage = ask
        .passages
        .first()
        .ok_or("the logged ask read no passage, so no document to put it under")?;
    let doc_id = passage.doc_id.as_str();
    let context = documents
        .text(doc_id)
        .ok_or_else(|| format!("the document `{doc_id}` is no longer in the index"))?;
    let qa = json!({
        "id": label.request_id,
        "question": label.question,
        "answers": [],
        "is_impossible": true,
    });
    Ok((doc_id, context, qa))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::label::sample::tests::ask;
    use crate::LoggedPassage;

    const DOC: &str = "Ça 🏝 commence à Zürich: le lac de Zürich est grand.";

    fn documents() -> HashMap<String, String> {
        HashMap::from([
            ("zh".to_string(), DOC.to_string()),
            ("other".to_string(), "Nothing here.".to_string()),
        ])
    }

    /// The character offset of the first `needle` in `text`, counted independently of
    /// [`char_slice`]: UTF-32 code units.
    fn char_offset(text: &str, needle: &str) -> usize {
        let utf32: Vec<u32> = text.chars().map(u32::from).collect();
        let pattern: Vec<u32> = needle.chars().map(u32::from).collect();
        utf32
            .windows(pattern.len())
            .position(|w| w == pattern.as_slice())
            .unwrap()
    }

    fn label(id: &str, verdict: LabelVerdict, span: Option<(&str, usize, &str)>) -> Label {
        Label {
            time: "2026-12-02T14:00:00.000Z".into(),
            request_id: id.into(),
            question: format!("Question {id}?"),
            verdict,
            doc_id: span.map(|s| s.0.to_string()),
            start: span.map(|s| s.1),
            end: span.map(|s| s.1 + s.2.chars().count()),
            text: span.map(|s| s.2.to_string()),
        }
    }

    fn logged(id: &str, first_doc: Option<&str>) -> Entry {
        let mut record = ask(id, &format!("Question {id}?"), 0.9, &[]);
        record.passages = first_doc
            .into_iter()
            .map(|d| LoggedPassage {
                doc_id: d.into(),
                passage: 0,
                start: 0,
                end: 10,
                score: 1.0,
            })
            .collect();
        Entry::Ask(record)
    }

    #[test]
    fn char_slices_count_unicode_scalar_values() {
        assert_eq!(char_slice(DOC, 3, 4), Some("🏝"));
        assert_eq!(char_slice(DOC, 16, 22), Some("Zürich"));
        assert_eq!(char_slice("abc", 1, 3), Some("bc"));
        assert_eq!(char_slice("abc", 2, 4), None);
        assert_eq!(char_slice("abc", 2, 2), None);
    }

    #[test]
    fn exports_answers_with_character_offsets_and_places_unanswerables() {
        let zurich = char_offset(DOC, "lac de Zürich");
        assert_eq!(zurich, 27, "past an emoji and accents");
        let labels = vec![
            label(
                "q1",
                LabelVerdict::Answer,
                Some(("zh", zurich, "lac de Zürich")),
            ),
            label("q2", LabelVerdict::Unanswerable, None),
            label("q3", LabelVerdict::Skip, None),
            label("q4", LabelVerdict::Answer, Some(("other", 0, "Nothing"))),
            // A request relabelled: the last label wins (q5 answered, then skipped).
            label("q5", LabelVerdict::Answer, Some(("zh", 0, "Ça"))),
            label("q5", LabelVerdict::Skip, None),
        ];
        let entries = vec![logged("q2", Some("zh")), logged("q1", Some("other"))];
        let out = export_squad(&labels, &entries, &documents());
        assert_eq!((out.answers, out.unanswerable, out.skipped), (2, 1, 2));
        assert!(out.warnings.is_empty(), "{:?}", out.warnings);
        let data = out.squad["data"].as_array().unwrap();
        assert_eq!(out.squad["version"], "v2.0");
        assert_eq!(data.len(), 2, "one article per document");
        assert_eq!(data[0]["title"], "zh");
        let paragraph = &data[0]["paragraphs"][0];
        assert_eq!(paragraph["context"], DOC);
        let qas = paragraph["qas"].as_array().unwrap();
        assert_eq!(qas[0]["id"], "q1");
        assert_eq!(qas[0]["answers"][0]["answer_start"], 27);
        assert_eq!(qas[0]["answers"][0]["text"], "lac de Zürich");
        assert_eq!(qas[0]["is_impossible"], false);
        assert_eq!(qas[1]["id"], "q2");
        assert_eq!(qas[1]["is_impossible"], true);
        assert_eq!(qas[1]["answers"].as_array().unwrap().len(), 0);
        // The offset is a character offset: Python's `context[27:27 + 13]`.
        let context: Vec<char> = DOC.chars().collect();
        let at: String = context[27..40].iter().collect();
        assert_eq!(at, "lac de Zürich");
    }

    #[test]
    fn labels_that_no_longer_fit_are_left_out_with_a_warning() {
        let labels = vec![
            label(
                "moved",
                LabelVerdict::Answer,
                Some(("zh", 26, "lac de Zürich")),
            ),
            label("gone", LabelVerdict::Answer, Some(("deleted", 0, "x"))),
            label("unlogged", LabelVerdict::Unanswerable, None),
            label("no-passage", LabelVerdict::Unanswerable, None),
        ];
        let entries = vec![logged("no-passage", None)];
        let out = export_squad(&labels, &entries, &documents());
        assert_eq!((out.answers, out.unanswerable), (0, 0));
        assert_eq!(out.squad["data"].as_array().unwrap().len(), 0);
        let warnings = out.warnings.join("\n");
        for expected in [
            "`moved`: the document `zh` changed",
            "`gone`: the document `deleted` is no longer in the index",
            "`unlogged`: the ask is no longer in the query log",
            "`no-passage`: the logged ask read no passage",
        ] {
            assert!(warnings.contains(expected), "{expected} in {warnings}");
        }
    }
}
