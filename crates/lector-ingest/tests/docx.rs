//! DOCX ingestion on real files: `fixtures/manual.docx`, written by LibreOffice from
//! `fixtures/manual.html`, and `fixtures/word-style.docx`, hand-written WordprocessingML shaped
//! like Word's (`fixtures/make_word_style.py`); see `fixtures/README.md`.

mod common;

use common::{char_offset, invalid_message, read_with};
use lector_ingest::{section_path, walk, Document, Format, IngestOptions, Item};
use serde_json::json;
use std::io::Write;
use std::path::{Path, PathBuf};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

fn document(path: &Path) -> Document {
    let mut items = read_with(path, &IngestOptions::default());
    assert_eq!(items.len(), 1, "one item per DOCX file");
    match items.pop().unwrap() {
        Item::Document(doc) => doc,
        Item::Invalid(err) => panic!("{}: expected a document, got {err}", path.display()),
    }
}

/// The byte offsets of `phrases` in `text`, asserting each is there and they come in order.
fn assert_in_order(text: &str, phrases: &[&str]) {
    let mut at = 0;
    for phrase in phrases {
        let found = text[at..]
            .find(phrase)
            .unwrap_or_else(|| panic!("`{phrase}` is not in the text after byte {at}:\n{text}"));
        at += found + phrase.len();
    }
}

/// A folder of its own holding `name` with `bytes`.
fn scratch(name: &str, bytes: &[u8]) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(name);
    std::fs::write(&path, bytes).unwrap();
    (dir, path)
}

#[test]
fn walk_lists_docx_files() {
    let found = walk(&[fixture("manual.docx")]);
    assert!(found.errors.is_empty(), "{:?}", found.errors);
    assert_eq!(found.files[0].format, Format::Docx);
    assert_eq!(Format::of(Path::new("A.DOCX")), Some(Format::Docx));
}

#[test]
fn manual_text_has_paragraphs_in_order_and_table_rows() {
    let doc = document(&fixture("manual.docx"));
    assert_eq!(doc.id, "manual.docx");
    assert_in_order(
        &doc.text,
        &[
            "Kestrel is a small backup tool",
            "\n\nInstallation\nKestrel runs on Linux and Windows.",
            "\n\nLinux\nOn Linux, install the package with apt install kestrel. The service",
            "The minimum supported kernel version is 5.10.",
            "\n\nWindows\n",
            "a scheduled task named \"Kestrel Nightly\" that runs at 02:30.",
            "\n\nConfiguration\n",
            "the most important settings & their defaults.\n",
            "Setting | Default | Meaning\n",
            "retention_days | 45 | How long old snapshots are kept\n",
            "compression | zstd | The compression used for snapshots\n",
            "bandwidth_limit | 8 MB/s | The largest upload rate\n",
            "After changing a setting, restart the service",
            "\n\nEncryption\n",
            "\n\nTroubleshooting\n",
            "Error code K-42 means that the passphrase does not match the vault.",
        ],
    );
    assert!(!doc.text.contains('<') && !doc.text.contains("&amp;"));
    assert!(!doc.text.ends_with('\n') && !doc.text.starts_with('\n'));
}

#[test]
fn manual_sections_are_the_headings_with_their_levels() {
    let doc = document(&fixture("manual.docx"));
    let metadata = doc.metadata.as_ref().expect("metadata");
    let sections = metadata["sections"].as_array().expect("a list of sections");
    let shape: Vec<(u64, &str)> = sections
        .iter()
        .map(|s| (s["level"].as_u64().unwrap(), s["title"].as_str().unwrap()))
        .collect();
    assert_eq!(
        shape,
        [
            (1, "Installation"),
            (2, "Linux"),
            (2, "Windows"),
            (1, "Configuration"),
            (2, "Encryption"),
            (1, "Troubleshooting"),
        ]
    );
    // Each start is the character offset of the heading's text.
    let chars: Vec<char> = doc.text.chars().collect();
    for s in sections {
        let start = s["start"].as_u64().unwrap() as usize;
        let title = s["title"].as_str().unwrap();
        let at: String = chars[start..start + title.chars().count()].iter().collect();
        assert_eq!(at, title);
        assert_eq!(
            &chars[start - 2..start],
            ['\n', '\n'],
            "a blank line before {title}"
        );
    }
}

