//! BERTScore (Zhang et al., 2020) from contextual token embeddings, computed exactly as the
//! `bert-score` package (0.3.13, `bert_score/utils.py` and `score.py`) does; the embeddings
//! themselves come from a model (lector-models' `TokenEncoder`), so this module stays model-free.
//!
//! For a candidate `c` and a reference `r`, every token is matched to its most similar token of
//! the other text (cosine similarity of the hidden states, special tokens included as match
//! targets); precision averages the candidate tokens' best matches, recall the reference tokens',
//! each weighted ([`Weighting`]) and the weights normalised to sum 1; F1 is their harmonic mean.
//! The package's details are kept, so that scores agree to float precision:
//! - a candidate or reference of exactly two tokens (an empty text: its special tokens alone)
//!   scores P = R = 0, F1 computed before that (so 0 as well, through its NaN);
//! - F1 is 0 where it is NaN, P and R are left NaN where all of a text's weights are 0;
//! - the package compares pairs in batches of 64, padding each batch to its longest text, and
//!   the padded positions take part in the max with similarity 0: a token's best match is
//!   floored at 0 when the other text is shorter than the longest of its kind in the batch
//!   ([`Options::batch_size`]; it only matters when every similarity of a token is negative);
//! - with several references the package keeps, for each of P, R and F1 separately, the maximum
//!   over the references (`all_preds[beg:end].max(dim=0)`), NaN winning as in torch;
//! - baseline rescaling, `(x - b) / (1 - b)`, applies to those maxima ([`Baseline`]).

use crate::error::{Error, Result};
use crate::input::{invalid, read_text};
use rustc_hash::{FxHashMap, FxHashSet};
use serde::Serialize;
use serde_json::Value;
use std::path::Path;

/// The package's batch size for matching pairs (`score(batch_size=64)`).
pub const PACKAGE_BATCH_SIZE: usize = 64;

/// One text's tokens: ids (special tokens included) and hidden states, `(ids.len(), dim)`
/// row-major.
#[derive(Debug, Clone, PartialEq)]
pub struct TokenStates {
    /// Token ids as the tokenizer gives them, special tokens included.
    pub ids: Vec<u32>,
    /// One hidden state of `dim` values per token.
    pub states: Vec<f32>,
}

/// A candidate and its references, as indices into the texts given to [`score`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pairing {
    /// The candidate text.
    pub candidate: usize,
    /// Its references (at least one).
    pub references: Vec<usize>,
}

/// How the tokens of a text are weighted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Weighting {
    /// Every token weighs 1 except these ids (the package zeroes its tokenizer's `cls_token_id`
    /// and `sep_token_id`).
    Uniform {
        /// Ids that weigh 0.
        zero: Vec<u32>,
    },
    /// `idf(w) = ln((M + 1) / (df(w) + 1))` over the references of every item (M of them, a
    /// reference repeated in several items counted each time; `df` counts the references that
    /// contain `w`). Special tokens are in every reference, so they weigh `ln 1 = 0`.
    Idf,
}

/// Scoring options.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    /// Token weights.
    pub weighting: Weighting,
    /// Pairs per matching batch, which decides where the package's padding floors a best match
    /// at 0 (see the module documentation): [`PACKAGE_BATCH_SIZE`] for its results.
    pub batch_size: usize,
}

/// Precision, recall and F1 of one candidate.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Prf {
    /// Candidate tokens' weighted best matches in the reference.
    pub precision: f64,
    /// Reference tokens' weighted best matches in the candidate.
    pub recall: f64,
    /// Harmonic mean of precision and recall.
    pub f1: f64,
}

impl Prf {
    /// Element-wise maximum, NaN winning as in torch's `max`.
    fn max(self, other: Prf) -> Prf {
        Prf {
            precision: nan_max(self.precision, other.precision),
            recall: nan_max(self.recall, other.recall),
            f1: nan_max(self.f1, other.f1),
        }
    }

