//! PDF files: their text, page by page, through `lopdf` (chosen by measurement,
//! docs/pdf-extraction.md).
//!
//! One document per file. Its text is the pages' text in page order, each page's text in the
//! order of its content stream, joined by a form feed (`\u{c}`, [`PAGE_SEPARATOR`]); a form feed
//! inside a page's text becomes a space, so splitting the text on form feeds gives the pages
//! back. Typographic ligatures (`ﬁ`, `ﬀ`, ...) are spelt out. Lines are joined into paragraphs,
//! words hyphenated at line ends made whole, and running headers, footers and page numbers that
//! repeat across pages dropped (see the `layout` module). The metadata holds where each page
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
//! [`MAX_OUTLINE_ENTRIES`] entries, titles cut at [`MAX_TITLE_CHARS`] characters; titles are
//! found in time linear in the page and the title, and all of them within [`MAX_OUTLINE_STEPS`]
//! characters scanned (past it, the remaining entries start at their pages). So a cyclic, huge or
//! hostile outline cannot hang the reader.
//!
//! Refused, as an invalid item naming the file: a file `lopdf` cannot parse, an encrypted file
//! it cannot open without a password, a file with no pages, a file with no text on any page
//! (scanned pages are images: there is no OCR), and a file whose parsing panics (the panic is
//! caught, so one bad file never stops a folder). Memory and time stay bounded for the document
//! as a whole, not per page (see the `text` module): the file is read only within the size limit;
//! every stream decompressed while loading is bounded by the same limit; each content stream and
//! font map is decompressed once however many pages share it; the page contents scanned, each
//! page counted, may total twice the limit and the text the limit; a file of more than
//! [`MAX_PAGES`] pages is refused. Over a bound, the file is an invalid item naming that bound.

mod layout;
mod outline;
mod text;

use crate::document::Document;
use crate::error::{parse_guarded, Result};
use crate::read::IngestOptions;
use crate::sections::Section;
use crate::walk::SourceFile;
use lopdf::{LoadOptions, Object};
use outline::{outline, outline_sections, OutlineEntry};
use serde_json::{Map, Value};
use text::{OverBudget, PageTexts};

pub use outline::{MAX_OUTLINE_ENTRIES, MAX_OUTLINE_STEPS, MAX_TITLE_CHARS};
pub use text::MAX_PAGES;

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
    if page_ids.len() > MAX_PAGES {
        return Err(format!(
            "PDF has {} pages, above the limit of {MAX_PAGES} pages per document",
            page_ids.len()
        ));
    }
    let mut texts = PageTexts::new(&doc, &page_ids, limit);
    let mut pages = Vec::with_capacity(page_ids.len());
    let mut first_error = None;
    for (&n, &id) in &page_ids {
        match texts.page(id).map_err(|OverBudget(reason)| reason)? {
            Ok(text) => pages.push(clean(&text)),
            Err(e) => {
                // The page stays (empty) so later pages keep their numbers.
                first_error.get_or_insert_with(|| format!("page {n}: {e}"));
                pages.push(String::new());
            }
        }
    }
    let pages = layout::tidy(pages);
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
        embedding: None,
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
