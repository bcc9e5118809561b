//! What kind of multi-hop question this is, by rules on its wording.
//!
//! - **yes/no**: it opens with an auxiliary verb ("Are X and Y both ...?", "Were X and Y of
//!   the same nationality?");
//! - **comparison**: it offers two options, "..., X or Y?", and usually says what decides
//!   between them ("first", "older", "more", ...);
//! - **bridge**: anything else (an entity found on the way leads to the answer).

use lector_eval::equivalence::number_word;
use serde::Serialize;

/// The three multi-hop question types of the QA literature (HotpotQA's, with yes/no apart).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum QuestionKind {
    Bridge,
    Comparison,
    YesNo,
}

/// What decides a comparison: which value wins.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Order {
    /// The earlier date ("first", "older", "earlier").
    Earliest,
    /// The later date ("last", "younger", "more recently").
    Latest,
    /// The larger number ("more", "larger", "taller").
    Most,
    /// The smaller number ("fewer", "smaller", "shorter").
    Least,
}

impl Order {
    /// Comparing dates rather than quantities.
    pub fn is_temporal(self) -> bool {
        matches!(self, Order::Earliest | Order::Latest)
    }
}

/// The rules' reading of a question.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Analysis {
    pub kind: QuestionKind,
    /// The two options of "..., X or Y?".
    pub options: Option<[String; 2]>,
    /// What decides a comparison, when the wording says.
    pub order: Option<Order>,
    /// The attribute a yes/no question asks to be the same ("same nationality" -> "nationality").
    pub same: Option<String>,
}

const AUXILIARIES: &[&str] = &[
    "is", "are", "was", "were", "do", "does", "did", "has", "have", "had", "can", "could", "will",
    "would", "should",
];

/// Phrases that decide a comparison, longest first so "more recently" is not read as "more".
const ORDER_PHRASES: &[(&str, Order)] = &[
    ("more recently", Order::Latest),
    ("more recent", Order::Latest),
    ("most recently", Order::Latest),
    ("most recent", Order::Latest),
    ("first", Order::Earliest),
    ("earlier", Order::Earliest),
    ("earliest", Order::Earliest),
    ("older", Order::Earliest),
    ("oldest", Order::Earliest),
    ("before", Order::Earliest),
    ("sooner", Order::Earliest),
    ("last", Order::Latest),
    ("later", Order::Latest),
    ("latest", Order::Latest),
    ("younger", Order::Latest),
    ("youngest", Order::Latest),
    ("newer", Order::Latest),
    ("newest", Order::Latest),
    ("after", Order::Latest),
    ("more", Order::Most),
    ("most", Order::Most),
    ("larger", Order::Most),
    ("largest", Order::Most),
    ("bigger", Order::Most),
    ("biggest", Order::Most),
    ("higher", Order::Most),
    ("highest", Order::Most),
    ("taller", Order::Most),
    ("tallest", Order::Most),
    ("longer", Order::Most),
    ("longest", Order::Most),
    ("greater", Order::Most),
    ("greatest", Order::Most),
    ("heavier", Order::Most),
    ("fewer", Order::Least),
    ("fewest", Order::Least),
    ("less", Order::Least),
    ("least", Order::Least),
    ("smaller", Order::Least),
    ("smallest", Order::Least),
    ("lower", Order::Least),
    ("lowest", Order::Least),
    ("shorter", Order::Least),
    ("shortest", Order::Least),
];

/// Reads a question's type, options and deciding order.
pub fn analyse(question: &str) -> Analysis {
    let lower = question.trim().to_lowercase();
    let words: Vec<&str> = lower
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .collect();
    let auxiliary_first = words.first().is_some_and(|w| AUXILIARIES.contains(w));
    let options = match auxiliary_first {
        true => options_after_auxiliary(question),
        false => options(question),
    };
    let kind = match (auxiliary_first, &options) {
        (_, Some(_)) => QuestionKind::Comparison,
        (true, None) => QuestionKind::YesNo,
        (false, None) => QuestionKind::Bridge,
    };
    Analysis {
        kind,
        order: order(&words),
        same: same_attribute(&words),
        options,
    }
}

/// "..., X or Y?" -> [X, Y]: the text after the last comma (or colon) before the last " or ".
fn options(question: &str) -> Option<[String; 2]> {
    let body = question.trim().trim_end_matches(['?', '.', ' ']);
    let or = body.rfind(" or ")?;
    let head = &body[..or];
    let start = head.rfind([',', ':']).map(|i| i + 1)?;
    let clean = |s: &str| {
        s.trim()
            .trim_start_matches("the ")
            .trim_matches(['"', '\''])
            .trim()
            .to_string()
    };
    let (a, b) = (clean(&head[start..]), clean(&body[or + 4..]));
    (!a.is_empty() && !b.is_empty()).then_some([a, b])
}

