//! Cutting documents into passages of about `words` words on sentence boundaries.
//!
//! Sentences are UAX #29 sentence segments; a sentence longer than the passage size is split
//! between words. A passage is a run of whole sentences (or sentence pieces) with at most `words`
//! words, except that a passage always holds at least one piece. With `overlap > 0`, the next
//! passage starts with the last pieces of the previous one that hold at most `overlap` words.
//!
//! Every passage carries its position in the document text twice: UTF-8 byte offsets (for slicing
//! a Rust `&str`) and character offsets counted in Unicode scalar values (the indices of a Python
//! `str` or of `chars()`). Both are half-open `[start, end)`, and the slice is trimmed of
//! surrounding whitespace.

use serde::{Deserialize, Serialize};
use unicode_segmentation::UnicodeSegmentation;

/// How documents are cut into passages. Fixed when the index is created.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChunkConfig {
    /// The most words in a passage (a word is a UAX #29 word segment).
    pub words: usize,
    /// Words of the previous passage repeated at the start of the next (whole sentences only).
    pub overlap: usize,
}

impl Default for ChunkConfig {
    fn default() -> Self {
        ChunkConfig {
            words: 100,
            overlap: 0,
        }
    }
}

/// Where a passage lies in its document's text: half-open byte and character ranges.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Span {
    /// First byte (UTF-8) of the passage.
    pub byte_start: usize,
    /// One past the last byte.
    pub byte_end: usize,
    /// First character (Unicode scalar value) of the passage.
    pub char_start: usize,
    /// One past the last character.
    pub char_end: usize,
}

/// A sentence or a piece of a long sentence: a tight byte range with its word count.
#[derive(Debug, Clone, Copy)]
struct Piece {
    start: usize,
    end: usize,
    words: usize,
}

/// The passages of `text`, in order. Text without any word gives no passage.
pub fn chunk(text: &str, config: ChunkConfig) -> Vec<Span> {
    let max_words = config.words.max(1);
    let pieces = pieces(text, max_words);
    let ranges = windows(&pieces, max_words, config.overlap);
    with_char_offsets(text, ranges)
}

/// Sentences (split when longer than `max_words`), trimmed, without word-less ones.
fn pieces(text: &str, max_words: usize) -> Vec<Piece> {
    let mut out = Vec::new();
    for (offset, sentence) in text.split_sentence_bound_indices() {
        let words: Vec<usize> = sentence
            .unicode_word_indices()
            .map(|(i, _)| offset + i)
            .collect();
        if words.is_empty() {
            continue;
        }
        let end = offset + sentence.trim_end().len();
        for (n, group) in words.chunks(max_words).enumerate() {
            let start = if n == 0 {
                offset + leading_space(sentence)
            } else {
                group[0]
            };
            let piece_end = words
                .get((n + 1) * max_words)
                .map_or(end, |&next| offset + text[offset..next].trim_end().len());
            out.push(Piece {
                start,
                end: piece_end,
                words: group.len(),
            });
        }
    }
    out
}

fn leading_space(s: &str) -> usize {
    s.len() - s.trim_start().len()
}

/// Byte ranges of the passages: greedy runs of pieces, then step back for the overlap.
fn windows(pieces: &[Piece], max_words: usize, overlap: usize) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut first = 0;
    while first < pieces.len() {
        let mut last = first;
        let mut words = pieces[first].words;
        while last + 1 < pieces.len() && words + pieces[last + 1].words <= max_words {
            last += 1;
            words += pieces[last].words;
        }
        out.push((pieces[first].start, pieces[last].end));
        first = next_start(pieces, first, last, overlap);
    }
    out
}

/// The first piece of the next passage: after `last`, moved back over trailing pieces holding at
/// most `overlap` words, but always past `first` so that chunking advances.
fn next_start(pieces: &[Piece], first: usize, last: usize, overlap: usize) -> usize {
    if last + 1 >= pieces.len() {
        return pieces.len();
    }
    let mut next = last + 1;
    let mut carried = 0;
    while next > first + 1 && carried + pieces[next - 1].words <= overlap {
        next -= 1;
        carried += pieces[next].words;
    }
    next
}

