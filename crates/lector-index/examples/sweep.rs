//! Measures BM25 variants on BEIR SciFact (nDCG@10, Recall@100, MRR@10) and answer recall on the
//! SQuAD v1.1 dev paragraphs, in memory (no files written):
//!
//! ```text
//! cargo run --release -p lector-index --example sweep [-- DATA_DIR]  (default: the shared data)
//! ```

use lector_eval::retrieval::{self, AnswerItem, Passage, Run};
use lector_index::{Bm25Params, Document, IndexSettings, IndexWriter, Retriever, Stemmer};
use lector_ingest::{self as ingest, IngestOptions, Item};
use std::path::{Path, PathBuf};

fn documents(path: &Path) -> Vec<Document> {
    let walk = ingest::walk(&[path.to_path_buf()]);
    let mut docs = Vec::new();
    ingest::read_file(&walk.files[0], &IngestOptions::default(), &mut |item, _| {
        if let Item::Document(doc) = item {
            docs.push(doc);
        }
        Ok(())
    })
    .unwrap();
    docs
}

fn build(docs: &[Document], settings: IndexSettings) -> (tempfile::TempDir, IndexWriter) {
    let dir = tempfile::tempdir().unwrap();
    let mut writer = IndexWriter::open_or_create(dir.path(), settings).unwrap();
    for doc in docs {
        writer.add(doc.clone());
    }
    writer.commit().unwrap();
    (dir, writer)
}

fn scifact(data: &Path, settings: IndexSettings, params: &[Bm25Params]) {
    let docs = documents(&data.join("beir/scifact/corpus.jsonl"));
    let (_dir, writer) = build(&docs, settings);
    let index = writer.committed();
    let qrels = retrieval::read_qrels(&data.join("beir/scifact/qrels/test.tsv")).unwrap();
    let queries: Vec<serde_json::Value> =
        lector_eval::input::read_jsonl(&data.join("beir/scifact/queries.jsonl")).unwrap();
    for &p in params {
        let bm25 = index.bm25(p);
        let run = Run::from_rankings(queries.iter().map(|q| {
            let hits = bm25.documents(q["text"].as_str().unwrap(), 1000);
            (
                q["_id"].as_str().unwrap().to_string(),
                hits.into_iter().map(|h| (h.doc_id, h.score)).collect(),
            )
        }));
        let means = retrieval::evaluate(&run, &qrels, &[10, 100]).means();
        println!(
            "scifact stem={:?} words={} overlap={} k1={} b={}: ndcg@10 {:.4} recall@100 {:.4} mrr@10 {:.4}",
            settings.analyzer.stemmer,
            settings.chunking.words,
            settings.chunking.overlap,
            p.k1,
            p.b,
            means["ndcg@10"],
            means["recall@100"],
            means["mrr@10"]
        );
    }
}

fn squad(data: &Path, settings: IndexSettings) {
    let path = data.join("squad/dev-v1.1.json");
    let docs = documents(&path);
    let (_dir, writer) = build(&docs, settings);
    let bm25 = writer.committed().bm25(Bm25Params::default());
    let dataset = lector_eval::squad::read_dataset(&path).unwrap();
    let items: Vec<AnswerItem> = dataset
        .questions
        .iter()
        .map(|q| {
            let hits = bm25.retrieve(&q.question, 20).unwrap();
            let passages = hits
                .into_iter()
                .map(|h| Passage {
                    id: h.doc_id,
                    text: h.text,
                })
                .collect();
            AnswerItem {
                qid: q.id.clone(),
                answers: q.answers.clone(),
                passages,
            }
        })
        .collect();
    let recall = retrieval::answer_recall(&items, 20);
    println!(
        "squad stem={:?} words={} overlap={}: {} questions, {} passages, answer recall@1 {:.4} @5 {:.4} @20 {:.4}",
        settings.analyzer.stemmer,
        settings.chunking.words,
        settings.chunking.overlap,
        items.len(),
        writer.committed().stats().passages,
        recall.recall_at(1).unwrap(),
        recall.recall_at(5).unwrap(),
        recall.recall_at(20).unwrap()
    );
}

fn main() {
    let data = match std::env::args().nth(1) {
        Some(dir) => PathBuf::from(dir),
        None => lector_eval::data::shared_data_dir().unwrap_or_else(|e| panic!("{e}")),
    };
    let params = [
        Bm25Params { k1: 1.2, b: 0.75 },
        Bm25Params { k1: 0.9, b: 0.4 },
        Bm25Params { k1: 1.5, b: 0.75 },
        Bm25Params { k1: 1.2, b: 0.9 },
    ];
    for stemmer in [Stemmer::Porter2, Stemmer::None] {
        for (words, overlap) in [(100, 0), (100, 20), (200, 0), (1000, 0)] {
            let mut settings = IndexSettings::default();
            settings.analyzer.stemmer = stemmer;
            settings.chunking.words = words;
            settings.chunking.overlap = overlap;
            scifact(&data, settings, &params);
        }
    }
    for stemmer in [Stemmer::Porter2, Stemmer::None] {
        for (words, overlap) in [(100, 0), (100, 20), (1000, 0)] {
            let mut settings = IndexSettings::default();
            settings.analyzer.stemmer = stemmer;
            settings.chunking.words = words;
            settings.chunking.overlap = overlap;
            squad(&data, settings);
        }
    }
}
