//! Parity of `lector_eval::retrieval` with trec_eval as exposed by pytrec-eval-terrier 0.5.11
//! (`tools/trec_reference.py`), on the real BEIR SciFact qrels and synthetic runs; unit tests of
//! answer-containment recall; parser robustness.

mod support;

use lector_eval::retrieval::{
    answer_recall, contains_answer, evaluate, parse_qrels, parse_run, read_answer_items,
    read_qrels, read_run, AnswerItem, Passage, Qrels, Run, DEFAULT_KS,
};
use proptest::prelude::*;
use serde_json::Value;
use std::collections::BTreeSet;
use std::ffi::OsStr;
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};

const TOLERANCE: f64 = 1e-6;

/// splitmix64: a small deterministic PRNG.
struct Rng(u64);

impl Rng {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    fn percent(&mut self, p: usize) -> bool {
        self.below(100) < p
    }
}

fn tmp_dir() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("retrieval_parity");
    std::fs::create_dir_all(&dir).expect("create temp dir");
    dir
}

fn scifact() -> PathBuf {
    support::shared_data().join("beir/scifact")
}

fn corpus_ids() -> Vec<String> {
    let file = std::fs::File::open(scifact().join("corpus.jsonl")).expect("open corpus");
    std::io::BufReader::new(file)
        .lines()
        .map(|line| {
            let value: Value = serde_json::from_str(&line.expect("read corpus")).expect("json");
            value["_id"].as_str().expect("_id").to_string()
        })
        .collect()
}

/// Graded qrels derived from SciFact: some relevant documents promoted to 2, extra judged
/// non-relevant (0), relevant (1, 2) and unjudged-in-pool (-1) documents, and queries whose
/// judgements are all 0. Written as a TREC 4-column file.
fn graded_qrels(base: &Qrels, corpus: &[String], rng: &mut Rng) -> Qrels {
    let mut qrels = Qrels::new();
    for qid in base.qids() {
        for (docid, &rel) in base.get(qid).unwrap() {
            let rel = if rel >= 1 && rng.percent(35) { 2 } else { rel };
            qrels.insert(qid, docid, rel);
        }
        for _ in 0..rng.below(6) {
            let docid = &corpus[rng.below(corpus.len())];
            let rel = [0, 0, 0, 1, 2, -1][rng.below(6)];
            if base.get(qid).unwrap().contains_key(docid) {
                continue;
            }
            qrels.insert(qid, docid, rel);
        }
    }
    for n in 0..8 {
        for _ in 0..1 + rng.below(4) {
            qrels.insert(format!("zero-{n}"), &corpus[rng.below(corpus.len())], 0);
        }
    }
    qrels
}

fn write_trec_qrels(qrels: &Qrels, path: &Path) {
    let mut out = std::fs::File::create(path).expect("create qrels");
    for qid in qrels.qids() {
        for (docid, rel) in qrels.get(qid).unwrap() {
            writeln!(out, "{qid} 0 {docid} {rel}").expect("write qrels");
        }
    }
}

/// A synthetic run over the queries of `qrels` (some left out) plus unjudged queries, with
/// score ties, short rankings and relevant documents at varied ranks.
fn synthetic_run(qrels: &Qrels, corpus: &[String], rng: &mut Rng) -> Run {
    let mut rankings: Vec<(String, Vec<(String, f64)>)> = Vec::new();
    let mut qids: Vec<String> = qrels.qids().map(str::to_string).collect();
    qids.extend((0..12).map(|n| format!("unjudged-{n}")));
    qids.push("999999".into());
    for qid in qids {
        if rng.percent(8) {
            continue; // judged query missing from the run
        }
        let len = match rng.below(10) {
            0 => 1 + rng.below(5),
            1..=3 => 6 + rng.below(25),
            _ => 90 + rng.below(160),
        };
        let mode = rng.below(4);
        let score = |rng: &mut Rng| -> f64 {
            match mode {
                0 => rng.below(8) as f64,
                1 => rng.unit() * 10.0 - 5.0,
                2 => 1.0,
                _ => rng.below(12) as f64 * 0.5 - 2.0,
            }
        };
        let mut docs: BTreeSet<String> = BTreeSet::new();
        let mut ranking = Vec::new();
        if let Some(judged) = qrels.get(&qid) {
            for docid in judged.keys() {
                if rng.percent(70) && docs.insert(docid.clone()) {
                    let s = if rng.percent(40) { 8.0 } else { score(rng) };
                    ranking.push((docid.clone(), s));
                }
            }
        }
        for fake in ["A-upper", "zz-fake", "a-lower", "10"] {
            if rng.percent(10) && docs.insert(fake.to_string()) {
                ranking.push((fake.to_string(), score(rng)));
            }
        }
        while ranking.len() < len {
            let docid = &corpus[rng.below(corpus.len())];
            if docs.insert(docid.clone()) {
                ranking.push((docid.clone(), score(rng)));
            }
        }
        rankings.push((qid, ranking));
    }
    Run::from_rankings(rankings)
}

