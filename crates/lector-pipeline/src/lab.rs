//! The evaluation lab's runs as a library: each takes typed options (and a progress callback)
//! and returns a typed, serializable report with its per-item records, so that the CLI only
//! parses arguments and renders, and Python calls the same code.
//!
//! - [`bertscore`]: BERTScore of candidates against references with a local encoder;
//! - [`equivalence`]: free-form answers judged by rules (and a judge model) against golds;
//! - [`judge`]: a language model as judge of answers, with its own reliability;
//! - [`faithfulness`]: the claim checker against labelled claims, beside word overlap;
//! - [`canary`]: a fixed question set re-asked and compared with a stored baseline;
//! - [`generative`]: generated answers open or closed book, beside the extractive reader;
//! - [`rag`]: retrieval-augmented generation end to end on a SQuAD file;
//! - [`retrieval`]: rankings against qrels or by answer containment, and lector's own retrieval
//!   run to make them;
//! - [`hotpot`]: multi-hop questions end to end on a HotpotQA file.

pub mod bertscore;
pub mod canary;
pub mod equivalence;
pub mod faithfulness;
pub mod generative;
pub mod hotpot;
pub mod judge;
pub mod rag;
pub mod retrieval;
