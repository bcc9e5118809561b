//! Answer equivalence for free-form answers: rules that say "RBI" answers "Reserve Bank of
//! India", "twenty-one" answers "21" and "Feb. 7, 2016" answers "7 February 2016", where SQuAD's
//! exact match says no.
//!
//! Both sides are put in a canonical form beyond SQuAD's normalisation: numbers written out
//! become digits ("three million" -> 3000000, "1,000" -> 1000), ordinals one form ("first" ->
//! 1st), dates ISO (2016-02-07, or 2016-02 without a day), units and currencies one symbol
//! ("$5" and "5 dollars" -> 5 usd, "%" and "percent" -> percent, "kilometres" -> km), and
//! articles and punctuation dropped. Then:
//! - **equivalent**: SQuAD's exact match, or the canonical answer equals a canonical gold answer
//!   (or alias), or one side
//!   is an acronym of the other (the initials of its content words: "RBI", "Reserve Bank of
//!   India"), or an acronym the passage or question defines ("... Nuclear Regulatory Commission
//!   (NRC) ...");
//! - **key fact**: a canonical gold answer occurs in the canonical answer as whole tokens: a
//!   sentence that contains the right fact. Its length is reported beside it
//!   ([`Verdict::answer_tokens`]), so that a long answer listing many candidates cannot pass for
//!   a precise one unnoticed.

use crate::normalize::{lowercase, normalize_answer};
use serde::Serialize;

/// The rule-based verdict on one answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Verdict {
    /// The answer means a gold answer, by the rules above.
    pub equivalent: bool,
    /// A gold answer occurs in the answer as whole canonical tokens.
    pub key_fact: bool,
    /// Canonical tokens of the answer.
    pub answer_tokens: usize,
}

/// The verdict on `answer` against `golds` (answers and aliases); `texts` (the passage, the
/// question) may define acronyms.
pub fn judge(answer: &str, golds: &[String], texts: &[&str]) -> Verdict {
    let canonical_answer = canonical(answer);
    let mut verdict = Verdict {
        equivalent: false,
        key_fact: false,
        answer_tokens: canonical_answer.len(),
    };
    if canonical_answer.is_empty() {
        return verdict;
    }
    let defined = defined_acronyms(texts);
    for gold in golds {
        let canonical_gold = canonical(gold);
        if canonical_gold.is_empty() {
            continue;
        }
        // Exact match under SQuAD's normalisation counts too: equivalence only adds to EM.
        let same = canonical_gold == canonical_answer
            || normalize_answer(answer) == normalize_answer(gold)
            || acronym_of(answer, gold)
            || acronym_of(gold, answer)
            || defined.iter().any(|(short, long)| {
                (same_text(answer, short) && same_text(gold, long))
                    || (same_text(gold, short) && same_text(answer, long))
            });
        verdict.equivalent |= same;
        verdict.key_fact |= same || contains(&canonical_answer, &canonical_gold);
    }
    verdict
}

/// One answer to judge: JSON lines `{"answer", "golds": [..], "question"?, "context"?,
/// "label"?}` (`label`: a person's verdict, true when the answer means a gold answer).
#[derive(Debug, Clone, serde::Deserialize)]
pub struct Item {
    #[serde(default)]
    pub id: Option<String>,
    pub answer: String,
    pub golds: Vec<String>,
    #[serde(default)]
    pub question: String,
    #[serde(default)]
    pub context: String,
    #[serde(default)]
    pub label: Option<bool>,
}

impl Item {
    /// The rule-based verdict on this item's answer.
    pub fn judge(&self) -> Verdict {
        judge(&self.answer, &self.golds, &[&self.question, &self.context])
    }

    /// SQuAD's exact match of the answer against any gold answer.
    pub fn exact_match(&self) -> bool {
        let answer = normalize_answer(&self.answer);
        self.golds.iter().any(|g| normalize_answer(g) == answer)
    }
}