struct Comparison {
    queries: usize,
    values: usize,
    max_diff: f64,
}

/// Writes `run`, reads it back, evaluates it in Rust and with pytrec_eval, and compares.
fn compare(name: &str, run: &Run, qrels_path: &Path, ks: &[usize]) -> Comparison {
    let run_path = tmp_dir().join(format!("{name}.run"));
    let mut file = std::fs::File::create(&run_path).expect("create run");
    run.write_trec("synthetic", &mut file).expect("write run");
    drop(file);
    let read_back = read_run(&run_path).expect("read run");
    assert_eq!(&read_back, run, "{name}: run file round trip");
    let qrels = read_qrels(qrels_path).expect("read qrels");

    let ours = evaluate(&read_back, &qrels, ks);
    let ks_text = ks
        .iter()
        .map(usize::to_string)
        .collect::<Vec<_>>()
        .join(",");
    let script = support::repo_root().join("tools/trec_reference.py");
    let out = support::run_python(
        &script,
        &[
            qrels_path.as_os_str(),
            run_path.as_os_str(),
            OsStr::new("--ks"),
            OsStr::new(&ks_text),
        ],
    );
    let reference: Value = serde_json::from_str(&out).expect("reference json");

    let ref_queries = reference["queries"].as_object().expect("queries");
    let our_qids: Vec<&str> = ours.queries.iter().map(|q| q.qid.as_str()).collect();
    let ref_qids: BTreeSet<&str> = ref_queries.keys().map(String::as_str).collect();
    assert_eq!(
        our_qids.iter().copied().collect::<BTreeSet<_>>(),
        ref_qids,
        "{name}: evaluated queries"
    );
    let strings = |v: &Value| -> Vec<String> {
        v.as_array()
            .expect("array")
            .iter()
            .map(|s| s.as_str().expect("string").to_string())
            .collect()
    };
    assert_eq!(
        ours.run_qids_without_qrels,
        strings(&reference["run_qids_without_qrels"]),
        "{name}"
    );
    assert_eq!(
        ours.qrels_qids_without_run,
        strings(&reference["qrels_qids_without_run"]),
        "{name}"
    );
    assert!(!ours.run_qids_without_qrels.is_empty() && !ours.qrels_qids_without_run.is_empty());

    let mut max_diff = 0.0f64;
    let mut values = 0;
    for query in &ours.queries {
        let expected = ref_queries[&query.qid].as_object().expect("query object");
        assert_eq!(
            query.values.keys().collect::<BTreeSet<_>>(),
            expected.keys().collect::<BTreeSet<_>>(),
            "{name}: metric names"
        );
        for (metric, &value) in &query.values {
            let want = expected[metric].as_f64().expect("number");
            let diff = (value - want).abs();
            assert!(
                diff <= TOLERANCE,
                "{name}: query {} {metric}: ours {value}, pytrec_eval {want}",
                query.qid
            );
            max_diff = max_diff.max(diff);
            values += 1;
        }
    }
    let means = ours.means();
    let ref_means = reference["means"].as_object().expect("means");
    assert_eq!(means.len(), ref_means.len(), "{name}: means");
    for (metric, &value) in &means {
        let want = ref_means[metric].as_f64().expect("number");
        let diff = (value - want).abs();
        assert!(
            diff <= TOLERANCE,
            "{name}: mean {metric}: ours {value}, pytrec_eval {want}"
        );
        max_diff = max_diff.max(diff);
    }
    eprintln!(
        "{name}: {} queries, {values} per-query values, {} means, max |diff| {max_diff:e}",
        ours.queries.len(),
        means.len()
    );
    Comparison {
        queries: ours.queries.len(),
        values,
        max_diff,
    }
}

