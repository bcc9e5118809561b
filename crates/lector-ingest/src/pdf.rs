//! PDF files: their text, page by page, through `lopdf` (chosen by measurement,
//! docs/pdf-extraction.md).
//!
//! One document per file. Its text is the pages' text in page order, each page's text in the
//! order of its content stream, joined by a form feed (`\u{c}`, [`PAGE_SEPARATOR`]); a form feed
//! inside a page's text becomes a space, so splitting the text on form feeds gives the pages
//! back. Typographic ligatures (`ﬁ`, `ﬀ`, ...) are spelt out. The metadata holds where each page
//! starts, in characters (Unicode scalar values, the offsets of passages):
//! `{"pages": [0, start_of_page_2, ...]}`, which [`page_of`] reads. From the PDF's document
//! information it adds `author` and `created` (`YYYY-MM-DD`, from the `D:YYYYMMDD...` date) to
//! the metadata, and the title to [`Document::title`].
//!
//! A PDF with an outline (its bookmarks) gets `metadata.sections` as the other structured formats
//! do (see [`crate::sections`]): an entry's level is its depth in the outline (1 to 9; deeper
//! entries are dropped), and its start is where its title is printed on the page it points to
//! (compared ignoring case and white space, at a word start, after the previous entry's start),
//! else that page's first character. Entries pointing back before the previous one, to no page,
//! or by an action other than `GoTo` are left out; destinations may be named (the catalog's
//! `Dests` and the `Names` tree). The outline walk follows each object once and keeps at most
//! [`MAX_OUTLINE_ENTRIES`] entries, so a cyclic or huge outline cannot hang the reader.
//!
//! Refused, as an invalid item naming the file: a file `lopdf` cannot parse, an encrypted file
//! it cannot open without a password, a file with no pages, a file with no text on any page
//! (scanned pages are images: there is no OCR), and a file whose parsing panics (the panic is
//! caught, so one bad file never stops a folder). Memory stays bounded: the file is read only
//! within the size limit, and every decompressed stream (object streams while loading, each
//! page's content) is bounded by the same limit.

use crate::document::Document;
use crate::error::{parse_guarded, Result};
use crate::read::IngestOptions;
use crate::sections::Section;
use crate::walk::SourceFile;
use lopdf::{Dictionary, LoadOptions, Object, ObjectId};
use serde_json::{Map, Value};
use std::collections::{BTreeMap, HashMap, HashSet};

/// What the pages of a PDF's text are joined with: a form feed.
pub const PAGE_SEPARATOR: char = '\u{c}';

/// The page (1-based) that holds the character at `char_offset` in a PDF document's text, from
/// the `"pages"` list of page starts in its `metadata` (character offsets, as written by the PDF
/// reader). `None` when the metadata has no such list (not a PDF document) or it is empty or
/// not a list of increasing offsets starting at 0. An offset past the end of the text counts as
/// on the last page.
///
/// ```
/// use serde_json::json;
/// let metadata = json!({"pages": [0, 120, 400]});
/// assert_eq!(lector_ingest::page_of(Some(&metadata), 0), Some(1));
/// assert_eq!(lector_ingest::page_of(Some(&metadata), 120), Some(2));
/// assert_eq!(lector_ingest::page_of(Some(&metadata), 399), Some(2));
/// assert_eq!(lector_ingest::page_of(Some(&metadata), 5000), Some(3));
/// assert_eq!(lector_ingest::page_of(None, 7), None);
/// ```
pub fn page_of(metadata: Option<&Value>, char_offset: usize) -> Option<usize> {
    let starts = metadata?.get("pages")?.as_array()?;
    let mut previous = None;
    let mut page = 0;
    for start in starts {
        let start = usize::try_from(start.as_u64()?).ok()?;
        match previous {
            None if start != 0 => return None,
            Some(p) if start < p => return None,
            _ => {}
        }
        previous = Some(start);
        if start <= char_offset {
            page += 1;
        }
    }
    (page > 0).then_some(page)
}

