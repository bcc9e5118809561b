//! The training objectives.
//! - Reader: start/end cross-entropy over each window's tokens (padding excluded), as
//!   transformers' `...ForQuestionAnswering` computes it: `(CE(start) + CE(end)) / 2`, here
//!   weighted per window by its file's weight and averaged over the batch; optionally shared
//!   normalisation across a question's windows.
//! - Embedder: [`ranking_loss`], sentence-transformers' MultipleNegativesRankingLoss.
//! - Reranker: [`listwise_loss`], one softmax per question over its passages.

use crate::model::Batch;
use candle_core::{Device, Result, Tensor, D};

/// What each window of a batch should predict.
pub struct Targets {
    pub starts: Tensor,
    pub ends: Tensor,
    pub weights: Tensor,
}

impl Targets {
    pub fn new(starts: Vec<u32>, ends: Vec<u32>, weights: Vec<f32>) -> Result<Self> {
        let dev = &Device::Cpu;
        let n = starts.len();
        Ok(Self {
            starts: Tensor::from_vec(starts, n, dev)?,
            ends: Tensor::from_vec(ends, n, dev)?,
            weights: Tensor::from_vec(weights, n, dev)?,
        })
    }
}

/// Per-window cross-entropy of `logits` `(rows, seq)` against `target` positions.
fn cross_entropy(logits: &Tensor, padding: &Tensor, target: &Tensor) -> Result<Tensor> {
    let log_probs = candle_nn::ops::log_softmax(&(logits - padding)?, 1)?;
    log_probs
        .gather(&target.unsqueeze(1)?, 1)?
        .squeeze(1)?
        .neg()
}

/// The mean over the batch of `weight × (CE(start) + CE(end)) / 2`.
pub fn span_loss(start: &Tensor, end: &Tensor, batch: &Batch, targets: &Targets) -> Result<Tensor> {
    let per_window = ((cross_entropy(start, &batch.padding, &targets.starts)?
        + cross_entropy(end, &batch.padding, &targets.ends)?)?
        * 0.5)?;
    (per_window * &targets.weights)?.mean_all()
}

/// Shared normalisation (Clark & Gardner 2018) over the windows of each question in a batch: one
/// softmax over every context token of every window of the question, each logit taken relative
/// to its own window's [CLS] logit (the odds lector's aggregation compares across passages). The
/// target is every position holding the answer's first (last) token, their probabilities summed.
/// Questions with no answer in any window add nothing here; their windows learn [CLS] from
/// [`span_loss`].
pub struct Groups {
    /// Per answered question: flat indices (row × seq + position) of all its context tokens.
    pub all: Vec<Tensor>,
    /// Flat indices of the gold start positions, per question (same order as `all`).
    pub gold_starts: Vec<Tensor>,
    pub gold_ends: Vec<Tensor>,
    /// `(rows, 1)`: the [CLS] position of each window.
    pub cls: Tensor,
}

/// Mean over the batch's answered questions of `−log Σ_gold p` under the shared softmax, for
/// starts and ends, halved as the span loss is.
pub fn shared_norm_loss(start: &Tensor, end: &Tensor, groups: &Groups) -> Result<Tensor> {
    if groups.all.is_empty() {
        return Tensor::zeros((), candle_core::DType::F32, &Device::Cpu);
    }
    let relative = |logits: &Tensor| -> Result<Tensor> {
        logits
            .broadcast_sub(&logits.gather(&groups.cls, 1)?)?
            .flatten_all()
    };
    let (start, end) = (relative(start)?, relative(end)?);
    let mut total = Tensor::zeros((), candle_core::DType::F32, &Device::Cpu)?;
    for (i, all) in groups.all.iter().enumerate() {
        for (flat, gold) in [
            (&start, &groups.gold_starts[i]),
            (&end, &groups.gold_ends[i]),
        ] {
            let term = (log_sum_exp(&flat.index_select(all, 0)?)?
                - log_sum_exp(&flat.index_select(gold, 0)?)?)?;
            total = (total + term)?;
        }
    }
    total / (2.0 * groups.all.len() as f64)
}

fn log_sum_exp(xs: &Tensor) -> Result<Tensor> {
    let max = xs.max_keepdim(0)?.detach();
    (xs.broadcast_sub(&max)?.exp()?.sum_keepdim(0)?.log()? + max)?.squeeze(0)
}

/// MultipleNegativesRankingLoss: the mean over questions of the cross-entropy of each question's
/// positive among every passage of the batch, scored by cosine similarity × `scale`.
/// `questions` `(n, dim)` and `passages` `(columns, dim)` are unnormalised embeddings; column `i`
/// (`i < n`) is question `i`'s positive, later columns are hard negatives. `texts` gives each
/// column's text identity: a column other than `i` holding question `i`'s own text (two questions
/// about one paragraph) is masked out of its negatives rather than counted against it.
pub fn ranking_loss(
    questions: &Tensor,
    passages: &Tensor,
    texts: &[usize],
    scale: f64,
) -> Result<Tensor> {
    let n = questions.dim(0)?;
    let mask: Vec<f32> = (0..n)
        .flat_map(|i| {
            texts.iter().enumerate().map(move |(j, &text)| {
                if j != i && text == texts[i] {
                    -1e9
                } else {
                    0.0
                }
            })
        })
        .collect();
    let mask = Tensor::from_vec(mask, (n, texts.len()), &Device::Cpu)?;
    let scores = ((normalize(questions)?.matmul(&normalize(passages)?.t()?)? * scale)? + mask)?;
    let targets = Tensor::from_vec((0..n as u32).collect::<Vec<_>>(), n, &Device::Cpu)?;
    candle_nn::loss::cross_entropy(&scores, &targets)
}

/// Rows scaled to unit L2 norm.
fn normalize(x: &Tensor) -> Result<Tensor> {
    x.broadcast_div(&x.sqr()?.sum_keepdim(D::Minus1)?.sqrt()?)
}

/// The mean over questions of `−log softmax(group)[0]`: `scores` `(rows,)` hold consecutive
/// groups of `group_sizes` rows, each a question's positive passage first, then its negatives.
pub fn listwise_loss(scores: &Tensor, group_sizes: &[usize]) -> Result<Tensor> {
    let mut total = Tensor::zeros((), candle_core::DType::F32, &Device::Cpu)?;
    let mut offset = 0;
    for &len in group_sizes {
        let log_probs = candle_nn::ops::log_softmax(&scores.narrow(0, offset, len)?, 0)?;
        total = (total - log_probs.narrow(0, 0, 1)?.squeeze(0)?)?;
        offset += len;
    }
    total / group_sizes.len() as f64
}
