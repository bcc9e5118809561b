//! ROUGE-1, ROUGE-2, ROUGE-L and ROUGE-Lsum, identical to Google's `rouge-score` 0.1.2
//! (`rouge_score.rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL", "rougeLsum"])`).
//!
//! - Tokens: lowercase, every run of characters outside `[a-z0-9]` becomes a separator, and with
//!   stemming on, tokens longer than three characters go through NLTK's Porter stemmer.
//! - ROUGE-1/2: clipped n-gram overlap (precision over the prediction's n-grams, recall over the
//!   reference's). ROUGE-L: longest common subsequence of the whole token sequences.
//! - ROUGE-Lsum: summary-level LCS; sentences are the non-empty lines (split on `\n`), each
//!   reference sentence is matched against the union of its LCSs with all prediction
//!   sentences, and a token is counted at most as often as it occurs on both sides.
//! - Several references: for each ROUGE type separately, the scores of the reference with the
//!   highest F-measure (the first one on ties), like `RougeScorer.score_multi`.
//! - Empty inputs score 0 (precision, recall and F-measure), never NaN.
//!
//! The scores are bit-for-bit those of the Python package; the parity test checks it.

mod porter;

use crate::error::Result;
use crate::input;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::path::Path;

/// Precision, recall and their harmonic mean for one ROUGE type.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Score {
    /// Matches over the size of the prediction.
    pub precision: f64,
    /// Matches over the size of the reference.
    pub recall: f64,
    /// `2PR / (P + R)`, 0 when both are 0.
    pub fmeasure: f64,
}

impl Score {
    const ZERO: Score = Score {
        precision: 0.0,
        recall: 0.0,
        fmeasure: 0.0,
    };

    /// `matches / max(predicted, 1)` and `matches / max(reference, 1)`, as `rouge-score` does.
    fn from_counts(matches: usize, predicted: usize, reference: usize) -> Score {
        let precision = matches as f64 / predicted.max(1) as f64;
        let recall = matches as f64 / reference.max(1) as f64;
        let fmeasure = if precision + recall > 0.0 {
            2.0 * precision * recall / (precision + recall)
        } else {
            0.0
        };
        Score {
            precision,
            recall,
            fmeasure,
        }
    }
}

/// The four ROUGE scores of one prediction.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct RougeScores {
    /// Unigram overlap.
    pub rouge1: Score,
    /// Bigram overlap.
    pub rouge2: Score,
    /// Longest common subsequence of the whole texts.
    #[serde(rename = "rougeL")]
    pub rouge_l: Score,
    /// Summary-level LCS over the lines of the texts.
    #[serde(rename = "rougeLsum")]
    pub rouge_lsum: Score,
}

impl RougeScores {
    const ZERO: RougeScores = RougeScores {
        rouge1: Score::ZERO,
        rouge2: Score::ZERO,
        rouge_l: Score::ZERO,
        rouge_lsum: Score::ZERO,
    };
}

/// Scores predictions against references; `stem` turns on Porter stemming
/// (`use_stemmer=True` in `rouge-score`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RougeScorer {
    stem: bool,
}

impl RougeScorer {
    /// A scorer with or without Porter stemming.
    pub fn new(stem: bool) -> Self {
        RougeScorer { stem }
    }