#[test]
fn section_path_names_the_subsection_of_a_phrase() {
    let doc = document(&fixture("manual.docx"));
    let m = doc.metadata.as_ref();
    let path = |phrase| section_path(m, char_offset(&doc.text, phrase));
    assert_eq!(
        path("minimum supported kernel version").as_deref(),
        Some("Installation > Linux")
    );
    assert_eq!(
        path("Windows 8 is not").as_deref(),
        Some("Installation > Windows")
    );
    assert_eq!(
        path("It needs 200 MB of free disk space").as_deref(),
        Some("Installation")
    );
    assert_eq!(
        path("retention_days | 45").as_deref(),
        Some("Configuration")
    );
    assert_eq!(
        path("restart the service so that").as_deref(),
        Some("Configuration")
    );
    assert_eq!(
        path("derived from the passphrase").as_deref(),
        Some("Configuration > Encryption")
    );
    // A new level-1 heading closes the level-2 section before it.
    assert_eq!(path("Error code K-17").as_deref(), Some("Troubleshooting"));
    // Before the first heading there is no section.
    assert_eq!(path("Kestrel is a small backup tool"), None);
    // The heading itself is in its own section.
    assert_eq!(
        path("Linux\nOn Linux").as_deref(),
        Some("Installation > Linux")
    );
}

#[test]
fn manual_title_and_author_come_from_the_properties() {
    let doc = document(&fixture("manual.docx"));
    assert_eq!(doc.title.as_deref(), Some("Kestrel Backup Manual"));
    let m = doc.metadata.as_ref().unwrap();
    assert_eq!(m["author"], json!("Ada Quill"));
    // LibreOffice writes no dates when converting HTML.
    assert!(m.get("created").is_none() && m.get("modified").is_none());
}

#[test]
fn word_style_file_headings_runs_and_dates() {
    let doc = document(&fixture("word-style.docx"));
    // dc:title is empty: the Title paragraph (style id `Titel`, named `Title`) gives the title.
    assert_eq!(
        doc.title.as_deref(),
        Some("Handbuch der Wetterstation WS-7")
    );
    let m = doc.metadata.as_ref().unwrap();
    assert_eq!(m["author"], json!("Jürgen Ostermann"));
    assert_eq!(m["created"], json!("2023-05-17"));
    assert_eq!(m["modified"], json!("2024-01-09"));
    let sections: Vec<(u64, &str)> = m["sections"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["level"].as_u64().unwrap(), s["title"].as_str().unwrap()))
        .collect();
    // Localized style ids by their names, a paragraph's own outline level, a style based on a
    // heading style; outline level 9 is body text, and the Title paragraph is no section.
    assert_eq!(
        sections,
        [
            (1, "Aufstellung"),
            (2, "Stromversorgung"),
            (2, "Funk"),
            (1, "Messwerte"),
            (1, "Anhang A"),
        ]
    );
    assert_in_order(
        &doc.text,
        &[
            "Handbuch der Wetterstation WS-7\nDie Wetterstation misst",
            // xml:space="preserve" keeps white space, a w:t without it is trimmed; tabs and
            // breaks; `&amp;`; a non-breaking hyphen.
            "Mast:  \tmindestens 2 m hoch\n Abstand & Lage: 10-m freiohne preserve\n",
            // Deleted text and field codes are not text; the field's result is.
            "Der Sensor ist wasserdicht. Seite 4\n\nStromversorgung\nDie Batterie hält 14 Monate.",
            "\n\nFunk\n",
            "\nKein Abschnitt\n\nMesswerte\n",
            "Größe | Bereich\nTemperatur | -40 bis 60 °C\n",
            // Paragraphs of a cell joined by a space, a nested table flattened into its cell.
            "Wind (Böen) | 0 | 50 m/s / Auflösung | 0,1 m/s\n\nAnhang A\n",
        ],
    );
    // Text boxes are skipped (neither Word's shape nor its VML fallback).
    assert!(!doc.text.contains("Kasten"), "{}", doc.text);
    assert!(!doc.text.contains("nicht") && !doc.text.contains("PAGE"));
    let at = char_offset(&doc.text, "868 MHz");
    assert_eq!(
        section_path(Some(m), at).as_deref(),
        Some("Aufstellung > Funk")
    );
    let at = char_offset(&doc.text, "Ersatzteile");
    assert_eq!(section_path(Some(m), at).as_deref(), Some("Anhang A"));
}

