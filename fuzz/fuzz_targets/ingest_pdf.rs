//! A PDF file (`.pdf`): its text page by page through lopdf, with the PDF reader's own checks on
//! top of the common ones: a panic inside the parser must come back as an invalid item (it is
//! caught), and a document's page starts must be increasing character offsets that begin at 0,
//! each after a form feed, one per page of its text, so that `page_of` maps them back; and the
//! sections read from its outline, if any, must be a valid list (increasing starts, within the
//! text, levels 1 to 9), so that `section_starts` keeps them all.
#![no_main]
use lector_ingest::{page_of, section_starts, Item};

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let items = lector_fuzz::ingest_items_within("pdf", data, lector_fuzz::FUZZ_MAX_FILE_BYTES);
    assert_eq!(items.len(), 1, "one item per PDF file");
    if let Some(Item::Document(doc)) = items.first() {
        let metadata = doc.metadata.as_ref().expect("a PDF document has metadata");
        let starts: Vec<usize> = metadata["pages"]
            .as_array()
            .expect("a list of page starts")
            .iter()
            .map(|s| s.as_u64().expect("an offset") as usize)
            .collect();
        let chars: Vec<char> = doc.text.chars().collect();
        assert_eq!(starts.len(), doc.text.split('\u{c}').count());
        assert_eq!(starts[0], 0);
        for (page, &start) in starts.iter().enumerate() {
            if page > 0 {
                assert!(start > starts[page - 1] && chars[start - 1] == '\u{c}');
            }
            assert_eq!(page_of(Some(metadata), start), Some(page + 1));
        }
        if let Some(sections) = metadata.get("sections") {
            let listed = sections.as_array().expect("a list of sections").len();
            let starts = section_starts(Some(metadata));
            assert_eq!(starts.len(), listed, "every section valid");
            assert!(starts.iter().all(|&s| s <= chars.len()));
        }
    }
});
