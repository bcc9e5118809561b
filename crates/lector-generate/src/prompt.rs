//! Prompt files: the text lector puts to a generator, in a TOML or YAML file the user can copy,
//! change and compare (`--prompt FILE`), instead of constants.
//!
//! A prompt has an open-book pair (system message, user message around the passages) and a
//! closed-book pair, the refusal sentence, and optionally a reasoning marker (chain of thought).
//! Templates are Jinja, rendered by minijinja as Haystack's `PromptBuilder` renders them, with
//! strict undefined variables and bounded work ([`FUEL`]). Variables:
//!
//! | template | variables |
//! |---|---|
//! | `open_book.system`, `closed_book.system` | `refusal` |
//! | `open_book.user` | `passages` (required), `question` (required), `disagreement`, `refusal` |
//! | `closed_book.user` | `question` (required), `refusal` |
//!
//! `passages` is the numbered block lector writes (`[1] (from "title")`, the quoted text, a blank
//! line): citations, checks and the defences of [`crate::grounded`] depend on that numbering, so
//! a template places the block but does not rewrite it. What the user template writes around it
//! (tags such as `<passages>`, line starts such as `Question:`) is neutralised where passage text
//! or the question imitates it, as the default's own markers are.
//!
//! A file may leave sections out: they are the default's ([`Prompt::default`]). The shipped
//! prompts ([`SHIPPED`]) can be named instead of a path.
//!
//! **Few-shot examples** ([`Example`], [`ExamplePool`]) are shown as earlier turns of the chat,
//! each written with the same template as the question; fixed, or the most similar to the
//! question by an embedder.
//!
//! **Chain of thought** ([`Reasoning`]): the model reasons, then writes the answer on a line
//! starting with the marker (`Answer:`); only what follows the marker is the answer.

use crate::error::{Error, Result};
use crate::grounded::{Layout, PassageOrder, REFUSAL};
use crate::Message;
use minijinja::{Environment, UndefinedBehavior, Value};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashSet};
use std::path::Path;
use std::sync::Arc;

/// The prompts shipped with lector, by name: the default, and chain of thought.
pub const SHIPPED: [(&str, &str); 2] = [
    ("default", include_str!("../prompts/default.toml")),
    (
        "chain-of-thought",
        include_str!("../prompts/chain-of-thought.toml"),
    ),
];

/// The largest prompt file (or prompt text from a request) accepted, in bytes.
pub const MAX_PROMPT_BYTES: usize = 64 * 1024;

/// Tokens a generated answer may take when neither the caller nor the prompt says: a short
/// answer with its citations fits.
pub const DEFAULT_MAX_NEW_TOKENS: usize = 64;

/// Template instructions one render may run: a loop in a template cannot spin (a prompt may come
/// from a request where the operator allows it).
pub const FUEL: u64 = 200_000;

/// Jinja's global functions: names a template may use besides the variables.
const JINJA_GLOBALS: [&str; 6] = ["range", "dict", "namespace", "debug", "cycler", "joiner"];

/// A system message and a user message template.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Turns {
    pub system: String,
    pub user: String,
}

/// Chain of thought: the answer is what follows the first line starting with `answer_marker`
/// (or one of `other_markers`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Reasoning {
    /// The line start that introduces the final answer (`Answer:`), matched without regard to
    /// case and to markdown emphasis around it; examples are written with it.
    pub answer_marker: String,
    /// Other line starts taken to introduce the answer, as lm-evaluation-harness's "The answer
    /// is" filter takes them (small models write that instead of the marker asked for).
    #[serde(default)]
    pub other_markers: Vec<String>,
}

/// A prompt file as written: every section optional.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PromptFile {
    name: Option<String>,
    description: Option<String>,
    refusal: Option<String>,
    max_new_tokens: Option<usize>,
    reasoning: Option<Reasoning>,
    open_book: Option<Turns>,
    closed_book: Option<Turns>,
}

/// What a prompt's user message writes around the material it quotes, which passage text, a
/// title or the question could imitate: tags (neutralised anywhere) and line starts
/// (neutralised at the start of a line).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Structure {
    pub tags: Vec<String>,
    pub lines: Vec<String>,
}

/// A checked, compiled prompt.
#[derive(Debug, Clone)]
pub struct Prompt {
    name: String,
    description: String,
    refusal: String,
    max_new_tokens: Option<usize>,
    reasoning: Option<Reasoning>,
    open_book: Turns,
    closed_book: Turns,
    open_system: String,
    closed_system: String,
    structure: Structure,
    env: Environment<'static>,
}

