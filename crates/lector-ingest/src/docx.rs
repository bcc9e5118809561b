//! Word files (`.docx`, Office Open XML WordprocessingML): their text in document order, with
//! headings kept as structure.
//!
//! A `.docx` is a ZIP archive; the text is in its main part (`word/document.xml`, or where
//! `_rels/.rels` points), read with `zip` and the streaming XML parser `quick-xml`. One document
//! per file. Its text is built as follows:
//!
//! - each paragraph (`w:p`) is one line: the text of its runs (`w:t`, leading and trailing
//!   white space kept only under `xml:space="preserve"`), a tab for `w:tab`/`w:ptab`, a line
//!   break for `w:br`/`w:cr`, `-` for a non-breaking hyphen; paragraphs are joined by `\n` and
//!   empty paragraphs are left out;
//! - a heading paragraph is preceded by a blank line (`\n\n`), so that passages tend to start at
//!   headings;
//! - a table (`w:tbl`) is one line per row (`w:tr`), its cells (`w:tc`) joined by ` | ` and the
//!   paragraphs of a cell by a space; a table nested in a cell is flattened into that cell, its
//!   rows joined by ` / `.
//!
//! A paragraph is a heading of level `n` (1..=9) when its own `w:pPr/w:outlineLvl` is `n - 1`
//! (`9` means body text), else when its style (`w:pPr/w:pStyle`) is one: in `word/styles.xml`,
//! a style named `heading n` (Word's built-in name, the same whatever the language of the
//! style id: German `Überschrift1` is still named `heading 1`), or with `w:outlineLvl` in its
//! paragraph properties, or based on (`w:basedOn`) such a style; without a styles part, a style
//! id `HeadingN` or `Heading N` (as LibreOffice writes them). A paragraph of the style `Title`
//! is not a section: it gives the document its title when the properties have none.
//!
//! Metadata (a JSON object):
//! - `sections`: every heading in document order, `{"start": <char offset of the heading's
//!   text>, "level": <1..=9>, "title": "<its text>"}`; offsets count characters (Unicode scalar
//!   values), the offsets of passages; [`section_path`] names the section at an offset;
//! - `author` (`dc:creator`), `created` and `modified` (`dcterms:created` / `dcterms:modified`
//!   as `YYYY-MM-DD`) from `docProps/core.xml`, when present.
//!
//! The title is the properties' `dc:title` when it is not empty, else the first `Title`
//! paragraph, else the first level-1 heading.
//!
//! Not read: list numbering and bullets (`w:numPr`, the text of the items is kept), footnotes
//! and endnotes, comments, headers and footers, text boxes and shapes (`w:txbxContent`),
//! deleted tracked changes (`w:delText`, inserted text is kept), field codes (`w:instrText`,
//! their shown result is kept), symbols (`w:sym`), embedded objects and images.
//!
//! Refused, as an invalid item naming the file: a file that is not a ZIP archive (a
//! password-protected `.docx` is an OLE compound file, as is a legacy `.doc`: both are named
//! as such), an archive without the main part, a main part that is not well-formed XML or not
//! UTF-8 or is encrypted, a main part that decompresses to more than
//! [`IngestOptions::max_document_bytes`] (its declared size is checked first, then at most one
//! byte past the limit is ever decompressed: a ZIP bomb stops there; no more than 1 MiB is
//! reserved on the declared size's word), elements nested deeper than [`MAX_XML_DEPTH`] (a few
//! hundred bytes of unclosed `<w:p>` would otherwise hold memory per element), a document without text,
//! and a file whose reading panics (caught, so one bad file never stops a folder). The other
//! parts read (`_rels/.rels`, `word/styles.xml`, `docProps/core.xml`) are bounded the same way,
//! but one that is missing, broken or too large is only left out: the text is read without it.

use crate::document::Document;
use crate::error::{parse_guarded, Result};
use crate::read::{human_size, over_limit, IngestOptions};
pub use crate::sections::section_path;
use crate::sections::Section;
use crate::walk::SourceFile;
use quick_xml::events::{BytesStart, Event};
use quick_xml::Reader;
use serde_json::{Map, Value};
use std::collections::HashMap;
use std::io::{Cursor, Read};