    /// ROUGE-1/2/L/Lsum of `prediction` against the best of `references` (per type, the
    /// reference with the highest F-measure, the first one on ties). With no references at all
    /// every score is 0 (`rouge-score` raises an error there).
    pub fn score(&self, prediction: &str, references: &[impl AsRef<str>]) -> RougeScores {
        let mut vocabulary = Vocabulary::default();
        let prediction = Text::new(prediction, self.stem, &mut vocabulary);
        let prediction_unigrams = ngram_counts(&prediction.tokens, 1);
        let prediction_bigrams = ngram_counts(&prediction.tokens, 2);
        let mut lcs = LcsWorkspace::default();
        let mut best: Option<RougeScores> = None;
        for reference in references {
            let reference = Text::new(reference.as_ref(), self.stem, &mut vocabulary);
            let scores = RougeScores {
                rouge1: ngram_score(&reference.tokens, &prediction_unigrams, 1),
                rouge2: ngram_score(&reference.tokens, &prediction_bigrams, 2),
                rouge_l: Score::from_counts(
                    lcs_length(&reference.tokens, &prediction.tokens),
                    prediction.tokens.len(),
                    reference.tokens.len(),
                ),
                rouge_lsum: summary_lcs(&reference, &prediction, &mut lcs),
            };
            best = Some(match best {
                None => scores,
                Some(best) => RougeScores {
                    rouge1: better(best.rouge1, scores.rouge1),
                    rouge2: better(best.rouge2, scores.rouge2),
                    rouge_l: better(best.rouge_l, scores.rouge_l),
                    rouge_lsum: better(best.rouge_lsum, scores.rouge_lsum),
                },
            });
        }
        best.unwrap_or(RougeScores::ZERO)
    }
}

/// `candidate` if its F-measure is strictly higher (numpy's argmax keeps the first maximum).
fn better(best: Score, candidate: Score) -> Score {
    if candidate.fmeasure > best.fmeasure {
        candidate
    } else {
        best
    }
}

/// The tokens `rouge-score`'s default tokenizer produces: lowercase, split on every run of
/// characters outside `[a-z0-9]`, and with `stem`, Porter-stem the tokens longer than three
/// characters.
pub fn tokenize(text: &str, stem: bool) -> Vec<String> {
    let mut tokens = Vec::new();
    tokenize_into(text, stem, |token| tokens.push(token.to_string()));
    tokens
}

fn tokenize_into(text: &str, stem: bool, mut emit: impl FnMut(&str)) {
    // Python's str.lower(): only the ASCII letters and digits it yields survive (e.g. U+0130
    // gives "i", U+212A "k").
    let lower = crate::normalize::lowercase(text);
    for piece in lower.split(|c: char| !(c.is_ascii_lowercase() || c.is_ascii_digit())) {
        if piece.is_empty() {
            continue;
        }
        if stem && piece.len() > 3 {
            let stemmed = porter::stem(piece);
            // rouge-score keeps only tokens matching ^[a-z0-9]+$; stems always do, but check.
            if !stemmed.is_empty()
                && stemmed
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
            {
                emit(&stemmed);
            }
        } else {
            emit(piece);
        }
    }
}

/// Token ids shared by the prediction and its references, so comparisons are integer ones.
#[derive(Default)]
struct Vocabulary {
    ids: HashMap<String, u32>,
}

impl Vocabulary {
    fn id(&mut self, token: &str) -> u32 {
        if let Some(&id) = self.ids.get(token) {
            return id;
        }
        let id = u32::try_from(self.ids.len()).expect("fewer than 2^32 distinct tokens");
        self.ids.insert(token.to_string(), id);
        id
    }
}

/// A tokenized text: all its tokens, and where each of its sentences ends among them.
struct Text {
    tokens: Vec<u32>,
    /// `(start, end)` token ranges of the non-empty lines (`text.split("\n")` minus empty
    /// strings); a line without tokens gives an empty range. The whole text tokenizes to the
    /// concatenation of its lines' tokens since `\n` is a separator anyway.
    sentences: Vec<(usize, usize)>,
}

impl Text {
    fn new(text: &str, stem: bool, vocabulary: &mut Vocabulary) -> Text {
        let mut tokens = Vec::new();
        let mut sentences = Vec::new();
        for line in text.split('\n').filter(|line| !line.is_empty()) {
            let start = tokens.len();
            tokenize_into(line, stem, |token| tokens.push(vocabulary.id(token)));
            sentences.push((start, tokens.len()));
        }
        Text { tokens, sentences }
    }

    fn sentence(&self, i: usize) -> &[u32] {
        let (start, end) = self.sentences[i];
        &self.tokens[start..end]
    }
}

fn ngram_counts(tokens: &[u32], n: usize) -> HashMap<&[u32], usize> {
    let mut counts = HashMap::new();
    for ngram in tokens.windows(n) {
        *counts.entry(ngram).or_insert(0) += 1;
    }
    counts
}