impl Default for Prompt {
    /// The shipped default prompt (`prompts/default.toml`).
    fn default() -> Self {
        Prompt::shipped("default").expect("the shipped default prompt is valid")
    }
}

impl Prompt {
    /// The shipped prompt called `name` ([`SHIPPED`]).
    pub fn shipped(name: &str) -> Option<Prompt> {
        let (_, text) = SHIPPED.iter().find(|(n, _)| *n == name)?;
        Some(
            Prompt::from_toml(text, &format!("shipped prompt `{name}`"))
                .expect("shipped prompts are valid"),
        )
    }

    /// A shipped prompt by name, or else the prompt file at `spec`.
    pub fn resolve(spec: &str) -> Result<Prompt> {
        match Prompt::shipped(spec) {
            Some(prompt) => Ok(prompt),
            None if !Path::new(spec).exists() => {
                let shipped: Vec<&str> = SHIPPED.iter().map(|(name, _)| *name).collect();
                Err(prompt_error(
                    spec,
                    format!(
                        "no such prompt file, nor a shipped prompt of that name ({})",
                        shipped.join(", ")
                    ),
                ))
            }
            None => Prompt::load(Path::new(spec)),
        }
    }

    /// Reads a prompt file: TOML (`.toml`) or YAML (`.yaml`, `.yml`).
    pub fn load(path: &Path) -> Result<Prompt> {
        let origin = path.display().to_string();
        let size = std::fs::metadata(path)
            .map_err(|e| prompt_error(&origin, e.to_string()))?
            .len();
        if size > MAX_PROMPT_BYTES as u64 {
            return Err(prompt_error(
                &origin,
                format!("{size} bytes; a prompt file may have at most {MAX_PROMPT_BYTES}"),
            ));
        }
        let text =
            std::fs::read_to_string(path).map_err(|e| prompt_error(&origin, e.to_string()))?;
        let stem = path
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or("prompt");
        let extension = path.extension().and_then(|e| e.to_str()).unwrap_or("");
        let mut prompt = match extension.to_ascii_lowercase().as_str() {
            "toml" => Prompt::from_toml(&text, &origin)?,
            "yaml" | "yml" => Prompt::from_yaml(&text, &origin)?,
            _ => {
                return Err(prompt_error(
                    &origin,
                    "a prompt file is .toml, .yaml or .yml (or a shipped name: default, chain-of-thought)".into(),
                ))
            }
        };
        if prompt.name.is_empty() {
            prompt.name = stem.to_string();
        }
        Ok(prompt)
    }

    /// A prompt from TOML text; `origin` names it in errors.
    pub fn from_toml(text: &str, origin: &str) -> Result<Prompt> {
        check_size(text, origin)?;
        let file: PromptFile =
            toml::from_str(text).map_err(|e| prompt_error(origin, e.to_string()))?;
        Prompt::build(file, origin)
    }

    /// A prompt from YAML text; `origin` names it in errors.
    pub fn from_yaml(text: &str, origin: &str) -> Result<Prompt> {
        check_size(text, origin)?;
        let file: PromptFile =
            serde_norway::from_str(text).map_err(|e| prompt_error(origin, e.to_string()))?;
        Prompt::build(file, origin)
    }

