//! Prompt files and few-shot examples from the command line: what `ask --generate` and `eval
//! generative` send (recorded by a scripted OpenAI-compatible endpoint over real HTTP), the
//! reasoning kept apart from the answer, and bad prompt files named in errors. The bundled
//! sample indexed on disk; SQuAD questions from the bundled sample.

mod common;

use common::{fails, index, lector, ok, sample, scripted_endpoint};
use serde_json::Value;
use std::path::Path;
use std::sync::{Arc, Mutex};

const REPLY: &str = "The passage names the winner.\nAnswer: Denver Broncos [1]";

/// A chain-of-thought prompt in YAML with its own layout.
fn write_prompt(dir: &Path) -> String {
    let path = dir.join("reasoned.yaml");
    std::fs::write(
        &path,
        "name: reasoned\n\
         reasoning:\n  answer_marker: \"Answer:\"\n\
         open_book:\n  system: \"Reason first. If unsure: {{ refusal }}\"\n  \
         user: \"<docs>\\n{{ passages }}</docs>\\nQ: {{ question }}\"\n\
         closed_book:\n  system: \"Reason, then answer.\"\n  user: \"Q: {{ question }}\"\n",
    )
    .unwrap();
    path.to_string_lossy().into_owned()
}

fn write_examples(dir: &Path) -> String {
    let path = dir.join("examples.jsonl");
    let lines = [
        r#"{"question": "Who won Super Bowl XLIX?", "answer": "New England Patriots", "context": "The New England Patriots beat the Seattle Seahawks in Super Bowl XLIX.", "reasoning": "The passage says the Patriots beat the Seahawks."}"#,
        r#"{"question": "Where was Super Bowl XLIX played?", "answer": "Glendale, Arizona", "context": "Super Bowl XLIX was played in Glendale, Arizona."}"#,
        r#"{"question": "Who sang at halftime of Super Bowl XLIX?", "answer": "Katy Perry", "context": "Katy Perry headlined the halftime show of Super Bowl XLIX."}"#,
    ];
    std::fs::write(&path, lines.join("\n")).unwrap();
    path.to_string_lossy().into_owned()
}

/// Runs `args` against a scripted endpoint replying [`REPLY`]; the output and the requests'
/// bodies.
fn with_endpoint(args: &[&str]) -> (String, Vec<Value>) {
    let requests = Arc::new(Mutex::new(Vec::new()));
    let url = scripted_endpoint(REPLY, requests.clone());
    let mut all = args.to_vec();
    all.extend(["--endpoint", &url, "--api-model", "scripted"]);
    let out = ok(&lector(&all));
    let sent = requests.lock().unwrap();
    let bodies = sent
        .iter()
        .map(|b| serde_json::from_str(b).unwrap())
        .collect();
    (out, bodies)
}

