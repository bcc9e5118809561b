//! PDF ingestion on real files: the pypdf sample files (CC BY-SA 4.0) in the shared data's
//! `pdf-samples/`. The phrases and pages below were checked against poppler's `pdftotext`
//! (`pdftotext -f N -l N`).

mod common;

use common::{char_offset, invalid_message, read_with};
use lector_ingest::{page_of, read_file, walk, Document, Format, IngestOptions, Item, SourceFile};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// `pdf-samples/<relative>` in the shared data: `$LECTOR_DATA_DIR`, else `../shared/data` beside
/// the checkout (as lector-eval's `data` resolves it). Fails, never skips, when it is missing.
fn sample(relative: &str) -> PathBuf {
    let dir = match std::env::var_os("LECTOR_DATA_DIR").filter(|d| !d.is_empty()) {
        Some(dir) => PathBuf::from(dir),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data"),
    };
    let path = dir.join("pdf-samples").join(relative);
    assert!(
        path.exists(),
        "{} is missing: set $LECTOR_DATA_DIR or put the shared data at ../shared/data beside the checkout",
        path.display()
    );
    path
}

fn document(relative: &str) -> Document {
    match read_with(&sample(relative), &IngestOptions::default()).pop() {
        Some(Item::Document(doc)) => doc,
        other => panic!("{relative}: expected a document, got {other:?}"),
    }
}

fn words(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect()
}

#[test]
fn two_column_paper_reads_column_by_column_with_its_words() {
    let doc = document("026-latex-multicolumn/multicolumn.pdf");
    assert_eq!(doc.id, "multicolumn.pdf");
    let pages: Vec<&str> = doc.text.split('\u{c}').collect();
    assert_eq!(pages.len(), 3, "three pages, split by form feeds");
    // In reading order: the title block, the abstract, the left column, then the right one.
    // The sentence "Donec nonummy pellentesque ante." runs from the bottom of the left column
    // to the top of the right one (pdftotext prints the right column's start first).
    let phrases = [
        "Two-Column Document with Lorem Ipsum",
        "This is a sample document with two columns",
        "Lorem ipsum dolor sit amet, consectetuer",
        "Vivamus viverra fermentum felis. Donec nonummy",
        "pellentesque ante. Phasellus adipiscing semper elit.",
        "Quisque ullamcorper placerat ipsum. Cras nibh.",
    ];
    let mut at = 0;
    for phrase in phrases {
        let found = doc.text[at..]
            .find(phrase)
            .unwrap_or_else(|| panic!("`{phrase}` missing or out of order"));
        at += found + phrase.len();
    }
    let last = doc.text[..at].chars().count() - 1;
    assert_eq!(
        page_of(doc.metadata.as_ref(), last),
        Some(1),
        "all on page 1"
    );
    // A paragraph of pdftotext's page 1: nearly all of its words are there (a line-end hyphen,
    // "Maece- nas", is kept as printed, so not all).
    let reference = "pellentesque ante. Phasellus adipiscing semper elit. Proin fermentum massa ac \
        quam. Sed diam turpis, molestie vitae, placerat a, molestie nec, leo. Maecenas lacinia. Nam \
        ipsum ligula, eleifend at, accumsan nec, suscipit a, ipsum. Morbi blandit ligula feugiat \
        magna. Nunc eleifend consequat lorem. Sed lacinia nulla vitae enim. Pellentesque tincidunt \
        purus vel magna. Integer non enim. Praesent euismod nunc eu purus. Donec bibendum quam in \
        tellus. Nullam cursus pulvinar lectus. Donec et mi. Nam vulputate metus eu enim. \
        Vestibulum pellentesque felis eu massa.";
    let mut have: HashMap<String, usize> = HashMap::new();
    for w in words(pages[0]) {
        *have.entry(w).or_default() += 1;
    }
    let wanted = words(reference);
    let found = wanted
        .iter()
        .filter(|w| match have.get_mut(*w) {
            Some(n) if *n > 0 => {
                *n -= 1;
                true
            }
            _ => false,
        })
        .count();
    let recall = found as f64 / wanted.len() as f64;
    assert!(recall >= 0.95, "word recall {recall:.3} on page 1");
    // The third page is the last column's end; nothing of page 1 is on it.
    assert!(!pages[2].contains("Two-Column Document"));
}