/// Checks that the synthetic run exercises what the parity test is about.
fn assert_interesting(run: &Run, qrels: &Qrels) {
    let mut tied_relevant = 0;
    let mut short = 0;
    let mut deep_first_hit = 0;
    for qid in run.qids() {
        let ranking = run.ranking(qid).unwrap();
        if ranking.len() < 20 {
            short += 1;
        }
        let Some(judged) = qrels.get(qid) else {
            continue;
        };
        let relevant = |d: &str| judged.get(d).is_some_and(|&r| r >= 1);
        for pair in ranking.windows(2) {
            if pair[0].1 == pair[1].1 && (relevant(&pair[0].0) || relevant(&pair[1].0)) {
                tied_relevant += 1;
            }
        }
        if ranking
            .iter()
            .position(|(d, _)| relevant(d))
            .is_some_and(|i| i >= 10)
        {
            deep_first_hit += 1;
        }
    }
    assert!(
        tied_relevant > 50,
        "ties next to relevant docs: {tied_relevant}"
    );
    assert!(short > 20, "short rankings: {short}");
    assert!(
        deep_first_hit > 5,
        "first relevant below rank 10: {deep_first_hit}"
    );
}

#[test]
fn matches_pytrec_eval_on_scifact() {
    let corpus = corpus_ids();
    let scifact_path = scifact().join("qrels/test.tsv");
    let scifact_qrels = read_qrels(&scifact_path).expect("read scifact qrels");
    assert_eq!(scifact_qrels.len(), 300);

    let mut rng = Rng(0x1ec7_0e7a);
    let graded = graded_qrels(&scifact_qrels, &corpus, &mut rng);
    let graded_path = tmp_dir().join("graded.qrels");
    write_trec_qrels(&graded, &graded_path);
    assert_eq!(read_qrels(&graded_path).expect("read graded"), graded);

    let run_a = synthetic_run(&scifact_qrels, &corpus, &mut rng);
    let run_b = synthetic_run(&graded, &corpus, &mut rng);
    assert_interesting(&run_a, &scifact_qrels);
    assert_interesting(&run_b, &graded);

    let results = [
        compare("a-scifact", &run_a, &scifact_path, &DEFAULT_KS),
        compare("b-graded", &run_b, &graded_path, &DEFAULT_KS),
        compare("a-graded", &run_a, &graded_path, &[2, 7, 15, 50, 1000]),
        compare("b-scifact", &run_b, &scifact_path, &[1, 10, 1000]),
    ];
    let queries: usize = results.iter().map(|c| c.queries).sum();
    let values: usize = results.iter().map(|c| c.values).sum();
    let max_diff = results.iter().map(|c| c.max_diff).fold(0.0, f64::max);
    eprintln!("total: {queries} query evaluations, {values} values, max |diff| {max_diff:e}");
    assert!(queries > 1000);
}

#[test]
fn empty_ranking_is_evaluated_as_zero() {
    let mut qrels = Qrels::new();
    qrels.insert("q", "d", 1);
    let run = Run::from_rankings([("q", Vec::<(String, f64)>::new())]);
    let eval = evaluate(&run, &qrels, &DEFAULT_KS);
    assert_eq!(eval.num_evaluated(), 1);
    assert!(eval.means().values().all(|&v| v == 0.0));
}

fn item(qid: &str, answers: &[&str], passages: &[&str]) -> AnswerItem {
    AnswerItem {
        qid: qid.into(),
        answers: answers.iter().map(|a| a.to_string()).collect(),
        passages: passages
            .iter()
            .enumerate()
            .map(|(i, text)| Passage {
                id: format!("{qid}-{i}"),
                text: text.to_string(),
            })
            .collect(),
    }
}

fn answers(list: &[&str]) -> Vec<String> {
    list.iter().map(|a| a.to_string()).collect()
}

#[test]
fn answer_containment_respects_token_boundaries() {
    assert!(!contains_answer(
        &answers(&["1990"]),
        "It opened in 19901 or so."
    ));
    assert!(!contains_answer(&answers(&["1990"]), "It opened in 11990."));
    assert!(contains_answer(&answers(&["1990"]), "It opened in 1990."));
    assert!(contains_answer(&answers(&["1990"]), "(1990)"));
    assert!(contains_answer(
        &answers(&["The Beatles"]),
        "Beatles, a band"
    ));
    assert!(contains_answer(
        &answers(&["the beatles!"]),
        "an album by THE BEATLES"
    ));
    assert!(contains_answer(
        &answers(&["New York City"]),
        "born in new york city."
    ));
    assert!(!contains_answer(
        &answers(&["New York City"]),
        "a new yorker city"
    ));
    assert!(contains_answer(&answers(&["York City"]), "new york, city"));
    assert!(!contains_answer(&answers(&["York City"]), "new yorkcity"));
    // Punctuation is deleted, not replaced by a space (SQuAD normalisation).
    assert!(contains_answer(&answers(&["U.S."]), "the us army"));
    assert!(!contains_answer(&answers(&["new york"]), "new-york"));
    // Answers that normalise to nothing are ignored.
    assert!(!contains_answer(&answers(&["the", "..."]), "the ... a"));
    assert!(!contains_answer(&answers(&[""]), ""));
    assert!(contains_answer(&answers(&["", "Paris"]), "paris"));
}

