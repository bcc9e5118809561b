//! TF-IDF over hashed unigrams and bigrams: the document retriever of DrQA (Chen et al., 2017,
//! "Reading Wikipedia to Answer Open-Domain Questions"), a baseline the open-domain QA
//! literature reports beside BM25.
//!
//! As DrQA builds it: text is split into runs of letters, digits and combining marks and single
//! other characters (its `SimpleTokenizer`), lowercased; unigrams and bigrams are kept unless one
//! of their words is an English stopword (NLTK's list, as DrQA's) or punctuation; each n-gram is
//! hashed with MurmurHash3 (32-bit, seed 0, of its UTF-8 text) into 2^24 buckets. A passage's
//! weight for a bucket is `ln(1 + tf) · idf`, with `idf = ln((N − df + 0.5) / (df + 0.5))`
//! clipped at 0, and the query is weighted the same way; the score is the dot product.
//! Differences from DrQA: lector scores passages (DrQA scores whole articles), and does not apply
//! Unicode NFD normalisation before tokenizing.
//!
//! The buckets live in a segment's postings under keys no analysed term can take (a NUL byte
//! first), written when the index is created with [`crate::IndexSettings::tfidf`].

/// Hash buckets (DrQA's default, 2^24).
pub const BUCKETS: u32 = 1 << 24;

/// NLTK's English stopwords, the list DrQA filters n-grams with.
const STOPWORDS: &[&str] = &[
    "i",
    "me",
    "my",
    "myself",
    "we",
    "our",
    "ours",
    "ourselves",
    "you",
    "your",
    "yours",
    "yourself",
    "yourselves",
    "he",
    "him",
    "his",
    "himself",
    "she",
    "her",
    "hers",
    "herself",
    "it",
    "its",
    "itself",
    "they",
    "them",
    "their",
    "theirs",
    "themselves",
    "what",
    "which",
    "who",
    "whom",
    "this",
    "that",
    "these",
    "those",
    "am",
    "is",
    "are",
    "was",
    "were",
    "be",
    "been",
    "being",
    "have",
    "has",
    "had",
    "having",
    "do",
    "does",
    "did",
    "doing",
    "a",
    "an",
    "the",
    "and",
    "but",
    "if",
    "or",
    "because",
    "as",
    "until",
    "while",
    "of",
    "at",
    "by",
    "for",
    "with",
    "about",
    "against",
    "between",
    "into",
    "through",
    "during",
    "before",
    "after",
    "above",
    "below",
    "to",
    "from",
    "up",
    "down",
    "in",
    "out",
    "on",
    "off",
    "over",
    "under",
    "again",
    "further",
    "then",
    "once",
    "here",
    "there",
    "when",
    "where",
    "why",
    "how",
    "all",
    "any",
    "both",
    "each",
    "few",
    "more",
    "most",
    "other",
    "some",
    "such",
    "no",
    "nor",
    "not",
    "only",
    "own",
    "same",
    "so",
    "than",
    "too",
    "very",
    "s",
    "t",
    "can",
    "will",
    "just",
    "don",
    "should",
    "now",
    "d",
    "ll",
    "m",
    "o",
    "re",
    "ve",
    "y",
    "ain",
    "aren",
    "couldn",
    "didn",
    "doesn",
    "hadn",
    "hasn",
    "haven",
    "isn",
    "ma",
    "mightn",
    "mustn",
    "needn",
    "shan",
    "shouldn",
    "wasn",
    "weren",
    "won",
    "wouldn",
];

/// A combining mark (the Unicode blocks of them): part of a word, as `\p{M}` is in DrQA's pattern.
fn is_mark(c: char) -> bool {
    matches!(c as u32, 0x0300..=0x036F | 0x1AB0..=0x1AFF | 0x1DC0..=0x1DFF | 0x20D0..=0x20FF | 0xFE20..=0xFE2F)
}

fn is_word_char(c: char) -> bool {
    c.is_alphanumeric() || is_mark(c)
}

/// Lowercased tokens: runs of word characters, and every other visible character alone.
fn tokens(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut word = String::new();
    for c in text.chars() {
        if is_word_char(c) {
            word.push(c);
            continue;
        }
        if !word.is_empty() {
            out.push(word.to_lowercase());
            word.clear();
        }
        if !c.is_whitespace() && !c.is_control() {
            out.push(c.to_string());
        }
    }
    if !word.is_empty() {
        out.push(word.to_lowercase());
    }
    out
}

