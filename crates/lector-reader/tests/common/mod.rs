//! Shared helpers: the shipped reader and the SQuAD dev sets.
#![allow(dead_code)]

use lector_reader::Reader;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The reference reader, loaded once per test binary.
pub fn reader() -> &'static Reader {
    static READER: OnceLock<Reader> = OnceLock::new();
    READER.get_or_init(|| {
        Reader::load(&workspace().join("models/reader-minilm-squad")).expect("reader loads")
    })
}

pub fn squad_path(name: &str) -> PathBuf {
    lector_eval::data::require(&format!("squad/{name}"))
}

/// (id, question, context) of the first `n` questions of a SQuAD file, in file order.
pub fn squad_questions(name: &str, n: usize) -> Vec<(String, String, String)> {
    let text = std::fs::read_to_string(squad_path(name)).expect("SQuAD file");
    let json: Value = serde_json::from_str(&text).unwrap();
    let mut out = Vec::new();
    for article in json["data"].as_array().unwrap() {
        for paragraph in article["paragraphs"].as_array().unwrap() {
            let context = paragraph["context"].as_str().unwrap();
            for qa in paragraph["qas"].as_array().unwrap() {
                if out.len() == n {
                    return out;
                }
                let (id, q) = (qa["id"].as_str().unwrap(), qa["question"].as_str().unwrap());
                out.push((id.to_string(), q.to_string(), context.to_string()));
            }
        }
    }
    out
}

/// The paragraphs of the first article of a SQuAD file.
pub fn first_article(name: &str) -> Vec<String> {
    let text = std::fs::read_to_string(squad_path(name)).expect("SQuAD file");
    let json: Value = serde_json::from_str(&text).unwrap();
    json["data"][0]["paragraphs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["context"].as_str().unwrap().to_string())
        .collect()
}
