//! `lector eval generative --retrieve`: retrieval-augmented generation end to end with the
//! registry's SmolLM2 GGUF on a small SQuAD v2.0 slice (answerable, unanswerable and withheld
//! questions), in both passage orders.

mod common;

use common::{lector, ok};
use serde_json::Value;
use std::path::Path;

/// From SQuAD v2.0 dev: the first three paragraphs of the first article and the first of the
/// second, each with its first answerable and its first unanswerable question.
fn slice(dir: &Path) -> String {
    let path = lector_eval::data::require("squad/dev-v2.0.json");
    let mut json: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let data = json["data"].as_array_mut().unwrap();
    data.truncate(2);
    for (article, keep) in data.iter_mut().zip([3, 1]) {
        let paragraphs = article["paragraphs"].as_array_mut().unwrap();
        paragraphs.truncate(keep);
        for p in paragraphs {
            let qas = p["qas"].as_array().unwrap();
            let impossible = |qa: &&Value| qa["is_impossible"] == true;
            let first_answerable = qas.iter().find(|qa| !impossible(qa)).unwrap().clone();
            let first_impossible = qas.iter().find(impossible).unwrap().clone();
            p["qas"] = Value::Array(vec![first_answerable, first_impossible]);
        }
    }
    let out = dir.join("slice-v2.json");
    std::fs::write(&out, json.to_string()).unwrap();
    out.to_string_lossy().into_owned()
}

/// One run in `order` with `extra` flags: the JSON report and the per-question rows.
fn run(data: &str, order: &str, rows: &Path, extra: &[&str]) -> (Value, Vec<Value>) {
    let args = [
        "eval",
        "generative",
        "--squad",
        data,
        "--retrieve",
        "--k",
        "3",
        "--order",
        order,
        "--withhold-every",
        "2",
        "--max-new-tokens",
        "16",
        "--resamples",
        "200",
        "--json",
        "--per-question",
        rows.to_str().unwrap(),
    ];
    let out = ok(&lector(&[&args[..], extra].concat()));
    let report: Value = serde_json::from_str(&out).unwrap();
    let rows = std::fs::read_to_string(rows)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    (report, rows)
}

const FIGURES: [&str; 14] = [
    "exact_match",
    "f1",
    "exact_match_all",
    "f1_all",
    "claims_supported",
    "answers_with_unsupported_claim",
    "citation_precision",
    "citation_precision_written",
    "citation_precision_attributed",
    "citation_recall",
    "citation_recall_written",
    "refusal_rate_unanswerable",
    "refusal_rate_answerable",
    "recall@3_shown",
];

fn numbers(v: &Value) -> Vec<usize> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_u64().unwrap() as usize)
        .collect()
}

fn edge_order(sorted: &[usize]) -> Vec<usize> {
    let front = sorted.iter().step_by(2);
    let back = sorted.iter().skip(1).step_by(2).rev();
    front.chain(back).copied().collect()
}

/// Every figure is there with an interval around its mean (none when it averages nothing).
fn check_figures(report: &Value) {
    let figures = &report["figures"];
    for name in FIGURES {
        let f = &figures[name];
        let n = f["n"]
            .as_u64()
            .unwrap_or_else(|| panic!("{name} missing: {report}"));
        if n == 0 {
            assert!(f["mean"].is_null(), "{name}: {f}");
            continue;
        }
        let (mean, low, high) = (
            f["mean"].as_f64().unwrap(),
            f["low"].as_f64().unwrap(),
            f["high"].as_f64().unwrap(),
        );
        assert!(
            (0.0..=100.0).contains(&mean) && low <= mean + 1e-9 && mean <= high + 1e-9,
            "{name}: {f}"
        );
    }
}