    fn build(file: PromptFile, origin: &str) -> Result<Prompt> {
        let base = match (&file.open_book, &file.closed_book, &file.refusal) {
            (Some(_), Some(_), Some(_)) => None,
            _ => Some(Prompt::default()),
        };
        let inherit = |field: Option<Turns>, pick: fn(&Prompt) -> &Turns| {
            field.unwrap_or_else(|| {
                pick(base.as_ref().expect("a base when a section is missing")).clone()
            })
        };
        let refusal = match file.refusal {
            Some(refusal) => refusal,
            None => base.as_ref().expect("a base").refusal.clone(),
        };
        if !crate::grounded::is_refusal(&refusal) {
            return Err(prompt_error(
                origin,
                format!("refusal: {refusal:?} must contain lector's refusal phrase {REFUSAL:?} (how refusals are recognised)"),
            ));
        }
        if let Some(reasoning) = &file.reasoning {
            let mut markers =
                std::iter::once(&reasoning.answer_marker).chain(&reasoning.other_markers);
            if markers.any(|m| m.trim().is_empty() || m.contains('\n')) {
                return Err(prompt_error(
                    origin,
                    "reasoning: each marker is one non-empty line, such as \"Answer:\"".into(),
                ));
            }
        }
        if let Some(n) = file.max_new_tokens {
            if n == 0 || n > crate::MAX_NEW_TOKENS {
                return Err(prompt_error(
                    origin,
                    format!(
                        "max_new_tokens: {n} is not in 1..={}",
                        crate::MAX_NEW_TOKENS
                    ),
                ));
            }
        }
        let open_book = inherit(file.open_book, |p| &p.open_book);
        let closed_book = inherit(file.closed_book, |p| &p.closed_book);
        let mut env = Environment::new();
        env.set_undefined_behavior(UndefinedBehavior::Strict);
        env.set_fuel(Some(FUEL));
        let templates = [
            (
                "open_book.system",
                &open_book.system,
                &["refusal"][..],
                &[][..],
            ),
            (
                "open_book.user",
                &open_book.user,
                &["passages", "question", "disagreement", "refusal"],
                &["passages", "question"],
            ),
            ("closed_book.system", &closed_book.system, &["refusal"], &[]),
            (
                "closed_book.user",
                &closed_book.user,
                &["question", "refusal"],
                &["question"],
            ),
        ];
        for (name, source, known, required) in templates {
            env.add_template_owned(name, source.clone())
                .map_err(|e| prompt_error(origin, format!("{name}: {e}")))?;
            let used = env
                .get_template(name)
                .map_err(|e| prompt_error(origin, format!("{name}: {e}")))?
                .undeclared_variables(false);
            check_variables(origin, name, &used, known, required)?;
        }
        let mut prompt = Prompt {
            name: file.name.unwrap_or_default(),
            description: file.description.unwrap_or_default(),
            refusal,
            max_new_tokens: file.max_new_tokens,
            reasoning: file.reasoning,
            open_book,
            closed_book,
            open_system: String::new(),
            closed_system: String::new(),
            structure: Structure::default(),
            env,
        };
        let render_error = |e: Error| match e {
            Error::Prompt { message, .. } => prompt_error(origin, message),
            other => other,
        };
        prompt.open_system = prompt
            .render("open_book.system", &[])
            .map_err(render_error)?;
        prompt.closed_system = prompt
            .render("closed_book.system", &[])
            .map_err(render_error)?;
        let empty = prompt.open_user("", "", "").map_err(render_error)?;
        prompt.structure = structure_of(&empty);
        prompt.closed_user("").map_err(render_error)?;
        Ok(prompt)
    }

    /// The prompt's name (the file's `name`, else its file name without extension).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The file's description, if it has one.
    pub fn description(&self) -> &str {
        &self.description
    }

    /// The sentence the model is told to write when it cannot answer.
    pub fn refusal(&self) -> &str {
        &self.refusal
    }

    /// The most tokens to generate that the prompt asks for (chain of thought needs room), used
    /// when the caller sets none.
    pub fn max_new_tokens(&self) -> Option<usize> {
        self.max_new_tokens
    }

    /// The most tokens to generate: `asked` when the caller set it, else the prompt's own,
    /// else [`DEFAULT_MAX_NEW_TOKENS`].
    pub fn max_new_tokens_for(&self, asked: Option<usize>) -> usize {
        asked
            .or(self.max_new_tokens)
            .unwrap_or(DEFAULT_MAX_NEW_TOKENS)
    }

    /// The reasoning marker, when the prompt asks for reasoning before the answer.
    pub fn reasoning(&self) -> Option<&Reasoning> {
        self.reasoning.as_ref()
    }

    /// The open-book templates as written.
    pub fn open_book(&self) -> &Turns {
        &self.open_book
    }

    /// The closed-book templates as written.
    pub fn closed_book(&self) -> &Turns {
        &self.closed_book
    }

    pub(crate) fn structure(&self) -> &Structure {
        &self.structure
    }

    pub(crate) fn open_system(&self) -> &str {
        &self.open_system
    }

    /// The open-book user message: `passages` the numbered block, `disagreement` the line naming
    /// the readings (or empty).
    pub(crate) fn open_user(
        &self,
        passages: &str,
        question: &str,
        disagreement: &str,
    ) -> Result<String> {
        self.render(
            "open_book.user",
            &[
                ("passages", passages),
                ("question", question),
                ("disagreement", disagreement),
            ],
        )
    }

    /// The closed-book user message.
    pub(crate) fn closed_user(&self, question: &str) -> Result<String> {
        self.render("closed_book.user", &[("question", question)])
    }

