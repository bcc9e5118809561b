//! Answer-aware questions from a passage, by rule: the first half of a test set generated from a
//! user's own documents (`lector generate-questions`; the round trip that filters them is in
//! `lector_pipeline::questions`).
//!
//! **Candidate answers** ([`candidates`]): per sentence, dates (a month with a day or a year, or
//! a year alone), numbers (digits, a year excepted) and names (runs of capitalised words, with
//! `of`, `the`, `and`, `for`, `de` between them, a leading article or sentence opener dropped).
//! At most one per sentence, in that order of preference: dates and numbers make the least
//! ambiguous questions.
//!
//! **Question forms** ([`rule_question`]): the answer's span in its sentence becomes a question
//! word: `when` for a date or a year (the preposition before it dropped: "played on February
//! 7" -> "played when"; "the 2015 season" -> "which season"), `how many X` for a number followed
//! by a word X, else `what` (an article before it dropped). An answer that opens its sentence makes a question that opens with the
//! question word ("The Broncos defeated the Panthers" -> "What defeated the Panthers?");
//! elsewhere the question word takes the answer's place ("The game was played when?"). A
//! question of fewer than 4 words, more than 40, or containing its own answer is not made.

use crate::equivalence::month_of;
use serde::Serialize;

/// What kind of thing a candidate answer is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AnswerKind {
    Date,
    Number,
    Name,
}

impl AnswerKind {
    /// The kind's name, as reports and output files spell it.
    pub fn name(self) -> &'static str {
        match self {
            AnswerKind::Date => "date",
            AnswerKind::Number => "number",
            AnswerKind::Name => "name",
        }
    }
}

/// A candidate answer: its text and where it is in the passage (byte offsets), and the
/// sentence it is in.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Candidate {
    pub text: String,
    pub start: usize,
    pub end: usize,
    pub kind: AnswerKind,
    /// The sentence's byte range in the passage.
    pub sentence: (usize, usize),
}

/// Words that may join the capitalised words of one name.
const NAME_JOINERS: [&str; 5] = ["of", "the", "and", "for", "de"];

/// Capitalised words that open sentences without being names (dropped from a name's start).
const OPENERS: [&str; 33] = [
    "The",
    "A",
    "An",
    "In",
    "On",
    "At",
    "By",
    "For",
    "From",
    "With",
    "During",
    "After",
    "Before",
    "However",
    "Although",
    "When",
    "While",
    "This",
    "That",
    "These",
    "Those",
    "It",
    "Its",
    "As",
    "About",
    "Around",
    "Over",
    "Nearly",
    "Some",
    "Only",
    "Almost",
    "More",
    "Approximately",
];

/// Prepositions dropped before `when`.
const DATE_PREPOSITIONS: [&str; 8] = ["in", "on", "at", "during", "by", "since", "until", "from"];

/// One word of a sentence: its byte range in the passage without surrounding punctuation.
#[derive(Debug, Clone, Copy)]
struct Word {
    start: usize,
    end: usize,
}

/// The candidate answers of `passage`, at most one per sentence.
pub fn candidates(passage: &str) -> Vec<Candidate> {
    sentence_ranges(passage)
        .into_iter()
        .filter_map(|(start, end)| best_in_sentence(passage, start, end))
        .collect()
}

/// The sentences' byte ranges (split after `.`, `!` or `?` followed by whitespace).
fn sentence_ranges(text: &str) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut start = 0;
    for end in crate::breakdown::sentence_ends(text)
        .into_iter()
        .chain([text.len()])
    {
        if text[start..end].trim().len() > 1 {
            out.push((start, end));
        }
        start = end;
    }
    out
}

fn words_in(passage: &str, start: usize, end: usize) -> Vec<Word> {
    let mut words = Vec::new();
    let mut at = start;
    for raw in passage[start..end].split_whitespace() {
        let offset = passage[at..end].find(raw).expect("a word of the sentence") + at;
        at = offset + raw.len();
        let core = raw.trim_matches(|c: char| !c.is_alphanumeric());
        if core.is_empty() {
            continue;
        }
        let lead = raw.find(core).expect("the core is in the word");
        words.push(Word {
            start: offset + lead,
            end: offset + lead + core.len(),
        });
    }
    words
}

