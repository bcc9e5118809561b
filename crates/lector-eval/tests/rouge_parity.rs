//! Parity with Google's `rouge-score` 0.1.2: scores and tokens computed by `tools/rouge_reference.py`
//! in the reference Python environment must equal ours, on pairs built from SQuAD dev v1.1 text
//! and on hand-picked edge cases (empty, punctuation-only, Unicode, numbers, multi-line).

mod support;

use lector_eval::rouge::{read_items, tokenize, RougeItem, RougeScorer};
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::PathBuf;

/// A small deterministic generator (xorshift64*), so the cases are the same on every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }

    fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            items.swap(i, self.below(i + 1));
        }
    }
}

struct Question {
    question: String,
    answers: Vec<String>,
}

struct Paragraph {
    context: String,
    questions: Vec<Question>,
}

fn squad_paragraphs() -> Vec<Paragraph> {
    let path = support::shared_data().join("squad/dev-v1.1.json");
    let text = std::fs::read_to_string(&path).expect("read SQuAD dev");
    let root: Value = serde_json::from_str(&text).expect("SQuAD JSON");
    let mut paragraphs = Vec::new();
    for article in root["data"].as_array().expect("data") {
        for paragraph in article["paragraphs"].as_array().expect("paragraphs") {
            let questions = paragraph["qas"]
                .as_array()
                .expect("qas")
                .iter()
                .map(|qa| Question {
                    question: qa["question"].as_str().expect("question").to_string(),
                    answers: qa["answers"]
                        .as_array()
                        .expect("answers")
                        .iter()
                        .map(|a| a["text"].as_str().expect("text").to_string())
                        .collect(),
                })
                .collect();
            paragraphs.push(Paragraph {
                context: paragraph["context"].as_str().expect("context").to_string(),
                questions,
            });
        }
    }
    paragraphs
}

/// Rough sentences: good enough to build test inputs.
fn sentences(text: &str) -> Vec<String> {
    text.split(". ")
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}

fn sentence_with<'a>(sentences: &'a [String], answer: &str, fallback: &'a str) -> &'a str {
    sentences
        .iter()
        .find(|s| s.contains(answer))
        .map_or(fallback, String::as_str)
}

const EDGE_CASES: &[&str] = &[
    "",
    " ",
    "\n",
    "\n\n\n",
    "!!! ... --- ???",
    "a",
    "A",
    "the",
    "The the THE the",
    "İstanbul İSTANBUL istanbul",
    "Kelvin \u{212A}elvin KELVIN",
    "Straße STRASSE strasse",
    "café naïve résumé cafe",
    "日本語のテキスト 東京 Tokyo",
    "emoji 😀 party 🎉 time",
    "1,234.56 and 3rd 1990s 2015–16 1234",
    "running runs ran runner run",
    "caresses ponies ties flies dying lying skies",
    "multi\nline\n\ntext here\r\nwith crlf",
    "  leading and trailing  \n  ",
    "ǅungla Ǆ ǆ dzungla",
    "x\u{0301}y AbC-dEf_GhI",
    "e.g. i.e. U.S.A. usa",
    "yyyy syzygy sky skies happy",
    "line one\nline two\nline one\nline three",
];

