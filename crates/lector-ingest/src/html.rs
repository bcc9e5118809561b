//! Visible text of an HTML page, parsed by an HTML5 parser (html5ever, through `scraper`).
//!
//! The parser builds the tree a browser would: optional tags such as `</head>` or `</p>` are
//! implied, character references are decoded with HTML5's full table (numeric ones as a browser
//! does, e.g. `&#150;` is `–` and `&#0;` is U+FFFD; an unknown `&name;` stays literal).
//!
//! Kept: text nodes. Dropped: comments, doctype, and the contents of `head` (except its `title`,
//! which becomes the document title), `script`, `style`, `noscript`, `template`, `svg`, `math`
//! and `textarea`. Block elements and `<br>` end a line; runs of whitespace collapse to one
//! space, as a browser renders them (a no-break space is kept).
//!
//! Headings `h1`..`h6` (outside hidden elements, with text) become [`HtmlText::sections`]: the
//! character offset in the extracted text where the heading's text starts, its level and its
//! text (its lines joined by spaces), the shape of `metadata.sections` ([`crate::sections`]).

use ego_tree::iter::Edge;
use scraper::node::{Element, Node};
use scraper::Html;

pub use crate::sections::Section;

/// The namespace of HTML elements (an `svg` or `math` `title` is not the page's).
const HTML_NAMESPACE: &str = "http://www.w3.org/1999/xhtml";

/// The text and `<title>` of an HTML page.
pub struct HtmlText {
    /// The page's first `<title>`, if any.
    pub title: Option<String>,
    /// The visible text, one line per block.
    pub text: String,
    /// The headings, in order, with character offsets into `text`.
    pub sections: Vec<Section>,
}

/// Elements whose content is never shown as text.
const HIDDEN: [&str; 9] = [
    "head", "script", "style", "noscript", "template", "svg", "math", "textarea", "title",
];

/// Elements that start and end a line.
const BLOCKS: [&str; 33] = [
    "p",
    "div",
    "br",
    "li",
    "ul",
    "ol",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "tr",
    "td",
    "th",
    "table",
    "section",
    "article",
    "header",
    "footer",
    "nav",
    "aside",
    "main",
    "blockquote",
    "pre",
    "hr",
    "dt",
    "dd",
    "dl",
    "figure",
    "figcaption",
    "form",
    "body",
];

/// Extracts the visible text and title of `html`, in time linear in its length.
pub fn extract(html: &str) -> HtmlText {
    let page = Html::parse_document(html);
    let mut out = Builder::default();
    // One pass over open/close edges: no recursion, so deep nesting cannot overflow the stack.
    for edge in page.tree.root().traverse() {
        match edge {
            Edge::Open(node) => match node.value() {
                Node::Element(e) if is_html_title(e) => {
                    out.title(title_text(node));
                    out.open(e.name());
                }
                Node::Element(e) => out.open(e.name()),
                Node::Text(t) => out.text(t),
                _ => {}
            },
            Edge::Close(node) => {
                if let Node::Element(e) = node.value() {
                    out.close(e.name());
                }
            }
        }
    }
    out.finish()
}

/// The document of an HTML file: its visible text, `<title>`, and headings as
/// `metadata.sections` when it has any (the hook of the HTML reader).
pub fn document(file: &crate::walk::SourceFile, html: &str) -> crate::Document {
    let page = extract(html);
    let mut doc = crate::Document {
        id: file.id.clone(),
        title: page.title,
        text: page.text,
        date: None,
        metadata: None,
        embedding: None,
    };
    crate::sections::attach(&mut doc, &page.sections);
    doc
}

fn is_html_title(element: &Element) -> bool {
    element.name() == "title" && &*element.name.ns == HTML_NAMESPACE
}

/// The text of a `<title>` element (its only children are text: it is parsed as RCDATA).
fn title_text(node: ego_tree::NodeRef<'_, Node>) -> String {
    node.children()
        .filter_map(|child| child.value().as_text().map(|t| &**t))
        .collect()
}

#[derive(Default)]
struct Builder {
    title: Option<String>,
    text: String,
    /// How many hidden elements enclose the current node.
    hidden_depth: usize,
    /// The heading being read: its level and where its text starts in `text` (bytes).
    open_heading: Option<(u8, usize)>,
    /// Headings read: level and byte range in `text` (before lines are trimmed).
    headings: Vec<(u8, usize, usize)>,
}

