//! The shipped reader on hand-written and SQuAD inputs: answers, offsets, windows, errors.
mod common;

use common::{first_article, reader};
use lector_reader::window::{build_window, special_tokens_for_pair, Layout};
use lector_reader::{Error, ReadParams};

fn params() -> ReadParams {
    ReadParams::default()
}

fn chars(text: &str, start: usize, end: usize) -> String {
    text.chars().skip(start).take(end - start).collect()
}

#[test]
fn answers_a_simple_question() {
    let context = "The Eiffel Tower is a wrought-iron tower in Paris. It was completed in 1889 for the World's Fair.";
    let p = reader()
        .answer("When was the Eiffel Tower completed?", context, &params())
        .unwrap();
    assert_eq!(p.answers[0].answer, "1889");
    assert_eq!(chars(context, p.answers[0].start, p.answers[0].end), "1889");
    assert!(p.answers[0].score > 0.0 && p.na_prob > 0.0 && p.na_prob < 1.0);
}

#[test]
fn offsets_are_characters_on_non_ascii_text() {
    let context =
        "Ça coûte cher à Zürich 🏔️ — the café « Über » opened in 1921 in São Paulo, naïvely.";
    let mut prm = params();
    prm.top_k = 5;
    let p = reader()
        .answer("When did the café open?", context, &prm)
        .unwrap();
    assert!(!p.answers.is_empty());
    for a in &p.answers {
        assert_eq!(chars(context, a.start, a.end), a.answer, "{a:?}");
    }
    assert!(
        p.answers.iter().any(|a| a.answer.contains("1921")),
        "{:?}",
        p.answers
    );
}

#[test]
fn top_k_answers_are_ranked_and_distinct() {
    let context =
        "Marie Curie was born in Warsaw in 1867. She moved to Paris in 1891 and died in 1934.";
    let mut prm = params();
    prm.top_k = 4;
    let p = reader()
        .answer("Where was Marie Curie born?", context, &prm)
        .unwrap();
    assert_eq!(p.answers.len(), 4);
    assert_eq!(p.answers[0].answer, "Warsaw");
    for pair in p.answers.windows(2) {
        assert!(pair[0].score >= pair[1].score);
        assert_ne!(pair[0].answer.to_lowercase(), pair[1].answer.to_lowercase());
    }
}

#[test]
fn windows_cover_every_context_token() {
    let ckpt = reader().checkpoint();
    let article = first_article("dev-v1.1.json").join("\n");
    let context = ckpt.tokenizer.encode(article.as_str(), false).unwrap();
    let question = ckpt.tokenizer.encode("What is this about?", false).unwrap();
    let special = special_tokens_for_pair(&ckpt.tokenizer);
    assert_eq!(special, 3);
    let layout = Layout::new(384, 128, question.len(), special).unwrap();
    let ranges = layout.ranges(context.len()).unwrap();
    assert!(ranges.len() > 5, "a long article needs many windows");
    let mut covered = vec![false; context.len()];
    for range in ranges {
        let w = build_window(
            &ckpt.tokenizer,
            &question,
            &context,
            range.clone(),
            ckpt.cls_token_id,
        )
        .unwrap();
        assert!(w.ids.len() <= 384);
        let first = w.first_context_pos;
        assert_eq!(
            &w.ids[first..first + range.len()],
            &context.get_ids()[range.clone()]
        );
        assert_eq!(
            w.ids[first + range.len()],
            ckpt.tokenizer.token_to_id("[SEP]").unwrap()
        );
        assert!(
            w.desired[0] && !w.desired[1] && w.desired[first] && !w.desired[first + range.len()]
        );
        range.for_each(|t| covered[t] = true);
    }
    assert!(
        covered.iter().all(|&c| c),
        "some context token is in no window"
    );
}

#[test]
fn finds_an_answer_in_the_last_sentence_of_a_long_article() {
    let mut article = first_article("dev-v1.1.json").join("\n");
    article.push_str("\nThe archive's secret access code, chosen by the curator in 1977, is 4711.");
    let p = reader()
        .answer(
            "What is the archive's secret access code?",
            &article,
            &params(),
        )
        .unwrap();
    assert_eq!(p.answers[0].answer, "4711");
    let start = article.chars().count() - "4711.".chars().count();
    assert_eq!(p.answers[0].start, start);
}

