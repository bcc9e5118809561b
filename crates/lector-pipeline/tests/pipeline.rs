//! The pipeline on real data: the first two articles of SQuAD v1.1 dev (Super Bowl 50, Warsaw;
//! 103 paragraphs) in a real index on disk, read by the shipped reader.

use lector_eval::normalize::normalize_answer;
use lector_index::{
    Index, IndexSettings, IndexWriter, Mode, PassageScorer, RetrieverKind, SearchOptions,
};
use lector_ingest::{self as ingest, IngestOptions, Item};
use lector_models::CrossEncoder;
use lector_pipeline::calibration::{curve, Target};
use lector_pipeline::{
    answer_score, Abstention, AskOptions, Calibration, Error, Pipeline, Response,
};
use lector_reader::Reader;
use serde_json::Value;
use std::path::{Path, PathBuf};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn squad_path(name: &str) -> PathBuf {
    lector_eval::data::require(&format!("squad/{name}"))
}

/// The first `articles` articles of a SQuAD file, written to `dir`.
fn slice(name: &str, articles: usize, dir: &Path) -> PathBuf {
    let text = std::fs::read_to_string(squad_path(name)).expect("SQuAD data in ../shared");
    let mut json: Value = serde_json::from_str(&text).unwrap();
    json["data"].as_array_mut().unwrap().truncate(articles);
    let path = dir.join(format!("slice-{name}"));
    std::fs::write(&path, json.to_string()).unwrap();
    path
}

/// (question, gold answers) of the first `n` questions of a SQuAD file.
fn questions(path: &Path, n: usize) -> Vec<(String, Vec<String>)> {
    let json: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let mut out = Vec::new();
    for article in json["data"].as_array().unwrap() {
        for paragraph in article["paragraphs"].as_array().unwrap() {
            for qa in paragraph["qas"].as_array().unwrap() {
                let answers = qa["answers"].as_array().unwrap();
                let answers = answers
                    .iter()
                    .map(|a| a["text"].as_str().unwrap().to_string());
                out.push((
                    qa["question"].as_str().unwrap().to_string(),
                    answers.collect(),
                ));
            }
        }
    }
    out.truncate(n);
    out
}

/// An index of the file's paragraphs in `dir`.
fn build_index(data: &Path, dir: &Path) -> Index {
    let walk = ingest::walk(&[data.to_path_buf()]);
    let mut writer = IndexWriter::open_or_create(dir, IndexSettings::default()).unwrap();
    for file in &walk.files {
        ingest::read_file(file, &IngestOptions::default(), &mut |item, _| {
            if let Item::Document(doc) = item {
                writer.add(doc);
            }
            Ok(())
        })
        .unwrap();
    }
    writer.commit().unwrap();
    Index::open(dir).unwrap()
}

fn reader() -> Reader {
    Reader::load(&workspace().join("models/reader-minilm-squad")).expect("shipped reader")
}

/// A pipeline over the first two articles of v1.1 dev, and the slice's path.
fn pipeline(dir: &Path) -> (Pipeline, PathBuf) {
    let data = slice("dev-v1.1.json", 2, dir);
    let index = build_index(&data, &dir.join("index"));
    (Pipeline::new(index, reader()), data)
}

fn chars(text: &str, start: usize, end: usize) -> String {
    text.chars().skip(start).take(end - start).collect()
}

/// Every answer's document offsets point at the answer text, in the document the index stores.
fn check_offsets(pipeline: &Pipeline, response: &Response) {
    for c in &response.candidates {
        let e = &c.evidence;
        let doc = pipeline.index().document(&e.doc_id).unwrap();
        assert_eq!(chars(doc.text, e.start, e.end), c.text, "{e:?}");
        assert_eq!(
            chars(&e.passage_text, e.passage_start, e.passage_end),
            c.text
        );
    }
}