    fn render(&self, name: &str, values: &[(&str, &str)]) -> Result<String> {
        let mut context: BTreeMap<&str, Value> =
            values.iter().map(|(k, v)| (*k, Value::from(*v))).collect();
        context.insert("refusal", Value::from(self.refusal.as_str()));
        self.env
            .get_template(name)
            .and_then(|t| t.render(Value::from_serialize(&context)))
            .map_err(|e| prompt_error(&format!("prompt `{}`", self.name), format!("{name}: {e}")))
    }

    /// The answer turn of a few-shot example: its reasoning and the marker first when the prompt
    /// reasons; open book, ` [1]` after an answer that cites nothing (the example's passage is
    /// `[1]`).
    pub(crate) fn example_answer(&self, example: &Example, open_book: bool) -> String {
        let mut answer = example.answer.trim().to_string();
        if open_book
            && crate::grounded::citations(&answer).is_empty()
            && !crate::grounded::is_refusal(&answer)
        {
            answer.push_str(" [1]");
        }
        match &self.reasoning {
            Some(r) => match example
                .reasoning
                .as_deref()
                .map(str::trim)
                .filter(|s| !s.is_empty())
            {
                Some(reasoning) => format!("{reasoning}\n{} {answer}", r.answer_marker.trim()),
                None => format!("{} {answer}", r.answer_marker.trim()),
            },
            None => answer,
        }
    }

    /// The closed-book messages for `question` after the `examples` shown as earlier turns.
    pub(crate) fn closed_messages(
        &self,
        question: &str,
        examples: &[Example],
    ) -> Result<Vec<Message>> {
        let mut messages = vec![Message::system(self.closed_system.clone())];
        for example in examples {
            messages.push(Message::user(self.closed_user(example.question.trim())?));
            messages.push(Message::assistant(self.example_answer(example, false)));
        }
        messages.push(Message::user(self.closed_user(question.trim())?));
        Ok(messages)
    }
}

/// Prompts by name: the shipped ones, and those of an operator's folder (a file named like a
/// shipped prompt replaces it, so a folder's `default` becomes the default). What a server
/// lets its clients name.
#[derive(Debug, Clone)]
pub struct PromptLibrary {
    prompts: BTreeMap<String, Arc<Prompt>>,
}

impl Default for PromptLibrary {
    /// The shipped prompts.
    fn default() -> Self {
        let prompts = SHIPPED
            .iter()
            .map(|(name, _)| {
                let prompt = Prompt::shipped(name).expect("a shipped prompt");
                (name.to_string(), Arc::new(prompt))
            })
            .collect();
        PromptLibrary { prompts }
    }
}

impl PromptLibrary {
    /// The shipped prompts and every `.toml`, `.yaml` and `.yml` file of `dir`, by name; two
    /// files of one name are an error naming both.
    pub fn with_folder(dir: &Path) -> Result<PromptLibrary> {
        let origin = dir.display().to_string();
        let entries = std::fs::read_dir(dir).map_err(|e| prompt_error(&origin, e.to_string()))?;
        let mut paths: Vec<std::path::PathBuf> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| {
                let extension = p.extension().and_then(|e| e.to_str()).unwrap_or("");
                p.is_file()
                    && ["toml", "yaml", "yml"].contains(&extension.to_ascii_lowercase().as_str())
            })
            .collect();
        paths.sort();
        let mut library = PromptLibrary::default();
        let mut from_folder: BTreeMap<String, std::path::PathBuf> = BTreeMap::new();
        for path in paths {
            let prompt = Prompt::load(&path)?;
            if let Some(first) = from_folder.get(prompt.name()) {
                return Err(prompt_error(
                    &path.display().to_string(),
                    format!(
                        "a prompt named `{}` is already in {}",
                        prompt.name(),
                        first.display()
                    ),
                ));
            }
            from_folder.insert(prompt.name().to_string(), path);
            library
                .prompts
                .insert(prompt.name().to_string(), Arc::new(prompt));
        }
        Ok(library)
    }

    /// The prompt called `name`.
    pub fn get(&self, name: &str) -> Option<Arc<Prompt>> {
        self.prompts.get(name).cloned()
    }

    /// The prompt used when none is named: the one called `default`.
    pub fn default_prompt(&self) -> Arc<Prompt> {
        self.get("default")
            .expect("the library always has a default")
    }

    /// The prompts, by name.
    pub fn prompts(&self) -> impl Iterator<Item = &Prompt> {
        self.prompts.values().map(|p| p.as_ref())
    }
}

