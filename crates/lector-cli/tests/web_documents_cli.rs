//! Documents through `lector serve`: the `GET /v1/documents` listing over HTTP (order, total,
//! bounds, the API key), and the web page adding, listing and removing documents and sending
//! feedback in headless Chromium. The page is driven through its `#test-…` address entries
//! (see the end of `assets/index.html`): `--dump-dom` can neither drop a file nor click.

mod common;

use common::{browser_or_skip, dump_dom, get_json, headless, http, http_with, index, serve};
use serde_json::{json, Value};
use std::path::Path;
use std::time::{Duration, Instant};

/// 2024-03-15T12:00:00Z, the `lastModified` of the test files: 2024-03-15 in any time zone
/// within ±11 hours (Chromium runs with `TZ=UTC` anyway).
const MODIFIED_MS: u64 = 1_710_504_000_000;

fn ids(list: &Value) -> Vec<String> {
    list["documents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["id"].as_str().unwrap().to_string())
        .collect()
}

/// Every byte but the unreserved ones as `%XX`, for a JSON value in an address fragment.
fn percent_encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[test]
fn documents_are_listed_in_the_index_order_a_page_at_a_time_with_the_total() {
    let dir = tempfile::tempdir().unwrap();
    let (_server, addr) = serve(&index(dir.path()), &[]);
    let addr = &addr;
    let docs = json!([
        {"id": "zz-last", "text": "Zürich café ☕ by the lake.", "title": "Z", "date": "2021-02-03"},
        {"id": "aa-first", "text": "A short note."},
    ]);
    let (status, body) = http(addr, "POST", "/v1/documents", Some(&docs.to_string()));
    assert_eq!(status, 201, "{body}");

    let all = get_json(addr, "/v1/documents?limit=1000");
    assert_eq!(all["total"], 12, "10 sample paragraphs and 2 more");
    let order = ids(&all);
    assert_eq!(order.len(), 12);
    // The sample's documents first, then the batch in the order it was sent.
    assert_eq!(
        order[10..],
        ["zz-last", "aa-first"],
        "the index's own order"
    );
    assert!(all["next_cursor"].is_null(), "{all}");
    let last = &all["documents"][10];
    assert_eq!(last["id"], "zz-last");
    assert_eq!(last["title"], "Z");
    assert_eq!(last["date"], "2021-02-03");
    assert_eq!(last["passage_count"], 1);
    assert_eq!(last["char_count"], 26, "characters, not UTF-8 bytes");
    // A sample paragraph's counts match the stored document.
    let first = &all["documents"][0];
    let id = first["id"].as_str().unwrap();
    let stored = get_json(addr, &format!("/v1/documents/{}", percent_encode(id)));
    let chars = stored["text"].as_str().unwrap().chars().count();
    assert_eq!(first["char_count"], chars);
    assert_eq!(
        first["passage_count"],
        stored["passages"].as_array().unwrap().len()
    );

    // Pages of 5 cover the same documents in the same order; past the end is empty.
    let mut paged = Vec::new();
    for offset in [0, 5, 10] {
        let page = get_json(addr, &format!("/v1/documents?offset={offset}&limit=5"));
        assert_eq!(page["total"], 12);
        paged.extend(ids(&page));
    }
    assert_eq!(paged, order);
    let beyond = get_json(addr, "/v1/documents?offset=12");
    assert!(ids(&beyond).is_empty());
    assert_eq!(beyond["limit"], 100, "the default limit");

    for bad in ["limit=0", "limit=1001", "limit=ten", "offset=-1", "sort=id"] {
        let (status, body) = http(addr, "GET", &format!("/v1/documents?{bad}"), None);
        assert_eq!(status, 400, "{bad}: {body}");
    }
    let (_, body) = http(addr, "GET", "/v1/documents?limit=1001", None);
    assert!(body.contains("limit must be between 1 and 1000"), "{body}");
}

#[test]
fn listing_documents_needs_the_api_key_when_the_server_has_one() {
    let dir = tempfile::tempdir().unwrap();
    let (_server, addr) = serve(&index(dir.path()), &["--api-key", "list-key-123"]);
    let (status, body) = http(&addr, "GET", "/v1/documents", None);
    assert_eq!(status, 401, "{body}");
    let wrong = ["Authorization: Bearer not-the-key"];
    let (status, _) = http_with(&addr, "GET", "/v1/documents", None, &wrong);
    assert_eq!(status, 401);
    let key = ["Authorization: Bearer list-key-123"];
    let (status, body) = http_with(&addr, "GET", "/v1/documents", None, &key);
    assert_eq!(status, 200, "{body}");
    assert_eq!(serde_json::from_str::<Value>(&body).unwrap()["total"], 10);
}

/// The page's address with `#test-add=` files: the page builds `File`s of them and hands them to
/// the handler a drop calls.
fn add_url(addr: &str, files: &Value) -> String {
    format!(
        "http://{addr}/#test-add={}",
        percent_encode(&files.to_string())
    )
}

fn file(name: &str, kind: &str, content: &str) -> Value {
    json!({"name": name, "type": kind, "content": content, "lastModified": MODIFIED_MS})
}

/// The `data-docs` state of the page's body (`done`, `error`, `removed`, …).
fn docs_state(dom: &str) -> &str {
    dom.split("data-docs=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .unwrap_or("")
}

/// The rows of the page's document list.
fn listed(dom: &str) -> String {
    let list = dom
        .split("<table id=\"doc-list\">")
        .nth(1)
        .expect("the list");
    list.split("</table>").next().unwrap().to_string()
}

#[test]
fn the_page_adds_lists_and_removes_documents_in_headless_chromium() {
    let Some(browser) =
        browser_or_skip("the_page_adds_lists_and_removes_documents_in_headless_chromium")
    else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (_server, addr) = serve(&index(dir.path()), &[]);
    let addr = &addr;
    let profile = dir.path().join("chromium-profile");
    let markdown = "Notes from the coast.\r\n\r\n# Harbour notes\n\nThe lighthouse of Skagen is kept by Maren Holm.\nZürich ☕ too.\n";
    let html = "<html><head><title> Skagen   page </title><style>p { color: red }</style></head>\
        <body><h1>Beacon</h1><p>The  keeper\n   is <b>Maren</b>.</p><script>var secret = 1;</script>\
        <ul>\n <li>one</li>\n <li>two<br>lines</li>\n</ul><pre>  kept   spacing</pre></body></html>";
    let jsonl = "{\"id\": \"jsonl-dated\", \"text\": \"The harbour master is Ole.\", \"date\": \"2019-05-01\", \"metadata\": {\"source\": \"test\"}}\n\
        \n{\"id\": \"jsonl-undated\", \"title\": \"Undated\", \"text\": \"A second line.\"}\n";
    let files = json!([
        file("notes.md", "text/markdown", markdown),
        file("page.html", "text/html", html),
        file("corpus.jsonl", "", jsonl),
    ]);
    let dom = dump_dom(&browser, &profile, &add_url(addr, &files), "<body");
    assert_eq!(docs_state(&dom), "done", "{dom}");
    assert!(dom.contains("4 added from 3 files."), "{dom}");
    let list = listed(&dom);
    for id in ["notes.md", "page.html", "jsonl-dated", "jsonl-undated"] {
        assert!(
            list.contains(&format!("<td>{id}</td>")),
            "{id} listed: {list}"
        );
    }
    assert!(list.contains("<td>2019-05-01</td>") && list.contains("<td>2024-03-15</td>"));
    assert!(dom.contains("14 documents"), "the total");
    assert!(dom.contains("batch 1 of 1"), "the progress label");

    // Stored as given: the text verbatim, the title from the first heading, the file's date.
    let md = get_json(addr, "/v1/documents/notes.md");
    assert_eq!(md["text"], markdown);
    assert_eq!(md["title"], "Harbour notes");
    assert_eq!(md["date"], "2024-03-15");
    let page = get_json(addr, "/v1/documents/page.html");
    assert_eq!(page["title"], "Skagen page");
    assert_eq!(
        page["text"],
        "Beacon\n\nThe keeper is Maren.\n\none\ntwo\nlines\n\n  kept   spacing"
    );
    let dated = get_json(addr, "/v1/documents/jsonl-dated");
    assert_eq!(dated["date"], "2019-05-01");
    assert_eq!(dated["metadata"], json!({"source": "test"}));
    let undated = get_json(addr, "/v1/documents/jsonl-undated");
    assert_eq!(
        (&undated["title"], &undated["date"]),
        (&json!("Undated"), &json!("2024-03-15"))
    );
    let hits = get_json(addr, "/v1/search?q=lighthouse%20Skagen&k=1");
    assert_eq!(hits["hits"][0]["doc_id"], "notes.md");

    // A bad jsonl line names its file and line, and keeps that file out; other files go in.
    let files = json!([
        file(
            "bad.jsonl",
            "",
            "{\"id\": \"ok\", \"text\": \"fine\"}\n{\"id\": \"broken\", \"text\": }\n"
        ),
        file("plain.txt", "text/plain", "Plain words."),
    ]);
    let dom = dump_dom(&browser, &profile, &add_url(addr, &files), "<body");
    assert_eq!(docs_state(&dom), "error", "{dom}");
    assert!(
        dom.contains("bad.jsonl line 2: not valid JSON"),
        "the error names file and line: {dom}"
    );
    assert_eq!(http(addr, "GET", "/v1/documents/ok", None).0, 404);
    assert_eq!(
        get_json(addr, "/v1/documents/plain.txt")["title"],
        "plain.txt"
    );

    // Removing through the page asks first, then deletes.
    let url = format!("http://{addr}/#test-remove=page.html");
    let dom = dump_dom(&browser, &profile, &url, "<body");
    assert_eq!(docs_state(&dom), "removed", "{dom}");
    assert!(
        dom.contains("data-confirmed=\"Remove “page.html” from the index?"),
        "{dom}"
    );
    assert!(!listed(&dom).contains("page.html"));
    assert_eq!(http(addr, "GET", "/v1/documents/page.html", None).0, 404);
    assert_eq!(get_json(addr, "/v1/documents")["total"], 14);

    // A screenshot of the list for people, kept under target/ (docs/web-page.md points to it).
    let shot = Path::new(env!("CARGO_TARGET_TMPDIR")).join("web/documents.png");
    std::fs::create_dir_all(shot.parent().unwrap()).unwrap();
    let _ = std::fs::remove_file(&shot);
    headless(
        &browser,
        &profile,
        &format!("http://{addr}/"),
        &[&format!("--screenshot={}", shot.display())],
    );
    assert!(
        shot.metadata().is_ok_and(|m| m.len() > 10_000),
        "no screenshot"
    );
    eprintln!("screenshot: {}", shot.display());
}

#[test]
fn the_page_splits_batches_the_server_refuses_and_names_a_document_too_large() {
    let Some(browser) = browser_or_skip(
        "the_page_splits_batches_the_server_refuses_and_names_a_document_too_large",
    ) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (_server, addr) = serve(&index(dir.path()), &["--max-documents-bytes", "4096"]);
    let addr = &addr;
    let words = |word: &str, n: usize| vec![word; n].join(" ");
    // Two files fit alone but not together; the third fits never.
    let files = json!([
        file("a.txt", "text/plain", &words("alpha", 450)),
        file("b.txt", "text/plain", &words("bravo", 450)),
        file("big.txt", "text/plain", &words("giant", 900)),
    ]);
    let profile = dir.path().join("chromium-profile");
    let dom = dump_dom(&browser, &profile, &add_url(addr, &files), "<body");
    assert_eq!(docs_state(&dom), "error", "{dom}");
    assert!(
        dom.contains(
            "“big.txt” (from big.txt) is 0.01 MB as JSON: too large for this server (413)"
        ),
        "{dom}"
    );
    assert!(dom.contains("--max-documents-bytes"));
    assert!(
        dom.contains("batch 3 of 3"),
        "one refused batch split in two: {dom}"
    );
    assert!(dom.contains("2 added from 3 files."), "{dom}");
    assert_eq!(
        get_json(addr, "/v1/documents/a.txt")["text"],
        words("alpha", 450)
    );
    assert_eq!(http(addr, "GET", "/v1/documents/b.txt", None).0, 200);
    assert_eq!(http(addr, "GET", "/v1/documents/big.txt", None).0, 404);
}

/// Every feedback line in a query log directory.
fn feedback_lines(dir: &Path) -> Vec<Value> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|entry| std::fs::read_to_string(entry.path()).ok())
        .flat_map(|text| {
            text.lines()
                .filter_map(|line| serde_json::from_str::<Value>(line).ok())
                .collect::<Vec<_>>()
        })
        .filter(|line| line["type"] == "feedback")
        .collect()
}