/// Reads one DOCX file's bytes (already size-checked) into a document, or the reason it cannot.
pub(crate) fn read(file: &SourceFile, bytes: &[u8], options: &IngestOptions) -> Result<Document> {
    // The ZIP and XML parsers read untrusted input: a panic in them is this file's failure only.
    let docx = parse_guarded(&file.path, "DOCX", || extract(bytes, options))?;
    Ok(document(file, docx))
}

/// The first bytes of an OLE compound file: what Word writes for a password-protected `.docx`
/// (and for a legacy `.doc`).
const OLE_MAGIC: [u8; 8] = [0xD0, 0xCF, 0x11, 0xE0, 0xA1, 0xB1, 0x1A, 0xE1];

/// The WordprocessingML namespaces (transitional, as Word and LibreOffice write, and strict).
const WORDML: [&str; 2] = [
    "http://schemas.openxmlformats.org/wordprocessingml/2006/main",
    "http://purl.oclc.org/ooxml/wordprocessingml/main",
];

/// The deepest element nesting read in a part: far deeper than Word writes (tables in tables in
/// text boxes stay under 30), shallow enough that a file of millions of unclosed elements is
/// refused after a few hundred.
pub const MAX_XML_DEPTH: usize = 256;

/// The most bytes reserved for a part before reading it (it grows past this as it is read).
const PART_CAPACITY: usize = 1 << 20;

/// The refusal of an element nested deeper than [`MAX_XML_DEPTH`].
fn too_deep() -> String {
    format!("XML elements nested more than {MAX_XML_DEPTH} deep (the limit per document)")
}

/// What one DOCX file yields.
#[derive(Debug, Default)]
struct Extracted {
    text: String,
    sections: Vec<Section>,
    title: Option<String>,
    author: Option<String>,
    created: Option<String>,
    modified: Option<String>,
}

type Archive<'a> = zip::ZipArchive<Cursor<&'a [u8]>>;

fn extract(bytes: &[u8], options: &IngestOptions) -> std::result::Result<Extracted, String> {
    if bytes.starts_with(&OLE_MAGIC) {
        let what = "encrypted (password-protected) DOCX or legacy Word .doc";
        return Err(format!(
            "{what}: an OLE compound file, not a ZIP archive; not supported"
        ));
    }
    let mut archive = zip::ZipArchive::new(Cursor::new(bytes))
        .map_err(|e| format!("not a DOCX (not a ZIP archive: {e})"))?;
    let main = main_part(&mut archive, options);
    let Some(xml) = part(&mut archive, &main, options)? else {
        return Err(format!("not a DOCX (no {main} in the archive)"));
    };
    let dir = main.rsplit_once('/').map_or("", |(dir, _)| dir);
    let styles_path = if dir.is_empty() {
        "styles.xml".to_string()
    } else {
        format!("{dir}/styles.xml")
    };
    // The styles and the properties only add to the text: without them (missing, malformed or
    // over the limit) the document is still read.
    let styles = match part(&mut archive, &styles_path, options) {
        Ok(Some(xml)) => styles(&xml).unwrap_or_default(),
        _ => HashMap::new(),
    };
    let body = body(&xml, &styles).map_err(|e| format!("{main}: {e}"))?;
    if body.text.trim().is_empty() {
        return Err("no text (the document has no paragraph with text)".to_string());
    }
    let core = match part(&mut archive, "docProps/core.xml", options) {
        Ok(Some(xml)) => core(&xml).unwrap_or_default(),
        _ => Core::default(),
    };
    let title = core
        .title
        .filter(|t| !t.is_empty())
        .or(body.title_paragraph)
        .or_else(|| {
            body.sections
                .iter()
                .find(|s| s.level == 1)
                .map(|s| s.title.clone())
        });
    Ok(Extracted {
        text: body.text,
        sections: body.sections,
        title,
        author: core.creator.filter(|a| !a.is_empty()),
        created: core.created.as_deref().and_then(iso_date),
        modified: core.modified.as_deref().and_then(iso_date),
    })
}

