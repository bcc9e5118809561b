//! Which indexed documents a text names by title: the links multi-hop retrieval follows.
//!
//! Wikipedia-like corpora (HotpotQA's among them) name the bridge entity of a two-hop question
//! in the first passage, and that entity is the title of the second passage. A title matches
//! when its words appear in the text as consecutive words, ignoring case, punctuation and a
//! trailing parenthetical ("Inception (film)" matches "Inception").

use std::collections::HashMap;

/// Titles made only of these words name nothing specific enough to follow.
const STOPWORDS: &[&str] = &[
    "a", "an", "and", "are", "as", "at", "be", "by", "for", "from", "he", "her", "his", "in", "is",
    "it", "its", "of", "on", "or", "she", "that", "the", "their", "they", "this", "to", "was",
    "were", "which", "who", "with",
];

/// Titles longer than this (in words) are not looked up in text.
const MAX_TITLE_WORDS: usize = 12;

/// The lower-cased alphanumeric words of `text`.
pub(crate) fn words(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect()
}

/// The words a title is matched by: its words without a trailing "(...)" disambiguation.
pub(crate) fn title_words(title: &str) -> Vec<String> {
    let trimmed = title.trim();
    let bare = match (trimmed.ends_with(')'), trimmed.rfind(" (")) {
        (true, Some(open)) if open > 0 => &trimmed[..open],
        _ => trimmed,
    };
    words(bare)
}

/// True when `word` is too common to stand for an entity on its own.
pub(crate) fn is_stopword(word: &str) -> bool {
    STOPWORDS.contains(&word)
}

/// Documents by the words of their title.
pub struct TitleIndex {
    by_words: HashMap<Vec<String>, Vec<String>>,
    longest: usize,
}

impl TitleIndex {
    /// Documents by title, from (id, title) pairs ([`lector_index::DocumentStore::titles`]).
    pub fn build(titles: &[(String, String)]) -> Self {
        let mut by_words: HashMap<Vec<String>, Vec<String>> = HashMap::new();
        for (id, title) in titles {
            let key = title_words(title);
            if key.is_empty() || key.len() > MAX_TITLE_WORDS || key.iter().all(|w| is_stopword(w)) {
                continue;
            }
            by_words.entry(key).or_default().push(id.clone());
        }
        for ids in by_words.values_mut() {
            ids.sort();
        }
        let longest = by_words.keys().map(Vec::len).max().unwrap_or(0);
        TitleIndex { by_words, longest }
    }

    /// Number of distinct titles.
    pub fn len(&self) -> usize {
        self.by_words.len()
    }

    /// True when no document has a usable title.
    pub fn is_empty(&self) -> bool {
        self.by_words.is_empty()
    }

    /// The documents titled `name` (ignoring case, punctuation and a trailing parenthetical).
    pub fn lookup(&self, name: &str) -> &[String] {
        self.by_words
            .get(&title_words(name))
            .map_or(&[], Vec::as_slice)
    }

    /// The documents whose title `text` names, in order of first mention; at each position the
    /// longest title wins ("New York City" before "New York").
    pub fn mentions(&self, text: &str) -> Vec<&str> {
        self.mentions_where(text, &|_| true)
    }

    /// [`Self::mentions`] among the documents `allowed` accepts (a tenant's own): a title only
    /// others' documents have neither matches nor hides a shorter one at the same words.
    pub fn mentions_where(&self, text: &str, allowed: &dyn Fn(&str) -> bool) -> Vec<&str> {
        let words = words(text);
        let mut found: Vec<&str> = Vec::new();
        let mut i = 0;
        while i < words.len() {
            let longest = self.longest.min(words.len() - i);
            let matched = (1..=longest).rev().find_map(|n| {
                let ids = self.by_words.get(&words[i..i + n])?;
                let ids: Vec<&str> = ids
                    .iter()
                    .map(String::as_str)
                    .filter(|id| allowed(id))
                    .collect();
                (!ids.is_empty()).then_some((n, ids))
            });
            match matched {
                Some((n, ids)) => {
                    for id in ids {
                        if !found.contains(&id) {
                            found.push(id);
                        }
                    }
                    i += n;
                }
                None => i += 1,
            }
        }
        found
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_parenthetical_is_not_part_of_the_title() {
        assert_eq!(title_words("Inception (film)"), ["inception"]);
        assert_eq!(
            title_words("Arthur's Magazine"),
            ["arthur", "s", "magazine"]
        );
        assert_eq!(title_words("(film)"), ["film"]);
    }

    fn titles(pairs: &[(&str, &str)]) -> TitleIndex {
        let mut by_words: HashMap<Vec<String>, Vec<String>> = HashMap::new();
        for (id, title) in pairs {
            by_words
                .entry(title_words(title))
                .or_default()
                .push(id.to_string());
        }
        let longest = by_words.keys().map(Vec::len).max().unwrap_or(0);
        TitleIndex { by_words, longest }
    }

    #[test]
    fn mentions_prefer_the_longest_title_and_keep_first_mention_order() {
        let index = titles(&[
            ("ny", "New York"),
            ("nyc", "New York City"),
            ("nolan", "Christopher Nolan"),
        ]);
        let text = "Christopher Nolan lives in New York City, not New York.";
        assert_eq!(index.mentions(text), ["nolan", "nyc", "ny"]);
        assert_eq!(index.lookup("new york city (place)"), ["nyc"]);
        assert!(index.mentions("nothing here").is_empty());
        // Without "nyc" (another tenant's), "New York" is found at the same words.
        let own = |id: &str| id != "nyc";
        assert_eq!(index.mentions_where(text, &own), ["nolan", "ny"]);
    }
}