/// "Was X or Y born first?" -> [X, Y]: a choice asked with an auxiliary. X is what lies between
/// the auxiliary and " or ", Y the name after it; both lose leading lower-case words ("the
/// band"), and Y ends where the name's capitalised words (with "of", "the", "and", "de" and
/// commas between them) end.
fn options_after_auxiliary(question: &str) -> Option<[String; 2]> {
    let body = question.trim().trim_end_matches(['?', '.', ' ']);
    let (head, tail) = body.split_once(" or ")?;
    let a = name_start(head.split_once(' ')?.1);
    let mut b_words = Vec::new();
    for word in name_start(tail).split(' ') {
        let bare = word.trim_end_matches(',');
        let capitalised = bare
            .chars()
            .next()
            .is_some_and(|c| c.is_uppercase() || c.is_ascii_digit());
        let joins = matches!(bare, "of" | "the" | "and" | "de" | "for");
        if !(capitalised || joins) {
            break;
        }
        b_words.push(word);
    }
    while b_words
        .last()
        .is_some_and(|w| matches!(*w, "of" | "the" | "and" | "de" | "for"))
    {
        b_words.pop();
    }
    let b = b_words.join(" ").trim_end_matches(',').to_string();
    let a = a.trim().to_string();
    (!a.is_empty() && !b.is_empty() && a.chars().next().is_some_and(char::is_uppercase))
        .then_some([a, b])
}

/// `text` from its first word that starts with a capital letter or a digit.
fn name_start(text: &str) -> &str {
    let at = text
        .char_indices()
        .find(|&(i, c)| {
            (c.is_uppercase() || c.is_ascii_digit()) && (i == 0 || text[..i].ends_with(' '))
        })
        .map_or(text.len(), |(i, _)| i);
    &text[at..]
}

fn order(words: &[&str]) -> Option<Order> {
    ORDER_PHRASES.iter().find_map(|&(phrase, order)| {
        let phrase: Vec<&str> = phrase.split(' ').collect();
        words
            .windows(phrase.len())
            .any(|w| w == phrase.as_slice())
            .then_some(order)
    })
}

/// The word after "same" that is not an article or "type of".
fn same_attribute(words: &[&str]) -> Option<String> {
    let at = words.iter().position(|w| *w == "same")?;
    words[at + 1..]
        .iter()
        .find(|w| !matches!(**w, "the" | "a" | "kind" | "type" | "of"))
        .map(|w| w.to_string())
}

/// Nouns for people: their phrase is asked with "Who", others with "What".
const PERSON_NOUNS: &[&str] = &[
    "actor",
    "actress",
    "author",
    "brother",
    "coach",
    "composer",
    "creator",
    "daughter",
    "designer",
    "director",
    "father",
    "founder",
    "husband",
    "leader",
    "manager",
    "mother",
    "owner",
    "player",
    "president",
    "producer",
    "singer",
    "sister",
    "son",
    "star",
    "wife",
    "writer",
];

/// A bridge question split at its first "the N of E" phrase (one to three lower-case words, then
/// "of" and a capitalised name): "Where was the director of Inception born?" -> ["Who is the
/// director of Inception?", "Where was #1 born?"]. `None` when there is no such phrase, or
/// nothing would be left to ask.
pub fn bridge_sub_questions(question: &str) -> Option<[String; 2]> {
    let body = question.trim().trim_end_matches(['?', ' ']);
    let words: Vec<&str> = body.split(' ').collect();
    for i in 0..words.len() {
        if !words[i].eq_ignore_ascii_case("the") {
            continue;
        }
        for n in 1..=3 {
            let of = i + 1 + n;
            if of + 1 >= words.len() || !words[i + 1..of].iter().all(|w| is_lower_word(w)) {
                break;
            }
            if words[of] != "of" {
                continue;
            }
            let end = name_end(&words, of + 1);
            if end == of + 1 {
                continue;
            }
            let phrase = words[i..end]
                .join(" ")
                .trim_end_matches([',', '.'])
                .to_string();
            let rest = body.replacen(&phrase, "#1", 1);
            if words_besides_placeholder(&rest) < 3 {
                return None;
            }
            let wh = match PERSON_NOUNS.contains(&words[of - 1]) {
                true => "Who",
                false => "What",
            };
            return Some([format!("{wh} is {phrase}?"), format!("{rest}?")]);
        }
    }
    None
}

fn is_lower_word(word: &str) -> bool {
    !word.is_empty() && word.chars().all(|c| c.is_lowercase() || c == '-')
}

/// One past the last word of the capitalised name starting at `start` (connectors such as
/// "of" and "the" only inside it; a word ending in a comma or full stop ends it).
fn name_end(words: &[&str], start: usize) -> usize {
    let mut end = start;
    let mut i = start;
    while i < words.len() {
        let bare = words[i].trim_matches(['"', '\'', ',', '.']);
        let capitalised = bare
            .chars()
            .next()
            .is_some_and(|c| c.is_uppercase() || c.is_ascii_digit());
        let connector = matches!(bare, "of" | "the" | "and" | "de" | "for");
        if !(capitalised || connector && i > start) {
            break;
        }
        i += 1;
        if capitalised {
            end = i;
        }
        if words[i - 1].ends_with([',', '.']) {
            break;
        }
    }
    end
}

