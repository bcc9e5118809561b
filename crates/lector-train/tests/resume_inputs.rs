//! `--resume` continues a run only on the data it started with: a training file, or an index
//! whose hard negatives, changed since the run started is refused with an error naming it, while
//! unchanged inputs resume.

use lector_index::{Document, IndexSettings, IndexWriter};
use lector_train::{train_reader, Negatives, ReaderRun, Schedule, TrainFile, WindowParams};
use serde_json::json;
use std::path::{Path, PathBuf};

fn tiny_bert() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../lector-models/tests/fixtures/tiny-bert")
}

const QUESTIONS: [(&str, &str, &str); 3] = [
    (
        "Anna wrote the book in 1901.",
        "Who wrote the book?",
        "Anna",
    ),
    (
        "The city of Bonn lies on the Rhine.",
        "Which river flows through Bonn?",
        "the Rhine",
    ),
    (
        "The library opened in 1883.",
        "When did the library open?",
        "1883",
    ),
];

fn write_squad(path: &Path, questions: &[(&str, &str, &str)]) {
    let paragraphs: Vec<_> = questions
        .iter()
        .enumerate()
        .map(|(i, (context, question, answer))| {
            let start = context
                .find(answer)
                .expect("the answer is in its paragraph");
            json!({"context": context, "qas": [{"id": format!("q{i}"), "question": question,
                "answers": [{"text": answer, "answer_start": start}]}]})
        })
        .collect();
    let data = json!({"version": "1.1", "data": [{"title": "t", "paragraphs": paragraphs}]});
    std::fs::write(path, data.to_string()).unwrap();
}

/// An index of passages that BM25 ranks high for the questions without holding their answers.
fn add_passages(index: &Path, passages: &[(&str, &str)]) {
    let mut writer = IndexWriter::open_or_create(index, IndexSettings::default()).unwrap();
    for (id, text) in passages {
        writer.add(Document::new(*id, *text));
    }
    writer.commit().unwrap();
}

/// A one-step run: enough to leave a checkpoint to resume from.
fn short_run(train: &Path, negatives: Option<Negatives>) -> ReaderRun {
    let mut run = ReaderRun::new(
        tiny_bert(),
        vec![TrainFile::parse(train.to_str().unwrap()).unwrap()],
    );
    run.windows = WindowParams {
        max_seq_len: 48,
        doc_stride: 16,
        max_question_len: 16,
    };
    run.negatives = negatives;
    run.schedule = Schedule {
        epochs: 1,
        batch_size: 4,
        max_steps: Some(1),
        save_every: 1,
        ..Schedule::default()
    };
    run
}

#[test]
fn a_changed_training_file_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let train = dir.path().join("train.json");
    write_squad(&train, &QUESTIONS);
    let run = short_run(&train, None);
    let out = dir.path().join("run");
    train_reader(&run, &out, false, &mut |_| {}).unwrap();
    train_reader(&run, &out, true, &mut |_| {}).expect("unchanged inputs resume");

    let mut edited = QUESTIONS;
    edited[1].1 = "Which river is at Bonn?";
    write_squad(&train, &edited);
    let err = train_reader(&run, &out, true, &mut |_| {})
        .unwrap_err()
        .to_string();
    assert!(
        err.contains(train.to_str().unwrap()) && err.contains("changed since the run"),
        "{err}"
    );
}

#[test]
fn changed_negatives_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let train = dir.path().join("train.json");
    write_squad(&train, &QUESTIONS);
    let index = dir.path().join("index");
    add_passages(
        &index,
        &[
            ("a", "Paris lies on the Seine, a river in France."),
            ("b", "The museum opened in the old town."),
        ],
    );
    let negatives = Negatives {
        index: index.clone(),
        per_question: 2,
        depth: 10,
    };
    let run = short_run(&train, Some(negatives));
    let out = dir.path().join("run");
    train_reader(&run, &out, false, &mut |_| {}).unwrap();
    train_reader(&run, &out, true, &mut |_| {}).expect("unchanged inputs resume");

    // A passage that becomes a hard negative of the first question.
    add_passages(&index, &[("c", "Many people wrote a book about the war.")]);
    let err = train_reader(&run, &out, true, &mut |_| {})
        .unwrap_err()
        .to_string();
    assert!(
        err.contains(index.to_str().unwrap()) && err.contains("hard negatives"),
        "{err}"
    );
}
