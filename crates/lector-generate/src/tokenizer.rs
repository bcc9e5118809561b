//! The tokenizer a GGUF file describes (`tokenizer.ggml.*`), rebuilt as a Hugging Face
//! `tokenizers::Tokenizer`.
//!
//! Only byte-level BPE (`tokenizer.ggml.model = "gpt2"`) is supported: the vocabulary is
//! `tokenizer.ggml.tokens` (ids are positions), the merges `tokenizer.ggml.merges` ("a b" pairs,
//! in priority order), and every token of type control (3) or user-defined (4) in
//! `tokenizer.ggml.token_type` is an added token matched before pre-tokenisation, as llama.cpp
//! does when it tokenises a rendered chat prompt. `tokenizer.ggml.pre` picks the pre-tokeniser
//! (the regex that splits text into words before BPE), mirroring llama.cpp's table for the
//! families listed in [`pre_tokenizer`].

use crate::error::{Error, Result};
use crate::gguf::Gguf;
use std::collections::BTreeSet;
use tokenizers::decoders::byte_level::ByteLevel as ByteLevelDecoder;
use tokenizers::models::bpe::{Vocab, BPE};
use tokenizers::normalizers::unicode::NFC;
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::pre_tokenizers::digits::Digits;
use tokenizers::pre_tokenizers::sequence::Sequence;
use tokenizers::pre_tokenizers::split::{Split, SplitPattern};
use tokenizers::pre_tokenizers::PreTokenizerWrapper;
use tokenizers::{AddedToken, SplitDelimiterBehavior, Tokenizer};

/// llama.cpp's token types (`tokenizer.ggml.token_type`).
const CONTROL: i32 = 3;
const USER_DEFINED: i32 = 4;

/// Llama 3's word regex (numbers in groups of at most three digits).
const LLAMA3_REGEX: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
/// Qwen2's word regex (one digit per word).
const QWEN2_REGEX: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// A GGUF model's tokenizer with its special tokens.
pub struct GgufTokenizer {
    tokenizer: Tokenizer,
    /// Beginning-of-sequence token and whether prompts start with it.
    pub bos: Option<(u32, String)>,
    pub add_bos: bool,
    /// End-of-sequence token.
    pub eos: Option<(u32, String)>,
    /// Tokens that end a generation: eos, eot and the end-of-turn markers of common templates.
    pub end_of_generation: BTreeSet<u32>,
    vocab_size: usize,
}

impl GgufTokenizer {
    /// Builds the tokenizer described by `gguf`'s metadata.
    pub fn from_gguf(gguf: &Gguf) -> Result<Self> {
        let fail = |message: String| Error::Tokenizer {
            path: gguf.path.clone(),
            message,
        };
        let model = gguf.string("tokenizer.ggml.model")?;
        if model != "gpt2" {
            return Err(fail(format!(
                "tokenizer model {model:?} is not supported (only \"gpt2\", byte-level BPE)"
            )));
        }
        let tokens = gguf.strings("tokenizer.ggml.tokens")?;
        let merges = gguf.strings("tokenizer.ggml.merges")?;
        let types = token_types(gguf, tokens.len())?;
        let pre = gguf.opt_string("tokenizer.ggml.pre")?.unwrap_or("default");
        let (pre_tokenizer, ignore_merges, nfc) = pre_tokenizer(pre).map_err(fail)?;

        let vocab: Vocab = tokens
            .iter()
            .enumerate()
            .map(|(id, t)| (t.to_string(), id as u32))
            .collect();
        let merges = merges
            .iter()
            .map(|m| {
                m.split_once(' ')
                    .map(|(a, b)| (a.to_string(), b.to_string()))
                    .ok_or_else(|| fail(format!("merge {m:?} is not two tokens")))
            })
            .collect::<Result<Vec<_>>>()?;
        let bpe = BPE::builder()
            .vocab_and_merges(vocab, merges)
            .ignore_merges(ignore_merges)
            .build()
            .map_err(|e| fail(e.to_string()))?;
        let mut tokenizer = Tokenizer::new(bpe);
        tokenizer.with_pre_tokenizer(Some(pre_tokenizer));
        tokenizer.with_decoder(Some(ByteLevelDecoder::default()));
        if nfc {
            tokenizer
                .with_normalizer(Some(NFC))
                .map_err(|e| fail(e.to_string()))?;
        }
        let specials: Vec<AddedToken> = tokens
            .iter()
            .zip(&types)
            .filter(|(_, &t)| t == CONTROL || t == USER_DEFINED)
            .map(|(content, _)| AddedToken::from(content.to_string(), true).normalized(false))
            .collect();
        tokenizer
            .add_special_tokens(specials)
            .map_err(|e| fail(e.to_string()))?;

        let special = |key: &str| -> Result<Option<(u32, String)>> {
            Ok(gguf.opt_uint(key)?.and_then(|id| {
                let id = u32::try_from(id).ok()?;
                tokens.get(id as usize).map(|t| (id, t.to_string()))
            }))
        };
        let bos = special("tokenizer.ggml.bos_token_id")?;
        let eos = special("tokenizer.ggml.eos_token_id")?;
        let eot = special("tokenizer.ggml.eot_token_id")?;
        let add_bos = gguf
            .opt_bool("tokenizer.ggml.add_bos_token")?
            .unwrap_or(false)
            && bos.is_some();
        let end_of_generation = end_of_generation(&tokens, &types, [&eos, &eot]);
        Ok(GgufTokenizer {
            tokenizer,
            bos,
            add_bos,
            eos,
            end_of_generation,
            vocab_size: tokens.len(),
        })
    }