#[test]
fn page_of_names_the_page_of_a_phrase() {
    // 117 pages; `pdftotext -f 7 -l 7` prints these phrases and no other page has them.
    let doc = document("009-pdflatex-geotopo/GeoTopo-komprimiert.pdf");
    let metadata = doc.metadata.as_ref();
    let starts = metadata.unwrap()["pages"].as_array().unwrap();
    assert_eq!(starts.len(), 117);
    assert_eq!(doc.text.split('\u{c}').count(), 117);
    for phrase in ["heißt Umgebung von", "Subbasis der Topologie"] {
        let offset = char_offset(&doc.text, phrase);
        assert_eq!(page_of(metadata, offset), Some(7), "{phrase}");
    }
    assert_eq!(
        page_of(
            metadata,
            char_offset(&doc.text, "Einführung in die Geometrie")
        ),
        Some(1)
    );
    // Each page start is the character after a form feed.
    let chars: Vec<char> = doc.text.chars().collect();
    for start in &starts[1..] {
        assert_eq!(chars[start.as_u64().unwrap() as usize - 1], '\u{c}');
    }
    // Ligatures spelt out: "Definition", not "De\u{fb01}nition".
    assert!(doc.text.contains("Definition 2"));
    assert!(!doc.text.contains('\u{fb01}'));
    // The document information.
    assert_eq!(doc.title.as_deref(), Some("Geometrie und Topologie"));
    assert_eq!(metadata.unwrap()["author"], "Martin Thoma");
    assert_eq!(metadata.unwrap()["created"], "2016-12-31");
}

#[test]
fn image_only_pdfs_are_invalid_with_no_extractable_text() {
    for relative in [
        "007-imagemagick-images/imagemagick-CCITTFaxDecode.pdf",
        "007-imagemagick-images/imagemagick-lzw.pdf",
        "019-grayscale-image/grayscale-image.pdf",
        "023-cmyk-image/cmyk-image.pdf",
    ] {
        let path = sample(relative);
        let message = invalid_message(&path, &IngestOptions::default());
        assert!(
            message.contains("no extractable text (scanned?)"),
            "{message}"
        );
        assert!(
            message.starts_with(&path.display().to_string()),
            "{message}"
        );
    }
}

#[test]
fn password_protected_pdf_is_invalid_naming_the_file() {
    let path = sample("005-libreoffice-writer-password/libreoffice-writer-password.pdf");
    let message = invalid_message(&path, &IngestOptions::default());
    assert!(
        message.contains("libreoffice-writer-password.pdf"),
        "{message}"
    );
    assert!(message.contains("encrypted PDF"), "{message}");
}

#[test]
fn truncated_pdfs_are_invalid_not_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    // lopdf rebuilds what it can of a damaged file, so some halves still yield a page or two of
    // text: every half gives exactly one item, and these three are refused.
    let refused = [
        "026-latex-multicolumn/multicolumn.pdf",
        "004-pdflatex-4-pages/pdflatex-4-pages.pdf",
        "009-pdflatex-geotopo/GeoTopo-komprimiert.pdf",
    ];
    let found = walk(&[sample("")]);
    assert!(found.files.len() >= 31);
    for file in found.files.iter().filter(|f| f.format == Format::Pdf) {
        let bytes = std::fs::read(&file.path).unwrap();
        let cut = dir
            .path()
            .join(format!("half-{}", file.id.replace('/', "-")));
        std::fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
        let items = read_with(&cut, &IngestOptions::default());
        assert_eq!(items.len(), 1, "{}", file.id);
        if refused.contains(&file.id.as_str()) {
            let message = invalid_message(&cut, &IngestOptions::default());
            assert!(message.contains(&cut.display().to_string()), "{message}");
        }
    }
    // Not a PDF at all, and an empty file.
    for (name, bytes) in [
        ("text.pdf", b"hello, not a pdf".as_slice()),
        ("empty.pdf", b"".as_slice()),
    ] {
        let path = dir.path().join(name);
        std::fs::write(&path, bytes).unwrap();
        assert!(invalid_message(&path, &IngestOptions::default()).contains("not a readable PDF"));
    }
}

