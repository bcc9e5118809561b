//! Adversarial distractors for reading comprehension, after Jia and Liang (2017), "Adversarial
//! Examples for Evaluating Reading Comprehension Systems": a sentence added to the context that
//! looks like the answer to the question but is not. A reader that matches the question's words
//! instead of reading is drawn to it.
//!
//! - **AddSent-style** ([`add_sent`]): the question is mutated by rules (named entities swapped
//!   for entities of other articles, numbers shifted, words with a common antonym replaced by it)
//!   and turned into a statement whose answer slot holds a fake answer of the gold answer's kind
//!   (a number for a number, a year for a year, a name for a name), drawn from the gold answers of
//!   other articles. Unlike the original, no parser and no crowdworkers fix the grammar; questions
//!   the rules cannot mutate get no distractor (a statement that still matched the question
//!   would be a second right answer, not a distractor).
//! - **AddAny-style** ([`add_any`]): ten words drawn from the question's words and common English
//!   words, with no answer at all; several candidates can be tried against the reader and the
//!   worst kept (the original searched word by word).
//!
//! Everything is seeded per question (the seed and the question id), so a distractor does not
//! change with the number of questions asked.

use crate::equivalence::month_of;
use crate::normalize::normalize_answer;
use crate::squad::Question;
use crate::stats::Rng;
use rustc_hash::FxHashMap;
use serde::Serialize;

/// Which distractor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    AddSent,
    AddAny,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::AddSent => "addsent",
            Kind::AddAny => "addany",
        }
    }
}

impl std::str::FromStr for Kind {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "addsent" => Ok(Kind::AddSent),
            "addany" => Ok(Kind::AddAny),
            _ => Err(format!("unknown distractor `{s}` (addsent or addany)")),
        }
    }
}

/// Where the distractor goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Position {
    /// Before the first sentence.
    Start,
    /// After the last sentence (Jia and Liang's choice).
    End,
    /// Between two sentences, chosen by the seed.
    Random,
}

impl Position {
    pub fn name(self) -> &'static str {
        match self {
            Position::Start => "start",
            Position::End => "end",
            Position::Random => "random",
        }
    }
}

impl std::str::FromStr for Position {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "start" => Ok(Position::Start),
            "end" => Ok(Position::End),
            "random" => Ok(Position::Random),
            _ => Err(format!("unknown position `{s}` (start, end or random)")),
        }
    }
}

/// What kind of thing an answer is, by its surface.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum AnswerKind {
    Year,
    Date,
    Number,
    Name,
    Other,
}

fn answer_kind(answer: &str) -> AnswerKind {
    let trimmed = answer.trim();
    let is_year = |w: &str| {
        w.len() == 4
            && w.bytes().all(|b| b.is_ascii_digit())
            && (1000..=2100).contains(&w.parse::<u32>().unwrap_or(0))
    };
    if is_year(trimmed) {
        return AnswerKind::Year;
    }
    let words = words_of(trimmed);
    let has_digit = trimmed.bytes().any(|b| b.is_ascii_digit());
    if has_digit
        && words
            .iter()
            .any(|w| month_of(&w.to_lowercase(), false).is_some())
    {
        return AnswerKind::Date;
    }
    if has_digit {
        return AnswerKind::Number;
    }
    if words
        .first()
        .and_then(|w| w.chars().next())
        .is_some_and(char::is_uppercase)
    {
        return AnswerKind::Name;
    }
    AnswerKind::Other
}

fn words_of(text: &str) -> Vec<&str> {
    text.split_whitespace().collect()
}

/// Gold answers of the dataset by kind, with their article: where fake answers and replacement
/// entities come from (always from another article than the question's).
pub struct Pools {
    by_kind: FxHashMap<AnswerKindKey, Vec<(String, String)>>,
}

type AnswerKindKey = u8;

fn key(kind: AnswerKind) -> AnswerKindKey {
    kind as u8
}

impl Pools {
    /// The pools of `questions`' first gold answers (deduplicated, in dataset order).
    pub fn new(questions: &[Question]) -> Pools {
        let mut by_kind: FxHashMap<AnswerKindKey, Vec<(String, String)>> = FxHashMap::default();
        let mut seen = rustc_hash::FxHashSet::default();
        for q in questions {
            let Some(answer) = q.answers.first() else {
                continue;
            };
            let answer = answer.trim();
            if answer.is_empty() || words_of(answer).len() > 5 || !seen.insert(answer.to_string()) {
                continue;
            }
            by_kind
                .entry(key(answer_kind(answer)))
                .or_default()
                .push((q.title.to_string(), answer.to_string()));
        }
        Pools { by_kind }
    }