fn check_size(text: &str, origin: &str) -> Result<()> {
    if text.len() > MAX_PROMPT_BYTES {
        return Err(prompt_error(
            origin,
            format!(
                "{} bytes; a prompt may have at most {MAX_PROMPT_BYTES}",
                text.len()
            ),
        ));
    }
    Ok(())
}

/// A template's variables checked: none unknown, the required ones used.
fn check_variables(
    origin: &str,
    name: &str,
    used: &HashSet<String>,
    known: &[&str],
    required: &[&str],
) -> Result<()> {
    let mut unknown: Vec<&String> = used
        .iter()
        .filter(|v| !known.contains(&v.as_str()) && !JINJA_GLOBALS.contains(&v.as_str()))
        .collect();
    unknown.sort();
    if let Some(v) = unknown.first() {
        return Err(prompt_error(
            origin,
            format!(
                "{name}: unknown variable `{v}` (this template may use: {})",
                known.join(", ")
            ),
        ));
    }
    if let Some(v) = required.iter().find(|v| !used.contains(**v)) {
        return Err(prompt_error(
            origin,
            format!("{name}: must use `{{{{ {v} }}}}`"),
        ));
    }
    Ok(())
}

/// The tags and line starts of a user message rendered with empty variables.
fn structure_of(rendered: &str) -> Structure {
    let mut structure = Structure::default();
    for line in rendered.lines() {
        let mut rest = line.to_string();
        while let Some(open) = rest.find('<') {
            let Some(len) = rest[open..].find('>') else {
                break;
            };
            let tag = rest[open..=open + len].to_string();
            if tag.len() > 2 && !tag.contains(char::is_whitespace) {
                structure.tags.push(tag.clone());
            }
            rest.replace_range(open..=open + len, " ");
        }
        let start = rest.trim();
        if start.chars().any(char::is_alphanumeric) {
            structure.lines.push(start.to_lowercase());
        }
    }
    structure.tags.dedup();
    structure.lines.dedup();
    structure
}

fn prompt_error(origin: &str, message: String) -> Error {
    Error::Prompt {
        origin: origin.to_string(),
        message,
    }
}

impl Reasoning {
    /// The reply split at the marker: the reasoning before the marker's line, and the answer
    /// after the marker; `None` when no line starts with the marker (the model never
    /// answered: the whole reply is reasoning).
    pub fn split(&self, reply: &str) -> (String, Option<String>) {
        match self.answer_start(reply) {
            Some((line, after)) => (
                reply[..line].trim().to_string(),
                Some(trim_answer_start(&reply[after..]).trim_end().to_string()),
            ),
            None => (reply.trim().to_string(), None),
        }
    }

    /// Where the marker's line starts and where the text after the marker starts, for the
    /// first line of `text` that starts with a marker (after spaces and markdown `*`, `#`, `_`,
    /// `>`).
    fn answer_start(&self, text: &str) -> Option<(usize, usize)> {
        let markers: Vec<String> = std::iter::once(&self.answer_marker)
            .chain(&self.other_markers)
            .map(|m| m.trim().to_lowercase())
            .collect();
        let mut offset = 0;
        for line in text.split_inclusive('\n') {
            let lead = line.len()
                - line
                    .trim_start_matches([' ', '\t', '*', '#', '_', '>'])
                    .len();
            let body = &line[lead..];
            let starts = |m: &&String| {
                body.len() >= m.len()
                    && body.is_char_boundary(m.len())
                    && body[..m.len()].to_lowercase() == **m
            };
            if let Some(marker) = markers.iter().find(starts) {
                return Some((offset, offset + lead + marker.len()));
            }
            offset += line.len();
        }
        None
    }

    /// A stream filter that passes on only the answer: nothing until the marker's line, then
    /// what follows the marker.
    pub fn stream_filter(&self) -> AnswerStream {
        AnswerStream {
            reasoning: self.clone(),
            buffer: String::new(),
            found: false,
            leading: true,
        }
    }
}

/// Text after a marker without the emphasis, colon and spaces that follow it (`Answer:** x`,
/// `The answer is: x`).
fn trim_answer_start(text: &str) -> &str {
    text.trim_start_matches([' ', '\t', '*', '_', ':'])
}

/// Passes on the streamed tokens of the answer only (see [`Reasoning::stream_filter`]).
#[derive(Debug)]
pub struct AnswerStream {
    reasoning: Reasoning,
    buffer: String,
    found: bool,
    leading: bool,
}