fn ngram_score(reference: &[u32], prediction: &HashMap<&[u32], usize>, n: usize) -> Score {
    let reference = ngram_counts(reference, n);
    let matches: usize = reference
        .iter()
        .map(|(ngram, &count)| count.min(prediction.get(ngram).copied().unwrap_or(0)))
        .sum();
    Score::from_counts(matches, prediction.values().sum(), reference.values().sum())
}

/// Length of a longest common subsequence, with one rolling row over the shorter sequence.
fn lcs_length(a: &[u32], b: &[u32]) -> usize {
    let (long, short) = if a.len() >= b.len() { (a, b) } else { (b, a) };
    let mut row = vec![0u32; short.len() + 1];
    for &x in long {
        let mut diagonal = 0;
        for (j, &y) in short.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = if x == y {
                diagonal + 1
            } else {
                above.max(row[j])
            };
            diagonal = above;
        }
    }
    row[short.len()] as usize
}

/// A reusable LCS table for the backtracking that ROUGE-Lsum needs.
#[derive(Default)]
struct LcsWorkspace {
    table: Vec<u32>,
    indices: Vec<usize>,
}

impl LcsWorkspace {
    /// Marks in `in_union` the positions of `reference` on the LCS with `candidate` that
    /// `rouge-score`'s `_backtrack_norec` reads out (its tie-breaking decides which one).
    fn mark_lcs(&mut self, reference: &[u32], candidate: &[u32], in_union: &mut [bool]) {
        let width = candidate.len() + 1;
        self.table.clear();
        self.table.resize((reference.len() + 1) * width, 0);
        let t = &mut self.table;
        for (i, &r) in reference.iter().enumerate() {
            for (j, &c) in candidate.iter().enumerate() {
                t[(i + 1) * width + j + 1] = if r == c {
                    t[i * width + j] + 1
                } else {
                    t[i * width + j + 1].max(t[(i + 1) * width + j])
                };
            }
        }
        self.indices.clear();
        let (mut i, mut j) = (reference.len(), candidate.len());
        while i > 0 && j > 0 {
            if reference[i - 1] == candidate[j - 1] {
                self.indices.push(i - 1);
                i -= 1;
                j -= 1;
            } else if t[i * width + j - 1] > t[(i - 1) * width + j] {
                j -= 1;
            } else {
                i -= 1;
            }
        }
        for &index in &self.indices {
            in_union[index] = true;
        }
    }
}

/// ROUGE-Lsum as `rouge_scorer._summary_level_lcs` computes it.
fn summary_lcs(reference: &Text, prediction: &Text, workspace: &mut LcsWorkspace) -> Score {
    let (m, n) = (reference.tokens.len(), prediction.tokens.len());
    if m == 0 || n == 0 {
        return Score::ZERO;
    }
    let mut reference_counts: HashMap<u32, usize> = HashMap::new();
    for &token in &reference.tokens {
        *reference_counts.entry(token).or_insert(0) += 1;
    }
    let mut prediction_counts: HashMap<u32, usize> = HashMap::new();
    for &token in &prediction.tokens {
        *prediction_counts.entry(token).or_insert(0) += 1;
    }
    let mut hits = 0;
    let mut in_union = Vec::new();
    for r in 0..reference.sentences.len() {
        let sentence = reference.sentence(r);
        in_union.clear();
        in_union.resize(sentence.len(), false);
        for c in 0..prediction.sentences.len() {
            workspace.mark_lcs(sentence, prediction.sentence(c), &mut in_union);
        }
        // The union in reference order; each token counts at most as often as it is left on
        // both sides (ROUGE-1.5.5's guard against double counting).
        for (&token, _) in sentence.iter().zip(&in_union).filter(|(_, &marked)| marked) {
            let left_r = reference_counts.get_mut(&token).expect("counted");
            let left_c = prediction_counts.entry(token).or_insert(0);
            if *left_r > 0 && *left_c > 0 {
                hits += 1;
                *left_r -= 1;
                *left_c -= 1;
            }
        }
    }
    Score::from_counts(hits, n, m)
}

