//! Reading a verdict out of a judge's reply.
//!
//! The prompts ask for two lines, `Verdict: X` and `Reason: ...`. Models wander, so these are
//! read too:
//! - a JSON object with a `verdict` (or `judgement`, `judgment`, `winner`, `label`) string and
//!   an optional `reason` (or `explanation`, `rationale`), anywhere in the reply, code fences or
//!   prose around it;
//! - a `Verdict:` line anywhere, in any case, with Markdown emphasis, headings or list marks
//!   (`**Verdict:** Correct`), `=` instead of `:`, and the value followed by a sentence
//!   (`Verdict: correct. The answer names ...`) or filler words (`A is better`);
//! - a reply that is nothing but a verdict (`Incorrect.`).
//!
//! A value is a verdict only when it is one of the mode's words or their synonyms
//! (`partially correct`, `partial`; `not supported`, `unsupported`; `A`, `answer A`; `tie`,
//! `equal`, ...), after trimming quotes, brackets and a sentence after it; a word merely
//! *containing* one ("incorrect" contains "correct") never counts. When the reply names no
//! verdict, or names two different ones, it is [`Verdict::Unparseable`]: the parser never
//! guesses.

use super::{Mode, Verdict};
use serde_json::Value;

/// A verdict and the reason given for it (empty when none was given).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Parsed {
    /// The verdict, or [`Verdict::Unparseable`].
    pub verdict: Verdict,
    /// The reason given (empty when none was).
    pub reason: String,
}

const VERDICT_KEYS: [&str; 6] = [
    "final verdict",
    "verdict",
    "judgement",
    "judgment",
    "winner",
    "label",
];
const REASON_KEYS: [&str; 3] = ["reason", "explanation", "rationale"];

/// Words that may come before a verdict ("the answer is correct") or after it ("A is better").
const LEADING_FILLER: [&str; 9] = [
    "the",
    "answer",
    "response",
    "candidate",
    "claim",
    "is",
    "it",
    "this",
    "final",
];
const TRAILING_FILLER: [&str; 6] = ["answer", "response", "is", "better", "wins", "one"];

/// Where a sentence after the verdict starts.
const SEPARATORS: [&str; 10] = [".", ",", ";", ":", "(", " - ", " because", "—", "–", "\n"];

/// The verdict of `reply` in `mode`, or [`Verdict::Unparseable`].
pub fn parse_reply(mode: Mode, reply: &str) -> Parsed {
    let mut found: Vec<Verdict> = Vec::new();
    let mut reason = String::new();
    for object in json_objects(reply) {
        if let Some(v) = string_field(&object, &VERDICT_KEYS).and_then(|v| verdict_of(mode, &v)) {
            found.push(v);
        }
        if reason.is_empty() {
            reason = string_field(&object, &REASON_KEYS).unwrap_or_default();
        }
    }
    for line in reply.lines() {
        let line = strip_markup(line);
        if let Some(value) = keyed_value(&line, &VERDICT_KEYS) {
            found.extend(verdict_of(mode, value));
        } else if let Some(value) = keyed_value(&line, &REASON_KEYS) {
            if reason.is_empty() {
                reason = value.trim().to_string();
            }
        }
    }
    if found.is_empty() && !opens_with_a_label(reply) {
        found.extend(verdict_of(mode, &strip_markup(reply)));
    }
    let verdict = match found.first() {
        Some(&first) if found.iter().all(|&v| v == first) => first,
        _ => Verdict::Unparseable,
    };
    Parsed { verdict, reason }
}

/// The label `text` names in `mode` (for item labels, which use the same words), if any.
pub fn verdict_of(mode: Mode, text: &str) -> Option<Verdict> {
    let cut = SEPARATORS
        .iter()
        .filter_map(|s| text.find(s))
        .min()
        .unwrap_or(text.len());
    let words = normalise(&text[..cut]);
    let words: Vec<&str> = words.split_whitespace().collect();
    let start = words
        .iter()
        .position(|w| !LEADING_FILLER.contains(w))
        .unwrap_or(words.len());
    // "answer a" is a synonym of its own: try from the first word too.
    [0, start].into_iter().find_map(|from| {
        let rest = &words[from..];
        mode.verdicts().iter().find_map(|&verdict| {
            synonyms(verdict)
                .iter()
                .find(|s| matches_with_filler(rest, s))
                .map(|_| verdict)
        })
    })
}