#[test]
fn size_limit_applies_to_the_file() {
    let path = sample("004-pdflatex-4-pages/pdflatex-4-pages.pdf");
    let file = SourceFile {
        path: path.clone(),
        id: "4.pdf".into(),
        bytes: std::fs::metadata(&path).unwrap().len(),
        format: Format::Pdf,
    };
    let options = IngestOptions {
        max_document_bytes: 10_000,
    };
    let mut items = Vec::new();
    read_file(&file, &options, &mut |item, _| {
        items.push(item);
        Ok(())
    })
    .unwrap();
    match &items[..] {
        [Item::Invalid(err)] => assert!(err.to_string().contains("above the limit"), "{err}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn walking_every_sample_gives_a_document_or_an_invalid_item_each() {
    let found = walk(&[sample("")]);
    let pdfs: Vec<_> = found
        .files
        .iter()
        .filter(|f| f.format == Format::Pdf)
        .collect();
    assert_eq!(pdfs.len(), 31, "the 31 sample PDFs");
    let mut documents = Vec::new();
    let mut invalid = Vec::new();
    for file in &pdfs {
        let mut items = Vec::new();
        read_file(file, &IngestOptions::default(), &mut |item, read| {
            assert_eq!(read, file.bytes);
            items.push(item);
            Ok(())
        })
        .unwrap();
        assert_eq!(items.len(), 1, "{}", file.id);
        match items.pop().unwrap() {
            Item::Document(doc) => {
                assert!(!doc.text.trim().is_empty());
                let starts = doc.metadata.as_ref().unwrap()["pages"].as_array().unwrap();
                assert_eq!(starts.len(), doc.text.split('\u{c}').count(), "{}", doc.id);
                documents.push(doc.id);
            }
            Item::Invalid(err) => {
                assert!(err.to_string().contains(&file.id), "{err}");
                invalid.push(file.id.clone());
            }
        }
    }
    invalid.sort();
    // Refused: encrypted, four image-only files, and one whose page tree lopdf cannot find.
    assert_eq!(
        invalid,
        [
            "005-libreoffice-writer-password/libreoffice-writer-password.pdf",
            "007-imagemagick-images/imagemagick-ASCII85Decode.pdf",
            "007-imagemagick-images/imagemagick-CCITTFaxDecode.pdf",
            "007-imagemagick-images/imagemagick-lzw.pdf",
            "017-unreadable-meta-data/unreadablemetadata.pdf",
            "019-grayscale-image/grayscale-image.pdf",
            "023-cmyk-image/cmyk-image.pdf",
        ]
    );
    assert_eq!(documents.len(), 24);
}

/// `(level, title, page, the text at its start)` of each section of a PDF document.
fn outline_sections(doc: &Document) -> Vec<(u64, String, usize, String)> {
    let metadata = doc.metadata.as_ref();
    let chars: Vec<char> = doc.text.chars().collect();
    let sections = metadata.unwrap()["sections"].as_array().expect("sections");
    sections
        .iter()
        .map(|s| {
            let start = s["start"].as_u64().unwrap() as usize;
            let title = s["title"].as_str().unwrap().to_string();
            let end = (start + title.chars().count()).min(chars.len());
            let printed = chars[start..end].iter().collect();
            let page = page_of(metadata, start).unwrap();
            (s["level"].as_u64().unwrap(), title, page, printed)
        })
        .collect()
}

#[test]
fn outline_entries_are_sections_where_their_titles_are_printed() {
    // hyperref's bookmarks of nine \section{...}s after a table of contents on page 1, which
    // prints the same titles: each starts at its heading, not at the contents line.
    let doc = document("006-pdflatex-outline/pdflatex-outline.pdf");
    let sections = outline_sections(&doc);
    let titles: Vec<&str> = sections.iter().map(|s| s.1.as_str()).collect();
    assert_eq!(titles, ["Foo", "Bar", "Baz"].repeat(3));
    let pages: Vec<usize> = sections.iter().map(|s| s.2).collect();
    assert_eq!(pages, [2, 2, 2, 2, 3, 3, 3, 4, 4]);
    for (level, title, _, printed) in &sections {
        assert_eq!(*level, 1);
        assert_eq!(printed, title);
    }
    // A passage after the fifth heading is in section "Bar".
    let offset = lector_ingest::section_starts(doc.metadata.as_ref())[4] + 40;
    assert_eq!(
        lector_ingest::section_path(doc.metadata.as_ref(), offset).as_deref(),
        Some("Bar")
    );

    // 117 pages with chapters, sections and a subsection: levels from the outline's depth.
    let doc = document("009-pdflatex-geotopo/GeoTopo-komprimiert.pdf");
    let sections = outline_sections(&doc);
    assert_eq!(sections.len(), 35);
    let some: Vec<(u64, &str, usize)> = sections
        .iter()
        .filter(|s| s.1.starts_with("4.2") || s.1.starts_with("1.2 "))
        .map(|s| (s.0, s.1.as_str(), s.2))
        .collect();
    assert_eq!(
        some,
        [
            (2, "1.2 Metrische Räume", 10),
            (2, "4.2 Weitere Eigenschaften einer euklidischen Ebene", 78),
            (3, "4.2.1 Flächeninhalt", 78),
        ]
    );
    // Every title is printed where it starts, but the last: its bookmark points to page 114,
    // which prints the "Symbolverzeichnis": it starts at that page.
    let mismatched: Vec<_> = sections.iter().filter(|s| s.3 != s.1).collect();
    assert_eq!(mismatched.len(), 1, "{mismatched:?}");
    assert_eq!(mismatched[0].1, "Stichwortverzeichnis");
    assert!(mismatched[0].3.starts_with("111 Symbolverzeichni"));
    let offset = char_offset(&doc.text, "Flächeninhalt Definition") + 30;
    assert_eq!(
        lector_ingest::section_path(doc.metadata.as_ref(), offset).as_deref(),
        Some(
            "4 Euklidische und nichteuklidische Geometrie > 4.2 Weitere Eigenschaften einer \
             euklidischen Ebene > 4.2.1 Flächeninhalt"
        )
    );
}

#[test]
fn outline_titles_not_printed_start_at_their_page() {
    // pypdf's "mistitled" outline (First, Second, ...): no title is printed, so each entry
    // starts at the first character of the page it points to, with its depth kept.
    let doc = document("014-outlines/mistitled_outlines_example.pdf");
    let starts = doc.metadata.as_ref().unwrap()["pages"]
        .as_array()
        .unwrap()
        .clone();
    let sections = outline_sections(&doc);
    assert_eq!(sections.len(), 13);
    let first: Vec<(u64, &str, usize)> = sections[..5]
        .iter()
        .map(|s| (s.0, s.1.as_str(), s.2))
        .collect();
    assert_eq!(
        first,
        [
            (1, "First", 2),
            (2, "Second", 2),
            (2, "Third", 2),
            (2, "Fourth", 2),
            (3, "Fifth", 3)
        ]
    );
    for start in lector_ingest::section_starts(doc.metadata.as_ref()) {
        assert!(starts.contains(&start.into()), "{start} is a page start");
    }
}
