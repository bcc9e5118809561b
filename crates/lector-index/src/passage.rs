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
//!
//! With [`ChunkConfig::sections`], a document with headings (`metadata.sections`, written by the
//! DOCX, Markdown, HTML and PDF readers) is first cut at every section start and each section is
//! chunked alone ([`chunk_within`]), so no passage spans two sections and a hit's section path
//! (named at its first character) is the section of all its text. With
//! [`ChunkConfig::headings`], each passage is indexed with the headings of its section
//! (when a segment is built). Both are on for new indexes: docs/retrieval.md, "Structure-aware
//! chunking", has the measurement.

use serde::{Deserialize, Serialize};
use unicode_segmentation::UnicodeSegmentation;

/// How documents are cut into passages. Fixed when the index is created.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChunkConfig {
    /// The most words in a passage (a word is a UAX #29 word segment).
    pub words: usize,
    /// Words of the previous passage repeated at the start of the next (whole sentences only).
    pub overlap: usize,
    /// Cut documents at their section starts first (`metadata.sections`), so that no passage
    /// spans two sections. Absent in indexes created before it existed, which read as `false`
    /// and keep cutting by length only.
    #[serde(default)]
    pub sections: bool,
    /// Index each passage with the headings of the section it starts in (as the document title
    /// already is; a heading equal to the title is not repeated). Absent in indexes created
    /// before it existed, which read as `false`.
    #[serde(default)]
    pub headings: bool,
}

impl Default for ChunkConfig {
    fn default() -> Self {
        ChunkConfig {
            words: 100,
            overlap: 0,
            sections: DEFAULT_SECTIONS,
            headings: DEFAULT_HEADINGS,
        }
    }
}

/// Whether new indexes cut at sections (docs/retrieval.md, "Structure-aware chunking").
const DEFAULT_SECTIONS: bool = true;
/// Whether new indexes index passages with their headings (the same measurement).
const DEFAULT_HEADINGS: bool = true;

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

/// The passages of `text` when it is first cut at `boundaries` (character offsets, as in
/// `metadata.sections[*].start`; in any order, out-of-range ones ignored): each part is chunked
/// alone, so no passage crosses a boundary. Spans are offsets into the whole `text`. When the
/// text between the start of a boundary's line and the boundary holds no letter or digit (the
/// `## ` of a Markdown heading, indentation), it belongs to neither part. A part without words
/// gives no passage. Within a part, the last two passages are evened out (without overlap: a
/// 120-word section gives about 60 + 60 words, not 100 + 20). With no boundary this is [`chunk`].
pub fn chunk_within(text: &str, boundaries: &[usize], config: ChunkConfig) -> Vec<Span> {
    let mut cuts: Vec<usize> = boundaries.iter().copied().filter(|&c| c > 0).collect();
    if boundaries.is_empty() {
        return chunk(text, config);
    }
    cuts.sort_unstable();
    cuts.dedup();
    // Character cuts to (byte, char) positions, in one pass; those past the end are dropped.
    let mut positions = Vec::with_capacity(cuts.len() + 1);
    let mut wanted = cuts.iter().peekable();
    for (chars, (byte, _)) in text.char_indices().enumerate() {
        while wanted.next_if(|&&c| c == chars).is_some() {
            positions.push((byte, chars));
        }
        if wanted.peek().is_none() {
            break;
        }
    }
    positions.push((text.len(), usize::MAX));
    let mut out = Vec::new();
    let (mut start, mut start_char) = (0, 0);
    for (cut, cut_char) in positions {
        let end = if cut_char == usize::MAX {
            cut
        } else {
            marker_start(text, start, cut)
        };
        for span in chunk_section(&text[start..end], config) {
            out.push(Span {
                byte_start: start + span.byte_start,
                byte_end: start + span.byte_end,
                char_start: start_char + span.char_start,
                char_end: start_char + span.char_end,
            });
        }
        (start, start_char) = (cut, cut_char);
    }
    out
}

/// [`chunk`] for one section, with its last two passages evened out (without overlap): the
/// greedy cut leaves a short tail (a 120-word section is 100 + 20 words); whole pieces move from
/// the next-to-last passage to the last while that makes their word counts closer (so 60 + 60),
/// never past the limit, keeping the number of passages.
fn chunk_section(text: &str, config: ChunkConfig) -> Vec<Span> {
    let max_words = config.words.max(1);
    let pieces = pieces(text, max_words);
    let mut ranges = windows(&pieces, max_words, config.overlap);
    if config.overlap == 0 && ranges.len() >= 2 {
        let n = ranges.len();
        let first = pieces.iter().position(|p| p.start == ranges[n - 2].0);
        let split = pieces.iter().position(|p| p.start == ranges[n - 1].0);
        if let (Some(first), Some(mut split)) = (first, split) {
            let words = |from: usize, to: usize| -> usize {
                pieces[from..to].iter().map(|p| p.words).sum()
            };
            let (mut before, mut after) = (words(first, split), words(split, pieces.len()));
            while split - 1 > first {
                let moved = pieces[split - 1].words;
                let closer = before.abs_diff(after) > (before - moved).abs_diff(after + moved);
                if !closer || after + moved > max_words {
                    break;
                }
                (before, after, split) = (before - moved, after + moved, split - 1);
            }
            ranges[n - 2] = (pieces[first].start, pieces[split - 1].end);
            ranges[n - 1] = (pieces[split].start, pieces[pieces.len() - 1].end);
        }
    }
    with_char_offsets(text, ranges)
}

