//! A PDF's outline (its bookmarks) as sections of its text.
//!
//! The outline is read with a bounded walk ([`MAX_OUTLINE_ENTRIES`], each object once, titles
//! cut at [`MAX_TITLE_CHARS`]); each entry's start is found where its title is printed on its
//! page, in time linear in the page and the title, and the whole pass has a budget of
//! [`MAX_OUTLINE_STEPS`] characters scanned: once it is spent, the remaining entries start at
//! their pages, as entries whose titles are not printed do. A small file with a huge page and
//! thousands of long titles therefore costs a bounded amount of work.

use crate::sections::Section;
use lopdf::{Dictionary, Object, ObjectId};
use std::collections::{BTreeMap, HashMap, HashSet};

/// The most outline entries read from one file: far more than real documents have, few enough
/// that a hostile outline costs little.
pub const MAX_OUTLINE_ENTRIES: usize = 2_000;

/// The most named destinations read from one file (the `Names` tree can be far larger than the
/// outline that uses it: every link target of a document is one).
const MAX_NAMED_DESTINATIONS: usize = 100_000;

/// The most characters of an outline title kept: more than any heading has.
pub const MAX_TITLE_CHARS: usize = 300;

/// The most page characters scanned to place all of a document's outline entries (each entry
/// scans from the previous entry's start until its title is found; a page's characters are
/// counted once more each time the search moves to it).
pub const MAX_OUTLINE_STEPS: usize = 20_000_000;

/// An entry of a PDF's outline: its depth (1 = top level), title and page (1-based).
#[derive(Debug, Clone, PartialEq)]
pub(super) struct OutlineEntry {
    pub level: u8,
    pub title: String,
    pub page: u32,
}

/// The outline's entries in document order (each entry, then its children, then its next
/// sibling), those with a title and a page only. Never fails: a damaged outline yields what
/// could be read of it.
pub(super) fn outline(
    doc: &lopdf::Document,
    page_ids: &BTreeMap<u32, ObjectId>,
) -> Vec<OutlineEntry> {
    let first = doc
        .catalog()
        .ok()
        .and_then(|catalog| dictionary_at(doc, catalog, b"Outlines"))
        .and_then(|root| root.get(b"First").ok())
        .and_then(|first| first.as_reference().ok());
    let Some(first) = first else {
        return Vec::new();
    };
    let pages: HashMap<ObjectId, u32> = page_ids.iter().map(|(&n, &id)| (id, n)).collect();
    let mut named = None;
    let mut seen = HashSet::new();
    let mut entries = Vec::new();
    let mut stack = vec![(first, 1u8)];
    while let Some((id, level)) = stack.pop() {
        if entries.len() >= MAX_OUTLINE_ENTRIES || seen.len() >= 4 * MAX_OUTLINE_ENTRIES {
            break;
        }
        if !seen.insert(id) {
            continue; // a cycle, or an item reached twice
        }
        let Ok(item) = doc.get_dictionary(id) else {
            continue;
        };
        // Popped last to first: the children come before the next sibling.
        if let Ok(next) = item.get(b"Next").and_then(Object::as_reference) {
            stack.push((next, level));
        }
        if let Ok(child) = item.get(b"First").and_then(Object::as_reference) {
            if level < 9 {
                stack.push((child, level + 1));
            }
        }
        let title = item
            .get(b"Title")
            .ok()
            .and_then(|t| doc.dereference(t).ok())
            .and_then(|(_, t)| lopdf::decode_text_string(t).ok())
            .map(|t| {
                let words = t.split_whitespace().map(|w| w.replace('\0', ""));
                let title = words
                    .filter(|w| !w.is_empty())
                    .collect::<Vec<_>>()
                    .join(" ");
                title.chars().take(MAX_TITLE_CHARS).collect::<String>()
            })
            .filter(|t| !t.is_empty());
        let page = item_page(doc, item, &pages, &mut named);
        if let (Some(title), Some(page)) = (title, page) {
            entries.push(OutlineEntry { level, title, page });
        }
    }
    entries
}