/// How one automatic verdict agrees with people's labels.
#[derive(Debug, Clone, Serialize)]
pub struct Agreement {
    /// Which verdict: `exact_match`, `equivalent`, `key_fact` (or a model's, such as
    /// `judge_equivalent`).
    pub verdict: &'static str,
    /// Items it calls equivalent.
    pub positives: usize,
    /// Of those, the share people call equivalent (`None` when it says yes to none).
    pub precision: Option<f64>,
    /// Of the items people call equivalent, the share it calls equivalent (`None` when people
    /// call none equivalent).
    pub recall: Option<f64>,
    /// Share of items where it and people agree.
    pub accuracy: f64,
    /// Cohen's kappa between it and people (`None` when either side is constant).
    pub kappa: Option<f64>,
}

/// An item's verdicts: SQuAD's exact match and F1 beside the rule-based ones.
#[derive(Debug, Clone, Serialize)]
pub struct Judged {
    pub exact_match: bool,
    /// SQuAD's token F1 against the best gold answer (0 to 1).
    pub f1: f64,
    #[serde(flatten)]
    pub verdict: Verdict,
}

/// Every item judged, in order.
pub fn judge_all(items: &[Item]) -> Vec<Judged> {
    items
        .iter()
        .map(|item| Judged {
            exact_match: item.exact_match(),
            f1: (item.golds.iter())
                .map(|gold| crate::squad::answer_f1(&item.answer, gold))
                .fold(0.0, f64::max),
            verdict: item.judge(),
        })
        .collect()
}

/// Each automatic verdict (exact match, rule-based equivalence, key fact) against the labels of
/// the labelled items; `judged` is [`judge_all`] of `items`.
pub fn agreement(items: &[Item], judged: &[Judged]) -> Vec<Agreement> {
    let labelled: Vec<(&Judged, bool)> = items
        .iter()
        .zip(judged)
        .filter_map(|(i, j)| i.label.map(|l| (j, l)))
        .collect();
    let said = |f: fn(&Judged) -> bool| labelled.iter().map(|(j, _)| f(j)).collect::<Vec<bool>>();
    let rules: [(&'static str, Vec<bool>); 3] = [
        ("exact_match", said(|j| j.exact_match)),
        ("equivalent", said(|j| j.verdict.equivalent)),
        ("key_fact", said(|j| j.verdict.key_fact)),
    ];
    let labels: Vec<bool> = labelled.iter().map(|(_, l)| *l).collect();
    rules
        .into_iter()
        .map(|(verdict, said)| agreement_of(verdict, &said, &labels))
        .collect()
}

/// How the verdicts `said` (one per item) agree with `labels` (the same items), the verdict
/// being called `verdict`: precision and recall of "equivalent", accuracy, kappa.
pub fn agreement_of(verdict: &'static str, said: &[bool], labels: &[bool]) -> Agreement {
    let pairs: Vec<(bool, bool)> = said.iter().copied().zip(labels.iter().copied()).collect();
    let count = |f: &dyn Fn(&(bool, bool)) -> bool| pairs.iter().filter(|p| f(p)).count();
    let positives = count(&|(s, _)| *s);
    let true_positives = count(&|(s, l)| *s && *l);
    let labelled_yes = count(&|(_, l)| *l);
    Agreement {
        verdict,
        positives,
        precision: (positives > 0).then(|| true_positives as f64 / positives as f64),
        recall: (labelled_yes > 0).then(|| true_positives as f64 / labelled_yes as f64),
        accuracy: count(&|(s, l)| s == l) as f64 / pairs.len().max(1) as f64,
        kappa: crate::stats::agreement::cohen_kappa(&pairs),
    }
}

fn same_text(a: &str, b: &str) -> bool {
    canonical(a) == canonical(b)
}

fn contains(haystack: &[String], needle: &[String]) -> bool {
    needle.len() <= haystack.len() && haystack.windows(needle.len()).any(|w| w == needle)
}

/// Words skipped when an acronym is formed ("Bank *of* India").
const ACRONYM_SKIPS: [&str; 6] = ["of", "the", "and", "for", "&", "in"];

/// Whether `short` is one capitalised token made of the initials of `long`'s words.
fn acronym_of(short: &str, long: &str) -> bool {
    let short: String = short.trim().chars().filter(|c| *c != '.').collect();
    if short.chars().count() < 2 || !short.chars().all(|c| c.is_uppercase()) {
        return false;
    }
    let initials: String = long
        .split(|c: char| c.is_whitespace() || c == '-')
        .filter(|w| !w.is_empty() && !ACRONYM_SKIPS.contains(&w.to_lowercase().as_str()))
        .filter_map(|w| w.chars().find(|c| c.is_alphanumeric()))
        .flat_map(char::to_uppercase)
        .collect();
    initials == short
}

/// Acronyms defined as "Long Name (LN)" in `texts`: (acronym, long form).
fn defined_acronyms(texts: &[&str]) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for text in texts {
        let mut rest = *text;
        while let Some(open) = rest.find('(') {
            let Some(close) = rest[open..].find(')') else {
                break;
            };
            let inner = rest[open + 1..open + close].trim();
            let words: Vec<&str> = rest[..open].split_whitespace().collect();
            let letters = inner.chars().filter(|c| c.is_uppercase()).count();
            if letters >= 2 && letters == inner.chars().filter(|c| c.is_alphanumeric()).count() {
                // The long form: as many preceding words as the acronym has letters, plus
                // skipped small words.
                let mut taken = Vec::new();
                let mut needed = letters;
                for w in words.iter().rev() {
                    if needed == 0 {
                        break;
                    }
                    if !ACRONYM_SKIPS.contains(&w.to_lowercase().as_str()) {
                        needed -= 1;
                    }
                    taken.push(*w);
                }
                taken.reverse();
                let long = taken.join(" ");
                if acronym_of(inner, &long) {
                    out.push((inner.to_string(), long));
                }
            }
            rest = &rest[open + close + 1..];
        }
    }
    out
}

