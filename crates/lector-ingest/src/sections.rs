//! Document structure: the headings of a document as `metadata.sections`, and the heading path
//! at an offset.
//!
//! Every format with headings (DOCX, Markdown, HTML, a PDF's outline) records them the same way, in document
//! order: `{"start": <char offset of the heading's text>, "level": <1..=9>, "title": "<its
//! text>"}`. Offsets count characters (Unicode scalar values) of the document text, as passage
//! offsets do. [`section_path`] names the section holding an offset; [`section_starts`] lists
//! where sections begin (the index cuts passages there, so no passage spans two sections).
//!
//! Markdown headings ([`markdown_sections`]) are ATX headings: a line of up to three spaces, one
//! to six `#`, then a space, a tab or the end of the line; the optional closing run of `#` is not
//! part of the title, and a heading without text is not a section. Lines inside fenced code
//! blocks (```` ``` ```` or `~~~`, three or more, closed by a run of the same character at least
//! as long) and inside front matter (`---`/`+++` on the first line, up to the matching line) are
//! never headings. Setext headings (text underlined with `===` or `---`) are not read.

use crate::document::Document;
use serde_json::Value;

/// A heading: where its text starts (in characters), its level (1..=9) and its text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Section {
    /// Character offset of the heading's text in the document text.
    pub start: usize,
    /// 1 for a top-level heading (`#`, `<h1>`, Word's Heading 1), up to 9.
    pub level: u8,
    /// The heading's text.
    pub title: String,
}

impl Section {
    /// The heading as the JSON object stored in `metadata.sections`.
    pub fn to_json(&self) -> Value {
        serde_json::json!({"start": self.start, "level": self.level, "title": self.title})
    }
}

/// Adds `sections` to `doc.metadata` (creating the object, keeping its other fields) when there
/// is at least one; a document without headings is left as it is.
pub fn attach(doc: &mut Document, sections: &[Section]) {
    if !sections.is_empty() {
        let list = Value::Array(sections.iter().map(Section::to_json).collect());
        doc.set_field("sections", list);
    }
}

/// A Markdown document with the ATX headings of its text as `metadata.sections` (the hook of
/// the Markdown reader: the text is the file's, front matter blanked, so offsets match).
pub fn with_markdown_sections(mut doc: Document) -> Document {
    let sections = markdown_sections(&doc.text);
    attach(&mut doc, &sections);
    doc
}

/// The heading path of the section holding the character at `char_offset`, from the
/// `"sections"` list in a document's `metadata` (as the DOCX, Markdown, HTML and PDF readers write it:
/// `[{"start": offset, "level": n, "title": "..."}, ...]` in document order): the titles of the
/// nearest preceding heading at each level, shallowest first, joined by ` > `. A heading clears
/// the deeper ones before it, so a level-2 heading under a new level-1 heading does not keep the
/// previous level-2 one. `None` when there is no such list, the offset is before the first
/// heading, or the list is not one of headings with increasing starts and levels 1 to 9.
///
/// ```
/// use serde_json::json;
/// let metadata = json!({"sections": [
///     {"start": 0, "level": 1, "title": "Installation"},
///     {"start": 40, "level": 2, "title": "Linux"},
///     {"start": 90, "level": 2, "title": "Windows"},
///     {"start": 150, "level": 1, "title": "Configuration"},
/// ]});
/// let path = |offset| lector_ingest::section_path(Some(&metadata), offset);
/// assert_eq!(path(10).as_deref(), Some("Installation"));
/// assert_eq!(path(45).as_deref(), Some("Installation > Linux"));
/// assert_eq!(path(100).as_deref(), Some("Installation > Windows"));
/// assert_eq!(path(151).as_deref(), Some("Configuration"));
/// assert_eq!(lector_ingest::section_path(None, 7), None);
/// ```
pub fn section_path(metadata: Option<&Value>, char_offset: usize) -> Option<String> {
    let sections = valid_sections(metadata)?;
    let mut open: Vec<(u64, &str)> = Vec::new();
    for (start, level, title) in sections {
        if start > char_offset {
            break;
        }
        while open.last().is_some_and(|&(l, _)| l >= level) {
            open.pop();
        }
        open.push((level, title));
    }
    if open.is_empty() {
        return None;
    }
    let titles: Vec<&str> = open.iter().map(|&(_, t)| t).collect();
    Some(titles.join(" > "))
}

