//! `lector eval retrieval --index DIR --queries FILE`: runs the queries through lector's own
//! retriever and scores the run like a run file (`lector_pipeline::lab::retrieval`).

use super::{show_scored, RetrievalArgs};
use crate::search::notify;
use anyhow::{bail, Context, Result};
use indicatif::ProgressBar;
use lector_eval::retrieval::{self, Run};
use lector_eval::stats::latency_summary;
use lector_index::{DocumentStore, Index};
use lector_pipeline::lab::retrieval::{self as lab, Retrieved};
use std::path::Path;

pub(super) fn run(args: &RetrievalArgs) -> Result<()> {
    let (Some(dir), Some(queries_path)) = (&args.index, &args.queries) else {
        bail!("--index needs --queries");
    };
    let redis = crate::store::open_if_url(dir)?;
    let index = match redis {
        Some(_) => None,
        None => Some(Index::open(dir)?),
    };
    let store: &dyn DocumentStore = match (&redis, &index) {
        (Some(redis), _) => redis,
        (None, Some(index)) => index,
        (None, None) => unreachable!("one of them is open"),
    };
    let queries = retrieval::read_queries(queries_path)?;
    if queries.is_empty() {
        bail!("{}: no queries", queries_path.display());
    }
    let qrels = args
        .qrels
        .as_deref()
        .map(retrieval::read_qrels)
        .transpose()?;
    let options = lab::Options {
        retrieval: args.retrieval.config(),
        rerank: args.rerank.config(),
        depth: args.depth,
        ks: args.k.clone(),
        max_k: args.max_k,
        bootstrap: args.output.bootstrap.settings(),
    };
    let progress = ProgressBar::new(queries.len() as u64);
    let report = lab::run(
        store,
        index.as_ref(),
        &queries,
        qrels.as_ref(),
        &options,
        &notify,
        &mut || progress.inc(1),
    )
    .with_context(|| format!("evaluating the retrieval of {}", queries_path.display()))?;
    progress.finish_and_clear();
    for warning in &report.warnings {
        eprintln!("warning: {warning}");
    }
    report_latency(&report.label, &report.latencies);
    if let Some(out) = &args.run_out {
        match &report.retrieved {
            Retrieved::Documents(run) => write_run(run, out, report.mode)?,
            Retrieved::Passages(items) => super::write_jsonl(out, items)?,
        }
    }
    show_scored(&report.scored, queries_path, args)
}

/// Per-query retrieval latency on stderr, so that `--json` output stays one document.
fn report_latency(label: &str, latencies: &[f64]) {
    if let Some(s) = latency_summary(latencies) {
        eprintln!(
            "retrieval latency ({label}, {} queries): p50 {:.3} ms, p95 {:.3} ms",
            s.count, s.p50, s.p95
        );
    }
}

fn write_run(run: &Run, path: &Path, mode: &str) -> Result<()> {
    let file =
        std::fs::File::create(path).with_context(|| format!("cannot write {}", path.display()))?;
    let mut out = std::io::BufWriter::new(file);
    run.write_trec(&format!("lector-{mode}"), &mut out)
        .and_then(|()| std::io::Write::flush(&mut out))
        .with_context(|| format!("cannot write {}", path.display()))
}
