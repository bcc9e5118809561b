//! A Word file (`.docx`): a ZIP archive of XML parts, read through zip and quick-xml, with the
//! DOCX reader's own checks on top of the common ones: a panic inside either parser must come
//! back as an invalid item (it is caught), and a document's sections must be headings with
//! increasing character starts inside the text, levels 1 to 9, whose titles are the text at
//! their start, each named last by `section_path` at its start.
#![no_main]
use lector_ingest::{section_path, Item};

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let items = lector_fuzz::ingest_items_within("docx", data, lector_fuzz::FUZZ_MAX_FILE_BYTES);
    assert_eq!(items.len(), 1, "one item per DOCX file");
    if let Some(Item::Document(doc)) = items.first() {
        let metadata = doc.metadata.as_ref().expect("a DOCX document has metadata");
        let sections = metadata["sections"].as_array().expect("a list of sections");
        let chars: Vec<char> = doc.text.chars().collect();
        let mut previous = None;
        for section in sections {
            let start = section["start"].as_u64().expect("a start") as usize;
            let level = section["level"].as_u64().expect("a level");
            let title = section["title"].as_str().expect("a title");
            assert!((1..=9).contains(&level), "level {level}");
            assert!(previous.is_none_or(|p| start > p), "starts increase");
            previous = Some(start);
            let n = title.chars().count();
            assert!(n > 0 && start + n <= chars.len(), "a title inside the text");
            assert_eq!(chars[start..start + n].iter().collect::<String>(), title);
            let path = section_path(Some(metadata), start).expect("a path at a heading");
            assert!(path == title || path.ends_with(&format!(" > {title}")));
        }
    }
});
