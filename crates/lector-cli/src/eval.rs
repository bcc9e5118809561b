//! `lector eval ...`
use clap::Subcommand;

#[derive(Subcommand)]
pub enum EvalCommand {
    /// Placeholder.
    Squad,
}

pub fn run(_cmd: EvalCommand) -> anyhow::Result<()> {
    Ok(())
}
