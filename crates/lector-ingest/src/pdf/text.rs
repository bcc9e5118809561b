//! The text of a PDF's pages within one budget for the whole document.
//!
//! lopdf extracts text a page at a time, and every page inflates and decodes its content streams
//! and its fonts' `ToUnicode` maps anew. Pages may share them: a small file whose pages all
//! point at one large stream would be inflated once per page, gigabytes for a few hundred pages.
//! Here each shared stream and each font encoding is decoded once per document, and the document
//! as a whole has a budget: the page contents scanned (each page counted, shared or not: scanning
//! is the work), the `ToUnicode` maps inflated, and the text extracted. Over it, the document is
//! refused naming the limit. Operations are decoded one at a time, so a page never holds more
//! than its content and its text.
//!
//! The text of a page is what lopdf's `extract_text` gives: the strings of `Tj`, `TJ`, `'` and
//! `"` decoded with the current font's encoding, a space after each `TJ` array and for a `TJ`
//! offset below -100, a line break at `T*`, `'`, `"` and `ET`.

use crate::read::human_size;
use lopdf::content::Content;
use lopdf::{DecompressError, Dictionary, Document, Encoding, Object, ObjectId, Stream};
use std::collections::{BTreeMap, HashMap};
use std::rc::Rc;

/// The most pages read from one PDF: far more than real documents have, few enough that a page
/// tree of millions of tiny pages is refused early.
pub const MAX_PAGES: usize = 50_000;

/// Why a whole document is refused (the budget is spent), as opposed to one page failing.
#[derive(Debug)]
pub(super) struct OverBudget(pub String);

/// The page texts of one document, read in page order.
pub(super) struct PageTexts<'a> {
    doc: &'a Document,
    /// The document limit (the text's; the contents may be twice as large).
    limit: usize,
    /// Bytes of decompressed content and maps still allowed, and of text.
    content_left: usize,
    text_left: usize,
    /// Content streams used by more than one page, kept decoded until their last use.
    shared: HashMap<ObjectId, (Rc<Vec<u8>>, usize)>,
    uses: HashMap<ObjectId, usize>,
    /// Each font's encoding, decoded once (fonts with one `ToUnicode` map share it).
    encodings: Vec<Option<Encoding<'a>>>,
    encoding_of: HashMap<FontKey, usize>,
}

/// What a font's encoding depends on: its `ToUnicode` stream when that is all, else the font
/// dictionary itself (by address: the document is not changed while it is read).
#[derive(Hash, PartialEq, Eq)]
enum FontKey {
    ToUnicode(ObjectId),
    Dictionary(usize),
}

impl<'a> PageTexts<'a> {
    /// A reader of `doc`'s pages (`pages`: page number to page object, as `get_pages` gives)
    /// whose text may total `limit` bytes and decompressed contents twice that.
    pub fn new(doc: &'a Document, pages: &BTreeMap<u32, ObjectId>, limit: usize) -> Self {
        let mut uses: HashMap<ObjectId, usize> = HashMap::new();
        for &page in pages.values() {
            for id in doc.get_page_contents(page) {
                *uses.entry(id).or_default() += 1;
            }
        }
        PageTexts {
            doc,
            limit,
            content_left: limit.saturating_mul(2),
            text_left: limit,
            shared: HashMap::new(),
            uses,
            encodings: Vec::new(),
            encoding_of: HashMap::new(),
        }
    }