/// The counts add up, and the figures agree with the per-question rows.
fn check_counts(report: &Value, rows: &[Value]) {
    let figure = |name: &str| &report["figures"][name];
    let n = |name: &str| figure(name)["n"].as_u64().unwrap() as usize;
    let mean = |name: &str| figure(name)["mean"].as_f64().unwrap();
    assert_eq!(rows.len(), 8);
    assert_eq!(report["questions"], 8);
    let answerable: Vec<&Value> = rows.iter().filter(|r| r["answerable"] == true).collect();
    let unanswerable = rows.len() - answerable.len();
    // Four SQuAD v2.0 unanswerable questions, and the withheld article's answerable one.
    assert_eq!(report["unanswerable"], unanswerable);
    assert_eq!(report["withheld"], 1, "{report}");
    assert_eq!(unanswerable, 5);
    assert_eq!(report["counts"]["answerable"], answerable.len());
    assert_eq!(n("exact_match"), answerable.len());
    // Rule-based equivalence adds to exact match, and a key fact to equivalence; the figures
    // are the answerable rows' shares.
    for r in &answerable {
        if r["em"] == 1.0 {
            assert_eq!(r["equivalent"], true, "{r}");
        }
        if r["equivalent"] == true {
            assert_eq!(r["key_fact"], true, "{r}");
        }
    }
    for field in ["equivalent", "key_fact"] {
        let yes = answerable.iter().filter(|r| r[field] == true).count();
        let share = 100.0 * yes as f64 / answerable.len() as f64;
        assert!((mean(field) - share).abs() < 1e-9, "{field}");
    }
    assert_eq!(n("f1_all"), rows.len());
    assert_eq!(n("refusal_rate_unanswerable"), unanswerable);
    let refused =
        |rs: &mut dyn Iterator<Item = &Value>| rs.filter(|r| r["refused"] == true).count();
    assert_eq!(
        report["counts"]["refused"],
        refused(&mut rows.iter()),
        "{report}"
    );
    let rate = 100.0 * refused(&mut rows.iter().filter(|r| r["answerable"] == false)) as f64
        / unanswerable as f64;
    assert!((mean("refusal_rate_unanswerable") - rate).abs() < 1e-9);
    // Citation precision: gold citations over all citations of the answerable questions.
    let (mut gold, mut all) = (0, 0);
    for r in &answerable {
        let golds = numbers(&r["gold_passages"]);
        for kind in ["written_citations", "attributed_citations"] {
            let cited = numbers(&r[kind]);
            all += cited.len();
            gold += cited.iter().filter(|c| golds.contains(c)).count();
        }
    }
    assert_eq!(n("citation_precision"), all, "{report}");
    if all > 0 {
        assert!((mean("citation_precision") - 100.0 * gold as f64 / all as f64).abs() < 1e-9);
    }
    // Citation recall: over answerable questions with a gold passage shown.
    let with_gold: Vec<&&Value> = answerable
        .iter()
        .filter(|r| r["gold_shown"] == true)
        .collect();
    assert_eq!(n("citation_recall"), with_gold.len());
    assert_eq!(n("recall@3_shown"), answerable.len());
    let citing = with_gold.iter().filter(|r| r["cites_gold"] == true).count();
    if !with_gold.is_empty() {
        let expected = 100.0 * citing as f64 / with_gold.len() as f64;
        assert!((mean("citation_recall") - expected).abs() < 1e-9);
        let shown = 100.0 * with_gold.len() as f64 / answerable.len() as f64;
        assert!((mean("recall@3_shown") - shown).abs() < 1e-9);
    }
    let claims: usize = rows
        .iter()
        .map(|r| r["claims"].as_array().unwrap().len())
        .sum();
    assert_eq!(n("claims_supported"), claims);
    assert_eq!(report["counts"]["claims"], claims);
}

