//! Reading real files: every format, its errors, and the size limit applied before reading.

use lector_ingest::{read_file, walk, Document, IngestOptions, Item, SourceFile};
use std::path::Path;

/// The documents and error messages read from `file`, in order.
fn collect(file: &SourceFile, options: &IngestOptions) -> (Vec<Document>, Vec<String>) {
    let (mut docs, mut errors) = (Vec::new(), Vec::new());
    read_file(file, options, &mut |item, _| {
        match item {
            Item::Document(d) => docs.push(d),
            Item::Invalid(e) => errors.push(e.to_string()),
        }
        Ok(())
    })
    .unwrap();
    (docs, errors)
}

fn only_file(path: &Path) -> SourceFile {
    let mut walked = walk(&[path.to_path_buf()]);
    assert!(walked.errors.is_empty(), "{:?}", walked.errors);
    walked.files.remove(0)
}

fn limit(bytes: usize) -> IngestOptions {
    IngestOptions {
        max_document_bytes: bytes,
    }
}

#[test]
fn jsonl_lines_good_and_bad() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("docs.jsonl");
    std::fs::write(
        &path,
        "{\"id\": \"a\", \"title\": \"T\", \"text\": \"alpha\", \"date\": \"2024-01-02\", \"metadata\": {\"k\": 1}}\n\
         \n{\"_id\": 7, \"title\": \"\", \"text\": \"beir\", \"metadata\": {}}\n\
         {not json}\n{\"id\": \"e\", \"text\": \"   \"}\n{\"text\": \"no id\"}\n[1]\n",
    )
    .unwrap();
    let (docs, errors) = collect(&only_file(&path), &IngestOptions::default());
    assert_eq!(docs.len(), 2);
    assert_eq!(docs[0].date.as_deref(), Some("2024-01-02"));
    assert_eq!(docs[0].metadata, Some(serde_json::json!({"k": 1})));
    assert_eq!(
        (
            docs[1].id.as_str(),
            docs[1].title.as_deref(),
            docs[1].metadata.is_none()
        ),
        ("7", None, true)
    );
    let p = path.display();
    assert_eq!(
        errors,
        [
            format!("{p}:4: column 2: key must be a string"),
            format!("{p}:5: document `e` has no text"),
            format!("{p}:6: no `id` (or BEIR `_id`) field"),
            format!("{p}:7: expected a JSON object"),
        ]
    );
}

#[test]
fn folders_recurse_with_relative_ids() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("sub/deeper")).unwrap();
    std::fs::write(dir.path().join("a.txt"), "plain").unwrap();
    std::fs::write(dir.path().join("sub/b.md"), "# Heading\nbody").unwrap();
    std::fs::write(
        dir.path().join("sub/deeper/c.html"),
        "<title>C</title><p>see</p>",
    )
    .unwrap();
    std::fs::write(dir.path().join("sub/skip.bin"), "x").unwrap();
    std::fs::write(dir.path().join(".hidden.txt"), "x").unwrap();
    let walked = walk(&[dir.path().to_path_buf()]);
    let ids: Vec<&str> = walked.files.iter().map(|f| f.id.as_str()).collect();
    assert_eq!(ids, ["a.txt", "sub/b.md", "sub/deeper/c.html"]);
    assert_eq!(walked.ignored.len(), 1);
    assert!(walked.errors.is_empty());
    let (docs, _) = collect(&walked.files[1], &IngestOptions::default());
    assert_eq!(
        (docs[0].title.as_deref(), docs[0].text.as_str()),
        (Some("Heading"), "# Heading\nbody")
    );
    let (docs, _) = collect(&walked.files[2], &IngestOptions::default());
    assert_eq!(
        (docs[0].title.as_deref(), docs[0].text.as_str()),
        (Some("C"), "see")
    );
}

#[test]
fn a_legacy_word_file_in_a_folder_is_reported_by_name_not_ignored() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("notes.txt"), "plain").unwrap();
    std::fs::write(
        dir.path().join("Report.DOC"),
        b"\xd0\xcf\x11\xe0 an OLE file",
    )
    .unwrap();
    let walked = walk(&[dir.path().to_path_buf()]);
    assert_eq!(walked.files.len(), 1);
    assert!(walked.ignored.is_empty(), "{:?}", walked.ignored);
    let said: Vec<String> = walked.errors.iter().map(|e| e.to_string()).collect();
    assert_eq!(said.len(), 1, "{said:?}");
    assert!(
        said[0].contains("Report.DOC") && said[0].contains("save it as .docx"),
        "{said:?}"
    );
}