fn build_items(paragraphs: &[Paragraph]) -> Vec<RougeItem> {
    let mut rng = Rng(0x5eed_1ec7_0123_4567);
    let mut items = Vec::new();
    let mut push = |kind: &str, prediction: String, references: Vec<String>| {
        let id = format!("{kind}-{}", items.len());
        items.push(RougeItem {
            id,
            prediction,
            references,
        });
    };
    // Spread the picks over the whole file.
    let stride = paragraphs.len() / 120;
    let picks: Vec<&Paragraph> = paragraphs.iter().step_by(stride.max(1)).collect();

    for (k, p) in picks.iter().enumerate() {
        let sents = sentences(&p.context);
        let q = &p.questions[k % p.questions.len()];
        let answer = q.answers[0].clone();
        let sentence = sentence_with(&sents, &answer, &p.context).to_string();

        // Answer against all gold answers (several references, often identical: ties).
        let other = &q.answers[q.answers.len() - 1];
        push("answers", other.clone(), q.answers.clone());
        // A sentence as the prediction, the answer as the reference, and the reverse.
        push("sentence", sentence.clone(), vec![answer.clone()]);
        push("answer", answer.clone(), vec![sentence.clone()]);
        // The question against its sentence and the whole context.
        push(
            "question",
            q.question.clone(),
            vec![sentence.clone(), p.context.clone()],
        );

        // Shuffled and damaged copies.
        let words: Vec<&str> = sentence.split_whitespace().collect();
        let mut shuffled = words.clone();
        rng.shuffle(&mut shuffled);
        push("shuffled", shuffled.join(" "), vec![sentence.clone()]);
        let other_words: Vec<&str> = p.context.split_whitespace().collect();
        let damaged: Vec<&str> = words
            .iter()
            .filter_map(|w| match rng.below(10) {
                0..=2 => None,
                3 => Some(other_words[rng.below(other_words.len())]),
                _ => Some(*w),
            })
            .collect();
        push(
            "damaged",
            damaged.join(" "),
            vec![sentence.clone(), shuffled.join(" ")],
        );

        // Multi-line texts for ROUGE-Lsum: a subset of the sentences, reordered, some repeated,
        // with blank lines, CRLF and stray spaces.
        let mut lines: Vec<String> = sents.iter().filter(|_| rng.below(3) > 0).cloned().collect();
        rng.shuffle(&mut lines);
        if !lines.is_empty() && rng.below(2) == 0 {
            let repeated = lines[rng.below(lines.len())].clone();
            lines.push(repeated);
        }
        let separator = match rng.below(4) {
            0 => "\n",
            1 => "\n\n",
            2 => "\r\n",
            _ => " \n ",
        };
        let reference_lines = sents.join("\n");
        push(
            "lines",
            lines.join(separator),
            vec![reference_lines.clone()],
        );
        if k % 3 == 0 {
            let mut half: Vec<String> = sents.iter().take(sents.len() / 2 + 1).cloned().collect();
            rng.shuffle(&mut half);
            push(
                "lines-multi",
                lines.join("\n"),
                vec![half.join("\n"), reference_lines.clone(), q.question.clone()],
            );
        }
        // Long texts: a context against the next paragraph's, and against itself.
        if k % 6 == 0 {
            let next = &picks[(k + 1) % picks.len()].context;
            push("long", p.context.clone(), vec![next.clone()]);
            push("self", reference_lines.clone(), vec![p.context.clone()]);
        }
    }

    // Edge cases, every prediction against every reference, and a few reference sets.
    for prediction in EDGE_CASES {
        for reference in EDGE_CASES {
            push("edge", prediction.to_string(), vec![reference.to_string()]);
        }
        push(
            "edge-multi",
            prediction.to_string(),
            EDGE_CASES.iter().map(|s| s.to_string()).collect(),
        );
        push(
            "edge-empty-refs",
            prediction.to_string(),
            vec![String::new(), "...".into()],
        );
    }
    items
}

fn temp_path(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("lector-rouge-parity-{}-{name}", std::process::id()))
}

fn reference_script() -> PathBuf {
    support::repo_root().join("tools/rouge_reference.py")
}

const TYPES: [&str; 4] = ["rouge1", "rouge2", "rougeL", "rougeLsum"];

