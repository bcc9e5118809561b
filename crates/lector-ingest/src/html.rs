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

use ego_tree::iter::Edge;
use scraper::node::{Element, Node};
use scraper::Html;

/// The namespace of HTML elements (an `svg` or `math` `title` is not the page's).
const HTML_NAMESPACE: &str = "http://www.w3.org/1999/xhtml";

/// The text and `<title>` of an HTML page.
pub struct HtmlText {
    /// The page's first `<title>`, if any.
    pub title: Option<String>,
    /// The visible text, one line per block.
    pub text: String,
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
        }
    }

    fn close(&mut self, name: &str) {
        if HIDDEN.contains(&name) {
            self.hidden_depth -= 1;
        } else if BLOCKS.contains(&name) {
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
        let lines: Vec<&str> = self
            .text
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .collect();
        HtmlText {
            title: self.title,
            text: lines.join("\n"),
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
