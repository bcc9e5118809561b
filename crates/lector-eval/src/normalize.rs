//! SQuAD answer normalisation, exactly as the official evaluation scripts do it:
//! lowercase, drop ASCII punctuation, remove the whole words a/an/the, collapse whitespace.

/// Normalises an answer the way `normalize_answer` in evaluate-v1.1.py / evaluate-v2.0.py does.
pub fn normalize_answer(text: &str) -> String {
    let cleaned = lower_without_punctuation(text);
    let mut out = String::with_capacity(cleaned.len());
    let mut push = |token: &str| {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(token);
    };
    for token in cleaned
        .split(is_python_whitespace)
        .filter(|t| !t.is_empty())
    {
        if token.bytes().all(|b| b.is_ascii_alphanumeric()) {
            // Fast path: a token of plain word characters is one word.
            if !is_article(token) {
                push(token);
            }
        } else {
            let replaced = remove_articles(token);
            replaced
                .split(is_python_whitespace)
                .filter(|t| !t.is_empty())
                .for_each(&mut push);
        }
    }
    out
}

/// The tokens of the normalised answer (`normalize_answer(s).split()`).
pub fn normalized_tokens(text: &str) -> Vec<String> {
    tokens_of(&normalize_answer(text))
        .into_iter()
        .map(str::to_string)
        .collect()
}

/// The tokens of an already normalised answer (single spaces between tokens).
pub fn tokens_of(normalized: &str) -> Vec<&str> {
    if normalized.is_empty() {
        Vec::new()
    } else {
        normalized.split(' ').collect()
    }
}

/// Python's `str.lower()`: Unicode's full lowercase mapping (SpecialCasing included, e.g. "İ" ->
/// "i\u{307}"), with capital sigma in the Final_Sigma context lowered to "ς" ("ΚΤΕΊΣ" ->
/// "κτείς"). Rust's `str::to_lowercase` implements the same rules, but only on a whole string:
/// lowering `char` by `char` always gives "σ". The two agree on every code point assigned in
/// both Unicode versions (rustc's and Python's), which `tests/unicode_lowercase.rs` checks.
pub fn lowercase(text: &str) -> String {
    text.to_lowercase()
}

/// `str.lower()` then dropping every character of Python's `string.punctuation` (exactly the
/// characters of `char::is_ascii_punctuation`). Lowering comes first because punctuation is
/// context for Final_Sigma: "." and "'" are case-ignorable, so "ΑΣ.Β" lowers to "ασ.β".
fn lower_without_punctuation(text: &str) -> String {
    let mut lower = lowercase(text);
    lower.retain(|c| !c.is_ascii_punctuation());
    lower
}

fn is_article(word: &str) -> bool {
    matches!(word, "a" | "an" | "the")
}

/// `re.sub(r'\b(a|an|the)\b', ' ', text)`: a maximal run of word characters equal to an article
/// is replaced by one space. Python's `\b` is Unicode-aware (alphanumerics and `_`).
fn remove_articles(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while !rest.is_empty() {
        let word_len = rest
            .char_indices()
            .find(|&(_, c)| !is_word_char(c))
            .map_or(rest.len(), |(i, _)| i);
        if word_len == 0 {
            let c = rest.chars().next().expect("non-empty");
            out.push(c);
            rest = &rest[c.len_utf8()..];
            continue;
        }
        let word = &rest[..word_len];
        if is_article(word) {
            out.push(' ');
        } else {
            out.push_str(word);
        }
        rest = &rest[word_len..];
    }
    out
}

fn is_word_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// Python's `str.split()` separators: Unicode whitespace plus the ASCII information separators.
fn is_python_whitespace(c: char) -> bool {
    c.is_whitespace() || ('\x1c'..='\x1f').contains(&c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn follows_the_official_rules() {
        assert_eq!(normalize_answer("The  Eiffel-Tower!"), "eiffeltower");
        assert_eq!(normalize_answer("an apple a day"), "apple day");
        assert_eq!(normalize_answer("theory and anthem"), "theory and anthem");
        assert_eq!(normalize_answer("A_b the_ c"), "ab c");
        assert_eq!(normalize_answer("  \u{a0}The\tend\u{1f}x "), "end x");
        assert_eq!(normalize_answer("Éclair «the» café"), "éclair « » café");
        assert_eq!(normalize_answer("..."), "");
    }

    #[test]
    fn lowers_like_python_str_lower() {
        // Expected values are Python's `s.lower()`.
        assert_eq!(normalize_answer("ΚΤΕΊΣ"), "κτείς");
        assert_eq!(normalize_answer("ΟΔΥΣΣΕΥΣ, ΣΟΦΟΣ."), "οδυσσευς σοφος");
        // "." is case-ignorable: the sigma is not word-final before it is removed.
        assert_eq!(normalize_answer("ΑΣ.Β"), "ασβ");
        assert_eq!(normalize_answer("Σ"), "σ");
        assert_eq!(normalize_answer("İSTANBUL"), "i\u{307}stanbul");
    }
}
