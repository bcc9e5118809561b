//! `pdf-probe CRATE FILE`: extracts FILE page by page with CRATE (`pdf-extract`, `lopdf`, or
//! `lector`: lopdf with lector's clean-up) and
//! prints one JSON object: `{"pages": [text, ...], "error": null | message, "page_errors": n,
//! "secs": seconds}`. A panic exits with Rust's code 101; a hang is ended by the driver.

use std::time::Instant;

fn pdf_extract_pages(bytes: &[u8]) -> Result<(Vec<String>, usize), String> {
    use pdf_extract::{output_doc_page, PlainTextOutput};
    let mut doc = pdf_extract::Document::load_mem(bytes).map_err(|e| e.to_string())?;
    if doc.is_encrypted() {
        doc.decrypt("").map_err(|e| format!("encrypted: {e}"))?;
    }
    let pages: Vec<u32> = doc.get_pages().keys().copied().collect();
    let mut out = Vec::new();
    let mut errors = 0;
    for n in pages {
        let mut text = String::new();
        let result = {
            let mut dev = PlainTextOutput::new(&mut text);
            output_doc_page(&doc, &mut dev, n)
        };
        if result.is_err() {
            errors += 1;
        }
        out.push(text);
    }
    Ok((out, errors))
}

fn lopdf_pages(bytes: &[u8]) -> Result<(Vec<String>, usize), String> {
    let doc = lopdf::Document::load_mem(bytes).map_err(|e| e.to_string())?;
    let pages: Vec<u32> = doc.get_pages().keys().copied().collect();
    let mut out = Vec::new();
    let mut errors = 0;
    for n in pages {
        match doc.extract_text(&[n]) {
            Ok(text) => out.push(text),
            Err(_) => {
                errors += 1;
                out.push(String::new())
            }
        }
    }
    Ok((out, errors))
}

/// What lector adds to lopdf's text (crates/lector-ingest/src/pdf.rs): ligatures spelt out.
fn lector_pages(bytes: &[u8]) -> Result<(Vec<String>, usize), String> {
    let (pages, errors) = lopdf_pages(bytes)?;
    let pages = pages
        .into_iter()
        .map(|p| {
            p.replace('\u{fb00}', "ff")
                .replace('\u{fb01}', "fi")
                .replace('\u{fb02}', "fl")
                .replace('\u{fb03}', "ffi")
                .replace('\u{fb04}', "ffl")
                .replace(['\u{fb05}', '\u{fb06}'], "st")
        })
        .collect();
    Ok((pages, errors))
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (which, path) = (args[1].as_str(), &args[2]);
    let bytes = std::fs::read(path).expect("read the file");
    let start = Instant::now();
    let result = match which {
        "pdf-extract" => pdf_extract_pages(&bytes),
        "lopdf" => lopdf_pages(&bytes),
        "lector" => lector_pages(&bytes),
        other => panic!("unknown crate {other}"),
    };
    let secs = start.elapsed().as_secs_f64();
    let json = match result {
        Ok((pages, errors)) => serde_json::json!({"pages": pages, "error": null, "page_errors": errors, "secs": secs}),
        Err(e) => serde_json::json!({"pages": [], "error": e, "page_errors": 0, "secs": secs}),
    };
    println!("{json}");
}
