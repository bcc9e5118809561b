//! Cutting a (question, context) pair into model inputs exactly as transformers' fast-tokenizer
//! overflow does (`truncation="only_second"`, `stride=doc_stride`), built by hand because the
//! `tokenizers` crate's own strided truncation of pairs loses the end of long contexts
//! (upstream issue 2091).
//!
//! Question and context are encoded separately without special tokens, the context is cut into
//! windows (starts 0, step `window_len - doc_stride`, stop after the first window that reaches the
//! end), and each (question, window) pair goes through the tokenizer's post-processor, so BERT
//! (`[CLS] q [SEP] c [SEP]`) and RoBERTa (`<s> q </s></s> c </s>`) templates both come out right.

use crate::error::{Error, Result};
use crate::ReadParams;
use std::ops::Range;
use tokenizers::{Encoding, Tokenizer};

/// One model input: a question with one slice of the context.
#[derive(Debug, Clone)]
pub struct Window {
    pub ids: Vec<u32>,
    pub type_ids: Vec<u32>,
    /// Tokens an answer may use: the context, plus CLS (as the pipeline's `p_mask`).
    pub desired: Vec<bool>,
    /// Position in `ids` of the first context token.
    pub first_context_pos: usize,
    /// The context tokens (indices into the context encoding) this window holds.
    pub context_tokens: Range<usize>,
}

impl Window {
    /// Context-token index of sequence position `pos`, if it is a context token of this window.
    pub fn context_token(&self, pos: usize) -> Option<usize> {
        let k = pos.checked_sub(self.first_context_pos)?;
        (k < self.context_tokens.len()).then(|| self.context_tokens.start + k)
    }
}

/// Window geometry: how many context tokens fit next to the question, and the step between windows.
pub struct Layout {
    pub window_len: usize,
    pub step: usize,
}

impl Layout {
    pub fn new(
        max_seq_len: usize,
        doc_stride: usize,
        question_len: usize,
        special: usize,
    ) -> Result<Self> {
        let window_len = max_seq_len.saturating_sub(question_len + special);
        if window_len == 0 {
            return Err(Error::Params(format!(
                "max_seq_len {max_seq_len} leaves no room for the context next to a {question_len}-token question"
            )));
        }
        Ok(Self {
            window_len,
            step: window_len.saturating_sub(doc_stride),
        })
    }

    /// Context-token ranges of the windows over `n` tokens (one window when they all fit).
    /// Like the tokenizer, a stride that is not smaller than the window is an error only when the
    /// context actually needs several windows.
    pub fn ranges(&self, n: usize) -> Result<Vec<Range<usize>>> {
        if n > self.window_len && self.step == 0 {
            return Err(Error::Params(format!(
                "doc_stride must be smaller than the {} context tokens that fit in a window",
                self.window_len
            )));
        }
        let mut ranges = Vec::new();
        let mut start = 0;
        loop {
            let stop = (start + self.window_len).min(n);
            ranges.push(start..stop);
            if stop == n {
                return Ok(ranges);
            }
            start += self.step;
        }
    }
}

/// A copy of `enc` restricted to `range`, without overflow or sequence information.
pub fn slice_encoding(enc: &Encoding, range: Range<usize>) -> Encoding {
    let r = range;
    Encoding::new(
        enc.get_ids()[r.clone()].to_vec(),
        enc.get_type_ids()[r.clone()].to_vec(),
        enc.get_tokens()[r.clone()].to_vec(),
        enc.get_word_ids()[r.clone()].to_vec(),
        enc.get_offsets()[r.clone()].to_vec(),
        enc.get_special_tokens_mask()[r.clone()].to_vec(),
        enc.get_attention_mask()[r].to_vec(),
        Vec::new(),
        Default::default(),
    )
}

/// Builds the input for `question` and `range` of `context`.
pub fn build_window(
    tokenizer: &Tokenizer,
    question: &Encoding,
    context: &Encoding,
    range: Range<usize>,
    cls_token_id: Option<u32>,
) -> Result<Window> {
    let pair = tokenizer
        .post_process(
            question.clone(),
            Some(slice_encoding(context, range.clone())),
            true,
        )
        .map_err(|e| Error::Tokenizer(e.to_string()))?;
    let sequence_ids = pair.get_sequence_ids();
    let ids = pair.get_ids().to_vec();
    let desired = sequence_ids
        .iter()
        .zip(&ids)
        .map(|(seq, &id)| *seq == Some(1) || Some(id) == cls_token_id)
        .collect();
    let first_context_pos = sequence_ids
        .iter()
        .position(|s| *s == Some(1))
        .unwrap_or(ids.len());
    Ok(Window {
        type_ids: pair.get_type_ids().to_vec(),
        ids,
        desired,
        first_context_pos,
        context_tokens: range,
    })
}

/// The windows the reader runs for `question` over `context` (encoded without special tokens),
/// and whether the question was cut to `params.max_question_len`. Training builds its windows
/// with this too, so a model learns on exactly the inputs it will read.
pub fn question_windows(
    tokenizer: &Tokenizer,
    cls_token_id: Option<u32>,
    question: &str,
    context: &Encoding,
    params: &ReadParams,
) -> Result<(Vec<Window>, bool)> {
    if question.trim().is_empty() {
        return Err(Error::EmptyQuestion);
    }
    let mut q = tokenizer
        .encode(question, false)
        .map_err(|e| Error::Tokenizer(e.to_string()))?;
    let truncated = q.len() > params.max_question_len;
    if truncated {
        q = slice_encoding(&q, 0..params.max_question_len);
    }
    let special = special_tokens_for_pair(tokenizer);
    let layout = Layout::new(params.max_seq_len, params.doc_stride, q.len(), special)?;
    let windows = layout
        .ranges(context.len())?
        .into_iter()
        .map(|range| build_window(tokenizer, &q, context, range, cls_token_id))
        .collect::<Result<_>>()?;
    Ok((windows, truncated))
}

/// Number of special tokens the post-processor adds around a pair.
pub fn special_tokens_for_pair(tokenizer: &Tokenizer) -> usize {
    use tokenizers::PostProcessor;
    tokenizer
        .get_post_processor()
        .map_or(0, |p| p.added_tokens(true))
}

#[cfg(test)]
mod tests {
    use super::Layout;

    #[test]
    fn windows_cover_every_token_and_stop_at_the_end() {
        for n in [0, 1, 5, 10, 11, 12, 100, 1001] {
            let layout = Layout::new(20, 4, 3, 3).unwrap(); // 14 tokens per window, step 10
            let ranges = layout.ranges(n).unwrap();
            assert_eq!(ranges[0].start, 0);
            assert_eq!(ranges.last().unwrap().end, n);
            for pair in ranges.windows(2) {
                assert_eq!(pair[1].start, pair[0].start + 10);
                assert!(pair[1].start < pair[0].end, "windows overlap");
            }
            assert_eq!(ranges.iter().filter(|r| r.end == n).count(), 1);
        }
    }

    #[test]
    fn stride_must_be_smaller_than_window_when_splitting() {
        let layout = Layout::new(20, 14, 3, 3).unwrap();
        assert_eq!(layout.ranges(14).unwrap(), vec![0..14]);
        assert!(layout.ranges(15).is_err());
        assert!(Layout::new(20, 13, 3, 3).unwrap().ranges(100).is_ok());
        assert!(Layout::new(6, 1, 3, 3).is_err());
    }
}
