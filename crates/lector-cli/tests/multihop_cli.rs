//! Multi-hop questions end to end on a slice of the shared HotpotQA sample: `eval hotpot`
//! scores exactly as the official script does on its own predictions, two hops find both gold
//! paragraphs more often than one, comparison and yes/no questions get their kind of answer,
//! and `ask --hops 2` shows the chain.

mod common;

use common::{lector, ok, scripted_endpoint};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The first `n` questions of the shared sample, as a HotpotQA file of their own.
fn slice(dir: &Path, n: usize) -> (String, Vec<Value>) {
    let path = lector_eval::data::require("hotpotqa/hotpot_dev_distractor_sample1100.json");
    let all: Vec<Value> = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let head: Vec<Value> = all.into_iter().take(n).collect();
    let out = dir.join("slice.json");
    std::fs::write(&out, serde_json::to_string(&head).unwrap()).unwrap();
    (out.to_string_lossy().into_owned(), head)
}

/// The reference interpreter (tools/setup-python.sh, cached after the first run).
fn python() -> String {
    let out = Command::new("bash")
        .arg(repo().join("tools/setup-python.sh"))
        .output()
        .expect("run tools/setup-python.sh");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .last()
        .unwrap()
        .trim()
        .to_string()
}

fn rows(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// `eval hotpot --setting open` with `hops`; (report JSON, per-question rows, predictions file).
fn eval_open(dir: &Path, data: &str, hops: &str) -> (Value, Vec<Value>, PathBuf) {
    let per_question = dir.join(format!("rows{hops}.jsonl"));
    let predictions = dir.join(format!("pred{hops}.json"));
    let index = dir.join("index");
    let out = lector(&[
        "eval",
        "hotpot",
        data,
        "--setting",
        "open",
        "--index",
        &index.to_string_lossy(),
        "--hops",
        hops,
        "--json",
        "--per-question",
        &per_question.to_string_lossy(),
        "--predictions",
        &predictions.to_string_lossy(),
        "--html",
        &dir.join(format!("report{hops}.html")).to_string_lossy(),
    ]);
    let html = std::fs::read_to_string(dir.join(format!("report{hops}.html"))).unwrap();
    assert!(html.contains("both@5") && html.contains("By question type"));
    let report: Value = serde_json::from_str(&ok(&out)).unwrap();
    (report, rows(&per_question), predictions)
}

#[test]
fn eval_hotpot_matches_the_official_script_and_two_hops_find_both_paragraphs() {
    let dir = tempfile::tempdir().unwrap();
    let (data, questions) = slice(dir.path(), 40);
    let (one, one_rows, _) = eval_open(dir.path(), &data, "1");
    let (two, two_rows, predictions) = eval_open(dir.path(), &data, "2");

    // The official metrics of lector's own predictions, recomputed by the port of the script.
    let script = repo().join("tools/hotpot_evaluate_v1.py");
    let out = Command::new(python())
        .arg(&script)
        .arg(&predictions)
        .arg(&data)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let official: Value = serde_json::from_str(&String::from_utf8_lossy(&out.stdout)).unwrap();
    for (key, value) in official.as_object().unwrap() {
        let ours = two["metrics"][key]
            .as_f64()
            .unwrap_or_else(|| panic!("metric {key}"));
        assert!(
            (ours - value.as_f64().unwrap()).abs() < 1e-9,
            "{key}: {ours} vs {value}"
        );
    }

    // Both gold paragraphs among the first five passages: more often with a second hop.
    let both5 = |report: &Value| report["intervals"]["both@5"]["mean"].as_f64().unwrap();
    assert!(
        both5(&two) > both5(&one),
        "both@5 with two hops {} is not above one hop's {}",
        both5(&two),
        both5(&one)
    );
    assert_eq!(one_rows.len(), 40);
    assert!(one_rows
        .iter()
        .all(|r| r["hop_ms"].as_array().unwrap().len() == 1));
    assert!(two_rows
        .iter()
        .all(|r| r["hop_ms"].as_array().unwrap().len() == 2));

    // Yes/no questions are answered yes or no, comparisons with one of their options.
    let mut yes_no = 0;
    for (row, q) in two_rows.iter().zip(&questions) {
        let prediction = row["prediction"].as_str().unwrap();
        match row["type"].as_str().unwrap() {
            "yes/no" => {
                yes_no += 1;
                assert!(["yes", "no"].contains(&prediction), "{prediction}");
            }
            // A comparison offering its options ("..., X or Y?") is answered with one of them.
            "comparison"
                if q["question"].as_str().unwrap().contains(" or ")
                    && q["question"]
                        .as_str()
                        .unwrap()
                        .contains(q["answer"].as_str().unwrap()) =>
            {
                let question = q["question"].as_str().unwrap();
                assert!(
                    question.contains(prediction) && !prediction.is_empty(),
                    "`{prediction}` is not an option of `{question}`"
                );
            }
            _ => {}
        }
    }
    assert!(yes_no > 0, "the slice has yes/no questions");
}

/// An index of one question's ten paragraphs (id and title: the paragraph's title).
fn index_of(dir: &Path, question: &Value) -> String {
    let docs: String = question["context"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            let title = p[0].as_str().unwrap();
            let text: String = p[1]
                .as_array()
                .unwrap()
                .iter()
                .map(|s| s.as_str().unwrap())
                .collect();
            serde_json::json!({"id": title, "title": title, "text": text}).to_string() + "\n"
        })
        .collect();
    let docs_path = dir.join("docs.jsonl");
    std::fs::write(&docs_path, docs).unwrap();
    let index = dir.join("index").to_string_lossy().into_owned();
    ok(&lector(&[
        "index",
        "add",
        &docs_path.to_string_lossy(),
        "--index",
        &index,
    ]));
    index
}

