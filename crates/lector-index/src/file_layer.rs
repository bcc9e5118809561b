//! The file operations an index commit is made of, behind a small trait, and the one durable
//! write routine of lector.
//!
//! Commits go through [`FileLayer`] so that a test double can stand in for the file system and
//! simulate a power loss: killing the process loses no page cache, so only a layer that forgets
//! what was never fsynced shows whether the fsyncs are where they must be (see `crash`, test
//! builds only). Production uses [`OsFiles`], plain `std::fs`.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

#[cfg(test)]
pub(crate) mod crash;

/// The file system as a commit sees it: whole-file writes, fsyncs, renames and removals in one
/// directory, and reads.
pub(crate) trait FileLayer: Send + Sync {
    /// Creates `path` (truncating it if it exists) and writes `bytes`, without syncing.
    fn write(&self, path: &Path, bytes: &[u8]) -> io::Result<()>;
    /// Makes the contents of `path` durable (fsync).
    fn sync_file(&self, path: &Path) -> io::Result<()>;
    /// Renames `from` to `to`, replacing `to` atomically.
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;
    /// Removes the file `path`.
    fn remove(&self, path: &Path) -> io::Result<()>;
    /// Makes the creations, renames and removals in `dir` durable (fsync of the directory).
    fn sync_dir(&self, dir: &Path) -> io::Result<()>;
    /// The contents of `path`.
    fn read(&self, path: &Path) -> io::Result<Vec<u8>>;
    /// The names of the entries of `dir`.
    fn list(&self, dir: &Path) -> io::Result<Vec<String>>;
}

/// The real file system.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct OsFiles;

impl FileLayer for OsFiles {
    fn write(&self, path: &Path, bytes: &[u8]) -> io::Result<()> {
        File::create(path)?.write_all(bytes)
    }

    fn sync_file(&self, path: &Path) -> io::Result<()> {
        // Opened for writing: Windows flushes only handles with write access. fsync acts on the
        // file, not the handle, so this syncs what `write` wrote through its own handle.
        OpenOptions::new().write(true).open(path)?.sync_all()
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        std::fs::rename(from, to)
    }

    fn remove(&self, path: &Path) -> io::Result<()> {
        std::fs::remove_file(path)
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        sync_dir(dir)
    }

    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        std::fs::read(path)
    }

    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        std::fs::read_dir(dir)?
            .map(|entry| Ok(entry?.file_name().to_string_lossy().into_owned()))
            .collect()
    }
}

fn ignore_unsupported(e: io::Error) -> io::Result<()> {
    if matches!(
        e.kind(),
        io::ErrorKind::PermissionDenied | io::ErrorKind::Unsupported
    ) {
        Ok(())
    } else {
        Err(e)
    }
}

/// Makes the creations, renames and removals in `dir` durable (fsync of the directory).
///
/// Only Windows may skip it: a directory cannot be opened there, and a rename is durable without
/// it. Anywhere else a directory that cannot be opened is an error, since the entries that were
/// just written might not survive a power loss.
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    if cfg!(windows) {
        return Ok(());
    }
    File::open(dir)?.sync_all().or_else(ignore_unsupported)
}

/// Moves the finished file or directory `from` to `to` durably: fsyncs `from`'s contents, renames
/// it (replacing `to` atomically where `to` is a file) and fsyncs `to`'s directory. For contents
/// that a library writes to a path of its own (a safetensors file, say), where
/// [`write_durably`] cannot take bytes.
pub fn rename_durably(from: &Path, to: &Path) -> io::Result<()> {
    if from.is_dir() {
        sync_dir(from)?;
    } else {
        OsFiles.sync_file(from)?;
    }
    std::fs::rename(from, to)?;
    sync_dir(parent_dir(to))
}

/// Replaces the file `path` with `bytes` durably: after a crash at any point it holds either its
/// old contents or all of the new ones, and once this returns the new ones survive a power loss.
///
/// Writes `<path>.tmp`, fsyncs it, renames it over `path` and fsyncs the directory. The fsync
/// before the rename keeps a crash from making the new name point to unwritten data; the one
/// after makes the rename itself durable.
pub fn write_durably(path: &Path, bytes: &[u8]) -> io::Result<()> {
    write_durably_with(&OsFiles, path, bytes)
}

/// [`write_durably`] through `files`.
pub(crate) fn write_durably_with(
    files: &dyn FileLayer,
    path: &Path,
    bytes: &[u8],
) -> io::Result<()> {
    let tmp = temporary_path(path);
    files.write(&tmp, bytes)?;
    files.sync_file(&tmp)?;
    files.rename(&tmp, path)?;
    files.sync_dir(parent_dir(path))
}

/// `<path>.tmp`.
fn temporary_path(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".tmp");
    PathBuf::from(name)
}

/// The directory holding `path` (`.` for a bare file name).
fn parent_dir(path: &Path) -> &Path {
    match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_durably_replaces_the_file_and_leaves_no_temporary() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("calibration.json");
        write_durably(&path, b"old").unwrap();
        write_durably(&path, b"new contents").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"new contents");
        assert_eq!(OsFiles.list(dir.path()).unwrap(), vec!["calibration.json"]);
    }

    #[test]
    fn write_durably_fails_in_a_missing_directory() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("missing").join("file.json");
        assert!(write_durably(&path, b"x").is_err());
    }

    #[test]
    #[cfg(unix)]
    fn a_directory_that_cannot_be_opened_is_not_synced_silently() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("missing");
        assert!(OsFiles.sync_dir(&missing).is_err());
        assert!(sync_dir(dir.path()).is_ok());
    }

    #[test]
    fn rename_durably_moves_files_and_directories() {
        let dir = tempfile::tempdir().unwrap();
        let (tmp, path) = (dir.path().join("w.tmp"), dir.path().join("w"));
        std::fs::write(&tmp, b"weights").unwrap();
        rename_durably(&tmp, &path).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"weights");
        let (partial, done) = (dir.path().join("partial"), dir.path().join("done"));
        std::fs::create_dir(&partial).unwrap();
        rename_durably(&partial, &done).unwrap();
        assert!(done.is_dir() && !partial.exists());
        assert!(rename_durably(&dir.path().join("gone"), &path).is_err());
    }

    #[test]
    fn a_bare_file_name_lives_in_the_current_directory() {
        assert_eq!(parent_dir(Path::new("MANIFEST.json")), Path::new("."));
        assert_eq!(
            temporary_path(Path::new("a/MANIFEST.json")),
            Path::new("a/MANIFEST.json.tmp")
        );
    }
}