const MONTHS: [&str; 12] = [
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
];

/// The month (1-12) a lowercase `word` names: in full, or (`abbreviated`) by its first three
/// or four letters ("feb", "sept").
pub fn month_of(word: &str, abbreviated: bool) -> Option<usize> {
    MONTHS
        .iter()
        .position(|m| {
            *m == word || abbreviated && (word.len() >= 3 && m.starts_with(word) && word.len() <= 4)
        })
        .map(|i| i + 1)
}

/// A month in a date, as two digits: "february", "feb.", "sept"; "mar" only with its period
/// (without, it is a verb).
fn month(word: &str) -> Option<String> {
    let bare = word.trim_end_matches('.');
    let abbreviated = bare != "mar" || word.ends_with('.');
    month_of(bare, abbreviated).map(|m| format!("{m:02}"))
}

const UNITS: [(&str, &str); 24] = [
    ("$", "usd"),
    ("us$", "usd"),
    ("dollar", "usd"),
    ("dollars", "usd"),
    ("usd", "usd"),
    ("€", "eur"),
    ("euro", "eur"),
    ("euros", "eur"),
    ("£", "gbp"),
    ("%", "percent"),
    ("percent", "percent"),
    ("km", "km"),
    ("kilometer", "km"),
    ("kilometers", "km"),
    ("kilometre", "km"),
    ("kilometres", "km"),
    ("mi", "mi"),
    ("mile", "mi"),
    ("miles", "mi"),
    ("kg", "kg"),
    ("kilogram", "kg"),
    ("kilograms", "kg"),
    ("feet", "ft"),
    ("ft", "ft"),
];

fn unit(word: &str) -> Option<&'static str> {
    UNITS.iter().find(|(w, _)| *w == word).map(|(_, u)| *u)
}

const SMALL: [&str; 20] = [
    "zero",
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "eleven",
    "twelve",
    "thirteen",
    "fourteen",
    "fifteen",
    "sixteen",
    "seventeen",
    "eighteen",
    "nineteen",
];
const TENS: [&str; 8] = [
    "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety",
];
const ORDINALS: [&str; 12] = [
    "first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth", "tenth",
    "eleventh", "twelfth",
];

