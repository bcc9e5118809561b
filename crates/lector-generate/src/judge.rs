//! An LLM as judge, through any [`Generator`] (a local GGUF model or an OpenAI-compatible
//! endpoint): `lector eval judge`.
//!
//! **Modes and scales.**
//! - *Correctness* ([`Judge::correctness`]): question, reference answer(s), candidate answer ->
//!   `correct` (the same answer as a reference, in any wording), `partially_correct` (part of a
//!   reference answer, or one with wrong extra content) or `incorrect`.
//! - *Faithfulness* ([`Judge::faithfulness`]): question, passage(s), answer -> `supported` (the
//!   passages state or directly imply all of it) or `not_supported`. [`Judge::claim_supported`]
//!   decides one claim against one passage, and [`Judge`] is a [`ClaimJudge`] for claim-level
//!   faithfulness ([`crate::claims`]).
//! - *Pairwise* ([`Judge::pairwise`]): question, reference(s) (optional), answers a and b ->
//!   `A`, `B` or `tie`. Both orders are asked (a shown first, then b shown first); the second
//!   verdict is swapped back (its `A` means b) and the pair's verdict counts only when both
//!   agree, otherwise it is [`Verdict::Inconsistent`].
//! - *Equivalence* ([`Judge::equivalence`]): question, reference answer(s), candidate ->
//!   `equivalent` (the two name the same answer, whatever the wording) or `not_equivalent`.
//!   Asked in both orders (the candidate shown first, then the references first); the verdict
//!   counts only when both agree, otherwise it is [`Verdict::Inconsistent`]. The model-based
//!   counterpart of [`lector_eval::equivalence`]'s rules, reported apart from them.
//!
//! **Parsing** ([`parse`]): the reply is read for `Verdict: X` (or a JSON object, or a bare
//! verdict) with tolerance for case, Markdown, code fences and prose; anything else is
//! [`Verdict::Unparseable`], counted, never guessed.
//!
//! **Cache** ([`cache`]): replies keyed by (model name, decoding settings, prompt text) in a JSON-lines
//! file; a second run of the same items makes no request. **Cost** ([`Cost`]): requests made
//! and answered from the cache, prompt and generated tokens of the requests made.
//!
//! **Runs** ([`batch`]) judge a file of [`items`] with at most N requests in flight at once, and
//! [`report`] summarises them: verdict counts, unparseable rate, agreement with labels (Cohen's
//! kappa with a bootstrap interval), position bias, verbosity bias, self-judging.

pub mod batch;
pub mod cache;
pub mod items;
pub mod parse;
mod prompts;
pub mod report;

use crate::claims::{ClaimJudge, ClaimVerdict, Failure};
use crate::error::{Error, Result};
use crate::{GenerateOptions, Generator, Message};
use cache::{Cache, Entry};
use prompts::Fields;
use serde::{Deserialize, Serialize};
use std::ops::ControlFlow;
use std::sync::atomic::{AtomicUsize, Ordering};

/// What is judged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// A candidate answer against reference answers.
    Correctness,
    /// An answer (or a claim) against passages.
    Faithfulness,
    /// Two answers against each other, in both orders.
    Pairwise,
    /// A candidate answer against reference answers: the same answer or not, in both orders.
    Equivalence,
}

impl Mode {
    /// The verdicts a judge may give in this mode (also the labels items may carry).
    pub fn verdicts(self) -> &'static [Verdict] {
        match self {
            Mode::Correctness => &[
                Verdict::Correct,
                Verdict::PartiallyCorrect,
                Verdict::Incorrect,
            ],
            Mode::Faithfulness => &[Verdict::Supported, Verdict::NotSupported],
            Mode::Pairwise => &[Verdict::A, Verdict::B, Verdict::Tie],
            Mode::Equivalence => &[Verdict::Equivalent, Verdict::NotEquivalent],
        }
    }

    /// The mode's name, as the command line spells it.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Correctness => "correctness",
            Mode::Faithfulness => "faithfulness",
            Mode::Pairwise => "pairwise",
            Mode::Equivalence => "equivalence",
        }
    }
}

impl std::str::FromStr for Mode {
    type Err = String;

    /// The mode named as [`Mode::name`] spells it.
    fn from_str(text: &str) -> std::result::Result<Self, String> {
        [
            Mode::Correctness,
            Mode::Faithfulness,
            Mode::Pairwise,
            Mode::Equivalence,
        ]
        .into_iter()
        .find(|mode| mode.name() == text)
        .ok_or_else(|| {
            format!("unknown mode `{text}`: correctness, faithfulness, pairwise or equivalence")
        })
    }
}