/// Where the part before `cut` ends: the start of `cut`'s line when the text from there to `cut`
/// has no alphanumeric character (and the line starts after `start`), else `cut`.
fn marker_start(text: &str, start: usize, cut: usize) -> usize {
    let line = text[start..cut]
        .rfind('\n')
        .map_or(start, |i| start + i + 1);
    if text[line..cut].chars().any(char::is_alphanumeric) {
        cut
    } else {
        line
    }
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
                let spans = chunk(
                    text,
                    ChunkConfig {
                        words,
                        overlap,
                        ..ChunkConfig::default()
                    },
                );
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
                ..ChunkConfig::default()
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
                ..ChunkConfig::default()
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
                ..ChunkConfig::default()
            },
        );
        let texts: Vec<&str> = spans
            .iter()
            .map(|s| &text[s.byte_start..s.byte_end])
            .collect();
        assert_eq!(texts, ["A b. C d.", "C d. E f.", "E f. G h.", "G h. I j."]);
    }

    fn small(words: usize) -> ChunkConfig {
        ChunkConfig {
            words,
            overlap: 0,
            sections: true,
            headings: false,
        }
    }

    fn texts<'a>(text: &'a str, spans: &[Span]) -> Vec<&'a str> {
        spans
            .iter()
            .map(|s| &text[s.byte_start..s.byte_end])
            .collect()
    }

    /// Character offset of `needle` in `text`.
    fn char_at(text: &str, needle: &str) -> usize {
        text[..text.find(needle).unwrap()].chars().count()
    }

    #[test]
    fn sections_are_never_crossed() {
        let text =
            "# Guide\nIntro one two. Three four.\n\n## Linux\nApt get it. Then run it now.\n\
                    ## Windows\nClick.\n## Empty\n\n### Deep\na b c d e f g";
        let starts: Vec<usize> = ["Guide", "Linux", "Windows", "Empty", "Deep"]
            .iter()
            .map(|h| char_at(text, h))
            .collect();
        let spans = chunk_within(text, &starts, small(5));
        check_offsets(text, &spans);
        assert_eq!(
            texts(text, &spans),
            [
                "Guide\nIntro one two.",
                "Three four.",
                "Linux\nApt get it.",
                "Then run it now.",
                "Windows\nClick.",
                "Empty",
                "Deep",
                "a b c d e",
                "f g"
            ]
        );
        // No passage starts before its section or ends after the next one starts.
        for span in &spans {
            let section = starts.iter().rposition(|&s| s <= span.char_start).unwrap();
            if let Some(&next) = starts.get(section + 1) {
                assert!(span.char_end <= next);
            }
        }
        // A short section is one passage of its own, even under a large limit.
        let big = texts(text, &chunk_within(text, &starts, small(100)));
        assert_eq!(big[2], "Windows\nClick.");
        assert_eq!(big.len(), 5);
    }

    #[test]
    fn wordless_sections_are_skipped_and_unicode_offsets_hold() {
        let text =
            "Préface, déjà vu.\n## \n## Ünïcödé 🎉\nCafé crème. Zoë's naïve résumé.\n### ...";
        let starts = [
            char_at(text, "\n## Ü") + 1,
            char_at(text, "Ünï"),
            char_at(text, "..."),
            9999,
            0,
        ];
        let spans = chunk_within(text, &starts, small(3));
        check_offsets(text, &spans);
        assert_eq!(
            texts(text, &spans),
            [
                "Préface, déjà vu.",
                "Ünïcödé 🎉\nCafé crème.",
                "Zoë's naïve résumé."
            ]
        );
        // Without boundaries it is `chunk`.
        assert_eq!(chunk_within(text, &[], small(3)), chunk(text, small(3)));
    }

    #[test]
    fn a_short_tail_is_evened_out_within_a_section() {
        let text = "A b c. D e f. G h i. J k.";
        assert_eq!(
            texts(text, &chunk(text, small(9))),
            ["A b c. D e f. G h i.", "J k."]
        );
        assert_eq!(
            texts(text, &chunk_within(text, &[0], small(9))),
            ["A b c. D e f.", "G h i. J k."]
        );
        // Never past the limit, never more passages.
        assert_eq!(
            texts(text, &chunk_within(text, &[0], small(6))),
            ["A b c. D e f.", "G h i. J k."]
        );
    }

    #[test]
    fn settings_stored_before_sections_existed_keep_length_chunking() {
        let old: ChunkConfig = serde_json::from_str(r#"{"words": 100, "overlap": 0}"#).unwrap();
        assert!(!old.sections && !old.headings);
        let new = serde_json::to_string(&ChunkConfig::default()).unwrap();
        assert_eq!(
            serde_json::from_str::<ChunkConfig>(&new).unwrap(),
            ChunkConfig::default()
        );
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
                    ..ChunkConfig::default()
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