/// The main document part: the `officeDocument` relationship's target in `_rels/.rels`, else
/// (no such part, or a broken one) `word/document.xml`.
fn main_part(archive: &mut Archive, options: &IngestOptions) -> String {
    const DEFAULT: &str = "word/document.xml";
    let Ok(Some(rels)) = part(archive, "_rels/.rels", options) else {
        return DEFAULT.to_string();
    };
    let mut reader = Reader::from_str(&rels);
    loop {
        match reader.read_event() {
            Ok(Event::Start(e) | Event::Empty(e)) if e.local_name().as_ref() == "Relationship" => {
                let kind = attribute(&e, "Type").unwrap_or_default();
                if kind.ends_with("/officeDocument") {
                    if let Some(target) = attribute(&e, "Target") {
                        let target = target.trim_start_matches('/').to_string();
                        if !target.is_empty() {
                            return target;
                        }
                    }
                }
            }
            Ok(Event::Eof) | Err(_) => return DEFAULT.to_string(),
            Ok(_) => {}
        }
    }
}

/// The text of the archive entry `name`, `None` when there is none. Refused when it is
/// encrypted, not UTF-8, or decompresses to more than the document limit (declared or read:
/// at most one byte past the limit is decompressed).
fn part(
    archive: &mut Archive,
    name: &str,
    options: &IngestOptions,
) -> std::result::Result<Option<String>, String> {
    let limit = options.max_document_bytes as u64;
    let entry = match archive.by_name(name) {
        Ok(entry) => entry,
        Err(zip::result::ZipError::FileNotFound) => return Ok(None),
        Err(e) => return Err(format!("{name}: unreadable ZIP entry ({e})")),
    };
    // `at_least`: the size is only known to exceed `bytes` (reading stopped there).
    let too_large = |bytes: u64, at_least: bool| {
        format!(
            "{name} decompresses to {}{}, {}",
            if at_least { "over " } else { "" },
            human_size(bytes),
            over_limit(options)
        )
    };
    if entry.size() > limit {
        return Err(too_large(entry.size(), false));
    }
    // The declared size is the archive's word, not the entry's: it may lie, so the buffer grows
    // as bytes arrive rather than being reserved up front.
    let mut bytes = Vec::with_capacity((entry.size() as usize).min(PART_CAPACITY));
    entry
        .take(limit + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("{name}: unreadable ZIP entry ({e})"))?;
    if bytes.len() as u64 > limit {
        return Err(too_large(limit, true));
    }
    let text = String::from_utf8(bytes).map_err(|e| {
        format!(
            "{name}: not UTF-8 (invalid byte at {})",
            e.utf8_error().valid_up_to()
        )
    })?;
    Ok(Some(match text.strip_prefix('\u{feff}') {
        Some(rest) => rest.to_string(),
        None => text,
    }))
}

/// The value of attribute `key` (a qualified name) of `e`, entities resolved.
fn attribute(e: &BytesStart, key: &str) -> Option<String> {
    let attr = e.try_get_attribute(key).ok()??;
    let value = attr
        .normalized_value(quick_xml::XmlVersion::Implicit1_0)
        .ok()?;
    Some(value.into_owned())
}

/// The text of a predefined entity or character reference (`amp`, `#x41`, ...).
fn entity(name: &str) -> Option<char> {
    Some(match name {
        "amp" => '&',
        "lt" => '<',
        "gt" => '>',
        "quot" => '"',
        "apos" => '\'',
        _ => {
            let num = name.strip_prefix('#')?;
            let code = match num.strip_prefix('x') {
                Some(hex) => u32::from_str_radix(hex, 16).ok()?,
                None => num.parse().ok()?,
            };
            char::from_u32(code)?
        }
    })
}

/// Qualified names in the WordprocessingML namespace: the prefix the part's root element binds
/// to it (`w` in every file Word or LibreOffice writes).
#[derive(Debug, Clone)]
struct Names {
    prefix: String,
}

impl Names {
    /// The prefix bound to WordprocessingML by `root`'s namespace declarations; `w` when none is.
    fn of(root: &BytesStart) -> Names {
        for attr in root.attributes().flatten() {
            let key = attr.key.as_ref();
            if WORDML.contains(&attr.value.as_ref()) {
                if let Some(prefix) = key.strip_prefix("xmlns:") {
                    return Names {
                        prefix: prefix.to_string(),
                    };
                }
                if key == "xmlns" {
                    return Names {
                        prefix: String::new(),
                    };
                }
            }
        }
        Names {
            prefix: "w".to_string(),
        }
    }

