//! Faithfulness by claims: an answer split into claims, each checked against a passage by plain
//! English rules (or by a [`ClaimJudge`]), and attributed to the passage that supports it.
//!
//! **Claims.** The answer's sentences ([`grounded::sentences`]), each split further at a
//! conjunction joining two clauses when that is safe ([`split_sentence`]): at `;` between two
//! clauses; at `and`, `but`, `, while`, `, whereas` when the first part has a verb and the second
//! either starts with a verb (it shares the first clause's subject, which is copied onto it: "X
//! was born in 1900 and died in 1950" gives "X was born in 1900" and "X died in 1950") or starts
//! with its own subject and a verb within its first five words ("... and he died in 1950"). Not
//! split: inside brackets or quotes, parts shorter than three (first) or two (second) words, a
//! first part without a verb ("Tom and Jerry won"), a second part without a verb ("physics and
//! mathematics"), and a shared subject under a negation ("was not tested and approved": the
//! negation's reach is unclear). Verbs are recognised by a list of auxiliaries and common
//! irregular past forms and by the `-ed` ending. A citation stays with the clause it is written
//! in; a clause without one takes the citations written at the end of its sentence.
//!
//! **The lexical checker** ([`check_claim`]) reads a claim against one passage:
//! - *Coverage*: the share of the claim's content words found in the passage. Content words
//!   are SQuAD-normalised tokens less [`grounded`]'s stop words, the words that frame an answer
//!   ("question"), and the negation words, which the negation rule judges; both sides are
//!   Porter-stemmed so that "defeated" meets "defeat". Numbers count as values, as the number
//!   rule reads them ("8" is found in "eight times"). [`COVERAGE_THRESHOLD`] (0.6) lets a claim
//!   reword two of every five content words, about what a short paraphrase does, while a claim
//!   about something else shares far fewer.
//! - *Negation* (hard): the passage sentence sharing most content words with the claim is
//!   compared with it (passage sentences do not end at initials, "H. J. Round", or common
//!   abbreviations). A negation word (not, n't, no, never, none, nobody, nothing, nowhere,
//!   neither, nor, without, cannot, fail(ed) to, unable to, lack(ed)) governs the first content
//!   word after it within its clause and five words (its head: "did not *reduce*", "no
//!   *effect*"). The claim fails when it negates a head more often than the sentence does while
//!   the sentence states it, or states a head the sentence negates more often than the sentence
//!   states it. Counting keeps a word that the sentence both states and negates ("placed ...,
//!   and ... not placed") from failing a claim that repeats either half. "not only", "whether or
//!   not" and "No." before a number are not negations.
//! - *Numbers* (hard): every number of the claim must occur in the passage, compared as values:
//!   "1,000" = "1000", "3.50" = "3.5", "3.5 million" = "3,500,000" (thousand, million, billion,
//!   trillion scale the number before them, also hyphenated: "$2-million"), "two" to "twelve"
//!   and the tens as words (also opening a compound, "two-tone") = their digits. "one" is not
//!   read as a number in a claim (it is as often a pronoun), but is in the passage.
//! - *Dates* (hard): years (1000-2099 written as four plain digits, and decades, "1990s") are
//!   numbers reported as dates; month names (capitalised; "May" not first in a sentence) must
//!   occur in the passage, in full or abbreviated.
//! - *Named entities* (hard): runs of capitalised words (joined by of, de, la, von, van, da, du,
//!   del; hyphenated words split, so that "Anglo-Norman" is two name words and
//!   "Fund-monitored" ends a name), other than month and day names, must occur in the passage
//!   as a word sub-sequence: in order, case aside, possessive `'s` dropped, at most
//!   [`NAME_GAP`] (2) passage words between two of its words ("Broncos" is found in "the Denver
//!   Broncos'", "Football World Cup" in "Football (Soccer) World Cup"). A run that begins a
//!   sentence may be capitalised only for that reason: a function word opening it ("The Denver
//!   Broncos") is dropped, a run of several words is also found without its first word
//!   ("Eventually Tesla" as "Tesla"), and a capitalised first word alone is not checked. A
//!   fuller name than the passage gives ("Nikola Tesla" for "Tesla") counts as absent: the
//!   passage does not say it.
//!
//! A claim is supported when no hard check fails and its coverage reaches the threshold. Its
//! score is the coverage halved for each failed hard check ([`HARD_FAILURE_FACTOR`]), so that
//! `score >= COVERAGE_THRESHOLD` exactly when it is supported, and a ranking by score puts
//! every claim that fails a hard check below every one that does not.
//!
//! **Attribution** ([`check_claims`]). A claim that cites passages is checked against each valid
//! one it cites and keeps the best verdict (`written`); one citing only numbers no shown passage
//! has fails ([`Failure::InvalidCitation`]). A claim that cites nothing (SmolLM2 never cites) is
//! checked against every shown passage and `attributed` to the one that supports it best; when
//! none does, it is flagged and the closest passage's failures are reported.
//!
//! **A judge** ([`ClaimJudge`]) can decide instead of the lexical rules, claim by claim.

use crate::error::Result;
use crate::grounded::{self, citations, is_refusal, strip_citations, STOP_WORDS};
use lector_eval::equivalence::month_of;
use lector_eval::normalize::normalized_tokens;
use serde::Serialize;
use std::collections::{BTreeMap, HashSet};
use std::convert::Infallible;

/// Minimum share of a claim's content words found in the passage (see the module docs).
pub const COVERAGE_THRESHOLD: f64 = 0.6;

/// What each failed hard check multiplies a claim's score by. Below `COVERAGE_THRESHOLD`, so a
/// claim with a hard failure always scores under the threshold.
pub const HARD_FAILURE_FACTOR: f64 = 0.5;

/// One claim of an answer.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Claim {
    /// The claim without citations.
    pub text: String,
    /// The passage numbers cited for it (written in its clause, or at the end of its sentence).
    pub citations: Vec<usize>,
    /// The index of its sentence among [`grounded::sentences`] of the answer.
    pub sentence: usize,
    /// Its first word begins the sentence (so a capital there may be only positional); false
    /// for a second clause with its own subject.
    pub opens_sentence: bool,
}

/// Why a claim is not supported by a passage.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Failure {
    /// Too few of its content words occur in the passage.
    Coverage { coverage: f64 },
    /// It negates `word`, which the passage states (`added`), or states `word`, which the
    /// passage negates.
    Negation { word: String, added: bool },
    /// A number absent from the passage.
    Number { value: String },
    /// A year or month absent from the passage.
    Date { value: String },
    /// A name absent from the passage.
    Entity { name: String },
    /// It cites only passage numbers that were not shown.
    InvalidCitation,
    /// No passage was shown to check it against.
    NoPassage,
    /// A judge decided it is unsupported, for this reason.
    Judge { reason: String },
}

/// A decision on one claim against one passage.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ClaimVerdict {
    pub supported: bool,
    /// How well the passage supports the claim, in [0, 1]; higher is better.
    pub score: f64,
    /// Why it is not supported (empty when it is).
    pub failures: Vec<Failure>,
}

/// Decides whether a passage supports a claim: the lexical rules ([`Lexical`]), or a model.
pub trait ClaimJudge {
    /// The verdict on `claim` (citations removed) against `passage`.
    fn decide(&self, claim: &str, passage: &str) -> Result<ClaimVerdict>;
}

/// The lexical checker as a judge.
#[derive(Debug, Clone, Copy, Default)]
pub struct Lexical;

impl ClaimJudge for Lexical {
    fn decide(&self, claim: &str, passage: &str) -> Result<ClaimVerdict> {
        Ok(check_claim(claim, passage))
    }
}