/// The dictionary under `key` in `dict`, directly or by reference.
fn dictionary_at<'a>(
    doc: &'a lopdf::Document,
    dict: &'a Dictionary,
    key: &[u8],
) -> Option<&'a Dictionary> {
    let (_, value) = doc.dereference(dict.get(key).ok()?).ok()?;
    value.as_dict().ok()
}

/// The page an outline item points to: its `Dest`, or the `D` of its `GoTo` action.
fn item_page<'a>(
    doc: &'a lopdf::Document,
    item: &'a Dictionary,
    pages: &HashMap<ObjectId, u32>,
    named: &mut Option<HashMap<Vec<u8>, &'a Object>>,
) -> Option<u32> {
    let destination = match item.get(b"Dest") {
        Ok(destination) => destination,
        Err(_) => {
            let action = dictionary_at(doc, item, b"A")?;
            if action.get(b"S").ok()?.as_name().ok()? != b"GoTo" {
                return None; // another file (GoToR), a URI, JavaScript: no page here
            }
            action.get(b"D").ok()?
        }
    };
    let (_, mut destination) = doc.dereference(destination).ok()?;
    if let Object::Name(name) | Object::String(name, _) = destination {
        let named = named.get_or_insert_with(|| named_destinations(doc));
        let (_, target) = doc.dereference(named.get(name)?).ok()?;
        destination = match target {
            // A named destination is an array, or a dictionary holding it as `D`.
            Object::Dictionary(d) => doc.dereference(d.get(b"D").ok()?).ok()?.1,
            other => other,
        };
    }
    let page = destination.as_array().ok()?.first()?.as_reference().ok()?;
    pages.get(&page).copied()
}

/// The named destinations: the catalog's `Dests` dictionary (PDF 1.1) and the `Dests` name tree
/// under `Names` (each node visited once, at most [`MAX_NAMED_DESTINATIONS`] names).
fn named_destinations(doc: &lopdf::Document) -> HashMap<Vec<u8>, &Object> {
    let mut named = HashMap::new();
    let Ok(catalog) = doc.catalog() else {
        return named;
    };
    if let Some(dests) = dictionary_at(doc, catalog, b"Dests") {
        for (name, target) in dests.iter().take(MAX_NAMED_DESTINATIONS) {
            named.insert(name.clone(), target);
        }
    }
    let tree =
        dictionary_at(doc, catalog, b"Names").and_then(|names| dictionary_at(doc, names, b"Dests"));
    let mut seen = HashSet::new();
    let mut nodes: Vec<&Dictionary> = tree.into_iter().collect();
    while let Some(node) = nodes.pop() {
        if let Ok(kids) = node.get(b"Kids").and_then(Object::as_array) {
            for kid in kids {
                if let Ok(id) = kid.as_reference() {
                    if seen.len() < MAX_NAMED_DESTINATIONS && seen.insert(id) {
                        nodes.extend(doc.get_dictionary(id).ok());
                    }
                }
            }
        }
        let Some(pairs) = node
            .get(b"Names")
            .ok()
            .and_then(|n| doc.dereference(n).ok())
        else {
            continue;
        };
        for pair in pairs
            .1
            .as_array()
            .map(|a| a.chunks_exact(2))
            .into_iter()
            .flatten()
        {
            if named.len() >= MAX_NAMED_DESTINATIONS {
                return named;
            }
            if let Ok(name) = pair[0].as_str() {
                named.insert(name.to_vec(), &pair[1]);
            }
        }
    }
    named
}

