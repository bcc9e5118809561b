//! Chat templates: the Jinja template a GGUF carries in `tokenizer.chat_template`, rendered with
//! minijinja the way Hugging Face `apply_chat_template` renders it (`trim_blocks`,
//! `lstrip_blocks`, `messages`, `add_generation_prompt`, `bos_token`, `eos_token`,
//! `raise_exception`, Python string methods).

use crate::error::{Error, Result};
use crate::Message;
use minijinja::{context, Environment, ErrorKind};

/// ChatML, used when a model has no template of its own.
pub const CHATML: &str = "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";

/// A compiled chat template.
pub struct ChatTemplate {
    env: Environment<'static>,
    bos: String,
    eos: String,
}

impl ChatTemplate {
    /// Compiles `source`; `bos` and `eos` are the strings the template sees as `bos_token` and
    /// `eos_token`.
    pub fn new(source: &str, bos: &str, eos: &str) -> Result<Self> {
        let mut env = Environment::new();
        env.set_trim_blocks(true);
        env.set_lstrip_blocks(true);
        env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
        env.add_function(
            "raise_exception",
            |message: String| -> std::result::Result<String, minijinja::Error> {
                Err(minijinja::Error::new(ErrorKind::InvalidOperation, message))
            },
        );
        env.add_template_owned("chat", source.to_string())
            .map_err(|e| Error::Template(e.to_string()))?;
        Ok(ChatTemplate {
            env,
            bos: bos.to_string(),
            eos: eos.to_string(),
        })
    }

    /// The prompt text for `messages`, ending with the assistant's turn opener.
    pub fn render(&self, messages: &[Message]) -> Result<String> {
        let template = self
            .env
            .get_template("chat")
            .map_err(|e| Error::Template(e.to_string()))?;
        template
            .render(context! {
                messages => messages,
                add_generation_prompt => true,
                bos_token => self.bos,
                eos_token => self.eos,
            })
            .map_err(|e| Error::Template(e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chatml_renders_turns_and_generation_prompt() {
        let t = ChatTemplate::new(CHATML, "", "<|im_end|>").unwrap();
        let text = t
            .render(&[Message::system("Be brief."), Message::user("Hi")])
            .unwrap();
        assert_eq!(
            text,
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
        );
    }

    #[test]
    fn raise_exception_is_an_error() {
        let t = ChatTemplate::new(
            "{% if messages[0]['role'] != 'user' %}{{ raise_exception('user first') }}{% endif %}",
            "",
            "",
        )
        .unwrap();
        let err = t.render(&[Message::system("x")]).unwrap_err().to_string();
        assert!(err.contains("user first"), "{err}");
    }

    #[test]
    fn python_string_methods_work() {
        let t = ChatTemplate::new("{{ messages[0]['content'].strip() }}", "", "").unwrap();
        assert_eq!(t.render(&[Message::user("  x  ")]).unwrap(), "x");
    }
}
