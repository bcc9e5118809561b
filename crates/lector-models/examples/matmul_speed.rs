//! GFLOP/s of a plain matrix product on this machine, for the shapes of a checkpoint's linear
//! layers: the yardstick `bench/gflops.py` sets the reader's achieved GFLOP/s against.
//!
//!     cargo run --release -p lector-models --example matmul_speed -- [CHECKPOINT_DIR] [TOKENS]
//!
//! Prints one JSON object per line: candle's `Tensor::matmul` (the `gemm` crate, split across
//! `RAYON_NUM_THREADS` threads by candle) and the way lector's encoder runs it (one
//! single-threaded `gemm` per thread, each on its own share of the tokens).

use candle_core::{Device, Tensor};
use std::time::Instant;

/// Median seconds of `trials` timings of `reps` calls of `f`, after one warm-up call.
fn median_secs(trials: usize, reps: usize, mut f: impl FnMut()) -> f64 {
    f();
    let mut times: Vec<f64> = (0..trials)
        .map(|_| {
            let start = Instant::now();
            (0..reps).for_each(|_| f());
            start.elapsed().as_secs_f64() / reps as f64
        })
        .collect();
    times.sort_by(f64::total_cmp);
    times[trials / 2]
}

fn candle_matmul(m: usize, k: usize, n: usize) -> candle_core::Result<f64> {
    let a = Tensor::rand(-1f32, 1f32, (m, k), &Device::Cpu)?;
    let b = Tensor::rand(-1f32, 1f32, (k, n), &Device::Cpu)?;
    Ok(median_secs(5, 5, || {
        a.matmul(&b).expect("matmul");
    }))
}

/// `threads` threads, each multiplying its own `m / threads` rows with a single-threaded gemm.
fn gemm_per_thread(m: usize, k: usize, n: usize, threads: usize) -> f64 {
    let rows = m / threads;
    let a = vec![0.5f32; rows * k];
    let b = vec![0.25f32; k * n];
    let mut outs = vec![vec![0f32; rows * n]; threads];
    median_secs(5, 5, || {
        std::thread::scope(|s| {
            for out in outs.iter_mut() {
                let (a, b) = (&a, &b);
                s.spawn(move || {
                    // SAFETY: a is rows x k, b is k x n, out is rows x n, all row-major and
                    // exactly that long; out is exclusively borrowed.
                    unsafe {
                        gemm::gemm(
                            rows,
                            n,
                            k,
                            out.as_mut_ptr(),
                            1,
                            n as isize,
                            false,
                            a.as_ptr(),
                            1,
                            k as isize,
                            b.as_ptr(),
                            1,
                            n as isize,
                            0.0,
                            1.0,
                            false,
                            false,
                            false,
                            gemm::Parallelism::None,
                        )
                    }
                });
            }
        });
    })
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let dir = args
        .next()
        .unwrap_or_else(|| "models/reader-minilm-squad".into());
    let tokens: usize = args.next().map_or(Ok(2048), |t| t.parse())?;
    let cfg = lector_models::Config::load(&std::path::Path::new(&dir).join("config.json"))?;
    let threads = candle_core::utils::get_num_threads();
    let (h, i) = (cfg.hidden_size, cfg.intermediate_size);
    for (layer, k, n) in [
        ("qkv", h, 3 * h),
        ("attn_out", h, h),
        ("ffn_in", h, i),
        ("ffn_out", i, h),
    ] {
        let flop = 2.0 * (tokens * k * n) as f64;
        let candle = flop / candle_matmul(tokens, k, n)? * 1e-9;
        let per_thread = flop / gemm_per_thread(tokens, k, n, threads) * 1e-9;
        println!(
            "{{\"layer\": \"{layer}\", \"m\": {tokens}, \"k\": {k}, \"n\": {n}, \"threads\": {threads}, \
             \"candle_gflops\": {candle:.1}, \"gemm_per_thread_gflops\": {per_thread:.1}}}"
        );
    }
    Ok(())
}
