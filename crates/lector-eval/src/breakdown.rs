//! Scores broken down by what kind of question was asked: by question type (what, who, when, ...)
//! and by lexical overlap between the question and its context.
//!
//! SQuAD rewards readers that match the question's words against the context (Jia and Liang,
//! 2017; Sugawara et al., 2018): a reader strong on high-overlap questions and weak on the rest
//! matches words more than it reads. The overlap of a question is the largest fraction of its
//! content words (SQuAD-normalised tokens without stopwords and question words) found in one
//! sentence of the context, so 1.0 means some sentence holds every content word of the question.
//!
//! Groups report EM and F1 in percent with percentile-bootstrap intervals; each group's resampling
//! uses the same seed, so a breakdown is reproducible.

use crate::error::{Error, Result};
use crate::normalize::{normalize_answer, tokens_of};
use crate::report::Report;
use crate::squad::{Question, QuestionScore};
use crate::stats::{bootstrap_mean, Bootstrap, Interval};
use rustc_hash::FxHashSet;
use serde::Serialize;

/// A way to split questions into groups.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Facet {
    /// By the question word ([`QuestionType`]).
    Qtype,
    /// By question-context lexical overlap ([`overlap`]), in quantile bins, plus the low-overlap
    /// subset.
    Overlap,
}

impl Facet {
    /// The facet's name, as the CLI and JSON spell it.
    pub fn name(self) -> &'static str {
        match self {
            Facet::Qtype => "qtype",
            Facet::Overlap => "overlap",
        }
    }
}

impl std::str::FromStr for Facet {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<Self, Self::Err> {
        match s {
            "qtype" => Ok(Facet::Qtype),
            "overlap" => Ok(Facet::Overlap),
            _ => Err(format!("unknown breakdown `{s}` (qtype or overlap)")),
        }
    }
}

/// The kind of a question, by its first question word.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub enum QuestionType {
    What,
    Who,
    When,
    Where,
    Why,
    How,
    /// "how many" and "how much": a quantity.
    HowMany,
    Which,
    /// No question word ("Name the ...", yes/no questions).
    Other,
}

/// Question types in report order.
pub const QUESTION_TYPES: [QuestionType; 9] = [
    QuestionType::What,
    QuestionType::Who,
    QuestionType::When,
    QuestionType::Where,
    QuestionType::Why,
    QuestionType::How,
    QuestionType::HowMany,
    QuestionType::Which,
    QuestionType::Other,
];

impl QuestionType {
    /// The type's label in reports.
    pub fn label(self) -> &'static str {
        match self {
            QuestionType::What => "what",
            QuestionType::Who => "who",
            QuestionType::When => "when",
            QuestionType::Where => "where",
            QuestionType::Why => "why",
            QuestionType::How => "how",
            QuestionType::HowMany => "how many",
            QuestionType::Which => "which",
            QuestionType::Other => "other",
        }
    }
}

/// The type of `question`: its first question word wherever it stands ("In what year ..." is a
/// what-question), "whom"/"whose" counting as who, "how many"/"how much" as how many.
pub fn question_type(question: &str) -> QuestionType {
    let words: Vec<String> = question
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect();
    for (i, word) in words.iter().enumerate() {
        let kind = match word.as_str() {
            "what" => QuestionType::What,
            "who" | "whom" | "whose" => QuestionType::Who,
            "when" => QuestionType::When,
            "where" => QuestionType::Where,
            "why" => QuestionType::Why,
            "which" => QuestionType::Which,
            "how" => match words.get(i + 1).map(String::as_str) {
                Some("many" | "much") => QuestionType::HowMany,
                _ => QuestionType::How,
            },
            _ => continue,
        };
        return kind;
    }
    QuestionType::Other
}

/// Function words and question words, which say nothing about where an answer is.
const STOPWORDS: &[&str] = &[
    "about", "after", "all", "also", "and", "any", "are", "as", "at", "be", "been", "before",
    "being", "between", "both", "but", "by", "can", "could", "did", "do", "does", "during", "each",
    "for", "from", "had", "has", "have", "he", "her", "him", "his", "how", "i", "if", "in", "into",
    "is", "it", "its", "many", "more", "most", "much", "not", "of", "on", "one", "only", "or",
    "other", "over", "she", "so", "some", "such", "than", "that", "their", "them", "then", "there",
    "these", "they", "this", "those", "through", "to", "under", "up", "was", "we", "were", "what",
    "when", "where", "which", "while", "who", "whom", "whose", "why", "will", "with", "would",
    "you",
];