#[test]
fn thumbs_down_with_a_correct_answer_is_logged_and_off_without_a_query_log() {
    let Some(browser) =
        browser_or_skip("thumbs_down_with_a_correct_answer_is_logged_and_off_without_a_query_log")
    else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let index = index(dir.path());
    let log = dir.path().join("log");
    let profile = dir.path().join("chromium-profile");
    let question = "?q=Which%20team%20won%20Super%20Bowl%2050%3F";
    let vote = format!("#test-vote=down:{}", percent_encode("the Broncos"));

    let (server, addr) = serve(&index, &["--log-queries", &log.to_string_lossy()]);
    let url = format!("http://{addr}/{question}{vote}");
    let dom = dump_dom(&browser, &profile, &url, "<body");
    assert!(dom.contains("data-feedback=\"sent\""), "{dom}");
    assert!(dom.contains("Thanks — noted."));
    let deadline = Instant::now() + Duration::from_secs(20);
    let lines = loop {
        let lines = feedback_lines(&log);
        if !lines.is_empty() || Instant::now() > deadline {
            break lines;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert_eq!(lines[0]["verdict"], "down");
    assert_eq!(lines[0]["correct_answer"], "the Broncos");
    assert_eq!(lines[0]["request_id"].as_str().map(str::len), Some(16));
    drop(server);

    // Without --log-queries the route is 404: the page says so and hides the buttons.
    let (_server, addr) = serve(&index, &[]);
    let url = format!("http://{addr}/{question}#test-vote=up");
    let dom = dump_dom(&browser, &profile, &url, "<body");
    assert!(dom.contains("data-feedback=\"off\""), "{dom}");
    assert!(dom.contains("feedback is off on this server"));
    let up = dom
        .split("<button id=\"vote-up\"")
        .nth(1)
        .and_then(|rest| rest.split('>').next())
        .expect("the up button");
    assert!(up.contains("hidden=\"\""), "the buttons are hidden: {up}");
}

#[test]
fn the_page_uploads_pdfs_which_the_server_reads_and_refuses_by_name() {
    use base64::Engine;
    let Some(browser) =
        browser_or_skip("the_page_uploads_pdfs_which_the_server_reads_and_refuses_by_name")
    else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (_server, addr) = serve(&index(dir.path()), &[]);
    let profile = dir.path().join("chromium-profile");
    let pdf = |rel: &str, name: &str| {
        let bytes =
            std::fs::read(lector_eval::data::require(&format!("pdf-samples/{rel}"))).unwrap();
        let base64 = base64::engine::general_purpose::STANDARD.encode(bytes);
        json!({"name": name, "type": "application/pdf", "base64": base64, "lastModified": MODIFIED_MS})
    };
    let good = json!([pdf("024-annotations/annotated_pdf.pdf", "annotated.pdf")]);
    let dom = dump_dom(&browser, &profile, &add_url(&addr, &good), "<body");
    assert_eq!(docs_state(&dom), "done", "{dom}");
    assert!(listed(&dom).contains("<td>annotated.pdf</td>"), "{dom}");
    // A password-protected PDF: the server's reason, naming the file, and nothing added (a
    // batch is all or nothing).
    let locked = json!([pdf(
        "005-libreoffice-writer-password/libreoffice-writer-password.pdf",
        "locked.pdf"
    )]);
    let dom = dump_dom(&browser, &profile, &add_url(&addr, &locked), "<body");
    assert_eq!(docs_state(&dom), "error", "{dom}");
    assert!(
        dom.contains("locked.pdf: encrypted PDF (password-protected), not supported"),
        "{dom}"
    );
    assert!(!listed(&dom).contains("locked.pdf"));
    // The server read the PDF: its text and pages are stored.
    let stored = get_json(&addr, "/v1/documents/annotated.pdf");
    assert!(
        stored["text"].as_str().unwrap().contains("Some text."),
        "{stored}"
    );
    assert_eq!(stored["metadata"]["pages"], json!([0]));
}