    /// The text of the page `page`: `Ok(Err(reason))` when this page cannot be read (the rest
    /// of the document still can), `Err` when the document's budget is spent.
    pub fn page(&mut self, page: ObjectId) -> Result<Result<String, String>, OverBudget> {
        let fonts = match self.doc.get_page_fonts(page) {
            Ok(fonts) => fonts,
            Err(e) => return Ok(Err(e.to_string())),
        };
        let mut encodings = HashMap::new();
        let mut first_error = None;
        for (name, font) in fonts {
            match self.encoding(font)? {
                Ok(index) => {
                    encodings.insert(name, index);
                }
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        let content = self.content(page)?;
        let text = self.operations(&content, &encodings)?;
        Ok(match first_error {
            Some(e) => Err(e),
            None => text,
        })
    }

    /// The index of `font`'s encoding in `self.encodings`, decoding it on first use.
    fn encoding(&mut self, font: &'a Dictionary) -> Result<Result<usize, String>, OverBudget> {
        let to_unicode = to_unicode_only(font);
        let key = match to_unicode {
            Some(id) => FontKey::ToUnicode(id),
            None => FontKey::Dictionary(font as *const Dictionary as usize),
        };
        if let Some(&index) = self.encoding_of.get(&key) {
            return Ok(Ok(index));
        }
        // The map is inflated here to charge its size, and again by lopdf (within what is
        // left): each map twice per document at most.
        if let Some(stream) = to_unicode.and_then(|id| self.doc.get_object(id).ok()) {
            if let Ok(stream) = stream.as_stream() {
                let size = self.inflate(stream)?.len();
                self.charge_content(size)?;
            }
        }
        let encoding = match font.get_font_encoding_with_limit(self.doc, self.content_left) {
            Ok(encoding) => Some(encoding),
            Err(lopdf::Error::Decompress(DecompressError::MemoryLimitExceeded { .. })) => {
                return Err(self.content_over());
            }
            Err(e) => {
                // lopdf fails the page for a font it cannot use, even one the page never
                // selects; so does this, and every page using the font.
                self.encodings.push(None);
                self.encoding_of.insert(key, self.encodings.len() - 1);
                return Ok(Err(e.to_string()));
            }
        };
        self.encodings.push(encoding);
        let index = self.encodings.len() - 1;
        self.encoding_of.insert(key, index);
        Ok(Ok(index))
    }

    /// The page's content streams, decoded and joined by line breaks (as lopdf joins them).
    fn content(&mut self, page: ObjectId) -> Result<Rc<Vec<u8>>, OverBudget> {
        let ids = self.doc.get_page_contents(page);
        let mut parts = Vec::with_capacity(ids.len());
        for id in ids {
            let Ok(stream) = self.doc.get_object(id).and_then(Object::as_stream) else {
                continue;
            };
            let part = match self.shared.get_mut(&id) {
                Some((data, left)) => {
                    let data = Rc::clone(data);
                    *left -= 1;
                    if *left == 0 {
                        self.shared.remove(&id);
                    }
                    data
                }
                None => {
                    let data = Rc::new(self.inflate(stream)?);
                    let uses = self.uses.get(&id).copied().unwrap_or(1);
                    if uses > 1 {
                        self.shared.insert(id, (Rc::clone(&data), uses - 1));
                    }
                    data
                }
            };
            // Every page's content is scanned, so every use counts.
            self.charge_content(part.len())?;
            parts.push(part);
        }
        Ok(match parts.len() {
            1 => parts.pop().expect("one part"),
            _ => Rc::new(
                parts
                    .iter()
                    .flat_map(|p| p.iter().chain(b"\n"))
                    .copied()
                    .collect(),
            ),
        })
    }

    /// A stream's decoded bytes within what is left of the budget: its raw bytes when it
    /// cannot be decoded (as lopdf falls back), refused past the budget.
    fn inflate(&self, stream: &Stream) -> Result<Vec<u8>, OverBudget> {
        match stream.decompressed_content_with_limit(self.content_left) {
            Ok(data) => Ok(data),
            Err(lopdf::Error::Decompress(DecompressError::MemoryLimitExceeded { .. })) => {
                Err(self.content_over())
            }
            Err(_) if stream.content.len() <= self.content_left => Ok(stream.content.clone()),
            Err(_) => Err(self.content_over()),
        }
    }

    fn charge_content(&mut self, bytes: usize) -> Result<(), OverBudget> {
        self.content_left = self
            .content_left
            .checked_sub(bytes)
            .ok_or_else(|| self.content_over())?;
        Ok(())
    }

    fn content_over(&self) -> OverBudget {
        OverBudget(format!(
            "PDF page contents decompress to more than {} in all (each page counts the \
             streams it shows), twice the limit of {} per document (raise it with --max-doc-mb)",
            human_size(self.limit.saturating_mul(2) as u64),
            human_size(self.limit as u64)
        ))
    }

    /// The text shown by the content's operations, decoded with the page's fonts.
    fn operations(
        &mut self,
        content: &[u8],
        fonts: &HashMap<Vec<u8>, usize>,
    ) -> Result<Result<String, String>, OverBudget> {
        let mut text = String::new();
        let mut font: Option<&Encoding> = None;
        for operation in Content::decode_iter(content) {
            let operation = match operation {
                Ok(operation) => operation,
                Err(e) => return Ok(Err(e.to_string())),
            };
            let before = text.len();
            let shown = match operation.operator.as_str() {
                "Tf" => {
                    let name = operation.operands.first().map(Object::as_name);
                    font = match name {
                        Some(Ok(name)) => fonts.get(name).and_then(|&i| self.encodings[i].as_ref()),
                        _ => return Ok(Err("Tf without a font name".to_string())),
                    };
                    None
                }
                "Tj" | "TJ" => Some(&operation.operands[..]),
                // `'` is `T* Tj`; `"` is `aw ac string`, its third operand shown.
                "'" | "\"" => {
                    if font.is_some() && !text.ends_with('\n') {
                        text.push('\n');
                    }
                    match operation.operator.as_str() {
                        "'" => Some(&operation.operands[..]),
                        _ => operation.operands.get(2..3),
                    }
                }
                "T*" | "ET" => {
                    if !text.ends_with('\n') {
                        text.push('\n');
                    }
                    None
                }
                _ => None,
            };
            if let (Some(operands), Some(encoding)) = (shown, font) {
                if let Err(e) = show(&mut text, encoding, operands) {
                    return Ok(Err(e.to_string()));
                }
            }
            self.text_left = self
                .text_left
                .checked_sub(text.len() - before)
                .ok_or_else(|| {
                    OverBudget(format!(
                        "PDF text is larger than the limit of {} per document (raise it with \
                         --max-doc-mb)",
                        human_size(self.limit as u64)
                    ))
                })?;
        }
        Ok(Ok(text))
    }
}

/// The font's `ToUnicode` stream when the font's encoding is read from it alone: no
/// `Encoding`, or the `Identity-H`/`Identity-V` encodings (lopdf reads the map for both).
fn to_unicode_only(font: &Dictionary) -> Option<ObjectId> {
    let identity = match font.get(b"Encoding") {
        Err(_) => true,
        Ok(Object::Name(name)) => name == b"Identity-H" || name == b"Identity-V",
        Ok(_) => false,
    };
    let id = font.get(b"ToUnicode").ok()?.as_reference().ok()?;
    identity.then_some(id)
}

/// Appends the strings of a text-showing operation's operands (lopdf's rule: a space after an
/// array, and for an offset below -100 inside one).
fn show(text: &mut String, encoding: &Encoding, operands: &[Object]) -> lopdf::Result<()> {
    for operand in operands {
        match operand {
            Object::String(bytes, _) => encoding.write_to_string(bytes, text)?,
            Object::Array(items) => {
                show(text, encoding, items)?;
                text.push(' ');
            }
            Object::Integer(i) if *i < -100 => text.push(' '),
            _ => {}
        }
    }
    Ok(())
}