fn scale(word: &str) -> Option<f64> {
    match word {
        "hundred" => Some(1e2),
        "thousand" => Some(1e3),
        "million" => Some(1e6),
        "billion" => Some(1e9),
        "trillion" => Some(1e12),
        _ => None,
    }
}

/// The value of a number word from "zero" to "ninety" (lower case): "seven" -> 7, "forty" -> 40.
pub fn number_word(word: &str) -> Option<f64> {
    if let Some(i) = SMALL.iter().position(|w| *w == word) {
        return Some(i as f64);
    }
    TENS.iter()
        .position(|w| *w == word)
        .map(|i| (i as f64 + 2.0) * 10.0)
}

/// A number written with digits: "1,000" -> 1000, "3.5" -> 3.5.
fn digits(word: &str) -> Option<f64> {
    let plain: String = word.chars().filter(|c| *c != ',').collect();
    if plain.is_empty() || !plain.chars().next().is_some_and(|c| c.is_ascii_digit()) {
        return None;
    }
    plain.parse().ok()
}

fn show(n: f64) -> String {
    if n.fract() == 0.0 && n.abs() < 1e15 {
        format!("{}", n as i64)
    } else {
        format!("{n}")
    }
}

/// Words of `text`, lowercased, currency symbols and "%" split off, hyphens between words
/// split, other punctuation stripped at the edges.
fn words(text: &str) -> Vec<String> {
    let lowered = lowercase(text);
    let mut out = Vec::new();
    for raw in lowered.split_whitespace() {
        for part in raw.split('-').filter(|p| !p.is_empty()) {
            let mut part = part.trim_matches(|c: char| !c.is_alphanumeric() && !"$€£%".contains(c));
            for symbol in ["us$", "$", "€", "£"] {
                if let Some(rest) = part.strip_prefix(symbol) {
                    out.push(symbol.to_string());
                    part = rest;
                }
            }
            let percent = part.ends_with('%');
            let part = part.trim_end_matches('%');
            let part = part
                .trim_matches(|c: char| !c.is_alphanumeric() && c != '.' && c != ',' && c != '/');
            let part = part.trim_end_matches(['.', ',']);
            if !part.is_empty() {
                out.push(part.to_string());
            }
            if percent {
                out.push("%".to_string());
            }
        }
    }
    out
}

/// The canonical tokens of `text` (see the module documentation).
pub fn canonical(text: &str) -> Vec<String> {
    let words = words(text);
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < words.len() {
        let w = words[i].as_str();
        // Dates: "february 7 2016", "7 february 2016", "february 2016", "2016-02-07" (split on
        // hyphens above: three numbers), "02/07/2016" (month first).
        if let Some((date, used)) = date_at(&words[i..]) {
            out.push(date);
            i += used;
            continue;
        }
        // Numbers: digits or words, with a following scale ("3.5 million").
        if let Some((n, used)) = number_at(&words[i..]) {
            out.push(show(n));
            i += used;
            continue;
        }
        if let Some(n) = ORDINALS.iter().position(|o| *o == w) {
            out.push(ordinal(n + 1));
            i += 1;
            continue;
        }
        if let Some(u) = unit(w).or_else(|| {
            (w == "per" && words.get(i + 1).is_some_and(|n| n == "cent")).then_some("percent")
        }) {
            out.push(u.to_string());
            i += if w == "per" { 2 } else { 1 };
            continue;
        }
        let stripped: String = w.chars().filter(|c| c.is_alphanumeric()).collect();
        if !stripped.is_empty() && !matches!(stripped.as_str(), "a" | "an" | "the") {
            out.push(stripped);
        }
        i += 1;
    }
    // "$ 5" and "5 usd" are one answer: a currency written before its amount goes after it.
    move_currency_after_amount(&mut out);
    out
}

fn ordinal(n: usize) -> String {
    let suffix = match (n % 10, n % 100) {
        (_, 11..=13) => "th",
        (1, _) => "st",
        (2, _) => "nd",
        (3, _) => "rd",
        _ => "th",
    };
    format!("{n}{suffix}")
}

