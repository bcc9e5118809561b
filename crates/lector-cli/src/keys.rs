//! `lector keys add`: a new named key for `lector serve --keys FILE`, printed once and stored
//! only as its digest.

use anyhow::Result;
use clap::{Args, Subcommand, ValueEnum};
use lector_server::Scope;
use std::path::PathBuf;

#[derive(Subcommand)]
pub enum KeysCommand {
    /// Add a key to a key file (created when missing) and print the key, the only time it is shown.
    Add(AddArgs),
}

#[derive(Args)]
pub struct AddArgs {
    /// The key's name (in the key file and in 403 messages; never a secret).
    name: String,
    /// The key file.
    #[arg(long, value_name = "FILE")]
    file: PathBuf,
    /// What the key may do: ask (ask, search, read documents), write (add documents), admin
    /// (delete documents, labelling, metrics).
    #[arg(long, value_enum, value_delimiter = ',', required = true)]
    scopes: Vec<ScopeArg>,
    /// Confine the key to one tenant's documents (letters, digits, `-`, `_`).
    #[arg(long)]
    tenant: Option<String>,
}

#[derive(Clone, Copy, ValueEnum)]
enum ScopeArg {
    Ask,
    Write,
    Admin,
}

impl From<ScopeArg> for Scope {
    fn from(scope: ScopeArg) -> Scope {
        match scope {
            ScopeArg::Ask => Scope::Ask,
            ScopeArg::Write => Scope::Write,
            ScopeArg::Admin => Scope::Admin,
        }
    }
}

pub fn run(cmd: KeysCommand) -> Result<()> {
    match cmd {
        KeysCommand::Add(args) => {
            let scopes: Vec<Scope> = args.scopes.iter().map(|&s| s.into()).collect();
            let key = lector_server::keys::add_key(
                &args.file,
                &args.name,
                &scopes,
                args.tenant.as_deref(),
            )?;
            eprintln!(
                "added key `{}` to {} (stored as its SHA-256 digest; this is the only time it is shown)",
                args.name,
                args.file.display()
            );
            println!("{key}");
            Ok(())
        }
    }
}
