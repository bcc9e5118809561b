//! Measures exact and HNSW vector search: build time, queries per second on one thread and on
//! all threads, and HNSW recall@k against exact search. Exact search is timed both ways lector
//! runs it: the whole query batch at once (`exact_top_k_batch`, as faiss's flat index does) and
//! one query at a time (`exact_top_k`, as a server answers a single question).
//!
//! ```text
//! cargo run --release -p lector-index --example ann -- --vectors base.npy --queries q.npy
//! cargo run --release -p lector-index --example ann -- --random 100000 --dim 384 --seed 1
//! cargo run --release -p lector-index --example ann -- --clustered 100000 --dim 384 --json
//! ```
//!
//! Options: `--nq N` random queries (1000), `--m`, `--ef-construction`, `--ef 16,32,64` (the
//! search beams to measure), `--k` (10), `--threads` (all cores), `--no-hnsw` (exact search
//! only), `--json`. Rows and queries are
//! L2-normalised on load, so the inner product is the cosine. `.npy` files must hold a 2-D
//! little-endian float32 array in C order. `--clustered` draws the mixture described in
//! `tests/vector.rs` (`bench/ann_faiss.py` draws the same one with numpy).

use lector_index::vector::{exact_top_k, exact_top_k_batch, normalize, Hnsw, HnswParams, Vectors};
use rayon::prelude::*;
use serde_json::json;
use std::path::Path;
use std::time::Instant;

struct Args {
    vectors: Option<String>,
    queries: Option<String>,
    random: Option<usize>,
    clustered: Option<usize>,
    dim: usize,
    nq: usize,
    seed: u64,
    params: HnswParams,
    efs: Vec<usize>,
    k: usize,
    threads: usize,
    hnsw: bool,
    json: bool,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        vectors: None,
        queries: None,
        random: None,
        clustered: None,
        dim: 384,
        nq: 1000,
        seed: 1,
        params: HnswParams::default(),
        efs: vec![16, 32, 64, 128, 256],
        k: 10,
        threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
        hnsw: true,
        json: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        if flag == "--json" || flag == "--no-hnsw" {
            args.json |= flag == "--json";
            args.hnsw &= flag != "--no-hnsw";
            continue;
        }
        let value = it.next().ok_or(format!("{flag} needs a value"))?;
        let number = || value.parse::<usize>().map_err(|e| format!("{flag}: {e}"));
        match flag.as_str() {
            "--vectors" => args.vectors = Some(value.clone()),
            "--queries" => args.queries = Some(value.clone()),
            "--random" => args.random = Some(number()?),
            "--clustered" => args.clustered = Some(number()?),
            "--dim" => args.dim = number()?,
            "--nq" => args.nq = number()?,
            "--seed" => args.seed = number()? as u64,
            "--m" => args.params.m = number()?,
            "--ef-construction" => args.params.ef_construction = number()?,
            "--ef" => {
                args.efs = value
                    .split(',')
                    .map(|v| v.trim().parse().map_err(|e| format!("--ef: {e}")))
                    .collect::<Result<_, _>>()?
            }
            "--k" => args.k = number()?,
            "--threads" => args.threads = number()?.max(1),
            _ => return Err(format!("unknown option {flag}")),
        }
    }
    Ok(args)
}

/// Reads a 2-D float32 `.npy` file (format versions 1-3, little-endian, C order).
fn read_npy(path: &Path) -> Result<Vectors, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let fail = |m: &str| format!("{}: {m}", path.display());
    if bytes.len() < 10 || &bytes[..6] != b"\x93NUMPY" {
        return Err(fail("not a .npy file"));
    }
    let (header_len, start) = match bytes[6] {
        1 => (u16::from_le_bytes([bytes[8], bytes[9]]) as usize, 10),
        2 | 3 if bytes.len() >= 12 => (
            u32::from_le_bytes(bytes[8..12].try_into().unwrap()) as usize,
            12,
        ),
        _ => return Err(fail("unsupported .npy version")),
    };
    let header = bytes
        .get(start..start + header_len)
        .and_then(|h| std::str::from_utf8(h).ok())
        .ok_or_else(|| fail("bad header"))?;
    if !header.contains("'descr': '<f4'") || !header.contains("'fortran_order': False") {
        return Err(fail("need a little-endian float32 array in C order"));
    }
    let shape = header
        .split("'shape': (")
        .nth(1)
        .and_then(|s| s.split(')').next())
        .ok_or_else(|| fail("no shape"))?;
    let dims: Vec<usize> = shape
        .split(',')
        .filter(|s| !s.trim().is_empty())
        .map(|s| s.trim().parse().map_err(|_| fail("bad shape")))
        .collect::<Result<_, _>>()?;
    let [rows, dim] = dims[..] else {
        return Err(fail("need a 2-D array"));
    };
    let data = &bytes[start + header_len..];
    if data.len() != rows * dim * 4 || dim == 0 {
        return Err(fail("data size does not match the shape"));
    }
    let mut values: Vec<f32> = data
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect();
    values.chunks_exact_mut(dim).for_each(normalize);
    Ok(Vectors::from_data(dim, values))
}