fn content_words(text: &str) -> FxHashSet<String> {
    tokens_of(&normalize_answer(text))
        .into_iter()
        .filter(|w| !STOPWORDS.contains(w))
        .map(str::to_string)
        .collect()
}

/// Byte offsets just after each ".", "!" or "?" that whitespace follows: where sentences end.
pub(crate) fn sentence_ends(text: &str) -> Vec<usize> {
    let mut ends = Vec::new();
    let mut chars = text.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        if matches!(c, '.' | '!' | '?') && chars.peek().is_some_and(|(_, n)| n.is_whitespace()) {
            ends.push(i + 1);
        }
    }
    ends
}

/// The context's sentences, split at [`sentence_ends`].
fn sentences(context: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    for end in sentence_ends(context) {
        out.push(&context[start..end]);
        start = end;
    }
    out.push(&context[start..]);
    out
}

/// Question-context lexical overlap in [0, 1]: the largest fraction of the question's content
/// words that one sentence of `context` contains. A question without content words has overlap 0.
pub fn overlap(question: &str, context: &str) -> f64 {
    let wanted = content_words(question);
    if wanted.is_empty() {
        return 0.0;
    }
    let best = sentences(context)
        .into_iter()
        .map(|sentence| {
            let words: FxHashSet<String> = tokens_of(&normalize_answer(sentence))
                .into_iter()
                .map(str::to_string)
                .collect();
            wanted.iter().filter(|w| words.contains(*w)).count()
        })
        .max()
        .unwrap_or(0);
    best as f64 / wanted.len() as f64
}

/// The scores of one group of questions.
#[derive(Debug, Clone, Serialize)]
pub struct Group {
    /// What the group holds: a question type, an overlap range, or "low (< t)".
    pub label: String,
    pub questions: usize,
    /// Exact match in percent, with its interval.
    pub exact_match: Interval,
    /// F1 in percent, with its interval.
    pub f1: Interval,
}

/// One facet's groups, in report order.
#[derive(Debug, Clone, Serialize)]
pub struct Breakdown {
    pub by: Facet,
    pub groups: Vec<Group>,
}

/// How overlap groups are formed.
#[derive(Debug, Clone, Copy)]
pub struct OverlapBins {
    /// Number of quantile bins (4: quartiles). Tied overlaps share a bin, so bins can be fewer.
    pub bins: usize,
    /// Questions with overlap below this also form the low-overlap group.
    pub low: f64,
}

impl Default for OverlapBins {
    fn default() -> Self {
        OverlapBins { bins: 4, low: 0.5 }
    }
}

impl Breakdown {
    /// The column names of [`Breakdown::rows`].
    pub fn header(&self) -> [&'static str; 4] {
        let first = match self.by {
            Facet::Qtype => "question type",
            Facet::Overlap => "overlap",
        };
        [first, "questions", "EM (%)", "F1 (%)"]
    }

    /// One row per group: label, count, EM and F1 with their intervals.
    pub fn rows(&self) -> Vec<Vec<String>> {
        let shown = |i: &Interval| format!("{:.2} [{:.2}, {:.2}]", i.mean, i.low, i.high);
        self.groups
            .iter()
            .map(|g| {
                vec![
                    g.label.clone(),
                    g.questions.to_string(),
                    shown(&g.exact_match),
                    shown(&g.f1),
                ]
            })
            .collect()
    }

    /// Adds the breakdown to an HTML report as a table.
    pub fn add_to(&self, report: &mut Report) {
        let heading = match self.by {
            Facet::Qtype => "By question type",
            Facet::Overlap => "By question-context lexical overlap",
        };
        report.table(heading, &self.header(), &self.rows());
    }
}

/// Breakdowns as JSON: `{facet name: [group, ...]}`.
pub fn to_json(breakdowns: &[Breakdown]) -> serde_json::Value {
    breakdowns
        .iter()
        .map(|b| (b.by.name().to_string(), serde_json::json!(b.groups)))
        .collect::<serde_json::Map<_, _>>()
        .into()
}