/// The "Tinted Windows" bridge question of the slice and an index of its ten paragraphs.
fn tinted_windows_index(dir: &Path) -> (Value, String) {
    let (_, questions) = slice(dir, 40);
    let bridge = questions
        .into_iter()
        .find(|q| q["question"].as_str().unwrap().contains("Tinted Windows"))
        .expect("the Tinted Windows question in the slice");
    let index = index_of(dir, &bridge);
    (bridge, index)
}

#[test]
fn ask_with_two_hops_shows_the_chain_and_the_time_of_each_hop() {
    let dir = tempfile::tempdir().unwrap();
    let (_, questions) = slice(dir.path(), 40);
    let comparison = questions
        .iter()
        .find(|q| {
            let question = q["question"].as_str().unwrap();
            q["type"] == "comparison"
                && question.contains(", ")
                && question.contains(" or ")
                && q["answer"] != "yes"
                && q["answer"] != "no"
        })
        .expect("a comparison question in the slice");
    let index = index_of(dir.path(), comparison);
    let question = comparison["question"].as_str().unwrap();

    let json: Value = serde_json::from_str(&ok(&lector(&[
        "ask", question, "--index", &index, "--hops", "2", "--json",
    ])))
    .unwrap();
    let hops = &json["hops"];
    assert_eq!(hops["kind"], "comparison");
    assert_eq!(hops["hops"], 2);
    assert_eq!(hops["hop_ms"].as_array().unwrap().len(), 2);
    let chain = hops["chain"].as_array().unwrap();
    assert_eq!(chain.len(), 2, "one sub-answer per option: {chain:?}");
    let answer = json["answer"]["text"].as_str().unwrap();
    assert!(
        question.contains(answer),
        "`{answer}` is an option of `{question}`"
    );

    let text = ok(&lector(&[
        "ask", question, "--index", &index, "--hops", "2",
    ]));
    assert!(text.contains("chain:"), "{text}");
    assert!(text.contains("time: hop 1 "), "{text}");
    assert!(text.contains(", hop 2 "), "{text}");

    let bad = lector(&["ask", question, "--index", &index, "--hops", "3"]);
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("--hops"));
}

#[test]
fn an_llm_decomposes_a_bridge_question_into_a_chain_of_sub_answers() {
    let dir = tempfile::tempdir().unwrap();
    let (bridge, index) = tinted_windows_index(dir.path());
    let requests = Arc::new(Mutex::new(Vec::new()));
    let url = scripted_endpoint(
        "Here you are:\n1. Which band released the debut album Tinted Windows?\n2. In what city did #1 have their first performance?",
        requests.clone(),
    );
    let question = bridge["question"].as_str().unwrap();
    let out = lector(&[
        "ask",
        question,
        "--index",
        &index,
        "--hops",
        "2",
        "--decompose",
        "llm",
        "--endpoint",
        &url,
        "--api-model",
        "scripted",
        "--json",
    ]);
    let json: Value = serde_json::from_str(&ok(&out)).unwrap();
    let sent = requests.lock().unwrap();
    assert_eq!(sent.len(), 1, "one decomposition request");
    assert!(sent[0].contains("Tinted Windows"), "{}", sent[0]);
    let chain = json["hops"]["chain"].as_array().unwrap();
    assert_eq!(chain.len(), 2, "{chain:?}");
    let first = chain[0]["answer"].as_str().unwrap();
    let second = chain[1]["question"].as_str().unwrap();
    assert!(!first.is_empty());
    assert!(
        second.contains(first) && !second.contains("#1"),
        "`{second}` has the first answer `{first}` in place of #1"
    );
    assert_eq!(json["answer"]["text"], chain[1]["answer"]);
    // The sub-answers' passages are the supporting spans.
    let support = json["hops"]["support"].as_array().unwrap();
    assert_eq!(support.len(), 2, "{support:?}");
}