fn move_currency_after_amount(tokens: &mut [String]) {
    for i in 0..tokens.len().saturating_sub(1) {
        let currency = matches!(tokens[i].as_str(), "usd" | "eur" | "gbp");
        if currency && digits(&tokens[i + 1]).is_some() {
            tokens.swap(i, i + 1);
        }
    }
}

/// A number starting at `words[0]`: its value and how many words it took.
fn number_at(words: &[String]) -> Option<(f64, usize)> {
    let first = words.first()?;
    let (mut value, mut used) = match digits(first) {
        Some(n) => (n, 1),
        None => {
            // Words: "twenty one", "one hundred and five", "three thousand".
            let mut total = 0.0;
            let mut current: Option<f64> = None;
            let mut used = 0;
            for (k, w) in words.iter().enumerate() {
                if let Some(n) = number_word(w) {
                    current = Some(current.unwrap_or(0.0) + n);
                } else if let (Some(s), Some(c)) = (scale(w), current) {
                    if s == 100.0 {
                        current = Some(c * s);
                    } else {
                        total += c * s;
                        current = Some(0.0);
                    }
                } else if w == "and"
                    && current.is_some()
                    && words.get(k + 1).and_then(|n| number_word(n)).is_some()
                {
                } else {
                    break;
                }
                used = k + 1;
            }
            if used == 0 {
                return None;
            }
            (total + current.unwrap_or(0.0), used)
        }
    };
    // A scale after digits: "3.5 million".
    if used == 1 && digits(first).is_some() {
        if let Some(s) = words.get(1).and_then(|w| scale(w)) {
            value *= s;
            used = 2;
        }
    }
    Some((value, used))
}

