//! lector's training against PyTorch (transformers 4.57, torch 2.9) on tiny random checkpoints:
//! the reader head on each architecture, the embedder head (mean pooling, ranking loss) on BERT and
//! RoBERTa, the reranker head (pooler, classifier, one softmax per question) on BERT. The loss,
//! every parameter's gradient, and every weight after 10 AdamW steps (warm-up, decay, clipping,
//! weight decay groups) must agree to 1e-4, relative to the largest value of each tensor.
//! Fixtures: tests/fixtures (tools/train_reference.py).

use candle_core::{Device, Tensor};
use lector_train::loss::{listwise_loss, ranking_loss, span_loss, Targets};
use lector_train::model::{Batch, HeadKind, Network};
use lector_train::optim::{AdamW, AdamWConfig};
use serde::Deserialize;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

#[derive(Deserialize)]
struct Fixture<B> {
    batches: Vec<B>,
    #[serde(default)]
    scale: f64,
}

#[derive(Deserialize)]
struct QaBatch {
    input_ids: Vec<Vec<u32>>,
    token_type_ids: Vec<Vec<u32>>,
    attention_mask: Vec<Vec<u32>>,
    start_positions: Vec<u32>,
    end_positions: Vec<u32>,
}

/// Unpadded texts: questions, then passage columns (positives first) with their text identities.
#[derive(Deserialize)]
struct EmbedderBatch {
    questions: Vec<Vec<u32>>,
    question_types: Vec<Vec<u32>>,
    passages: Vec<Vec<u32>>,
    passage_types: Vec<Vec<u32>>,
    texts: Vec<usize>,
}

/// Unpadded (question, passage) pairs, grouped by question, the positive first.
#[derive(Deserialize)]
struct RerankerBatch {
    input_ids: Vec<Vec<u32>>,
    token_type_ids: Vec<Vec<u32>>,
    group_sizes: Vec<usize>,
}

/// One batch of a fixture, as lector's loss for that head takes it.
enum Input {
    Qa(Batch, Targets),
    Embedder {
        questions: Batch,
        passages: Batch,
        texts: Vec<usize>,
        scale: f64,
    },
    Reranker {
        pairs: Batch,
        group_sizes: Vec<usize>,
    },
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).to_path_buf()
}

fn checkpoint(name: &str) -> PathBuf {
    root().join("../lector-models/tests/fixtures").join(name)
}

struct Case {
    net: Network,
    batches: Vec<Input>,
    expected: HashMap<String, Tensor>,
    /// Parameters whose exact gradient is 0 for this head (see [`exempt_encoder`]).
    exempt: fn(&str, usize) -> bool,
}

fn read_fixture<B: serde::de::DeserializeOwned>(dir: &Path) -> Fixture<B> {
    serde_json::from_str(&std::fs::read_to_string(dir.join("batches.json")).unwrap()).unwrap()
}

fn expected(dir: &Path) -> HashMap<String, Tensor> {
    candle_core::safetensors::load(dir.join("expected.safetensors"), &Device::Cpu).unwrap()
}

fn unpadded<'a>(ids: &'a [Vec<u32>], types: &'a [Vec<u32>]) -> Vec<(&'a [u32], &'a [u32])> {
    ids.iter()
        .zip(types)
        .map(|(i, t)| (i.as_slice(), t.as_slice()))
        .collect()
}

fn case(name: &str) -> Case {
    let dir = root().join("tests/fixtures").join(name);
    let fixture: Fixture<QaBatch> = read_fixture(&dir);
    let net = Network::load(&checkpoint(name), 0).unwrap();
    assert!(!net.fresh_head);
    let batches = fixture
        .batches
        .iter()
        .map(|b| {
            let rows: Vec<(&[u32], &[u32])> = (0..b.input_ids.len())
                .map(|i| {
                    let len = b.attention_mask[i].iter().filter(|&&m| m == 1).count();
                    (&b.input_ids[i][..len], &b.token_type_ids[i][..len])
                })
                .collect();
            let targets = Targets::new(
                b.start_positions.clone(),
                b.end_positions.clone(),
                vec![1.0; rows.len()],
            )
            .unwrap();
            Input::Qa(Batch::new(&rows, &net.config).unwrap(), targets)
        })
        .collect();
    Case {
        net,
        batches,
        expected: expected(&dir),
        exempt: exempt_qa,
    }
}