/// The heading paths at each of `char_offsets` (in increasing order), as [`section_path`] names
/// them, in one pass over the headings (offsets out of order are each looked up alone).
///
/// ```
/// use serde_json::json;
/// let metadata = json!({"sections": [
///     {"start": 0, "level": 1, "title": "A"},
///     {"start": 10, "level": 2, "title": "B"},
/// ]});
/// let paths = lector_ingest::sections::section_paths(Some(&metadata), &[0, 12]);
/// assert_eq!(paths, [Some("A".to_string()), Some("A > B".to_string())]);
/// ```
pub fn section_paths(metadata: Option<&Value>, char_offsets: &[usize]) -> Vec<Option<String>> {
    let Some(sections) = valid_sections(metadata) else {
        return vec![None; char_offsets.len()];
    };
    if !char_offsets.is_sorted() {
        return char_offsets
            .iter()
            .map(|&o| section_path(metadata, o))
            .collect();
    }
    let mut open: Vec<(u64, &str)> = Vec::new();
    let mut next = sections.iter().peekable();
    char_offsets
        .iter()
        .map(|&offset| {
            while let Some(&(_, level, title)) = next.next_if(|s| s.0 <= offset) {
                while open.last().is_some_and(|&(l, _)| l >= level) {
                    open.pop();
                }
                open.push((level, title));
            }
            let titles: Vec<&str> = open.iter().map(|&(_, t)| t).collect();
            (!titles.is_empty()).then(|| titles.join(" > "))
        })
        .collect()
}

/// The character offsets where the sections of `metadata.sections` start, in order (the list
/// [`section_path`] reads; empty when there is none or it is not a valid list of headings).
///
/// ```
/// use serde_json::json;
/// let metadata = json!({"sections": [
///     {"start": 2, "level": 1, "title": "A"},
///     {"start": 30, "level": 2, "title": "B"},
/// ]});
/// assert_eq!(lector_ingest::section_starts(Some(&metadata)), [2, 30]);
/// assert!(lector_ingest::section_starts(None).is_empty());
/// ```
pub fn section_starts(metadata: Option<&Value>) -> Vec<usize> {
    valid_sections(metadata)
        .map(|s| s.into_iter().map(|(start, _, _)| start).collect())
        .unwrap_or_default()
}

/// `(start, level, title)` of every heading, or `None` when the list is missing or malformed
/// (a heading without start, level or title, a level outside 1..=9, or a start before the
/// previous one's).
fn valid_sections(metadata: Option<&Value>) -> Option<Vec<(usize, u64, &str)>> {
    let sections = metadata?.get("sections")?.as_array()?;
    let mut out = Vec::with_capacity(sections.len());
    let mut previous = None;
    for section in sections {
        let start = usize::try_from(section.get("start")?.as_u64()?).ok()?;
        let level = section.get("level")?.as_u64()?;
        let title = section.get("title")?.as_str()?;
        if !(1..=9).contains(&level) || previous.is_some_and(|p| start < p) {
            return None;
        }
        previous = Some(start);
        out.push((start, level, title));
    }
    Some(out)
}

/// The ATX headings of a Markdown text (see the module documentation), with character offsets
/// into `text` itself.
///
/// ```
/// let text = "# Guide\n\nIntro.\n\n## Linux ##\n\n```sh\n# not a heading\n```\n";
/// let sections = lector_ingest::sections::markdown_sections(text);
/// let titles: Vec<(usize, u8, &str)> =
///     sections.iter().map(|s| (s.start, s.level, s.title.as_str())).collect();
/// assert_eq!(titles, [(2, 1, "Guide"), (20, 2, "Linux")]);
/// ```
pub fn markdown_sections(text: &str) -> Vec<Section> {
    let mut out = Vec::new();
    let mut chars = 0;
    // The fence that opened the current code block: its character and run length.
    let mut fence: Option<(char, usize)> = None;
    let mut lines = text.split_inclusive('\n').peekable();
    if let Some(first) = lines.peek().copied() {
        let marker = first.trim_end();
        if marker == "---" || marker == "+++" {
            // Front matter: skip to its closing line, when there is one.
            let rest: Vec<&str> = text.split_inclusive('\n').skip(1).collect();
            let close = |l: &&str| {
                let l = l.trim_end();
                l == marker || (marker == "---" && l == "...")
            };
            if let Some(n) = rest.iter().position(close) {
                for line in lines.by_ref().take(n + 2) {
                    chars += line.chars().count();
                }
            }
        }
    }
    for line in lines {
        let line_chars = line.chars().count();
        let content = line.trim_end_matches(['\n', '\r']);
        let indent = content.len() - content.trim_start_matches(' ').len();
        let body = &content[indent..];
        if indent <= 3 {
            if let Some((c, len)) = fence {
                let run = body.len() - body.trim_start_matches(c).len();
                if run >= len && body[run..].trim().is_empty() {
                    fence = None;
                }
            } else if let Some(opened) = fence_of(body) {
                fence = Some(opened);
            } else if let Some((level, offset, title)) = atx_heading(body) {
                out.push(Section {
                    start: chars + indent + body[..offset].chars().count(),
                    level,
                    title: title.to_string(),
                });
            }
        }
        chars += line_chars;
    }
    out
}

