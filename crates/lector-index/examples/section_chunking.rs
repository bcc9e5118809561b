//! Does cutting passages at section boundaries help BM25 retrieval? Fixed-length chunking against
//! section chunking ([`lector_index::ChunkConfig::sections`]) on a structured corpus built from
//! SQuAD v1.1 dev, in memory (a temporary index per setting):
//!
//! ```text
//! cargo run -p lector-index --example section_chunking [-- DATA_DIR]  (default: the shared data)
//! ```
//!
//! The corpus: Markdown documents of one article each (documents of several articles gave the
//! same figures within 0.002); every article is a `# <title>` section
//! and every paragraph of it a `## Paragraph <n>` subsection (synthetic headings: SQuAD has
//! paragraphs, not headed sections), read by lector's Markdown heading scanner. A question's
//! relevant passages are those whose part inside the question's own paragraph contains one of
//! its gold answers. Reported: answer recall@1/5/10 (a relevant passage in the top k) and
//! MRR@10 over the 10,570 questions, for fixed-length chunking, section chunking, and each with
//! the passage's headings indexed with it ([`lector_index::ChunkConfig::headings`]), with paired
//! differences against fixed-length chunking (bootstrap 95% interval, randomisation p-value).

use lector_eval::squad::SquadFile;
use lector_index::{Bm25Params, ChunkConfig, Document, IndexSettings, IndexWriter, Retriever};
use std::collections::HashMap;
use std::path::PathBuf;

/// Where a question's paragraph lies: its document and byte range there, and its answers.
struct Gold {
    doc: String,
    range: (usize, usize),
    answers: Vec<String>,
    question: String,
}

fn corpus(squad: &SquadFile, group: usize) -> (Vec<Document>, Vec<Gold>) {
    let articles = squad.data.as_deref().unwrap_or_default();
    let (mut docs, mut golds) = (Vec::new(), Vec::new());
    for (n, chunk) in articles.chunks(group).enumerate() {
        let id = format!("squad-dev-{n:02}.md");
        let mut text = String::new();
        for article in chunk {
            text.push_str(&format!("# {}\n\n", article.title.replace('_', " ")));
            for (p, paragraph) in article.paragraphs.iter().enumerate() {
                text.push_str(&format!("## Paragraph {}\n\n", p + 1));
                let start = text.len();
                text.push_str(paragraph.context.trim());
                let range = (start, text.len());
                text.push_str("\n\n");
                for qa in &paragraph.qas {
                    golds.push(Gold {
                        doc: id.clone(),
                        range,
                        answers: qa.answers.iter().map(|a| a.text.clone()).collect(),
                        question: qa.question.clone(),
                    });
                }
            }
        }
        let mut doc = Document::new(id, text);
        // As the Markdown reader titles a document: its first `# ` heading.
        doc.title = chunk.first().map(|a| a.title.replace('_', " "));
        docs.push(lector_ingest::sections::with_markdown_sections(doc));
    }
    (docs, golds)
}

struct Row {
    passages: usize,
    crossing: usize,
    recall: [f64; 3],
    mrr: f64,
    /// Per question: the rank (0-based) of the first relevant passage in the top 10.
    ranks: Vec<Option<usize>>,
}