/// Words of a sub-question other than the `#1` placeholder (a question word and a verb alone
/// ask nothing new).
fn words_besides_placeholder(rest: &str) -> usize {
    rest.split(' ')
        .filter(|w| !w.contains("#1") && !w.is_empty())
        .count()
}

/// The years and numbers of a text, in order, as (value, byte range). A year is four digits
/// from 1000 to 2099; other numbers may carry thousands separators and decimals, or be a
/// number word up to twenty.
pub fn numbers(text: &str) -> Vec<(f64, std::ops::Range<usize>)> {
    let mut out = Vec::new();
    let mut start = None;
    for (i, c) in text.char_indices().chain([(text.len(), ' ')]) {
        let part_of_word = c.is_alphanumeric()
            || ((c == ',' || c == '.')
                && start.is_some()
                && text[i + 1..].starts_with(|d: char| d.is_ascii_digit()));
        match (part_of_word, start) {
            (true, None) => start = Some(i),
            (false, Some(s)) => {
                let token = &text[s..i];
                let digits = token.replace(',', "");
                if let Ok(value) = digits.parse::<f64>() {
                    out.push((value, s..i));
                } else if let Some(n) = number_word(&token.to_lowercase()).filter(|n| *n <= 20.0) {
                    out.push((n, s..i));
                }
                start = None;
            }
            _ => {}
        }
    }
    out
}

/// The years (1000..=2099) of a text, in order, as (year, byte range).
pub fn years(text: &str) -> Vec<(f64, std::ops::Range<usize>)> {
    numbers(text)
        .into_iter()
        .filter(|(v, r)| r.len() == 4 && (1000.0..=2099.0).contains(v) && v.fract() == 0.0)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comparisons_give_their_options_and_order() {
        let a = analyse("Which magazine was started first, Arthur's Magazine or First for Women?");
        assert_eq!(a.kind, QuestionKind::Comparison);
        assert_eq!(
            a.options,
            Some([
                "Arthur's Magazine".to_string(),
                "First for Women".to_string()
            ])
        );
        assert_eq!(a.order, Some(Order::Earliest));
        let b = analyse("Who has lived more recently: Ian Curtis or Bob Dylan?");
        assert_eq!(b.order, Some(Order::Latest));
        assert_eq!(b.options.unwrap()[0], "Ian Curtis");
        assert_eq!(
            analyse("Which band has more members, Muse or the Kooks?").options,
            Some(["Muse".to_string(), "Kooks".to_string()])
        );
    }

    #[test]
    fn yes_no_and_bridge_questions_are_told_apart() {
        let a = analyse("Were Scott Derrickson and Ed Wood of the same nationality?");
        assert_eq!(a.kind, QuestionKind::YesNo);
        assert_eq!(a.same.as_deref(), Some("nationality"));
        let b = analyse("Where was the director of Inception born?");
        assert_eq!(b.kind, QuestionKind::Bridge);
        assert_eq!(b.options, None);
        let c = analyse("Was Pennsylvania State University or University of California, San Francisco founded first?");
        assert_eq!(c.kind, QuestionKind::Comparison);
        assert_eq!(
            c.options,
            Some([
                "Pennsylvania State University".to_string(),
                "University of California, San Francisco".to_string()
            ])
        );
        assert_eq!(
            analyse("Does the band God Lives Underwater or the band The Dear Hunter come from a larger state?").options,
            Some(["God Lives Underwater".to_string(), "The Dear Hunter".to_string()])
        );
        assert_eq!(
            analyse("Are both Muse and Blur English bands?").kind,
            QuestionKind::YesNo
        );
        // "or" without a comma names no options.
        assert_eq!(
            analyse("What is the sum of one or two things").kind,
            QuestionKind::Bridge
        );
    }

    #[test]
    fn a_the_n_of_e_phrase_splits_a_bridge_question() {
        assert_eq!(
            bridge_sub_questions("Where was the director of Inception born?"),
            Some([
                "Who is the director of Inception?".to_string(),
                "Where was #1 born?".to_string()
            ])
        );
        assert_eq!(
            bridge_sub_questions("What year was the capital city of New South Wales founded?"),
            Some([
                "What is the capital city of New South Wales?".to_string(),
                "What year was #1 founded?".to_string()
            ])
        );
        assert_eq!(
            bridge_sub_questions("Who is the director of Inception?"),
            None
        );
        assert_eq!(bridge_sub_questions("Where was the film shot?"), None);
    }

    #[test]
    fn numbers_and_years_are_found_with_their_place() {
        let text = "Founded in 1839, it sold 1,200.5 copies to twelve readers (born 3 May 1950).";
        let values: Vec<f64> = numbers(text).into_iter().map(|(v, _)| v).collect();
        assert_eq!(values, [1839.0, 1200.5, 12.0, 3.0, 1950.0]);
        let found = years(text);
        assert_eq!(found.len(), 2);
        assert_eq!(&text[found[1].1.clone()], "1950");
    }
}