#[test]
fn answers_with_evidence_at_the_right_document_offsets() {
    let dir = tempfile::tempdir().unwrap();
    let (pipeline, data) = pipeline(dir.path());
    let response = pipeline
        .ask(
            "Which NFL team represented the AFC at Super Bowl 50?",
            &AskOptions::default(),
        )
        .unwrap();
    let answer = response.answer.as_ref().expect("an answer");
    assert_eq!(answer.text, "Denver Broncos");
    assert!(answer.evidence.doc_id.starts_with("Super_Bowl_50#"));
    assert_eq!(answer.evidence.title.as_deref(), Some("Super Bowl 50"));
    assert_eq!(response.passages.len(), 5);
    assert!(response.candidates.len() > 1, "runner-ups are kept");
    assert!(!response.calibrated && response.threshold == 0.5);
    assert!(response.timings.read_ms > 0.0 && response.timings.retrieve_ms > 0.0);
    check_offsets(&pipeline, &response);

    // The first 40 questions in one batch: offsets always hold, and most answers are right.
    let asked = questions(&data, 40);
    let texts: Vec<&str> = asked.iter().map(|(q, _)| q.as_str()).collect();
    let responses = pipeline
        .ask_many(&texts, &AskOptions::default(), &mut |_| {})
        .unwrap();
    let mut right = 0;
    for ((_, golds), r) in asked.iter().zip(&responses) {
        check_offsets(&pipeline, r);
        let predicted = r
            .answer
            .as_ref()
            .map_or(String::new(), |a| normalize_answer(&a.text));
        right += usize::from(golds.iter().any(|g| normalize_answer(g) == predicted));
    }
    assert!(right >= 15, "{right} of 40 exactly right");
}

#[test]
fn voting_merges_answers_that_normalise_alike() {
    let dir = tempfile::tempdir().unwrap();
    let (pipeline, data) = pipeline(dir.path());
    let options = AskOptions {
        vote: true,
        k: 10,
        ..AskOptions::default()
    };
    let asked = questions(&data, 12);
    let texts: Vec<&str> = asked.iter().map(|(q, _)| q.as_str()).collect();
    let mut merged = 0;
    for r in pipeline.ask_many(&texts, &options, &mut |_| {}).unwrap() {
        let keys: Vec<String> = r
            .candidates
            .iter()
            .map(|c| normalize_answer(&c.text))
            .collect();
        for (i, key) in keys.iter().enumerate() {
            assert!(!keys[..i].contains(key), "`{key}` appears twice");
            // The candidate's score is the sum over every span that normalises to it, each
            // against its passage's no-answer score times the rank prior (rank^a).
            let sum: f64 = r
                .passages
                .iter()
                .zip(1..)
                .flat_map(|(p, rank)| {
                    let null = p.null_score * f64::powf(rank as f64, options.rank_prior);
                    p.answers.iter().map(move |a| (a, null))
                })
                .filter(|(a, _)| normalize_answer(&a.answer) == *key)
                .map(|(a, null)| answer_score(a.score, null))
                .sum();
            assert!((r.candidates[i].score - sum).abs() < 1e-9);
        }
        merged += r.candidates.iter().filter(|c| c.passages > 1).count();
        check_offsets(&pipeline, &r);
    }
    assert!(merged > 0, "some answer occurs in several passages");
}

#[test]
fn abstains_on_an_unrelated_question_when_calibrated() {
    let dir = tempfile::tempdir().unwrap();
    let (pipeline, _) = pipeline(dir.path());
    let unrelated = "What is the half-life of carbon-14 in years?";
    let related = "Which NFL team represented the AFC at Super Bowl 50?";
    let options = AskOptions::default();
    let before = pipeline.ask(unrelated, &options).unwrap();
    let known = pipeline.ask(related, &options).unwrap();
    assert!(
        before.na_prob > known.na_prob,
        "{} vs {}",
        before.na_prob,
        known.na_prob
    );
    // A threshold between the two, as a calibration would store it.
    let threshold = (before.na_prob * known.na_prob).sqrt();
    let point = curve(&[lector_pipeline::calibration::Judged {
        na_prob: threshold,
        has_answer: true,
        exact: 1.0,
        f1: 1.0,
    }])[1];
    let calibration = Calibration::new(&point, Target::MaxF1, "reader-minilm-squad", "test", 1);
    let pipeline = pipeline.with_calibration(Some(calibration));
    let after = pipeline.ask(unrelated, &options).unwrap();
    assert!(after.calibrated && after.threshold == threshold);
    assert_eq!(after.answer, None);
    assert_eq!(after.abstention, Some(Abstention::BelowThreshold));
    assert!(!after.candidates.is_empty(), "the candidates stay visible");
    assert!(pipeline.ask(related, &options).unwrap().answer.is_some());
}

