//! Multi-hop pieces a library user calls directly: the language-model decomposer over a real
//! OpenAI-compatible HTTP exchange on the loopback interface, and HotpotQA supporting facts
//! predicted from a real two-hop answer to a HotpotQA dev question (its ten paragraphs indexed,
//! read by the shipped reader).

use lector_eval::hotpot::{self, Question};
use lector_generate::{OpenAiConfig, OpenAiGenerator};
use lector_index::{Document, Index, IndexSettings, IndexWriter};
use lector_pipeline::multihop::{self, Decomposer, HopOptions, LlmDecomposer, RuleDecomposer};
use lector_pipeline::{AskOptions, Pipeline};
use lector_reader::Reader;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::sync::Arc;

/// An OpenAI-compatible endpoint that answers one chat completion with `reply`; returns its
/// base URL and the request body it will have received.
fn one_completion(reply: &'static str) -> (String, std::thread::JoinHandle<String>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    let served = std::thread::spawn(move || {
        let (mut stream, _) = listener.accept().unwrap();
        let mut reader = BufReader::new(stream.try_clone().unwrap());
        let mut length = 0;
        loop {
            let mut line = String::new();
            reader.read_line(&mut line).unwrap();
            if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                length = v.trim().parse().unwrap();
            }
            if line == "\r\n" || line.is_empty() {
                break;
            }
        }
        let mut body = vec![0; length];
        reader.read_exact(&mut body).unwrap();
        let out = serde_json::json!({
            "choices": [{"message": {"role": "assistant", "content": reply}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 60, "completion_tokens": 30}
        })
        .to_string();
        write!(
            stream,
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{out}",
            out.len()
        )
        .unwrap();
        String::from_utf8(body).unwrap()
    });
    (url, served)
}

#[test]
fn an_llm_splits_a_bridge_question_into_its_numbered_sub_questions() {
    // A chatty reply, as small instruction-tuned models write them.
    let (url, served) = one_completion(
        "Sure! Here are the questions:\n\n1. Which band released the debut album Tinted Windows?\n2) In what city did #1 have their first performance?\n\nI hope this helps.",
    );
    let generator = OpenAiGenerator::new(OpenAiConfig::new(&url, "scripted")).unwrap();
    let decomposer = LlmDecomposer::new(Arc::new(generator));
    let question =
        "The band who released the debut album \"Tinted Windows\" had their first performance in what city?";
    let subs = decomposer.decompose(question).unwrap();
    assert_eq!(
        subs,
        [
            "Which band released the debut album Tinted Windows?",
            "In what city did #1 have their first performance?"
        ]
    );
    assert!(
        decomposer.answers(),
        "the model's last sub-answer is the answer"
    );
    let sent: serde_json::Value = serde_json::from_str(&served.join().unwrap()).unwrap();
    let messages = sent["messages"].as_array().unwrap();
    assert!(messages[0]["content"].as_str().unwrap().contains("#1"));
    assert_eq!(messages[1]["content"], format!("Question: {question}"));
}

/// An index of `question`'s ten paragraphs in `dir`, one document each (id and title: the
/// paragraph's title; text: its sentences joined), as `lector eval hotpot` builds it.
fn index_paragraphs(question: &Question, dir: &Path) -> Index {
    let mut writer = IndexWriter::open_or_create(dir, IndexSettings::default()).unwrap();
    for p in &question.context {
        let mut doc = Document::new(p.title.clone(), p.text());
        doc.title = Some(p.title.clone());
        writer.add(doc);
    }
    writer.commit().unwrap();
    Index::open(dir).unwrap()
}

#[test]
fn supporting_facts_are_the_sentences_the_answer_rests_on() {
    let data = lector_eval::data::require("hotpotqa/hotpot_dev_distractor_sample1100.json");
    let question = hotpot::read_dataset(&data).unwrap().swap_remove(0);
    let dir = tempfile::tempdir().unwrap();
    let index = index_paragraphs(&question, dir.path());
    let reader = Reader::load(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("../../models/reader-minilm-squad"),
    )
    .unwrap();
    let pipeline = Pipeline::new(index, reader);
    let options = AskOptions::default();
    let response = pipeline
        .ask_hops_with(
            &question.question,
            &options,
            &HopOptions::default(),
            Some(&RuleDecomposer),
        )
        .unwrap();
    let trace = response.hops.as_ref().unwrap();
    assert!(!trace.support.is_empty(), "{trace:?}");

    let facts = multihop::supporting_facts(trace, &question, pipeline.index());
    let sentence = |title: &str, i: usize| -> Option<&str> {
        let paragraph = question.context.iter().find(|p| p.title == title)?;
        paragraph.sentences.get(i).map(String::as_str)
    };
    // Every fact is a sentence of one of the question's paragraphs, each named once.
    for (i, fact) in facts.iter().enumerate() {
        assert!(sentence(&fact.title, fact.sentence).is_some(), "{fact:?}");
        assert!(!facts[..i].contains(fact), "{facts:?}");
    }
    // Each supporting span lies in a predicted sentence of its paragraph.
    for support in &trace.support {
        let paragraph = question
            .context
            .iter()
            .find(|p| p.title == support.passage.doc_id)
            .unwrap();
        let document = pipeline.index().document(&paragraph.title).unwrap();
        let start = document.passages[support.passage.passage].char_start + support.start;
        let span: String = paragraph
            .text()
            .chars()
            .skip(start)
            .take(support.end - support.start)
            .collect();
        let held = facts
            .iter()
            .filter(|f| f.title == paragraph.title)
            .any(|f| {
                sentence(&f.title, f.sentence)
                    .unwrap()
                    .contains(span.trim())
            });
        assert!(
            held,
            "`{span}` of {} is in none of {facts:?}",
            paragraph.title
        );
    }
    // HotpotQA answers rest on two paragraphs: here the two gold ones.
    let mut titles: Vec<&str> = facts.iter().map(|f| f.title.as_str()).collect();
    titles.sort_unstable();
    titles.dedup();
    let mut gold = question.gold_titles();
    gold.sort_unstable();
    assert_eq!(titles, gold, "{facts:?}");
}