/// Reads one PDF file's bytes (already size-checked) into a document, or the reason it cannot.
pub(crate) fn read(file: &SourceFile, bytes: &[u8], options: &IngestOptions) -> Result<Document> {
    let limit = options.max_document_bytes.max(1);
    // lopdf is a large parser of untrusted input: a panic in it is this file's failure only.
    let pdf = parse_guarded(&file.path, "PDF", || extract(bytes, limit))?;
    Ok(document(file, pdf))
}

/// What the parser yields for one file.
struct Extracted {
    pages: Vec<String>,
    title: Option<String>,
    author: Option<String>,
    created: Option<String>,
    outline: Vec<OutlineEntry>,
}

fn extract(bytes: &[u8], limit: usize) -> std::result::Result<Extracted, String> {
    let load = LoadOptions {
        max_decompressed_size: Some(limit),
        ..LoadOptions::default()
    };
    let doc = lopdf::Document::load_mem_with_options(bytes, load)
        .map_err(|e| format!("not a readable PDF: {e}"))?;
    // lopdf opens a file encrypted with an empty user password itself; one still encrypted
    // after loading needs a password.
    if doc.is_encrypted() {
        return Err("encrypted PDF (password-protected), not supported".to_string());
    }
    let page_ids = doc.get_pages();
    if page_ids.is_empty() {
        return Err("PDF has no pages (damaged or empty page tree)".to_string());
    }
    let mut pages = Vec::with_capacity(page_ids.len());
    let mut first_error = None;
    for &n in page_ids.keys() {
        match doc.extract_text_with_limit(&[n], limit) {
            Ok(text) => pages.push(clean(&text)),
            Err(e) => {
                // The page stays (empty) so later pages keep their numbers.
                first_error.get_or_insert_with(|| format!("page {n}: {e}"));
                pages.push(String::new());
            }
        }
    }
    if pages.iter().all(|p| p.trim().is_empty()) {
        return Err(match first_error {
            Some(e) => format!("no text could be extracted ({e})"),
            None => format!(
                "no extractable text (scanned?): {} page(s) without text; PDFs of images need OCR, which lector does not do",
                pages.len()
            ),
        });
    }
    let info = info_string(&doc, b"Title");
    Ok(Extracted {
        pages,
        title: info.filter(|t| !t.is_empty()),
        author: info_string(&doc, b"Author").filter(|a| !a.is_empty()),
        created: info_string(&doc, b"CreationDate").and_then(|d| iso_date(&d)),
        outline: outline(&doc, &page_ids),
    })
}

/// The most outline entries read from one file: far more than real documents have, few enough
/// that a hostile outline costs little.
pub const MAX_OUTLINE_ENTRIES: usize = 2_000;

/// The most named destinations read from one file (the `Names` tree can be far larger than the
/// outline that uses it: every link target of a document is one).
const MAX_NAMED_DESTINATIONS: usize = 100_000;

/// An entry of a PDF's outline: its depth (1 = top level), title and page (1-based).
#[derive(Debug, Clone, PartialEq)]
struct OutlineEntry {
    level: u8,
    title: String,
    page: u32,
}

