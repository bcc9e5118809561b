//! `lector report ...`: reports over what a running server recorded.

use anyhow::Result;
use clap::Subcommand;

mod drift;

#[derive(Subcommand)]
pub enum ReportCommand {
    /// Compare two time windows of a query log: question length, out-of-vocabulary rate,
    /// abstention, confidence, retrieval scores and distance to the index, each tested and
    /// flagged when it drifted.
    Drift(drift::DriftArgs),
}

pub fn run(cmd: ReportCommand) -> Result<()> {
    match cmd {
        ReportCommand::Drift(args) => drift::run(args),
    }
}