/// One line of a ROUGE input file: `{"id": ..., "prediction": ..., "references": [...]}`.
/// Other fields are ignored.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct RougeItem {
    /// Identifies the item in reports and errors.
    pub id: String,
    /// The generated text.
    pub prediction: String,
    /// One or more reference texts.
    pub references: Vec<String>,
}

/// Reads a JSONL file of [`RougeItem`]s; errors name the file, line and column. An item
/// without references is an [`crate::Error::Invalid`] naming its id and line.
pub fn read_items(path: &Path) -> Result<Vec<RougeItem>> {
    let items: Vec<RougeItem> = input::read_jsonl(path)?;
    if let Some(k) = items.iter().position(|item| item.references.is_empty()) {
        // read_jsonl skips blank lines, so the item's line is that of the k-th non-blank one.
        let line = input::read_text(path).ok().and_then(|text| {
            text.lines()
                .enumerate()
                .filter(|(_, line)| !line.trim().is_empty())
                .nth(k)
                .map(|(i, _)| i + 1)
        });
        let place = match line {
            Some(line) => format!("line {line}"),
            None => format!("item {}", k + 1),
        };
        return Err(input::invalid(
            path,
            format!("{place}: item {:?} has no references", items[k].id),
        ));
    }
    Ok(items)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn close(score: Score, precision: f64, recall: f64, fmeasure: f64) {
        let ok = (score.precision - precision).abs() < 1e-12
            && (score.recall - recall).abs() < 1e-12
            && (score.fmeasure - fmeasure).abs() < 1e-12;
        assert!(ok, "{score:?} != ({precision}, {recall}, {fmeasure})");
    }

    fn f(p: f64, r: f64) -> f64 {
        2.0 * p * r / (p + r)
    }

    #[test]
    fn tokenizes_like_rouge_score() {
        assert_eq!(
            tokenize("İSTANBUL Kelvin 3.5 café", false),
            ["i", "stanbul", "kelvin", "3", "5", "caf"]
        );
        assert_eq!(
            tokenize("The dogs' running-shoes!", true),
            ["the", "dog", "run", "shoe"]
        );
        // Tokens of three characters or fewer are never stemmed.
        assert_eq!(tokenize("was ies flies", true), ["was", "ies", "fli"]);
        assert!(tokenize(" ... \n--- ", true).is_empty());
    }

    #[test]
    fn hand_computed_single_reference() {
        let scores = RougeScorer::new(false).score(
            "the cat was found under the bed",
            &["the cat was under the bed"],
        );
        close(scores.rouge1, 6.0 / 7.0, 1.0, f(6.0 / 7.0, 1.0));
        close(scores.rouge2, 4.0 / 6.0, 4.0 / 5.0, f(4.0 / 6.0, 4.0 / 5.0));
        close(scores.rouge_l, 6.0 / 7.0, 1.0, f(6.0 / 7.0, 1.0));
        close(scores.rouge_lsum, 6.0 / 7.0, 1.0, f(6.0 / 7.0, 1.0));
    }

    #[test]
    fn stemming_conflates_inflections() {
        let plain = RougeScorer::new(false).score("running dogs", &["the dog runs"]);
        assert_eq!(plain, RougeScores::ZERO);
        let stemmed = RougeScorer::new(true).score("running dogs", &["the dog runs"]);
        close(stemmed.rouge1, 1.0, 2.0 / 3.0, 0.8);
        close(stemmed.rouge2, 0.0, 0.0, 0.0);
        // [run, dog] against [the, dog, run]: the LCS has one token.
        close(stemmed.rouge_l, 0.5, 1.0 / 3.0, 0.4);
    }

    #[test]
    fn lsum_unions_the_lcs_of_each_line() {
        // ROUGE-L on "a b c d e" vs "a c e b d" finds 3 of 5; per line, "a b c" gets a c (from
        // "a c e") and b (from "b d"), "d e" gets e and d: all 5.
        let scores = RougeScorer::new(false).score("a c e\nb d", &["a b c\nd e"]);
        close(scores.rouge_l, 0.6, 0.6, 0.6);
        close(scores.rouge_lsum, 1.0, 1.0, 1.0);
        close(scores.rouge2, 0.0, 0.0, 0.0);
    }

    #[test]
    fn lsum_backtracking_quirk_is_kept() {
        // Both prediction lines match the *last* "a" of the reference line, so the union has
        // one token: 1 hit out of 2, as in rouge-score.
        let scores = RougeScorer::new(false).score("a\na", &["a a"]);
        close(scores.rouge1, 1.0, 1.0, 1.0);
        close(scores.rouge_l, 1.0, 1.0, 1.0);
        close(scores.rouge_lsum, 0.5, 0.5, 0.5);
    }

    #[test]
    fn empty_inputs_score_zero() {
        let scorer = RougeScorer::new(true);
        assert_eq!(scorer.score("", &["some words"]), RougeScores::ZERO);
        assert_eq!(scorer.score("some words", &[""]), RougeScores::ZERO);
        assert_eq!(scorer.score("!!!", &["...\n\n"]), RougeScores::ZERO);
        assert_eq!(
            scorer.score("some words", &[] as &[&str]),
            RougeScores::ZERO
        );
        // One token: no bigrams, so ROUGE-2 is 0 even for an exact match.
        let single = scorer.score("word", &["word"]);
        close(single.rouge1, 1.0, 1.0, 1.0);
        close(single.rouge2, 0.0, 0.0, 0.0);
    }

    #[test]
    fn each_type_takes_its_best_reference() {
        let scores = RougeScorer::new(false).score("a b c d", &["d c b a", "a b x y"]);
        close(scores.rouge1, 1.0, 1.0, 1.0); // first reference
        close(scores.rouge2, 1.0 / 3.0, 1.0 / 3.0, 1.0 / 3.0); // second
        close(scores.rouge_l, 0.5, 0.5, 0.5); // second
                                              // Ties keep the first reference.
        let tie = RougeScorer::new(false).score("a b", &["a c", "b c"]);
        let first = RougeScorer::new(false).score("a b", &["a c"]);
        assert_eq!(tie, first);
    }

    /// ROUGE rewards word overlap, not meaning: a claim and its negation score high.
    #[test]
    fn a_reversed_claim_still_scores_high() {
        let reference = "the drug reduced mortality in the trial";
        let prediction = "the drug did not reduce mortality in the trial";
        let plain = RougeScorer::new(false).score(prediction, &[reference]);
        // LCS "the drug mortality in the trial": 6 of 9 predicted, 6 of 7 reference tokens.
        close(plain.rouge_l, 6.0 / 9.0, 6.0 / 7.0, 0.75);
        close(plain.rouge1, 6.0 / 9.0, 6.0 / 7.0, 0.75);
        close(plain.rouge2, 4.0 / 8.0, 4.0 / 6.0, f(0.5, 4.0 / 6.0));
        // With stemming "reduced" and "reduce" both become "reduc": 7 of 9 and 7 of 7.
        let stemmed = RougeScorer::new(true).score(prediction, &[reference]);
        close(stemmed.rouge_l, 7.0 / 9.0, 1.0, 0.875);
        close(
            stemmed.rouge2,
            5.0 / 8.0,
            5.0 / 6.0,
            f(5.0 / 8.0, 5.0 / 6.0),
        );
        assert!(plain.rouge_l.fmeasure > 0.7 && stemmed.rouge_l.fmeasure > 0.7);
    }

    #[test]
    fn serializes_with_rouge_score_names() {
        let scores = RougeScorer::new(false).score("a b", &["a b"]);
        let json = serde_json::to_value(scores).unwrap();
        let keys: Vec<&str> = json
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(keys, ["rouge1", "rouge2", "rougeL", "rougeLsum"]);
        assert_eq!(
            json["rougeL"],
            serde_json::json!({"precision": 1.0, "recall": 1.0, "fmeasure": 1.0})
        );
    }

    #[test]
    fn lcs_length_matches_the_full_table() {
        let a = [1, 2, 3, 2, 4, 1, 2];
        let b = [2, 4, 3, 1, 2, 1];
        assert_eq!(lcs_length(&a, &b), 4);
        assert_eq!(lcs_length(&b, &a), 4);
        assert_eq!(lcs_length(&a, &[]), 0);
    }

    fn temp_file(name: &str, contents: &[u8]) -> std::path::PathBuf {
        use std::sync::atomic::{AtomicUsize, Ordering};
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let path = std::env::temp_dir().join(format!(
            "lector-rouge-{}-{}-{name}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::write(&path, contents).unwrap();
        path
    }

    #[test]
    fn reads_items_and_reports_bad_ones() {
        let good = temp_file(
            "good.jsonl",
            b"{\"id\": \"q1\", \"prediction\": \"a\", \"references\": [\"a\", \"b\"], \"x\": 1}\n\n\
              {\"id\": \"q2\", \"prediction\": \"\", \"references\": [\"\"]}\n",
        );
        let items = read_items(&good).unwrap();
        assert_eq!(items.len(), 2);
        assert_eq!(items[0].references, ["a", "b"]);

        let no_refs = temp_file(
            "norefs.jsonl",
            b"{\"id\": \"q1\", \"prediction\": \"a\", \"references\": [\"a\"]}\n\n\
              {\"id\": \"q2\", \"prediction\": \"a\", \"references\": []}\n",
        );
        let message = read_items(&no_refs).unwrap_err().to_string();
        assert!(
            message.contains("line 3") && message.contains("\"q2\""),
            "{message}"
        );

        let missing = temp_file(
            "missing.jsonl",
            b"{\"id\": \"q1\", \"prediction\": \"a\"}\n",
        );
        let message = read_items(&missing).unwrap_err().to_string();
        assert!(
            message.contains(":1:") && message.contains("references"),
            "{message}"
        );

        let wrong = temp_file(
            "wrong.jsonl",
            b"\n{\"id\": 7, \"prediction\": \"a\", \"references\": [\"a\"]}\n",
        );
        let message = read_items(&wrong).unwrap_err().to_string();
        assert!(
            message.contains(":2:") && message.contains("invalid type"),
            "{message}"
        );

        for path in [good, no_refs, missing, wrong] {
            std::fs::remove_file(path).unwrap();
        }
    }

    proptest! {
        #[test]
        fn score_never_panics(
            prediction in "\\PC*|[a-zA-Z \\n.]*",
            references in proptest::collection::vec("\\PC*|[a-zA-Z \\n.]*|.*", 0..4),
            stem in any::<bool>(),
        ) {
            let scores = RougeScorer::new(stem).score(&prediction, &references);
            for score in [scores.rouge1, scores.rouge2, scores.rouge_l, scores.rouge_lsum] {
                for value in [score.precision, score.recall, score.fmeasure] {
                    prop_assert!((0.0..=1.0).contains(&value));
                }
            }
        }

        #[test]
        fn a_text_matches_itself(text in "[a-zA-Z ]{0,40}( [a-z]+\\n[a-z ]+)?") {
            let scores = RougeScorer::new(true).score(&text, &[&text]);
            let expected = if tokenize(&text, true).is_empty() { 0.0 } else { 1.0 };
            prop_assert_eq!(scores.rouge1.fmeasure, expected);
            prop_assert_eq!(scores.rouge_l.fmeasure, expected);
            prop_assert_eq!(scores.rouge_lsum.fmeasure, expected);
        }

        #[test]
        fn read_items_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let path = temp_file("arbitrary.jsonl", &bytes);
            let _ = read_items(&path);
            std::fs::remove_file(path).unwrap();
        }

        #[test]
        fn read_items_never_panics_on_near_json(
            text in "(\\{\"id\": (\"[a-z]*\"|1), \"prediction\": \"[a-z]*\", \"references\": (\\[\\]|\\[\"a\"\\]|null)\\}\n?|\n|\\{)*"
        ) {
            let path = temp_file("near.jsonl", text.as_bytes());
            let _ = read_items(&path);
            std::fs::remove_file(path).unwrap();
        }
    }
}
