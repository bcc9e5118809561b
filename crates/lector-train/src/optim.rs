//! AdamW with decoupled weight decay (Loshchilov & Hutter 2019), the linear warm-up and decay
//! schedule of transformers, and global gradient-norm clipping, computed as PyTorch computes them
//! (`torch.optim.AdamW`'s single-tensor path, `clip_grad_norm_`), so runs can be compared.

use crate::error::Result;
use crate::model::Params;
use candle_core::{Device, Tensor};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::path::Path;

/// Optimiser settings.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
pub struct AdamWConfig {
    /// Peak learning rate.
    pub lr: f64,
    pub beta1: f64,
    pub beta2: f64,
    pub eps: f64,
    /// Decoupled weight decay, applied to every weight but biases and LayerNorm parameters
    /// (transformers' Trainer rule).
    pub weight_decay: f64,
    /// Steps of linear warm-up from 0 to `lr`, then linear decay to 0 at `total_steps`.
    pub warmup_steps: usize,
    pub total_steps: usize,
    /// Gradients are scaled so that their global L2 norm is at most this (0: no clipping).
    pub max_grad_norm: f64,
}

impl AdamWConfig {
    /// The learning rate of optimiser step `step` (0-based), as
    /// `transformers.get_linear_schedule_with_warmup`.
    pub fn lr_at(&self, step: usize) -> f64 {
        let factor = if step < self.warmup_steps {
            step as f64 / self.warmup_steps.max(1) as f64
        } else {
            let left = self.total_steps.saturating_sub(step) as f64;
            (left / self.total_steps.saturating_sub(self.warmup_steps).max(1) as f64).max(0.0)
        };
        self.lr * factor
    }
}

/// Whether weight decay applies to the parameter `name`.
fn decays(name: &str) -> bool {
    !(name.ends_with("bias") || name.contains("LayerNorm") || name.contains("layer_norm"))
}

/// The optimiser and its state (first and second moments per parameter).
pub struct AdamW {
    pub config: AdamWConfig,
    /// Optimiser steps taken.
    pub step: usize,
    m: Vec<Vec<f32>>,
    v: Vec<Vec<f32>>,
}

/// What one optimiser step did.
#[derive(Debug, Clone, Copy)]
pub struct StepInfo {
    pub lr: f64,
    /// Global gradient norm before clipping.
    pub grad_norm: f64,
}

impl AdamW {
    pub fn new(params: &Params, config: AdamWConfig) -> Self {
        let zeros = || {
            params
                .vars
                .iter()
                .map(|v| vec![0f32; v.elem_count()])
                .collect()
        };
        Self {
            config,
            step: 0,
            m: zeros(),
            v: zeros(),
        }
    }

    /// Clips `grads` (one flat gradient per parameter, in [`Params`] order) and updates `params`.
    pub fn update(&mut self, params: &Params, grads: &mut [Vec<f32>]) -> Result<StepInfo> {
        let grad_norm = clip(grads, self.config.max_grad_norm);
        let lr = self.config.lr_at(self.step);
        self.step += 1;
        let c = self.config;
        let bias1 = 1.0 - c.beta1.powi(self.step as i32);
        let bias2_sqrt = (1.0 - c.beta2.powi(self.step as i32)).sqrt();
        let step_size = (lr / bias1) as f32;
        let (b1, b2, eps) = (c.beta1 as f32, c.beta2 as f32, c.eps as f32);
        for (i, (name, var)) in params.names.iter().zip(&params.vars).enumerate() {
            let mut weights = var.flatten_all()?.to_vec1::<f32>()?;
            let shrink = (1.0 - lr * if decays(name) { c.weight_decay } else { 0.0 }) as f32;
            let (m, v) = (&mut self.m[i], &mut self.v[i]);
            for (((w, g), m), v) in weights.iter_mut().zip(&grads[i]).zip(m).zip(v) {
                *w *= shrink;
                *m += (g - *m) * (1.0 - b1);
                *v = *v * b2 + g * g * (1.0 - b2);
                let denom = v.sqrt() / bias2_sqrt as f32 + eps;
                *w -= step_size * *m / denom;
            }
            var.set(&Tensor::from_vec(weights, var.shape(), &Device::Cpu)?)?;
        }
        Ok(StepInfo { lr, grad_norm })
    }

