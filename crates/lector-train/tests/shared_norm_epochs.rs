//! With `--shared-norm` a question's windows stay in one batch, so each epoch packs units of
//! different sizes in its own order and may hold another number of batches than the first. Every
//! epoch must still train on every window exactly once, without empty optimiser steps, and the
//! learning-rate schedule must end at the run's real last step.

use lector_train::{train_reader, ReaderRun, Schedule, StepLog, TrainFile, WindowParams};
use serde_json::json;
use std::path::{Path, PathBuf};

fn tiny_bert() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../lector-models/tests/fixtures/tiny-bert")
}

/// Paragraphs from one sentence to several, so that at small windows a question spans one to
/// four windows (units of different sizes).
const PARAGRAPHS: [(&str, &str, &str); 10] = [
    (
        "Anna wrote the book in 1901.",
        "Who wrote the book?",
        "Anna",
    ),
    (
        "The city of Bonn lies on the Rhine.",
        "Where is Bonn?",
        "on the Rhine",
    ),
    (
        "The library opened in 1883. It was built by the city council after a long debate about \
         its cost, and for many years it held the largest collection of maps in the region, \
         drawn by sailors and merchants who travelled along the coast.",
        "When did the library open?",
        "1883",
    ),
    (
        "Denver won the game. The team had lost the first half badly, but the defense held the \
         other side to a single field goal after the break, and the crowd in the stadium stayed \
         on its feet until the final whistle. The coach later said the players had never \
         doubted the result, even when the score looked hopeless, and the city held a parade \
         for them on the following Sunday.",
        "Who won the game?",
        "Denver",
    ),
    (
        "There were twelve students in the hall.",
        "How many students were there?",
        "twelve",
    ),
    (
        "He gave money for a new hall. The old building had been damaged by a fire in the \
         winter, and the school needed space for its growing number of students, its music \
         classes and the public lectures it offered every month to the people of the town.",
        "What did he give?",
        "money",
    ),
    (
        "The sky is blue on a clear day.",
        "What color is the sky?",
        "blue",
    ),
    (
        "The museum is near the old church. Visitors often walk from the station through the \
         market square, past the town hall and the river bridge, and many of them stop at the \
         church before they reach the museum, whose collection of paintings covers four \
         centuries of art from the northern provinces and attracts scholars from abroad.",
        "Where is the museum?",
        "near the old church",
    ),
    (
        "The river floods every spring.",
        "When does the river flood?",
        "every spring",
    ),
    (
        "The bridge was finished in 1932. Engineers from three countries worked on its design, \
         and the steel came from mills in the north, carried by train and then by boat to the \
         site, where hundreds of workers assembled the arches over four years of hard labour.",
        "When was the bridge finished?",
        "1932",
    ),
];

fn write_squad(dir: &Path) -> PathBuf {
    let paragraphs: Vec<_> = PARAGRAPHS
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
    let path = dir.join("train.json");
    let data = json!({"version": "1.1", "data": [{"title": "t", "paragraphs": paragraphs}]});
    std::fs::write(&path, data.to_string()).unwrap();
    path
}

fn read_log(out: &Path) -> Vec<StepLog> {
    std::fs::read_to_string(out.join("train-log.jsonl"))
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

#[test]
fn every_epoch_trains_on_every_window_once() {
    let dir = tempfile::tempdir().unwrap();
    let train = write_squad(dir.path());
    let mut run = ReaderRun::new(
        tiny_bert(),
        vec![TrainFile::parse(train.to_str().unwrap()).unwrap()],
    );
    run.shared_norm = true;
    run.windows = WindowParams {
        max_seq_len: 32,
        doc_stride: 8,
        max_question_len: 12,
    };
    run.schedule = Schedule {
        epochs: 2,
        batch_size: 5,
        save_every: 0,
        seed: 3,
        ..Schedule::default()
    };
    let out = dir.path().join("run");
    let outcome = train_reader(&run, &out, false, &mut |_| {}).unwrap();
    assert!(
        outcome.windows > PARAGRAPHS.len() + 3,
        "several questions should span several windows: {} windows",
        outcome.windows
    );

    let log = read_log(&out);
    assert_eq!(log.len(), outcome.steps);
    for epoch in 0..2 {
        let steps: Vec<&StepLog> = log.iter().filter(|l| l.epoch == epoch).collect();
        assert!(
            steps.iter().all(|l| l.windows > 0),
            "epoch {epoch} has an empty step (AdamW would move the weights on no data)"
        );
        let trained: usize = steps.iter().map(|l| l.windows).sum();
        assert_eq!(
            trained, outcome.windows,
            "epoch {epoch} should train on every window once"
        );
    }
    let per_epoch = |e: usize| log.iter().filter(|l| l.epoch == e).count();
    assert_ne!(
        per_epoch(0),
        per_epoch(1),
        "the data should make the two epochs pack into different numbers of batches"
    );
    // Linear decay reaches 0 one step after the last: the schedule counts the real steps.
    let warmup = (run.schedule.warmup_ratio * log.len() as f64).round() as usize;
    let last_lr = run.schedule.lr / (log.len() - warmup) as f64;
    let logged = log.last().unwrap().lr;
    assert!(
        (logged - last_lr).abs() < 1e-9 * run.schedule.lr.max(1.0),
        "last step's lr {logged}, expected {last_lr}"
    );
}
