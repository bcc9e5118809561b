//! Generated answers grounded in a store's passages: the one home of `lector ask --generate`, the
//! server's generative asks and Python's `Pipeline.generate`. Which generator and how it decodes
//! ([`GeneratorSpec`], [`DecodingSpec`]), which passages it reads and which readings it must name
//! ([`Pipeline::grounding`]), and the answer with its checks ([`Pipeline::generate`]).

use crate::{AskOptions, Pipeline, Result};
use lector_generate::grounded::{self, Answered, Layout, Passage, Reading};
use lector_generate::prompt::Prompting;
use lector_generate::{
    Decoding, GenerateOptions, Generator, OnToken, OpenAiConfig, OpenAiGenerator,
};
use lector_index::{DocumentStore, Hit};
use serde_json::Value;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// Which generator answers: a local GGUF model, or a model behind an OpenAI-compatible endpoint.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GeneratorSpec {
    /// A GGUF file; `None` (and no endpoint): the registry's SmolLM2-135M-Instruct, fetched into
    /// the user cache on first use.
    pub local: Option<PathBuf>,
    /// The endpoint instead of a local model.
    pub endpoint: Option<EndpointSpec>,
}

/// A model behind an OpenAI-compatible endpoint.
#[derive(Debug, Clone, PartialEq)]
pub struct EndpointSpec {
    /// Base URL (`http://localhost:8080/v1`).
    pub url: String,
    /// The model name sent.
    pub model: String,
    /// Bearer token; `None`: `$OPENAI_API_KEY` if set.
    pub api_key: Option<String>,
    /// How long one request may take.
    pub timeout: Duration,
    /// The model's context window in tokens (for fitting passages).
    pub context_window: usize,
}

impl EndpointSpec {
    /// `model` at `url`, with a two-minute timeout and an 8,192-token window.
    pub fn new(url: &str, model: &str) -> Self {
        EndpointSpec {
            url: url.to_string(),
            model: model.to_string(),
            api_key: None,
            timeout: Duration::from_secs(120),
            context_window: 8192,
        }
    }
}

impl GeneratorSpec {
    /// The generator asked for (`notify` is told before a model is fetched).
    pub fn load(&self, notify: &dyn Fn(&str)) -> Result<Box<dyn Generator>> {
        let Some(endpoint) = &self.endpoint else {
            return Ok(Box::new(crate::config::load_generator(
                self.local.as_deref(),
                notify,
            )?));
        };
        if endpoint.timeout.is_zero() {
            return Err(crate::Error::Options(
                "the endpoint's timeout must be positive".into(),
            ));
        }
        let mut config = OpenAiConfig::new(&endpoint.url, &endpoint.model);
        config.api_key = endpoint.api_key.clone();
        config.request_timeout = endpoint.timeout;
        config.connect_timeout = endpoint.timeout.min(Duration::from_secs(10));
        config.context_window = endpoint.context_window;
        Ok(Box::new(OpenAiGenerator::new(config)?))
    }
}

/// How the generator decodes: greedy at temperature 0 (the default), sampled above, or beam
/// search.
#[derive(Debug, Clone, PartialEq)]
pub struct DecodingSpec {
    /// Sampling temperature; 0 decodes greedily.
    pub temperature: f64,
    /// Nucleus sampling mass.
    pub top_p: f64,
    /// The sampler's seed (the same seed gives the same text).
    pub seed: u64,
    /// Beam search with this many beams (local models), instead of sampling.
    pub beams: Option<usize>,
    /// Beam search length penalty.
    pub length_penalty: f64,
    /// The most tokens to generate; `None`: the prompt's, else the default.
    pub max_new_tokens: Option<usize>,
    /// Stop before any of these.
    pub stop: Vec<String>,
    /// Penalty on tokens already generated (1: none).
    pub repeat_penalty: f32,
}

impl Default for DecodingSpec {
    fn default() -> Self {
        DecodingSpec {
            temperature: 0.0,
            top_p: 1.0,
            seed: 0,
            beams: None,
            length_penalty: 1.0,
            max_new_tokens: None,
            stop: Vec::new(),
            repeat_penalty: 1.0,
        }
    }
}

impl DecodingSpec {
    /// The generation options, with the room `prompting`'s prompt asks for unless
    /// `max_new_tokens` is given; checked.
    pub fn options_for(&self, prompting: &Prompting) -> Result<GenerateOptions> {
        let decoding = match (self.beams, self.temperature) {
            (Some(beams), _) => Decoding::Beam {
                beams,
                length_penalty: self.length_penalty,
            },
            (None, 0.0) => Decoding::Greedy,
            (None, temperature) => Decoding::Sample {
                temperature,
                top_p: self.top_p,
                seed: self.seed,
            },
        };
        let options = GenerateOptions {
            decoding,
            max_new_tokens: prompting.max_new_tokens(self.max_new_tokens),
            stop: self.stop.clone(),
            repeat_penalty: self.repeat_penalty,
        };
        options.validate()?;
        Ok(options)
    }
}