    /// The local name of `qualified` when it is in WordprocessingML.
    fn local<'a>(&self, qualified: &'a str) -> Option<&'a str> {
        if self.prefix.is_empty() {
            return (!qualified.contains(':')).then_some(qualified);
        }
        let rest = qualified.strip_prefix(self.prefix.as_str())?;
        rest.strip_prefix(':')
    }

    /// Attribute `local` in WordprocessingML of `e` (`w:val`).
    fn attribute(&self, e: &BytesStart, local: &str) -> Option<String> {
        if self.prefix.is_empty() {
            return attribute(e, local);
        }
        attribute(e, &format!("{}:{local}", self.prefix))
    }
}

/// What a paragraph style says about its paragraphs.
#[derive(Debug, Default, Clone, PartialEq)]
struct Style {
    /// `Some(n)`: a heading of level n; `Some(0)`: explicitly body text (`w:outlineLvl` 9).
    level: Option<u8>,
    title: bool,
    based_on: Option<String>,
}

/// A heading level from a style name or id: `heading 3`, `Heading3` -> 3.
fn heading_level_of_name(name: &str) -> Option<u8> {
    let lower = name.trim().to_ascii_lowercase();
    let digits = lower.strip_prefix("heading")?.trim_start();
    let n: u8 = digits.parse().ok()?;
    (1..=9).contains(&n).then_some(n)
}

/// `w:outlineLvl`'s value as a heading level: 0..=8 -> 1..=9, 9 (body text) -> 0.
fn outline_level(value: &str) -> Option<u8> {
    let v: u8 = value.trim().parse().ok()?;
    (v <= 9).then_some(if v == 9 { 0 } else { v + 1 })
}

/// The paragraph styles of `word/styles.xml`, by style id.
fn styles(xml: &str) -> std::result::Result<HashMap<String, Style>, String> {
    let mut reader = Reader::from_str(xml);
    let mut names: Option<Names> = None;
    let mut out = HashMap::new();
    let mut current: Option<(String, Style)> = None;
    let mut stack: Vec<String> = Vec::new();
    loop {
        let event = reader
            .read_event()
            .map_err(|e| format!("malformed XML: {e}"))?;
        let (e, empty) = match event {
            Event::Start(e) => (e, false),
            Event::Empty(e) => (e, true),
            Event::End(_) => {
                if let Some(name) = stack.pop() {
                    if name == "style" {
                        if let Some((id, style)) = current.take() {
                            out.insert(id, style);
                        }
                    }
                }
                continue;
            }
            Event::Eof => break,
            _ => continue,
        };
        let names = names.get_or_insert_with(|| Names::of(&e));
        let local = names.local(e.name().as_ref()).unwrap_or("").to_string();
        let parent = stack.last().map(String::as_str);
        match local.as_str() {
            "style" => {
                let paragraph = names.attribute(&e, "type").is_none_or(|t| t == "paragraph");
                current = match (names.attribute(&e, "styleId"), paragraph) {
                    (Some(id), true) => Some((id, Style::default())),
                    _ => None,
                };
            }
            "name" if parent == Some("style") => {
                if let (Some((_, style)), Some(name)) =
                    (current.as_mut(), names.attribute(&e, "val"))
                {
                    if let Some(level) = heading_level_of_name(&name) {
                        style.level.get_or_insert(level);
                    }
                    style.title |= name.trim().eq_ignore_ascii_case("title");
                }
            }
            "basedOn" if parent == Some("style") => {
                if let Some((_, style)) = current.as_mut() {
                    style.based_on = names.attribute(&e, "val");
                }
            }
            "outlineLvl" if parent == Some("pPr") && stack.len() >= 2 => {
                let in_style = stack[stack.len() - 2] == "style";
                if let (true, Some((_, style)), Some(level)) = (
                    in_style,
                    current.as_mut(),
                    names
                        .attribute(&e, "val")
                        .as_deref()
                        .and_then(outline_level),
                ) {
                    style.level = Some(level);
                }
            }
            _ => {}
        }
        if !empty {
            if stack.len() >= MAX_XML_DEPTH {
                return Err(too_deep());
            }
            stack.push(local);
        }
    }
    Ok(out)
}

