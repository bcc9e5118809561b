//! `lector models` (placeholder until the models crate lands).
use clap::Subcommand;

#[derive(Subcommand)]
pub enum ModelsCommand {
    /// List the models lector knows and where they are.
    List,
}

pub fn run(_cmd: ModelsCommand) -> anyhow::Result<()> {
    anyhow::bail!("the models crate is not built yet")
}