/// The passages a generated answer comes from, and the readings its prompt must name.
#[derive(Debug, Clone, Default)]
pub struct Grounding {
    /// The passages, best first (numbered `[1]`, `[2]`, ... in the prompt).
    pub hits: Vec<Hit>,
    /// When the documents disagree: each reading with the passage it comes from.
    pub readings: Vec<Reading>,
}

impl Grounding {
    /// The passages as the generator takes them.
    pub fn passages(&self) -> Vec<Passage> {
        self.hits.iter().map(passage_of).collect()
    }
}

/// A retrieved passage as the generator takes it.
pub fn passage_of(hit: &Hit) -> Passage {
    Passage {
        doc_id: hit.doc_id.clone(),
        title: hit.title.clone(),
        text: hit.text.clone(),
    }
}

/// A generated answer with what it was grounded in.
#[derive(Debug, Clone)]
pub struct Generated {
    /// The answer, checked (citations, support, readings named).
    pub answered: Answered,
    /// The passages given to the generator (empty closed book).
    pub hits: Vec<Hit>,
    /// Time spent retrieving (and reading, to find disagreeing readings), in milliseconds.
    pub retrieve_ms: f64,
}

impl Generated {
    /// The answer as `lector ask --generate --json` prints it: the checked answer, `text` as the
    /// user gets it (with lector's sentence naming the readings, if any), the generator's name,
    /// and the retrieval time beside the generation's.
    pub fn to_json(&self, generator: &str) -> Value {
        let mut out = serde_json::to_value(&self.answered).expect("an answer serializes");
        out["text"] = self.answered.text().into();
        out["generator"] = generator.into();
        out["timings"]["retrieve_ms"] = self.retrieve_ms.into();
        out
    }
}

impl<S: DocumentStore> Pipeline<S> {
    /// The passages to answer `question` from. On a store with a confidence map the reader
    /// reads them first, so that when the documents disagree ([`crate::ambiguity`]) the answer
    /// must name every reading; without a map nothing can be flagged, and retrieval alone
    /// chooses them (`options.search` and `options.k`, reranked when the pipeline reranks).
    pub fn grounding(&self, question: &str, options: &AskOptions) -> Result<Grounding> {
        let has_map = self.calibration().is_some_and(|c| c.confidence.is_some());
        if !has_map {
            let search = options
                .search
                .clone()
                .unwrap_or_else(|| crate::default_search(&self.index));
            let hits = self.retrieve(question, &search, options.k)?;
            return Ok(Grounding {
                hits,
                readings: Vec::new(),
            });
        }
        let response = self.ask(question, options)?;
        let readings = response
            .reading_passages()
            .into_iter()
            .map(|(text, passage)| Reading { text, passage })
            .collect();
        let hits = response.passages.into_iter().map(|p| p.hit).collect();
        Ok(Grounding { hits, readings })
    }

    /// A generated answer to `question` from its [`Self::grounding`], laid out by `layout`
    /// (with the grounding's readings), each piece of text given to `on_token` as it comes.
    pub fn generate(
        &self,
        generator: &dyn Generator,
        question: &str,
        options: &AskOptions,
        generation: &GenerateOptions,
        layout: Layout,
        on_token: &mut OnToken<'_>,
    ) -> Result<Generated> {
        let start = Instant::now();
        let grounding = self.grounding(question, options)?;
        let retrieve_ms = start.elapsed().as_secs_f64() * 1000.0;
        let mut generated = answer(
            generator,
            question,
            Some(grounding),
            generation,
            layout,
            on_token,
        )?;
        generated.retrieve_ms = retrieve_ms;
        Ok(generated)
    }
}

/// A generated answer to `question` from `grounding`, or from the model's own knowledge
/// without one (closed book); `layout` gets the grounding's readings.
pub fn answer(
    generator: &dyn Generator,
    question: &str,
    grounding: Option<Grounding>,
    generation: &GenerateOptions,
    mut layout: Layout,
    on_token: &mut OnToken<'_>,
) -> Result<Generated> {
    let grounding = grounding.map(|g| {
        layout.readings = g.readings.clone();
        (g.passages(), g.hits)
    });
    let answered = grounded::answer_with(
        generator,
        question,
        grounding.as_ref().map(|(passages, _)| passages.as_slice()),
        generation,
        &layout,
        on_token,
    )?;
    Ok(Generated {
        answered,
        hits: grounding.map(|(_, hits)| hits).unwrap_or_default(),
        retrieve_ms: 0.0,
    })
}