/// A style's heading level (0 for body text), following `w:basedOn` (at most 16 steps).
fn style_level(styles: &HashMap<String, Style>, id: &str) -> Option<u8> {
    let mut id = id;
    for _ in 0..16 {
        let style = styles.get(id)?;
        if style.level.is_some() {
            return style.level;
        }
        id = style.based_on.as_deref()?;
    }
    None
}

/// What the main part yields.
#[derive(Debug, Default)]
struct Body {
    text: String,
    sections: Vec<Section>,
    title_paragraph: Option<String>,
}

/// A table being read: its finished rows, the current row's cells, the current cell.
#[derive(Debug, Default)]
struct Table {
    rows: Vec<String>,
    cells: Vec<String>,
    cell: String,
}

/// The paragraph being read.
#[derive(Debug, Default)]
struct Paragraph {
    text: String,
    style: Option<String>,
    outline: Option<u8>,
}

/// The document's text and headings from the main part's XML.
fn body(xml: &str, styles: &HashMap<String, Style>) -> std::result::Result<Body, String> {
    let mut reader = Reader::from_str(xml);
    let mut names: Option<Names> = None;
    let mut out = Body::default();
    let mut chars = 0usize;
    // Local names of the open elements (empty for ones outside WordprocessingML).
    let mut stack: Vec<String> = Vec::new();
    // Depth of the element whose content is skipped (text boxes, alternate content fallbacks).
    let mut skip_from: Option<usize> = None;
    let mut paragraphs: Vec<Paragraph> = Vec::new();
    let mut tables: Vec<Table> = Vec::new();
    // The text of the `w:t` being read, and whether its white space is kept.
    let mut run_text: Option<(String, bool)> = None;
    loop {
        let event = reader
            .read_event()
            .map_err(|e| format!("malformed XML: {e}"))?;
        let (e, empty) = match event {
            Event::Start(e) => (e, false),
            Event::Empty(e) => (e, true),
            Event::End(_) => {
                let local = stack.pop().unwrap_or_default();
                if skip_from.is_some_and(|d| stack.len() <= d) {
                    skip_from = None;
                    continue;
                }
                if skip_from.is_some() {
                    continue;
                }
                match local.as_str() {
                    "t" => {
                        if let (Some((text, preserve)), Some(p)) =
                            (run_text.take(), paragraphs.last_mut())
                        {
                            p.text
                                .push_str(if preserve { &text } else { xml_trim(&text) });
                        }
                    }
                    "p" => {
                        if let Some(p) = paragraphs.pop() {
                            end_paragraph(p, styles, &mut tables, &mut out, &mut chars);
                        }
                    }
                    "tc" => {
                        if let Some(t) = tables.last_mut() {
                            let cell = std::mem::take(&mut t.cell);
                            t.cells.push(cell.trim().to_string());
                        }
                    }
                    "tr" => {
                        if let Some(t) = tables.last_mut() {
                            let cells = std::mem::take(&mut t.cells);
                            if cells.iter().any(|c| !c.is_empty()) {
                                t.rows.push(cells.join(" | "));
                            }
                        }
                    }
                    "tbl" => {
                        if let Some(t) = tables.pop() {
                            end_table(t, &mut tables, &mut out, &mut chars);
                        }
                    }
                    _ => {}
                }
                continue;
            }
            Event::Text(t) => {
                if let (Some((text, _)), None) = (run_text.as_mut(), skip_from) {
                    text.push_str(&t.xml10_content());
                }
                continue;
            }
            Event::CData(t) => {
                if let (Some((text, _)), None) = (run_text.as_mut(), skip_from) {
                    text.push_str(&t);
                }
                continue;
            }
            Event::GeneralRef(r) => {
                if let (Some((text, _)), None) = (run_text.as_mut(), skip_from) {
                    let name: &str = &r;
                    let c = entity(name).ok_or_else(|| format!("unknown entity `&{name};`"))?;
                    text.push(c);
                }
                continue;
            }
            Event::Eof => break,
            _ => continue,
        };
        let names = names.get_or_insert_with(|| Names::of(&e));
        let local = names.local(e.name().as_ref()).unwrap_or("").to_string();
        let is_fallback = e.name().local_name().as_ref() == "Fallback";
        if skip_from.is_none() {
            let parent = stack.last().map(String::as_str);
            let grandparent = stack.len().checked_sub(2).map(|i| stack[i].as_str());
            let in_run = parent == Some("r");
            match local.as_str() {
                "p" if !empty => paragraphs.push(Paragraph::default()),
                "t" if in_run && !empty => {
                    let preserve = attribute(&e, "xml:space").as_deref() == Some("preserve");
                    run_text = Some((String::new(), preserve));
                }
                "tab" | "ptab" if in_run => push_char(&mut paragraphs, '\t'),
                "br" | "cr" if in_run => push_char(&mut paragraphs, '\n'),
                "noBreakHyphen" if in_run => push_char(&mut paragraphs, '-'),
                "pStyle" if parent == Some("pPr") && grandparent == Some("p") => {
                    if let Some(p) = paragraphs.last_mut() {
                        p.style = names.attribute(&e, "val");
                    }
                }
                "outlineLvl" if parent == Some("pPr") && grandparent == Some("p") => {
                    if let Some(p) = paragraphs.last_mut() {
                        p.outline = names
                            .attribute(&e, "val")
                            .as_deref()
                            .and_then(outline_level);
                    }
                }
                "tbl" if !empty => tables.push(Table::default()),
                "txbxContent" if !empty => skip_from = Some(stack.len()),
                _ if is_fallback && !empty => skip_from = Some(stack.len()),
                _ => {}
            }
        }
        if !empty {
            if stack.len() >= MAX_XML_DEPTH {
                return Err(too_deep());
            }
            stack.push(local);
        }
    }
    Ok(out)
}