    /// `(x - b) / (1 - b)` for each of P, R and F1 (the package's `rescale_with_baseline`).
    pub fn rescaled(self, baseline: Prf) -> Prf {
        let rescale = |x: f64, b: f64| (x - b) / (1.0 - b);
        Prf {
            precision: rescale(self.precision, baseline.precision),
            recall: rescale(self.recall, baseline.recall),
            f1: rescale(self.f1, baseline.f1),
        }
    }
}

fn nan_max(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else {
        a.max(b)
    }
}

/// BERTScore of every pairing: each (candidate, reference) pair scored, then the maximum over
/// a candidate's references. `texts` hold `dim`-wide states; a pairing naming a text that does
/// not exist, a pairing without references or states of the wrong size is a
/// [`Error::Mismatch`].
pub fn score(
    texts: &[TokenStates],
    dim: usize,
    pairings: &[Pairing],
    options: &Options,
) -> Result<Vec<Prf>> {
    check(texts, dim, pairings)?;
    let pairs: Vec<(usize, usize)> = pairings
        .iter()
        .flat_map(|p| p.references.iter().map(|&r| (p.candidate, r)))
        .collect();
    let weights = TokenWeights::new(texts, pairings, &options.weighting);
    let norms: Vec<Vec<f64>> = texts.iter().map(|t| token_norms(&t.states, dim)).collect();
    let mut scores = Vec::with_capacity(pairs.len());
    for batch in pairs.chunks(options.batch_size.max(1)) {
        let longest = |side: fn(&(usize, usize)) -> usize| {
            batch.iter().map(|p| texts[side(p)].ids.len()).max()
        };
        let (longest_candidate, longest_reference) = (longest(|p| p.0), longest(|p| p.1));
        for &(c, r) in batch {
            let floors = Floors {
                precision: Some(texts[r].ids.len()) < longest_reference,
                recall: Some(texts[c].ids.len()) < longest_candidate,
            };
            let candidate = Side::new(&texts[c], &norms[c], &weights);
            let reference = Side::new(&texts[r], &norms[r], &weights);
            scores.push(score_pair(&candidate, &reference, dim, floors));
        }
    }
    let mut scores = scores.into_iter();
    Ok(pairings
        .iter()
        .map(|p| {
            let mut best = scores.next().expect("one score per pair");
            for _ in 1..p.references.len() {
                best = best.max(scores.next().expect("one score per pair"));
            }
            best
        })
        .collect())
}

fn check(texts: &[TokenStates], dim: usize, pairings: &[Pairing]) -> Result<()> {
    if let Some((i, t)) = texts
        .iter()
        .enumerate()
        .find(|(_, t)| t.states.len() != t.ids.len() * dim)
    {
        return Err(Error::Mismatch(format!(
            "text {i} has {} tokens but {} state values (want {} per token)",
            t.ids.len(),
            t.states.len(),
            dim
        )));
    }
    for (k, p) in pairings.iter().enumerate() {
        if p.references.is_empty() {
            return Err(Error::Mismatch(format!("item {k} has no references")));
        }
        if let Some(&bad) = std::iter::once(&p.candidate)
            .chain(&p.references)
            .find(|&&t| t >= texts.len())
        {
            return Err(Error::Mismatch(format!(
                "item {k} names text {bad}, but there are {} texts",
                texts.len()
            )));
        }
    }
    Ok(())
}

/// The L2 norm of each token state (the package divides each state by it).
fn token_norms(states: &[f32], dim: usize) -> Vec<f64> {
    states
        .chunks_exact(dim.max(1))
        .map(|s| s.iter().map(|&x| f64::from(x).powi(2)).sum::<f64>().sqrt())
        .collect()
}

/// The weight of every token id, per [`Weighting`].
struct TokenWeights {
    zero: FxHashSet<u32>,
    /// With idf: the number of references (M) and each id's document frequency.
    idf: Option<(usize, FxHashMap<u32, usize>)>,
}