#[test]
fn long_questions_are_truncated_and_flagged() {
    let question = format!("{} what year?", "very ".repeat(100));
    let p = reader()
        .answer(&question, "It happened in 1999.", &params())
        .unwrap();
    assert!(p.question_truncated);
    let p = reader()
        .answer("What year?", "It happened in 1999.", &params())
        .unwrap();
    assert!(!p.question_truncated);
}

#[test]
fn impossible_answer_is_appended_and_ranked() {
    let mut prm = params();
    prm.handle_impossible_answer = true;
    prm.top_k = 100;
    let p = reader()
        .answer(
            "What colour is the sky on Mars?",
            "Bread is made of flour.",
            &prm,
        )
        .unwrap();
    let null = p
        .answers
        .iter()
        .find(|a| a.answer.is_empty())
        .expect("null answer");
    assert_eq!((null.start, null.end), (0, 0));
    assert_eq!(null.score, p.null_score);
    let best = p
        .answers
        .iter()
        .filter(|a| !a.answer.is_empty())
        .map(|a| a.score)
        .fold(0.0, f64::max);
    assert!((p.na_prob - p.null_score / (p.null_score + best)).abs() < 1e-12);
}

#[test]
fn bad_inputs_are_errors_not_panics() {
    let r = reader();
    assert!(matches!(
        r.answer("", "Some context.", &params()),
        Err(Error::EmptyQuestion)
    ));
    assert!(matches!(
        r.answer("Why?", "  \n", &params()),
        Err(Error::EmptyContext)
    ));
    let huge = "word ".repeat(lector_reader::MAX_CONTEXT_BYTES / 5 + 1);
    assert!(matches!(
        r.answer("Why?", &huge, &params()),
        Err(Error::ContextTooLong(_))
    ));
    let mut prm = params();
    prm.max_seq_len = 100;
    prm.doc_stride = 95;
    assert!(
        r.answer("Why?", "Because.", &prm).is_ok(),
        "one window needs no stride"
    );
    let long = "Because it rained all day. ".repeat(30);
    assert!(matches!(
        r.answer("Why?", &long, &prm),
        Err(Error::Params(_))
    ));
}

#[test]
fn batching_does_not_change_answers() {
    let questions = common::squad_questions("dev-v1.1.json", 16);
    let queries: Vec<_> = questions
        .iter()
        .map(|(_, q, c)| lector_reader::Query {
            question: q,
            context: c,
        })
        .collect();
    let mut one = params();
    one.batch_size = 1;
    let mut many = params();
    many.batch_size = 16;
    let a = reader().answer_batch(&queries, &one, &mut |_| {}).unwrap();
    let b = reader().answer_batch(&queries, &many, &mut |_| {}).unwrap();
    for (x, y) in a.iter().zip(&b) {
        assert_eq!(x.answers[0].answer, y.answers[0].answer);
        assert!((x.answers[0].score - y.answers[0].score).abs() < 1e-4);
    }
}

#[test]
fn token_probabilities_peak_on_the_answer_and_leave_answers_alone() {
    let context = "The Eiffel Tower is a wrought-iron tower in Paris. It was completed in 1889 for the World's Fair.";
    let question = "When was the Eiffel Tower completed?";
    let before = reader().answer(question, context, &params()).unwrap();
    let windows = reader()
        .token_probabilities(question, context, &params())
        .unwrap();
    let after = reader().answer(question, context, &params()).unwrap();
    assert_eq!(before.answers, after.answers);
    assert_eq!(windows.len(), 1);
    let w = &windows[0];
    // The context tokens share the probability mass with the CLS position (the null).
    let mass: f32 = w.tokens.iter().map(|t| t.p_start).sum();
    assert!(mass > 0.5 && mass <= 1.0 + 1e-5, "mass {mass}");
    let best = |p: fn(&lector_reader::TokenProbability) -> f32| {
        w.tokens
            .iter()
            .max_by(|a, b| p(a).total_cmp(&p(b)))
            .unwrap()
    };
    let (s, e) = (best(|t| t.p_start), best(|t| t.p_end));
    assert_eq!(chars(context, s.start, e.end), "1889");
    assert_eq!(w.tokens.first().unwrap().start, 0);
    assert_eq!(w.tokens.last().unwrap().end, context.chars().count());
}
