//! The whole reader on the tiny random checkpoints of every architecture: the windows, p_mask and
//! answers (top 1, top 3, with impossible answers) that the pipeline produced at max_seq_len 64,
//! doc_stride 16 (expected.json from tools/make_tiny_checkpoints.py).
mod common;

use lector_reader::window::{build_window, special_tokens_for_pair, Layout};
use lector_reader::{Answer, ReadParams, Reader};
use serde_json::Value;

fn fixture(name: &str) -> (Reader, Value) {
    let dir = common::workspace()
        .join("crates/lector-models/tests/fixtures")
        .join(name);
    let reader = Reader::load(&dir).unwrap_or_else(|e| panic!("{name}: {e}"));
    let text = std::fs::read_to_string(dir.join("expected.json")).unwrap();
    (reader, serde_json::from_str(&text).unwrap())
}

fn params(top_k: usize, handle_impossible_answer: bool) -> ReadParams {
    ReadParams {
        max_seq_len: 64,
        doc_stride: 16,
        top_k,
        handle_impossible_answer,
        ..ReadParams::default()
    }
}

fn assert_same(name: &str, got: &Answer, want: &Value) {
    assert_eq!(got.answer, want["answer"].as_str().unwrap(), "{name}");
    assert_eq!(got.start as u64, want["start"].as_u64().unwrap(), "{name}");
    assert_eq!(got.end as u64, want["end"].as_u64().unwrap(), "{name}");
    let score = want["score"].as_f64().unwrap();
    assert!(
        (got.score - score).abs() <= 1e-5 + 1e-3 * score,
        "{name}: score {} vs {score}",
        got.score
    );
}

fn check_windows(name: &str, reader: &Reader, case: &Value) {
    let ckpt = reader.checkpoint();
    let tok = &ckpt.tokenizer;
    let q = tok
        .encode(case["question"].as_str().unwrap(), false)
        .unwrap();
    let c = tok
        .encode(case["context"].as_str().unwrap(), false)
        .unwrap();
    let layout = Layout::new(64, 16, q.len(), special_tokens_for_pair(tok)).unwrap();
    let ranges = layout.ranges(c.len()).unwrap();
    let want = case["windows"].as_array().unwrap();
    assert_eq!(ranges.len(), want.len(), "{name}: window count");
    for (range, w) in ranges.into_iter().zip(want) {
        let got = build_window(tok, &q, &c, range, ckpt.cls_token_id).unwrap();
        let ids: Vec<u64> = got.ids.iter().map(|&i| u64::from(i)).collect();
        assert_eq!(serde_json::json!(ids), w["input_ids"], "{name}: input ids");
        let p_mask: Vec<u64> = got.desired.iter().map(|&d| u64::from(!d)).collect();
        assert_eq!(serde_json::json!(p_mask), w["p_mask"], "{name}: p_mask");
    }
}

fn check(name: &str) {
    let (reader, expected) = fixture(name);
    for case in expected["cases"].as_array().unwrap() {
        let label = format!("{name}/{}", case["name"].as_str().unwrap());
        check_windows(&label, &reader, case);
        let (q, c) = (
            case["question"].as_str().unwrap(),
            case["context"].as_str().unwrap(),
        );
        let top1 = reader.answer(q, c, &params(1, false)).unwrap();
        assert_same(&label, &top1.answers[0], &case["pipeline"]);
        let top3 = reader.answer(q, c, &params(3, false)).unwrap();
        for (got, want) in top3
            .answers
            .iter()
            .zip(case["pipeline_top3"].as_array().unwrap())
        {
            assert_same(&format!("{label} top3"), got, want);
        }
        let imp = reader.answer(q, c, &params(1, true)).unwrap();
        assert_same(
            &format!("{label} impossible"),
            &imp.answers[0],
            &case["pipeline_impossible"],
        );
        if let Some(null) = case["pipeline_impossible"]["null_score"].as_f64() {
            assert!(
                (imp.null_score - null).abs() <= 1e-5 + 1e-3 * null,
                "{label}: null {} vs {null}",
                imp.null_score
            );
        }
    }
}

#[test]
fn tiny_bert_answers() {
    check("tiny-bert");
}

#[test]
fn tiny_bert_f16_answers() {
    check("tiny-bert-f16");
}

#[test]
fn tiny_bert_pth_answers() {
    check("tiny-bert-pth");
}

#[test]
fn tiny_distilbert_answers() {
    check("tiny-distilbert");
}

#[test]
fn tiny_roberta_answers() {
    check("tiny-roberta");
}

#[test]
fn tiny_xlm_roberta_answers() {
    check("tiny-xlm-roberta");
}