impl TokenWeights {
    fn new(texts: &[TokenStates], pairings: &[Pairing], weighting: &Weighting) -> Self {
        match weighting {
            Weighting::Uniform { zero } => TokenWeights {
                zero: zero.iter().copied().collect(),
                idf: None,
            },
            Weighting::Idf => {
                let references: Vec<usize> = pairings
                    .iter()
                    .flat_map(|p| p.references.iter().copied())
                    .collect();
                let mut df: FxHashMap<u32, usize> = FxHashMap::default();
                for &r in &references {
                    let distinct: FxHashSet<u32> = texts[r].ids.iter().copied().collect();
                    for id in distinct {
                        *df.entry(id).or_default() += 1;
                    }
                }
                TokenWeights {
                    zero: FxHashSet::default(),
                    idf: Some((references.len(), df)),
                }
            }
        }
    }

    fn weight(&self, id: u32) -> f64 {
        match &self.idf {
            Some((documents, df)) => {
                let df = df.get(&id).copied().unwrap_or(0);
                ((documents + 1) as f64 / (df + 1) as f64).ln()
            }
            None if self.zero.contains(&id) => 0.0,
            None => 1.0,
        }
    }
}

/// One side of a pair: states, norms and weights normalised to sum 1 (NaN when they sum to 0,
/// as the package's `idf.div_(idf.sum())`).
struct Side<'a> {
    states: &'a [f32],
    norms: &'a [f64],
    weights: Vec<f64>,
}

impl<'a> Side<'a> {
    fn new(text: &'a TokenStates, norms: &'a [f64], weights: &TokenWeights) -> Self {
        let raw: Vec<f64> = text.ids.iter().map(|&id| weights.weight(id)).collect();
        let total: f64 = raw.iter().sum();
        Side {
            states: &text.states,
            norms,
            weights: raw.iter().map(|w| w / total).collect(),
        }
    }

    fn len(&self) -> usize {
        self.norms.len()
    }
}

/// Whether a best match starts from the 0 of a padded position (see [`Options::batch_size`]).
#[derive(Clone, Copy)]
struct Floors {
    precision: bool,
    recall: bool,
}

/// The package's `greedy_cos_idf` for one pair.
fn score_pair(candidate: &Side, reference: &Side, dim: usize, floors: Floors) -> Prf {
    let start = |floored: bool| if floored { 0.0 } else { f64::NEG_INFINITY };
    let mut best_for_candidate = vec![start(floors.precision); candidate.len()];
    let mut best_for_reference = vec![start(floors.recall); reference.len()];
    for (i, c) in candidate.states.chunks_exact(dim).enumerate() {
        for (j, r) in reference.states.chunks_exact(dim).enumerate() {
            let dot: f64 = c
                .iter()
                .zip(r)
                .map(|(&a, &b)| f64::from(a) * f64::from(b))
                .sum();
            let sim = dot / (candidate.norms[i] * reference.norms[j]);
            best_for_candidate[i] = nan_max(best_for_candidate[i], sim);
            best_for_reference[j] = nan_max(best_for_reference[j], sim);
        }
    }
    let weighted = |best: &[f64], weights: &[f64]| -> f64 {
        best.iter().zip(weights).map(|(b, w)| b * w).sum()
    };
    let mut precision = weighted(&best_for_candidate, &candidate.weights);
    let mut recall = weighted(&best_for_reference, &reference.weights);
    let f1 = 2.0 * precision * recall / (precision + recall);
    // The package's "empty sentence" test: a text of two tokens, its special tokens alone.
    if candidate.len() == 2 || reference.len() == 2 {
        (precision, recall) = (0.0, 0.0);
    }
    Prf {
        precision,
        recall,
        f1: if f1.is_nan() { 0.0 } else { f1 },
    }
}

/// Baselines for rescaling, one row per layer, from a file in the package's format
/// (`rescale_baseline/<lang>/<model>.tsv`, comma-separated despite the name):
/// a header `LAYER,P,R,F`, then `layer,p,r,f` rows for layers 0, 1, 2, ...
#[derive(Debug, Clone, PartialEq)]
pub struct Baseline {
    rows: Vec<(f64, Prf)>,
    source: String,
}

impl Baseline {
    /// Reads a baseline file; errors name the file and line.
    pub fn read(path: &Path) -> Result<Baseline> {
        Baseline::parse(path, &read_text(path)?)
    }

