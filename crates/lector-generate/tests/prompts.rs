//! Prompt files on the real SmolLM2-135M-Instruct: the shipped chain-of-thought prompt streams
//! only the answer and keeps the reasoning apart; a YAML prompt equals its TOML twin; few-shot
//! examples reach the model as earlier turns.

mod common;

use common::generator;
use lector_generate::grounded::{self, Layout, Passage};
use lector_generate::prompt::{Example, Prompt};
use lector_generate::{GenerateOptions, Generator};
use std::ops::ControlFlow;
use std::sync::Arc;

fn passages() -> Vec<Passage> {
    vec![Passage {
        doc_id: "sb50".into(),
        title: Some("Super Bowl 50".into()),
        text: "The Denver Broncos defeated the Carolina Panthers 24-10 to earn their third Super Bowl title.".into(),
    }]
}

#[test]
fn chain_of_thought_streams_only_the_answer_and_keeps_the_reasoning() {
    let prompt = Prompt::shipped("chain-of-thought").unwrap();
    let options = GenerateOptions {
        max_new_tokens: prompt.max_new_tokens().unwrap(),
        ..GenerateOptions::default()
    };
    let layout = Layout {
        prompt: Arc::new(prompt),
        ..Layout::default()
    };
    let mut streamed = String::new();
    let answered = grounded::answer_with(
        generator(),
        "Who won Super Bowl 50?",
        Some(&passages()),
        &options,
        &layout,
        &mut |t| {
            streamed.push_str(t);
            ControlFlow::Continue(())
        },
    )
    .unwrap();
    let reasoning = answered
        .reasoning
        .as_deref()
        .expect("a reasoning prompt keeps the reasoning");
    let raw = &answered.generation.text;
    // Whatever the small model wrote, the parts add up: the reasoning before the marker's line,
    // the answer after the marker, and only the answer streamed.
    let marker = layout.prompt.reasoning().expect("a reasoning prompt");
    let (before, after) = marker.split(raw);
    assert_eq!(reasoning, before, "{raw}");
    match after {
        Some(after) => {
            assert_eq!(answered.answer.text, after, "{raw}");
            assert_eq!(streamed.trim(), after.trim(), "{raw}");
        }
        None => {
            assert!(
                answered.answer.text.is_empty() && streamed.is_empty(),
                "{raw}"
            );
            assert_eq!(reasoning, raw.trim());
        }
    }
    let json = serde_json::to_value(&answered).unwrap();
    assert_eq!(json["reasoning"].as_str(), Some(reasoning));
    // The default prompt writes no reasoning field.
    let plain = grounded::answer(
        generator(),
        "Who won?",
        Some(&passages()),
        &GenerateOptions::default(),
        &mut |_| ControlFlow::Continue(()),
    )
    .unwrap();
    assert!(serde_json::to_value(&plain)
        .unwrap()
        .get("reasoning")
        .is_none());
}

#[test]
fn a_yaml_prompt_equals_its_toml_twin() {
    let toml = "name = \"terse\"\n[closed_book]\nsystem = \"One word only.\"\nuser = \"Q: {{ question }}\"\n";
    let yaml =
        "name: terse\nclosed_book:\n  system: One word only.\n  user: \"Q: {{ question }}\"\n";
    let dir = tempfile::tempdir().unwrap();
    for (file, text) in [("terse.toml", toml), ("terse.yaml", yaml)] {
        std::fs::write(dir.path().join(file), text).unwrap();
    }
    let a = Prompt::load(&dir.path().join("terse.toml")).unwrap();
    let b = Prompt::load(&dir.path().join("terse.yaml")).unwrap();
    assert_eq!(a.closed_book(), b.closed_book());
    assert_eq!(
        a.open_book(),
        Prompt::default().open_book(),
        "left-out sections are the default's"
    );
    let layout = |p: Prompt| Layout {
        prompt: Arc::new(p),
        ..Layout::default()
    };
    let messages = grounded::closed_book_with("Capital of France?", &layout(b)).unwrap();
    assert_eq!(messages[1].content, "Q: Capital of France?");
    let bad = dir.path().join("bad.yaml");
    std::fs::write(
        &bad,
        "closed_book:\n  system: x\n  user: \"{{ questions }}\"\n",
    )
    .unwrap();
    let err = Prompt::load(&bad).unwrap_err().to_string();
    assert!(
        err.starts_with(&bad.display().to_string()) && err.contains("unknown variable `questions`"),
        "{err}"
    );
    assert!(Prompt::resolve("no-such-prompt").is_err());
}

#[test]
fn few_shot_examples_are_counted_in_the_prompt_that_is_fitted() {
    let example = Example {
        question: "Who won Super Bowl XLIX?".into(),
        answer: "New England Patriots".into(),
        context: Some(
            "The New England Patriots won Super Bowl XLIX against the Seattle Seahawks.".into(),
        ),
        title: Some("Super Bowl XLIX".into()),
        reasoning: None,
    };
    let g: &dyn Generator = generator();
    let bare = grounded::open_book(g, "Who won Super Bowl 50?", &passages(), 32).unwrap();
    let layout = Layout {
        examples: vec![example.clone(), example],
        ..Layout::default()
    };
    let shots =
        grounded::open_book_with(g, "Who won Super Bowl 50?", &passages(), 32, &layout).unwrap();
    assert_eq!(shots.messages.len(), bare.messages.len() + 4);
    assert!(
        shots.prompt_tokens > bare.prompt_tokens + 60,
        "{} vs {}",
        shots.prompt_tokens,
        bare.prompt_tokens
    );
    assert_eq!(shots.messages[2].content, "New England Patriots [1]");
}
