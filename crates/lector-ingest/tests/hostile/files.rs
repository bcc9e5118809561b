//! Small files that cost a reader gigabytes or hours when it is not bounded as a whole: the
//! regression inputs of the hostile-file tests, generated here rather than committed as blobs.
//! Shared by lector-ingest's tests and the CLI's and server's (`#[path]`).

#![allow(dead_code)] // each test crate uses some of them

use std::io::Write;

/// The lines every page of [`pdf_pages_sharing_one_stream`] shows: the first and last three
/// repeat at the edge of every page, as a running header and footer would, and are dropped;
/// the middle two are the page's text.
pub const SHARED_LINES: [&str; 8] = [
    "The first line.",
    "The second line.",
    "The third line.",
    "Every page shows",
    "this text.",
    "The sixth line.",
    "The seventh line.",
    "The last line.",
];

/// A PDF of `pages` pages that all show one content stream of about `stream_bytes` bytes once
/// decompressed ([`SHARED_LINES`], then white space), deflated to a few hundred KB at most.
pub fn pdf_pages_sharing_one_stream(pages: usize, stream_bytes: usize) -> Vec<u8> {
    let lines: String = SHARED_LINES.iter().map(|l| format!("({l}) ' ")).collect();
    let mut content = format!("BT /F1 12 Tf 14 TL 72 720 Td {lines}ET\n").into_bytes();
    let filler = [b' '; 1023];
    while content.len() < stream_bytes {
        content.extend_from_slice(&filler);
        content.push(b'\n');
    }
    let mut pdf = Pdf::default();
    let catalog = pdf.reserve();
    let tree = pdf.reserve();
    let font = pdf.add(FONT.to_vec());
    let stream = pdf.add(flate_stream(&content));
    let kids: Vec<usize> = (0..pages)
        .map(|_| pdf.add(page(tree, font, &format!("{stream} 0 R"))))
        .collect();
    pdf.set(
        catalog,
        format!("<< /Type /Catalog /Pages {tree} 0 R >>").into_bytes(),
    );
    pdf.set(tree, page_tree(&kids));
    pdf.finish(catalog)
}

/// A one-page PDF whose page prints `page_chars` characters (`a a a ...`), with an outline of
/// `entries` entries on that page whose titles are one string of `title_chars` characters
/// (`a a ... b`, printed nowhere), referenced by every entry: a few hundred KB that make a
/// naive title search cost page x title x entries steps.
pub fn pdf_with_a_long_outline(page_chars: usize, entries: usize, title_chars: usize) -> Vec<u8> {
    let mut content = b"BT /F1 12 Tf 72 720 Td (".to_vec();
    content.extend(std::iter::repeat_n(*b"a ", page_chars / 2).flatten());
    content.extend_from_slice(b") Tj ET\n");
    let mut pdf = Pdf::default();
    let catalog = pdf.reserve();
    let tree = pdf.reserve();
    let outlines = pdf.reserve();
    let font = pdf.add(FONT.to_vec());
    let stream = pdf.add(flate_stream(&content));
    let the_page = pdf.add(page(tree, font, &format!("{stream} 0 R")));
    let mut title = "a ".repeat(title_chars.saturating_sub(1) / 2);
    title.push('b');
    let title = pdf.add(format!("({title})").into_bytes());
    let first = pdf.objects.len() + 1;
    let last = first + entries - 1;
    for id in first..=last {
        let mut item =
            format!("<< /Title {title} 0 R /Parent {outlines} 0 R /Dest [{the_page} 0 R /Fit]");
        if id > first {
            item.push_str(&format!(" /Prev {} 0 R", id - 1));
        }
        if id < last {
            item.push_str(&format!(" /Next {} 0 R", id + 1));
        }
        item.push_str(" >>");
        pdf.add(item.into_bytes());
    }
    pdf.set(
        outlines,
        format!("<< /Type /Outlines /First {first} 0 R /Last {last} 0 R /Count {entries} >>")
            .into_bytes(),
    );
    pdf.set(
        catalog,
        format!("<< /Type /Catalog /Pages {tree} 0 R /Outlines {outlines} 0 R >>").into_bytes(),
    );
    pdf.set(tree, page_tree(&[the_page]));
    pdf.finish(catalog)
}

