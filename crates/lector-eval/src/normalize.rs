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

/// `str.lower()` then dropping every character of Python's `string.punctuation` (exactly the
/// characters of `char::is_ascii_punctuation`), in one pass.
fn lower_without_punctuation(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_ascii() {
            if !c.is_ascii_punctuation() {
                out.push(c.to_ascii_lowercase());
            }
        } else {
            // Lowercasing a non-ASCII character never yields ASCII punctuation.
            out.extend(c.to_lowercase());
        }
    }
    out
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
}