/// A judge's verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub enum Verdict {
    /// Correctness: the same answer as a reference.
    #[serde(rename = "correct")]
    Correct,
    /// Correctness: part of a reference answer, or one with wrong extra content.
    #[serde(rename = "partially_correct")]
    PartiallyCorrect,
    /// Correctness: anything else.
    #[serde(rename = "incorrect")]
    Incorrect,
    /// Faithfulness: the passages state or imply all of it.
    #[serde(rename = "supported")]
    Supported,
    /// Faithfulness: some of it is missing from the passages or contradicts them.
    #[serde(rename = "not_supported")]
    NotSupported,
    /// Pairwise: the first answer of the item (`answer_a`) is better.
    A,
    /// Pairwise: the second answer of the item (`answer_b`) is better.
    B,
    /// Pairwise: neither answer is better.
    #[serde(rename = "tie")]
    Tie,
    /// Equivalence: the candidate names the same answer as a reference.
    #[serde(rename = "equivalent")]
    Equivalent,
    /// Equivalence: it does not.
    #[serde(rename = "not_equivalent")]
    NotEquivalent,
    /// Pairwise or equivalence: the two orders gave different verdicts (pairs: once swapped
    /// back).
    #[serde(rename = "inconsistent")]
    Inconsistent,
    /// The reply names no verdict, or two different ones.
    #[serde(rename = "unparseable")]
    Unparseable,
}

impl Verdict {
    /// The verdict as reports and labels spell it.
    pub fn name(self) -> &'static str {
        match self {
            Verdict::Correct => "correct",
            Verdict::PartiallyCorrect => "partially_correct",
            Verdict::Incorrect => "incorrect",
            Verdict::Supported => "supported",
            Verdict::NotSupported => "not_supported",
            Verdict::A => "A",
            Verdict::B => "B",
            Verdict::Tie => "tie",
            Verdict::Equivalent => "equivalent",
            Verdict::NotEquivalent => "not_equivalent",
            Verdict::Inconsistent => "inconsistent",
            Verdict::Unparseable => "unparseable",
        }
    }

    /// A verdict on the item's own scale (not inconsistent, not unparseable).
    pub fn is_decided(self) -> bool {
        !matches!(self, Verdict::Inconsistent | Verdict::Unparseable)
    }

    /// The verdict with A and B exchanged (for the second, swapped order of a pair).
    pub fn swapped(self) -> Verdict {
        match self {
            Verdict::A => Verdict::B,
            Verdict::B => Verdict::A,
            other => other,
        }
    }
}

/// One reply of the judge, read.
#[derive(Debug, Clone, Serialize)]
pub struct Judgement {
    pub verdict: Verdict,
    /// The reason the judge gave (empty when it gave none).
    pub reason: String,
    /// The reply as generated.
    pub reply: String,
    /// Whether the reply came from the cache (no request made).
    pub cached: bool,
    /// Tokens of the request that produced the reply (counted once, when it was made).
    pub prompt_tokens: usize,
    /// Tokens the judge generated for the reply.
    pub generated_tokens: usize,
}

/// A pairwise verdict from both orders.
#[derive(Debug, Clone, Serialize)]
pub struct PairJudgement {
    /// A, B or tie when both orders agree (A meaning the item's `answer_a`); inconsistent when
    /// they do not; unparseable when either reply is.
    pub verdict: Verdict,
    /// `answer_a` shown first (as A).
    pub first: Judgement,
    /// `answer_b` shown first (as A); its verdict as the judge gave it, not swapped back.
    pub second: Judgement,
}

impl PairJudgement {
    /// The pair's verdict from the two orders' verdicts (`second` as given, A = the answer shown
    /// first).
    pub fn combine(first: Verdict, second: Verdict) -> Verdict {
        if !(first.is_decided() && second.is_decided()) {
            return Verdict::Unparseable;
        }
        if first == second.swapped() {
            first
        } else {
            Verdict::Inconsistent
        }
    }

    /// Whether the judge preferred whichever answer it was shown first, in both orders.
    pub fn prefers_first_shown(&self) -> bool {
        self.first.verdict == Verdict::A && self.second.verdict == Verdict::A
    }

    /// Whether the judge preferred whichever answer it was shown second, in both orders.
    pub fn prefers_second_shown(&self) -> bool {
        self.first.verdict == Verdict::B && self.second.verdict == Verdict::B
    }
}