/// Whether DrQA drops an n-gram holding `token`: a stopword, or punctuation. Every token that is
/// not a word is punctuation here, except the ASCII symbols Unicode does not call punctuation.
fn filtered(token: &str) -> bool {
    let first = token.chars().next().unwrap_or(' ');
    let symbol = matches!(first, '$' | '+' | '<' | '=' | '>' | '^' | '`' | '|' | '~');
    STOPWORDS.contains(&token) || (!is_word_char(first) && !symbol)
}

/// The postings keys of `text`'s unigrams and bigrams, one per occurrence.
pub(crate) fn keys(text: &str) -> Vec<String> {
    let tokens = tokens(text);
    let keep: Vec<bool> = tokens.iter().map(|t| !filtered(t)).collect();
    let mut out = Vec::with_capacity(tokens.len() * 2);
    for i in 0..tokens.len() {
        if keep[i] {
            out.push(key(&tokens[i]));
        }
        if i + 1 < tokens.len() && keep[i] && keep[i + 1] {
            out.push(key(&format!("{} {}", tokens[i], tokens[i + 1])));
        }
    }
    out
}

/// The postings key of an n-gram: its bucket after a NUL byte, which no analysed term contains.
fn key(ngram: &str) -> String {
    format!("\0{}", murmur3_32(ngram.as_bytes(), 0) % BUCKETS)
}

/// Whether a postings key is an n-gram bucket (not a BM25 term).
pub(crate) fn is_key(term: &str) -> bool {
    term.starts_with('\0')
}

/// `idf = ln((N − df + 0.5) / (df + 0.5))`, clipped at 0 as DrQA clips it.
pub(crate) fn idf(n: usize, df: usize) -> f64 {
    let (n, df) = (n as f64, df as f64);
    ((n - df + 0.5) / (df + 0.5)).ln().max(0.0)
}

/// MurmurHash3's 32-bit variant (x86_32), as `sklearn.utils.murmurhash3_32(..., positive=True)`.
fn murmur3_32(data: &[u8], seed: u32) -> u32 {
    const C1: u32 = 0xcc9e_2d51;
    const C2: u32 = 0x1b87_3593;
    let mix = |k: u32| k.wrapping_mul(C1).rotate_left(15).wrapping_mul(C2);
    let mut h = seed;
    let mut chunks = data.chunks_exact(4);
    for chunk in &mut chunks {
        let k = u32::from_le_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]);
        h = (h ^ mix(k))
            .rotate_left(13)
            .wrapping_mul(5)
            .wrapping_add(0xe654_6b64);
    }
    let tail = chunks.remainder();
    if !tail.is_empty() {
        let k = tail
            .iter()
            .enumerate()
            .fold(0u32, |k, (i, &b)| k | u32::from(b) << (8 * i));
        h ^= mix(k);
    }
    h ^= data.len() as u32;
    h ^= h >> 16;
    h = h.wrapping_mul(0x85eb_ca6b);
    h ^= h >> 13;
    h = h.wrapping_mul(0xc2b2_ae35);
    h ^ (h >> 16)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn murmur3_matches_the_reference_vectors() {
        assert_eq!(murmur3_32(b"", 0), 0);
        assert_eq!(murmur3_32(b"", 1), 0x514e_28b7);
        assert_eq!(murmur3_32(b"hello", 0), 613_153_351);
        assert_eq!(murmur3_32(b"Hello, world!", 1234), 0xfaf6_cdb3);
        assert_eq!(
            murmur3_32(b"The quick brown fox jumps over the lazy dog", 0),
            0x2e4f_f723
        );
    }

    #[test]
    fn ngrams_skip_stopwords_and_punctuation() {
        assert_eq!(
            tokens("Naïve cafés, in 1990!"),
            ["naïve", "cafés", ",", "in", "1990", "!"]
        );
        let want: Vec<String> = ["new", "new york", "york", "york city", "city", "1990"]
            .iter()
            .map(|g| key(g))
            .collect();
        // "in" and "," break bigrams; "$" is a symbol, not punctuation, and stays.
        assert_eq!(keys("New York city, in 1990"), want);
        assert_eq!(keys("$"), [key("$")]);
        assert!(keys("the of , .").is_empty());
        assert!(keys("York").iter().all(|k| is_key(k)));
    }

    #[test]
    fn idf_is_clipped_at_zero() {
        assert!((idf(10, 1) - (9.5f64 / 1.5).ln()).abs() < 1e-12);
        assert_eq!(idf(10, 9), 0.0);
    }
}