/// Adds character offsets with one forward pass over starts and one over ends (both sorted), so
/// a long document costs linear time, not one count per passage from the text's start.
fn with_char_offsets(text: &str, ranges: Vec<(usize, usize)>) -> Vec<Span> {
    let starts = char_positions(text, ranges.iter().map(|r| r.0));
    let ends = char_positions(text, ranges.iter().map(|r| r.1));
    ranges
        .iter()
        .zip(starts.into_iter().zip(ends))
        .map(|(&(byte_start, byte_end), (char_start, char_end))| Span {
            byte_start,
            byte_end,
            char_start,
            char_end,
        })
        .collect()
}

fn char_positions(text: &str, sorted_bytes: impl Iterator<Item = usize>) -> Vec<usize> {
    let (mut byte, mut chars) = (0, 0);
    sorted_bytes
        .map(|target| {
            chars += text[byte..target].chars().count();
            byte = target;
            chars
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check_offsets(text: &str, spans: &[Span]) {
        for span in spans {
            let by_bytes = &text[span.byte_start..span.byte_end];
            let by_chars: String = text
                .chars()
                .skip(span.char_start)
                .take(span.char_end - span.char_start)
                .collect();
            assert_eq!(by_bytes, by_chars);
            assert_eq!(by_bytes, by_bytes.trim());
            assert!(!by_bytes.is_empty());
        }
    }

    fn word_count(s: &str) -> usize {
        s.unicode_words().count()
    }

    #[test]
    fn unicode_offsets_slice_exactly() {
        let text =
            "Ünïcödé façade — déjà vu. 東京は日本の首都です。 Zoë's café serves crème brûlée! \
                    Emoji 🎉🎉 here, naïve résumé; περισσότερα ελληνικά λόγια. Last one?";
        for words in [1, 2, 3, 5, 8, 100] {
            for overlap in [0, 1, 3] {
                let spans = chunk(text, ChunkConfig { words, overlap });
                check_offsets(text, &spans);
                assert!(!spans.is_empty());
            }
        }
    }

    #[test]
    fn respects_sentence_boundaries_and_size() {
        let text = "One two three. Four five six. Seven eight nine ten eleven twelve. Thirteen.";
        let spans = chunk(
            text,
            ChunkConfig {
                words: 6,
                overlap: 0,
            },
        );
        let texts: Vec<&str> = spans
            .iter()
            .map(|s| &text[s.byte_start..s.byte_end])
            .collect();
        assert_eq!(
            texts,
            [
                "One two three. Four five six.",
                "Seven eight nine ten eleven twelve.",
                "Thirteen."
            ]
        );
    }

    #[test]
    fn long_sentence_is_split_between_words() {
        let text = "a b c d e f g h i j";
        let spans = chunk(
            text,
            ChunkConfig {
                words: 4,
                overlap: 0,
            },
        );
        let texts: Vec<&str> = spans
            .iter()
            .map(|s| &text[s.byte_start..s.byte_end])
            .collect();
        assert_eq!(texts, ["a b c d", "e f g h", "i j"]);
    }

    #[test]
    fn overlap_repeats_trailing_sentences_and_advances() {
        let text = "A b. C d. E f. G h. I j.";
        let spans = chunk(
            text,
            ChunkConfig {
                words: 4,
                overlap: 2,
            },
        );
        let texts: Vec<&str> = spans
            .iter()
            .map(|s| &text[s.byte_start..s.byte_end])
            .collect();
        assert_eq!(texts, ["A b. C d.", "C d. E f.", "E f. G h.", "G h. I j."]);
    }

    #[test]
    fn wordless_text_has_no_passage() {
        assert!(chunk("  \n ... --- \t", ChunkConfig::default()).is_empty());
        assert!(chunk("", ChunkConfig::default()).is_empty());
    }

    #[test]
    fn real_scifact_abstracts_cover_every_word() {
        let path = lector_eval::data::require("beir/scifact/corpus.jsonl");
        let text = std::fs::read_to_string(path).expect("SciFact corpus");
        for line in text.lines().take(300) {
            let doc: serde_json::Value = serde_json::from_str(line).unwrap();
            let abstract_text = doc["text"].as_str().unwrap();
            let spans = chunk(
                abstract_text,
                ChunkConfig {
                    words: 100,
                    overlap: 0,
                },
            );
            check_offsets(abstract_text, &spans);
            let covered: usize = spans
                .iter()
                .map(|s| word_count(&abstract_text[s.byte_start..s.byte_end]))
                .sum();
            assert_eq!(covered, word_count(abstract_text));
            assert!(spans
                .iter()
                .all(|s| word_count(&abstract_text[s.byte_start..s.byte_end]) <= 100));
        }
    }
}