#[test]
fn bad_input_gives_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let (pipeline, _) = pipeline(dir.path());
    let options = AskOptions::default();
    assert!(matches!(
        pipeline.ask("  ", &options),
        Err(Error::EmptyQuestion)
    ));
    let zero = AskOptions {
        k: 0,
        ..AskOptions::default()
    };
    assert_eq!(
        pipeline.ask("Who?", &zero).unwrap_err().to_string(),
        "invalid options: k must be between 1 and 1000, not 0"
    );
    // Every bound is checked here, NaN included, so no face can pass one through.
    let mut huge = AskOptions::default();
    huge.read.top_k = 1 << 62;
    let nan_prior = AskOptions {
        rank_prior: f64::NAN,
        ..AskOptions::default()
    };
    for (bad, says) in [
        (huge, "answers_per_passage must be between 1 and 20"),
        (nan_prior, "rank_prior must be between 0 and 8, not NaN"),
    ] {
        let err = pipeline.ask("Who?", &bad).unwrap_err().to_string();
        assert!(err.contains(says), "{err}");
    }
    // Hybrid retrieval over an index without passage vectors says how to add them.
    let hybrid = AskOptions {
        search: Some(SearchOptions::for_index(pipeline.index(), Mode::Hybrid)),
        ..AskOptions::default()
    };
    assert!(pipeline
        .ask("Who?", &hybrid)
        .unwrap_err()
        .to_string()
        .contains("has no passage vectors"));
    let nothing = pipeline.ask("zzzz qqqq", &options).unwrap();
    assert_eq!(nothing.abstention, Some(Abstention::NoPassages));
    let missing = dir.path().join("missing");
    let err = Pipeline::open(&missing, &workspace().join("models/reader-minilm-squad"))
        .err()
        .unwrap()
        .to_string();
    assert!(err.starts_with("no index at"), "{err}");
}

/// Two dated documents naming different chief executives, old first.
fn dated_pair(dir: &Path, old: &str, new: &str) -> Pipeline {
    let mut writer = IndexWriter::open_or_create(dir, IndexSettings::default()).unwrap();
    for (id, date, name) in [("old", "2019-03-01", old), ("new", "2024-06-30", new)] {
        let mut doc = lector_index::Document::new(
            id,
            format!("Acme Corporation announced that its chief executive is {name}."),
        );
        doc.date = Some(date.into());
        writer.add(doc);
    }
    writer.commit().unwrap();
    Pipeline::new(Index::open(dir).unwrap(), reader())
}

/// `--prefer-recent` decides near-ties on log-odds: a newer answer within the margin wins, one
/// whose score is as close to 1 but whose log-odds are not within the margin does not.
#[test]
fn prefer_recent_picks_the_newer_of_two_near_tied_documents() {
    use lector_pipeline::aggregate::NEAR_TIE_LOG_ODDS;
    let question = "Who is the chief executive of Acme Corporation?";
    // Without a rank prior, so that the second passage is not discounted.
    let plain = AskOptions {
        rank_prior: 0.0,
        ..AskOptions::default()
    };
    let recent = AskOptions {
        prefer_recent: true,
        ..plain.clone()
    };
    let gap = |r: &lector_pipeline::Response| r.candidates[0].log_odds - r.candidates[1].log_odds;

    let dir = tempfile::tempdir().unwrap();
    let pipeline = dated_pair(dir.path(), "Sam Lee", "Sam Li");
    let before = pipeline.ask(question, &plain).unwrap();
    assert_eq!(before.answer.as_ref().unwrap().text, "Sam Lee");
    assert!(
        gap(&before) <= NEAR_TIE_LOG_ODDS,
        "not a near tie: {}",
        gap(&before)
    );
    let after = pipeline.ask(question, &recent).unwrap();
    assert!(after.reordered_by_date);
    let answer = after.answer.unwrap();
    assert_eq!(answer.text, "Sam Li");
    assert_eq!(answer.evidence.date.as_deref(), Some("2024-06-30"));

    let dir = tempfile::tempdir().unwrap();
    let pipeline = dated_pair(dir.path(), "Alice Smith", "Bob Jones");
    let before = pipeline.ask(question, &plain).unwrap();
    assert_eq!(before.answer.as_ref().unwrap().text, "Alice Smith");
    // Both scores round to 0.99999 (the old rule, within 10% of the score, called this a tie).
    assert!(before.candidates[1].score >= 0.9 * before.candidates[0].score);
    assert!(gap(&before) > NEAR_TIE_LOG_ODDS, "{}", gap(&before));
    let after = pipeline.ask(question, &recent).unwrap();
    assert!(!after.reordered_by_date);
    assert_eq!(after.answer.unwrap().text, "Alice Smith");
}

