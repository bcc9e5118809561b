//! `lector eval retrieval --index DIR --queries FILE`: runs the queries through lector's own
//! retriever (`lector_pipeline::ranking`), and scores the run like a run file.

use super::{score_answers, score_run, write_jsonl, RetrievalArgs};
use crate::search::notify;
use anyhow::{bail, Context, Result};
use indicatif::ProgressBar;
use lector_eval::retrieval::{self, Run};
use lector_eval::stats::latency_summary;
use lector_index::{DocumentStore, Index, Mode};
use lector_pipeline::ranking::{self, DOCUMENT_DEPTH};
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
    let (mut options, embedder) = args.retrieval.config().resolve(store, &notify)?;
    let queries = retrieval::read_queries(queries_path)?;
    if queries.is_empty() {
        bail!("{}: no queries", queries_path.display());
    }
    let rerank = args.rerank.config();
    let reranker = rerank.as_ref().map(|r| r.load()).transpose()?;
    let head = reranker.as_ref().zip(rerank.as_ref().map(|r| r.depth));
    let label = match head {
        Some(_) => format!("{} + rerank", options.mode.name()),
        None => options.mode.name().to_string(),
    };
    let progress = ProgressBar::new(queries.len() as u64);
    if let Some(qrels_path) = &args.qrels {
        let qrels = retrieval::read_qrels(qrels_path)?;
        // Qrels judge documents, each ranked by its best passage: hybrid fuses rankings as deep
        // as the passages that ranking needs.
        options.fusion_depth = options
            .fusion_depth
            .max(args.depth.saturating_mul(DOCUMENT_DEPTH));
        let retriever = store.retriever(&options, embedder.as_deref())?;
        let (run, latencies) = ranking::document_run(
            index.as_ref(),
            &options,
            retriever.as_ref(),
            head,
            &queries,
            args.depth,
            &mut || progress.inc(1),
        )?;
        progress.finish_and_clear();
        report_latency(&label, &latencies);
        if let Some(out) = &args.run_out {
            write_run(&run, out, options.mode)?;
        }
        return score_run(&run, queries_path, &qrels, qrels_path, args);
    }
    if queries.iter().all(|q| q.answers.is_empty()) {
        bail!(
            "{}: the queries carry no answers; give --qrels to score document rankings",
            queries_path.display()
        );
    }
    let retriever = store.retriever(&options, embedder.as_deref())?;
    let (items, latencies) =
        ranking::answer_items(retriever.as_ref(), head, &queries, args.max_k, &mut || {
            progress.inc(1)
        })?;
    progress.finish_and_clear();
    report_latency(&label, &latencies);
    if let Some(out) = &args.run_out {
        write_jsonl(out, &items)?;
    }
    score_answers(&items, queries_path, args)
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

fn write_run(run: &Run, path: &Path, mode: Mode) -> Result<()> {
    let file =
        std::fs::File::create(path).with_context(|| format!("cannot write {}", path.display()))?;
    let mut out = std::io::BufWriter::new(file);
    run.write_trec(&format!("lector-{}", mode.name()), &mut out)
        .and_then(|()| std::io::Write::flush(&mut out))
        .with_context(|| format!("cannot write {}", path.display()))
}