/// The level of a heading element.
fn heading_level(name: &str) -> Option<u8> {
    match name {
        "h1" => Some(1),
        "h2" => Some(2),
        "h3" => Some(3),
        "h4" => Some(4),
        "h5" => Some(5),
        "h6" => Some(6),
        _ => None,
    }
}

impl Builder {
    /// Keeps the first title of the page.
    fn title(&mut self, raw: String) {
        if self.title.is_none() {
            self.title = Some(collapse(&raw).trim().to_string()).filter(|t| !t.is_empty());
        }
    }

    fn open(&mut self, name: &str) {
        if HIDDEN.contains(&name) {
            self.hidden_depth += 1;
        } else if BLOCKS.contains(&name) {
            self.line_break();
            if let Some(level) = heading_level(name) {
                if self.hidden_depth == 0 && self.open_heading.is_none() {
                    self.open_heading = Some((level, self.text.len()));
                }
            }
        }
    }

    fn close(&mut self, name: &str) {
        if HIDDEN.contains(&name) {
            self.hidden_depth -= 1;
        } else if BLOCKS.contains(&name) {
            if let Some((level, start)) = self.open_heading {
                if heading_level(name) == Some(level) {
                    self.headings.push((level, start, self.text.len()));
                    self.open_heading = None;
                }
            }
            self.line_break();
        }
    }

    fn text(&mut self, raw: &str) {
        if self.hidden_depth > 0 || raw.is_empty() {
            return;
        }
        let collapsed = collapse(raw);
        if collapsed == " " && (self.text.is_empty() || self.text.ends_with([' ', '\n'])) {
            return;
        }
        self.text.push_str(&collapsed);
    }

    fn line_break(&mut self) {
        if !self.text.is_empty() && !self.text.ends_with('\n') {
            self.text.push('\n');
        }
    }

    fn finish(self) -> HtmlText {
        // Kept lines (trimmed, non-empty) with the byte offset of each in `self.text`.
        let mut lines: Vec<(usize, &str)> = Vec::new();
        let mut offset = 0;
        for raw in self.text.split_inclusive('\n') {
            let line = raw.trim();
            if !line.is_empty() {
                let lead = raw.len() - raw.trim_start().len();
                lines.push((offset + lead, line));
            }
            offset += raw.len();
        }
        // Each heading starts at the first kept line inside its byte range.
        let mut sections = Vec::new();
        let (mut line, mut chars) = (0, 0);
        for &(level, start, end) in &self.headings {
            while line < lines.len() && lines[line].0 < start {
                chars += lines[line].1.chars().count() + 1;
                line += 1;
            }
            let title: Vec<&str> = lines[line..]
                .iter()
                .take_while(|(at, _)| *at < end)
                .map(|(_, l)| *l)
                .collect();
            if !title.is_empty() {
                sections.push(Section {
                    start: chars,
                    level,
                    title: title.join(" "),
                });
            }
        }
        let lines: Vec<&str> = lines.into_iter().map(|(_, l)| l).collect();
        HtmlText {
            title: self.title,
            text: lines.join("\n"),
            sections,
        }
    }
}