/// What judging cost so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Cost {
    /// Requests sent to the generator.
    pub requests: usize,
    /// Replies taken from the cache instead.
    pub cached: usize,
    /// Prompt tokens of the requests sent (as the generator reports them).
    pub prompt_tokens: usize,
    /// Tokens generated by the requests sent.
    pub generated_tokens: usize,
}

#[derive(Default)]
struct Tally {
    requests: AtomicUsize,
    cached: AtomicUsize,
    prompt_tokens: AtomicUsize,
    generated_tokens: AtomicUsize,
}

/// A judge's usual decoding: greedy (the same prompt, the same verdict) with room for a short
/// reason (128 tokens).
pub fn decoding() -> GenerateOptions {
    GenerateOptions {
        decoding: crate::Decoding::Greedy,
        max_new_tokens: 128,
        ..GenerateOptions::default()
    }
}

/// A judge: a generator, its decoding settings and an optional cache. Shareable across threads.
pub struct Judge<'g> {
    generator: &'g dyn Generator,
    model: String,
    options: GenerateOptions,
    specials: Vec<String>,
    cache: Option<Cache>,
    tally: Tally,
}

impl<'g> Judge<'g> {
    /// A judge asking `generator` with `options` (greedy decoding suits a judge: the same
    /// prompt gives the same verdict, which the cache relies on).
    pub fn new(generator: &'g dyn Generator, options: GenerateOptions) -> Result<Self> {
        options.validate()?;
        Ok(Judge {
            model: generator.name(),
            specials: generator.special_tokens(),
            generator,
            options,
            cache: None,
            tally: Tally::default(),
        })
    }

    /// The judge with replies cached in `cache`.
    pub fn with_cache(mut self, cache: Cache) -> Self {
        self.cache = Some(cache);
        self
    }

    /// The judge model's name (the generator's).
    pub fn model(&self) -> &str {
        &self.model
    }

    /// The cache, if any.
    pub fn cache(&self) -> Option<&Cache> {
        self.cache.as_ref()
    }

    /// Requests, cache hits and tokens so far.
    pub fn cost(&self) -> Cost {
        let get = |a: &AtomicUsize| a.load(Ordering::Relaxed);
        Cost {
            requests: get(&self.tally.requests),
            cached: get(&self.tally.cached),
            prompt_tokens: get(&self.tally.prompt_tokens),
            generated_tokens: get(&self.tally.generated_tokens),
        }
    }

    /// Whether `answer` to `question` is correct against `references` (at least one).
    pub fn correctness(
        &self,
        question: &str,
        references: &[String],
        answer: &str,
    ) -> Result<Judgement> {
        if references.is_empty() {
            return Err(Error::Invalid(
                "judging correctness needs at least one reference answer".into(),
            ));
        }
        let f = Fields::new(&self.specials);
        let messages = prompts::correctness(&f, question, references, answer);
        self.ask(Mode::Correctness, messages)
    }

    /// Whether `passages` (at least one) support everything `answer` says; `question` may be
    /// empty.
    pub fn faithfulness(
        &self,
        question: &str,
        passages: &[String],
        answer: &str,
    ) -> Result<Judgement> {
        if passages.is_empty() {
            return Err(Error::Invalid(
                "judging faithfulness needs at least one passage".into(),
            ));
        }
        let f = Fields::new(&self.specials);
        let messages = prompts::faithfulness(&f, question, passages, answer);
        self.ask(Mode::Faithfulness, messages)
    }

    /// Whether `passage` supports `claim`: supported, not supported, or unparseable.
    pub fn claim_supported(&self, claim: &str, passage: &str) -> Result<Judgement> {
        let f = Fields::new(&self.specials);
        self.ask(Mode::Faithfulness, prompts::claim(&f, claim, passage))
    }

    /// Which of `answer_a` and `answer_b` better answers `question` (against `references`,
    /// possibly none), asked in both orders.
    pub fn pairwise(
        &self,
        question: &str,
        references: &[String],
        answer_a: &str,
        answer_b: &str,
    ) -> Result<PairJudgement> {
        let f = Fields::new(&self.specials);
        let first = self.ask(
            Mode::Pairwise,
            prompts::pairwise(&f, question, references, answer_a, answer_b),
        )?;
        let second = self.ask(
            Mode::Pairwise,
            prompts::pairwise(&f, question, references, answer_b, answer_a),
        )?;
        Ok(PairJudgement {
            verdict: PairJudgement::combine(first.verdict, second.verdict),
            first,
            second,
        })
    }