    /// An answer of `kind` from an article other than `title` that matches none of `avoid`
    /// (normalised); from a fixed list of made-up ones when the dataset has none (a dataset of
    /// one article, say).
    fn draw(&self, kind: AnswerKind, title: &str, avoid: &[String], rng: &mut Rng) -> String {
        let allowed = |answer: &str| {
            let normalized = normalize_answer(answer);
            !normalized.is_empty() && !avoid.contains(&normalized)
        };
        if let Some(pool) = self.by_kind.get(&key(kind)) {
            // A few tries: pools are large, and a bounded loop cannot spin on a pool of one article.
            for _ in 0..32 {
                let (from, answer) = &pool[rng.below(pool.len())];
                if from != title && allowed(answer) {
                    return answer.clone();
                }
            }
        }
        let made_up = FAKE_ANSWERS
            .iter()
            .find(|(k, _)| *k == kind)
            .map_or(&[][..], |(_, list)| *list);
        let start = rng.below(made_up.len());
        (0..made_up.len())
            .map(|i| made_up[(start + i) % made_up.len()])
            .find(|a| allowed(a))
            .unwrap_or("Jeff Dean")
            .to_string()
    }
}

/// Made-up answers of each kind, used when the dataset offers none from another article: none
/// of them can be the answer to a real question.
const FAKE_ANSWERS: &[(AnswerKind, &[&str])] = &[
    (AnswerKind::Year, &["1787", "1933", "2041"]),
    (AnswerKind::Date, &["March 3, 1867", "October 12, 2039"]),
    (AnswerKind::Number, &["17", "3,400", "61 million"]),
    (
        AnswerKind::Name,
        &["Jeff Dean", "Atlantis", "Gotham City", "Acme Corporation"],
    ),
    (
        AnswerKind::Other,
        &["purple gravel", "the glass harbour", "silent weaving"],
    ),
];

/// Word pairs whose swap turns a question about one thing into one about another.
const ANTONYMS: &[(&str, &str)] = &[
    ("first", "last"),
    ("largest", "smallest"),
    ("biggest", "smallest"),
    ("most", "least"),
    ("before", "after"),
    ("north", "south"),
    ("northern", "southern"),
    ("east", "west"),
    ("eastern", "western"),
    ("highest", "lowest"),
    ("earliest", "latest"),
    ("more", "less"),
    ("best", "worst"),
    ("early", "late"),
    ("large", "small"),
    ("long", "short"),
    ("longest", "shortest"),
    ("high", "low"),
    ("top", "bottom"),
    ("major", "minor"),
    ("maximum", "minimum"),
    ("increase", "decrease"),
    ("increased", "decreased"),
    ("won", "lost"),
    ("win", "lose"),
    ("begin", "end"),
    ("began", "ended"),
    ("start", "finish"),
    ("upper", "lower"),
    ("modern", "ancient"),
    ("male", "female"),
    ("internal", "external"),
    ("positive", "negative"),
    ("private", "public"),
    ("above", "below"),
    ("inside", "outside"),
    ("old", "new"),
    ("older", "newer"),
    ("oldest", "newest"),
    ("rich", "poor"),
    ("strong", "weak"),
    ("open", "closed"),
    ("major", "minor"),
];

fn antonym(word: &str) -> Option<&'static str> {
    let lower = word.to_lowercase();
    ANTONYMS.iter().find_map(|&(a, b)| match lower.as_str() {
        w if w == a => Some(b),
        w if w == b => Some(a),
        _ => None,
    })
}

const QUESTION_WORDS: [&str; 9] = [
    "what", "which", "who", "whom", "whose", "when", "where", "why", "how",
];
const AUXILIARIES: [&str; 3] = ["do", "does", "did"];

/// Splits a word into (leading punctuation, core, trailing punctuation).
fn split_punct(word: &str) -> (&str, &str, &str) {
    let start = word
        .find(|c: char| c.is_alphanumeric())
        .unwrap_or(word.len());
    let end = word
        .rfind(|c: char| c.is_alphanumeric())
        .map_or(start, |i| {
            i + word[i..].chars().next().map_or(1, char::len_utf8)
        });
    (
        &word[..start],
        &word[start..end.max(start)],
        &word[end.max(start)..],
    )
}

