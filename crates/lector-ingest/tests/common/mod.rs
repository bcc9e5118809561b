//! What the PDF and DOCX tests share: reading one real file through `read_file`.

use lector_ingest::{read_file, Format, IngestOptions, Item, SourceFile};
use std::path::Path;

/// Everything `read_file` yields for the file at `path`, under `options`.
pub fn read_with(path: &Path, options: &IngestOptions) -> Vec<Item> {
    let file = SourceFile {
        path: path.to_path_buf(),
        id: path.file_name().unwrap().to_string_lossy().into_owned(),
        bytes: std::fs::metadata(path).unwrap().len(),
        format: Format::of(path).expect("an extension lector reads"),
    };
    let mut items = Vec::new();
    read_file(&file, options, &mut |item, _| {
        items.push(item);
        Ok(())
    })
    .unwrap();
    items
}

/// The message of the one invalid item read from `path`.
pub fn invalid_message(path: &Path, options: &IngestOptions) -> String {
    let mut items = read_with(path, options);
    assert_eq!(items.len(), 1, "one item per file");
    match items.pop().unwrap() {
        Item::Invalid(err) => err.to_string(),
        Item::Document(doc) => panic!(
            "{}: expected an invalid item, got a document of {} chars",
            path.display(),
            doc.text.len()
        ),
    }
}

/// The character offset of `phrase` in `text` (the offsets `page_of` and `section_path` take).
pub fn char_offset(text: &str, phrase: &str) -> usize {
    let byte = text
        .find(phrase)
        .unwrap_or_else(|| panic!("`{phrase}` is not in the text:\n{text}"));
    text[..byte].chars().count()
}
