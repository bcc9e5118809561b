//! Gradients the PyTorch fixtures do not cover: with dropout acting (the fused attention kernel
//! draws its masks again in the backward pass), against central finite differences; and the
//! shared-normalisation loss against a direct computation.

use candle_core::{Device, Tensor};
use lector_train::loss::{shared_norm_loss, span_loss, Groups, Targets};
use lector_train::model::{Batch, Network};
use lector_train::rng::Rng;
use std::path::Path;

fn tiny_bert() -> Network {
    let dir =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../lector-models/tests/fixtures/tiny-bert");
    Network::load(&dir, 0).unwrap()
}

fn batch(net: &Network) -> (Batch, Targets) {
    let rows: [(&[u32], &[u32]); 2] = [
        (
            &[2, 40, 41, 42, 3, 50, 51, 52, 53, 54, 3],
            &[0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1],
        ),
        (&[2, 60, 61, 3, 70, 71, 72, 3], &[0, 0, 0, 0, 1, 1, 1, 1]),
    ];
    let targets = Targets::new(vec![6, 0], vec![8, 0], vec![1.0, 0.5]).unwrap();
    (Batch::new(&rows, &net.config).unwrap(), targets)
}

fn loss_with_dropout(net: &Network, batch: &(Batch, Targets)) -> Tensor {
    let mut rng = Rng::stream(5, 2, 0);
    let (start, end) = net.forward(&batch.0, Some(&mut rng)).unwrap();
    span_loss(&start, &end, &batch.0, &batch.1).unwrap()
}

#[test]
fn gradients_with_dropout_match_finite_differences() {
    let net = tiny_bert();
    assert!(net.dropouts.attention > 0.0 && net.dropouts.hidden > 0.0);
    let data = batch(&net);
    let loss = loss_with_dropout(&net, &data);
    let grads = loss.backward().unwrap();
    let mut checked = 0;
    for (name, var) in net.params.names.iter().zip(&net.params.vars) {
        if !(name.contains("layer.0.attention") || name.contains("layer.1.intermediate")) {
            continue;
        }
        let g = grads
            .get(var)
            .unwrap()
            .flatten_all()
            .unwrap()
            .to_vec1::<f32>()
            .unwrap();
        // The entry with the largest gradient: finite differences in float32 resolve it well.
        let (at, &analytic) = g
            .iter()
            .enumerate()
            .max_by(|a, b| a.1.abs().total_cmp(&b.1.abs()))
            .unwrap();
        if analytic.abs() < 1e-3 {
            continue; // e.g. the key bias, whose exact gradient is 0
        }
        let original = var.flatten_all().unwrap().to_vec1::<f32>().unwrap();
        let eps = 1e-2f32;
        let loss_at = |delta: f32| {
            let mut values = original.clone();
            values[at] += delta;
            var.set(&Tensor::from_vec(values, var.shape(), &Device::Cpu).unwrap())
                .unwrap();
            loss_with_dropout(&net, &data).to_scalar::<f32>().unwrap() as f64
        };
        let numeric = (loss_at(eps) - loss_at(-eps)) / (2.0 * eps as f64);
        var.set(&Tensor::from_vec(original, var.shape(), &Device::Cpu).unwrap())
            .unwrap();
        let rel = (numeric - analytic as f64).abs() / (analytic.abs() as f64);
        assert!(
            rel < 2e-2,
            "{name}[{at}]: analytic {analytic} vs numeric {numeric}"
        );
        checked += 1;
    }
    assert!(checked >= 6, "only {checked} parameters checked");
}

#[test]
fn dropout_masks_follow_the_seed() {
    let net = tiny_bert();
    let data = batch(&net);
    let a = loss_with_dropout(&net, &data).to_scalar::<f32>().unwrap();
    let b = loss_with_dropout(&net, &data).to_scalar::<f32>().unwrap();
    let (start, end) = net.forward(&data.0, None).unwrap();
    let eval = span_loss(&start, &end, &data.0, &data.1)
        .unwrap()
        .to_scalar::<f32>()
        .unwrap();
    assert_eq!(a, b);
    assert_ne!(a, eval, "dropout did not act");
}

#[test]
fn shared_norm_is_one_softmax_per_question_relative_to_each_cls() {
    // Three windows of 4 positions: windows 0 and 1 belong to one question (answer at window 1,
    // positions 2..3), window 2 to a question with no answer (adds nothing). Context = 1..4.
    let start = [
        [0.5f32, 1.0, 2.0, -1.0],
        [1.5, 0.0, 3.0, 0.5],
        [0.0, 9.0, 9.0, 9.0],
    ];
    let end = [
        [0.0f32, 0.2, 0.4, 0.6],
        [-0.5, 1.0, 0.0, 2.5],
        [0.0, 1.0, 1.0, 1.0],
    ];
    let tensor = |rows: [[f32; 4]; 3]| {
        Tensor::from_iter(rows.into_iter().flatten(), &Device::Cpu)
            .unwrap()
            .reshape((3, 4))
            .unwrap()
    };
    let index = |v: &[u32]| Tensor::new(v, &Device::Cpu).unwrap();
    let groups = Groups {
        all: vec![index(&[1, 2, 3, 5, 6, 7])],
        gold_starts: vec![index(&[6])],
        gold_ends: vec![index(&[7])],
        cls: Tensor::new(&[[0u32], [0], [0]], &Device::Cpu).unwrap(),
    };
    let loss = shared_norm_loss(&tensor(start), &tensor(end), &groups)
        .unwrap()
        .to_scalar::<f32>()
        .unwrap();
    let nll = |logits: &[[f32; 4]; 3], gold: (usize, usize)| {
        let rel = |w: usize, p: usize| (logits[w][p] - logits[w][0]) as f64;
        let all: Vec<f64> = [(0, 1), (0, 2), (0, 3), (1, 1), (1, 2), (1, 3)]
            .iter()
            .map(|&(w, p)| rel(w, p))
            .collect();
        let log_z = all.iter().map(|x| x.exp()).sum::<f64>().ln();
        log_z - rel(gold.0, gold.1)
    };
    let expected = (nll(&start, (1, 2)) + nll(&end, (1, 3))) / 2.0;
    assert!(
        (loss as f64 - expected).abs() < 1e-5,
        "{loss} vs {expected}"
    );
}

#[test]
fn bf16_products_round_the_operands_but_stay_close() {
    let mut net = tiny_bert();
    let (batch, targets) = batch(&net);
    let loss = |net: &Network| {
        let (start, end) = net.forward(&batch, None).unwrap();
        span_loss(&start, &end, &batch, &targets)
            .unwrap()
            .to_scalar::<f32>()
            .unwrap()
    };
    let exact = loss(&net);
    net.bf16 = true;
    let rounded = loss(&net);
    assert_ne!(exact, rounded, "bf16 rounding changed nothing");
    assert!(
        (exact - rounded).abs() < 0.02 * exact,
        "{exact} vs {rounded}"
    );
    let (start, end) = net.forward(&batch, None).unwrap();
    let grads = span_loss(&start, &end, &batch, &targets)
        .unwrap()
        .backward()
        .unwrap();
    assert!(
        grads.get(&net.params.vars[0]).is_some(),
        "gradients flow through the rounding"
    );
}