/// Whitespace runs to one space (a no-break space is not whitespace here, as in a browser).
fn collapse(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut space = false;
    for c in s.chars() {
        if c.is_whitespace() && c != '\u{a0}' {
            if !space {
                out.push(' ');
            }
            space = true;
        } else {
            out.push(c);
            space = false;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_visible_text_only() {
        let html = r#"<!DOCTYPE html><html><head><title>Caf&eacute; &amp; Co</title>
            <style>p { color: red }</style><script>var x = "<p>not text</p>";</script></head>
            <body><!-- a comment <p>hidden</p> --><h1>Hello&nbsp;world</h1>
            <p class="x>y">Fish &amp; chips &#8212; &#x1F600; &unknown; 3 < 4</p><SCRIPT>alert(1)</SCRIPT>
            <ul><li>one</li><li>two</li></ul>line<br>break</body></html>"#;
        let page = extract(html);
        assert_eq!(page.title.as_deref(), Some("Café & Co"));
        assert_eq!(
            page.text,
            "Hello\u{a0}world\nFish & chips — 😀 &unknown; 3 < 4\none\ntwo\nline\nbreak"
        );
    }

    #[test]
    fn headings_are_sections_at_their_text() {
        let html = "<title>T</title><body>Intro<h1> Install&shy;ation </h1><p>Text.</p>\
            <section><h2>On <b>Linux</b><br>and BSD</h2>apt</section><h3><img></h3>\
            <script><h2>no</h2></script><H2>Windows</H2><p>ñ</p><h6>Deep</h6>";
        let page = extract(html);
        let got: Vec<(u8, &str)> = page
            .sections
            .iter()
            .map(|s| (s.level, s.title.as_str()))
            .collect();
        assert_eq!(
            got,
            [
                (1, "Install\u{ad}ation"),
                (2, "On Linux and BSD"),
                (2, "Windows"),
                (6, "Deep")
            ]
        );
        for s in &page.sections {
            let at: String = page.text.chars().skip(s.start).take(3).collect();
            assert_eq!(at, s.title.chars().take(3).collect::<String>());
        }
        assert_eq!(page.sections[0].start, "Intro\n".len());
        assert!(extract("<p>No headings</p>").sections.is_empty());
    }

    #[test]
    fn documents_carry_sections_only_with_headings() {
        let file = crate::walk::SourceFile {
            path: "a.html".into(),
            id: "a.html".into(),
            bytes: 0,
            format: crate::walk::Format::Html,
        };
        let doc = document(&file, "<title>T</title><h1>Setup</h1><p>Run it.</p>");
        assert_eq!(doc.title.as_deref(), Some("T"));
        assert_eq!(
            crate::section_path(doc.metadata.as_ref(), 8).as_deref(),
            Some("Setup")
        );
        assert_eq!(document(&file, "<p>plain</p>").metadata, None);
    }

    #[test]
    fn survives_truncated_markup() {
        assert_eq!(extract("text <p unterminated").text, "text");
        assert_eq!(extract("a <script>never closed").text, "a");
        // Out of range: U+FFFD, as a browser shows it; a lone `&` stays.
        assert_eq!(extract("&#99999999999; &").text, "\u{fffd} &");
    }

    #[test]
    fn body_text_is_kept_without_closing_head() {
        // `</head>` (and `<body>`) are optional in HTML5: the first body element ends the head.
        let page = extract("<html><head><title>T</title><meta charset=utf-8><p>Body text.</p>");
        assert_eq!(page.title.as_deref(), Some("T"));
        assert_eq!(page.text, "Body text.");
        let page = extract("<head><title>No body tag</title>Loose text, then <b>bold</b>.");
        assert_eq!(page.text, "Loose text, then bold.");
    }

    #[test]
    fn entities_decode_as_in_a_browser() {
        let page = extract(
            "<p>&hellip; Espa&ntilde;a &NotEqualTilde; &#8364; &#x20AC; &#150; &#0; &notit; &amp</p>",
        );
        // &NotEqualTilde; is two code points; &#150; is a windows-1252 dash; &#0; is U+FFFD;
        // `&notit;` is the legacy `&not` followed by "it;"; `&amp` without `;` still decodes.
        assert_eq!(page.text, "… España \u{2242}\u{338} € € – \u{fffd} ¬it; &");
    }

    #[test]
    fn svg_title_is_not_the_page_title() {
        let page = extract("<body><svg><title>icon</title></svg><title>Real</title><p>x</p>");
        assert_eq!(
            (page.title.as_deref(), page.text.as_str()),
            (Some("Real"), "x")
        );
    }

    #[test]
    fn large_pages_keep_every_block_and_hide_every_script() {
        // Many raw-text elements were the quadratic case of the former scanner (each one
        // lowercased the rest of the page); every block must still come out, in order.
        let n = 5000;
        let mut html = String::from("<html><head><title>Big</title>");
        for i in 0..n {
            html.push_str(&format!(
                "<script>var s{i} = '</p>';</script><p>para {i}</p>"
            ));
        }
        let page = extract(&html);
        let lines: Vec<&str> = page.text.lines().collect();
        assert_eq!(lines.len(), n);
        assert_eq!((lines[0], lines[n - 1]), ("para 0", "para 4999"));
        assert!(!page.text.contains("var"));
    }

    #[test]
    fn deep_nesting_does_not_overflow_the_stack() {
        let depth = 20_000;
        let html = format!("{}deep{}", "<span>".repeat(depth), "</span>".repeat(depth));
        assert_eq!(extract(&html).text, "deep");
    }
}