#[test]
fn scores_match_rouge_score() {
    let paragraphs = squad_paragraphs();
    let items = build_items(&paragraphs);
    let path = temp_path("items.jsonl");
    let jsonl: String = items
        .iter()
        .map(|item| {
            serde_json::json!({
                "id": item.id,
                "prediction": item.prediction,
                "references": item.references,
            })
            .to_string()
                + "\n"
        })
        .collect();
    std::fs::write(&path, jsonl).expect("write items");
    // The file reads back through the public reader unchanged.
    assert_eq!(read_items(&path).expect("read items"), items);

    let mut compared = 0;
    let mut bit_identical = 0;
    let mut max_diff = 0.0f64;
    let mut failures = Vec::new();
    for stem in [false, true] {
        let mut args = vec!["score".as_ref(), path.as_os_str()];
        if stem {
            args.push("--stem".as_ref());
        }
        let output = support::run_python(&reference_script(), &args);
        let rows: Vec<Value> = output
            .lines()
            .map(|line| serde_json::from_str(line).expect("reference JSON"))
            .collect();
        assert_eq!(rows.len(), items.len(), "one reference row per item");
        let scorer = RougeScorer::new(stem);
        for (item, row) in items.iter().zip(&rows) {
            assert_eq!(row["id"].as_str(), Some(item.id.as_str()));
            let ours = serde_json::to_value(scorer.score(&item.prediction, &item.references))
                .expect("serialize");
            for rouge_type in TYPES {
                let theirs = row[rouge_type].as_array().expect("three numbers");
                for (k, field) in ["precision", "recall", "fmeasure"].into_iter().enumerate() {
                    let a = ours[rouge_type][field].as_f64().expect("ours");
                    let b = theirs[k].as_f64().expect("theirs");
                    compared += 1;
                    let diff = (a - b).abs();
                    max_diff = max_diff.max(diff);
                    if a.to_bits() == b.to_bits() {
                        bit_identical += 1;
                    }
                    if diff > 1e-6 && failures.len() < 20 {
                        failures.push(format!(
                            "{} stem={stem} {rouge_type}.{field}: ours {a} rouge-score {b}\n  prediction {:?}\n  references {:?}",
                            item.id, item.prediction, item.references
                        ));
                    }
                }
            }
        }
    }
    std::fs::remove_file(&path).ok();
    println!(
        "rouge parity: {} items x 2 (stem off/on), {compared} values, {bit_identical} bit-identical, max |diff| {max_diff:e}",
        items.len()
    );
    assert!(failures.is_empty(), "differences:\n{}", failures.join("\n"));
    assert_eq!(
        bit_identical, compared,
        "all values should be bit-identical"
    );
}

#[test]
fn tokens_and_stems_match_rouge_score() {
    let paragraphs = squad_paragraphs();
    // Every distinct whitespace-separated word of the contexts and questions (with its case,
    // punctuation and Unicode), every distinct token of them, and whole contexts.
    let mut words = BTreeSet::new();
    let mut texts = Vec::new();
    for p in &paragraphs {
        texts.push(p.context.clone());
        let questions = p.questions.iter().map(|q| q.question.as_str());
        for text in std::iter::once(p.context.as_str()).chain(questions) {
            for word in text.split_whitespace() {
                words.insert(word.to_string());
                for token in tokenize(word, false) {
                    words.insert(token);
                }
            }
        }
    }
    for edge in EDGE_CASES {
        texts.push(edge.to_string());
    }
    let stemmer_inputs: BTreeSet<&String> = words
        .iter()
        .filter(|w| {
            w.len() > 3
                && w.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        })
        .collect();
    let lines: Vec<String> = words.iter().cloned().chain(texts).collect();
    let path = temp_path("texts.jsonl");
    let jsonl: String = lines
        .iter()
        .map(|line| serde_json::to_string(line).expect("JSON string") + "\n")
        .collect();
    std::fs::write(&path, jsonl).expect("write texts");

    let mut stems_changed = 0;
    for stem in [false, true] {
        let mut args = vec!["tokens".as_ref(), path.as_os_str()];
        if stem {
            args.push("--stem".as_ref());
        }
        let output = support::run_python(&reference_script(), &args);
        let expected: Vec<Vec<String>> = output
            .lines()
            .map(|line| serde_json::from_str(line).expect("reference JSON"))
            .collect();
        assert_eq!(expected.len(), lines.len(), "one token list per line");
        let mut mismatches = Vec::new();
        for (line, theirs) in lines.iter().zip(&expected) {
            let ours = tokenize(line, stem);
            if &ours != theirs && mismatches.len() < 20 {
                mismatches.push(format!("{line:?}: ours {ours:?}, rouge-score {theirs:?}"));
            }
            if stem && stemmer_inputs.contains(line) && theirs.first() != Some(line) {
                stems_changed += 1;
            }
        }
        assert!(
            mismatches.is_empty(),
            "stem={stem}, tokens differ:\n{}",
            mismatches.join("\n")
        );
    }
    std::fs::remove_file(&path).ok();
    println!(
        "tokenizer parity: {} lines ({} distinct words and tokens), {} stemmer inputs (tokens longer than 3) of which NLTK changes {stems_changed}",
        lines.len(),
        words.len(),
        stemmer_inputs.len()
    );
    assert!(stemmer_inputs.len() > 5000);
}