impl AnswerStream {
    /// What of `token` belongs to the answer (possibly empty).
    pub fn feed(&mut self, token: &str) -> String {
        let text = if self.found {
            token.to_string()
        } else {
            self.buffer.push_str(token);
            // The marker's line must be whole before it can be told from a longer word.
            match self.reasoning.answer_start(&self.buffer) {
                Some((_, after)) => {
                    self.found = true;
                    self.buffer[after..].to_string()
                }
                None => return String::new(),
            }
        };
        if self.leading {
            let trimmed = trim_answer_start(&text);
            self.leading = trimmed.is_empty();
            return trimmed.to_string();
        }
        text
    }
}

/// A few-shot example: a question, its answer, and for open book the passage it is answered
/// from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Example {
    pub question: String,
    pub answer: String,
    /// The passage the answer comes from (needed for open-book prompts).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Reasoning shown before the answer when the prompt asks for reasoning.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<String>,
}

/// Reads few-shot examples: JSON lines (`{"question", "answer", "context"?, "title"?,
/// "reasoning"?}`), a JSON array of the same, or a SQuAD file (each answerable question with
/// its first answer and its paragraph).
pub fn load_examples(path: &Path) -> Result<Vec<Example>> {
    let origin = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| prompt_error(&origin, e.to_string()))?;
    let examples = if text.trim_start().starts_with(['[', '{']) && !is_json_lines(path) {
        examples_from_json(&text, &origin)?
    } else {
        let mut out = Vec::new();
        for (i, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let example: Example = serde_json::from_str(line)
                .map_err(|e| prompt_error(&format!("{origin}:{}", i + 1), e.to_string()))?;
            out.push(example);
        }
        out
    };
    for (i, e) in examples.iter().enumerate() {
        if e.question.trim().is_empty() || e.answer.trim().is_empty() {
            return Err(prompt_error(
                &origin,
                format!(
                    "example {}: `question` and `answer` must not be empty",
                    i + 1
                ),
            ));
        }
    }
    if examples.is_empty() {
        return Err(prompt_error(&origin, "no examples".into()));
    }
    Ok(examples)
}

fn is_json_lines(path: &Path) -> bool {
    path.extension().and_then(|e| e.to_str()) == Some("jsonl")
}

fn examples_from_json(text: &str, origin: &str) -> Result<Vec<Example>> {
    let value: serde_json::Value =
        serde_json::from_str(text).map_err(|e| prompt_error(origin, e.to_string()))?;
    if value.get("data").is_some() {
        let dataset = lector_eval::squad::parse_dataset(Path::new(origin), text)?;
        return Ok(dataset
            .questions
            .iter()
            .filter_map(|q| {
                Some(Example {
                    question: q.question.clone(),
                    answer: q.answers.first()?.clone(),
                    context: Some(q.context.to_string()),
                    title: Some(q.title.to_string()),
                    reasoning: None,
                })
            })
            .collect());
    }
    serde_json::from_value(value).map_err(|e| prompt_error(origin, e.to_string()))
}

/// How few-shot examples are chosen for each question.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExampleSelection {
    /// The pool's first examples, the same for every question.
    #[default]
    Fixed,
    /// The examples whose questions are nearest the question, by an embedder.
    Similar,
}

impl std::str::FromStr for ExampleSelection {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        match s {
            "fixed" => Ok(ExampleSelection::Fixed),
            "similar" => Ok(ExampleSelection::Similar),
            other => Err(Error::Invalid(format!(
                "example selection {other:?}: fixed or similar"
            ))),
        }
    }
}

/// A prompt and the few-shot examples asked with it: what a run, a request or a Python call
/// prompts with. The default is the shipped default prompt without examples.
#[derive(Debug, Clone, Default)]
pub struct Prompting {
    pub prompt: Arc<Prompt>,
    pub examples: Option<Arc<ExamplePool>>,
}

impl Prompting {
    /// The layout for `question`: the prompt, the examples picked for it, passages in `order`.
    pub fn layout(&self, question: &str, order: PassageOrder) -> Result<Layout> {
        let examples = match &self.examples {
            Some(pool) => pool.pick(question)?,
            None => Vec::new(),
        };
        Ok(Layout {
            prompt: Arc::clone(&self.prompt),
            examples,
            order,
            ..Layout::default()
        })
    }

    /// The most tokens to generate ([`Prompt::max_new_tokens_for`]).
    pub fn max_new_tokens(&self, asked: Option<usize>) -> usize {
        self.prompt.max_new_tokens_for(asked)
    }
}

