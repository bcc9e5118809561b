//! Visible text of an HTML page, by a small tolerant scanner (no DOM, no dependencies).
//!
//! Kept: text nodes, with entities decoded (numeric ones and the common named ones; an unknown
//! `&name;` is kept literally). Dropped: tags, comments, doctype, processing instructions and the
//! contents of `script`, `style`, `noscript`, `template`, `svg` and `head` (except its `title`,
//! which becomes the document title). Block elements and `<br>` end a line; runs of whitespace
//! collapse to one space, as a browser renders them.

/// The text and `<title>` of an HTML page.
pub struct HtmlText {
    /// The page's `<title>`, if any.
    pub title: Option<String>,
    /// The visible text, one line per block.
    pub text: String,
}

const RAW_TEXT: [&str; 6] = ["script", "style", "noscript", "template", "svg", "textarea"];
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

/// Extracts the visible text of `html`.
pub fn extract(html: &str) -> HtmlText {
    let mut out = Builder::default();
    let mut rest = html;
    while !rest.is_empty() {
        let Some(lt) = rest.find('<') else {
            out.text(rest);
            break;
        };
        out.text(&rest[..lt]);
        rest = skip_markup(&rest[lt..], &mut out);
    }
    out.finish()
}

/// Consumes one piece of markup starting at `<`; returns what follows it.
fn skip_markup<'a>(rest: &'a str, out: &mut Builder) -> &'a str {
    if let Some(after) = rest.strip_prefix("<!--") {
        return after.find("-->").map_or("", |i| &after[i + 3..]);
    }
    if rest.starts_with("<!") || rest.starts_with("<?") {
        return rest.find('>').map_or("", |i| &rest[i + 1..]);
    }
    let closing = rest.as_bytes().get(1) == Some(&b'/');
    let name_start = if closing { 2 } else { 1 };
    let name_len = rest[name_start..]
        .bytes()
        .take_while(|b| b.is_ascii_alphanumeric())
        .count();
    if name_len == 0 {
        // A lone `<` (as in "a < b") is text.
        out.text("<");
        return &rest[1..];
    }
    let name = rest[name_start..name_start + name_len].to_ascii_lowercase();
    let after = &rest[tag_end(rest)..];
    if closing {
        out.close(&name);
        return after;
    }
    if RAW_TEXT.contains(&name.as_str()) || name == "title" {
        let (content, after) = raw_content(after, &name);
        if name == "title" && out.title.is_none() {
            out.title = Some(collapse(&decode_entities(content)).trim().to_string())
                .filter(|t| !t.is_empty());
        }
        return after;
    }
    out.open(&name);
    after
}

/// The byte after the `>` that ends the tag at the start of `rest`, skipping quoted attributes.
fn tag_end(rest: &str) -> usize {
    let mut quote: Option<u8> = None;
    for (i, b) in rest.bytes().enumerate() {
        match (quote, b) {
            (Some(q), _) if b == q => quote = None,
            (Some(_), _) => {}
            (None, b'"' | b'\'') => quote = Some(b),
            (None, b'>') => return i + 1,
            _ => {}
        }
    }
    rest.len()
}

/// The raw content up to `</name` (case-insensitive) and what follows that closing tag.
fn raw_content<'a>(rest: &'a str, name: &str) -> (&'a str, &'a str) {
    let lower = rest.to_ascii_lowercase();
    match lower.find(&format!("</{name}")) {
        Some(i) => (&rest[..i], &rest[i + tag_end(&rest[i..])..]),
        None => (rest, ""),
    }
}

#[derive(Default)]
struct Builder {
    title: Option<String>,
    text: String,
    in_head: bool,
}

impl Builder {
    fn text(&mut self, raw: &str) {
        if self.in_head || raw.is_empty() {
            return;
        }
        let decoded = decode_entities(raw);
        let collapsed = collapse(&decoded);
        if collapsed == " " && (self.text.is_empty() || self.text.ends_with([' ', '\n'])) {
            return;
        }
        self.text.push_str(&collapsed);
    }

    fn open(&mut self, name: &str) {
        if name == "head" {
            self.in_head = true;
        } else if BLOCKS.contains(&name) {
            self.line_break();
        }
    }

    fn close(&mut self, name: &str) {
        if name == "head" {
            self.in_head = false;
        } else if BLOCKS.contains(&name) {
            self.line_break();
        }
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

/// Whitespace runs to one space.
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

const NAMED: [(&str, char); 44] = [
    ("amp", '&'),
    ("lt", '<'),
    ("gt", '>'),
    ("quot", '"'),
    ("apos", '\''),
    ("nbsp", '\u{a0}'),
    ("copy", '©'),
    ("reg", '®'),
    ("trade", '™'),
    ("hellip", '…'),
    ("mdash", '—'),
    ("ndash", '–'),
    ("lsquo", '‘'),
    ("rsquo", '’'),
    ("ldquo", '“'),
    ("rdquo", '”'),
    ("laquo", '«'),
    ("raquo", '»'),
    ("bull", '•'),
    ("middot", '·'),
    ("deg", '°'),
    ("plusmn", '±'),
    ("times", '×'),
    ("divide", '÷'),
    ("micro", 'µ'),
    ("para", '¶'),
    ("sect", '§'),
    ("cent", '¢'),
    ("pound", '£'),
    ("euro", '€'),
    ("yen", '¥'),
    ("frac12", '½'),
    ("frac14", '¼'),
    ("frac34", '¾'),
    ("eacute", 'é'),
    ("egrave", 'è'),
    ("aacute", 'á'),
    ("agrave", 'à'),
    ("uuml", 'ü'),
    ("ouml", 'ö'),
    ("auml", 'ä'),
    ("ccedil", 'ç'),
    ("szlig", 'ß'),
    ("shy", '\u{ad}'),
];

/// Decodes `&#NN;`, `&#xHH;` and the named entities above; anything else stays as written.
pub fn decode_entities(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(amp) = rest.find('&') {
        out.push_str(&rest[..amp]);
        rest = &rest[amp..];
        match entity(rest) {
            Some((c, len)) => {
                out.push(c);
                rest = &rest[len..];
            }
            None => {
                out.push('&');
                rest = &rest[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// The character and byte length of the entity at the start of `s` (which starts with `&`).
fn entity(s: &str) -> Option<(char, usize)> {
    let semi = s.bytes().take(12).position(|b| b == b';')?;
    let body = &s[1..semi];
    let c = if let Some(hex) = body.strip_prefix("#x").or_else(|| body.strip_prefix("#X")) {
        char::from_u32(u32::from_str_radix(hex, 16).ok()?)?
    } else if let Some(dec) = body.strip_prefix('#') {
        char::from_u32(dec.parse().ok()?)?
    } else {
        NAMED.iter().find(|(name, _)| *name == body)?.1
    };
    Some((c, semi + 1))
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
        assert_eq!(extract("&#99999999999; &").text, "&#99999999999; &");
    }
}
