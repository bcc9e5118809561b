//! `--store URL`: the commands that search or add documents can use a Redis Query Engine store
//! instead of an index directory.

use crate::index::IndexDir;
use anyhow::Result;
use clap::Args;
use lector_index::{DocumentStore, Index};
use lector_redis::{ConnectOptions, RedisStore, StoreUrl};
use std::path::PathBuf;

/// Where an external store lives.
#[derive(Args, Clone)]
pub struct StoreArgs {
    /// A Redis Query Engine store instead of an index directory:
    /// redis://[USER:PASSWORD@]HOST:PORT/NAME, rediss:// for TLS [default: $LECTOR_STORE]. A
    /// password is better given through $LECTOR_STORE than on the command line, where other
    /// users of the machine can see it.
    #[arg(long, value_name = "URL", conflicts_with = "index")]
    store: Option<String>,
    /// PEM file of the certificate authority that signed a rediss:// server's certificate
    /// [default: the system's].
    #[arg(long, value_name = "FILE")]
    store_ca: Option<PathBuf>,
}

impl StoreArgs {
    /// The store these arguments name, else the index directory `dir` names.
    pub fn open(&self, dir: &IndexDir) -> Result<Box<dyn DocumentStore>> {
        Ok(match self.store(dir.given())? {
            Some((url, connect)) => Box::new(RedisStore::open(&url, &connect)?),
            None => Box::new(Index::open(dir.path())?),
        })
    }

    /// The store named by `--store` or `$LECTOR_STORE` (unless `--index` is given), and how to
    /// connect to it; `None` for an index directory.
    pub fn store(&self, index_given: bool) -> Result<Option<(StoreUrl, ConnectOptions)>> {
        let from_env = || {
            (!index_given)
                .then(|| std::env::var("LECTOR_STORE").ok())
                .flatten()
                .filter(|v| !v.is_empty())
        };
        let Some(text) = self.store.clone().or_else(from_env) else {
            return Ok(None);
        };
        let url = StoreUrl::parse(&text)?;
        let options = ConnectOptions {
            ca_cert: self.store_ca.clone(),
            ..ConnectOptions::default()
        };
        Ok(Some((url, options)))
    }
}

/// Whether `path` is a store URL (`redis://`, `rediss://`) rather than a directory.
pub fn is_url(path: &std::path::Path) -> bool {
    path.to_str().is_some_and(lector_redis::is_store_url)
}

/// The Redis store `path` names when it is a store URL (`redis://`, `rediss://`), for the
/// commands whose `--index` also takes one.
pub fn open_if_url(path: &std::path::Path) -> Result<Option<RedisStore>> {
    match path.to_str().filter(|_| is_url(path)) {
        Some(text) => {
            let url = StoreUrl::parse(text)?;
            Ok(Some(RedisStore::open(&url, &ConnectOptions::default())?))
        }
        None => Ok(None),
    }
}
