//! bfloat16 and int8 reading with float32 re-reads of near-ties (its own test binary, one test:
//! the precision is process-wide).
mod common;

use common::{squad_questions, workspace};
use lector_models::{set_precision, Precision};
use lector_reader::{Prediction, Query, ReadParams, Reader};

fn read(reader: &Reader, questions: &[(String, String, String)], margin: f64) -> Vec<Prediction> {
    let queries: Vec<Query> = questions
        .iter()
        .map(|(_, question, context)| Query { question, context })
        .collect();
    let params = ReadParams {
        top_k: 2,
        recheck_margin: margin,
        ..ReadParams::default()
    };
    reader.answer_batch(&queries, &params, &mut |_| {}).unwrap()
}

/// (answer, score) of every returned answer.
fn scored(predictions: &[Prediction]) -> Vec<Vec<(String, f64)>> {
    predictions
        .iter()
        .map(|p| {
            p.answers
                .iter()
                .map(|a| (a.answer.clone(), a.score))
                .collect()
        })
        .collect()
}

#[test]
fn bf16_and_int8_reread_near_ties_in_float32() {
    let dir = workspace().join("models/reader-minilm-squad");
    let questions = squad_questions("dev-v1.1.json", 40);
    let float32 = read(&Reader::load(&dir).unwrap(), &questions, 0.0);
    for precision in [Precision::Bf16, Precision::Int8] {
        rereads_near_ties(precision, &dir, &questions, &float32);
    }
}

fn rereads_near_ties(
    precision: Precision,
    dir: &std::path::Path,
    questions: &[(String, String, String)],
    float32: &[Prediction],
) {
    set_precision(precision);
    if lector_models::active_precision() != precision {
        eprintln!("this CPU lacks the instructions of {precision:?}: it falls back to float32");
        let fallback = read(&Reader::load(dir).unwrap(), questions, 0.0);
        assert_eq!(scored(&fallback), scored(float32));
        return;
    }
    let reader = Reader::load(dir).unwrap();
    let never = read(&reader, questions, 0.0);
    let always = read(&reader, questions, f64::INFINITY);
    let default = read(&reader, questions, ReadParams::default().recheck_margin);

    // Rounding shows in the scores of plain bf16 or int8 ...
    assert_ne!(scored(&never), scored(float32));
    // ... and re-reading every question gives float32's numbers exactly.
    assert_eq!(scored(&always), scored(float32));
    // With the default margin, every question whose two answers are near-tied in bf16 was
    // re-read: its scores are float32's.
    let mut near_ties = 0;
    for ((reduced, checked), exact) in never.iter().zip(&default).zip(float32) {
        let [first, second, ..] = reduced.answers.as_slice() else {
            continue;
        };
        if (first.score / second.score).ln() < ReadParams::default().recheck_margin {
            assert_eq!(
                scored(std::slice::from_ref(checked)),
                scored(std::slice::from_ref(exact))
            );
            near_ties += 1;
        }
    }
    assert!(
        near_ties > 0,
        "{precision:?}: no near-tie among the questions: the check above checked nothing"
    );
}