#[test]
fn a_run_file_of_titles_with_spaces_reads_back_to_the_same_scores() {
    let dir = tempfile::tempdir().unwrap();
    let (data, questions) = slice(dir.path(), 40);
    // Every paragraph of the slice, one document per title (ids with spaces).
    let index = dir.path().join("index");
    let out = lector(&[
        "eval",
        "hotpot",
        &data,
        "--setting",
        "open",
        "--index",
        &index.to_string_lossy(),
        "--limit",
        "1",
    ]);
    ok(&out);
    let mut queries = String::new();
    let mut qrels = String::from("query-id\tcorpus-id\tscore\n");
    for q in &questions {
        let id = q["_id"].as_str().unwrap();
        queries += &(serde_json::json!({"_id": id, "text": q["question"]}).to_string() + "\n");
        let mut titles: Vec<&str> = q["supporting_facts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f[0].as_str().unwrap())
            .collect();
        titles.dedup();
        for title in titles {
            qrels += &format!("{id}\t{title}\t1\n");
        }
    }
    let queries_path = dir.path().join("queries.jsonl");
    let qrels_path = dir.path().join("qrels.tsv");
    std::fs::write(&queries_path, queries).unwrap();
    std::fs::write(&qrels_path, qrels).unwrap();
    let run = dir.path().join("run.trec");
    let scored: Value = serde_json::from_str(&ok(&lector(&[
        "eval",
        "retrieval",
        "--index",
        &index.to_string_lossy(),
        "--queries",
        &queries_path.to_string_lossy(),
        "--qrels",
        &qrels_path.to_string_lossy(),
        "--run-out",
        &run.to_string_lossy(),
        "--json",
    ])))
    .unwrap();
    // Six whitespace-separated columns on every line, spaces in ids escaped.
    let text = std::fs::read_to_string(&run).unwrap();
    assert!(
        text.lines().all(|l| l.split_whitespace().count() == 6),
        "{text}"
    );
    assert!(text.contains("%20"), "titles with spaces are escaped");
    let again: Value = serde_json::from_str(&ok(&lector(&[
        "eval",
        "retrieval",
        "--run",
        &run.to_string_lossy(),
        "--qrels",
        &qrels_path.to_string_lossy(),
        "--json",
    ])))
    .unwrap();
    for metric in ["ndcg@10", "recall@5", "mrr"] {
        let (a, b) = (&scored[metric]["mean"], &again[metric]["mean"]);
        assert!(a.as_f64().unwrap() > 0.0, "{metric} {a}");
        assert_eq!(a, b, "{metric}");
    }
}

#[test]
fn the_rules_ask_a_the_n_of_e_phrase_first_and_show_the_chain() {
    let dir = tempfile::tempdir().unwrap();
    let (_, index) = tinted_windows_index(dir.path());
    let question = "Where was the singer of Tinted Windows born?";
    let json: Value = serde_json::from_str(&ok(&lector(&[
        "ask", question, "--index", &index, "--hops", "2", "--json",
    ])))
    .unwrap();
    let chain = json["hops"]["chain"].as_array().unwrap();
    assert_eq!(chain.len(), 2, "{chain:?}");
    assert_eq!(chain[0]["question"], "Who is the singer of Tinted Windows?");
    let first = chain[0]["answer"].as_str().unwrap();
    assert_eq!(
        chain[1]["question"].as_str().unwrap(),
        format!("Where was {first} born?")
    );
    // Without decomposition there is no chain.
    let json: Value = serde_json::from_str(&ok(&lector(&[
        "ask",
        question,
        "--index",
        &index,
        "--hops",
        "2",
        "--decompose",
        "none",
        "--json",
    ])))
    .unwrap();
    assert!(json["hops"]["chain"].as_array().unwrap().is_empty());
}
