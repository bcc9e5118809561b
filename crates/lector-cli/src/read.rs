//! `lector read` (placeholder until the reader lands).
use clap::Args;

#[derive(Args)]
pub struct ReadArgs {}

pub fn run(_args: ReadArgs) -> anyhow::Result<()> {
    anyhow::bail!("the reader is not built yet")
}