/// A date starting at `words[0]`: its ISO form and how many words it took.
fn date_at(words: &[String]) -> Option<(String, usize)> {
    let day = |w: &String| -> Option<u32> {
        let d: String = w.trim_end_matches(|c: char| c.is_alphabetic()).to_string();
        let n: u32 = d.parse().ok()?;
        (1..=31).contains(&n).then_some(n)
    };
    let year = |w: &String| -> Option<u32> {
        let n: u32 = w.parse().ok()?;
        (w.len() == 4).then_some(n)
    };
    let at = |k: usize| words.get(k);
    // month day year / month year
    if let Some(m) = words.first().and_then(|w| month(w)) {
        if let (Some(d), Some(y)) = (at(1).and_then(day), at(2).and_then(year)) {
            return Some((format!("{y}-{m}-{d:02}"), 3));
        }
        if let Some(y) = at(1).and_then(year) {
            return Some((format!("{y}-{m}"), 2));
        }
        return None;
    }
    // day month year
    if let (Some(d), Some(m), Some(y)) = (
        words.first().and_then(day),
        at(1).and_then(|w| month(w)),
        at(2).and_then(year),
    ) {
        return Some((format!("{y}-{m}-{d:02}"), 3));
    }
    // ISO, split on its hyphens: 2016 02 07
    if let (Some(y), Some(m), Some(d)) = (words.first().and_then(year), at(1), at(2).and_then(day))
    {
        if m.len() == 2 && (1..=12).contains(&m.parse::<u32>().unwrap_or(0)) {
            return Some((format!("{y}-{m}-{d:02}"), 3));
        }
    }
    // 02/07/2016, month first
    let parts: Vec<&str> = words.first()?.split('/').collect();
    if let [m, d, y] = parts[..] {
        let (m, d): (u32, u32) = (m.parse().ok()?, d.parse().ok()?);
        if (1..=12).contains(&m)
            && (1..=31).contains(&d)
            && y.len() == 4
            && y.parse::<u32>().is_ok()
        {
            return Some((format!("{y}-{m:02}-{d:02}"), 1));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn golds(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn canonical_forms_of_numbers_dates_and_units() {
        let c = |s: &str| canonical(s).join(" ");
        assert_eq!(c("Twenty-one"), "21");
        assert_eq!(c("one hundred and five"), "105");
        assert_eq!(c("three million people"), "3000000 people");
        assert_eq!(c("3.5 million"), "3500000");
        assert_eq!(c("1,000"), "1000");
        assert_eq!(c("February 7, 2016"), "2016-02-07");
        assert_eq!(c("7 Feb. 2016"), "2016-02-07");
        assert_eq!(c("2016-02-07"), "2016-02-07");
        assert_eq!(c("02/07/2016"), "2016-02-07");
        assert_eq!(c("in March 1990"), "in 1990-03");
        assert_eq!(c("$5 million"), "5000000 usd");
        assert_eq!(c("5,000,000 dollars"), "5000000 usd");
        assert_eq!(c("12%"), "12 percent");
        assert_eq!(c("12 per cent"), "12 percent");
        assert_eq!(c("the first"), "1st");
        assert_eq!(c("100 kilometres"), "100 km");
        assert_eq!(c("The Broncos!"), "broncos");
        // "may" is a month only before a year or a day.
        assert_eq!(c("it may rain"), "it may rain");
    }

    #[test]
    fn equivalence_and_key_facts() {
        let v = judge("RBI", &golds(&["Reserve Bank of India"]), &[]);
        assert!(v.equivalent && v.key_fact && v.answer_tokens == 1);
        let v = judge("Reserve Bank of India", &golds(&["RBI"]), &[]);
        assert!(v.equivalent);
        let v = judge("twenty-one", &golds(&["21"]), &[]);
        assert!(v.equivalent);
        let v = judge("Feb. 7, 2016", &golds(&["7 February 2016"]), &[]);
        assert!(v.equivalent);
        // A sentence with the fact: not equivalent, but a key fact, and its length is told.
        let v = judge(
            "The game was won by the Denver Broncos in 2016.",
            &golds(&["Denver Broncos"]),
            &[],
        );
        assert!(!v.equivalent && v.key_fact);
        assert_eq!(v.answer_tokens, 8);
        // Whole tokens only.
        let v = judge("In 19901 it ended.", &golds(&["1990"]), &[]);
        assert!(!v.key_fact);
        // An acronym the passage defines, whose letters are not plain initials.
        let passage = "The regulator is the Nuclear Regulatory Commission (NRC) of the US.";
        let v = judge(
            "NRC",
            &golds(&["Nuclear Regulatory Commission"]),
            &[passage],
        );
        assert!(v.equivalent);
        let v = judge("NASA", &golds(&["Denver Broncos"]), &[passage]);
        assert!(!v.equivalent && !v.key_fact);
        assert_eq!(judge("", &golds(&["x"]), &[]).answer_tokens, 0);
    }

    #[test]
    fn agreement_with_labels_counts_each_verdict() {
        let item = |answer: &str, gold: &str, label: bool| Item {
            id: None,
            answer: answer.into(),
            golds: golds(&[gold]),
            question: String::new(),
            context: String::new(),
            label: Some(label),
        };
        let items = [
            item("RBI", "Reserve Bank of India", true),
            item("Broncos", "Broncos", true),
            item("It was the Broncos.", "Broncos", true),
            item("Panthers", "Broncos", false),
            item("not the Broncos", "Broncos", false),
        ];
        let found = agreement(&items, &judge_all(&items));
        let by = |name: &str| found.iter().find(|a| a.verdict == name).unwrap();
        // EM: one right of one said, one of three labelled yes.
        assert_eq!(
            (by("exact_match").positives, by("exact_match").precision),
            (1, Some(1.0))
        );
        assert!((by("exact_match").recall.unwrap() - 1.0 / 3.0).abs() < 1e-12);
        // Equivalence adds the acronym.
        assert!((by("equivalent").recall.unwrap() - 2.0 / 3.0).abs() < 1e-12);
        // Key fact finds all three, and is fooled by "not the Broncos".
        let key = by("key_fact");
        assert_eq!((key.positives, key.recall), (4, Some(1.0)));
        assert!((key.precision.unwrap() - 0.75).abs() < 1e-12);
        assert!((key.accuracy - 0.8).abs() < 1e-12);
        // A verdict that says yes to nothing has no precision.
        assert_eq!(
            agreement(&items[3..4], &judge_all(&items[3..4]))[0].precision,
            None
        );
    }
}
