//! Choosing and configuring a generator from the command line (`lector ask --generate`,
//! `lector eval generative`).

use anyhow::{bail, Context, Result};
use clap::Args;
use lector_generate::prompt::Prompting;
use lector_generate::{GenerateOptions, Generator, LocalGenerator, OpenAiConfig, OpenAiGenerator};
use lector_pipeline::generative::{DecodingSpec, EndpointSpec, GeneratorSpec};
use lector_pipeline::prompting::PromptSpec;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The generator and its decoding settings.
#[derive(Args, Clone)]
pub struct GeneratorArgs {
    /// GGUF model file [default: the registry's SmolLM2-135M-Instruct, fetched like `lector models pull generator`].
    #[arg(long, value_name = "GGUF")]
    generator_model: Option<PathBuf>,
    /// An OpenAI-compatible endpoint's base URL (e.g. http://localhost:8080/v1) instead of a local model.
    #[arg(long, value_name = "URL", conflicts_with = "generator_model")]
    endpoint: Option<String>,
    /// The model name sent to --endpoint.
    #[arg(long, value_name = "NAME", requires = "endpoint")]
    api_model: Option<String>,
    /// API key for --endpoint [default: $OPENAI_API_KEY].
    #[arg(long, value_name = "KEY", requires = "endpoint")]
    api_key: Option<String>,
    /// Seconds one request to --endpoint may take before failing.
    #[arg(value_parser = crate::values::seconds, long, default_value_t = 120.0, value_name = "SECONDS")]
    timeout: f64,
    /// Context window of the --endpoint model, in tokens (for fitting passages).
    #[arg(value_parser = crate::values::at_least_one, long, default_value_t = 8192, value_name = "TOKENS")]
    api_context: usize,
    /// Sampling temperature; 0 (the default) decodes greedily.
    #[arg(value_parser = crate::values::non_negative, long, default_value_t = 0.0)]
    temperature: f64,
    /// Nucleus sampling: keep the most likely tokens up to this probability mass.
    #[arg(value_parser = crate::values::unit_interval, long, default_value_t = 1.0)]
    top_p: f64,
    /// Seed of the sampler (the same seed gives the same text).
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Beam search with this many beams (local models).
    #[arg(value_parser = crate::values::at_least_one, long, value_name = "B", conflicts_with = "temperature")]
    beams: Option<usize>,
    /// Beam search length penalty (score = log-probability / length^penalty).
    #[arg(long, default_value_t = 1.0)]
    length_penalty: f64,
    /// The most tokens to generate [default: the prompt's `max_new_tokens`, else 64].
    #[arg(value_parser = crate::values::at_least_one, long, value_name = "N")]
    max_new_tokens: Option<usize>,
    /// Stop before this string (repeatable).
    #[arg(long, value_name = "TEXT")]
    stop: Vec<String>,
    /// Penalty on tokens already generated (1 = none; local models).
    #[arg(long, default_value_t = 1.0)]
    repeat_penalty: f32,
}

impl GeneratorArgs {
    /// The generator asked for, as the library takes it.
    pub fn spec(&self) -> Result<GeneratorSpec> {
        let endpoint = match &self.endpoint {
            None => None,
            Some(url) => {
                let model = self
                    .api_model
                    .clone()
                    .context("--endpoint needs --api-model NAME")?;
                if !(self.timeout.is_finite() && self.timeout > 0.0) {
                    bail!("--timeout must be a positive number of seconds");
                }
                Some(EndpointSpec {
                    api_key: self.api_key.clone(),
                    timeout: Duration::from_secs_f64(self.timeout),
                    context_window: self.api_context,
                    ..EndpointSpec::new(url, &model)
                })
            }
        };
        Ok(GeneratorSpec {
            local: self.generator_model.clone(),
            endpoint,
        })
    }

    /// The decoding asked for, as the library takes it.
    pub fn decoding(&self) -> DecodingSpec {
        DecodingSpec {
            temperature: self.temperature,
            top_p: self.top_p,
            seed: self.seed,
            beams: self.beams,
            length_penalty: self.length_penalty,
            max_new_tokens: self.max_new_tokens,
            stop: self.stop.clone(),
            repeat_penalty: self.repeat_penalty,
        }
    }

    /// The generator asked for.
    pub fn load(&self) -> Result<Box<dyn Generator>> {
        Ok(self.spec()?.load(&crate::search::notify)?)
    }

    /// The decoding settings asked for.
    pub fn options(&self) -> Result<GenerateOptions> {
        self.options_for(&Prompting::default())
    }

    /// The decoding settings asked for, with the room `prompting`'s prompt asks for when
    /// --max-new-tokens is not given.
    pub fn options_for(&self, prompting: &Prompting) -> Result<GenerateOptions> {
        Ok(self.decoding().options_for(prompting)?)
    }
}

/// The judge model of evaluation runs: correctness and equivalence verdicts (and claims, with
/// --judge-claims), reported apart from the rule-based figures.
#[derive(Args, Clone, Default)]
pub struct JudgeModelArgs {
    /// Judge with a model behind this OpenAI-compatible endpoint (base URL).
    #[arg(long, value_name = "URL", conflicts_with = "judge_model")]
    judge_endpoint: Option<String>,
    /// The model name sent to --judge-endpoint.
    #[arg(long, value_name = "NAME", requires = "judge_endpoint")]
    judge_api_model: Option<String>,
    /// Judge with this local GGUF model.
    #[arg(long, value_name = "GGUF")]
    judge_model: Option<PathBuf>,
}

impl JudgeModelArgs {
    /// Whether a judge model or endpoint is given.
    pub fn is_given(&self) -> bool {
        self.judge_endpoint.is_some() || self.judge_model.is_some()
    }