/// Whether the reply's first sentence ends in a colon: it starts with a label (an echo of the
/// prompt's `Answer A: ...`), not with a verdict.
fn opens_with_a_label(reply: &str) -> bool {
    let first = SEPARATORS
        .iter()
        .filter_map(|s| reply.find(s).map(|at| (at, *s)))
        .min();
    matches!(first, Some((_, ":")))
}

/// Whether `words` are the synonym `synonym` followed by nothing but filler.
fn matches_with_filler(words: &[&str], synonym: &str) -> bool {
    let wanted: Vec<&str> = synonym.split(' ').collect();
    words.len() >= wanted.len()
        && words[..wanted.len()] == wanted[..]
        && words[wanted.len()..]
            .iter()
            .all(|w| TRAILING_FILLER.contains(w))
}

/// The words that name `verdict` (lower case, single spaces).
fn synonyms(verdict: Verdict) -> &'static [&'static str] {
    match verdict {
        Verdict::Correct => &["correct", "fully correct"],
        Verdict::PartiallyCorrect => &[
            "partially correct",
            "partly correct",
            "partial",
            "partially",
        ],
        Verdict::Incorrect => &["incorrect", "not correct", "wrong"],
        Verdict::Supported => &["supported", "fully supported"],
        Verdict::NotSupported => &["not supported", "unsupported", "not fully supported"],
        Verdict::A => &["a", "answer a", "response a"],
        Verdict::B => &["b", "answer b", "response b"],
        Verdict::Tie => &["tie", "equal", "a tie", "both equal", "same", "draw"],
        Verdict::Equivalent => &["equivalent", "the same", "same", "same answer", "yes"],
        Verdict::NotEquivalent => &[
            "not equivalent",
            "not the same",
            "different",
            "different answers",
            "no",
        ],
        Verdict::Inconsistent | Verdict::Unparseable => &[],
    }
}

/// Lower case; `_` and `-` as spaces; brackets, quotes and emphasis removed; single spaces.
fn normalise(text: &str) -> String {
    let mapped: String = text
        .chars()
        .map(|c| match c {
            '_' | '-' => ' ',
            '*' | '"' | '\'' | '`' | '[' | ']' | '<' | '>' | '{' | '}' | ')' | '!' => ' ',
            c => c.to_ascii_lowercase(),
        })
        .collect();
    mapped.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// A line without Markdown emphasis, heading or list marks around it.
fn strip_markup(line: &str) -> String {
    let without: String = line.chars().filter(|&c| c != '*' && c != '`').collect();
    without
        .trim()
        .trim_start_matches(['#', '-', '>'])
        .trim()
        .to_string()
}

/// The text after `key:` (or `key =`) when `line` starts with one of `keys`, case aside.
fn keyed_value<'a>(line: &'a str, keys: &[&str]) -> Option<&'a str> {
    let lower = line.to_ascii_lowercase();
    keys.iter().find_map(|key| {
        let rest = lower.strip_prefix(key)?;
        let trimmed = rest.trim_start();
        let after = trimmed.strip_prefix(':').or(trimmed.strip_prefix('='))?;
        // `lower` has the same byte offsets as `line` (ASCII lower-casing only).
        Some(&line[line.len() - after.len()..])
    })
}

/// Every JSON object in `text` (possibly inside code fences or prose), outermost first.
fn json_objects(text: &str) -> Vec<serde_json::Map<String, Value>> {
    let mut objects = Vec::new();
    let mut from = 0;
    while let Some(offset) = text[from..].find('{') {
        let start = from + offset;
        let mut stream = serde_json::Deserializer::from_str(&text[start..]).into_iter::<Value>();
        match stream.next() {
            Some(Ok(Value::Object(map))) => {
                objects.push(map);
                from = start + stream.byte_offset();
            }
            _ => from = start + 1,
        }
    }
    objects
}