/// How a claim came to its passage.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CitationSource {
    /// The answer cites it.
    Written,
    /// The answer cites nothing for the claim; the checker chose the passage supporting it best.
    Attributed,
}

/// A claim of an answer and its verdict.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ClaimCheck {
    /// The claim without citations.
    pub text: String,
    /// The index of its sentence in the answer.
    pub sentence: usize,
    /// The number of the passage it was checked against: the cited or attributed one, or for
    /// an uncited claim no passage supports, the closest one. `None` when there was none.
    pub passage: Option<usize>,
    /// Whether that passage is cited (`written`) or `attributed`; `None` when the claim is
    /// uncited and no passage supports it.
    pub citation: Option<CitationSource>,
    pub supported: bool,
    /// The verdict's score in [0, 1].
    pub score: f64,
    /// Why it is not supported.
    pub failures: Vec<Failure>,
}

/// A passage shown to the model: its number in the prompt and its text.
#[derive(Debug, Clone, Copy)]
pub struct Shown<'a> {
    pub number: usize,
    pub text: &'a str,
}

/// Every claim of `answer` (refusal sentences have none), with its citations.
pub fn split_claims(answer: &str) -> Vec<Claim> {
    let mut out = Vec::new();
    for (index, sentence) in grounded::sentences(answer).iter().enumerate() {
        if is_refusal(sentence) {
            continue;
        }
        out.extend(split_sentence(sentence, index));
    }
    out
}

/// The claims of one sentence (number `index` in its answer), by the clause rule of the module
/// docs.
pub fn split_sentence(sentence: &str, index: usize) -> Vec<Claim> {
    let trailing = trailing_citations(sentence);
    clauses(sentence, true)
        .into_iter()
        .map(|(part, opens_sentence)| {
            let written = citations(&part);
            Claim {
                text: tidy(&strip_citations(&part)),
                citations: if written.is_empty() {
                    trailing.clone()
                } else {
                    written
                },
                sentence: index,
                opens_sentence,
            }
        })
        .filter(|claim| !claim.text.is_empty())
        .collect()
}