/// The sentence's best candidate: a date, else a number, else a name.
fn best_in_sentence(passage: &str, start: usize, end: usize) -> Option<Candidate> {
    let words = words_in(passage, start, end);
    let text = |w: &Word| &passage[w.start..w.end];
    let make = |first: usize, last: usize, kind| Candidate {
        text: passage[words[first].start..words[last].end].to_string(),
        start: words[first].start,
        end: words[last].end,
        kind,
        sentence: (start, end),
    };
    let is_year = |w: &str| {
        w.len() == 4
            && w.bytes().all(|b| b.is_ascii_digit())
            && (1000..=2100).contains(&w.parse::<u32>().unwrap_or(0))
    };
    let is_day = |w: &str| w.len() <= 2 && w.parse::<u32>().is_ok_and(|d| (1..=31).contains(&d));
    // Dates: Month [day][,] [year], day Month [year], or a year alone.
    for (i, w) in words.iter().enumerate() {
        if month_of(&text(w).to_lowercase(), false).is_some()
            && text(w).starts_with(char::is_uppercase)
        {
            let mut last = i;
            if words.get(last + 1).is_some_and(|n| is_day(text(n))) {
                last += 1;
            }
            if words.get(last + 1).is_some_and(|n| is_year(text(n))) {
                last += 1;
            }
            let first = match i.checked_sub(1) {
                Some(p) if is_day(text(&words[p])) => p,
                _ => i,
            };
            if last > i || first < i {
                return Some(make(first, last, AnswerKind::Date));
            }
        }
    }
    if let Some(i) = words.iter().position(|w| is_year(text(w))) {
        return Some(make(i, i, AnswerKind::Date));
    }
    // A number right after a capitalised word belongs to a name ("Super Bowl 50").
    let after_capital = |i: usize| {
        i > 0
            && text(&words[i - 1]).starts_with(char::is_uppercase)
            && !OPENERS.contains(&text(&words[i - 1]))
    };
    let number = (0..words.len())
        .find(|&i| text(&words[i]).starts_with(|c: char| c.is_ascii_digit()) && !after_capital(i));
    if let Some(i) = number {
        return Some(make(i, i, AnswerKind::Number));
    }
    names(passage, &words)
        .into_iter()
        .next()
        .map(|(first, last)| make(first, last, AnswerKind::Name))
}

/// The runs of capitalised words (word indices, inclusive), joiners allowed inside and numbers
/// after a capitalised word ("Super Bowl 50"), openers dropped from the front; the longest run
/// first.
fn names(passage: &str, words: &[Word]) -> Vec<(usize, usize)> {
    let text = |i: usize| &passage[words[i].start..words[i].end];
    let capital = |i: usize| text(i).starts_with(char::is_uppercase);
    let mut runs = Vec::new();
    let mut i = 0;
    while i < words.len() {
        if !capital(i) || OPENERS.contains(&text(i)) {
            i += 1;
            continue;
        }
        let mut last = i;
        let mut j = i + 1;
        while j < words.len() {
            let number = text(j).starts_with(|c: char| c.is_ascii_digit());
            if capital(j) || (number && last == j - 1) {
                last = j;
            } else if !NAME_JOINERS.contains(&text(j)) {
                break;
            }
            j += 1;
        }
        // A single word at the sentence's start is as likely an opener as a name.
        if last > i || i > 0 {
            runs.push((i, last));
        }
        i = last + 1;
    }
    runs.sort_by_key(|&(first, last)| std::cmp::Reverse(last - first));
    runs
}