    /// The judge's generator, when --judge-endpoint or --judge-model is given.
    pub fn load(&self) -> Result<Option<Box<dyn Generator>>> {
        if let Some(url) = &self.judge_endpoint {
            let model = self
                .judge_api_model
                .as_deref()
                .context("--judge-endpoint needs --judge-api-model NAME")?;
            let config = OpenAiConfig::new(url, model);
            return Ok(Some(Box::new(OpenAiGenerator::new(config)?)));
        }
        match &self.judge_model {
            Some(path) => Ok(Some(Box::new(load_local(Some(path))?))),
            None => Ok(None),
        }
    }
}

/// The prompt of a generated answer: a prompt file and few-shot examples.
#[derive(Args, Clone, Default)]
pub struct PromptArgs {
    /// Prompt file (TOML or YAML; docs/generative.md#prompts) or a shipped prompt's name:
    /// default, chain-of-thought.
    #[arg(long, value_name = "FILE|NAME")]
    prompt: Option<String>,
    /// Few-shot examples shown before each question: JSON lines {"question", "answer",
    /// "context" (open book), "title", "reasoning"}, a JSON array of them, or a SQuAD file.
    #[arg(long, value_name = "FILE")]
    examples: Option<PathBuf>,
    /// Examples shown per question.
    #[arg(long, default_value_t = 3, value_name = "K", requires = "examples")]
    shots: usize,
    /// How examples are chosen: fixed (the file's first K) or similar (the K nearest the
    /// question by the embedder).
    #[arg(long, default_value = "fixed", value_parser = ["fixed", "similar"], requires = "examples")]
    select: String,
}

impl PromptArgs {
    /// The prompt and examples asked for (similar examples embedded now, with progress).
    pub fn load(&self) -> Result<Prompting> {
        let spec = PromptSpec {
            prompt: self.prompt.clone(),
            examples: self.examples.clone(),
            shots: self.shots,
            select: self.select.parse()?,
            embedder: None,
        };
        let bar = indicatif::ProgressBar::hidden();
        let prompting =
            lector_pipeline::prompting::load(&spec, &crate::search::notify, &mut |done, total| {
                if bar.is_hidden() {
                    bar.set_draw_target(indicatif::ProgressDrawTarget::stderr());
                    bar.set_length(total as u64);
                    bar.set_message("embedding the examples");
                }
                bar.set_position(done as u64);
            })?;
        bar.finish_and_clear();
        Ok(prompting)
    }
}

/// The local GGUF generator at `path`, or the registry's (fetched on first use).
pub fn load_local(path: Option<&Path>) -> Result<LocalGenerator> {
    Ok(lector_pipeline::config::load_generator(
        path,
        &crate::search::notify,
    )?)
}

/// The checks of a generated answer, after the streamed text.
pub fn print_answered(a: &lector_generate::grounded::Answered, generator: &str, retrieve_ms: f64) {
    use lector_generate::grounded::SUPPORT_THRESHOLD;
    let answer = &a.answer;
    println!(
        "short answer: {}",
        if answer.refused {
            "(refused)"
        } else {
            &answer.short_answer
        }
    );
    println!("refusal: {}", if answer.refused { "yes" } else { "no" });
    if let Some(d) = &a.disagreement {
        let readings: Vec<String> = d
            .readings
            .iter()
            .map(|r| {
                let by = match (r.named_by_model, d.added.is_some()) {
                    (true, _) => "named by the model",
                    (false, true) => "added by lector",
                    (false, false) => "not named: the model refused",
                };
                format!("{} [{}] (doc {}, {by})", r.text, r.number, r.doc_id)
            })
            .collect();
        println!(
            "ambiguous: the documents disagree — {}",
            readings.join(" or ")
        );
    }
    if let Some(prompt) = &a.prompt {
        for c in &answer.citations {
            let title = c
                .title
                .as_deref()
                .map_or(String::new(), |t| format!(" \"{t}\""));
            println!("citation [{}]: {}{title}", c.number, c.doc_id);
        }
        if answer.citations.is_empty() && !answer.refused {
            println!("citations: none");
        }
        if !answer.invalid_citations.is_empty() {
            println!(
                "invalid citations (no such passage): {:?}",
                answer.invalid_citations
            );
        }
        for (i, s) in answer.sentences.iter().enumerate() {
            let mark = if s.supported {
                "supported"
            } else {
                "UNSUPPORTED"
            };
            println!(
                "sentence {}: {mark} (support {:.2}, threshold {SUPPORT_THRESHOLD}): {}",
                i + 1,
                s.support,
                s.text
            );
        }
        let numbers = |refs: &[lector_generate::grounded::PassageRef]| -> String {
            refs.iter()
                .map(|r| format!("[{}] {}", r.number, r.doc_id))
                .collect::<Vec<_>>()
                .join(", ")
        };
        println!("passages shown: {}", numbers(&prompt.included));
        if !prompt.cut.is_empty() {
            println!(
                "passages cut to fit the context window: {}",
                numbers(&prompt.cut)
            );
        }
        if let Some(n) = prompt.truncated {
            println!("passage [{n}] was shortened to fit the context window");
        }
    } else {
        println!("closed book: no passages");
    }
    let t = &a.generation.timings;
    println!(
        "time: retrieve {retrieve_ms:.1} ms, prompt {} tokens in {:.1} ms ({:.0} tokens/s), generate {} tokens in {:.1} ms ({:.1} tokens/s); {generator}, finished: {:?}",
        t.prompt_tokens,
        t.prompt_ms,
        t.prompt_tokens_per_second(),
        t.generated_tokens,
        t.generate_ms,
        t.tokens_per_second(),
        a.generation.finish_reason
    );
}