/// The embedder head on the encoder of the QA checkpoint `name` (fixture `<name>-embedder`).
fn embedder_case(name: &str) -> Case {
    let dir = root()
        .join("tests/fixtures")
        .join(format!("{name}-embedder"));
    let fixture: Fixture<EmbedderBatch> = read_fixture(&dir);
    let net = Network::load_with(&checkpoint(name), 0, HeadKind::Pooling).unwrap();
    let batches = fixture
        .batches
        .iter()
        .map(|b| Input::Embedder {
            questions: Batch::new(&unpadded(&b.questions, &b.question_types), &net.config).unwrap(),
            passages: Batch::new(&unpadded(&b.passages, &b.passage_types), &net.config).unwrap(),
            texts: b.texts.clone(),
            scale: fixture.scale,
        })
        .collect();
    Case {
        net,
        batches,
        expected: expected(&dir),
        exempt: exempt_encoder,
    }
}

/// The reranker head on the sequence-classification checkpoint `tiny-bert-rerank`.
fn reranker_case() -> Case {
    let name = "tiny-bert-rerank";
    let dir = root().join("tests/fixtures").join(name);
    let fixture: Fixture<RerankerBatch> = read_fixture(&dir);
    let net = Network::load_with(&checkpoint(name), 0, HeadKind::Classifier).unwrap();
    assert!(!net.fresh_head);
    let batches = fixture
        .batches
        .iter()
        .map(|b| Input::Reranker {
            pairs: Batch::new(&unpadded(&b.input_ids, &b.token_type_ids), &net.config).unwrap(),
            group_sizes: b.group_sizes.clone(),
        })
        .collect();
    Case {
        net,
        batches,
        expected: expected(&dir),
        exempt: exempt_reranker,
    }
}

fn loss_of(case: &Case, batch: usize) -> Tensor {
    let net = &case.net;
    match &case.batches[batch] {
        Input::Qa(batch, targets) => {
            let (start, end) = net.forward(batch, None).unwrap();
            span_loss(&start, &end, batch, targets).unwrap()
        }
        Input::Embedder {
            questions,
            passages,
            texts,
            scale,
        } => {
            let q = net.embed(questions, None).unwrap();
            let p = net.embed(passages, None).unwrap();
            ranking_loss(&q, &p, texts, *scale).unwrap()
        }
        Input::Reranker { pairs, group_sizes } => {
            listwise_loss(&net.score(pairs, None).unwrap(), group_sizes).unwrap()
        }
    }
}

fn values(t: &Tensor) -> Vec<f32> {
    t.flatten_all().unwrap().to_vec1::<f32>().unwrap()
}

/// Largest difference relative to the largest reference value of the tensor.
fn relative_error(ours: &[f32], reference: &[f32]) -> f64 {
    assert_eq!(ours.len(), reference.len());
    let scale = reference.iter().fold(0f32, |m, v| m.max(v.abs())) as f64;
    let diff = ours
        .iter()
        .zip(reference)
        .fold(0f64, |m, (a, b)| m.max((a - b).abs() as f64));
    if scale == 0.0 {
        diff
    } else {
        diff / scale
    }
}

/// Parameters whose exact gradient is 0, where both frameworks compute float noise (about 1e-8
/// against gradients of 0.3): relative error is meaningless there, and AdamW turns that noise into
/// steps of ±lr, so they are checked for being noise-level instead of compared.
/// - Every head: the key projection's bias adds `q·b` to every score of a query's row, which
///   softmax ignores.
fn exempt_encoder(param: &str, _layers: usize) -> bool {
    param.ends_with("key.bias") || param.ends_with("k_lin.bias")
}

/// - Reader: the start (end) logits of a window sum their gradients to 0 (softmax minus one-hot),
///   so a shift shared by all of a window's tokens has none: `qa_outputs.bias` and the bias of the
///   last LayerNorm, which feeds `qa_outputs` directly.
fn exempt_qa(param: &str, layers: usize) -> bool {
    let last = layers - 1;
    exempt_encoder(param, layers)
        || param == "qa_outputs.bias"
        || param.ends_with(&format!("layer.{last}.output.LayerNorm.bias"))
        || param.ends_with(&format!("layer.{last}.output_layer_norm.bias"))
}

/// - Reranker: the classifier's bias shifts every score of a question's group alike, which its
///   softmax ignores.
fn exempt_reranker(param: &str, layers: usize) -> bool {
    exempt_encoder(param, layers) || param == "classifier.bias"
}

fn largest(values: &[f32]) -> f64 {
    values.iter().fold(0f32, |m, v| m.max(v.abs())) as f64
}