#[test]
fn truncated_docx_is_invalid_naming_the_file() {
    let bytes = std::fs::read(fixture("manual.docx")).unwrap();
    let (_dir, path) = scratch("cut.docx", &bytes[..bytes.len() / 2]);
    let message = invalid_message(&path, &IngestOptions::default());
    assert!(message.contains("cut.docx"), "{message}");
    assert!(message.contains("not a ZIP archive"), "{message}");
}

#[test]
fn non_zip_and_encrypted_docx_are_invalid_naming_the_file() {
    let (_dir, path) = scratch("notes.docx", b"just some text, not a zip");
    let message = invalid_message(&path, &IngestOptions::default());
    assert!(message.contains("notes.docx"), "{message}");
    assert!(
        message.contains("not a DOCX (not a ZIP archive"),
        "{message}"
    );

    // Word's password-protected files are OLE compound files.
    let mut ole = vec![0xD0, 0xCF, 0x11, 0xE0, 0xA1, 0xB1, 0x1A, 0xE1];
    ole.resize(4096, 0);
    let (_dir, path) = scratch("secret.docx", &ole);
    let message = invalid_message(&path, &IngestOptions::default());
    assert!(message.contains("secret.docx"), "{message}");
    assert!(
        message.contains("encrypted (password-protected)"),
        "{message}"
    );
}

/// A ZIP archive of `entries` (name, text), deflated.
fn zip_of(entries: &[(&str, &[u8])]) -> Vec<u8> {
    let mut writer = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let options = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated);
    for (name, bytes) in entries {
        writer.start_file(*name, options).unwrap();
        writer.write_all(bytes).unwrap();
    }
    writer.finish().unwrap().into_inner()
}

const W: &str = r#"xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main""#;

fn document_xml(body: &str) -> String {
    format!(
        r#"<?xml version="1.0" encoding="UTF-8"?><w:document {W}><w:body>{body}</w:body></w:document>"#
    )
}

#[test]
fn zip_bomb_entry_over_the_limit_is_refused() {
    // 4 MiB of one paragraph's text compresses to a few KiB.
    let text = "a".repeat(4 << 20);
    let xml = document_xml(&format!("<w:p><w:r><w:t>{text}</w:t></w:r></w:p>"));
    let bytes = zip_of(&[("word/document.xml", xml.as_bytes())]);
    assert!(bytes.len() < 64 << 10, "{} bytes", bytes.len());
    let (_dir, path) = scratch("bomb.docx", &bytes);
    let options = IngestOptions {
        max_document_bytes: 1 << 20,
    };
    let message = invalid_message(&path, &options);
    assert!(message.contains("bomb.docx"), "{message}");
    // Refused by the size the archive declares, before anything is decompressed.
    let declared = format!(
        "word/document.xml decompresses to {:.1} MiB",
        xml.len() as f64 / 1048576.0
    );
    assert!(message.contains(&declared), "{message}");
    assert!(message.contains("above the limit of 1.0 MiB"), "{message}");
    // Under a limit it fits, the same file is a document.
    let big = IngestOptions {
        max_document_bytes: 8 << 20,
    };
    assert!(matches!(
        read_with(&path, &big).pop(),
        Some(Item::Document(_))
    ));
}

