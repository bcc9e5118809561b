//! Page text as prose: the lines a PDF lays out joined into paragraphs, end-of-line hyphenation
//! undone, and the running headers, footers and page numbers that repeat across pages dropped.
//!
//! A PDF's text comes out line by line as it was typeset: a sentence broken across lines, words
//! broken at their ends (`Ben-` / `jamin`), and each page's header and number in the middle of
//! whatever paragraph runs across the page break. Passages cut from that text are cut in odd
//! places and the reader stumbles, so:
//!
//! - **Furniture.** A line among the first or last [`EDGE_LINES`] of a page is a header or footer
//!   when the same line (compared without case, with every digit alike, so `Page 3` and `Page 4`
//!   are one) is at the edge of at least [`MIN_REPEATS`] pages and a fifth of them; a line that
//!   is only a page number (`12`, `- 12 -`, `Page 12`, `12 of 40`, `xii`) at the first or last
//!   line of a page of a document of several pages is one too. Both are dropped, but from a page
//!   that holds nothing else (the same text on every page is the text).
//! - **Hyphenation.** A line ending in a hyphen after a letter, followed by a line starting with a
//!   letter, is one word broken in two: joined without the hyphen when the document spells the
//!   joined word elsewhere, with it when it spells the hyphenated form elsewhere, else without it
//!   when the second part starts in lower case (`Ben-jamin`), with it otherwise (`XXXVI-II`). A
//!   word broken across a page break is joined on the first page.
//! - **Paragraphs.** A line shorter than most lines of its page that ends a sentence ends a
//!   paragraph (a line break is kept); any other line break becomes a space.
//!
//! Pages stay pages: the text of each is tidied on its own (but for a word broken across a page
//! break), and page starts are computed from the tidied text, so offsets stay right.

use std::collections::{HashMap, HashSet};

/// How many lines at the top and at the bottom of a page may be furniture.
pub const EDGE_LINES: usize = 3;

/// The fewest pages a repeated line must be at the edge of to count as furniture.
pub const MIN_REPEATS: usize = 2;

/// The pages' text, tidied (see the module documentation); as many pages as given.
pub(super) fn tidy(pages: Vec<String>) -> Vec<String> {
    let mut lines: Vec<Vec<&str>> = pages
        .iter()
        .map(|page| {
            page.lines()
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .collect()
        })
        .collect();
    drop_furniture(&mut lines);
    let vocabulary = Vocabulary::of(&lines);
    let mut tidied: Vec<String> = lines.iter().map(|page| join(page, &vocabulary)).collect();
    join_across_pages(&mut tidied, &vocabulary);
    tidied
}