#[test]
fn oversized_missing_and_invalid_utf8_files_are_reported() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("big.txt"), "word ".repeat(1000)).unwrap();
    std::fs::write(dir.path().join("bad.txt"), b"ok\n\xff\xfe").unwrap();
    let walked = walk(&[dir.path().to_path_buf(), dir.path().join("missing.txt")]);
    assert_eq!(walked.errors.len(), 1);
    assert!(walked.errors[0].to_string().contains("missing.txt"));
    let (_, bad) = collect(&walked.files[0], &limit(1000));
    assert!(
        bad[0].ends_with("bad.txt:2: invalid UTF-8 at byte 3"),
        "{}",
        bad[0]
    );
    let (_, big) = collect(&walked.files[1], &limit(1000));
    let expected = "big.txt: file has 4.9 KiB, above the limit of 1000 bytes per document \
                    (raise it with --max-doc-mb)";
    assert!(big[0].ends_with(expected), "{}", big[0]);
}

#[test]
fn html_is_refused_by_file_size_before_parsing() {
    // Little visible text in a large page: the former reader accepted it by its text, after
    // loading and parsing the whole file.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("page.html");
    let padding = format!("<!-- {} -->", "x".repeat(4000));
    std::fs::write(&path, format!("<p>short</p>{padding}")).unwrap();
    let file = only_file(&path);
    let (docs, errors) = collect(&file, &limit(1000));
    assert!(docs.is_empty());
    assert_eq!(
        errors,
        [format!(
            "{}: file has 3.9 KiB, above the limit of 1000 bytes per document (raise it with --max-doc-mb)",
            path.display()
        )]
    );
    let (docs, errors) = collect(&file, &limit(5000));
    assert_eq!((docs[0].text.as_str(), errors.len()), ("short", 0));
}

#[test]
fn squad_paragraphs_become_documents() {
    let file = only_file(&lector_eval::data::require("squad/dev-v1.1.json"));
    let (docs, errors) = collect(&file, &IngestOptions::default());
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(docs.len(), 2067);
    assert_eq!(docs[0].id, "Super_Bowl_50#0");
    assert_eq!(docs[0].title.as_deref(), Some("Super Bowl 50"));
    assert!(docs[0]
        .text
        .starts_with("Super Bowl 50 was an American football game"));
}

#[test]
fn squad_file_over_the_limit_is_refused_whole() {
    let path = lector_eval::data::require("squad/dev-v1.1.json");
    let size = std::fs::metadata(&path).unwrap().len() as usize;
    let (docs, errors) = collect(&only_file(&path), &limit(size - 1));
    assert!(docs.is_empty());
    assert_eq!(errors.len(), 1);
    assert!(
        errors[0].starts_with(&format!("{}: file has 4.", path.display())),
        "{}",
        errors[0]
    );
    let (docs, _) = collect(&only_file(&path), &limit(size));
    assert_eq!(docs.len(), 2067);
}

#[test]
fn squad_errors_name_the_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let not_squad = dir.path().join("package.json");
    std::fs::write(&not_squad, r#"{"name": "x", "version": "1"}"#).unwrap();
    let (_, errors) = collect(&only_file(&not_squad), &IngestOptions::default());
    assert_eq!(
        errors,
        [format!(
            "{}: no `data` array at the top level: not a SQuAD dataset",
            not_squad.display()
        )]
    );
    let no_context = dir.path().join("broken.json");
    std::fs::write(
        &no_context,
        "{\"data\": [{\"title\": \"T\",\n \"paragraphs\": [{\"qas\": []}]}]}",
    )
    .unwrap();
    let (docs, errors) = collect(&only_file(&no_context), &IngestOptions::default());
    assert!(docs.is_empty());
    assert!(
        errors[0].starts_with(&format!("{}:2: column ", no_context.display()))
            && errors[0].ends_with("missing field `context`"),
        "{}",
        errors[0]
    );
}