/// [`breakdown`] by each of `facets`, in order, a repeated facet once.
pub fn breakdowns(
    facets: &[Facet],
    questions: &[Question],
    scores: &[QuestionScore],
    bins: OverlapBins,
    settings: &Bootstrap,
) -> Result<Vec<Breakdown>> {
    let mut seen = Vec::new();
    for &facet in facets {
        if !seen.contains(&facet) {
            seen.push(facet);
        }
    }
    seen.into_iter()
        .map(|facet| breakdown(facet, questions, scores, bins, settings))
        .collect()
}

/// `scores` (one per question of `questions`, in the same order, as [`crate::squad::evaluate`]
/// returns them) broken down by `facet`. Empty groups are left out. Overlap needs every
/// question's context paragraph (SQuAD data has them; question lists such as NQ-open do not).
pub fn breakdown(
    facet: Facet,
    questions: &[Question],
    scores: &[QuestionScore],
    bins: OverlapBins,
    settings: &Bootstrap,
) -> Result<Breakdown> {
    if questions.len() != scores.len() {
        return Err(Error::Mismatch(format!(
            "{} questions but {} scores",
            questions.len(),
            scores.len()
        )));
    }
    if facet == Facet::Overlap {
        if let Some(q) = questions.iter().find(|q| q.context.trim().is_empty()) {
            return Err(Error::Mismatch(format!(
                "the overlap breakdown needs each question's context paragraph, and question `{}` has none",
                q.id
            )));
        }
    }
    let members: Vec<(String, Vec<usize>)> = match facet {
        Facet::Qtype => by_type(questions),
        Facet::Overlap => by_overlap(questions, bins),
    };
    let groups = members
        .into_iter()
        .filter(|(_, indices)| !indices.is_empty())
        .map(|(label, indices)| {
            let em: Vec<f64> = indices.iter().map(|&i| scores[i].em).collect();
            let f1: Vec<f64> = indices.iter().map(|&i| scores[i].f1).collect();
            Group {
                label,
                questions: indices.len(),
                exact_match: bootstrap_mean(&em, settings).scaled(100.0),
                f1: bootstrap_mean(&f1, settings).scaled(100.0),
            }
        })
        .collect();
    Ok(Breakdown { by: facet, groups })
}

fn by_type(questions: &[Question]) -> Vec<(String, Vec<usize>)> {
    let types: Vec<QuestionType> = questions
        .iter()
        .map(|q| question_type(&q.question))
        .collect();
    QUESTION_TYPES
        .iter()
        .map(|&kind| {
            let indices = (0..questions.len()).filter(|&i| types[i] == kind).collect();
            (kind.label().to_string(), indices)
        })
        .collect()
}