/// XML white space trimmed at both ends (what a `w:t` without `xml:space="preserve"` keeps).
fn xml_trim(text: &str) -> &str {
    text.trim_matches(|c| matches!(c, ' ' | '\t' | '\n' | '\r'))
}

fn push_char(paragraphs: &mut [Paragraph], c: char) {
    if let Some(p) = paragraphs.last_mut() {
        p.text.push(c);
    }
}

/// A finished paragraph goes into the table cell it is in, else into the text (a heading after a
/// blank line, its section recorded).
fn end_paragraph(
    p: Paragraph,
    styles: &HashMap<String, Style>,
    tables: &mut [Table],
    out: &mut Body,
    chars: &mut usize,
) {
    let text = p.text.trim_end();
    if text.trim().is_empty() {
        return;
    }
    if let Some(t) = tables.last_mut() {
        if !t.cell.is_empty() {
            t.cell.push(' ');
        }
        t.cell.push_str(text.trim());
        return;
    }
    let style_level = p.style.as_deref().and_then(|id| {
        if styles.is_empty() {
            heading_level_of_name(id)
        } else {
            style_level(styles, id).or_else(|| heading_level_of_name(id))
        }
    });
    let level = p.outline.or(style_level).filter(|&l| l > 0);
    let is_title = p.style.as_deref().is_some_and(|id| {
        styles
            .get(id)
            .map_or(id.eq_ignore_ascii_case("title"), |s| s.title)
    });
    if is_title && out.title_paragraph.is_none() {
        out.title_paragraph = Some(text.trim().to_string());
    }
    if !out.text.is_empty() {
        let separator = if level.is_some() || is_title {
            "\n\n"
        } else {
            "\n"
        };
        out.text.push_str(separator);
        *chars += separator.len();
    }
    if let Some(level) = level {
        out.sections.push(Section {
            start: *chars + text.chars().take_while(|c| c.is_whitespace()).count(),
            level,
            title: text.trim().to_string(),
        });
    }
    out.text.push_str(text);
    *chars += text.chars().count();
}