/// The outline as sections of the document text (see the module documentation), given each
/// page's text and its first character's offset.
pub(super) fn outline_sections(
    pages: &[String],
    page_starts: &[usize],
    outline: &[OutlineEntry],
) -> Vec<Section> {
    let mut sections: Vec<Section> = Vec::new();
    let mut searched: Option<(usize, Page)> = None;
    let mut steps_left = MAX_OUTLINE_STEPS;
    for entry in outline {
        let index = entry.page as usize - 1;
        let (Some(page), Some(&page_start)) = (pages.get(index), page_starts.get(index)) else {
            continue;
        };
        let previous = sections.last().map_or(0, |s| s.start);
        let page_end = page_start + page.chars().count();
        if page_end < previous {
            continue; // points back before the previous entry
        }
        let from = previous.saturating_sub(page_start);
        let mut found = None;
        if steps_left > 0 {
            if searched.as_ref().is_none_or(|(i, _)| *i != index) {
                steps_left = steps_left.saturating_sub(page.len());
                searched = Some((index, Page::new(page)));
            }
            let page = &searched.as_ref().expect("just set").1;
            found = page.find_heading(from, &entry.title, &mut steps_left);
        }
        let start = match found {
            Some(at) => page_start + at,
            None => page_start.max(previous),
        };
        sections.push(Section {
            start,
            level: entry.level,
            title: entry.title.clone(),
        });
    }
    sections
}

/// A page prepared for heading searches: its characters, and the ones that are not white space,
/// lower-cased, with where each is on the page.
struct Page {
    chars: Vec<char>,
    squeezed: Vec<char>,
    at: Vec<usize>,
}

fn lower(c: char) -> char {
    c.to_lowercase().next().unwrap_or(c)
}

impl Page {
    fn new(text: &str) -> Page {
        let chars: Vec<char> = text.chars().collect();
        let (squeezed, at) = chars
            .iter()
            .enumerate()
            .filter(|(_, c)| !c.is_whitespace())
            .map(|(i, &c)| (lower(c), i))
            .unzip();
        Page {
            chars,
            squeezed,
            at,
        }
    }

    fn is_word(&self, at: usize) -> bool {
        self.chars.get(at).is_some_and(|c| c.is_alphanumeric())
    }

    /// Where `title` is printed at or after character `from`: the first whole-word run whose
    /// characters, skipping white space in both and ignoring case, spell the title's. A
    /// Knuth-Morris-Pratt scan of the characters that are not white space: linear in the page
    /// and the title; each character scanned costs one of `steps_left`, and the search gives up
    /// (`None`) when they run out.
    fn find_heading(&self, from: usize, title: &str, steps_left: &mut usize) -> Option<usize> {
        let wanted: Vec<char> = title
            .chars()
            .filter(|c| !c.is_whitespace())
            .map(lower)
            .collect();
        if wanted.is_empty() {
            return None;
        }
        let fallback = failure_function(&wanted);
        let first = self.at.partition_point(|&at| at < from);
        let mut matched = 0;
        for (i, &c) in self.squeezed.iter().enumerate().skip(first) {
            *steps_left = steps_left.checked_sub(1)?;
            while matched > 0 && wanted[matched] != c {
                matched = fallback[matched - 1];
            }
            if wanted[matched] == c {
                matched += 1;
            }
            if matched == wanted.len() {
                let start = self.at[i + 1 - matched];
                let inside_a_word = start > 0 && self.is_word(start - 1);
                if !inside_a_word && !self.is_word(self.at[i] + 1) {
                    return Some(start);
                }
                matched = fallback[matched - 1];
            }
        }
        None
    }
}

