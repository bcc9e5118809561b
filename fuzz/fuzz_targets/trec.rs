//! A TREC run and a qrels file (BEIR's TSV or TREC's four columns), the input split at its first
//! NUL byte. A parsed run must survive writing and parsing again unchanged, and evaluating it
//! against the qrels must give finite metrics, the ratios within [0, 1].
#![no_main]
use lector_eval::retrieval::{evaluate, parse_qrels, parse_run, Run, DEFAULT_KS};
use std::path::Path;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let (run_bytes, qrels_bytes) = match data.iter().position(|&b| b == 0) {
        Some(at) => (&data[..at], &data[at + 1..]),
        None => (data, &[][..]),
    };
    let run = std::str::from_utf8(run_bytes)
        .ok()
        .and_then(|text| parse_run(Path::new("run"), text).ok());
    let qrels = std::str::from_utf8(qrels_bytes)
        .ok()
        .and_then(|text| parse_qrels(Path::new("qrels"), text).ok());
    if let Some(run) = &run {
        assert_round_trip(run);
    }
    if let (Some(run), Some(qrels)) = (run, qrels) {
        for query in evaluate(&run, &qrels, &DEFAULT_KS).queries {
            for (name, value) in query.values {
                assert!(value.is_finite(), "{name} = {value} for {}", query.qid);
                let ratio = !name.starts_with("ndcg");
                assert!(!ratio || (0.0..=1.0).contains(&value), "{name} = {value}");
            }
        }
    }
});

fn assert_round_trip(run: &Run) {
    let mut written = Vec::new();
    run.write_trec("fuzz", &mut written)
        .expect("write to memory");
    let text = String::from_utf8(written).expect("a run writes UTF-8");
    let again = parse_run(Path::new("written"), &text).expect("a written run parses");
    assert_eq!(
        &again, run,
        "the run changed through write and parse:\n{text}"
    );
}