/// The question with its key terms changed; `None` when no rule applies.
fn mutate(question: &str, title: &str, pools: &Pools, rng: &mut Rng) -> Option<Vec<String>> {
    let words = words_of(question);
    let mut out = Vec::with_capacity(words.len());
    let mut changed = false;
    let mut i = 0;
    while i < words.len() {
        let (lead, core, trail) = split_punct(words[i]);
        let capitalized = core.chars().next().is_some_and(char::is_uppercase);
        let is_question_word = QUESTION_WORDS.contains(&core.to_lowercase().as_str());
        if i > 0 && capitalized && !is_question_word && core != "I" {
            // A run of capitalised words is one name: replace it whole.
            let mut j = i + 1;
            let mut last_trail = trail;
            while j < words.len() && trail.is_empty() {
                let (_, next, next_trail) = split_punct(words[j]);
                if !next.chars().next().is_some_and(char::is_uppercase) {
                    break;
                }
                last_trail = next_trail;
                j += 1;
                if !next_trail.is_empty() {
                    break;
                }
            }
            let run: String = words[i..j].join(" ");
            let name = pools.draw(AnswerKind::Name, title, &[normalize_answer(&run)], rng);
            out.push(format!("{lead}{name}{last_trail}"));
            changed = true;
            i = j;
            continue;
        }
        if let Ok(n) = core.parse::<u64>() {
            // Years move by a few years, other numbers by a few units: still plausible.
            let shifted = n + 1 + rng.below(9) as u64;
            out.push(format!("{lead}{shifted}{trail}"));
            changed = true;
        } else if let Some(opposite) = antonym(core) {
            out.push(format!("{lead}{opposite}{trail}"));
            changed = true;
        } else {
            out.push(words[i].to_string());
        }
        i += 1;
    }
    changed.then_some(out)
}

/// The mutated question turned into a statement with `fake` in the answer slot: the question
/// phrase ("what city", "who", "how many") replaced by the fake answer, a following do/does/did
/// dropped, "when"/"where" answered with "in ...".
fn statement(words: &[String], fake: &str) -> String {
    let lower: Vec<String> = words
        .iter()
        .map(|w| split_punct(w).1.to_lowercase())
        .collect();
    let Some(at) = lower
        .iter()
        .position(|w| QUESTION_WORDS.contains(&w.as_str()))
    else {
        return finish(&format!("{fake} {}", words.join(" ")));
    };
    let next = lower.get(at + 1).map(String::as_str);
    let (filler, mut end) = match lower[at].as_str() {
        "when" | "where" => (format!("in {fake}"), at + 1),
        "how" if matches!(next, Some("many" | "much")) => (fake.to_string(), at + 2),
        "how" if next.is_some() && !AUXILIARIES.contains(&next.unwrap_or("")) => {
            (fake.to_string(), at + 2)
        }
        "what" | "which" | "whose" if next.is_some_and(|n| !is_verbish(n)) => {
            (fake.to_string(), at + 2)
        }
        _ => (fake.to_string(), at + 1),
    };
    if lower
        .get(end)
        .is_some_and(|w| AUXILIARIES.contains(&w.as_str()))
    {
        end += 1;
    }
    let mut parts: Vec<&str> = words[..at].iter().map(String::as_str).collect();
    parts.push(&filler);
    parts.extend(words[end.min(words.len())..].iter().map(String::as_str));
    finish(&parts.join(" "))
}

/// Words that follow "what"/"which" as a verb rather than the head noun of the question phrase.
fn is_verbish(word: &str) -> bool {
    matches!(
        word,
        "is" | "was"
            | "are"
            | "were"
            | "do"
            | "does"
            | "did"
            | "has"
            | "have"
            | "had"
            | "can"
            | "could"
            | "will"
            | "would"
            | "should"
            | "may"
            | "might"
            | "must"
    )
}

/// Capitalises the first letter and ends the sentence with one period.
fn finish(text: &str) -> String {
    let trimmed = text.trim().trim_end_matches(['?', '.', '!', ' ']);
    let mut chars = trimmed.chars();
    let first: String = chars
        .next()
        .map(|c| c.to_uppercase().collect())
        .unwrap_or_default();
    format!("{first}{}.", chars.as_str())
}