    /// Writes the moments to `path` (safetensors).
    pub fn save(&self, params: &Params, path: &Path) -> Result<()> {
        let mut tensors = HashMap::new();
        for (i, (name, var)) in params.names.iter().zip(&params.vars).enumerate() {
            for (kind, values) in [("m", &self.m[i]), ("v", &self.v[i])] {
                let t = Tensor::from_slice(values, var.shape(), &Device::Cpu)?;
                tensors.insert(format!("{kind}.{name}"), t);
            }
        }
        candle_core::safetensors::save(&tensors, path)?;
        Ok(())
    }

    /// Reads the moments saved by [`AdamW::save`].
    pub fn load(&mut self, params: &Params, path: &Path) -> Result<()> {
        let mut tensors = candle_core::safetensors::load(path, &Device::Cpu)?;
        for (i, name) in params.names.iter().enumerate() {
            for (kind, slot) in [("m", &mut self.m[i]), ("v", &mut self.v[i])] {
                let key = format!("{kind}.{name}");
                let t = tensors
                    .remove(&key)
                    .ok_or_else(|| crate::Error::Checkpoint {
                        path: path.to_path_buf(),
                        message: format!("no optimiser tensor `{key}`"),
                    })?;
                *slot = t.flatten_all()?.to_vec1::<f32>()?;
            }
        }
        Ok(())
    }
}

/// `torch.nn.utils.clip_grad_norm_`: scales every gradient by `max / (norm + 1e-6)` when that is
/// below 1. Returns the norm before clipping.
fn clip(grads: &mut [Vec<f32>], max_norm: f64) -> f64 {
    let norm = grads
        .iter()
        .map(|g| g.iter().map(|&x| (x as f64) * (x as f64)).sum::<f64>())
        .sum::<f64>()
        .sqrt();
    if max_norm > 0.0 {
        let coef = (max_norm / (norm + 1e-6)).min(1.0) as f32;
        grads.iter_mut().flatten().for_each(|g| *g *= coef);
    }
    norm
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> AdamWConfig {
        AdamWConfig {
            lr: 1e-3,
            beta1: 0.9,
            beta2: 0.999,
            eps: 1e-8,
            weight_decay: 0.01,
            warmup_steps: 3,
            total_steps: 10,
            max_grad_norm: 1.0,
        }
    }

    #[test]
    fn schedule_warms_up_then_decays_to_zero() {
        let c = config();
        let lrs: Vec<f64> = (0..12).map(|s| c.lr_at(s)).collect();
        assert_eq!(lrs[0], 0.0);
        assert!((lrs[3] - 1e-3).abs() < 1e-12);
        assert!((lrs[1] - 1e-3 / 3.0).abs() < 1e-12);
        assert!((lrs[9] - 1e-3 / 7.0).abs() < 1e-12);
        assert_eq!((lrs[10], lrs[11]), (0.0, 0.0));
    }

    #[test]
    fn clipping_scales_to_the_max_norm() {
        let mut grads = vec![vec![3.0, 0.0], vec![4.0]];
        assert!((clip(&mut grads, 1.0) - 5.0).abs() < 1e-9);
        assert!((grads[0][0] - 0.6).abs() < 1e-5 && (grads[1][0] - 0.8).abs() < 1e-5);
        let mut small = vec![vec![0.3]];
        clip(&mut small, 1.0);
        assert_eq!(small[0][0], 0.3);
    }

    #[test]
    fn biases_and_layer_norms_do_not_decay() {
        assert!(decays("bert.encoder.layer.0.attention.self.query.weight"));
        assert!(!decays("bert.encoder.layer.0.attention.self.query.bias"));
        assert!(!decays("bert.embeddings.LayerNorm.weight"));
        assert!(!decays(
            "distilbert.transformer.layer.0.sa_layer_norm.weight"
        ));
    }
}