    /// Parses the text of a baseline file (`path` names it in errors).
    pub fn parse(path: &Path, text: &str) -> Result<Baseline> {
        let mut lines = text
            .lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty());
        let header: Vec<String> = match lines.next() {
            Some((_, line)) => line.split(',').map(|c| c.trim().to_uppercase()).collect(),
            None => return Err(invalid(path, "empty baseline file")),
        };
        if header != ["LAYER", "P", "R", "F"] {
            return Err(invalid(
                path,
                format!("line 1: the header is {header:?}, want LAYER,P,R,F"),
            ));
        }
        let rows = lines
            .map(|(i, line)| parse_baseline_row(path, i + 1, line))
            .collect::<Result<Vec<_>>>()?;
        Ok(Baseline {
            rows,
            source: path.display().to_string(),
        })
    }

    /// The baselines of `layer`: as the package (`read_csv(...).iloc[layer]`), the row at
    /// position `layer`, which must say it is that layer's.
    pub fn at_layer(&self, layer: usize) -> Result<Prf> {
        match self.rows.get(layer) {
            Some(&(named, prf)) if named == layer as f64 => Ok(prf),
            Some(&(named, _)) => Err(Error::Mismatch(format!(
                "{}: data row {} is for layer {named}, not {layer}: the package picks the row by position, \
                 so rows must list layers 0, 1, 2, ... in order",
                self.source,
                layer + 1
            ))),
            None => Err(Error::Mismatch(format!(
                "{}: no baseline for layer {layer} (the file has layers 0 to {})",
                self.source,
                self.rows.len() as isize - 1
            ))),
        }
    }
}

fn parse_baseline_row(path: &Path, line_number: usize, line: &str) -> Result<(f64, Prf)> {
    let values: Vec<f64> = line
        .split(',')
        .map(|cell| cell.trim().parse::<f64>())
        .collect::<std::result::Result<_, _>>()
        .map_err(|e| invalid(path, format!("line {line_number}: {e} in {line:?}")))?;
    match values[..] {
        [layer, precision, recall, f1] => Ok((
            layer,
            Prf {
                precision,
                recall,
                f1,
            },
        )),
        _ => Err(invalid(
            path,
            format!(
                "line {line_number}: {} values, want 4 (LAYER,P,R,F)",
                values.len()
            ),
        )),
    }
}

/// The layers the package (`model2layers`) uses by default for the models of the families
/// lector runs (BERT, RoBERTa, DistilBERT, XLM-RoBERTa), tuned on WMT16 correlations.
const PACKAGE_DEFAULT_LAYERS: &[(&str, usize)] = &[
    ("bert-base-uncased", 9),
    ("bert-large-uncased", 18),
    ("bert-base-cased-finetuned-mrpc", 9),
    ("bert-base-multilingual-cased", 9),
    ("bert-base-chinese", 8),
    ("roberta-base", 10),
    ("roberta-large", 17),
    ("roberta-large-mnli", 19),
    ("roberta-base-openai-detector", 7),
    ("roberta-large-openai-detector", 15),
    ("allenai/scibert_scivocab_uncased", 8),
    ("allenai/scibert_scivocab_cased", 9),
    ("nfliu/scibert_basevocab_uncased", 9),
    ("distilroberta-base", 5),
    ("distilbert-base-uncased", 5),
    ("distilbert-base-uncased-distilled-squad", 4),
    ("distilbert-base-multilingual-cased", 5),
    ("xlm-roberta-base", 9),
    ("xlm-roberta-large", 17),
    ("google/bert_uncased_L-2_H-128_A-2", 1),
    ("google/bert_uncased_L-2_H-256_A-4", 1),
    ("google/bert_uncased_L-2_H-512_A-8", 1),
    ("google/bert_uncased_L-2_H-768_A-12", 2),
    ("google/bert_uncased_L-4_H-128_A-2", 3),
    ("google/bert_uncased_L-4_H-256_A-4", 3),
    ("google/bert_uncased_L-4_H-512_A-8", 3),
    ("google/bert_uncased_L-4_H-768_A-12", 3),
    ("google/bert_uncased_L-6_H-128_A-2", 5),
    ("google/bert_uncased_L-6_H-256_A-4", 5),
    ("google/bert_uncased_L-6_H-512_A-8", 5),
    ("google/bert_uncased_L-6_H-768_A-12", 5),
    ("google/bert_uncased_L-8_H-128_A-2", 7),
    ("google/bert_uncased_L-8_H-256_A-4", 7),
    ("google/bert_uncased_L-8_H-512_A-8", 6),
    ("google/bert_uncased_L-8_H-768_A-12", 7),
    ("google/bert_uncased_L-10_H-128_A-2", 8),
    ("google/bert_uncased_L-10_H-256_A-4", 8),
    ("google/bert_uncased_L-10_H-512_A-8", 9),
    ("google/bert_uncased_L-10_H-768_A-12", 8),
    ("google/bert_uncased_L-12_H-128_A-2", 10),
    ("google/bert_uncased_L-12_H-256_A-4", 11),
    ("google/bert_uncased_L-12_H-512_A-8", 10),
    ("google/bert_uncased_L-12_H-768_A-12", 9),
    ("vinai/bertweet-base", 9),
    ("SpanBERT/spanbert-base-cased", 8),
    ("SpanBERT/spanbert-large-cased", 17),
    ("ProsusAI/finbert", 10),
    ("princeton-nlp/unsup-simcse-bert-base-uncased", 10),
    ("princeton-nlp/unsup-simcse-bert-large-uncased", 18),
    ("princeton-nlp/unsup-simcse-roberta-base", 8),
    ("princeton-nlp/unsup-simcse-roberta-large", 13),
    ("princeton-nlp/sup-simcse-bert-base-uncased", 10),
    ("princeton-nlp/sup-simcse-bert-large-uncased", 18),
    ("princeton-nlp/sup-simcse-roberta-base", 10),
    ("princeton-nlp/sup-simcse-roberta-large", 16),
    ("dbmdz/bert-base-turkish-cased", 10),
    ("dbmdz/distilbert-base-turkish-cased", 4),
];

