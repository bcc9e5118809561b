//! Text analysis shared by indexing and querying: lowercase, Unicode (UAX #29) word segmentation,
//! English possessive removal, English stopwords, and an optional Snowball English (Porter2) stemmer.
//!
//! The stopword list is Lucene's `EnglishAnalyzer` default (33 words), the list the BEIR BM25
//! baselines (Elasticsearch, bm25s) use, so scores are comparable with theirs.

use rust_stemmers::{Algorithm, Stemmer as SnowballStemmer};
use serde::{Deserialize, Serialize};
use unicode_segmentation::UnicodeSegmentation;

/// Lucene's English stopwords.
pub const ENGLISH_STOPWORDS: [&str; 33] = [
    "a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "if", "in", "into", "is", "it",
    "no", "not", "of", "on", "or", "such", "that", "the", "their", "then", "there", "these",
    "they", "this", "to", "was", "will", "with",
];

/// Which stemmer reduces words to their stems.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Stemmer {
    /// Snowball English ("Porter2"), e.g. "studies" and "studying" -> "studi".
    Porter2,
    /// No stemming: tokens are lowercased words.
    None,
}

impl std::str::FromStr for Stemmer {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "porter2" => Ok(Stemmer::Porter2),
            "none" => Ok(Stemmer::None),
            _ => Err(format!("unknown stemmer `{s}` (porter2 or none)")),
        }
    }
}

/// Analysis settings; fixed when an index is created and stored in its manifest, because query
/// terms must be analysed exactly like indexed terms.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct AnalyzerConfig {
    /// The stemmer.
    pub stemmer: Stemmer,
    /// Whether English stopwords are dropped.
    pub stopwords: bool,
}

impl Default for AnalyzerConfig {
    fn default() -> Self {
        AnalyzerConfig {
            stemmer: Stemmer::Porter2,
            stopwords: true,
        }
    }
}

/// Turns text into index terms.
pub struct Analyzer {
    config: AnalyzerConfig,
    stemmer: Option<SnowballStemmer>,
}

impl Analyzer {
    /// An analyzer with these settings.
    pub fn new(config: AnalyzerConfig) -> Self {
        let stemmer = match config.stemmer {
            Stemmer::Porter2 => Some(SnowballStemmer::create(Algorithm::English)),
            Stemmer::None => None,
        };
        Analyzer { config, stemmer }
    }

    /// The settings of this analyzer.
    pub fn config(&self) -> AnalyzerConfig {
        self.config
    }

    /// Appends the terms of `text` to `out`, in text order.
    pub fn analyze_into(&self, text: &str, out: &mut Vec<String>) {
        for word in text.unicode_words() {
            let lower = word.to_lowercase();
            let word = strip_possessive(&lower);
            if word.is_empty() || (self.config.stopwords && ENGLISH_STOPWORDS.contains(&word)) {
                continue;
            }
            out.push(match &self.stemmer {
                Some(stemmer) => stemmer.stem(word).into_owned(),
                None => word.to_string(),
            });
        }
    }

    /// The terms of `text`, in text order.
    pub fn terms(&self, text: &str) -> Vec<String> {
        let mut out = Vec::new();
        self.analyze_into(text, &mut out);
        out
    }

    /// The terms a query is scored by: its first [`MAX_QUERY_TERMS`] terms, in text order. Every
    /// store scores the same terms, and a huge query costs no more than a long one.
    pub fn query_terms(&self, query: &str) -> Vec<String> {
        let mut out = Vec::new();
        for word in query.unicode_words() {
            if out.len() == MAX_QUERY_TERMS {
                break;
            }
            // One word makes at most one term.
            self.analyze_into(word, &mut out);
        }
        out
    }
}

/// The most terms of a query that BM25 scores (far beyond any question; a pasted page is cut).
pub const MAX_QUERY_TERMS: usize = 1024;

/// "cell's" -> "cell" (UAX #29 keeps the apostrophe inside a word; Lucene's English analysis
/// drops the possessive the same way).
fn strip_possessive(word: &str) -> &str {
    word.strip_suffix("'s")
        .or_else(|| word.strip_suffix("\u{2019}s"))
        .unwrap_or(word)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_query_is_scored_by_its_first_terms() {
        let analyzer = Analyzer::new(AnalyzerConfig::default());
        let question = "Which NFL team won Super Bowl 50, and who's the MVP?";
        assert_eq!(analyzer.query_terms(question), analyzer.terms(question));
        // A pasted megabyte: stopwords are skipped, the first 1,024 terms kept.
        let huge = "the cells divide ".repeat(100_000);
        let terms = analyzer.query_terms(&huge);
        assert_eq!(terms.len(), MAX_QUERY_TERMS);
        assert_eq!(terms[..4], ["cell", "divid", "cell", "divid"]);
    }

    #[test]
    fn lowercases_segments_drops_stopwords_and_stems() {
        let analyzer = Analyzer::new(AnalyzerConfig::default());
        assert_eq!(
            analyzer.terms("The Cell's studies, of T-cells; naïve MICE."),
            ["cell", "studi", "t", "cell", "naïv", "mice"]
        );
    }

    #[test]
    fn without_stemming_keeps_words() {
        let analyzer = Analyzer::new(AnalyzerConfig {
            stemmer: Stemmer::None,
            stopwords: false,
        });
        assert_eq!(
            analyzer.terms("The studies of 1,000 genomes"),
            ["the", "studies", "of", "1,000", "genomes"]
        );
    }
}