fn measure(docs: &[Document], golds: &[Gold], chunking: ChunkConfig) -> Row {
    let dir = tempfile::tempdir().unwrap();
    let settings = IndexSettings {
        chunking,
        ..IndexSettings::default()
    };
    let mut writer = IndexWriter::open_or_create(dir.path(), settings).unwrap();
    for doc in docs {
        writer.add(doc.clone());
    }
    writer.commit().unwrap();
    let index = writer.committed();
    let texts: HashMap<&str, &str> = docs
        .iter()
        .map(|d| (d.id.as_str(), d.text.as_str()))
        .collect();
    // Passages holding text of two paragraphs.
    let mut paragraphs: HashMap<&str, Vec<(usize, usize)>> = HashMap::new();
    for gold in golds {
        let ranges = paragraphs.entry(gold.doc.as_str()).or_default();
        if ranges.last() != Some(&gold.range) {
            ranges.push(gold.range);
        }
    }
    let stats = index.stats();
    let mut crossing = 0;
    for doc in docs {
        let ranges = &paragraphs[doc.id.as_str()];
        for span in index.document(&doc.id).unwrap().passages {
            let touched = ranges
                .iter()
                .filter(|&&(s, e)| s < span.byte_end && span.byte_start < e)
                .count();
            if touched > 1 {
                crossing += 1;
            }
        }
    }
    let bm25 = index.bm25(Bm25Params::default());
    let (mut found, mut mrr, mut ranks) = ([0usize; 3], 0.0, Vec::new());
    for gold in golds {
        let hits = bm25.retrieve(&gold.question, 10).unwrap();
        let text = texts[gold.doc.as_str()];
        let rank = hits.iter().position(|h| {
            let start = h.span.byte_start.max(gold.range.0);
            let end = h.span.byte_end.min(gold.range.1);
            h.doc_id == gold.doc
                && start < end
                && gold
                    .answers
                    .iter()
                    .any(|a| text[start..end].contains(a.as_str()))
        });
        ranks.push(rank);
        if let Some(rank) = rank {
            for (i, k) in [1, 5, 10].into_iter().enumerate() {
                if rank < k {
                    found[i] += 1;
                }
            }
            mrr += 1.0 / (rank + 1) as f64;
        }
    }
    let n = golds.len() as f64;
    Row {
        passages: stats.passages,
        crossing,
        recall: found.map(|f| f as f64 / n),
        mrr: mrr / n,
        ranks,
    }
}

fn main() {
    let data = match std::env::args().nth(1) {
        Some(dir) => PathBuf::from(dir),
        None => lector_eval::data::shared_data_dir().unwrap_or_else(|e| panic!("{e}")),
    };
    let raw = std::fs::read_to_string(data.join("squad/dev-v1.1.json")).unwrap();
    let squad: SquadFile = serde_json::from_str(&raw).unwrap();
    println!("| articles per document | words | chunking | passages | crossing a paragraph | recall@1 | recall@5 | recall@10 | MRR@10 |");
    println!("| ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |");
    let mut paired = Vec::new();
    let variants = [
        ("fixed", false, false),
        ("fixed + headings", false, true),
        ("sections", true, false),
        ("sections + headings", true, true),
    ];
    for (group, sizes) in [(1, &[100, 200][..]), (4, &[100][..])] {
        let (docs, golds) = corpus(&squad, group);
        eprintln!(
            "{} documents, {} questions, {} sections",
            docs.len(),
            golds.len(),
            docs.iter()
                .map(|d| lector_ingest::section_starts(d.metadata.as_ref()).len())
                .sum::<usize>()
        );
        for &words in sizes {
            let mut ranks = Vec::new();
            for (name, sections, headings) in variants {
                let chunking = ChunkConfig {
                    words,
                    overlap: 0,
                    sections,
                    headings,
                };
                let row = measure(&docs, &golds, chunking);
                println!(
                    "| {group} | {words} | {name} | {} | {} | {:.4} | {:.4} | {:.4} | {:.4} |",
                    row.passages,
                    row.crossing,
                    row.recall[0],
                    row.recall[1],
                    row.recall[2],
                    row.mrr
                );
                ranks.push(row.ranks);
            }
            for (v, variant) in variants.iter().enumerate().skip(1) {
                paired.push((group, words, variant.0, ranks[0].clone(), ranks[v].clone()));
            }
        }
    }
    println!();
    println!("| articles per document | words | chunking − fixed | Δ recall@1 | Δ recall@10 | Δ MRR@10 |");
    println!("| ---: | ---: | --- | --- | --- | --- |");
    let settings = lector_eval::stats::Bootstrap::default();
    for (group, words, name, fixed, other) in paired {
        let cells: Vec<String> = [
            &(|r: Option<usize>| f64::from(u8::from(r == Some(0))))
                as &dyn Fn(Option<usize>) -> f64,
            &|r: Option<usize>| f64::from(u8::from(r.is_some())),
            &|r: Option<usize>| r.map_or(0.0, |r| 1.0 / (r + 1) as f64),
        ]
        .iter()
        .map(|metric| {
            let a: Vec<f64> = fixed.iter().map(|&r| metric(r)).collect();
            let b: Vec<f64> = other.iter().map(|&r| metric(r)).collect();
            let c = lector_eval::stats::compare_paired(&a, &b, &settings, 10_000);
            format!(
                "{:+.4} [{:+.4}, {:+.4}] p={:.4}",
                c.difference.mean, c.difference.low, c.difference.high, c.p_value
            )
        })
        .collect();
        println!("| {group} | {words} | {name} | {} |", cells.join(" | "));
    }
}
