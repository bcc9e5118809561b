//! The judge on the real SmolLM2-135M-Instruct GGUF (a smoke run: a 135M model judges poorly,
//! so only that it runs, that each reply is read or counted unparseable, and that the counts add
//! up are checked), and the batch runner's error path with a generator that fails on one item.

mod common;

use common::generator;
use lector_eval::stats::Bootstrap;
use lector_generate::judge::batch::judge_items;
use lector_generate::judge::cache::Cache;
use lector_generate::judge::items::{read_items, Item};
use lector_generate::judge::report::summarise;
use lector_generate::judge::{Judge, Mode, Verdict};
use lector_generate::{
    Error, FinishReason, GenerateOptions, Generation, Generator, Message, OnToken, Timings,
};
use std::path::Path;

fn items(dir: &Path, mode: Mode, lines: &[&str]) -> Vec<Item> {
    let path = dir.join("items.jsonl");
    std::fs::write(&path, lines.join("\n")).unwrap();
    read_items(&path, mode).unwrap()
}

fn short() -> GenerateOptions {
    GenerateOptions {
        max_new_tokens: 16,
        ..GenerateOptions::default()
    }
}

#[test]
fn smollm2_judges_a_few_items_and_the_counts_add_up() {
    let dir = tempfile::tempdir().unwrap();
    let q = "Which NFL team represented the AFC at Super Bowl 50?";
    let pointwise = items(
        dir.path(),
        Mode::Correctness,
        &[
            &format!("{{\"question\": \"{q}\", \"references\": [\"Denver Broncos\"], \"answer\": \"Denver Broncos\", \"label\": \"correct\"}}"),
            &format!("{{\"question\": \"{q}\", \"references\": [\"Denver Broncos\"], \"answer\": \"Carolina Panthers\", \"label\": \"incorrect\"}}"),
        ],
    );
    let judge = Judge::new(generator(), short())
        .unwrap()
        .with_cache(Cache::open(&dir.path().join("cache")).unwrap());
    let outcomes = judge_items(&judge, Mode::Correctness, &pointwise, 2, &|| ()).unwrap();
    let summary = summarise(
        judge.model(),
        Mode::Correctness,
        &pointwise,
        &outcomes,
        judge.cost(),
        0.0,
        &Bootstrap::default(),
    );
    let counted: usize = summary.verdicts.iter().map(|(_, n)| n).sum();
    assert_eq!((counted, summary.items, summary.replies), (2, 2, 2));
    assert!(summary.unparseable_replies <= summary.replies);
    let unparseable = outcomes
        .iter()
        .filter(|o| o.verdict() == Verdict::Unparseable)
        .count();
    assert_eq!(unparseable, summary.unparseable_replies);
    assert_eq!((summary.cost.requests, summary.cost.cached), (2, 0));
    assert!(summary.cost.prompt_tokens > 100 && summary.cost.generated_tokens > 0);
    assert_eq!(judge.cache().unwrap().len(), 2);

    let pairs = items(
        dir.path(),
        Mode::Pairwise,
        &[&format!("{{\"question\": \"{q}\", \"reference\": \"Denver Broncos\", \"answer_a\": \"Denver Broncos\", \"answer_b\": \"Carolina Panthers\", \"label\": \"A\"}}")],
    );
    let outcomes = judge_items(&judge, Mode::Pairwise, &pairs, 1, &|| ()).unwrap();
    let replies = outcomes[0].replies();
    assert_eq!(replies.len(), 2);
    assert!(replies.iter().all(|j| !j.cached));
    assert_eq!(judge.cost().requests, 4);

    let claim = judge
        .claim_supported(
            "The Broncos won Super Bowl 50.",
            "The Denver Broncos defeated the Carolina Panthers to win Super Bowl 50.",
        )
        .unwrap();
    assert!(
        [
            Verdict::Supported,
            Verdict::NotSupported,
            Verdict::Unparseable
        ]
        .contains(&claim.verdict),
        "{claim:?}"
    );
    // The same items again come from the cache.
    judge_items(&judge, Mode::Correctness, &pointwise, 2, &|| ()).unwrap();
    assert_eq!((judge.cost().requests, judge.cost().cached), (5, 2));
}

/// Replies "Verdict: correct" at once, and fails on prompts mentioning "boom".
struct Scripted;

impl Generator for Scripted {
    fn name(&self) -> String {
        "scripted".into()
    }

    fn context_window(&self) -> usize {
        4096
    }

    fn count_tokens(&self, messages: &[Message]) -> lector_generate::Result<usize> {
        Ok(messages.iter().map(|m| m.content.len()).sum())
    }

    fn generate(
        &self,
        messages: &[Message],
        _options: &GenerateOptions,
        _on_token: &mut OnToken<'_>,
    ) -> lector_generate::Result<Generation> {
        if messages.iter().any(|m| m.content.contains("boom")) {
            return Err(Error::Endpoint {
                url: "scripted".into(),
                message: "status 500 after 3 retries".into(),
            });
        }
        Ok(Generation {
            text: "Verdict: correct".into(),
            finish_reason: FinishReason::EndOfText,
            timings: Timings::default(),
        })
    }
}

#[test]
fn a_failing_request_stops_the_run_and_names_the_item() {
    let dir = tempfile::tempdir().unwrap();
    let good = "{\"question\": \"Q?\", \"references\": [\"a\"], \"answer\": \"a\"}";
    let bad =
        "{\"id\": \"x7\", \"question\": \"Q?\", \"references\": [\"a\"], \"answer\": \"boom\"}";
    let items = items(dir.path(), Mode::Correctness, &[good, bad, good]);
    let judge = Judge::new(&Scripted, GenerateOptions::default()).unwrap();
    let err = judge_items(&judge, Mode::Correctness, &items, 1, &|| ()).unwrap_err();
    let message = err.to_string();
    assert!(
        message.contains("x7 (line 2)") && message.contains("status 500"),
        "{message}"
    );
    // One thread: the item after the failing one is never asked.
    assert_eq!(judge.cost().requests, 1);
}
