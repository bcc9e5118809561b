//! From generated tokens to streamed text: stop sequences and incomplete characters.
//!
//! The generated ids are decoded as a whole after every token (byte-level BPE can split a
//! character across tokens, so a piece decoded alone may be invalid UTF-8). [`TextStream`] hands
//! out only the text that is final: nothing while the text ends in an incomplete character
//! (U+FFFD), and never a tail that could still grow into a stop sequence.

/// What one more token changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    /// New final text to emit (may be empty).
    pub piece: String,
    /// The stop sequence found, if any: the text ends before it, generation must stop.
    pub stop: Option<String>,
}

/// Tracks how much of the generated text has been emitted.
#[derive(Debug, Clone)]
pub struct TextStream {
    stop: Vec<String>,
    emitted: usize,
    /// Byte length of the final text once a stop sequence is found.
    end: Option<usize>,
}

impl TextStream {
    /// A stream that ends at any of `stop`.
    pub fn new(stop: &[String]) -> Self {
        TextStream {
            stop: stop.to_vec(),
            emitted: 0,
            end: None,
        }
    }

    /// Takes the whole text generated so far and returns what can be emitted now.
    pub fn push(&mut self, text: &str) -> Step {
        if let Some((at, stop)) = self.first_stop(text) {
            let piece = text[self.emitted.min(at)..at].to_string();
            self.emitted = at;
            self.end = Some(at);
            return Step {
                piece,
                stop: Some(stop),
            };
        }
        let safe = if text.ends_with('\u{FFFD}') {
            self.emitted
        } else {
            text.len() - self.pending_stop_prefix(text)
        };
        let piece = text[self.emitted..safe.max(self.emitted)].to_string();
        self.emitted = self.emitted.max(safe);
        Step { piece, stop: None }
    }

    /// The rest of the text at the end of generation (also a held-back tail).
    pub fn finish(&mut self, text: &str) -> String {
        let end = self.end.unwrap_or(text.len());
        let piece = text[self.emitted.min(end)..end].to_string();
        self.emitted = end;
        piece
    }

    /// The final text: `text` cut before the stop sequence, if one was found.
    pub fn final_text<'t>(&self, text: &'t str) -> &'t str {
        &text[..self.end.unwrap_or(text.len())]
    }

    /// The earliest stop sequence in `text` (byte offset and the sequence).
    fn first_stop(&self, text: &str) -> Option<(usize, String)> {
        self.stop
            .iter()
            .filter_map(|s| text.find(s.as_str()).map(|at| (at, s.clone())))
            .min_by_key(|(at, _)| *at)
    }

    /// The length of the longest suffix of `text` that is a proper prefix of a stop sequence.
    fn pending_stop_prefix(&self, text: &str) -> usize {
        self.stop
            .iter()
            .flat_map(|s| {
                s.char_indices()
                    .skip(1)
                    .map(move |(i, _)| &s[..i])
                    .filter(|prefix| text.ends_with(prefix))
                    .map(str::len)
            })
            .max()
            .unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(stop: &[&str], texts: &[&str]) -> (Vec<String>, Option<String>, String) {
        let stop: Vec<String> = stop.iter().map(|s| s.to_string()).collect();
        let mut stream = TextStream::new(&stop);
        let mut pieces = Vec::new();
        for text in texts {
            let step = stream.push(text);
            pieces.push(step.piece);
            if let Some(s) = step.stop {
                return (pieces, Some(s), stream.final_text(text).to_string());
            }
        }
        let last = texts.last().unwrap();
        pieces.push(stream.finish(last));
        (pieces, None, last.to_string())
    }

    #[test]
    fn holds_back_a_possible_stop_sequence() {
        let (pieces, stop, text) = run(&["\n\n"], &["Paris", "Paris.\n", "Paris.\nIt"]);
        assert_eq!(pieces, ["Paris", ".", "\nIt", ""]);
        assert_eq!(stop, None);
        assert_eq!(text, "Paris.\nIt");
    }

    #[test]
    fn stops_before_the_sequence_split_across_tokens() {
        let (pieces, stop, text) = run(
            &["END"],
            &[
                "The answer",
                "The answer E",
                "The answer EN",
                "The answer END!",
            ],
        );
        assert_eq!(pieces, ["The answer", " ", "", ""]);
        assert_eq!(stop.as_deref(), Some("END"));
        assert_eq!(text, "The answer ");
    }

    #[test]
    fn the_earliest_of_several_stops_wins() {
        let (_, stop, text) = run(&["b", "a"], &["xxab"]);
        assert_eq!(stop.as_deref(), Some("a"));
        assert_eq!(text, "xx");
    }

    #[test]
    fn waits_for_a_complete_character() {
        let (pieces, _, _) = run(&[], &["caf", "caf\u{FFFD}", "café"]);
        assert_eq!(pieces, ["caf", "", "é", ""]);
    }

    #[test]
    fn finish_flushes_a_held_back_tail() {
        let (pieces, _, _) = run(&["STOP"], &["go ST"]);
        assert_eq!(pieces, ["go ", "ST"]);
    }
}