fn by_overlap(questions: &[Question], bins: OverlapBins) -> Vec<(String, Vec<usize>)> {
    let values: Vec<f64> = questions
        .iter()
        .map(|q| overlap(&q.question, &q.context))
        .collect();
    let mut sorted = values.clone();
    sorted.sort_by(f64::total_cmp);
    let mut groups = Vec::new();
    let mut lower = f64::NEG_INFINITY;
    for b in 1..=bins.bins.max(1) {
        // The upper edge of bin b is the value at quantile b/bins (nearest rank); a value equal
        // to an edge belongs to the lower bin, so ties never straddle two bins.
        let Some(&upper) = sorted.get((b * sorted.len()).div_ceil(bins.bins.max(1)).max(1) - 1)
        else {
            break;
        };
        if upper <= lower {
            continue;
        }
        let indices: Vec<usize> = (0..values.len())
            .filter(|&i| values[i] > lower && values[i] <= upper)
            .collect();
        let low_edge = indices
            .iter()
            .map(|&i| values[i])
            .fold(f64::INFINITY, f64::min);
        groups.push((format!("[{low_edge:.2}, {upper:.2}]"), indices));
        lower = upper;
    }
    let low: Vec<usize> = (0..values.len())
        .filter(|&i| values[i] < bins.low)
        .collect();
    groups.push((format!("low (< {:.2})", bins.low), low));
    groups
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn question_types_follow_the_first_question_word() {
        let cases = [
            ("What is the capital of France?", QuestionType::What),
            ("In what year did it end?", QuestionType::What),
            ("Whose army won?", QuestionType::Who),
            ("How many people live there?", QuestionType::HowMany),
            ("How much did it cost?", QuestionType::HowMany),
            ("How did it fall?", QuestionType::How),
            ("Which river runs through it?", QuestionType::Which),
            ("When was it built, and where?", QuestionType::When),
            ("Name the king.", QuestionType::Other),
            ("Somewhat odd phrasing", QuestionType::Other),
        ];
        for (question, want) in cases {
            assert_eq!(question_type(question), want, "{question}");
        }
    }

    #[test]
    fn overlap_is_the_best_sentence_share_of_content_words() {
        let context = "The tower was built in 1889. Gustave Eiffel's company designed the tower.";
        // Content words: company, designed, eiffels, tower, all in the second sentence.
        assert_eq!(
            overlap("Which company designed Eiffel's tower?", context),
            1.0
        );
        // built, tower in the first sentence; paris nowhere: 2 of 3.
        let share = overlap("When was the tower in Paris built?", context);
        assert!((share - 2.0 / 3.0).abs() < 1e-12, "{share}");
        // Words split across sentences do not add up.
        let split = overlap("Who built Eiffel's company?", context);
        assert!((split - 2.0 / 3.0).abs() < 1e-12, "{split}");
        assert_eq!(overlap("What is it?", context), 0.0);
    }

    fn question(text: &str, context: &str) -> Question {
        Question {
            id: text.to_string(),
            question: text.to_string(),
            answers: vec!["x".into()],
            context: Arc::from(context),
            title: Arc::from("t"),
        }
    }

    fn score(f1: f64) -> QuestionScore {
        QuestionScore {
            id: String::new(),
            prediction: Some(String::new()),
            best_gold: String::new(),
            em: if f1 == 1.0 { 1.0 } else { 0.0 },
            f1,
            has_ans: true,
            na_prob: None,
        }
    }

    #[test]
    fn groups_average_their_own_questions() {
        let context = "Alpha beta gamma delta.";
        let questions = [
            question("What alpha beta?", context),          // overlap 1
            question("Who alpha zeta?", context),           // 0.5
            question("What zeta eta theta iota?", context), // 0
            question("Why alpha beta gamma?", context),     // 1
        ];
        let scores = [score(1.0), score(0.5), score(0.0), score(1.0)];
        let settings = Bootstrap::default();
        let types = breakdown(
            Facet::Qtype,
            &questions,
            &scores,
            OverlapBins::default(),
            &settings,
        )
        .unwrap();
        let labels: Vec<(&str, usize, f64)> = types
            .groups
            .iter()
            .map(|g| (g.label.as_str(), g.questions, g.f1.mean))
            .collect();
        assert_eq!(
            labels,
            [("what", 2, 50.0), ("who", 1, 50.0), ("why", 1, 100.0)]
        );

        let bins = OverlapBins { bins: 4, low: 0.5 };
        let by_overlap = breakdown(Facet::Overlap, &questions, &scores, bins, &settings).unwrap();
        let labels: Vec<(&str, usize, f64)> = by_overlap
            .groups
            .iter()
            .map(|g| (g.label.as_str(), g.questions, g.exact_match.mean))
            .collect();
        // Quartile edges 0, 0.5, 1, 1: the tied top values form one bin.
        assert_eq!(
            labels,
            [
                ("[0.00, 0.00]", 1, 0.0),
                ("[0.50, 0.50]", 1, 0.0),
                ("[1.00, 1.00]", 2, 100.0),
                ("low (< 0.50)", 1, 0.0),
            ]
        );
        let json = to_json(&[by_overlap]);
        assert_eq!(json["overlap"][2]["questions"], 2);
        assert_eq!(json["overlap"][2]["f1"]["mean"], 100.0);
    }

    #[test]
    fn overlap_without_contexts_is_refused() {
        let questions = [question("Who won?", "")];
        let err = breakdown(
            Facet::Overlap,
            &questions,
            &[score(1.0)],
            OverlapBins::default(),
            &Bootstrap::default(),
        )
        .unwrap_err();
        assert!(
            err.to_string().contains("question `Who won?` has none"),
            "{err}"
        );
    }
}