/// The package's default layer for a model `name` (a hub name such as `roberta-large` or
/// `google/bert_uncased_L-4_H-256_A-4`, or a directory named after one; compared by the part
/// after the last `/`), if it knows the model.
pub fn package_default_layer(name: &str) -> Option<usize> {
    let base = |n: &str| n.rsplit('/').next().unwrap_or(n).to_string();
    let wanted = base(name.trim_end_matches('/'));
    PACKAGE_DEFAULT_LAYERS
        .iter()
        .find(|(known, _)| base(known) == wanted)
        .map(|&(_, layer)| layer)
}

/// One line of a BERTScore items file:
/// `{"id"?: .., "candidate": "...", "references": ["...", ...]}` (or `"reference": "..."`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Item {
    /// The item's `id` (a string, or a number written as one), else its line number.
    pub id: String,
    /// The text scored.
    pub candidate: String,
    /// What it is scored against (at least one).
    pub references: Vec<String>,
}

/// Reads an items file (JSON lines; blank lines skipped); errors name the file and line.
pub fn read_items(path: &Path) -> Result<Vec<Item>> {
    crate::jsonl::read_numbered::<Value>(path)?
        .into_iter()
        .map(|(line, value)| {
            Item::from_json(&value, line - 1)
                .map_err(|message| invalid(path, format!("line {line}: {message}")))
        })
        .collect()
}

impl Item {
    /// An item from its JSON object; `index` (0-based) numbers it when it has no `id` (1-based,
    /// as a line number would); the error says what is wrong.
    pub fn from_json(value: &Value, index: usize) -> std::result::Result<Item, String> {
        let (id, candidate, references) = item_from_json(value)?;
        Ok(Item {
            id: id.unwrap_or_else(|| (index + 1).to_string()),
            candidate,
            references,
        })
    }
}

type ItemFields = (Option<String>, String, Vec<String>);