/// The shown passages are the retrieved ones, in rank order or strongest at the edges.
fn check_order(rows: &[Value], edges: bool) {
    for r in rows {
        let shown = numbers(&r["shown"]);
        let mut sorted = shown.clone();
        sorted.sort_unstable();
        // A question whose words are in no indexed paragraph (a withheld article's) retrieves
        // nothing, and is asked over an empty block.
        let cut = r["cut"].as_array().unwrap().len();
        assert_eq!(
            shown.len() + cut,
            r["retrieved"].as_array().unwrap().len(),
            "{r}"
        );
        let expected = if edges { edge_order(&sorted) } else { sorted };
        assert_eq!(shown, expected, "{r}");
        let retrieved = r["retrieved"].as_array().unwrap();
        let docs: Vec<&Value> = shown.iter().map(|&n| &retrieved[n - 1]).collect();
        assert_eq!(
            docs,
            r["shown_doc_ids"]
                .as_array()
                .unwrap()
                .iter()
                .collect::<Vec<_>>()
        );
    }
}

/// BERTScore F1 (`--bertscore-model`): the encoder and layer reported, a value per question
/// (a gold-less question scores 1 when its short answer is empty, else 0; an empty short answer
/// to one with golds 0), and the figure is their mean over the answerable questions.
fn check_bertscore(report: &Value, rows: &[Value], encoder: &str) {
    assert_eq!(report["bertscore"]["model"], encoder, "{report}");
    assert_eq!(report["bertscore"]["layer"], 1, "{report}");
    let value = |r: &Value| r["bertscore_f1"].as_f64().unwrap();
    for r in rows {
        let short_is_empty = r["short_answer"] == "";
        if r["golds"].as_array().unwrap().is_empty() || short_is_empty {
            let refusal_credit = r["golds"].as_array().unwrap().is_empty() && short_is_empty;
            assert_eq!(value(r), f64::from(u8::from(refusal_credit)), "{r}");
        } else {
            assert!(value(r).is_finite() && value(r) <= 1.0 + 1e-6, "{r}");
        }
    }
    let answerable: Vec<f64> = rows
        .iter()
        .filter(|r| r["answerable"] == true)
        .map(value)
        .collect();
    let figure = &report["figures"]["bertscore_f1"];
    assert_eq!(figure["n"], answerable.len(), "{figure}");
    let mean = 100.0 * answerable.iter().sum::<f64>() / answerable.len() as f64;
    assert!(
        (figure["mean"].as_f64().unwrap() - mean).abs() < 1e-9,
        "{figure}"
    );
}

#[test]
fn retrieval_augmented_generation_is_scored_in_both_orders() {
    let dir = tempfile::tempdir().unwrap();
    let data = slice(dir.path());
    let (rank_rows, edge_rows) = (
        dir.path().join("rank.jsonl"),
        dir.path().join("edges.jsonl"),
    );
    let encoder = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../lector-models/tests/fixtures/tiny-bert")
        .to_string_lossy()
        .into_owned();
    let bertscore = ["--bertscore-model", &encoder, "--bertscore-layer", "1"];
    let (rank, by_rank) = run(&data, "rank", &rank_rows, &bertscore);
    let (edges, by_edges) = run(&data, "edges", &edge_rows, &[]);
    assert_eq!(rank["order"], "rank");
    assert_eq!(edges["order"], "edges");
    for (report, rows) in [(&rank, &by_rank), (&edges, &by_edges)] {
        check_figures(report);
        check_counts(report, rows);
    }
    check_order(&by_rank, false);
    check_order(&by_edges, true);
    check_bertscore(&rank, &by_rank, &encoder);
    assert!(edges.get("bertscore").is_none());
    // The same passages were retrieved; with three shown, the orders differ.
    for (a, b) in by_rank.iter().zip(&by_edges) {
        assert_eq!(a["id"], b["id"]);
        assert_eq!(a["retrieved"], b["retrieved"]);
    }
    assert!(by_edges.iter().any(|r| numbers(&r["shown"]) == [1, 3, 2]));
    // The two runs compare question by question on F1.
    let compared: Value = serde_json::from_str(&ok(&lector(&[
        "eval",
        "compare",
        rank_rows.to_str().unwrap(),
        edge_rows.to_str().unwrap(),
        "--metric",
        "f1",
        "--json",
    ])))
    .unwrap();
    assert_eq!(compared["questions"], 8, "{compared}");
}