/// A code fence opening `line` (indentation removed): its character and run length.
fn fence_of(line: &str) -> Option<(char, usize)> {
    let c = line.chars().next().filter(|&c| c == '`' || c == '~')?;
    let run = line.len() - line.trim_start_matches(c).len();
    // A backtick fence's info string cannot hold a backtick.
    (run >= 3 && !(c == '`' && line[run..].contains('`'))).then_some((c, run))
}

/// An ATX heading (indentation removed): its level, the byte offset of its text in `line`, and
/// the text without the closing `#` run. `None` for other lines and for headings without text.
fn atx_heading(line: &str) -> Option<(u8, usize, &str)> {
    let hashes = line.len() - line.trim_start_matches('#').len();
    if !(1..=6).contains(&hashes) {
        return None;
    }
    let rest = &line[hashes..];
    if !(rest.is_empty() || rest.starts_with([' ', '\t'])) {
        return None;
    }
    let offset = hashes + (rest.len() - rest.trim_start_matches([' ', '\t']).len());
    let mut title = line[offset..].trim_end_matches([' ', '\t']);
    // A closing sequence: `#`s preceded by a space (or making up the whole text).
    let without = title.trim_end_matches('#');
    if without.is_empty() || without.ends_with([' ', '\t']) {
        title = without.trim_end_matches([' ', '\t']);
    }
    (!title.is_empty()).then_some((hashes as u8, offset, title))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn headings(text: &str) -> Vec<(usize, u8, String)> {
        let sections = markdown_sections(text);
        for s in &sections {
            // The start is where the title's text is.
            let at: String = text
                .chars()
                .skip(s.start)
                .take(s.title.chars().count())
                .collect();
            assert_eq!(at, s.title);
        }
        sections
            .into_iter()
            .map(|s| (s.start, s.level, s.title))
            .collect()
    }

    #[test]
    fn atx_headings_with_levels_and_closing_runs() {
        let text = "# Top\nbody\n  ## Second ##\n###### Six\n####### seven is text\n#no space\n\
                    #\n## #\n### C# and F#\n#\tTabbed\n    # indented code\n";
        let got = headings(text);
        let titles: Vec<(u8, &str)> = got.iter().map(|(_, l, t)| (*l, t.as_str())).collect();
        assert_eq!(
            titles,
            [
                (1, "Top"),
                (2, "Second"),
                (6, "Six"),
                (3, "C# and F#"),
                (1, "Tabbed")
            ]
        );
        assert_eq!(got[0].0, 2);
    }

    #[test]
    fn fenced_code_and_front_matter_hide_headings() {
        let text = "---\ntitle: x\n# yaml comment\n---\n# Real\n````python\n# comment\n```\n\
                    still code\n````\n## After\n~~~~\n# tilde code\n~~~\n# not closed: code\n~~~~\n\
                    ### Last\n";
        let titles: Vec<String> = headings(text).into_iter().map(|h| h.2).collect();
        assert_eq!(titles, ["Real", "After", "Last"]);
        // Without a closing line, the first `---` is not front matter (a thematic break).
        let titles: Vec<String> = headings("---\n# A\n").into_iter().map(|h| h.2).collect();
        assert_eq!(titles, ["A"]);
    }

    #[test]
    fn offsets_count_characters_and_crlf() {
        let text = "Ünïcödé 東京\r\n\r\n## Café déjà\r\nbody\r\n# 🎉 Party\r\n";
        let got = headings(text);
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].2, "Café déjà");
        assert_eq!(got[1].2, "🎉 Party");
    }

    #[test]
    fn attach_keeps_other_metadata_and_skips_no_headings() {
        let mut doc = Document {
            id: "a".into(),
            title: None,
            text: "x".into(),
            date: None,
            metadata: None,
            embedding: None,
        };
        attach(&mut doc, &[]);
        assert_eq!(doc.metadata, None);
        let sections = [Section {
            start: 0,
            level: 1,
            title: "A".into(),
        }];
        attach(&mut doc, &sections);
        assert_eq!(
            doc.metadata,
            Some(json!({"sections": [{"start": 0, "level": 1, "title": "A"}]}))
        );
        doc.metadata = Some(json!({"author": "me"}));
        attach(&mut doc, &sections);
        assert_eq!(doc.metadata.as_ref().unwrap()["author"], "me");
        assert_eq!(section_path(doc.metadata.as_ref(), 0).as_deref(), Some("A"));
    }

    #[test]
    fn section_starts_only_from_valid_lists() {
        let good = json!({"sections": [
            {"start": 0, "level": 1, "title": "a"}, {"start": 5, "level": 2, "title": "b"}]});
        assert_eq!(section_starts(Some(&good)), [0, 5]);
        let bad = json!({"sections": [
            {"start": 9, "level": 1, "title": "a"}, {"start": 5, "level": 2, "title": "b"}]});
        assert!(section_starts(Some(&bad)).is_empty());
        assert!(section_starts(Some(&json!({"pages": [0, 10]}))).is_empty());
    }
}
