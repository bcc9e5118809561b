//! lector-eval: the evaluation toolkit of lector, with no machine-learning dependencies.
//!
//! - [`squad`]: EM/F1 identical to the official SQuAD v1.1 and v2.0 scripts, no-answer thresholds.
//! - [`hotpot`]: HotpotQA answer, supporting-fact and joint metrics identical to the official script.
//! - [`rouge`]: ROUGE-1/2/L/Lsum identical to Google's `rouge-score` package.
//! - [`retrieval`]: trec_eval-compatible ranking metrics and answer-containment recall.
//! - [`stats`]: bootstrap confidence intervals and paired significance tests.
//! - [`adversarial`]: AddSent- and AddAny-style distractor sentences (Jia and Liang, 2017).
//! - [`equivalence`]: rule-based answer equivalence and key-fact match for free-form answers.
//! - [`breakdown`]: scores by question type and by question-context lexical overlap.
//! - [`summary`]: headline metrics with intervals and the HTML report of each evaluation.
//! - [`paired`]: two systems' per-question scores paired by question id.
//! - [`report`]: self-contained HTML reports with inline SVG charts.
//! - [`data`]: where the shared evaluation data lives (one place for tests and benchmarks).
//! - [`calibration`]: isotonic and Platt confidence maps, expected calibration error, reliability bins.
//! - [`bertscore`]: BERTScore from token embeddings, identical to the `bert-score` package.
//! - [`canary`]: a labelled question set re-asked and compared with a stored baseline, with bounds.
//! - [`mrqa`]: the MRQA shared task's JSON-lines format, scored by its official rules.
//! - [`jsonl`]: the one JSON-lines reader of lector, with its rule for a torn last line.

pub mod adversarial;
pub mod bertscore;
pub mod breakdown;
pub mod calibration;
pub mod canary;
pub mod data;
pub mod equivalence;
pub mod error;
pub mod hotpot;
pub mod input;
pub mod jsonl;
pub mod mrqa;
pub mod normalize;
pub mod paired;
pub mod questions;
pub mod report;
pub mod retrieval;
pub mod rouge;
pub mod squad;
pub mod stats;
pub mod summary;

pub use error::{Error, Result};