/// For each prefix of `pattern`, the length of its longest proper prefix that is also its
/// suffix (where a Knuth-Morris-Pratt scan resumes after a mismatch).
fn failure_function(pattern: &[char]) -> Vec<usize> {
    let mut fallback = vec![0; pattern.len()];
    let mut k = 0;
    for i in 1..pattern.len() {
        while k > 0 && pattern[i] != pattern[k] {
            k = fallback[k - 1];
        }
        if pattern[i] == pattern[k] {
            k += 1;
        }
        fallback[i] = k;
    }
    fallback
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(level: u8, title: &str, page: u32) -> OutlineEntry {
        OutlineEntry {
            level,
            title: title.into(),
            page,
        }
    }

    /// `Page::find_heading` with steps enough for any test page.
    fn find_heading(page: &str, from: usize, title: &str) -> Option<usize> {
        let mut steps = usize::MAX;
        Page::new(page).find_heading(from, title, &mut steps)
    }

    #[test]
    fn headings_are_found_at_word_starts_ignoring_case_and_spaces() {
        let page = "Barrier. 1 Intro duction\n2 BAR\nbar again";
        assert_eq!(find_heading(page, 0, "Introduction"), Some(11));
        // Not the start of "Barrier": the first whole-word "Bar" from `from` on.
        assert_eq!(find_heading(page, 0, "Bar"), Some(27));
        assert_eq!(find_heading(page, 28, "Bar"), Some(31));
        assert_eq!(find_heading(page, 0, "Missing"), None);
        assert_eq!(find_heading(page, 0, "  "), None);
        assert_eq!(find_heading(page, 999, "Bar"), None);
        // Overlapping partial matches (where a naive resume would skip the real one), and a
        // match inside a longer word refused before the whole-word one.
        assert_eq!(find_heading("aab aaab", 0, "aab"), Some(0));
        assert_eq!(find_heading("xaab aab", 0, "aab"), Some(5));
        assert_eq!(find_heading("a a ab", 0, "aab"), Some(2));
        assert_eq!(find_heading("ÉTÉ été", 1, "été"), Some(4));
    }

    #[test]
    fn a_hostile_outline_costs_a_bounded_number_of_steps() {
        // A 2 MB page of one repeated letter and 2,000 long titles that almost match everywhere:
        // the naive search costs page x title x entries (~10^12 steps); this one stops at the
        // budget, and the entries past it start at their page.
        let page = "a".repeat(2_000_000);
        let title = format!("{}b", "a".repeat(MAX_TITLE_CHARS - 1));
        let outline: Vec<OutlineEntry> = (0..2_000).map(|_| entry(1, &title, 1)).collect();
        let started = std::time::Instant::now();
        let sections = outline_sections(&[page], &[0], &outline);
        assert_eq!(sections.len(), 2_000);
        assert!(sections.iter().all(|s| s.start == 0));
        // ~2 x 10^7 steps: well under a second even in a debug build.
        assert!(started.elapsed().as_secs() < 10, "{:?}", started.elapsed());
        let mut steps = 1_000;
        assert_eq!(
            Page::new(&"a".repeat(5_000)).find_heading(0, "b", &mut steps),
            None
        );
        assert_eq!(steps, 0);
    }

    #[test]
    fn outline_entries_become_increasing_sections() {
        let pages = [
            "Contents\nFoo 2\nBar 2".to_string(),
            "1 Foo\ntext\n2 Bar\nmore".into(),
            "Baz only".into(),
        ];
        let starts = [0, 21, 43];
        let outline = [
            entry(1, "Foo", 2),
            entry(2, "Bar", 2),
            entry(1, "Not printed", 3),
            entry(1, "Back to page one", 1),
            entry(1, "No such page", 9),
        ];
        let sections = outline_sections(&pages, &starts, &outline);
        let got: Vec<(usize, u8, &str)> = sections
            .iter()
            .map(|s| (s.start, s.level, s.title.as_str()))
            .collect();
        // "Foo" and "Bar" where page 2 prints them (not the table of contents on page 1); an
        // entry not printed starts at its page; one pointing back, or past the end, is dropped.
        assert_eq!(
            got,
            [(23, 1, "Foo"), (34, 2, "Bar"), (43, 1, "Not printed")]
        );
        let text = format!("{}\u{c}{}\u{c}{}", pages[0], pages[1], pages[2]);
        let chars: Vec<char> = text.chars().collect();
        assert_eq!(chars[23..26].iter().collect::<String>(), "Foo");
        assert_eq!(chars[34..37].iter().collect::<String>(), "Bar");
        // Two entries for the same place keep their order and both start there.
        let twice = outline_sections(&pages, &starts, &[entry(1, "Baz", 3), entry(2, "Baz", 3)]);
        assert_eq!(twice.iter().map(|s| s.start).collect::<Vec<_>>(), [43, 43]);
    }
}
