//! A GGUF model run locally: greedy decoding, sampling and beam search over [`Model`].

use crate::decode::TextStream;
use crate::error::{Error, Result};
use crate::gguf::Gguf;
use crate::model::{log_softmax, Model};
use crate::options::{Decoding, FinishReason, GenerateOptions, Generation, Timings};
use crate::template::{ChatTemplate, CHATML};
use crate::tokenizer::GgufTokenizer;
use crate::{check_messages, Generator, Message, OnToken};
use candle_core::Tensor;
use candle_transformers::generation::{LogitsProcessor, Sampling};
use std::ops::ControlFlow;
use std::path::Path;
use std::time::Instant;

/// A local GGUF model with its tokenizer and chat template.
pub struct LocalGenerator {
    model: Model,
    tokenizer: GgufTokenizer,
    template: ChatTemplate,
    name: String,
    window: usize,
}

impl LocalGenerator {
    /// Loads the model, tokenizer and chat template of a GGUF file (the template falls back to
    /// ChatML when the file has none).
    pub fn load(path: &Path) -> Result<Self> {
        Self::load_with(path, false)
    }

    /// [`LocalGenerator::load`] with the weights expanded to f32 (see [`Model::load_with`]): the
    /// exact float computation, for comparisons with a float reference implementation.
    pub fn load_dequantized(path: &Path) -> Result<Self> {
        Self::load_with(path, true)
    }

    fn load_with(path: &Path, dequantize: bool) -> Result<Self> {
        let gguf = Gguf::open(path)?;
        crate::model::Config::from_gguf(&gguf)?; // the architecture first: the clearest error
        let tokenizer = GgufTokenizer::from_gguf(&gguf)?;
        let model = Model::load_with(&gguf, dequantize)?;
        let source = gguf
            .opt_string("tokenizer.chat_template")?
            .unwrap_or(CHATML)
            .to_string();
        let text = |t: &Option<(u32, String)>| t.as_ref().map_or(String::new(), |t| t.1.clone());
        let template = ChatTemplate::new(&source, &text(&tokenizer.bos), &text(&tokenizer.eos))?;
        let window = model.config.context_length;
        Ok(LocalGenerator {
            model,
            tokenizer,
            template,
            name: gguf.name(),
            window,
        })
    }

    /// Limits the context window below the model's (less memory for long prompts).
    pub fn with_context_window(mut self, tokens: usize) -> Self {
        self.window = tokens.min(self.model.config.context_length);
        self
    }

    /// The tokenizer.
    pub fn tokenizer(&self) -> &GgufTokenizer {
        &self.tokenizer
    }

    /// The prompt text of `messages` (the chat template applied).
    pub fn render(&self, messages: &[Message]) -> Result<String> {
        self.template.render(messages)
    }

    /// Generates a continuation of `prompt` as it is (no chat template; BOS added if the model
    /// wants it).
    pub fn complete(
        &self,
        prompt: &str,
        options: &GenerateOptions,
        on_token: &mut OnToken<'_>,
    ) -> Result<Generation> {
        if prompt.trim().is_empty() {
            return Err(Error::Invalid("the prompt is empty".into()));
        }
        let ids = self.tokenizer.encode_prompt(prompt)?;
        self.run(ids, options, on_token)
    }

    fn run(
        &self,
        prompt: Vec<u32>,
        options: &GenerateOptions,
        on_token: &mut OnToken<'_>,
    ) -> Result<Generation> {
        options.validate()?;
        // `validate` bounds `max_new_tokens`; saturating all the same, as the sum is checked here.
        if prompt.len().saturating_add(options.max_new_tokens) > self.window {
            return Err(Error::ContextOverflow {
                prompt: prompt.len(),
                max_new: options.max_new_tokens,
                window: self.window,
            });
        }
        match options.decoding {
            Decoding::Beam {
                beams,
                length_penalty,
            } => self.beam_search(prompt, options, beams, length_penalty, on_token),
            _ => self.sample(prompt, options, on_token),
        }
    }