#[test]
fn answer_recall_curve_and_mrr() {
    let items = [
        item("a", &["1990"], &["in 19901", "in 1990", "1990 again"]),
        item("b", &["Paris"], &["paris, france"]),
        item("c", &["x y"], &["x", "y", "z", "x z y", "w x y"]),
        item("d", &["nothing"], &["no", "hit", "here"]),
        item("e", &["the"], &["the"]),
        item("f", &["late"], &[]),
    ];
    let result = answer_recall(&items, 4);
    let ranks: Vec<Option<usize>> = result.queries.iter().map(|q| q.first_hit).collect();
    assert_eq!(ranks, [Some(2), Some(1), Some(5), None, None, None]);
    assert_eq!(result.recall, [1.0 / 6.0, 2.0 / 6.0, 2.0 / 6.0, 2.0 / 6.0]);
    assert_eq!(result.recall_at(0), None);
    assert_eq!(result.recall_at(2), Some(2.0 / 6.0));
    assert_eq!(result.recall_at(5), None);
    assert!((result.mrr - (0.5 + 1.0 + 0.2) / 6.0).abs() < 1e-12);
    assert!(result.queries[2].hit_at(5) && !result.queries[2].hit_at(4));
    assert_eq!(result.queries[5].num_passages, 0);

    let full = answer_recall(&items, 100);
    assert_eq!(full.recall.len(), 100);
    assert_eq!(full.recall_at(5), Some(0.5));
    assert_eq!(full.recall_at(100), Some(0.5));

    let empty = answer_recall(&[], 3);
    assert_eq!(empty.recall, [0.0, 0.0, 0.0]);
    assert_eq!(empty.mrr, 0.0);
}

#[test]
fn answer_items_from_jsonl() {
    let path = tmp_dir().join("answers.jsonl");
    std::fs::write(
        &path,
        concat!(
            r#"{"qid": 7, "answers": ["Paris"], "passages": [{"id": 12, "text": "Paris."}], "extra": 1}"#,
            "\n\n",
            r#"{"qid": "q8", "answers": [], "passages": [{"id": "p", "text": "t"}]}"#,
            "\n"
        ),
    )
    .unwrap();
    let items = read_answer_items(&path).expect("read items");
    assert_eq!(items[0].qid, "7");
    assert_eq!(items[0].passages[0].id, "12");
    assert_eq!(items[1].qid, "q8");
    assert_eq!(answer_recall(&items, 1).recall, [0.5]);

    std::fs::write(
        &path,
        "{\"qid\": \"a\", \"answers\": [], \"passages\": []}\n{\"qid\": 1.5}\n",
    )
    .unwrap();
    let err = read_answer_items(&path).unwrap_err().to_string();
    assert!(err.contains("answers.jsonl:2:"), "{err}");
}

fn line_soup() -> impl Strategy<Value = String> {
    let token = prop::sample::select(vec![
        "q1", "Q0", "d", "1", "0", "-1", "2.5", "nan", "inf", "1e999", "x", "\t", " ", "\n",
        "\r\n", "é", "query-id", "ü\t", "\0",
    ]);
    prop::collection::vec(token, 0..60).prop_map(|t| t.concat())
}

proptest! {
    #![proptest_config(ProptestConfig { failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn parsers_never_panic_on_bytes(bytes in prop::collection::vec(any::<u8>(), 0..400)) {
        let text = String::from_utf8_lossy(&bytes);
        let path = Path::new("fuzz");
        let _ = parse_run(path, &text);
        let _ = parse_qrels(path, &text);
    }

    #[test]
    fn parsers_never_panic_on_near_valid_lines(text in line_soup()) {
        let path = Path::new("fuzz");
        if let Ok(run) = parse_run(path, &text) {
            let mut out = Vec::new();
            run.write_trec("t", &mut out).unwrap();
            prop_assert_eq!(parse_run(path, &String::from_utf8(out).unwrap()).unwrap(), run);
        }
        if let Ok(qrels) = parse_qrels(path, &text) {
            let _ = evaluate(&Run::new(), &qrels, &DEFAULT_KS);
        }
    }
}

#[test]
fn readers_report_non_utf8_files() {
    let path = tmp_dir().join("bad.run");
    std::fs::write(&path, b"q Q0 d 1 1.0 t\nq Q0 \xff 2 1.0 t\n").unwrap();
    let err = read_run(&path).unwrap_err().to_string();
    assert!(err.contains("bad.run:2:6: invalid UTF-8"), "{err}");
    assert!(read_qrels(&path).is_err());
}