/// A `.docx` whose main part opens `<w:p>` `count` times and never closes one (5 bytes each
/// before compression; 25 million deflate to about 300 KB).
pub fn docx_of_unclosed_paragraphs(count: usize) -> Vec<u8> {
    docx_repeating("", b"<w:p>", count, "")
}

/// A `.docx` of one paragraph of `words` words (`word word ...`): 100 MB of text for 20
/// million, well within the document limit, deflated to about 150 KB.
pub fn docx_of_one_long_paragraph(words: usize) -> Vec<u8> {
    let tail = "</w:t></w:r></w:p></w:body></w:document>";
    docx_repeating("<w:p><w:r><w:t>", b"word ", words, tail)
}

/// A `.docx` whose main part is the body's start, `head`, `unit` `count` times, then `tail`,
/// written as it is deflated (never held whole).
fn docx_repeating(head: &str, unit: &[u8], count: usize, tail: &str) -> Vec<u8> {
    let mut writer = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let options = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated)
        .compression_level(Some(9));
    writer.start_file("word/document.xml", options).unwrap();
    let start = r#"<?xml version="1.0" encoding="UTF-8"?><w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"><w:body>"#;
    writer.write_all(start.as_bytes()).unwrap();
    writer.write_all(head.as_bytes()).unwrap();
    let chunk = unit.repeat(100_000);
    for _ in 0..count / 100_000 {
        writer.write_all(&chunk).unwrap();
    }
    writer.write_all(&unit.repeat(count % 100_000)).unwrap();
    writer.write_all(tail.as_bytes()).unwrap();
    writer.finish().unwrap().into_inner()
}

const FONT: &[u8] = b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>";

fn page(tree: usize, font: usize, contents: &str) -> Vec<u8> {
    format!(
        "<< /Type /Page /Parent {tree} 0 R /MediaBox [0 0 612 792] \
         /Resources << /Font << /F1 {font} 0 R >> >> /Contents {contents} >>"
    )
    .into_bytes()
}

fn page_tree(kids: &[usize]) -> Vec<u8> {
    let refs: Vec<String> = kids.iter().map(|k| format!("{k} 0 R")).collect();
    format!(
        "<< /Type /Pages /Kids [{}] /Count {} >>",
        refs.join(" "),
        kids.len()
    )
    .into_bytes()
}

fn flate_stream(content: &[u8]) -> Vec<u8> {
    let mut encoder = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::best());
    encoder.write_all(content).unwrap();
    let deflated = encoder.finish().unwrap();
    let mut object = format!(
        "<< /Length {} /Filter /FlateDecode >>\nstream\n",
        deflated.len()
    )
    .into_bytes();
    object.extend_from_slice(&deflated);
    object.extend_from_slice(b"\nendstream");
    object
}

/// A PDF written object by object (object `i + 1` is `objects[i]`), with its cross-reference
/// table.
#[derive(Default)]
struct Pdf {
    objects: Vec<Vec<u8>>,
}

impl Pdf {
    fn reserve(&mut self) -> usize {
        self.add(Vec::new())
    }

    fn add(&mut self, body: Vec<u8>) -> usize {
        self.objects.push(body);
        self.objects.len()
    }

    fn set(&mut self, id: usize, body: Vec<u8>) {
        self.objects[id - 1] = body;
    }

    fn finish(self, root: usize) -> Vec<u8> {
        let mut out = b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n".to_vec();
        let mut offsets = Vec::with_capacity(self.objects.len());
        for (i, body) in self.objects.iter().enumerate() {
            offsets.push(out.len());
            out.extend_from_slice(format!("{} 0 obj\n", i + 1).as_bytes());
            out.extend_from_slice(body);
            out.extend_from_slice(b"\nendobj\n");
        }
        let xref = out.len();
        let n = self.objects.len() + 1;
        out.extend_from_slice(format!("xref\n0 {n}\n0000000000 65535 f \n").as_bytes());
        for offset in offsets {
            out.extend_from_slice(format!("{offset:010} 00000 n \n").as_bytes());
        }
        out.extend_from_slice(
            format!("trailer\n<< /Size {n} /Root {root} 0 R >>\nstartxref\n{xref}\n%%EOF\n")
                .as_bytes(),
        );
        out
    }
}