/// The first of `keys` (case aside) with a string value in `object`.
fn string_field(object: &serde_json::Map<String, Value>, keys: &[&str]) -> Option<String> {
    keys.iter().find_map(|key| {
        object
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(key))
            .and_then(|(_, v)| v.as_str())
            .map(str::to_string)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn verdict(mode: Mode, reply: &str) -> Verdict {
        parse_reply(mode, reply).verdict
    }

    #[test]
    fn the_asked_format_is_read_with_its_reason() {
        let p = parse_reply(
            Mode::Correctness,
            "Verdict: partially correct\nReason: it misses the year.",
        );
        assert_eq!(p.verdict, Verdict::PartiallyCorrect);
        assert_eq!(p.reason, "it misses the year.");
    }

    #[test]
    fn json_in_fences_or_prose_is_read() {
        let fenced =
            "Sure!\n```json\n{\"verdict\": \"Correct\", \"reason\": \"names Denver\"}\n```";
        let p = parse_reply(Mode::Correctness, fenced);
        assert_eq!(
            (p.verdict, p.reason.as_str()),
            (Verdict::Correct, "names Denver")
        );
        assert_eq!(
            verdict(
                Mode::Pairwise,
                "I think {\"Winner\": \"B\"} because it is right"
            ),
            Verdict::B
        );
        assert_eq!(
            verdict(Mode::Faithfulness, "{\"verdict\": \"not_supported\"}"),
            Verdict::NotSupported
        );
    }

    #[test]
    fn variants_of_the_verdict_line_are_read() {
        let cases = [
            (Mode::Correctness, "**Verdict:** Correct", Verdict::Correct),
            (
                Mode::Correctness,
                "### VERDICT = INCORRECT",
                Verdict::Incorrect,
            ),
            (
                Mode::Correctness,
                "Let me think.\nVerdict: correct. The answer names the city.",
                Verdict::Correct,
            ),
            (
                Mode::Correctness,
                "verdict: Partially-Correct",
                Verdict::PartiallyCorrect,
            ),
            (
                Mode::Correctness,
                "Verdict: the answer is wrong",
                Verdict::Incorrect,
            ),
            (
                Mode::Faithfulness,
                "- Verdict: Unsupported (no date)",
                Verdict::NotSupported,
            ),
            (
                Mode::Faithfulness,
                "Verdict: not supported",
                Verdict::NotSupported,
            ),
            (Mode::Pairwise, "Verdict: A is better", Verdict::A),
            (Mode::Pairwise, "Verdict: [Answer B]", Verdict::B),
            (Mode::Pairwise, "Verdict: tie", Verdict::Tie),
            (Mode::Correctness, "Incorrect.", Verdict::Incorrect),
            (Mode::Pairwise, "B", Verdict::B),
        ];
        for (mode, reply, expected) in cases {
            assert_eq!(verdict(mode, reply), expected, "{reply:?}");
        }
    }

    #[test]
    fn no_verdict_or_two_verdicts_are_unparseable() {
        let cases = [
            (Mode::Correctness, "I am not sure what you mean."),
            // A word containing a verdict is not one.
            (Mode::Correctness, "The candidate is incorrectly formatted"),
            (
                Mode::Correctness,
                "Verdict: <correct|partially correct|incorrect>",
            ),
            (Mode::Correctness, "Verdict: correct\nVerdict: incorrect"),
            (Mode::Correctness, "{\"verdict\": \"maybe\"}"),
            // Another mode's word.
            (Mode::Correctness, "Verdict: supported"),
            (Mode::Pairwise, "Verdict: A and B are both fine"),
            (Mode::Pairwise, "Answer A is good. Answer B is also good."),
            // An echo of the prompt's fields is not a verdict.
            (
                Mode::Pairwise,
                "Answer A: Denver Broncos\nAnswer B: Carolina",
            ),
            (Mode::Faithfulness, ""),
        ];
        for (mode, reply) in cases {
            assert_eq!(verdict(mode, reply), Verdict::Unparseable, "{reply:?}");
        }
    }

    #[test]
    fn a_repeated_identical_verdict_is_one_verdict() {
        let reply = "{\"verdict\": \"incorrect\"}\nVerdict: Incorrect";
        assert_eq!(verdict(Mode::Correctness, reply), Verdict::Incorrect);
    }

    #[test]
    fn labels_use_the_same_words() {
        assert_eq!(
            verdict_of(Mode::Correctness, "partially_correct"),
            Some(Verdict::PartiallyCorrect)
        );
        assert_eq!(verdict_of(Mode::Pairwise, "tie"), Some(Verdict::Tie));
        assert_eq!(verdict_of(Mode::Pairwise, "correct"), None);
    }
}