/// The outline's entries in document order (each entry, then its children, then its next
/// sibling), those with a title and a page only. Never fails: a damaged outline yields what
/// could be read of it.
fn outline(doc: &lopdf::Document, page_ids: &BTreeMap<u32, ObjectId>) -> Vec<OutlineEntry> {
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
                t.replace('\0', "")
                    .split_whitespace()
                    .collect::<Vec<_>>()
                    .join(" ")
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
fn outline_sections(
    pages: &[String],
    page_starts: &[usize],
    outline: &[OutlineEntry],
) -> Vec<Section> {
    let mut sections: Vec<Section> = Vec::new();
    let mut searched: Option<(usize, Vec<char>)> = None;
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
        if searched.as_ref().is_none_or(|(i, _)| *i != index) {
            searched = Some((index, page.chars().collect()));
        }
        let chars = &searched.as_ref().expect("just set").1;
        let from = previous.saturating_sub(page_start);
        let start = match find_heading(chars, from, &entry.title) {
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

/// Where `title` is printed in `page` at or after character `from`: the first whole-word run
/// whose characters, skipping white space in both and ignoring case, spell the title's.
fn find_heading(page: &[char], from: usize, title: &str) -> Option<usize> {
    let lower = |c: char| c.to_lowercase().next().unwrap_or(c);
    let wanted: Vec<char> = title
        .chars()
        .filter(|c| !c.is_whitespace())
        .map(lower)
        .collect();
    if wanted.is_empty() {
        return None;
    }
    let is_word = |at: usize| page.get(at).is_some_and(|c| c.is_alphanumeric());
    (from..page.len()).find(|&at| {
        if page[at].is_whitespace() || (at > 0 && is_word(at - 1)) {
            return false;
        }
        let mut next = at;
        for &w in &wanted {
            while page.get(next).is_some_and(|c| c.is_whitespace()) {
                next += 1;
            }
            if page.get(next).map(|&c| lower(c)) != Some(w) {
                return false;
            }
            next += 1;
        }
        !is_word(next)
    })
}

/// A page's text as lector keeps it: typographic ligatures (U+FB00..U+FB06, which TeX fonts
/// map `fi`, `ff`, ... to) spelt out so that words match what people type, and form feeds, the
/// page separator, turned into spaces.
fn clean(page: &str) -> String {
    let mut out = String::with_capacity(page.len());
    for c in page.chars() {
        match c {
            '\u{fb00}' => out.push_str("ff"),
            '\u{fb01}' => out.push_str("fi"),
            '\u{fb02}' => out.push_str("fl"),
            '\u{fb03}' => out.push_str("ffi"),
            '\u{fb04}' => out.push_str("ffl"),
            '\u{fb05}' | '\u{fb06}' => out.push_str("st"),
            PAGE_SEPARATOR => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

/// A text string of the document information dictionary (trimmed), when present and decodable.
fn info_string(doc: &lopdf::Document, key: &[u8]) -> Option<String> {
    let info = match doc.trailer.get(b"Info").ok()? {
        Object::Reference(id) => doc.get_dictionary(*id).ok()?,
        Object::Dictionary(dict) => dict,
        _ => return None,
    };
    let (_, value) = doc.dereference(info.get(key).ok()?).ok()?;
    let text = lopdf::decode_text_string(value).ok()?;
    Some(text.trim().replace('\0', ""))
}

/// `YYYY-MM-DD` from a PDF date (`D:YYYYMMDDHHmmSS...`, the `D:` optional), when its year,
/// month and day are there and plausible.
pub(crate) fn iso_date(pdf_date: &str) -> Option<String> {
    let s = pdf_date.trim();
    let s = s.strip_prefix("D:").unwrap_or(s);
    let digits = s.get(..8)?;
    if !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let (year, month, day) = (&digits[..4], &digits[4..6], &digits[6..8]);
    let (m, d): (u32, u32) = (month.parse().ok()?, day.parse().ok()?);
    ((1..=12).contains(&m) && (1..=31).contains(&d)).then(|| format!("{year}-{month}-{day}"))
}

fn document(file: &SourceFile, pdf: Extracted) -> Document {
    let mut text = String::new();
    let mut starts = Vec::with_capacity(pdf.pages.len());
    let mut chars = 0usize;
    for (i, page) in pdf.pages.iter().enumerate() {
        if i > 0 {
            text.push(PAGE_SEPARATOR);
            chars += 1;
        }
        starts.push(chars);
        text.push_str(page);
        chars += page.chars().count();
    }
    let sections = outline_sections(&pdf.pages, &starts, &pdf.outline);
    let mut metadata = Map::new();
    let starts = starts.into_iter().map(Value::from).collect();
    metadata.insert("pages".to_string(), Value::Array(starts));
    if !sections.is_empty() {
        let list = sections.iter().map(Section::to_json).collect();
        metadata.insert("sections".to_string(), Value::Array(list));
    }
    if let Some(author) = pdf.author {
        metadata.insert("author".to_string(), Value::String(author));
    }
    if let Some(created) = pdf.created {
        metadata.insert("created".to_string(), Value::String(created));
    }
    Document {
        id: file.id.clone(),
        title: pdf.title,
        text,
        date: None,
        metadata: Some(Value::Object(metadata)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn page_of_maps_offsets_to_pages() {
        let m = json!({"pages": [0, 10, 25]});
        let pages: Vec<_> = [0, 9, 10, 24, 25, 1000]
            .iter()
            .map(|&o| page_of(Some(&m), o))
            .collect();
        assert_eq!(
            pages,
            [Some(1), Some(1), Some(2), Some(2), Some(3), Some(3)]
        );
        assert_eq!(page_of(Some(&json!({"pages": [0]})), 3), Some(1));
        // Not page starts: none, rather than a wrong page.
        for bad in [
            json!({}),
            json!({"pages": []}),
            json!({"pages": [5, 10]}),
            json!({"pages": [0, 10, 4]}),
            json!({"pages": [0, "x"]}),
            json!({"pages": 3}),
            json!([0, 1]),
        ] {
            assert_eq!(page_of(Some(&bad), 7), None, "{bad}");
        }
    }

    #[test]
    fn page_starts_are_character_offsets() {
        let file = SourceFile {
            path: "a.pdf".into(),
            id: "a.pdf".into(),
            bytes: 0,
            format: crate::Format::Pdf,
        };
        let pdf = Extracted {
            pages: vec!["héllo".into(), String::new(), "wörld".into()],
            title: None,
            author: Some("A".into()),
            created: None,
            outline: Vec::new(),
        };
        let doc = document(&file, pdf);
        assert_eq!(doc.text, "héllo\u{c}\u{c}wörld");
        let m = doc.metadata.as_ref().unwrap();
        assert_eq!(m["pages"], json!([0, 6, 7]));
        assert_eq!(m["author"], json!("A"));
        let w = doc.text.chars().position(|c| c == 'w').unwrap();
        assert_eq!(page_of(Some(m), w), Some(3));
        assert_eq!(doc.text.split(PAGE_SEPARATOR).count(), 3);
    }

    fn entry(level: u8, title: &str, page: u32) -> OutlineEntry {
        OutlineEntry {
            level,
            title: title.into(),
            page,
        }
    }

    #[test]
    fn headings_are_found_at_word_starts_ignoring_case_and_spaces() {
        let page: Vec<char> = "Barrier. 1 Intro duction\n2 BAR\nbar again"
            .chars()
            .collect();
        assert_eq!(find_heading(&page, 0, "Introduction"), Some(11));
        // Not the start of "Barrier": the first whole-word "Bar" from `from` on.
        assert_eq!(find_heading(&page, 0, "Bar"), Some(27));
        assert_eq!(find_heading(&page, 28, "Bar"), Some(31));
        assert_eq!(find_heading(&page, 0, "Missing"), None);
        assert_eq!(find_heading(&page, 0, "  "), None);
        assert_eq!(find_heading(&page, 999, "Bar"), None);
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

    #[test]
    fn ligatures_are_spelt_out_and_form_feeds_are_spaces() {
        assert_eq!(
            clean("De\u{fb01}nition o\u{fb00}en\u{c}e\u{fb03}cient"),
            "Definition offen efficient"
        );
    }

    #[test]
    fn pdf_dates() {
        assert_eq!(
            iso_date("D:20220403180542+02'00'").as_deref(),
            Some("2022-04-03")
        );
        assert_eq!(iso_date("19991231").as_deref(), Some("1999-12-31"));
        assert_eq!(iso_date("D:2022"), None);
        assert_eq!(iso_date("D:20221340"), None);
        assert_eq!(iso_date("Sunday"), None);
        assert_eq!(iso_date("D:2022é0101"), None);
    }
}