fn roles_and_contents(body: &Value) -> Vec<(String, String)> {
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["role"].as_str().unwrap().to_string(),
                m["content"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[test]
fn ask_sends_the_prompt_file_with_examples_and_keeps_the_reasoning_apart() {
    let dir = tempfile::tempdir().unwrap();
    let index = index(dir.path());
    let prompt = write_prompt(dir.path());
    let examples = write_examples(dir.path());
    let question = "Who won Super Bowl 50?";
    let (out, bodies) = with_endpoint(&[
        "ask",
        question,
        "--index",
        &index,
        "--generate",
        "--prompt",
        &prompt,
        "--examples",
        &examples,
        "--shots",
        "2",
        "--json",
    ]);
    assert_eq!(bodies.len(), 1);
    let messages = roles_and_contents(&bodies[0]);
    let roles: Vec<&str> = messages.iter().map(|(r, _)| r.as_str()).collect();
    assert_eq!(
        roles,
        ["system", "user", "assistant", "user", "assistant", "user"]
    );
    assert_eq!(
        messages[0].1,
        "Reason first. If unsure: The answer cannot be determined from the provided context."
    );
    // The first two examples, each with its passage as [1], its reasoning and the marker.
    assert!(messages[1]
        .1
        .starts_with("<docs>\n[1]\n\"The New England Patriots beat"));
    assert!(messages[1]
        .1
        .ends_with("</docs>\nQ: Who won Super Bowl XLIX?"));
    assert_eq!(
        messages[2].1,
        "The passage says the Patriots beat the Seahawks.\nAnswer: New England Patriots [1]"
    );
    assert_eq!(messages[4].1, "Answer: Glendale, Arizona [1]");
    assert!(messages[5].1.ends_with(&format!("</docs>\nQ: {question}")));
    assert!(
        messages[5].1.contains("[1] (from "),
        "retrieved passages: {}",
        messages[5].1
    );
    let out: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(out["text"], "Denver Broncos [1]");
    assert_eq!(out["answer"]["short_answer"], "Denver Broncos");
    assert_eq!(out["reasoning"], "The passage names the winner.");
    assert_eq!(
        out["generation"]["text"], REPLY,
        "the model's whole reply is kept"
    );
}

#[test]
fn closed_book_uses_the_prompt_s_closed_book_turns() {
    let dir = tempfile::tempdir().unwrap();
    let prompt = write_prompt(dir.path());
    let (_, bodies) = with_endpoint(&[
        "ask",
        "Who won Super Bowl 50?",
        "--generate",
        "--closed-book",
        "--prompt",
        &prompt,
        "--json",
    ]);
    let messages = roles_and_contents(&bodies[0]);
    assert_eq!(
        messages,
        [
            ("system".to_string(), "Reason, then answer.".to_string()),
            ("user".to_string(), "Q: Who won Super Bowl 50?".to_string()),
        ]
    );
}

#[test]
fn eval_generative_takes_a_prompt_and_similar_examples_and_writes_the_reasoning() {
    let dir = tempfile::tempdir().unwrap();
    let examples = write_examples(dir.path());
    let rows = dir.path().join("rows.jsonl");
    let sample = sample();
    let (out, bodies) = with_endpoint(&[
        "eval",
        "generative",
        "--squad",
        &sample.to_string_lossy(),
        "--limit",
        "2",
        "--no-reader",
        "--prompt",
        "chain-of-thought",
        "--examples",
        &examples,
        "--shots",
        "1",
        "--select",
        "similar",
        "--per-question",
        &rows.to_string_lossy(),
        "--json",
    ]);
    assert_eq!(bodies.len(), 2);
    for body in &bodies {
        let messages = roles_and_contents(body);
        assert_eq!(messages.len(), 4, "one example: {messages:?}");
        assert!(messages[0].1.contains("step by step"));
        // The nearest example to a question about who played is the one about who won.
        assert!(
            messages[1].1.contains("Question: Who won Super Bowl XLIX?"),
            "{}",
            messages[1].1
        );
    }
    assert_eq!(
        bodies[0]["max_tokens"], 256,
        "the prompt's own max_new_tokens"
    );
    let out: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(out["questions"], 2);
    let text = std::fs::read_to_string(&rows).unwrap();
    for line in text.lines() {
        let row: Value = serde_json::from_str(line).unwrap();
        assert_eq!(row["reasoning"], "The passage names the winner.");
        assert_eq!(row["generated"], "Denver Broncos [1]");
    }
}

#[test]
fn bad_prompt_files_and_examples_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.toml");
    std::fs::write(
        &bad,
        "[closed_book]\nsystem = \"s\"\nuser = \"{{ qestion }}\"\n",
    )
    .unwrap();
    let bad = bad.to_string_lossy().into_owned();
    let err = fails(&lector(&[
        "ask",
        "Who?",
        "--generate",
        "--closed-book",
        "--prompt",
        &bad,
    ]));
    assert!(
        err.contains(&bad) && err.contains("unknown variable `qestion`"),
        "{err}"
    );
    let examples = dir.path().join("examples.jsonl");
    std::fs::write(
        &examples,
        "{\"question\": \"Who?\", \"answer\": \"A\"}\n{\"question\": \"Who?\"}\n",
    )
    .unwrap();
    let err = fails(&lector(&[
        "ask",
        "Who?",
        "--generate",
        "--closed-book",
        "--examples",
        &examples.to_string_lossy(),
    ]));
    assert!(
        err.contains("examples.jsonl:2") && err.contains("missing field `answer`"),
        "{err}"
    );
    let err = fails(&lector(&[
        "ask",
        "Who?",
        "--generate",
        "--closed-book",
        "--prompt",
        "no-such-prompt",
    ]));
    assert!(err.contains("no-such-prompt: no such prompt file, nor a shipped prompt of that name (default, chain-of-thought)"), "{err}");
}