/// A cross-encoder (the tiny random one of lector-models' fixtures) as the pipeline's reranker.
struct FixtureReranker(CrossEncoder);

impl PassageScorer for FixtureReranker {
    fn score(&self, query: &str, passages: &[&str]) -> Result<Vec<f32>, String> {
        self.0.score(query, passages).map_err(|e| e.to_string())
    }
}

fn fixture_reranker() -> CrossEncoder {
    CrossEncoder::load(&workspace().join("crates/lector-models/tests/fixtures/tiny-bert-rerank"))
        .unwrap()
}

#[test]
fn a_reranker_chooses_the_passages_read_among_its_depth() {
    let dir = tempfile::tempdir().unwrap();
    let (pipeline, _) = pipeline(dir.path());
    let question = "Which NFL team represented the AFC at Super Bowl 50?";
    let search = SearchOptions::for_index(pipeline.index(), Mode::Bm25);
    let retrieved = pipeline.retrieve(question, &search, 10).unwrap();
    assert_eq!(retrieved.len(), 10);
    // What the reranker should keep: the 3 of the 10 it scores best, titled as embedded.
    let texts: Vec<String> = retrieved
        .iter()
        .map(|h| format!("{} {}", h.title.as_deref().unwrap(), h.text))
        .collect();
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let scores = fixture_reranker().score(question, &refs).unwrap();
    let mut order: Vec<usize> = (0..10).collect();
    order.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]));
    let want: Vec<(&str, usize)> = order[..3]
        .iter()
        .map(|&i| (retrieved[i].doc_id.as_str(), retrieved[i].passage))
        .collect();

    let pipeline = pipeline.with_reranker(Box::new(FixtureReranker(fixture_reranker())), 10);
    let options = AskOptions {
        search: Some(search),
        k: 3,
        ..AskOptions::default()
    };
    let response = pipeline.ask(question, &options).unwrap();
    let read: Vec<(&str, usize)> = response
        .passages
        .iter()
        .map(|p| (p.hit.doc_id.as_str(), p.hit.passage))
        .collect();
    assert_eq!(read, want);
    for (rank, (p, &i)) in response.passages.iter().zip(&order).enumerate() {
        let source = p.hit.sources.last().unwrap();
        assert_eq!(
            (source.retriever, source.rank),
            (RetrieverKind::Rerank, rank + 1)
        );
        assert!((p.hit.score - f64::from(scores[i])).abs() < 1e-4);
        assert_eq!(p.hit.sources[0].retriever, RetrieverKind::Bm25);
    }
    assert!(response.timings.rerank_ms > 0.0);
    if let Some(answer) = &response.answer {
        assert!(want.contains(&(answer.evidence.doc_id.as_str(), answer.evidence.passage)));
        check_offsets(&pipeline, &response);
    }
    // Without a reranker nothing is reranked.
    let plain = Pipeline::new(pipeline.index().clone(), reader());
    let response = plain.ask(question, &options).unwrap();
    assert_eq!(response.timings.rerank_ms, 0.0);
    assert!(response.passages.iter().all(|p| p.hit.sources.len() == 1));
}