/// A line as furniture is compared: lower case, every digit `#`, white space single.
fn furniture_key(line: &str) -> String {
    let mapped = line.chars().map(|c| match c {
        c if c.is_ascii_digit() => '#',
        c => c.to_lowercase().next().unwrap_or(c),
    });
    mapped
        .collect::<String>()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

/// Whether `line` is only a page number: `12`, `- 12 -`, `Page 12`, `12 of 40`, `12/40`, `xii`.
fn is_page_number(line: &str) -> bool {
    let key = furniture_key(line);
    let key = key.trim_matches(|c: char| c == '-' || c == '–' || c == '—' || c == ' ');
    let key = key.strip_prefix("page").map_or(key, str::trim_start);
    let numeral = |s: &str| {
        !s.is_empty()
            && (s.chars().all(|c| c == '#')
                || s.chars().all(|c| "ivxlc".contains(c)) && s.len() <= 6)
    };
    match key.split_once(" of ").or_else(|| key.split_once('/')) {
        Some((a, b)) => numeral(a.trim()) && numeral(b.trim()),
        None => numeral(key),
    }
}

/// The positions of a page's edge lines: its first and last [`EDGE_LINES`].
fn edges(page: &[&str]) -> impl Iterator<Item = usize> {
    let n = page.len();
    let top = 0..EDGE_LINES.min(n);
    let bottom = n.saturating_sub(EDGE_LINES).max(EDGE_LINES.min(n))..n;
    top.chain(bottom)
}

/// Drops the headers, footers and page numbers of `pages` (lists of lines).
fn drop_furniture(pages: &mut [Vec<&str>]) {
    if pages.len() < 2 {
        return;
    }
    let mut seen: HashMap<String, usize> = HashMap::new();
    for page in pages.iter() {
        let keys: HashSet<String> = edges(page).map(|i| furniture_key(page[i])).collect();
        for key in keys {
            *seen.entry(key).or_default() += 1;
        }
    }
    let needed = MIN_REPEATS.max(pages.len().div_ceil(5));
    let repeated: HashSet<&String> = seen
        .iter()
        .filter(|(_, &n)| n >= needed)
        .map(|(k, _)| k)
        .collect();
    for page in pages.iter_mut() {
        let edge: HashSet<usize> = edges(page).collect();
        let last = page.len().saturating_sub(1);
        let furniture: Vec<bool> = (page.iter().enumerate())
            .map(|(at, line)| {
                edge.contains(&at)
                    && (repeated.contains(&furniture_key(line))
                        || ((at == 0 || at == last) && is_page_number(line)))
            })
            .collect();
        // Furniture frames a page's own text: a page of nothing else (the same text on every
        // page) keeps it.
        if furniture.iter().all(|&f| f) {
            continue;
        }
        let mut flags = furniture.into_iter();
        page.retain(|_| !flags.next().unwrap_or(false));
    }
}

/// The words a document spells whole, to tell a broken word from a hyphenated one.
struct Vocabulary {
    words: HashSet<String>,
}

/// The hyphens a typesetter breaks words with.
fn ends_in_hyphen(line: &str) -> Option<&str> {
    let stem = line
        .strip_suffix('-')
        .or_else(|| line.strip_suffix('\u{2010}'))
        .or_else(|| line.strip_suffix('\u{ad}'))?;
    stem.chars()
        .last()
        .is_some_and(char::is_alphabetic)
        .then_some(stem)
}

fn word_chars(c: char) -> bool {
    c.is_alphanumeric() || c == '-' || c == '\''
}

impl Vocabulary {
    fn of(pages: &[Vec<&str>]) -> Vocabulary {
        let mut words = HashSet::new();
        for page in pages {
            for line in page {
                let tokens: Vec<&str> = line.split_whitespace().collect();
                let broken = ends_in_hyphen(line).is_some();
                for (i, token) in tokens.iter().enumerate() {
                    if broken && i + 1 == tokens.len() {
                        continue;
                    }
                    let word = token.trim_matches(|c: char| !word_chars(c));
                    if !word.is_empty() {
                        words.insert(word.to_lowercase());
                    }
                }
            }
        }
        Vocabulary { words }
    }

    /// Whether `left` + `right` (a word broken at a line end) keeps its hyphen.
    fn keeps_hyphen(&self, left: &str, right: &str) -> bool {
        let head = left.rsplit(|c: char| !word_chars(c)).next().unwrap_or(left);
        let tail = right
            .split(|c: char| !word_chars(c))
            .next()
            .unwrap_or(right);
        let joined = format!("{head}{tail}").to_lowercase();
        let hyphenated = format!("{head}-{tail}").to_lowercase();
        if self.words.contains(&joined) {
            false
        } else if self.words.contains(&hyphenated) {
            true
        } else {
            !tail.starts_with(char::is_lowercase)
        }
    }
}

/// Whether `line` may end a paragraph: it ends a sentence (or a quotation or bracket after one).
fn ends_sentence(line: &str) -> bool {
    let end = line.trim_end_matches(['"', '\'', '”', '’', ')', ']']);
    end.ends_with(['.', '!', '?', ':'])
}

/// A page's lines as prose (see the module documentation).
fn join(page: &[&str], vocabulary: &Vocabulary) -> String {
    let mut widths: Vec<usize> = page.iter().map(|l| l.chars().count()).collect();
    widths.sort_unstable();
    // Most lines of a page of prose are full: a line well short of them ends a paragraph.
    let full = widths.get(widths.len() * 3 / 4).copied().unwrap_or(0);
    let mut out = String::new();
    for (i, line) in page.iter().enumerate() {
        let Some(next) = page.get(i + 1) else {
            out.push_str(line);
            break;
        };
        match ends_in_hyphen(line) {
            Some(stem) if next.starts_with(char::is_alphabetic) => {
                out.push_str(stem);
                if vocabulary.keeps_hyphen(stem, next) {
                    out.push('-');
                }
            }
            _ => {
                out.push_str(line);
                let short = line.chars().count() * 5 < full * 4;
                out.push(if short && ends_sentence(line) {
                    '\n'
                } else {
                    ' '
                });
            }
        }
    }
    out
}

/// A word broken across a page break is joined on the first page (its second part leaves the
/// next page).
fn join_across_pages(pages: &mut [String], vocabulary: &Vocabulary) {
    for i in 1..pages.len() {
        let (before, after) = pages.split_at_mut(i);
        let (first, next) = (&mut before[i - 1], &mut after[0]);
        let Some(stem) = ends_in_hyphen(first) else {
            continue;
        };
        let tail_len = next
            .find(|c: char| !c.is_alphabetic())
            .unwrap_or(next.len());
        if tail_len == 0 || !next.starts_with(char::is_lowercase) {
            continue;
        }
        let keep = vocabulary.keeps_hyphen(stem, &next[..tail_len]);
        let stem_len = stem.len();
        first.truncate(stem_len);
        if keep {
            first.push('-');
        }
        first.push_str(&next[..tail_len]);
        let rest = next[tail_len..].trim_start().to_string();
        *next = rest;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_numbers() {
        for yes in [
            "12",
            "- 12 -",
            "Page 12",
            "page 3 of 40",
            "12/40",
            "xii",
            "– 7 –",
        ] {
            assert!(is_page_number(yes), "{yes}");
        }
        for no in ["12 apples", "Chapter 2", "Page", "vivid", "2019 was a year"] {
            assert!(!is_page_number(no), "{no}");
        }
    }

    #[test]
    fn lines_become_paragraphs_and_broken_words_whole() {
        let page = [
            "Super Bowl 50 was an American football game to determine the cham-",
            "pion of the National Football League for the 2015 season. The well-",
            "known Broncos beat the Panthers, and Kelvin Ben-",
            "jamin did not play. Super Bowl XXXVI-",
            "II was in Houston; the well-known game was close.",
            "It ended there.",
            "A new paragraph starts here and runs on to a full line of text, as lines do in",
            "prose.",
        ];
        let vocabulary = Vocabulary::of(&[page.to_vec()]);
        let text = join(&page, &vocabulary);
        assert_eq!(
            text,
            "Super Bowl 50 was an American football game to determine the champion of the National \
             Football League for the 2015 season. The well-known Broncos beat the Panthers, and \
             Kelvin Benjamin did not play. Super Bowl XXXVI-II was in Houston; the well-known game \
             was close.\nIt ended there.\nA new paragraph starts here and runs on to a full line of \
             text, as lines do in prose."
        );
    }

    #[test]
    fn repeated_headers_footers_and_page_numbers_are_dropped() {
        let body = ["Alpha", "Bravo", "Charlie", "Delta", "Echo", "Foxtrot"];
        let pages: Vec<String> = (1..=6)
            .map(|n| {
                let word = body[n - 1];
                format!(
                    "Kestrel Backup Manual\n{n}\n{word} opens this page of the manual.\nIts second line \
                     ends the {word} section here.\nConfidential - page {n} of 6\n"
                )
            })
            .collect();
        let tidied = tidy(pages);
        assert_eq!(tidied.len(), 6);
        assert_eq!(
            tidied[2],
            "Charlie opens this page of the manual. Its second line ends the Charlie section here."
        );
        // One page: nothing repeats, and a lone number may be content.
        assert_eq!(tidy(vec!["Total\n42".into()]), ["Total 42"]);
    }

    #[test]
    fn a_word_broken_across_a_page_break_is_joined_on_the_first_page() {
        let pages = vec![
            "The receiver Kelvin Ben-".to_string(),
            "jamin was injured. Benjamin returned later.".to_string(),
        ];
        let tidied = tidy(pages);
        assert_eq!(
            tidied,
            [
                "The receiver Kelvin Benjamin",
                "was injured. Benjamin returned later."
            ]
        );
    }
}