fn check_loss_and_gradients(name: &str, case: Case) {
    let loss = loss_of(&case, 0);
    let expected_loss = values(&case.expected["loss"])[0];
    let ours = loss.to_scalar::<f32>().unwrap();
    assert!(
        ((ours - expected_loss) / expected_loss).abs() < 1e-4,
        "{name}: loss {ours} vs PyTorch {expected_loss}"
    );
    let grads = loss.backward().unwrap();
    let expected_names = case
        .expected
        .keys()
        .filter(|k| k.starts_with("grad."))
        .count();
    assert_eq!(
        case.net.params.names.len(),
        expected_names,
        "{name}: parameter count"
    );
    let global = case
        .expected
        .iter()
        .filter(|(k, _)| k.starts_with("grad."))
        .map(|(_, t)| largest(&values(t)))
        .fold(0.0, f64::max);
    for (param, var) in case.net.params.names.iter().zip(&case.net.params.vars) {
        let reference = case
            .expected
            .get(&format!("grad.{param}"))
            .unwrap_or_else(|| panic!("{name}: PyTorch has no parameter {param}"));
        let ours = grads
            .get(var)
            .map(values)
            .unwrap_or_else(|| vec![0.0; var.elem_count()]);
        if (case.exempt)(param, case.net.config.num_layers) {
            let noise = largest(&ours).max(largest(&values(reference))) / global;
            assert!(
                noise < 1e-6,
                "{name}: {param} should have no gradient, has {noise:e} of the largest"
            );
            continue;
        }
        let err = relative_error(&ours, &values(reference));
        assert!(
            err < 1e-4,
            "{name}: gradient of {param} differs by {err:e} (relative)"
        );
    }
}

fn check_ten_adamw_steps(name: &str, case: Case) {
    let config = AdamWConfig {
        lr: 1e-3,
        beta1: 0.9,
        beta2: 0.999,
        eps: 1e-8,
        weight_decay: 0.01,
        warmup_steps: 3,
        total_steps: 10,
        max_grad_norm: 1.0,
    };
    let mut opt = AdamW::new(&case.net.params, config);
    let step_losses = values(&case.expected["steps.loss"]);
    for (step, &reference) in step_losses.iter().enumerate() {
        let loss = loss_of(&case, step % 2);
        let ours = loss.to_scalar::<f32>().unwrap();
        assert!(
            ((ours - reference) / reference).abs() < 1e-4,
            "{name}: loss at step {step}: {ours} vs PyTorch {reference}"
        );
        let grads = loss.backward().unwrap();
        let mut flat: Vec<Vec<f32>> = case
            .net
            .params
            .vars
            .iter()
            .map(|v| {
                grads
                    .get(v)
                    .map(values)
                    .unwrap_or_else(|| vec![0.0; v.elem_count()])
            })
            .collect();
        opt.update(&case.net.params, &mut flat).unwrap();
    }
    for (param, var) in case.net.params.names.iter().zip(&case.net.params.vars) {
        if (case.exempt)(param, case.net.config.num_layers) {
            continue;
        }
        let reference = &case.expected[&format!("after.{param}")];
        let err = relative_error(&values(var.as_tensor()), &values(reference));
        assert!(
            err < 1e-4,
            "{name}: {param} after 10 steps differs by {err:e} (relative)"
        );
    }
}

#[test]
fn bert_matches_pytorch() {
    check_loss_and_gradients("tiny-bert", case("tiny-bert"));
    check_ten_adamw_steps("tiny-bert", case("tiny-bert"));
}

#[test]
fn distilbert_matches_pytorch() {
    check_loss_and_gradients("tiny-distilbert", case("tiny-distilbert"));
    check_ten_adamw_steps("tiny-distilbert", case("tiny-distilbert"));
}

#[test]
fn roberta_matches_pytorch() {
    check_loss_and_gradients("tiny-roberta", case("tiny-roberta"));
    check_ten_adamw_steps("tiny-roberta", case("tiny-roberta"));
}

#[test]
fn xlm_roberta_matches_pytorch() {
    check_loss_and_gradients("tiny-xlm-roberta", case("tiny-xlm-roberta"));
    check_ten_adamw_steps("tiny-xlm-roberta", case("tiny-xlm-roberta"));
}

#[test]
fn bert_embedder_matches_pytorch() {
    check_loss_and_gradients("tiny-bert embedder", embedder_case("tiny-bert"));
    check_ten_adamw_steps("tiny-bert embedder", embedder_case("tiny-bert"));
}

#[test]
fn roberta_embedder_matches_pytorch() {
    check_loss_and_gradients("tiny-roberta embedder", embedder_case("tiny-roberta"));
    check_ten_adamw_steps("tiny-roberta embedder", embedder_case("tiny-roberta"));
}

#[test]
fn bert_reranker_matches_pytorch() {
    check_loss_and_gradients("tiny-bert-rerank", reranker_case());
    check_ten_adamw_steps("tiny-bert-rerank", reranker_case());
}