#[test]
fn zip_bomb_with_a_lying_declared_size_is_refused() {
    // The entry's declared size is patched down to 100 bytes, under the limit: the declared-size
    // check passes, and reading must stop (zip checks the size it reads against the declared
    // one; lector reads at most one byte past the limit).
    let text = "b".repeat(2 << 20);
    let xml = document_xml(&format!("<w:p><w:r><w:t>{text}</w:t></w:r></w:p>"));
    let mut bytes = zip_of(&[("word/document.xml", xml.as_bytes())]);
    let real = (xml.len() as u32).to_le_bytes();
    let fake = 100u32.to_le_bytes();
    let mut patched = 0;
    // Local header (offset 22) and central directory (offset 24) uncompressed sizes.
    for (signature, at) in [(b"PK\x03\x04", 22usize), (b"PK\x01\x02", 24)] {
        let start = bytes.windows(4).position(|w| w == signature).unwrap();
        if bytes[start + at..start + at + 4] == real {
            bytes[start + at..start + at + 4].copy_from_slice(&fake);
            patched += 1;
        }
    }
    assert_eq!(patched, 2, "both declared sizes patched");
    let (_dir, path) = scratch("liar.docx", &bytes);
    let options = IngestOptions {
        max_document_bytes: 1 << 20,
    };
    let message = invalid_message(&path, &options);
    assert!(message.contains("liar.docx"), "{message}");
    assert!(
        message.contains("decompresses to") || message.contains("unreadable ZIP entry"),
        "{message}"
    );
}

#[test]
fn missing_part_malformed_xml_and_no_text_are_invalid() {
    let cases: [(&str, Vec<u8>, &str); 3] = [
        (
            "empty.docx",
            zip_of(&[("word/other.xml", b"<x/>")]),
            "no word/document.xml",
        ),
        (
            "broken.docx",
            zip_of(&[(
                "word/document.xml",
                document_xml("<w:p><w:r><w:t>unclosed</w:r></w:p>").as_bytes(),
            )]),
            "malformed XML",
        ),
        (
            "blank.docx",
            zip_of(&[(
                "word/document.xml",
                document_xml("<w:p/><w:p><w:r><w:t xml:space=\"preserve\">  </w:t></w:r></w:p>")
                    .as_bytes(),
            )]),
            "no text",
        ),
    ];
    for (name, bytes, expected) in cases {
        let (_dir, path) = scratch(name, &bytes);
        let message = invalid_message(&path, &IngestOptions::default());
        assert!(message.contains(name), "{message}");
        assert!(message.contains(expected), "{name}: {message}");
    }
}

#[test]
fn heading_style_ids_without_a_styles_part() {
    let xml = document_xml(concat!(
        r#"<w:p><w:pPr><w:pStyle w:val="Heading1"/></w:pPr><w:r><w:t>Intro</w:t></w:r></w:p>"#,
        r#"<w:p><w:r><w:t>One.</w:t></w:r></w:p>"#,
        r#"<w:p><w:pPr><w:pStyle w:val="Heading 3"/></w:pPr><w:r><w:t>Deep</w:t></w:r></w:p>"#,
        r#"<w:p><w:r><w:t>Two.</w:t></w:r></w:p>"#,
    ));
    // Broken properties and styles are left out, not fatal.
    let bytes = zip_of(&[
        ("word/document.xml", xml.as_bytes()),
        ("word/styles.xml", b"<w:styles><w:style>"),
        (
            "docProps/core.xml",
            b"<cp:coreProperties><dc:title>Lost</dc:titel>",
        ),
    ]);
    let (_dir, path) = scratch("plain.docx", &bytes);
    let doc = document(&path);
    assert_eq!(doc.text, "Intro\nOne.\n\nDeep\nTwo.");
    // No usable properties: the first level-1 heading is the title.
    assert_eq!(doc.title.as_deref(), Some("Intro"));
    let m = doc.metadata.as_ref().unwrap();
    assert_eq!(
        m["sections"],
        json!([
            {"start": 0, "level": 1, "title": "Intro"},
            {"start": 12, "level": 3, "title": "Deep"},
        ])
    );
    assert_eq!(section_path(Some(m), 17).as_deref(), Some("Intro > Deep"));
    assert_eq!(section_path(Some(m), 7).as_deref(), Some("Intro"));
}