/// A finished table goes into the cell holding it (rows joined by ` / `), else into the text
/// (one line per row).
fn end_table(t: Table, tables: &mut [Table], out: &mut Body, chars: &mut usize) {
    if t.rows.is_empty() {
        return;
    }
    if let Some(outer) = tables.last_mut() {
        if !outer.cell.is_empty() {
            outer.cell.push(' ');
        }
        outer.cell.push_str(&t.rows.join(" / "));
        return;
    }
    let text = t.rows.join("\n");
    if !out.text.is_empty() {
        out.text.push('\n');
        *chars += 1;
    }
    out.text.push_str(&text);
    *chars += text.chars().count();
}

/// The document properties lector keeps.
#[derive(Debug, Default)]
struct Core {
    title: Option<String>,
    creator: Option<String>,
    created: Option<String>,
    modified: Option<String>,
}

/// `docProps/core.xml`: title, creator, created and modified (by local name; trimmed).
fn core(xml: &str) -> std::result::Result<Core, String> {
    let mut reader = Reader::from_str(xml);
    let mut out = Core::default();
    let mut field: Option<(String, String)> = None;
    loop {
        match reader
            .read_event()
            .map_err(|e| format!("malformed XML: {e}"))?
        {
            Event::Start(e) => {
                field = Some((e.local_name().as_ref().to_string(), String::new()));
            }
            Event::Text(t) => {
                if let Some((_, text)) = field.as_mut() {
                    text.push_str(&t.xml10_content());
                }
            }
            Event::GeneralRef(r) => {
                if let (Some((_, text)), Some(c)) = (field.as_mut(), entity(&r)) {
                    text.push(c);
                }
            }
            Event::End(_) => {
                if let Some((name, text)) = field.take() {
                    let value = Some(text.trim().to_string());
                    match name.as_str() {
                        "title" => out.title = value,
                        "creator" => out.creator = value,
                        "created" => out.created = value,
                        "modified" => out.modified = value,
                        _ => {}
                    }
                }
            }
            Event::Eof => break,
            _ => {}
        }
    }
    Ok(out)
}

/// `YYYY-MM-DD` from a W3CDTF date (`2024-03-01T10:00:00Z`) when it starts with a plausible one.
fn iso_date(w3c: &str) -> Option<String> {
    let date = w3c.trim().get(..10)?;
    let b = date.as_bytes();
    let digits = |r: std::ops::Range<usize>| b[r].iter().all(u8::is_ascii_digit);
    if !(digits(0..4) && b[4] == b'-' && digits(5..7) && b[7] == b'-' && digits(8..10)) {
        return None;
    }
    let (m, d): (u32, u32) = (date[5..7].parse().ok()?, date[8..10].parse().ok()?);
    ((1..=12).contains(&m) && (1..=31).contains(&d)).then(|| date.to_string())
}