    /// Greedy decoding or sampling, one sequence.
    fn sample(
        &self,
        prompt: Vec<u32>,
        options: &GenerateOptions,
        on_token: &mut OnToken<'_>,
    ) -> Result<Generation> {
        let mut processor = match options.decoding {
            Decoding::Sample {
                temperature,
                top_p,
                seed,
            } if top_p < 1.0 => LogitsProcessor::from_sampling(
                seed,
                Sampling::TopP {
                    p: top_p,
                    temperature,
                },
            ),
            Decoding::Sample {
                temperature, seed, ..
            } => LogitsProcessor::from_sampling(seed, Sampling::All { temperature }),
            _ => LogitsProcessor::from_sampling(0, Sampling::ArgMax),
        };
        let start = Instant::now();
        let mut cache = self.model.cache(1, prompt.len() + options.max_new_tokens)?;
        let mut logits = self
            .model
            .forward(std::slice::from_ref(&prompt), &mut cache)?
            .squeeze(0)?;
        let mut timings = Timings {
            prompt_tokens: prompt.len(),
            prompt_ms: ms(start),
            ..Timings::default()
        };
        let start = Instant::now();
        let mut stream = TextStream::new(&options.stop);
        let mut generated: Vec<u32> = Vec::new();
        let mut text = String::new();
        let finish = loop {
            if options.repeat_penalty != 1.0 {
                logits = candle_transformers::utils::apply_repeat_penalty(
                    &logits,
                    options.repeat_penalty,
                    &generated,
                )?;
            }
            let next = processor.sample(&logits)?;
            if self.tokenizer.end_of_generation.contains(&next) {
                break FinishReason::EndOfText;
            }
            generated.push(next);
            text = self.tokenizer.decode(&generated)?;
            let step = stream.push(&text);
            if !step.piece.is_empty() && on_token(&step.piece).is_break() {
                break FinishReason::Cancelled;
            }
            if let Some(stop) = step.stop {
                break FinishReason::Stop(stop);
            }
            if generated.len() == options.max_new_tokens {
                break FinishReason::Length;
            }
            logits = self.model.forward(&[vec![next]], &mut cache)?.squeeze(0)?;
        };
        if !matches!(finish, FinishReason::Cancelled) {
            let rest = stream.finish(&text);
            if !rest.is_empty() {
                let _ = on_token(&rest);
            }
        }
        timings.generated_tokens = generated.len();
        timings.generate_ms = ms(start);
        Ok(Generation {
            text: stream.final_text(&text).to_string(),
            finish_reason: finish,
            timings,
        })
    }