    /// Whether `answer` names the same answer to `question` as `references` (at least one),
    /// asked in both orders: the candidate shown first, then the references first.
    pub fn equivalence(
        &self,
        question: &str,
        references: &[String],
        answer: &str,
    ) -> Result<PairJudgement> {
        if references.is_empty() {
            return Err(Error::Invalid(
                "judging equivalence needs at least one reference answer".into(),
            ));
        }
        let f = Fields::new(&self.specials);
        let candidate = [answer.to_string()];
        let first = self.ask(
            Mode::Equivalence,
            prompts::equivalence(&f, question, &candidate, references),
        )?;
        let second = self.ask(
            Mode::Equivalence,
            prompts::equivalence(&f, question, references, &candidate),
        )?;
        Ok(PairJudgement {
            verdict: PairJudgement::combine(first.verdict, second.verdict),
            first,
            second,
        })
    }

    /// The reply to `messages`, from the cache or the generator, read in `mode`.
    fn ask(&self, mode: Mode, messages: Vec<Message>) -> Result<Judgement> {
        let key = cache::key(&self.model, &self.options, &messages);
        if let Some(hit) = self.cache.as_ref().and_then(|c| c.get(&key)) {
            self.tally.cached.fetch_add(1, Ordering::Relaxed);
            return Ok(read(
                mode,
                hit.reply,
                true,
                hit.prompt_tokens,
                hit.generated_tokens,
            ));
        }
        let generation = self
            .generator
            .generate(&messages, &self.options, &mut |_| ControlFlow::Continue(()))?;
        let t = generation.timings;
        self.tally.requests.fetch_add(1, Ordering::Relaxed);
        self.tally
            .prompt_tokens
            .fetch_add(t.prompt_tokens, Ordering::Relaxed);
        self.tally
            .generated_tokens
            .fetch_add(t.generated_tokens, Ordering::Relaxed);
        if let Some(cache) = &self.cache {
            let (model, settings, prompt) = key;
            cache.put(Entry {
                model,
                settings,
                prompt,
                reply: generation.text.clone(),
                prompt_tokens: t.prompt_tokens,
                generated_tokens: t.generated_tokens,
            })?;
        }
        Ok(read(
            mode,
            generation.text,
            false,
            t.prompt_tokens,
            t.generated_tokens,
        ))
    }
}

fn read(
    mode: Mode,
    reply: String,
    cached: bool,
    prompt_tokens: usize,
    generated_tokens: usize,
) -> Judgement {
    let parsed = parse::parse_reply(mode, &reply);
    Judgement {
        verdict: parsed.verdict,
        reason: parsed.reason,
        reply,
        cached,
        prompt_tokens,
        generated_tokens,
    }
}

/// The model decides claim by claim. A reply that names no verdict counts as not supported
/// (the claim is flagged, with the reply in the reason), so an unreadable judge never passes a
/// claim.
impl ClaimJudge for Judge<'_> {
    fn decide(&self, claim: &str, passage: &str) -> Result<ClaimVerdict> {
        let judgement = self.claim_supported(claim, passage)?;
        let supported = judgement.verdict == Verdict::Supported;
        let failures = match judgement.verdict {
            Verdict::Supported => Vec::new(),
            Verdict::Unparseable => vec![Failure::Judge {
                reason: format!("unparseable judge reply: {}", judgement.reply.trim()),
            }],
            _ => vec![Failure::Judge {
                reason: judgement.reason,
            }],
        };
        Ok(ClaimVerdict {
            supported,
            score: if supported { 1.0 } else { 0.0 },
            failures,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pair_counts_only_when_both_orders_agree() {
        use Verdict::*;
        // The second order shows b as A, so its "B" means answer_a.
        assert_eq!(PairJudgement::combine(A, B), A);
        assert_eq!(PairJudgement::combine(B, A), B);
        assert_eq!(PairJudgement::combine(Tie, Tie), Tie);
        assert_eq!(PairJudgement::combine(A, A), Inconsistent);
        assert_eq!(PairJudgement::combine(Tie, B), Inconsistent);
        assert_eq!(PairJudgement::combine(A, Unparseable), Unparseable);
        // Equivalence asks the same question twice: the verdicts must be equal.
        assert_eq!(PairJudgement::combine(Equivalent, Equivalent), Equivalent);
        assert_eq!(
            PairJudgement::combine(Equivalent, NotEquivalent),
            Inconsistent
        );
    }
}