/// The random generator of one question: the seed mixed with the question id (FNV-1a).
fn question_rng(seed: u64, id: &str, salt: u64) -> Rng {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for b in id.bytes() {
        hash = (hash ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    Rng::new(seed ^ hash ^ salt.wrapping_mul(0x9e37_79b9_7f4a_7c15))
}

/// An AddSent-style distractor for `question`, or `None` when it has no answer or the rules
/// cannot mutate it.
pub fn add_sent(question: &Question, pools: &Pools, seed: u64) -> Option<String> {
    let gold = question.answers.first()?;
    let mut rng = question_rng(seed, &question.id, 1);
    let avoid: Vec<String> = question
        .answers
        .iter()
        .map(|a| normalize_answer(a))
        .collect();
    let fake = pools.draw(answer_kind(gold), &question.title, &avoid, &mut rng);
    let mutated = mutate(&question.question, &question.title, pools, &mut rng)?;
    Some(statement(&mutated, &fake))
}

/// Common English words that AddAny-style distractors are drawn from beside the question's words.
const COMMON_WORDS: &[&str] = &[
    "the", "of", "and", "to", "in", "is", "was", "for", "that", "with", "as", "on", "by", "at",
    "from", "his", "her", "it", "an", "were", "are", "which", "this", "be", "or", "has", "had",
    "first", "one", "their", "its", "new", "after", "who", "they", "two", "been", "more", "also",
    "other", "city", "year", "time", "people", "state", "world", "during", "most", "many", "some",
];

/// `candidates` AddAny-style distractors for `question`: ten words each, drawn from the
/// question's words and common words, with no answer in them.
pub fn add_any(question: &Question, candidates: usize, seed: u64) -> Vec<String> {
    let own: Vec<String> = words_of(&question.question)
        .into_iter()
        .map(|w| split_punct(w).1.to_string())
        .filter(|w| !w.is_empty())
        .collect();
    let mut rng = question_rng(seed, &question.id, 2);
    (0..candidates)
        .map(|_| {
            let words: Vec<&str> = (0..10)
                .map(|_| match rng.below(2) == 0 && !own.is_empty() {
                    true => own[rng.below(own.len())].as_str(),
                    false => COMMON_WORDS[rng.below(COMMON_WORDS.len())],
                })
                .collect();
            finish(&words.join(" "))
        })
        .collect()
}

/// `context` with `sentence` inserted at `position`, and the character range the sentence
/// occupies in the result (to tell whether an answer came from it).
pub fn insert(
    context: &str,
    sentence: &str,
    position: Position,
    question_id: &str,
    seed: u64,
) -> (String, std::ops::Range<usize>) {
    let at = match position {
        Position::Start => 0,
        Position::End => context.len(),
        Position::Random => {
            let mut rng = question_rng(seed, question_id, 3);
            // Before the first sentence, between two, or after the last.
            let choices: Vec<usize> = std::iter::once(0)
                .chain(crate::breakdown::sentence_ends(context))
                .chain(std::iter::once(context.len()))
                .collect();
            choices[rng.below(choices.len())]
        }
    };
    let (before, after) = context.split_at(at);
    let lead = if before.is_empty() || before.ends_with(char::is_whitespace) {
        ""
    } else {
        " "
    };
    let tail = if after.is_empty() || after.starts_with(char::is_whitespace) {
        ""
    } else {
        " "
    };
    let text = format!("{before}{lead}{sentence}{tail}{after}");
    let start = before.chars().count() + lead.chars().count();
    (text, start..start + sentence.chars().count())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn q(id: &str, title: &str, question: &str, answer: &str) -> Question {
        Question {
            id: id.into(),
            question: question.into(),
            answers: vec![answer.into()],
            context: Arc::from("Some context. Another sentence."),
            title: Arc::from(title),
        }
    }

    fn pools() -> Pools {
        Pools::new(&[
            q("a", "Chad", "Who led Chad?", "Idriss Deby"),
            q("b", "Chad", "When?", "1990"),
            q("c", "Mars", "Who found it?", "Giovanni Schiaparelli"),
            q("d", "Mars", "When was it seen?", "1877"),
            q("e", "Mars", "How many moons?", "two moons 2"),
        ])
    }

    #[test]
    fn answers_are_sorted_by_their_surface() {
        assert_eq!(answer_kind("1877"), AnswerKind::Year);
        assert_eq!(answer_kind("4 July 1776"), AnswerKind::Date);
        assert_eq!(answer_kind("$3.5 million"), AnswerKind::Number);
        assert_eq!(answer_kind("Nikola Tesla"), AnswerKind::Name);
        assert_eq!(answer_kind("red wine"), AnswerKind::Other);
    }

    #[test]
    fn addsent_mutates_the_question_and_fills_the_answer_slot_with_a_fake_of_the_same_kind() {
        let pools = pools();
        let question = q(
            "x",
            "Poland",
            "Who was the first president of Poland?",
            "Gabriel Narutowicz",
        );
        let sentence = add_sent(&question, &pools, 0).unwrap();
        // The fake answer is a name from another article, the name in the question too, and
        // "first" became "last".
        assert!(
            sentence.starts_with("Idriss Deby was the last president of ")
                || sentence.starts_with("Giovanni Schiaparelli was the last president of "),
            "{sentence}"
        );
        assert!(
            !sentence.contains("Poland") && sentence.ends_with('.'),
            "{sentence}"
        );
        // The same seed gives the same sentence; a year gets a year.
        assert_eq!(add_sent(&question, &pools, 0).unwrap(), sentence);
        let when = q(
            "y",
            "Chad",
            "When did Chad become independent in 1960?",
            "1960",
        );
        let sentence = add_sent(&when, &pools, 0).unwrap();
        assert!(sentence.starts_with("In 1877 "), "{sentence}");
        assert!(
            !sentence.contains(" did ") && !sentence.contains("1960"),
            "{sentence}"
        );
        // A dataset of one article: the fake answer and the new name are made up.
        let alone = Pools::new(&[q("a", "Chad", "Who led Chad?", "Idriss Deby")]);
        let same_article = q(
            "x",
            "Chad",
            "Who was the first president of Poland?",
            "Narutowicz",
        );
        let sentence = add_sent(&same_article, &alone, 0).unwrap();
        let made_up = ["Jeff Dean", "Atlantis", "Gotham City", "Acme Corporation"];
        assert!(
            made_up.iter().any(|m| sentence.starts_with(m)),
            "{sentence}"
        );
        // Nothing to mutate: no distractor rather than a second right answer.
        let plain = q("z", "Chad", "what is the colour of the sky", "Idriss Deby");
        assert_eq!(add_sent(&plain, &pools, 0), None);
    }

    #[test]
    fn statements_replace_the_question_phrase() {
        let words = |s: &str| s.split(' ').map(String::from).collect::<Vec<_>>();
        assert_eq!(
            statement(&words("What city did Edison move to in 1881?"), "Berlin"),
            "Berlin Edison move to in 1881."
        );
        assert_eq!(
            statement(&words("How many people live in Chad?"), "300"),
            "300 people live in Chad."
        );
        assert_eq!(
            statement(&words("In which year was it built?"), "1900"),
            "In 1900 was it built."
        );
        assert_eq!(
            statement(&words("What is the capital?"), "Rome"),
            "Rome is the capital."
        );
    }

    #[test]
    fn addany_draws_ten_words_and_insertions_report_where_the_sentence_is() {
        let question = q(
            "x",
            "Poland",
            "Who was the first president of Poland?",
            "Gabriel Narutowicz",
        );
        let candidates = add_any(&question, 3, 0);
        assert_eq!(candidates.len(), 3);
        assert!(candidates
            .iter()
            .all(|c| c.split(' ').count() == 10 && c.ends_with('.')));
        assert_ne!(candidates[0], candidates[1]);

        let context = "Première phrase. Second one.";
        for position in [Position::Start, Position::End, Position::Random] {
            let (text, range) = insert(context, "Fake fact.", position, "x", 0);
            let inserted: String = text.chars().skip(range.start).take(range.len()).collect();
            assert_eq!(inserted, "Fake fact.", "{position:?}: {text}");
            assert_eq!(
                text.replacen("Fake fact.", "", 1)
                    .split_whitespace()
                    .collect::<Vec<_>>(),
                context.split_whitespace().collect::<Vec<_>>()
            );
        }
        assert_eq!(
            insert(context, "Fake fact.", Position::End, "x", 0).0,
            "Première phrase. Second one. Fake fact."
        );
    }
}