    /// Beam search: all live hypotheses advance together as one batch.
    fn beam_search(
        &self,
        prompt: Vec<u32>,
        options: &GenerateOptions,
        width: usize,
        length_penalty: f64,
        on_token: &mut OnToken<'_>,
    ) -> Result<Generation> {
        let start = Instant::now();
        let mut cache = self.model.cache(1, prompt.len() + options.max_new_tokens)?;
        let mut logits = self
            .model
            .forward(std::slice::from_ref(&prompt), &mut cache)?;
        let mut timings = Timings {
            prompt_tokens: prompt.len(),
            prompt_ms: ms(start),
            ..Timings::default()
        };
        let start = Instant::now();
        let normalised =
            |h: &Hypothesis| h.log_prob / (h.tokens.len().max(1) as f64).powf(length_penalty);
        let mut live = vec![Hypothesis::default()];
        let mut done: Vec<(Hypothesis, FinishReason)> = Vec::new();
        let mut steps = 0;
        while !live.is_empty() {
            steps += 1;
            let candidates = top_candidates(&log_softmax(&logits)?, &live, 2 * width)?;
            let mut next = Vec::new();
            for (parent, token, log_prob) in candidates {
                if next.len() == width {
                    break;
                }
                let mut h = live[parent].clone();
                h.log_prob = log_prob;
                h.parent = parent;
                if self.tokenizer.end_of_generation.contains(&token) {
                    done.push((h, FinishReason::EndOfText));
                    continue;
                }
                h.tokens.push(token);
                let text = self.tokenizer.decode(&h.tokens)?;
                if let Some(stop) = options.stop.iter().find(|s| text.contains(s.as_str())) {
                    done.push((h, FinishReason::Stop(stop.clone())));
                } else if steps == options.max_new_tokens {
                    done.push((h, FinishReason::Length));
                } else {
                    next.push(h);
                }
            }
            let best_live = next
                .iter()
                .map(normalised)
                .fold(f64::NEG_INFINITY, f64::max);
            let worst_done = done
                .iter()
                .map(|(h, _)| normalised(h))
                .fold(f64::INFINITY, f64::min);
            if next.is_empty() || (done.len() >= width && best_live < worst_done) {
                break;
            }
            let rows: Vec<u32> = next.iter().map(|h| h.parent as u32).collect();
            cache = cache.select(&rows)?;
            let inputs: Vec<Vec<u32>> = next
                .iter()
                .map(|h| vec![*h.tokens.last().unwrap()])
                .collect();
            logits = self.model.forward(&inputs, &mut cache)?;
            live = next;
        }
        let (best, finish) = done
            .into_iter()
            .max_by(|a, b| normalised(&a.0).total_cmp(&normalised(&b.0)))
            .ok_or_else(|| Error::Invalid("beam search produced no hypothesis".into()))?;
        let text = self.tokenizer.decode(&best.tokens)?;
        let mut stream = TextStream::new(&options.stop);
        stream.push(&text);
        let text = stream.final_text(&text).to_string();
        let finish = match on_token(&text) {
            ControlFlow::Break(()) => FinishReason::Cancelled,
            ControlFlow::Continue(()) => finish,
        };
        timings.generated_tokens = steps;
        timings.generate_ms = ms(start);
        Ok(Generation {
            text,
            finish_reason: finish,
            timings,
        })
    }
}

/// A beam: its tokens, summed log-probability and the batch row it came from.
#[derive(Debug, Clone, Default)]
struct Hypothesis {
    tokens: Vec<u32>,
    log_prob: f64,
    parent: usize,
}

/// The `n` best (parent row, token, total log-probability) extensions, best first.
fn top_candidates(
    log_probs: &Tensor,
    live: &[Hypothesis],
    n: usize,
) -> Result<Vec<(usize, u32, f64)>> {
    let rows: Vec<Vec<f32>> = log_probs.to_vec2()?;
    let mut all: Vec<(usize, u32, f64)> = Vec::new();
    for (parent, row) in rows.iter().enumerate() {
        let mut ids: Vec<u32> = (0..row.len() as u32).collect();
        let n = n.min(ids.len());
        ids.select_nth_unstable_by(n - 1, |&a, &b| row[b as usize].total_cmp(&row[a as usize]));
        all.extend(ids[..n].iter().map(|&t| {
            (
                parent,
                t,
                live[parent].log_prob + f64::from(row[t as usize]),
            )
        }));
    }
    all.sort_by(|a, b| b.2.total_cmp(&a.2).then(a.0.cmp(&b.0)).then(a.1.cmp(&b.1)));
    all.truncate(n);
    Ok(all)
}

fn ms(since: Instant) -> f64 {
    since.elapsed().as_secs_f64() * 1000.0
}

impl Generator for LocalGenerator {
    fn name(&self) -> String {
        self.name.clone()
    }

    fn context_window(&self) -> usize {
        self.window
    }

    fn special_tokens(&self) -> Vec<String> {
        self.tokenizer.special_strings()
    }

    fn count_tokens(&self, messages: &[Message]) -> Result<usize> {
        Ok(self.tokenizer.encode_prompt(&self.render(messages)?)?.len())
    }

    fn generate(
        &self,
        messages: &[Message],
        options: &GenerateOptions,
        on_token: &mut OnToken<'_>,
    ) -> Result<Generation> {
        check_messages(messages)?;
        let ids = self.tokenizer.encode_prompt(&self.render(messages)?)?;
        self.run(ids, options, on_token)
    }
}
