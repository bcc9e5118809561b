//! BERTScore with a local encoder, identical to the `bert-score` package (0.3.13) for the same
//! model, layer and settings: the token states come from [`TokenEncoder`], the matching,
//! weighting and baselines from [`lector_eval::bertscore`] (which stays model-free).

use crate::error::{Error, Result};
use crate::token_embed::TokenEncoder;
use lector_eval::bertscore::{self as score, Item, Pairing, Prf, TokenStates, Weighting};
use serde_json::Value;
use std::collections::HashMap;
use std::path::Path;

/// Texts per encoder call: the unit of progress.
const CHUNK: usize = 256;

/// An encoder and the layer whose token states are matched.
pub struct BertScorer {
    encoder: TokenEncoder,
    layer: usize,
}

/// Scoring settings beyond the model and layer.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ScoreOptions {
    /// Weight tokens by their idf over all the items' references (the package's `idf=True`);
    /// otherwise every token weighs 1 and the tokenizer's [CLS]/[SEP] (<s>/</s>) 0.
    pub idf: bool,
    /// Rescale P, R and F1 with this baseline (the row of the layer used; see
    /// [`lector_eval::bertscore::Baseline`]).
    pub baseline: Option<Prf>,
}

/// Every item's scores, and the degenerate items the package warns about.
#[derive(Debug, Clone, PartialEq)]
pub struct Scored {
    /// One per item, in order.
    pub scores: Vec<Prf>,
    /// Items whose candidate is empty (special tokens alone): P = R = F1 = 0.
    pub empty_candidates: usize,
    /// Items with an empty reference, which scores P = R = F1 = 0.
    pub empty_references: usize,
}

impl Scored {
    /// Items with a NaN precision or recall: every token of a text weighs 0 (with idf, a text
    /// made only of tokens found in every reference), as in the package.
    pub fn nan_items(&self) -> usize {
        self.scores
            .iter()
            .filter(|s| s.precision.is_nan() || s.recall.is_nan())
            .count()
    }
}

impl BertScorer {
    /// Matches the token states of `encoder` at `layer` (0: the embedding output; the
    /// encoder's layer count: its last layer); a layer the model lacks is an error.
    pub fn new(encoder: TokenEncoder, layer: usize) -> Result<Self> {
        if layer > encoder.layers() {
            return Err(Error::NoSuchLayer {
                path: encoder.dir().to_path_buf(),
                layer,
                layers: encoder.layers(),
            });
        }
        Ok(BertScorer { encoder, layer })
    }

    /// The encoder.
    pub fn encoder(&self) -> &TokenEncoder {
        &self.encoder
    }

    /// The layer matched.
    pub fn layer(&self) -> usize {
        self.layer
    }

    /// Scores every item: its candidate against each reference, the best of each of P, R and
    /// F1 over the references, as the package does. `progress(done, total)` follows the texts
    /// through the encoder.
    pub fn score(
        &self,
        items: &[Item],
        options: &ScoreOptions,
        progress: &mut dyn FnMut(usize, usize),
    ) -> Result<Scored> {
        let (texts, pairings) = unique_texts(items);
        let states = self.encode(&texts, progress)?;
        let score_options = score::Options {
            weighting: self.weighting(options.idf),
            batch_size: score::PACKAGE_BATCH_SIZE,
        };
        let mut scores = score::score(&states, self.encoder.dim(), &pairings, &score_options)
            .map_err(Error::Score)?;
        if let Some(baseline) = options.baseline {
            scores = scores.into_iter().map(|s| s.rescaled(baseline)).collect();
        }
        // A text of two tokens is the special tokens alone: the package's test for empty.
        let empty = |text: usize| states[text].ids.len() == 2;
        Ok(Scored {
            scores,
            empty_candidates: pairings.iter().filter(|p| empty(p.candidate)).count(),
            empty_references: pairings
                .iter()
                .filter(|p| p.references.iter().any(|&r| empty(r)))
                .count(),
        })
    }

    /// The token states of every text. Texts go to the encoder in order of length, so that
    /// each call holds texts of about one length.
    fn encode(
        &self,
        texts: &[&str],
        progress: &mut dyn FnMut(usize, usize),
    ) -> Result<Vec<TokenStates>> {
        let ids = self.encoder.tokenize(texts)?;
        let mut order: Vec<usize> = (0..texts.len()).collect();
        order.sort_by_key(|&i| ids[i].len());
        let mut states = vec![Vec::new(); texts.len()];
        let mut done = 0;
        for chunk in order.chunks(CHUNK) {
            let rows: Vec<Vec<u32>> = chunk.iter().map(|&i| ids[i].clone()).collect();
            for (&i, s) in chunk.iter().zip(self.encoder.states(&rows, self.layer)?) {
                states[i] = s;
            }
            done += chunk.len();
            progress(done, texts.len());
        }
        Ok(ids
            .into_iter()
            .zip(states)
            .map(|(ids, states)| TokenStates { ids, states })
            .collect())
    }

    /// The package's weights: idf over the references, or 1 for every token but the
    /// tokenizer's `cls_token` and `sep_token`.
    fn weighting(&self, idf: bool) -> Weighting {
        if idf {
            return Weighting::Idf;
        }
        let zero = [self.encoder.cls_token_id(), self.encoder.sep_token_id()];
        Weighting::Uniform {
            zero: zero.into_iter().flatten().collect(),
        }
    }
}

/// Each distinct text once (the package embeds each distinct string once too), and the items
/// as indices into them.
fn unique_texts(items: &[Item]) -> (Vec<&str>, Vec<Pairing>) {
    let mut texts = Vec::new();
    let mut index = HashMap::new();
    let mut intern = |text| {
        *index.entry(text).or_insert_with(|| {
            texts.push(text);
            texts.len() - 1
        })
    };
    let pairings = items
        .iter()
        .map(|item| Pairing {
            candidate: intern(item.candidate.as_str()),
            references: item.references.iter().map(|r| intern(r.as_str())).collect(),
        })
        .collect();
    (texts, pairings)
}

/// The package's default layer for the model in `dir`, found by the directory's name or by
/// `_name_or_path` in its config.json; `None` for a model it does not know.
pub fn package_default_layer(dir: &Path) -> Option<usize> {
    let config: Option<Value> = std::fs::read_to_string(dir.join("config.json"))
        .ok()
        .and_then(|text| serde_json::from_str(&text).ok());
    let name_or_path = config
        .as_ref()
        .and_then(|c| c["_name_or_path"].as_str())
        .map(str::to_string);
    std::iter::once(model_name(dir))
        .chain(name_or_path)
        .find_map(|name| score::package_default_layer(&name))
}

/// A checkpoint's name: its directory's (after resolving links and `..`).
pub fn model_name(dir: &Path) -> String {
    let dir = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
    dir.file_name().map_or_else(
        || dir.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(candidate: &str, references: &[&str]) -> Item {
        Item {
            id: candidate.into(),
            candidate: candidate.into(),
            references: references.iter().map(|r| r.to_string()).collect(),
        }
    }

    #[test]
    fn each_distinct_text_is_encoded_once() {
        let items = [item("a", &["b", "a"]), item("b", &["c"])];
        let (texts, pairings) = unique_texts(&items);
        assert_eq!(texts, ["a", "b", "c"]);
        assert_eq!(pairings[0].references, [1, 0]);
        assert_eq!(
            (pairings[1].candidate, &pairings[1].references[..]),
            (1, &[2][..])
        );
    }
}