fn document(file: &SourceFile, docx: Extracted) -> Document {
    let sections = docx.sections.iter().map(Section::to_json).collect();
    let mut metadata = Map::new();
    metadata.insert("sections".to_string(), Value::Array(sections));
    for (key, value) in [
        ("author", docx.author),
        ("created", docx.created),
        ("modified", docx.modified),
    ] {
        if let Some(value) = value {
            metadata.insert(key.to_string(), Value::String(value));
        }
    }
    Document {
        id: file.id.clone(),
        title: docx.title,
        text: docx.text,
        date: None,
        metadata: Some(Value::Object(metadata)),
        embedding: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn heading(start: usize, level: u8, title: &str) -> Value {
        json!({"start": start, "level": level, "title": title})
    }

    #[test]
    fn section_path_follows_levels() {
        let m = json!({"sections": [
            heading(5, 1, "A"),
            heading(10, 2, "A.1"),
            heading(20, 3, "A.1.a"),
            heading(30, 2, "A.2"),
            heading(40, 1, "B"),
            heading(50, 3, "B..x"),
        ]});
        let paths: Vec<_> = [0, 5, 12, 25, 35, 45, 55, 10_000]
            .iter()
            .map(|&o| section_path(Some(&m), o))
            .collect();
        let expected = [
            None,
            Some("A"),
            Some("A > A.1"),
            Some("A > A.1 > A.1.a"),
            // A level-2 heading closes the level-3 one under the previous level 2.
            Some("A > A.2"),
            // A level-1 heading closes everything deeper.
            Some("B"),
            // A skipped level is no gap in the path.
            Some("B > B..x"),
            Some("B > B..x"),
        ];
        assert_eq!(paths, expected.map(|p| p.map(String::from)));
    }

    #[test]
    fn section_path_refuses_what_is_not_a_list_of_headings() {
        assert_eq!(section_path(Some(&json!({"sections": []})), 3), None);
        for bad in [
            json!({}),
            json!({"sections": 3}),
            json!({"sections": [{"start": 0, "level": 1}]}),
            json!({"sections": [{"start": 0, "level": 0, "title": "x"}]}),
            json!({"sections": [{"start": 0, "level": 10, "title": "x"}]}),
            json!({"sections": [{"start": "0", "level": 1, "title": "x"}]}),
            json!({"sections": [heading(9, 1, "x"), heading(4, 1, "y")]}),
            json!({"pages": [0, 10]}),
        ] {
            assert_eq!(section_path(Some(&bad), 20), None, "{bad}");
        }
    }

    #[test]
    fn heading_levels_of_names_and_outline_levels() {
        assert_eq!(heading_level_of_name("heading 1"), Some(1));
        assert_eq!(heading_level_of_name("Heading9"), Some(9));
        assert_eq!(heading_level_of_name("Heading 10"), None);
        assert_eq!(heading_level_of_name("Heading0"), None);
        assert_eq!(heading_level_of_name("Headings"), None);
        assert_eq!(heading_level_of_name("Title"), None);
        assert_eq!(outline_level("0"), Some(1));
        assert_eq!(outline_level("8"), Some(9));
        assert_eq!(outline_level("9"), Some(0));
        assert_eq!(outline_level("12"), None);
    }

    #[test]
    fn styles_resolve_names_outline_levels_and_based_on() {
        let xml = format!(
            r#"<w:styles xmlns:w="{}">
            <w:style w:type="paragraph" w:styleId="U1"><w:name w:val="heading 1"/></w:style>
            <w:style w:type="paragraph" w:styleId="Custom"><w:name w:val="Mine"/><w:pPr><w:outlineLvl w:val="3"/></w:pPr></w:style>
            <w:style w:type="paragraph" w:styleId="Child"><w:name w:val="Child"/><w:basedOn w:val="U1"/></w:style>
            <w:style w:type="paragraph" w:styleId="Loop1"><w:basedOn w:val="Loop2"/></w:style>
            <w:style w:type="paragraph" w:styleId="Loop2"><w:basedOn w:val="Loop1"/></w:style>
            <w:style w:type="character" w:styleId="U1Char"><w:name w:val="heading 1 Char"/></w:style>
            </w:styles>"#,
            WORDML[0]
        );
        let styles = styles(&xml).unwrap();
        assert_eq!(style_level(&styles, "U1"), Some(1));
        assert_eq!(style_level(&styles, "Custom"), Some(4));
        assert_eq!(style_level(&styles, "Child"), Some(1));
        assert_eq!(style_level(&styles, "Loop1"), None);
        assert_eq!(style_level(&styles, "Missing"), None);
        assert!(!styles.contains_key("U1Char"));
    }

    #[test]
    fn another_prefix_for_wordprocessingml() {
        let xml = format!(
            r#"<x:document xmlns:x="{}" xmlns:w="urn:other"><x:body><x:p><x:r><x:t>kept</x:t></x:r></x:p><w:p><w:r><w:t>other</w:t></w:r></w:p></x:body></x:document>"#,
            WORDML[0]
        );
        let body = body(&xml, &HashMap::new()).unwrap();
        assert_eq!(body.text, "kept");
    }

    #[test]
    fn w3c_dates() {
        assert_eq!(
            iso_date("2024-03-01T10:00:00Z").as_deref(),
            Some("2024-03-01")
        );
        assert_eq!(iso_date(" 1999-12-31").as_deref(), Some("1999-12-31"));
        assert_eq!(iso_date("2024-13-01T10:00:00Z"), None);
        assert_eq!(iso_date("2024-03"), None);
        assert_eq!(iso_date("20240301T10"), None);
        assert_eq!(iso_date("2024-0é-01"), None);
    }
}