/// splitmix64 + Box-Muller, as in the tests.
struct Gauss(u64);

impl Gauss {
    fn uniform(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64
    }

    fn next(&mut self) -> f32 {
        let (u, v) = (1.0 - self.uniform(), self.uniform());
        ((-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()) as f32
    }

    fn vector(&mut self, dim: usize, scale: f32) -> Vec<f32> {
        (0..dim).map(|_| self.next() * scale).collect()
    }
}

/// Uniform unit vectors: `n` base rows then `nq` queries.
fn random(n: usize, nq: usize, dim: usize, seed: u64) -> (Vectors, Vectors) {
    let mut g = Gauss(seed);
    let mut draw = |count: usize| {
        let mut v = Vectors::new(dim);
        for _ in 0..count {
            let mut row = g.vector(dim, 1.0);
            normalize(&mut row);
            v.push(&row);
        }
        v
    };
    let base = draw(n);
    (base, draw(nq))
}

/// The clustered low-rank mixture of `tests/vector.rs`.
fn clustered(n: usize, nq: usize, dim: usize, seed: u64) -> (Vectors, Vectors) {
    const RANK: usize = 64;
    let mut g = Gauss(seed);
    let centres: Vec<Vec<f32>> = (0..(n / 1000).max(1))
        .map(|_| {
            let mut c = g.vector(dim, 1.0);
            normalize(&mut c);
            c
        })
        .collect();
    let basis: Vec<Vec<f32>> = (0..RANK)
        .map(|_| g.vector(dim, 1.0 / ((dim * RANK) as f32).sqrt()))
        .collect();
    let point = |g: &mut Gauss| {
        let centre = &centres[(g.uniform() * centres.len() as f64) as usize];
        let mut p = g.vector(dim, 0.3 / (dim as f32).sqrt());
        for (x, c) in p.iter_mut().zip(centre) {
            *x += c;
        }
        for column in &basis {
            let z = g.next();
            for (x, b) in p.iter_mut().zip(column) {
                *x += z * b;
            }
        }
        normalize(&mut p);
        p
    };
    let mut base = Vectors::new(dim);
    let mut queries = Vectors::new(dim);
    for _ in 0..n {
        base.push(&point(&mut g));
    }
    for _ in 0..nq {
        queries.push(&point(&mut g));
    }
    (base, queries)
}

fn load(args: &Args) -> Result<(Vectors, Vectors, String), String> {
    if let Some(path) = &args.vectors {
        let base = read_npy(Path::new(path))?;
        let queries = match &args.queries {
            Some(q) => read_npy(Path::new(q))?,
            None => return Err("--vectors needs --queries".into()),
        };
        if queries.dim() != base.dim() {
            return Err("queries and vectors differ in dimension".into());
        }
        return Ok((base, queries, format!("file {path}")));
    }
    if let Some(n) = args.clustered {
        let (b, q) = clustered(n, args.nq, args.dim, args.seed);
        return Ok((b, q, "clustered".into()));
    }
    let n = args.random.unwrap_or(10_000);
    let (b, q) = random(n, args.nq, args.dim, args.seed);
    Ok((b, q, "random".into()))
}

fn pool(threads: usize) -> rayon::ThreadPool {
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .expect("thread pool")
}

/// Queries per second of `search` over the first `count` queries (at least one), one at a time
/// on this thread, with `threads` rayon threads available to it.
fn qps_serial(
    threads: usize,
    queries: &Vectors,
    count: usize,
    search: impl Fn(&[f32]) + Sync,
) -> f64 {
    let count = count.clamp(1, queries.len());
    pool(threads).install(|| {
        let start = Instant::now();
        for i in 0..count {
            search(queries.row(i));
        }
        count as f64 / start.elapsed().as_secs_f64()
    })
}

/// Queries per second of all queries spread over `threads` threads.
fn qps_parallel<T: Send>(
    threads: usize,
    queries: &Vectors,
    search: impl Fn(&[f32]) -> T + Sync,
) -> (f64, Vec<T>) {
    pool(threads).install(|| {
        let start = Instant::now();
        let out: Vec<T> = (0..queries.len())
            .into_par_iter()
            .map(|i| search(queries.row(i)))
            .collect();
        (queries.len() as f64 / start.elapsed().as_secs_f64(), out)
    })
}

fn main() {
    let args = match parse_args() {
        Ok(args) => args,
        Err(e) => {
            eprintln!("ann: {e}");
            std::process::exit(2);
        }
    };
    let (base, queries, source) = match load(&args) {
        Ok(loaded) => loaded,
        Err(e) => {
            eprintln!("ann: {e}");
            std::process::exit(1);
        }
    };
    if queries.is_empty() {
        eprintln!("ann: no queries");
        std::process::exit(1);
    }
    let (k, threads) = (args.k, args.threads);
    if !args.json {
        println!(
            "{source}: {} vectors x {} dims, {} queries, k {k}, {threads} threads",
            base.len(),
            base.dim(),
            queries.len()
        );
    }

    // Exact search, the batch: every query at once, on one thread and on all.
    let batch = |threads: usize| {
        pool(threads).install(|| {
            let start = Instant::now();
            let found = exact_top_k_batch(&base, &queries, k, |_| true);
            (queries.len() as f64 / start.elapsed().as_secs_f64(), found)
        })
    };
    let (batch_qps_1, _) = batch(1);
    let (batch_qps_all, found) = batch(threads);
    let truth: Vec<Vec<u32>> = found
        .into_iter()
        .map(|hits| hits.into_iter().map(|h| h.1).collect())
        .collect();
    // One query at a time: the serial figure on a bounded number of queries (each reads every row).
    let single_qps_1 = qps_serial(1, &queries, 200, |q| {
        exact_top_k(&base, q, k, |_| true);
    });
    let (single_qps_all, _) = qps_parallel(threads, &queries, |q| {
        exact_top_k(&base, q, k, |_| true);
    });
    if !args.json {
        println!(
            "flat, batch: {batch_qps_1:.1} QPS on 1 thread, {batch_qps_all:.1} QPS on {threads}"
        );
        println!(
            "flat, one query at a time: {single_qps_1:.1} QPS on 1 thread, {single_qps_all:.1} QPS on {threads}"
        );
    }
    let mut report = json!({
        "source": source,
        "n": base.len(),
        "dim": base.dim(),
        "queries": queries.len(),
        "k": k,
        "threads": threads,
        "flat": {
            "qps_1": batch_qps_1,
            "qps_all": batch_qps_all,
            "single_qps_1": single_qps_1,
            "single_qps_all": single_qps_all,
        },
    });
    if args.hnsw {
        report["hnsw"] = hnsw_runs(&args, &base, &queries, &truth);
    }
    if args.json {
        println!("{report}");
    }
}

/// Builds the graph and measures each search beam: recall against `truth`, QPS both ways.
fn hnsw_runs(
    args: &Args,
    base: &Vectors,
    queries: &Vectors,
    truth: &[Vec<u32>],
) -> serde_json::Value {
    let (k, threads) = (args.k, args.threads);
    let start = Instant::now();
    let graph = pool(threads).install(|| Hnsw::build(base, args.params));
    let build_s = start.elapsed().as_secs_f64();
    if !args.json {
        println!(
            "hnsw: m {} ef_construction {}: built in {build_s:.2} s",
            args.params.m, args.params.ef_construction
        );
    }
    let mut runs = Vec::new();
    for &ef in &args.efs {
        let search = |q: &[f32]| graph.search(base, q, k, ef, |_| true);
        let qps_1 = qps_serial(1, queries, queries.len(), |q| {
            search(q);
        });
        let (qps_all, found) = qps_parallel(threads, queries, search);
        let hits: usize = found
            .iter()
            .zip(truth)
            .map(|(f, t)| f.iter().filter(|h| t.contains(&h.1)).count())
            .sum();
        let recall = hits as f64 / truth.iter().map(Vec::len).sum::<usize>().max(1) as f64;
        if !args.json {
            println!(
                "  ef {ef:4}: recall@{k} {recall:.4}, {qps_1:8.0} QPS on 1 thread, {qps_all:8.0} QPS on {threads}"
            );
        }
        runs.push(json!({"ef": ef, "recall": recall, "qps_1": qps_1, "qps_all": qps_all}));
    }
    json!({
        "m": args.params.m,
        "ef_construction": args.params.ef_construction,
        "build_s": build_s,
        "runs": runs,
    })
}
