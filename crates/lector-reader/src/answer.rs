//! From token spans to answers: word alignment, character offsets, merging, ranking — as the
//! pipeline's `postprocess` with `align_to_words=True`.

use crate::decode::Span;
use crate::window::Window;
use serde::Serialize;
use tokenizers::Encoding;

/// One answer. `start`/`end` are character (Unicode scalar) offsets into the original context,
/// as Python's `str` indexes it; `text == context.chars().skip(start).take(end - start)`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Answer {
    pub answer: String,
    pub score: f64,
    pub start: usize,
    pub end: usize,
}

/// The context text with its encoding (offsets are byte offsets into `text`).
pub struct EncodedContext<'a> {
    pub text: &'a str,
    pub encoding: Encoding,
    /// Character index of every byte position (one more than `text.len()`): answers report
    /// character offsets, and counting characters per answer would be quadratic on long texts.
    char_index: Vec<u32>,
}

impl<'a> EncodedContext<'a> {
    pub fn new(text: &'a str, encoding: Encoding) -> Self {
        let mut char_index = vec![0u32; text.len() + 1];
        let mut chars = 0u32;
        for (byte, ch) in text.char_indices() {
            char_index[byte..byte + ch.len_utf8()].fill(chars);
            chars += 1;
        }
        char_index[text.len()] = chars;
        Self {
            text,
            encoding,
            char_index,
        }
    }

    /// The character offset of byte offset `byte` of the text (a byte inside a character maps to
    /// that character).
    pub fn char_offset(&self, byte: usize) -> usize {
        self.char_index[byte] as usize
    }

    /// The answer `span` of `window` designates, widened to whole words.
    pub fn answer_for(&self, window: &Window, span: &Span) -> Option<Answer> {
        let (first, last) = (
            window.context_token(span.start)?,
            window.context_token(span.end)?,
        );
        let (start, end) = self.word_bounds(window, first, last);
        // A span ending before it starts (possible only at a window edge) is empty, as in Python.
        let end = end.max(start);
        Some(Answer {
            answer: self.text.get(start..end).unwrap_or_default().to_string(),
            score: f64::from(span.score),
            start: self.char_index[start] as usize,
            end: self.char_index[end] as usize,
        })
    }

    /// `word_to_chars(token_to_word(t))` within the window: from the first token of the first
    /// word to the last token of the last word, counting only tokens this window holds.
    /// Tokens without a word keep their own offsets (the pipeline's fallback).
    fn word_bounds(&self, window: &Window, first: usize, last: usize) -> (usize, usize) {
        let words = self.encoding.get_word_ids();
        let offsets = self.encoding.get_offsets();
        let tokens = window.context_tokens.clone();
        let (Some(w_first), Some(w_last)) = (words[first], words[last]) else {
            return (offsets[first].0, offsets[last].1);
        };
        let start_tok = tokens
            .clone()
            .find(|&t| words[t] == Some(w_first))
            .unwrap_or(first);
        let end_tok = tokens
            .rev()
            .find(|&t| words[t] == Some(w_last))
            .unwrap_or(last);
        (offsets[start_tok].0, offsets[end_tok].1)
    }
}

/// Adds `candidate` to `answers`, or its score to an earlier answer with the same text
/// ignoring case (the pipeline's `get_answer`).
pub fn merge(answers: &mut Vec<Answer>, candidate: Answer) {
    let key = candidate.answer.to_lowercase();
    match answers.iter_mut().find(|a| a.answer.to_lowercase() == key) {
        Some(existing) => existing.score += candidate.score,
        None => answers.push(candidate),
    }
}

/// Best first; equal scores keep their order (Python's `sorted` is stable).
pub fn rank(answers: &mut [Answer]) {
    answers.sort_by(|a, b| b.score.total_cmp(&a.score));
}

/// The no-answer answer the pipeline appends with `handle_impossible_answer=True`.
pub fn null_answer(score: f64) -> Answer {
    Answer {
        answer: String::new(),
        score,
        start: 0,
        end: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(text: &str, score: f64) -> Answer {
        Answer {
            answer: text.into(),
            score,
            start: 0,
            end: 0,
        }
    }

    #[test]
    fn merging_ignores_case_and_sums_scores() {
        let mut answers = vec![answer("Paris", 0.25)];
        merge(&mut answers, answer("paris", 0.5));
        merge(&mut answers, answer("Lyon", 0.125));
        assert_eq!(answers, vec![answer("Paris", 0.75), answer("Lyon", 0.125)]);
    }

    #[test]
    fn ranking_is_stable() {
        let mut answers = vec![answer("a", 0.5), answer("b", 0.75), answer("c", 0.5)];
        rank(&mut answers);
        let texts: Vec<_> = answers.iter().map(|a| a.answer.as_str()).collect();
        assert_eq!(texts, ["b", "a", "c"]);
    }
}