/// Checks every claim of `answer` against the shown passages with the lexical rules,
/// attributing uncited claims (see the module docs).
pub fn check_claims(answer: &str, shown: &[Shown<'_>]) -> Vec<ClaimCheck> {
    let lexical = attribute::<Infallible>(&split_claims(answer), shown, &mut |c, p| {
        Ok(check_claim_in(c, p))
    });
    let Ok(checks) = lexical;
    checks
}

/// [`check_claims`] with `judge` deciding each claim against each passage.
pub fn judge_claims(
    answer: &str,
    shown: &[Shown<'_>],
    judge: &dyn ClaimJudge,
) -> Result<Vec<ClaimCheck>> {
    attribute(&split_claims(answer), shown, &mut |c, p| {
        judge.decide(&c.text, p)
    })
}

/// Verdicts for `claims`, each from `decide` against its cited passages, or all shown ones.
fn attribute<E>(
    claims: &[Claim],
    shown: &[Shown<'_>],
    decide: &mut dyn FnMut(&Claim, &str) -> std::result::Result<ClaimVerdict, E>,
) -> std::result::Result<Vec<ClaimCheck>, E> {
    let mut out = Vec::with_capacity(claims.len());
    for claim in claims {
        let mut best: Option<(usize, ClaimVerdict)> = None;
        for passage in candidates(claim, shown) {
            let verdict = decide(claim, passage.text)?;
            let better = best
                .as_ref()
                .is_none_or(|(_, b)| (verdict.supported, verdict.score) > (b.supported, b.score));
            if better {
                best = Some((passage.number, verdict));
            }
        }
        out.push(claim_check(claim, best));
    }
    Ok(out)
}

/// The passages to check `claim` against: the shown ones it cites (each once), or every shown
/// one when it cites none.
fn candidates<'s, 'a>(claim: &Claim, shown: &'s [Shown<'a>]) -> Vec<&'s Shown<'a>> {
    if claim.citations.is_empty() {
        return shown.iter().collect();
    }
    let mut valid: Vec<&Shown<'_>> = Vec::new();
    for number in &claim.citations {
        let found = shown.iter().find(|p| p.number == *number);
        if let Some(p) = found.filter(|p| !valid.iter().any(|v| v.number == p.number)) {
            valid.push(p);
        }
    }
    valid
}

/// The check of `claim` from its best verdict (passage number and verdict), if it had any.
fn claim_check(claim: &Claim, best: Option<(usize, ClaimVerdict)>) -> ClaimCheck {
    let cited = !claim.citations.is_empty();
    let Some((number, verdict)) = best else {
        return ClaimCheck {
            text: claim.text.clone(),
            sentence: claim.sentence,
            passage: None,
            citation: cited.then_some(CitationSource::Written),
            supported: false,
            score: 0.0,
            failures: vec![if cited {
                Failure::InvalidCitation
            } else {
                Failure::NoPassage
            }],
        };
    };
    let citation = match (cited, verdict.supported) {
        (true, _) => Some(CitationSource::Written),
        (false, true) => Some(CitationSource::Attributed),
        (false, false) => None,
    };
    ClaimCheck {
        text: claim.text.clone(),
        sentence: claim.sentence,
        passage: Some(number),
        citation,
        supported: verdict.supported,
        score: verdict.score,
        failures: verdict.failures,
    }
}

/// The lexical verdict on `text` split into claims: supported when every claim is, scored by
/// the weakest one, with all their failures (for a claim set, where a text is one claim).
pub fn check_text(text: &str, passage: &str) -> ClaimVerdict {
    let verdicts: Vec<ClaimVerdict> = split_sentence(text, 0)
        .iter()
        .map(|claim| check_claim_in(claim, passage))
        .collect();
    if verdicts.is_empty() {
        return check_claim(text, passage);
    }
    ClaimVerdict {
        supported: verdicts.iter().all(|v| v.supported),
        score: verdicts.iter().map(|v| v.score).fold(1.0, f64::min),
        failures: verdicts.into_iter().flat_map(|v| v.failures).collect(),
    }
}

/// The lexical checker: `claim` (one claim, read as a sentence of its own) against `passage`,
/// by the rules of the module docs.
pub fn check_claim(claim: &str, passage: &str) -> ClaimVerdict {
    lexical(claim, passage, true)
}

/// The lexical checker on a claim split from an answer.
fn check_claim_in(claim: &Claim, passage: &str) -> ClaimVerdict {
    lexical(&claim.text, passage, claim.opens_sentence)
}

/// The lexical checker; `opens_sentence`: the claim's first word begins a sentence.
fn lexical(claim: &str, passage: &str, opens_sentence: bool) -> ClaimVerdict {
    let claim = strip_citations(claim);
    let facts = Facts::of(passage);
    let claim_tokens = tokens(&claim, opens_sentence);
    let content = content_keys(&claim);
    let coverage = coverage(&claim_tokens, &content, &facts);
    let mut failures = Vec::new();
    failures.extend(negation_failure(&claim_tokens, &content, &facts));
    failures.extend(number_failures(&claim_tokens, &facts));
    failures.extend(month_failures(&claim_tokens, &facts));
    failures.extend(entity_failures(&claim_tokens, &facts));
    let score = coverage * HARD_FAILURE_FACTOR.powi(failures.len() as i32);
    if coverage < COVERAGE_THRESHOLD {
        failures.push(Failure::Coverage { coverage });
    }
    ClaimVerdict {
        supported: failures.is_empty(),
        score,
        failures,
    }
}

/// The share of the claim's content words (`content`) and numbers found in the passage; 1 for
/// a claim with neither.
fn coverage(claim: &[Token], content: &[String], facts: &Facts) -> f64 {
    // Numbers count as values ("8" is found in "eight times").
    let values = numbers(claim, false);
    let total = content.len() + values.len();
    let found = content.iter().filter(|k| facts.keys.contains(*k)).count()
        + values.iter().filter(|n| facts.states(n.value)).count();
    if total == 0 {
        1.0
    } else {
        found as f64 / total as f64
    }
}

// ------------------------------------------------------------------------------------------
// Words

/// A word of a text: its form without surrounding punctuation, and where it sits.
#[derive(Debug, Clone)]
struct Token {
    /// The word as written, without surrounding punctuation (curly apostrophes made straight).
    raw: String,
    /// `raw` lower-cased.
    lower: String,
    /// The first word of a sentence.
    initial: bool,
    /// Punctuation after it ends a clause (`,` `;` `:` `.` `!` `?` `)`).
    ends_clause: bool,
}

/// The words of `text`; `opens_sentence`: its first word begins a sentence. Dashes (em and
/// spaced) separate words and end a clause; list markers opening a line ("2." in "...\n2.
/// Coldplay") are left out, being no numbers of the claim.
fn tokens(text: &str, opens_sentence: bool) -> Vec<Token> {
    let mut out: Vec<Token> = Vec::new();
    let mut sentence_start = opens_sentence;
    let spaced = text.replace('\u{2014}', " \u{2014} ");
    let pieces = spaced.lines().flat_map(|line| {
        let mut words = line.split_whitespace().peekable();
        if words.peek().is_some_and(|w| is_list_marker(w)) {
            words.next();
        }
        words
    });
    for piece in pieces {
        let piece = piece.replace(['\u{2019}', '\u{2018}'], "'");
        let kept = piece.trim_end_matches(is_closing);
        let tail = &piece[kept.len()..];
        let core = kept.trim_start_matches(is_opening);
        if !core.chars().any(char::is_alphanumeric) {
            // A dash, a bracket, an ellipsis: a clause break for the word before.
            if let Some(last) = out.last_mut() {
                last.ends_clause = true;
            }
            continue;
        }
        out.push(Token {
            raw: core.to_string(),
            lower: core.to_lowercase(),
            initial: sentence_start,
            ends_clause: tail.chars().any(|c| ",;:.!?)".contains(c)),
        });
        sentence_start = tail.chars().any(|c| ".!?".contains(c));
    }
    out
}

/// A list item's number: "1." or "2)".
fn is_list_marker(word: &str) -> bool {
    let digits = word.trim_end_matches(['.', ')']);
    digits.len() < word.len()
        && (1..=2).contains(&digits.len())
        && digits.bytes().all(|b| b.is_ascii_digit())
}

/// Punctuation that may open a word: quotes and brackets.
fn is_opening(c: char) -> bool {
    matches!(c, '"' | '\'' | '(' | '[' | '{' | '\u{201C}')
}

/// Punctuation that may close a word (not `%` or `$`, which belong to numbers).
fn is_closing(c: char) -> bool {
    (c.is_ascii_punctuation() && c != '%' && c != '$') || matches!(c, '\u{201D}' | '\u{2026}')
}

/// The comparison key of a word: lower-cased, ASCII punctuation dropped (as SQuAD
/// normalisation does), Porter-stemmed.
fn key(word: &str) -> String {
    let plain: String = word
        .to_lowercase()
        .chars()
        .filter(|c| !c.is_ascii_punctuation())
        .collect();
    stem(&plain)
}

/// The Porter stem of a normalised token (left alone when it is not plain ASCII).
fn stem(token: &str) -> String {
    if token
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
    {
        let mut stems = lector_eval::rouge::tokenize(token, true);
        if stems.len() == 1 {
            return stems.remove(0);
        }
    }
    token.to_string()
}

/// Words that frame an answer rather than state anything ("The answer to the question is").
const FRAME_WORDS: [&str; 2] = ["question", "questions"];

/// The claim's content words as keys: normalised tokens less stop words, framing words, and
/// the negation words that the negation rule judges; numbers (and their scale words) are
/// counted as values instead.
fn content_keys(claim: &str) -> Vec<String> {
    normalized_tokens(claim)
        .into_iter()
        .filter(|t| !STOP_WORDS.contains(&t.as_str()) && !FRAME_WORDS.contains(&t.as_str()))
        .filter(|t| !is_negation_word(t) && !is_number_word(t))
        .map(|t| stem(&t))
        .collect()
}

/// A normalised token that is a number: digits with an optional ordinal or plural ending
/// ("1990s", "21st"; "3.5" normalises to "35"), or a spelled-out number.
fn is_number_word(token: &str) -> bool {
    let rest = token.trim_start_matches(|c: char| c.is_ascii_digit());
    (rest.len() < token.len() && ["", "s", "st", "nd", "rd", "th"].contains(&rest))
        || SPELLED.iter().any(|(w, _)| *w == token)
        || SCALES.iter().any(|(w, _)| *w == token)
}

/// What the checks need from a passage.
struct Facts {
    /// Keys of all its normalised tokens.
    keys: HashSet<String>,
    /// Its words, lower-cased, possessives dropped, for name look-ups.
    words: Vec<String>,
    /// Every number it states, as a value.
    numbers: Vec<f64>,
    /// Months it names (1-12).
    months: HashSet<usize>,
    /// Its sentences' polarity, for the negation rule.
    sentences: Vec<Polarity>,
}

impl Facts {
    /// Whether the passage states the number `value`.
    fn states(&self, value: f64) -> bool {
        self.numbers
            .iter()
            .any(|&v| (v - value).abs() <= 1e-9 * value.abs().max(1.0))
    }

    fn of(passage: &str) -> Facts {
        let passage = strip_citations(passage);
        let toks = tokens(&passage, true);
        Facts {
            keys: normalized_tokens(&passage)
                .iter()
                .map(|t| stem(t))
                .collect(),
            words: name_tokens(&toks)
                .iter()
                .map(|t| name_form(&t.lower))
                .collect(),
            numbers: numbers(&toks, true).into_iter().map(|n| n.value).collect(),
            // Capitalised only: "may" is a verb, "May" the month.
            months: toks
                .iter()
                .filter(|t| t.raw.starts_with(char::is_uppercase))
                .filter_map(|t| month_of(&t.lower, true))
                .collect(),
            sentences: passage_sentences(&passage)
                .into_iter()
                .map(|s| Polarity::of(&tokens(s, true)))
                .collect(),
        }
    }
}

/// Words after which a period ends no sentence (besides initials, single letters).
const ABBREVIATIONS: [&str; 36] = [
    "mr", "mrs", "ms", "dr", "st", "jr", "sr", "prof", "inc", "co", "corp", "ltd", "no", "vs",
    "etc", "e.g", "i.e", "u.s", "u.k", "gen", "gov", "sen", "rev", "mt", "ft", "jan", "feb", "mar",
    "apr", "jun", "jul", "aug", "sep", "sept", "oct", "nov",
];

/// The sentences of a passage: each ends at `.`, `!` or `?` followed by a space and a capital,
/// digit, quote or bracket, except after an initial ("H. J. Round") or an abbreviation.
fn passage_sentences(text: &str) -> Vec<&str> {
    let chars: Vec<(usize, char)> = text.char_indices().collect();
    let mut out = Vec::new();
    let mut start = 0;
    for (k, &(at, c)) in chars.iter().enumerate() {
        if !matches!(c, '.' | '!' | '?') {
            continue;
        }
        let space = chars.get(k + 1).is_some_and(|n| n.1.is_whitespace());
        let opens = chars.get(k + 2).is_some_and(|n| {
            n.1.is_uppercase() || n.1.is_ascii_digit() || "\"'(\u{201C}".contains(n.1)
        });
        if !space || !opens || (c == '.' && is_abbreviation(&text[start..at])) {
            continue;
        }
        let end = at + c.len_utf8();
        out.push(text[start..end].trim());
        start = end;
    }
    out.push(text[start..].trim());
    out.retain(|s| !s.is_empty());
    out
}

/// Whether the last word of `before` (a period follows it) is an initial or an abbreviation.
fn is_abbreviation(before: &str) -> bool {
    let word = before
        .rsplit(char::is_whitespace)
        .next()
        .unwrap_or_default()
        .trim_start_matches(|c: char| !c.is_alphanumeric())
        .to_lowercase();
    (word.chars().count() == 1 && word.chars().all(char::is_alphabetic))
        || ABBREVIATIONS.contains(&word.as_str())
}

// ------------------------------------------------------------------------------------------
// Negation

/// Words that negate what follows them (contractions in n't too, see [`negation_at`]).
const NEGATIONS: [&str; 11] = [
    "not", "no", "never", "none", "nobody", "nothing", "nowhere", "neither", "nor", "without",
    "cannot",
];

/// Verbs that negate the verb after their `to` ("failed to win").
const NEGATING_VERBS: [&str; 9] = [
    "fail", "fails", "failed", "failing", "unable", "lack", "lacks", "lacked", "lacking",
];

/// Words skipped when looking for the head of a negation: function words and adverbs that
/// sit between a negation and what it negates ("did not *even* try", "no *longer* exists").
const HEAD_SKIP: [&str; 38] = [
    "a",
    "an",
    "the",
    "any",
    "be",
    "been",
    "being",
    "do",
    "does",
    "did",
    "have",
    "has",
    "had",
    "yet",
    "longer",
    "even",
    "also",
    "always",
    "ever",
    "necessarily",
    "entirely",
    "fully",
    "really",
    "quite",
    "very",
    "much",
    "more",
    "so",
    "too",
    "just",
    "one",
    "to",
    "of",
    "in",
    "on",
    "at",
    "for",
    "by",
];

/// Words that end a negation's clause.
const CLAUSE_WORDS: [&str; 10] = [
    "and", "or", "but", "which", "who", "that", "because", "while", "although", "when",
];

fn is_negation_word(word: &str) -> bool {
    NEGATIONS.contains(&word) || word.ends_with("nt") && is_contraction(word)
}

/// Normalised n't forms ("didnt"), which normalisation leaves of "didn't".
fn is_contraction(word: &str) -> bool {
    matches!(
        word,
        "didnt"
            | "doesnt"
            | "dont"
            | "isnt"
            | "wasnt"
            | "arent"
            | "werent"
            | "hasnt"
            | "havent"
            | "hadnt"
            | "couldnt"
            | "wouldnt"
            | "shouldnt"
            | "wont"
            | "cant"
            | "mustnt"
            | "neednt"
    )
}

/// Whether the token at `i` negates (and is not "not only", "or not", or "No." before a number).
fn negation_at(toks: &[Token], i: usize) -> bool {
    let word = toks[i].lower.as_str();
    let next = toks.get(i + 1).map(|t| t.lower.as_str());
    let previous = i.checked_sub(1).map(|p| toks[p].lower.as_str());
    if NEGATING_VERBS.contains(&word) {
        return word.starts_with("lack") || next == Some("to");
    }
    if word == "not" && (next == Some("only") || previous == Some("or")) {
        return false;
    }
    if word == "no" && next.is_some_and(|n| n.starts_with(|c: char| c.is_ascii_digit())) {
        return false;
    }
    NEGATIONS.contains(&word) || word.ends_with("n't")
}

/// The content words of a sentence, split by whether a negation governs them.
struct Polarity {
    /// Keys of the heads of its negations, with how often each is negated.
    negated: BTreeMap<String, usize>,
    /// Keys of its other content words, with how often each occurs.
    stated: BTreeMap<String, usize>,
}

impl Polarity {
    fn of(toks: &[Token]) -> Polarity {
        let mut heads = HashSet::new();
        let mut negated = BTreeMap::new();
        for i in 0..toks.len() {
            if negation_at(toks, i) {
                if let Some(h) = head_after(toks, i) {
                    heads.insert(h);
                    *negated.entry(key(&toks[h].lower)).or_default() += 1;
                }
            }
        }
        let mut stated = BTreeMap::new();
        for (i, token) in toks.iter().enumerate() {
            if !heads.contains(&i) && !negation_at(toks, i) && !is_function_word(&token.lower) {
                *stated.entry(key(&token.lower)).or_default() += 1;
            }
        }
        Polarity { negated, stated }
    }

    fn negations(&self, key: &str) -> usize {
        self.negated.get(key).copied().unwrap_or(0)
    }

    fn statements(&self, key: &str) -> usize {
        self.stated.get(key).copied().unwrap_or(0)
    }
}

/// The index of the first content word after the negation at `i`, within its clause and
/// five words.
fn head_after(toks: &[Token], i: usize) -> Option<usize> {
    if toks[i].ends_clause {
        return None;
    }
    let mut j = i + 1;
    // "failed to win": the head follows the `to`.
    while j < toks.len() && j <= i + 5 {
        let word = toks[j].lower.as_str();
        if CLAUSE_WORDS.contains(&word) {
            return None;
        }
        if !HEAD_SKIP.contains(&word) && !STOP_WORDS.contains(&word) && !negation_at(toks, j) {
            return Some(j);
        }
        if toks[j].ends_clause {
            return None;
        }
        j += 1;
    }
    None
}

/// A stop word or a word skipped before a head: no content of its own.
fn is_function_word(word: &str) -> bool {
    HEAD_SKIP.contains(&word) || STOP_WORDS.contains(&word) || CLAUSE_WORDS.contains(&word)
}

/// The negation rule against the passage sentence sharing most content words with the claim.
fn negation_failure(claim: &[Token], content: &[String], facts: &Facts) -> Option<Failure> {
    if content.is_empty() {
        return None;
    }
    let shared = |s: &Polarity| {
        content
            .iter()
            .filter(|k| s.stated.contains_key(*k) || s.negated.contains_key(*k))
            .count()
    };
    let mut best: Option<&Polarity> = None;
    for sentence in &facts.sentences {
        if best.is_none_or(|b| shared(sentence) > shared(b)) {
            best = Some(sentence);
        }
    }
    let sentence = best?;
    let own = Polarity::of(claim);
    // Counted, so that a word the sentence both states and negates ("placed ..., and ... not
    // placed") fails only a claim that states (or negates) it more often than the sentence.
    let added = own
        .negated
        .keys()
        .find(|h| sentence.statements(h) > 0 && own.negations(h) > sentence.negations(h));
    if let Some(word) = added {
        return Some(Failure::Negation {
            word: word.clone(),
            added: true,
        });
    }
    let dropped = sentence.negated.keys().find(|h| {
        own.statements(h) > sentence.statements(h) && own.negations(h) < sentence.negations(h)
    });
    dropped.map(|word| Failure::Negation {
        word: word.clone(),
        added: false,
    })
}

// ------------------------------------------------------------------------------------------
// Numbers and dates

/// A number in a text.
#[derive(Debug, Clone, PartialEq)]
struct Number {
    /// As written (digits, or the word).
    text: String,
    value: f64,
    /// A year or decade.
    year: bool,
}

/// Numbers spelled out: read in claims and passages ("one" in passages only, see the docs).
const SPELLED: [(&str, f64); 20] = [
    ("one", 1.0),
    ("two", 2.0),
    ("three", 3.0),
    ("four", 4.0),
    ("five", 5.0),
    ("six", 6.0),
    ("seven", 7.0),
    ("eight", 8.0),
    ("nine", 9.0),
    ("ten", 10.0),
    ("eleven", 11.0),
    ("twelve", 12.0),
    ("twenty", 20.0),
    ("thirty", 30.0),
    ("forty", 40.0),
    ("fifty", 50.0),
    ("sixty", 60.0),
    ("seventy", 70.0),
    ("eighty", 80.0),
    ("ninety", 90.0),
];

/// Words that scale the number before them.
const SCALES: [(&str, f64); 4] = [
    ("thousand", 1e3),
    ("million", 1e6),
    ("billion", 1e9),
    ("trillion", 1e12),
];

/// The numbers of `toks`; `passage` also reads "one".
fn numbers(toks: &[Token], passage: bool) -> Vec<Number> {
    let mut out = Vec::new();
    for (i, token) in toks.iter().enumerate() {
        // "3.5 million", or hyphenated: "$2-million budget".
        let scale_word = toks.get(i + 1).map(|n| n.lower.as_str());
        let hyphenated = token
            .lower
            .rsplit('-')
            .next()
            .filter(|_| token.lower.contains('-'));
        let scale = SCALES
            .iter()
            .find(|(w, _)| Some(*w) == scale_word || Some(*w) == hyphenated)
            .map_or(1.0, |(_, s)| *s);
        // "two-tone", "three-year": the number begins a hyphenated compound.
        let first = token.lower.split('-').next().unwrap_or_default();
        let spelled = SPELLED
            .iter()
            .find(|(w, _)| *w == first && (passage || *w != "one"));
        if let Some((word, value)) = spelled {
            out.push(Number {
                text: (*word).to_string(),
                value: value * scale,
                year: false,
            });
            continue;
        }
        for (text, decade) in digit_runs(&token.raw) {
            let Ok(value) = text.replace(',', "").parse::<f64>() else {
                continue;
            };
            let plain = text.len() == 4 && text.bytes().all(|b| b.is_ascii_digit());
            out.push(Number {
                year: (plain && (1000.0..2100.0).contains(&value)) || decade,
                value: value * scale,
                text,
            });
        }
    }
    out
}

/// The runs of digits in a word, with `,` between groups of three and one decimal point kept,
/// each with whether it is a decade ("1990s").
fn digit_runs(word: &str) -> Vec<(String, bool)> {
    let chars: Vec<char> = word.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        if !chars[i].is_ascii_digit() {
            i += 1;
            continue;
        }
        let start = i;
        let mut point = false;
        while i < chars.len() {
            let c = chars[i];
            let digit_at = |k: usize| chars.get(k).is_some_and(char::is_ascii_digit);
            let group = c == ',' && (1..=3).all(|k| digit_at(i + k)) && !digit_at(i + 4);
            if c.is_ascii_digit() || group || (c == '.' && !point && digit_at(i + 1)) {
                point |= c == '.';
                i += 1;
            } else {
                break;
            }
        }
        let text: String = chars[start..i].iter().collect();
        let decade =
            chars.get(i) == Some(&'s') && chars.get(i + 1).is_none() && text.ends_with('0');
        out.push((text, decade));
    }
    out
}

/// Claim numbers with no equal value in the passage, as number or date failures.
fn number_failures(claim: &[Token], facts: &Facts) -> Vec<Failure> {
    let mut out = Vec::new();
    for n in numbers(claim, false) {
        if facts.states(n.value) {
            continue;
        }
        let failure = if n.year {
            Failure::Date { value: n.text }
        } else {
            Failure::Number { value: n.text }
        };
        if !out.contains(&failure) {
            out.push(failure);
        }
    }
    out
}

/// Month names of the claim that the passage does not name.
fn month_failures(claim: &[Token], facts: &Facts) -> Vec<Failure> {
    claim
        .iter()
        .filter(|t| t.raw.starts_with(char::is_uppercase) && !(t.lower == "may" && t.initial))
        .filter_map(|t| month_of(&t.lower, false).map(|m| (t, m)))
        .filter(|(_, m)| !facts.months.contains(m))
        .map(|(t, _)| Failure::Date {
            value: t.raw.clone(),
        })
        .collect()
}

// ------------------------------------------------------------------------------------------
// Names

/// Lower-case words that join the capitalised words of one name.
const NAME_JOINERS: [&str; 8] = ["of", "de", "la", "von", "van", "da", "du", "del"];

const DAYS: [&str; 7] = [
    "monday",
    "tuesday",
    "wednesday",
    "thursday",
    "friday",
    "saturday",
    "sunday",
];

/// A word as names are compared: lower-case, possessive dropped.
fn name_form(lower: &str) -> String {
    let plain = lower.trim_matches(|c: char| !c.is_alphanumeric());
    plain.strip_suffix("'s").unwrap_or(plain).to_string()
}

/// `toks` with hyphenated words split into their parts, so that a name is read in
/// "Anglo-Norman" and ends in "Fund-monitored"; a word with a one-letter part ("X-ray") stays
/// whole.
fn name_tokens(toks: &[Token]) -> Vec<Token> {
    let mut out = Vec::new();
    for token in toks {
        let mut parts: Vec<&str> = token
            .raw
            .split(['-', '\u{2013}'])
            .map(|p| p.trim_matches(|c: char| !c.is_alphanumeric()))
            .filter(|p| !p.is_empty())
            .collect();
        if parts.iter().any(|p| p.chars().count() == 1) {
            parts = vec![token.raw.as_str()];
        }
        let last = parts.len().saturating_sub(1);
        for (k, part) in parts.iter().enumerate() {
            out.push(Token {
                raw: (*part).to_string(),
                lower: part.to_lowercase(),
                initial: token.initial && k == 0,
                ends_clause: token.ends_clause && k == last,
            });
        }
    }
    out
}

fn is_capitalised(token: &Token) -> bool {
    token.raw.starts_with(char::is_uppercase)
        && token.lower != "i"
        && month_of(&token.lower, false).is_none()
        && !DAYS.contains(&token.lower.as_str())
}

/// The names of a claim: runs of capitalised words, each with whether it begins a sentence.
fn names(toks: &[Token]) -> Vec<(Vec<String>, bool)> {
    let toks = &name_tokens(toks);
    let mut out = Vec::new();
    let mut i = 0;
    while i < toks.len() {
        if !is_capitalised(&toks[i]) {
            i += 1;
            continue;
        }
        let start = i;
        let mut words = vec![name_form(&toks[i].lower)];
        while !toks[i].ends_clause && i + 1 < toks.len() {
            if is_capitalised(&toks[i + 1]) {
                i += 1;
            } else if NAME_JOINERS.contains(&toks[i + 1].lower.as_str())
                && !toks[i + 1].ends_clause
                && toks.get(i + 2).is_some_and(is_capitalised)
            {
                words.push(toks[i + 1].lower.clone());
                i += 2;
            } else {
                break;
            }
            words.push(name_form(&toks[i].lower));
        }
        let mut initial = toks[start].initial;
        if initial && words.len() > 1 && is_function_word(&words[0]) {
            // "The Denver Broncos": the article opens the sentence; the name follows it.
            words.remove(0);
            initial = false;
        }
        if !(initial && words.len() == 1) {
            out.push((words, initial));
        }
        i += 1;
    }
    out
}

/// Passage words a name may skip between two of its words ("Barack Obama" in "Barack
/// Hussein Obama", "Football World Cup" in "Football (Soccer) World Cup"): room for a middle
/// name or a bracketed alias; wider gaps would let unrelated capitalised words make up a name.
pub const NAME_GAP: usize = 2;

/// Whether the words of `name` occur in `words` in order, at most [`NAME_GAP`] words apart.
fn contains_name(words: &[String], name: &[String]) -> bool {
    let Some((first, rest)) = name.split_first() else {
        return false;
    };
    words
        .iter()
        .enumerate()
        .filter(|(_, w)| *w == first)
        .any(|(start, _)| {
            let mut at = start;
            rest.iter().all(|next| {
                let window = at + 1..(at + 2 + NAME_GAP).min(words.len());
                match words[window.clone()].iter().position(|w| w == next) {
                    Some(k) => {
                        at = window.start + k;
                        true
                    }
                    None => false,
                }
            })
        })
}

/// Names of the claim that the passage does not contain as a word sequence.
fn entity_failures(claim: &[Token], facts: &Facts) -> Vec<Failure> {
    let found = |words: &[String]| contains_name(&facts.words, words);
    names(claim)
        .into_iter()
        .filter(|(words, initial)| !(found(words) || (*initial && found(&words[1..]))))
        .map(|(words, _)| Failure::Entity {
            name: words.join(" "),
        })
        .collect()
}

// ------------------------------------------------------------------------------------------
// Splitting sentences into clauses

/// Auxiliaries and common irregular past forms: words that are verbs wherever they stand.
const VERBS: [&str; 72] = [
    "is", "was", "are", "were", "be", "been", "has", "have", "had", "do", "does", "did", "can",
    "could", "will", "would", "should", "may", "might", "must", "shall", "became", "began", "won",
    "lost", "made", "took", "gave", "went", "came", "saw", "knew", "left", "led", "held", "built",
    "wrote", "found", "grew", "ran", "met", "fought", "sold", "bought", "brought", "thought",
    "told", "said", "got", "fell", "rose", "spent", "sent", "kept", "paid", "taught", "caught",
    "stood", "chose", "drove", "flew", "spoke", "spread", "struck", "threw", "wore", "remains",
    "remained", "includes", "included", "lies", "lay",
];

/// Subject words that may open a clause of its own.
const SUBJECT_STARTS: [&str; 24] = [
    "he", "she", "it", "they", "we", "i", "you", "this", "these", "those", "there", "the", "a",
    "an", "his", "her", "its", "their", "our", "some", "many", "most", "all", "each",
];

/// Conjunctions a sentence may be split at, with the text around them.
const JOINS: [&str; 7] = [
    "; ",
    ", and ",
    " and ",
    ", but ",
    " but ",
    ", while ",
    ", whereas ",
];

fn is_verb(word: &str) -> bool {
    let word = word.trim_end_matches(|c: char| c.is_ascii_punctuation());
    VERBS.contains(&word)
        || word.ends_with("n't")
        || word.len() >= 4
            && word.ends_with("ed")
            && !word.ends_with("eed")
            && word.bytes().all(|b| b.is_ascii_lowercase())
            && word != "hundred"
}

/// `text` split into clauses by the rule of the module docs, each with whether it opens the
/// sentence (`opens`: whether `text` does).
fn clauses(text: &str, opens: bool) -> Vec<(String, bool)> {
    for (at, join) in joins(text) {
        let (left, right) = (&text[..at], &text[at + join.len()..]);
        if let Some((right, right_opens)) = second_clause(left, join, right) {
            let mut out = vec![(left.to_string(), opens)];
            out.extend(clauses(&right, right_opens && opens));
            return out;
        }
    }
    vec![(text.to_string(), opens)]
}

/// The byte offsets of the conjunctions of `text` outside brackets and quotes, in order.
fn joins(text: &str) -> Vec<(usize, &'static str)> {
    let mut out = Vec::new();
    let (mut depth, mut quoted) = (0i32, false);
    for (at, c) in text.char_indices() {
        match c {
            '(' | '[' => depth += 1,
            ')' | ']' => depth -= 1,
            '"' | '\u{201C}' | '\u{201D}' => quoted = !quoted,
            _ => {}
        }
        if depth > 0 || quoted {
            continue;
        }
        let here = |j: &&&str| {
            text.get(at..at + j.len())
                .is_some_and(|s| s.eq_ignore_ascii_case(j))
        };
        if let Some(join) = JOINS.iter().find(here) {
            if !out.iter().any(|(a, j): &(usize, &str)| a + j.len() > at) {
                out.push((at, *join));
            }
        }
    }
    out
}

/// The second clause to check when `left join right` may be split, else `None`; with whether it
/// starts as the sentence does (a shared subject copied from the first clause).
fn second_clause(left: &str, join: &str, right: &str) -> Option<(String, bool)> {
    let left_words: Vec<String> = strip_citations(left)
        .split_whitespace()
        .map(str::to_string)
        .collect();
    let right_plain = strip_citations(right);
    let right_words: Vec<&str> = right_plain.split_whitespace().collect();
    if left_words.len() < 3 || right_words.len() < 2 {
        return None;
    }
    let verb = left_words.iter().position(|w| is_verb(&w.to_lowercase()))?;
    if join.trim() == ";" {
        return Some((right.trim().to_string(), false));
    }
    let first = right_words[0].to_lowercase();
    if is_verb(&first) {
        let negated = left_words
            .iter()
            .any(|w| is_negation_word(&w.to_lowercase().replace('\'', "")));
        if verb == 0 || negated {
            return None;
        }
        return Some((
            format!("{} {}", left_words[..verb].join(" "), right.trim()),
            true,
        ));
    }
    let opens =
        SUBJECT_STARTS.contains(&first.as_str()) || right_words[0].starts_with(char::is_uppercase);
    let own_verb = right_words
        .iter()
        .take(5)
        .skip(1)
        .take_while(|w| !w.ends_with(','))
        .any(|w| is_verb(&w.to_lowercase()));
    (opens && own_verb).then(|| (right.trim().to_string(), false))
}

/// A claim's text: trimmed, without a trailing comma or semicolon.
fn tidy(text: &str) -> String {
    text.trim()
        .trim_end_matches([',', ';', ':'])
        .trim()
        .to_string()
}

/// The citations written at the very end of `sentence` ("... in 1950 [1][2].").
fn trailing_citations(sentence: &str) -> Vec<usize> {
    let mut rest = sentence.trim_end_matches(|c: char| c.is_whitespace() || ".!?".contains(c));
    let mut out = Vec::new();
    while rest.ends_with(']') {
        let Some(open) = rest.rfind('[') else { break };
        let numbers = citations(&rest[open..]);
        if numbers.is_empty() {
            break;
        }
        out.splice(0..0, numbers);
        rest = rest[..open].trim_end_matches(|c: char| c.is_whitespace() || ".!?".contains(c));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grounded::{OpenBookPrompt, Passage};

    const TRIAL: &str = "In the 2011 trial, the drug did not reduce mortality. It lowered blood \
        pressure in 1,000 patients at a cost of 3.5 million dollars. The study ran from March to \
        June and was led by Anna Berg of the Karolinska Institute in Stockholm.";

    fn failures(claim: &str, passage: &str) -> Vec<Failure> {
        check_claim(claim, passage).failures
    }

    #[test]
    fn a_claim_that_negates_what_the_passage_states_fails() {
        let f = failures("The drug did not lower blood pressure.", TRIAL);
        assert_eq!(
            f,
            [Failure::Negation {
                word: "lower".into(),
                added: true
            }]
        );
        for negated in [
            "The drug never lowered blood pressure.",
            "The drug failed to lower blood pressure.",
            "The drug didn't lower blood pressure.",
        ] {
            assert!(
                matches!(
                    failures(negated, TRIAL)[..],
                    [Failure::Negation { added: true, .. }]
                ),
                "{negated}"
            );
        }
    }

    #[test]
    fn a_claim_that_drops_the_passages_negation_fails() {
        let f = failures("In the 2011 trial, the drug reduced mortality.", TRIAL);
        assert_eq!(
            f,
            [Failure::Negation {
                word: "reduc".into(),
                added: false
            }]
        );
        // Kept negations, in other words, are fine.
        assert!(check_claim("The drug did not reduce mortality.", TRIAL).supported);
        assert!(check_claim("The drug never reduced mortality.", TRIAL).supported);
    }

    #[test]
    fn not_only_and_negations_elsewhere_in_the_sentence_are_no_mismatch() {
        let passage = "The museum is not only large, but it holds 400 paintings. \
            Tesla did not finish his degree, but worked as an engineer in Paris.";
        assert!(check_claim("The museum is large.", passage).supported);
        assert!(check_claim("Tesla worked as an engineer in Paris.", passage).supported);
        // A word the sentence both states and negates decides nothing.
        let both = "The data would be placed in one record, and unused items would not be \
            placed in the database.";
        assert!(check_claim("The data would be placed in one record.", both).supported);
    }

    #[test]
    fn numbers_are_compared_as_values() {
        for same in [
            "It lowered blood pressure in 1000 patients.",
            "It lowered blood pressure in 1,000 patients.",
            "It cost 3.50 million dollars.",
            "It cost 3,500,000 dollars.",
        ] {
            assert!(check_claim(same, TRIAL).supported, "{same}");
        }
        assert_eq!(
            failures("It lowered blood pressure in 1,200 patients.", TRIAL),
            [Failure::Number {
                value: "1,200".into()
            }]
        );
        assert_eq!(
            failures("It cost 3.5 billion dollars.", TRIAL),
            [Failure::Number {
                value: "3.5".into()
            }]
        );
        let spelled = "The team won three titles and lost 2 finals.";
        assert!(check_claim("The team won 3 titles.", spelled).supported);
        assert!(check_claim("The team lost two finals.", spelled).supported);
        assert_eq!(
            failures("The team won four titles.", spelled),
            [Failure::Number {
                value: "four".into()
            }]
        );
        // Numbers count towards coverage as values; framing words do not count.
        let eight = "The Broncos have played in the Super Bowl eight times.";
        assert!(check_claim("The answer to the question is: 8", eight).supported);
        assert!(!check_claim("The answer to the question is: 2", eight).supported);
        // A list item's number is no number of the claim.
        let halftime = "Coldplay was joined by Beyonce and Bruno Mars.";
        assert!(check_text("Beyonce and Bruno Mars\n2.", halftime).supported);
        assert!(!check_text("Beyonce and Bruno Mars won 2.", halftime).supported);
        // "one" is read as a pronoun in a claim.
        assert!(check_claim("The team won one of three titles.", spelled).supported);
    }

    #[test]
    fn years_and_months_absent_from_the_passage_are_dates() {
        assert_eq!(
            failures(
                "In the 2012 trial, the drug did not reduce mortality.",
                TRIAL
            ),
            [Failure::Date {
                value: "2012".into()
            }]
        );
        assert_eq!(
            failures("The study ran from March to July.", TRIAL),
            [Failure::Date {
                value: "July".into()
            }]
        );
        assert!(check_claim("The study ran from March to June.", TRIAL).supported);
        // "May" opening a sentence is the verb.
        assert!(check_claim("May the drug lower blood pressure?", TRIAL).supported);
        let decades = "Sales grew in the 1990s.";
        assert!(check_claim("Sales grew in the 1990s.", decades).supported);
        assert_eq!(
            failures("Sales grew in the 1980s.", decades),
            [Failure::Date {
                value: "1980".into()
            }]
        );
    }

    #[test]
    fn names_must_occur_in_the_passage_as_word_sequences() {
        assert_eq!(
            failures(
                "The study was led by Anna Berg of the Uppsala Institute.",
                TRIAL
            ),
            [Failure::Entity {
                name: "uppsala institute".into()
            }]
        );
        for found in [
            "The study was led by anna berg in Stockholm.",
            "The study was led by Berg.",
            "The study was led by Anna Berg of the Karolinska Institute.",
            // A first word capitalised only because it begins the sentence.
            "Eventually Anna Berg led the study.",
        ] {
            assert!(
                check_claim(found, TRIAL).supported,
                "{found}: {:?}",
                failures(found, TRIAL)
            );
        }
        // A fuller name than the passage gives is not in it.
        assert_eq!(
            failures("The study was led by Anna Maria Berg.", TRIAL),
            [Failure::Entity {
                name: "anna maria berg".into()
            }]
        );
        let gap = "Bern hosted the 1954 Football (Soccer) World Cup Final.";
        assert!(check_claim("Bern hosted the 1954 Football World Cup Final.", gap).supported);
        assert_eq!(
            failures("Bern hosted the 1954 Football World Cup Final.", TRIAL).len(),
            3,
            "coverage, the year, the name (\"Bern\" begins the sentence)"
        );
    }

    #[test]
    fn a_fuller_name_is_absent() {
        let passage = "Tesla moved to New York in 1884.";
        assert!(check_claim("In 1884 Tesla moved to New York.", passage).supported);
        assert_eq!(
            failures("In 1884 Nikola Tesla moved to New York.", passage),
            [Failure::Entity {
                name: "nikola tesla".into()
            }]
        );
    }

    #[test]
    fn coverage_decides_claims_without_hard_failures_and_orders_scores() {
        let unrelated = check_claim("Penguins live mostly in the southern hemisphere.", TRIAL);
        assert!(!unrelated.supported);
        assert!(matches!(unrelated.failures[..], [Failure::Coverage { .. }]));
        let copied = check_claim("The drug did not reduce mortality.", TRIAL);
        assert_eq!((copied.supported, copied.score), (true, 1.0));
        // Every claim is supported exactly when its score reaches the threshold.
        for claim in [
            "The drug did not lower blood pressure.",
            "It lowered blood pressure in 1,200 patients.",
            "Penguins live mostly in the southern hemisphere.",
            "The trial lowered pressure quickly and cheaply overall.",
            "It lowered blood pressure.",
        ] {
            let v = check_claim(claim, TRIAL);
            assert_eq!(v.supported, v.score >= COVERAGE_THRESHOLD, "{claim}: {v:?}");
        }
    }

    #[test]
    fn conjoined_clauses_become_claims_with_their_citations() {
        let claims = split_sentence("Tesla was born in 1856 [1] and died in 1943 [2].", 3);
        let texts: Vec<(&str, &[usize], bool)> = claims
            .iter()
            .map(|c| (c.text.as_str(), &c.citations[..], c.opens_sentence))
            .collect();
        assert_eq!(
            texts,
            [
                ("Tesla was born in 1856", &[1][..], true),
                ("Tesla died in 1943.", &[2][..], true)
            ]
        );
        assert!(claims.iter().all(|c| c.sentence == 3));
        // Citations at the end of the sentence cover every clause without its own.
        let claims = split_sentence("Tesla was born in 1856 and he died in 1943 [2][3].", 0);
        assert_eq!(claims.len(), 2);
        assert_eq!(claims[0].citations, [2, 3]);
        assert_eq!(claims[1].text, "he died in 1943.");
        assert!(!claims[1].opens_sentence);
        let claims = split_sentence("Paris is large; Lyon is smaller [4].", 0);
        assert_eq!(claims.len(), 2);
        assert_eq!(claims[0].citations, [4]);
    }

    #[test]
    fn unsafe_conjunctions_are_not_split() {
        for whole in [
            "Tom and Jerry won the cup.",
            "He studied physics and mathematics in Zurich.",
            "The drug was not tested and approved in 2011.",
            "Prices rose between 1964 and 1973.",
            "He worked (with Edison and Westinghouse) in New York.",
        ] {
            assert_eq!(split_sentence(whole, 0).len(), 1, "{whole}");
        }
    }

    #[test]
    fn a_second_clause_keeps_its_names_checked() {
        // Split off, "Spain" does not begin a sentence and is checked as a name.
        let passage =
            "Her mother lived in Buckingham Palace, and Victoria often refused to see her.";
        let v = check_text(
            "Her mother lived in Buckingham Palace, and Spain often refused to see her.",
            passage,
        );
        assert!(
            v.failures.contains(&Failure::Entity {
                name: "spain".into()
            }),
            "{v:?}"
        );
    }

    fn passages() -> Vec<Passage> {
        let passage = |id: &str, text: &str| Passage {
            doc_id: id.into(),
            title: None,
            text: text.into(),
        };
        vec![
            passage(
                "sb50",
                "The Denver Broncos defeated the Carolina Panthers 24-10 in Super Bowl 50.",
            ),
            passage(
                "venue",
                "The game was played on February 7, 2016, at Levi's Stadium in Santa Clara.",
            ),
        ]
    }

    fn prompt(shown: &[usize]) -> OpenBookPrompt {
        OpenBookPrompt {
            messages: Vec::new(),
            included: shown.to_vec(),
            cut: Vec::new(),
            truncated: None,
            prompt_tokens: 0,
        }
    }

    #[test]
    fn uncited_claims_are_attributed_to_the_passage_that_supports_them() {
        let passages = passages();
        let checked = grounded::check(
            "The Broncos beat the Panthers 24-10. The game was played at Levi's Stadium in 2016 \
             and the Broncos defeated the Panthers.",
            &passages,
            Some(&prompt(&[0, 1])),
        );
        let claims: Vec<(Option<usize>, Option<CitationSource>, bool)> = checked
            .claims
            .iter()
            .map(|c| (c.passage, c.citation, c.supported))
            .collect();
        assert_eq!(
            claims,
            [
                (Some(1), Some(CitationSource::Attributed), true),
                (Some(2), Some(CitationSource::Attributed), true),
                (Some(1), Some(CitationSource::Attributed), true),
            ],
            "{checked:#?}"
        );
        assert!(checked.flagged.is_empty());
        let json = serde_json::to_value(&checked).unwrap();
        assert_eq!(json["claims"][1]["citation"], "attributed");
        assert_eq!(json["claims"][1]["sentence"], 1);
    }

    #[test]
    fn claims_no_passage_supports_are_flagged() {
        let passages = passages();
        let checked = grounded::check(
            "The Broncos beat the Panthers. The Panthers did not lose in 2016.",
            &passages,
            Some(&prompt(&[0, 1])),
        );
        assert_eq!(checked.flagged, [1], "{checked:#?}");
        let unsupported = &checked.claims[1];
        assert_eq!(unsupported.citation, None);
        assert!(!unsupported.supported && !unsupported.failures.is_empty());
        assert!(checked.sentences[0].supported && !checked.sentences[1].supported);
        let json = serde_json::to_value(&checked).unwrap();
        assert_eq!(json["claims"][1]["citation"], serde_json::Value::Null);
    }

    #[test]
    fn cited_claims_are_checked_against_the_passages_they_cite() {
        let passages = passages();
        let prompt = prompt(&[0, 1]);
        // Supported by passage 2, but it cites passage 1.
        let checked = grounded::check(
            "The game was played at Levi's Stadium [1]. The Broncos won 24-10 [1, 2].",
            &passages,
            Some(&prompt),
        );
        assert_eq!(checked.claims[0].passage, Some(1));
        assert_eq!(checked.claims[0].citation, Some(CitationSource::Written));
        assert!(!checked.claims[0].supported);
        assert_eq!(
            checked.claims[1].passage,
            Some(1),
            "the citing passage that supports it"
        );
        assert!(checked.claims[1].supported);
        assert_eq!(checked.flagged, [0]);
        let invalid = grounded::check("The Broncos won [7].", &passages, Some(&prompt));
        assert_eq!(invalid.claims[0].failures, [Failure::InvalidCitation]);
        assert_eq!(invalid.flagged, [0]);
    }

    #[test]
    fn refusals_and_closed_book_answers_have_no_claims() {
        let passages = passages();
        let refusal = format!("The answer {}.", grounded::REFUSAL);
        let checked = grounded::check(&refusal, &passages, Some(&prompt(&[0])));
        assert!(checked.claims.is_empty() && checked.flagged.is_empty());
        let closed = grounded::check("The Broncos won.", &[], None);
        assert!(closed.claims.is_empty());
    }

    /// A judge that supports a claim when the passage contains its last word, and counts calls.
    struct LastWord(std::cell::Cell<usize>);

    impl ClaimJudge for LastWord {
        fn decide(&self, claim: &str, passage: &str) -> Result<ClaimVerdict> {
            self.0.set(self.0.get() + 1);
            let last = claim
                .trim_end_matches('.')
                .split_whitespace()
                .last()
                .unwrap_or_default();
            let supported = passage.contains(last);
            Ok(ClaimVerdict {
                supported,
                score: f64::from(u8::from(supported)),
                failures: if supported {
                    Vec::new()
                } else {
                    vec![Failure::Judge {
                        reason: format!("{last:?} is not in the passage"),
                    }]
                },
            })
        }
    }

    #[test]
    fn a_judge_decides_each_claim_instead_of_the_rules() {
        let passages = passages();
        let judge = LastWord(std::cell::Cell::new(0));
        // The rules would flag "Penguins ... Clara" (coverage); the judge accepts it.
        let checked = grounded::check_judged(
            "Penguins were seen in Santa Clara. The Broncos won the cup [1].",
            &passages,
            Some(&prompt(&[0, 1])),
            &judge,
        )
        .unwrap();
        assert_eq!(
            judge.0.get(),
            3,
            "two passages for the uncited claim, one for the cited"
        );
        assert_eq!(checked.claims[0].passage, Some(2));
        assert_eq!(checked.claims[0].citation, Some(CitationSource::Attributed));
        assert!(!checked.claims[1].supported);
        assert_eq!(
            checked.claims[1].failures,
            [Failure::Judge {
                reason: "\"cup\" is not in the passage".into()
            }]
        );
        assert_eq!(checked.flagged, [1]);
    }

    struct Failing;

    impl ClaimJudge for Failing {
        fn decide(&self, _: &str, _: &str) -> Result<ClaimVerdict> {
            Err(crate::Error::Invalid("the judge is down".into()))
        }
    }

    #[test]
    fn a_judges_error_is_returned() {
        let passages = passages();
        let err =
            grounded::check_judged("The Broncos won.", &passages, Some(&prompt(&[0])), &Failing)
                .unwrap_err();
        assert_eq!(err.to_string(), "the judge is down");
    }

    #[test]
    fn passage_sentences_do_not_end_at_initials_or_abbreviations() {
        let text =
            "It was found by H. J. Round of Marconi Labs in the U.S. Army. It glowed... and \
            faded. Dr. Smith agreed!";
        assert_eq!(
            passage_sentences(text),
            [
                "It was found by H. J. Round of Marconi Labs in the U.S. Army.",
                "It glowed... and faded.",
                "Dr. Smith agreed!"
            ]
        );
    }
}