fn item_from_json(value: &Value) -> std::result::Result<ItemFields, String> {
    let object = value
        .as_object()
        .ok_or("not a JSON object with `candidate` and `references`")?;
    let id = match object.get("id") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(Value::Number(n)) => Some(n.to_string()),
        Some(other) => return Err(format!("`id` is {other}, not a string or a number")),
    };
    let candidate = match object.get("candidate") {
        Some(Value::String(s)) => s.clone(),
        Some(other) => return Err(format!("`candidate` is {other}, not a string")),
        None => return Err("no `candidate` field".into()),
    };
    let references = match (object.get("references"), object.get("reference")) {
        (Some(_), Some(_)) => return Err("both `references` and `reference`: give one".into()),
        (Some(Value::Array(list)), None) => list
            .iter()
            .map(|r| r.as_str().map(str::to_string))
            .collect::<Option<Vec<_>>>()
            .ok_or("`references` must be a list of strings")?,
        (Some(other), None) => return Err(format!("`references` is {other}, not a list")),
        (None, Some(Value::String(s))) => vec![s.clone()],
        (None, Some(other)) => return Err(format!("`reference` is {other}, not a string")),
        (None, None) => return Err("no `references` (or `reference`) field".into()),
    };
    if references.is_empty() {
        return Err("`references` is empty: an item needs at least one".into());
    }
    Ok((id, candidate, references))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Texts from explicit 2-d states (one row per token); ids 101/102 play [CLS]/[SEP].
    fn text(ids: &[u32], rows: &[[f32; 2]]) -> TokenStates {
        TokenStates {
            ids: ids.to_vec(),
            states: rows.iter().flatten().copied().collect(),
        }
    }

    fn uniform() -> Options {
        Options {
            weighting: Weighting::Uniform {
                zero: vec![101, 102],
            },
            batch_size: PACKAGE_BATCH_SIZE,
        }
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-12
    }

    #[test]
    fn identical_texts_score_one_and_special_tokens_weigh_nothing() {
        let t = text(
            &[101, 7, 8, 102],
            &[[1.0, 0.0], [0.0, 2.0], [3.0, 3.0], [-1.0, 0.0]],
        );
        let s = score(
            &[t.clone(), t],
            2,
            &[Pairing {
                candidate: 0,
                references: vec![1],
            }],
            &uniform(),
        )
        .unwrap();
        assert!(close(s[0].precision, 1.0) && close(s[0].recall, 1.0) && close(s[0].f1, 1.0));
    }

    #[test]
    fn greedy_matching_by_cosine() {
        // Candidate tokens: x axis, y axis; reference: one token at 45 degrees, one on x.
        let c = text(
            &[101, 7, 8, 102],
            &[[1.0, 1.0], [1.0, 0.0], [0.0, 5.0], [1.0, 1.0]],
        );
        let r = text(&[101, 9, 102], &[[-1.0, 0.0], [2.0, 2.0], [-1.0, 0.0]]);
        let s = score(
            &[c, r],
            2,
            &[Pairing {
                candidate: 0,
                references: vec![1],
            }],
            &uniform(),
        )
        .unwrap();
        let h = std::f64::consts::FRAC_1_SQRT_2;
        // Precision: both candidate tokens match the 45-degree token (cos = 0.7071).
        assert!(close(s[0].precision, h));
        // Recall: the reference token matches the candidate's [CLS] (cos 1): special tokens
        // take part as match targets.
        assert!(close(s[0].recall, 1.0));
        assert!(close(s[0].f1, 2.0 * h / (1.0 + h)));
    }

    #[test]
    fn the_best_reference_is_kept_per_metric() {
        let c = text(&[101, 7, 102], &[[0.0, 1.0], [1.0, 0.0], [0.0, 1.0]]);
        // r1: the candidate's token plus an orthogonal one: P = 1, R = (1 + 0) / 2.
        let r1 = text(
            &[101, 7, 8, 102],
            &[[0.0, -1.0], [1.0, 0.0], [0.0, -1.0], [0.0, -1.0]],
        );
        // r2: one token at 60 degrees from the candidate's: P = 0.5, R = cos 30 degrees (its
        // best match is the candidate's [CLS]: special tokens are match targets).
        let r2 = text(
            &[101, 9, 102],
            &[[0.0, -1.0], [0.5, 0.75f32.sqrt()], [0.0, -1.0]],
        );
        let options = Options {
            batch_size: 1,
            ..uniform()
        };
        let pairing = Pairing {
            candidate: 0,
            references: vec![1, 2],
        };
        let s = score(&[c, r1, r2], 2, &[pairing], &options).unwrap();
        let f = |p: f64, r: f64| 2.0 * p * r / (p + r);
        let cos30 = 0.75f64.sqrt();
        // P and F1 from r1, R from r2: each metric's own maximum.
        assert!(close(s[0].precision, 1.0), "{s:?}");
        assert!((s[0].recall - cos30).abs() < 1e-6, "{s:?}");
        assert!(close(s[0].f1, f(1.0, 0.5)), "{s:?}");
        assert!(f(1.0, 0.5) > f(0.5, cos30));
    }

    #[test]
    fn padding_in_a_batch_floors_negative_matches_at_zero() {
        // A candidate whose content token points away from everything in the reference.
        let c = text(&[101, 7, 102], &[[1.0, 0.0], [-1.0, -0.1], [1.0, 0.0]]);
        let short_ref = text(&[101, 8, 102], &[[1.0, 0.0], [1.0, 0.1], [1.0, 0.0]]);
        let long_ref = text(
            &[101, 8, 9, 102],
            &[[1.0, 0.0], [1.0, 0.1], [1.0, 0.2], [1.0, 0.0]],
        );
        let texts = [c, short_ref, long_ref];
        let alone = [Pairing {
            candidate: 0,
            references: vec![1],
        }];
        let batched = [
            alone[0].clone(),
            Pairing {
                candidate: 0,
                references: vec![2],
            },
        ];
        let solo = score(&texts, 2, &alone, &uniform()).unwrap()[0];
        let in_batch = score(&texts, 2, &batched, &uniform()).unwrap()[0];
        assert!(solo.precision < 0.0, "{solo:?}");
        // Batched with a longer reference, the short one is padded: the best match becomes 0.
        assert_eq!(in_batch.precision, 0.0);
        let unbatched = Options {
            batch_size: 1,
            ..uniform()
        };
        assert_eq!(score(&texts, 2, &batched, &unbatched).unwrap()[0], solo);
    }

    #[test]
    fn empty_texts_score_zero_and_zero_weights_leave_nan() {
        let empty = text(&[101, 102], &[[1.0, 0.0], [0.0, 1.0]]);
        let some = text(&[101, 7, 102], &[[1.0, 0.0], [1.0, 1.0], [0.0, 1.0]]);
        let s = score(
            &[empty, some.clone()],
            2,
            &[
                Pairing {
                    candidate: 0,
                    references: vec![1],
                },
                Pairing {
                    candidate: 1,
                    references: vec![0],
                },
            ],
            &uniform(),
        )
        .unwrap();
        for prf in s {
            assert_eq!((prf.precision, prf.recall, prf.f1), (0.0, 0.0, 0.0));
        }
        // With idf over a single reference equal to the candidate, every weight is ln(2/2) = 0:
        // the package divides 0 by 0, P and R are NaN and F1 is set to 0.
        let idf = Options {
            weighting: Weighting::Idf,
            batch_size: 64,
        };
        let s = score(
            &[some.clone(), some],
            2,
            &[Pairing {
                candidate: 0,
                references: vec![1],
            }],
            &idf,
        )
        .unwrap();
        assert!(s[0].precision.is_nan() && s[0].recall.is_nan() && s[0].f1 == 0.0);
    }

    #[test]
    fn idf_counts_each_reference_once_per_token() {
        let a = text(&[101, 7, 7, 102], &[[1.0, 0.0]; 4]);
        let b = text(&[101, 8, 102], &[[1.0, 0.0]; 3]);
        let pairings = [
            Pairing {
                candidate: 1,
                references: vec![0],
            },
            Pairing {
                candidate: 1,
                references: vec![0, 1],
            },
        ];
        let w = TokenWeights::new(&[a, b], &pairings, &Weighting::Idf);
        // M = 3 references (a twice, b once); df(7) = 2, df(8) = 1, [CLS] in all 3, 9 in none.
        assert!(close(w.weight(7), (4.0f64 / 3.0).ln()));
        assert!(close(w.weight(8), 2f64.ln()));
        assert_eq!(w.weight(101), 0.0);
        assert!(close(w.weight(9), 4f64.ln()));
    }

    #[test]
    fn mismatched_inputs_are_errors() {
        let t = text(&[101, 102], &[[1.0, 0.0], [0.0, 1.0]]);
        let bad_ref = [Pairing {
            candidate: 0,
            references: vec![3],
        }];
        let message = score(std::slice::from_ref(&t), 2, &bad_ref, &uniform())
            .unwrap_err()
            .to_string();
        assert!(message.contains("text 3"), "{message}");
        let no_refs = [Pairing {
            candidate: 0,
            references: vec![],
        }];
        assert!(score(std::slice::from_ref(&t), 2, &no_refs, &uniform()).is_err());
        assert!(score(&[t], 3, &[], &uniform()).is_err());
    }

    #[test]
    fn baselines_rescale_by_layer_row() {
        let path = Path::new("base.tsv");
        let b = Baseline::parse(path, "LAYER,P,R,F\n0,0.1,0.2,0.3\n1,0.5,0.6,0.75\n").unwrap();
        let row = b.at_layer(1).unwrap();
        assert_eq!((row.precision, row.recall, row.f1), (0.5, 0.6, 0.75));
        let x = Prf {
            precision: 0.75,
            recall: 0.8,
            f1: 1.0,
        }
        .rescaled(row);
        assert!(close(x.precision, 0.5) && close(x.recall, 0.5) && close(x.f1, 1.0));
        assert!(b
            .at_layer(2)
            .unwrap_err()
            .to_string()
            .contains("layers 0 to 1"));
        let shuffled =
            Baseline::parse(path, "LAYER,P,R,F\n1,0.1,0.2,0.3\n0,0.5,0.6,0.7\n").unwrap();
        assert!(shuffled
            .at_layer(0)
            .unwrap_err()
            .to_string()
            .contains("by position"));
        let bad = Baseline::parse(path, "LAYER,P,R,F\n0,0.1,x,0.3\n")
            .unwrap_err()
            .to_string();
        assert!(bad.contains("base.tsv") && bad.contains("line 2"), "{bad}");
        assert!(Baseline::parse(path, "L,P,R\n")
            .unwrap_err()
            .to_string()
            .contains("line 1"));
    }

    #[test]
    fn default_layers_follow_the_package() {
        assert_eq!(package_default_layer("roberta-large"), Some(17));
        assert_eq!(
            package_default_layer("google/bert_uncased_L-4_H-256_A-4"),
            Some(3)
        );
        assert_eq!(
            package_default_layer("models/bert_uncased_L-4_H-256_A-4/"),
            Some(3)
        );
        assert_eq!(
            package_default_layer("nreimers/MiniLM-L6-H384-uncased"),
            None
        );
    }

    #[test]
    fn items_read_both_reference_spellings_and_errors_name_the_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("items.jsonl");
        std::fs::write(
            &path,
            "{\"id\": 7, \"candidate\": \"a\", \"references\": [\"b\", \"c\"]}\n\n{\"candidate\": \"x\", \"reference\": \"y\"}\n",
        )
        .unwrap();
        let items = read_items(&path).unwrap();
        assert_eq!(items[0].id, "7");
        assert_eq!(items[0].references, ["b", "c"]);
        assert_eq!(
            (items[1].id.as_str(), items[1].references.as_slice()),
            ("3", &["y".to_string()][..])
        );
        for (line, want) in [
            ("{\"candidate\": \"x\"}", "no `references`"),
            ("{\"candidate\": \"x\", \"references\": []}", "empty"),
            (
                "{\"candidate\": 1, \"reference\": \"y\"}",
                "`candidate` is 1",
            ),
            (
                "{\"candidate\": \"x\", \"references\": [1]}",
                "list of strings",
            ),
        ] {
            std::fs::write(
                &path,
                format!("{{\"candidate\": \"a\", \"reference\": \"b\"}}\n{line}\n"),
            )
            .unwrap();
            let message = read_items(&path).unwrap_err().to_string();
            assert!(
                message.contains("items.jsonl")
                    && message.contains("line 2")
                    && message.contains(want),
                "{message}"
            );
        }
    }
}