/// The question whose answer is `candidate`, made from its sentence by rule; `None` when the
/// rules make no fit question.
pub fn rule_question(passage: &str, candidate: &Candidate) -> Option<String> {
    let (sentence_start, sentence_end) = candidate.sentence;
    let mut before: Vec<&str> = passage[sentence_start..candidate.start]
        .split_whitespace()
        .collect();
    let after_text = passage[candidate.end..sentence_end]
        .trim()
        .trim_end_matches(['.', '!', '?', ';', ':', ','])
        .trim_start_matches([',', ')', '"', '\''])
        .trim();
    let mut after: Vec<&str> = after_text.split_whitespace().collect();
    let wh = match candidate.kind {
        // "the 2015 season": the year names which one.
        AnswerKind::Date if before.last().is_some_and(|w| w.eq_ignore_ascii_case("the")) => {
            before.pop();
            "which".to_string()
        }
        AnswerKind::Date => {
            if before
                .last()
                .is_some_and(|w| DATE_PREPOSITIONS.contains(&w.to_lowercase().as_str()))
            {
                before.pop();
            }
            "when".to_string()
        }
        AnswerKind::Number => match after.first() {
            Some(w) if w.chars().all(|c| c.is_alphabetic() && c.is_lowercase()) => {
                let noun = after.remove(0);
                format!("how many {noun}")
            }
            _ => "what".to_string(),
        },
        AnswerKind::Name => {
            if before
                .last()
                .is_some_and(|w| matches!(w.to_lowercase().as_str(), "the" | "a" | "an"))
            {
                before.pop();
            }
            "what".to_string()
        }
    };
    let opens = before.is_empty()
        || (before.len() == 1
            && OPENERS.contains(&before[0])
            && candidate.kind == AnswerKind::Name);
    let question = if opens {
        let mut wh = wh;
        wh[..1].make_ascii_uppercase();
        format!("{wh} {}?", after.join(" "))
    } else {
        format!("{} {wh} {}?", before.join(" "), after.join(" "))
    };
    let question = question.replace(" ?", "?");
    let words = question.split_whitespace().count();
    let gives_away = question
        .to_lowercase()
        .contains(&candidate.text.to_lowercase());
    ((4..=40).contains(&words) && !gives_away).then_some(question)
}

#[cfg(test)]
mod tests {
    use super::*;

    const PASSAGE: &str =
        "Super Bowl 50 was an American football game. The Denver Broncos defeated the \
Carolina Panthers to earn their third title. The game was played on February 7, 2016, at Levi's \
Stadium. About 71 thousand fans attended it.";

    #[test]
    fn each_sentence_gives_its_best_candidate() {
        let found: Vec<(String, AnswerKind)> = candidates(PASSAGE)
            .into_iter()
            .map(|c| (c.text, c.kind))
            .collect();
        assert_eq!(
            found,
            [
                ("Super Bowl 50".to_string(), AnswerKind::Name),
                ("Denver Broncos".to_string(), AnswerKind::Name),
                ("February 7, 2016".to_string(), AnswerKind::Date),
                ("71".to_string(), AnswerKind::Number),
            ]
        );
        for c in candidates(PASSAGE) {
            assert_eq!(&PASSAGE[c.start..c.end], c.text);
        }
    }

    #[test]
    fn questions_put_a_question_word_in_the_answer_s_place() {
        let questions: Vec<Option<String>> = candidates(PASSAGE)
            .iter()
            .map(|c| rule_question(PASSAGE, c))
            .collect();
        assert_eq!(
            questions,
            [
                Some("What was an American football game?".to_string()),
                Some("What defeated the Carolina Panthers to earn their third title?".to_string()),
                Some("The game was played when at Levi's Stadium?".to_string()),
                Some("About how many thousand fans attended it?".to_string()),
            ]
        );
    }

    #[test]
    fn a_year_after_an_article_asks_which() {
        let passage = "The Broncos won the title of the 2015 season in the end.";
        let c = candidates(passage);
        assert_eq!(c[0].text, "2015");
        assert_eq!(
            rule_question(passage, &c[0]).as_deref(),
            Some("The Broncos won the title of which season in the end?")
        );
    }

    #[test]
    fn a_question_that_would_give_its_answer_away_or_says_nothing_is_not_made() {
        let passage = "Paris is Paris.";
        let c = candidates(passage);
        assert!(
            c.iter().all(|c| rule_question(passage, c).is_none()),
            "{c:?}"
        );
        assert!(candidates("It rained.").is_empty());
    }
}
