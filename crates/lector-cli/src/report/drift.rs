//! `lector report drift`: whether the questions users ask, and how the system answers them, have
//! changed between two windows of a query log (`lector serve --log-queries DIR`). The
//! measuring and testing is [`lector_querylog::drift`]'s; this reads the arguments and prints.

use crate::table::print_table;
use anyhow::{Context, Result};
use clap::Args;
use lector_querylog::drift::{
    self, parse_span, parse_time, report, Drift, Span, Thresholds, Windows,
};
use std::path::PathBuf;
use std::time::SystemTime;

#[derive(Args)]
pub struct DriftArgs {
    /// The query log directory (`lector serve --log-queries DIR`).
    #[arg(long, value_name = "DIR")]
    log: PathBuf,
    /// The index the questions were asked of: enables the out-of-vocabulary rate and, for an
    /// index with passage vectors, the nearness signals [default: $LECTOR_INDEX when set].
    #[arg(long, value_name = "DIR")]
    index: Option<PathBuf>,
    /// Embedder checkpoint of a dense index [default: the registry's all-MiniLM-L6-v2].
    #[arg(long, value_name = "DIR")]
    embedder: Option<PathBuf>,
    /// Compare the asks before this time with those at or after it (RFC 3339, or YYYY-MM-DD)
    /// [default: the median ask time, which halves the log].
    #[arg(long, value_name = "TIME", value_parser = parse_time, conflicts_with_all = ["before", "after"])]
    split: Option<SystemTime>,
    /// The earlier window, FROM..TO (TO excluded; either end may be left open, as in `..TO`).
    #[arg(long, value_name = "FROM..TO", value_parser = parse_span, requires = "after")]
    before: Option<Span>,
    /// The later window, FROM..TO (TO excluded; either end may be left open, as in `FROM..`).
    #[arg(long, value_name = "FROM..TO", value_parser = parse_span, requires = "before")]
    after: Option<Span>,
    /// A question is far from the index when the cosine similarity of its nearest passage is
    /// below this. 0.3 suits all-MiniLM-L6-v2, where a question and the passage that answers it
    /// score about 0.4 to 0.8 and unrelated texts about -0.1 to 0.2.
    #[arg(long, value_name = "COSINE", default_value_t = 0.3, value_parser = cosine)]
    far_below: f64,
    /// Significance level: a signal drifted only when its test's p-value is below it.
    #[arg(long, default_value_t = 0.01, value_parser = crate::values::unit_interval)]
    alpha: f64,
    /// Smallest change that counts as drift: the Kolmogorov-Smirnov D of a distribution, or the
    /// absolute change of a rate (so a big log does not flag differences too small to matter).
    #[arg(long, default_value_t = 0.05, value_parser = crate::values::unit_interval)]
    min_effect: f64,
    /// Also write an HTML report with before/after histograms to FILE.
    #[arg(long, value_name = "FILE")]
    html: Option<PathBuf>,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

fn cosine(text: &str) -> Result<f64, String> {
    let value: f64 = text
        .trim()
        .parse()
        .map_err(|_| format!("`{text}` is not a number"))?;
    if (-1.0..=1.0).contains(&value) {
        Ok(value)
    } else {
        Err("a cosine similarity is between -1 and 1".into())
    }
}

pub fn run(args: DriftArgs) -> Result<()> {
    let index_dir = args.index.clone().or_else(|| {
        std::env::var_os("LECTOR_INDEX")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    });
    let windows = match (args.split, args.before, args.after) {
        (Some(at), _, _) => Windows::Split(at),
        (None, Some(before), Some(after)) => Windows::Explicit { before, after },
        _ => Windows::Median,
    };
    let thresholds = Thresholds {
        alpha: args.alpha,
        min_effect: args.min_effect,
        far_below: args.far_below,
    };
    let drift = drift::report(
        &args.log,
        index_dir.as_deref(),
        args.embedder.clone(),
        windows,
        thresholds,
        &crate::search::notify,
    )?;
    if let Some(path) = &args.html {
        report::html(&drift)
            .write(path)
            .with_context(|| format!("writing the HTML report {}", path.display()))?;
    }
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&report::to_json(&drift))?
        );
    } else {
        table(&drift);
    }
    Ok(())
}

/// Prints the windows, the signals and what drifted.
fn table(drift: &Drift) {
    println!("query log: {}", drift.log.display());
    for w in &drift.windows {
        println!("{}", report::describe_window(w));
    }
    println!();
    print_table(&report::HEADER, &report::rows(drift));
    println!();
    for line in report::notes(drift) {
        println!("{line}");
    }
    println!("{}", report::verdict(drift));
}