#[test]
fn jsonl_line_over_the_limit_is_an_error_and_reading_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("docs.jsonl");
    let long = format!("{{\"id\": \"long\", \"text\": \"{}\"}}", "y".repeat(5000));
    let lines = [
        r#"{"id": "first", "text": "kept before"}"#.to_string(),
        long,
        r#"{"id": "last", "text": "kept after"}"#.to_string(),
    ];
    std::fs::write(&path, lines.join("\n")).unwrap();
    let (mut items, mut offsets) = (Vec::new(), Vec::new());
    read_file(&only_file(&path), &limit(1000), &mut |item, read| {
        items.push(match item {
            Item::Document(d) => d.id,
            Item::Invalid(e) => e.to_string(),
        });
        offsets.push(read);
        Ok(())
    })
    .unwrap();
    let expected_error = format!(
        "{}:2: line has 4.9 KiB, above the limit of 1000 bytes per document (raise it with --max-doc-mb)",
        path.display()
    );
    assert_eq!(
        items,
        ["first".to_string(), expected_error, "last".to_string()]
    );
    // Progress counts the skipped line's bytes too, ending at the file's size.
    let size = std::fs::metadata(&path).unwrap().len();
    assert_eq!(offsets[2], size);
}

#[test]
fn an_error_from_emit_stops_reading() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("docs.jsonl");
    std::fs::write(
        &path,
        "{\"id\": \"a\", \"text\": \"x\"}\n{\"id\": \"b\", \"text\": \"y\"}\n",
    )
    .unwrap();
    let mut seen = 0;
    let result = read_file(&only_file(&path), &IngestOptions::default(), &mut |_, _| {
        seen += 1;
        Err(lector_ingest::Error::Stopped("disk full".into()))
    });
    assert_eq!(
        (result.unwrap_err().to_string(), seen),
        ("disk full".to_string(), 1)
    );
}

#[test]
fn markdown_front_matter_and_file_attributes_become_metadata() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("install.md");
    let text = "---\ntitle: Installing Kestrel\ndate: 2024-03-01\nproduct: kestrel\nversion: 2\ntags: [linux, setup]\n---\n# Install\nRun the installer as root.\n";
    std::fs::write(&path, text).unwrap();
    let (docs, errors) = collect(&only_file(&path), &IngestOptions::default());
    assert!(errors.is_empty(), "{errors:?}");
    let doc = &docs[0];
    assert_eq!(doc.title.as_deref(), Some("Installing Kestrel"));
    assert_eq!(doc.date.as_deref(), Some("2024-03-01"));
    let meta = doc.metadata.as_ref().unwrap();
    assert_eq!(meta["product"], "kestrel");
    assert_eq!(meta["version"], 2);
    assert_eq!(meta["tags"], serde_json::json!(["linux", "setup"]));
    // The block is blanked, not removed: character offsets still match the file.
    assert_eq!(doc.text.chars().count(), text.chars().count());
    assert!(!doc.text.contains("kestrel") && doc.text.contains("Run the installer"));
    let file = &meta[lector_ingest::document::FILE_FIELD];
    assert_eq!(file["bytes"], text.len());
    assert!(file["path"].as_str().unwrap().ends_with("install.md"));
    let modified = file["modified"].as_str().unwrap();
    assert!(
        modified.len() == 20 && modified.ends_with('Z') && modified.starts_with("20"),
        "{modified}"
    );

    // Written again with the same content: a new modification time, the same content hash.
    std::thread::sleep(std::time::Duration::from_millis(1100));
    std::fs::write(&path, text).unwrap();
    let (again, _) = collect(&only_file(&path), &IngestOptions::default());
    assert_ne!(
        again[0].metadata.as_ref().unwrap()["file"]["modified"],
        file["modified"]
    );
    assert_eq!(again[0].content_hash(), doc.content_hash());

    // Front matter this reader cannot read is refused with its line, not read wrongly.
    std::fs::write(&path, "---\nowner:\n  team: qa\n---\nText.\n").unwrap();
    let (docs, errors) = collect(&only_file(&path), &IngestOptions::default());
    assert!(docs.is_empty());
    assert!(
        errors[0].contains("install.md:3: front matter: nested mappings"),
        "{errors:?}"
    );
}