    /// The token ids of `text`, special-token strings included as their tokens; no BOS.
    pub fn encode(&self, text: &str) -> Result<Vec<u32>> {
        self.tokenizer
            .encode_fast(text, false)
            .map(|e| e.get_ids().to_vec())
            .map_err(|e| Error::Invalid(format!("cannot tokenise: {e}")))
    }

    /// The token ids of a prompt: BOS first when the model wants it.
    pub fn encode_prompt(&self, text: &str) -> Result<Vec<u32>> {
        let mut ids = Vec::new();
        if let (true, Some((bos, _))) = (self.add_bos, &self.bos) {
            ids.push(*bos);
        }
        ids.extend(self.encode(text)?);
        Ok(ids)
    }

    /// The text of `ids`, special tokens dropped.
    pub fn decode(&self, ids: &[u32]) -> Result<String> {
        self.tokenizer
            .decode(ids, true)
            .map_err(|e| Error::Invalid(format!("cannot decode: {e}")))
    }

    /// The number of tokens in the vocabulary.
    pub fn vocab_size(&self) -> usize {
        self.vocab_size
    }

    /// The string of every special (control or user-defined) token, for keeping them out of
    /// untrusted text.
    pub fn special_strings(&self) -> Vec<String> {
        self.tokenizer
            .get_added_tokens_decoder()
            .values()
            .filter(|t| t.special)
            .map(|t| t.content.clone())
            .collect()
    }

    /// The underlying Hugging Face tokenizer.
    pub fn inner(&self) -> &Tokenizer {
        &self.tokenizer
    }
}

fn token_types(gguf: &Gguf, n: usize) -> Result<Vec<i32>> {
    if gguf.get("tokenizer.ggml.token_type").is_none() {
        return Ok(vec![1; n]);
    }
    let types = gguf
        .array("tokenizer.ggml.token_type")?
        .iter()
        .map(|v| {
            v.to_i32()
                .map_err(|e| gguf.error(format!("token type: {e}")))
        })
        .collect::<Result<Vec<_>>>()?;
    if types.len() != n {
        return Err(gguf.error(format!("{} token types for {n} tokens", types.len())));
    }
    Ok(types)
}

/// The pre-tokeniser of llama.cpp's `tokenizer.ggml.pre` value, whether BPE ignores merges for
/// whole-word vocabulary hits (Llama 3), and whether text is NFC-normalised first (Qwen2).
pub fn pre_tokenizer(pre: &str) -> std::result::Result<(PreTokenizerWrapper, bool, bool), String> {
    let byte_level =
        |regex: bool| -> PreTokenizerWrapper { ByteLevel::new(false, true, regex).into() };
    let split = |regex: &str| -> std::result::Result<PreTokenizerWrapper, String> {
        Split::new(
            SplitPattern::Regex(regex.to_string()),
            SplitDelimiterBehavior::Isolated,
            false,
        )
        .map(Into::into)
        .map_err(|e| e.to_string())
    };
    Ok(match pre {
        "default" | "gpt2" | "gpt-2" => (byte_level(true), false, false),
        // llama.cpp: "\p{N}" then the GPT-2 regex = HF Digits(individual) + ByteLevel.
        "smollm" | "starcoder" | "refact" | "codeshell" | "command-r" | "exaone" | "minerva" => (
            Sequence::new(vec![Digits::new(true).into(), byte_level(true)]).into(),
            false,
            false,
        ),
        "llama3" | "llama-v3" | "llama-bpe" => (
            Sequence::new(vec![split(LLAMA3_REGEX)?, byte_level(false)]).into(),
            true,
            false,
        ),
        "qwen2" => (
            Sequence::new(vec![split(QWEN2_REGEX)?, byte_level(false)]).into(),
            false,
            true,
        ),
        other => {
            return Err(format!(
                "pre-tokenizer {other:?} is not supported (supported: default/gpt2, smollm/starcoder, llama3/llama-bpe, qwen2)"
            ))
        }
    })
}

/// eos, eot, and control tokens that end a turn in common chat templates.
fn end_of_generation(
    tokens: &[&str],
    types: &[i32],
    named: [&Option<(u32, String)>; 2],
) -> BTreeSet<u32> {
    const END_OF_TURN: [&str; 5] = [
        "<|im_end|>",
        "<|endoftext|>",
        "<|eot_id|>",
        "<|end_of_text|>",
        "<end_of_turn>",
    ];
    let mut set: BTreeSet<u32> = named
        .iter()
        .filter_map(|t| t.as_ref().map(|t| t.0))
        .collect();
    for (id, (token, &kind)) in tokens.iter().zip(types).enumerate() {
        if kind == CONTROL && END_OF_TURN.contains(token) {
            set.insert(id as u32);
        }
    }
    set
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_pre_tokenizer_is_named() {
        let err = pre_tokenizer("tekken").err().unwrap();
        assert!(err.contains("\"tekken\""), "{err}");
    }
}