/// Turns texts into vectors (the embedder a caller chose); errors as text.
pub type EmbedFn = dyn Fn(&[&str]) -> std::result::Result<Vec<Vec<f32>>, String> + Send + Sync;

/// Few-shot examples and how many to show each question.
pub struct ExamplePool {
    examples: Vec<Example>,
    shots: usize,
    similar: Option<(Box<EmbedFn>, Vec<Vec<f32>>)>,
}

impl std::fmt::Debug for ExamplePool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExamplePool")
            .field("examples", &self.examples.len())
            .field("shots", &self.shots)
            .field("similar", &self.similar.is_some())
            .finish()
    }
}

impl ExamplePool {
    /// The first `shots` examples for every question (less one with the question's own text).
    pub fn fixed(examples: Vec<Example>, shots: usize) -> ExamplePool {
        ExamplePool {
            examples,
            shots,
            similar: None,
        }
    }

    /// The `shots` examples whose questions are nearest the question by `embed` (cosine), the
    /// nearest shown last, next to the question. Embeds the pool now, reporting the examples
    /// done to `on_progress`.
    pub fn similar(
        examples: Vec<Example>,
        shots: usize,
        embed: Box<EmbedFn>,
        on_progress: &mut dyn FnMut(usize),
    ) -> Result<ExamplePool> {
        let mut vectors = Vec::with_capacity(examples.len());
        for chunk in examples.chunks(64) {
            let texts: Vec<&str> = chunk.iter().map(|e| e.question.as_str()).collect();
            let embedded = embed(&texts)
                .map_err(|e| Error::Invalid(format!("embedding the examples: {e}")))?;
            vectors.extend(embedded.into_iter().map(unit));
            on_progress(vectors.len());
        }
        Ok(ExamplePool {
            examples,
            shots,
            similar: Some((embed, vectors)),
        })
    }

    /// How many examples each question gets.
    pub fn shots(&self) -> usize {
        self.shots
    }

    /// The examples to show before `question`. An example with the question's own text is never
    /// shown: it would give the answer away.
    pub fn pick(&self, question: &str) -> Result<Vec<Example>> {
        let same = |e: &Example| squash(&e.question) == squash(question);
        let Some((embed, vectors)) = &self.similar else {
            return Ok(self
                .examples
                .iter()
                .filter(|e| !same(e))
                .take(self.shots)
                .cloned()
                .collect());
        };
        let query = embed(&[question])
            .map_err(|e| Error::Invalid(format!("embedding the question: {e}")))?
            .pop()
            .map(unit)
            .ok_or_else(|| Error::Invalid("the embedder returned no vector".into()))?;
        let mut scored: Vec<(f32, usize)> = vectors
            .iter()
            .enumerate()
            .filter(|(i, _)| !same(&self.examples[*i]))
            .map(|(i, v)| (dot(v, &query), i))
            .collect();
        // Most similar first, ties by pool order; then reversed so the nearest is shown last.
        scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        scored.truncate(self.shots);
        Ok(scored
            .iter()
            .rev()
            .map(|&(_, i)| self.examples[i].clone())
            .collect())
    }
}

fn squash(text: &str) -> String {
    text.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .to_lowercase()
}

fn unit(mut v: Vec<f32>) -> Vec<f32> {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        v.iter_mut().for_each(|x| *x /= norm);
    }
    v
}

fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_prompt_derives_the_markers_lector_always_neutralised() {
        let prompt = Prompt::default();
        assert_eq!(prompt.structure().tags, ["<passages>", "</passages>"]);
        assert_eq!(
            prompt.structure().lines,
            ["question:", "answer with citations:"]
        );
        assert!(prompt.open_system().ends_with(
            "reply exactly: The answer cannot be determined from the provided context."
        ));
    }

    #[test]
    fn unknown_or_missing_variables_are_named() {
        let file = |user: &str| format!("[open_book]\nsystem = \"s\"\nuser = \"\"\"{user}\"\"\"\n");
        let err = Prompt::from_toml(&file("{{ passages }} {{ qestion }}"), "p.toml").unwrap_err();
        assert_eq!(
            err.to_string(),
            "p.toml: open_book.user: unknown variable `qestion` (this template may use: passages, question, disagreement, refusal)"
        );
        let err = Prompt::from_toml(&file("{{ passages }}"), "p.toml").unwrap_err();
        assert!(
            err.to_string()
                .contains("open_book.user: must use `{{ question }}`"),
            "{err}"
        );
        let err = Prompt::from_toml(&file("{% if %}"), "p.toml").unwrap_err();
        assert!(
            err.to_string().starts_with("p.toml: open_book.user: "),
            "{err}"
        );
        let err = Prompt::from_toml("refusal = \"I don't know.\"", "p.toml").unwrap_err();
        assert!(
            err.to_string()
                .contains("must contain lector's refusal phrase"),
            "{err}"
        );
        let err = Prompt::from_toml("color = 1", "p.toml").unwrap_err();
        assert!(err.to_string().contains("unknown field `color`"), "{err}");
    }

    #[test]
    fn a_folder_adds_prompts_and_may_replace_the_default() {
        let dir = tempfile::tempdir().unwrap();
        let write = |file: &str, text: &str| std::fs::write(dir.path().join(file), text).unwrap();
        write(
            "terse.toml",
            "[closed_book]\nsystem = \"One word.\"\nuser = \"{{ question }}\"\n",
        );
        write("default.yaml", "description: the operator's default\n");
        write("notes.txt", "not a prompt");
        let library = PromptLibrary::with_folder(dir.path()).unwrap();
        let names: Vec<&str> = library.prompts().map(Prompt::name).collect();
        assert_eq!(names, ["chain-of-thought", "default", "terse"]);
        assert_eq!(
            library.default_prompt().description(),
            "the operator's default"
        );
        write("terse2.yml", "name: terse\n");
        let err = PromptLibrary::with_folder(dir.path())
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("terse2.yml") && err.contains("already in"),
            "{err}"
        );
    }

    #[test]
    fn a_loop_in_a_template_runs_out_of_fuel() {
        let text = "[closed_book]\nsystem = \"s\"\nuser = \"{% for i in range(10000) %}{% for j in range(10000) %}x{% endfor %}{% endfor %}{{ question }}\"\n";
        let err = Prompt::from_toml(text, "p.toml").unwrap_err();
        assert!(err.to_string().contains("fuel"), "{err}");
    }

    #[test]
    fn reasoning_is_split_from_the_answer_line() {
        let r = Reasoning {
            answer_marker: "Answer:".into(),
            other_markers: vec!["The answer is".into()],
        };
        let (reasoning, answer) =
            r.split("The passage says the Broncos won.\n**Answer:** Denver Broncos [1]\n");
        assert_eq!(reasoning, "The passage says the Broncos won.");
        assert_eq!(answer.as_deref(), Some("Denver Broncos [1]"));
        assert_eq!(r.split("answer: 7").1.as_deref(), Some("7"));
        assert_eq!(
            r.split("The answer is: Paris.").1.as_deref(),
            Some("Paris.")
        );
        // A word that only starts like the marker, or the marker inside a line, is not it.
        assert_eq!(r.split("Answers vary.\nThe Answer: is 3").1, None);
        let reply = "Step one.\nAnswer: Denver Broncos [1].";
        let mut stream = r.stream_filter();
        let streamed: String = reply
            .split_inclusive([' ', ':'])
            .map(|t| stream.feed(t))
            .collect();
        assert_eq!(streamed, r.split(reply).1.unwrap());
    }

    #[test]
    fn similar_examples_come_nearest_last_and_never_the_question_itself() {
        let example = |q: &str| Example {
            question: q.into(),
            answer: "a".into(),
            context: None,
            title: None,
            reasoning: None,
        };
        let pool = vec![
            example("cats"),
            example("dogs"),
            example("cats and dogs"),
            example("fish"),
        ];
        // A toy embedder: counts of two words.
        let embed: Box<EmbedFn> = Box::new(|texts| {
            Ok(texts
                .iter()
                .map(|t| {
                    vec![
                        t.matches("cats").count() as f32,
                        t.matches("dogs").count() as f32,
                        0.1,
                    ]
                })
                .collect())
        });
        let pool = ExamplePool::similar(pool, 2, embed, &mut |_| {}).unwrap();
        let picked: Vec<String> = pool
            .pick("dogs")
            .unwrap()
            .into_iter()
            .map(|e| e.question)
            .collect();
        assert_eq!(
            picked,
            ["fish", "cats and dogs"],
            "the same question is left out"
        );
        let fixed = ExamplePool::fixed(vec![example("cats"), example("dogs"), example("fish")], 2);
        let picked: Vec<String> = fixed
            .pick("Cats")
            .unwrap()
            .into_iter()
            .map(|e| e.question)
            .collect();
        assert_eq!(picked, ["dogs", "fish"]);
    }
}
