//! A [`FileLayer`] that keeps one directory in memory and simulates a power loss.
//!
//! It models what POSIX promises and no more: a file's contents are durable as of its last
//! fsync, and the directory's entries (creations, renames, removals) as of the directory's last
//! fsync. After a chosen number of operations the "machine" loses power: that operation and
//! every later one fail, and [`CrashFiles::after_power_loss`] gives the files a reboot would
//! find, to be written to a real directory and opened by the real code.

use super::FileLayer;
use std::collections::{BTreeMap, HashMap};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// What a power loss keeps of the changes that were not made durable.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Loss {
    /// Nothing: unsynced contents revert to their last fsync (empty for a file never synced),
    /// and directory changes since the directory's last fsync are undone.
    Everything,
    /// An arbitrary part, drawn from this seed: the directory changes since its last fsync up to
    /// a random point (a journal replays them in order), and per file with unsynced contents
    /// either the synced contents, the new ones, or a prefix of the new ones (a torn write).
    Some(u64),
}

/// One directory in memory, with its durable state tracked beside the visible one.
pub(crate) struct CrashFiles {
    dir: PathBuf,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// Mutating operations left before the power goes; `None`: never.
    budget: Option<usize>,
    crashed: bool,
    /// Mutating operations that succeeded.
    operations: usize,
    next_inode: u64,
    /// Name -> file, as processes see the directory (the page cache).
    entries: BTreeMap<String, u64>,
    /// Name -> file, as the disk holds the directory.
    durable_entries: BTreeMap<String, u64>,
    /// Directory changes since its last fsync, in order; each applies atomically.
    unsynced_changes: Vec<Vec<(String, Option<u64>)>>,
    /// File -> contents, as processes see them.
    contents: HashMap<u64, Vec<u8>>,
    /// File -> contents as of its last fsync.
    durable_contents: HashMap<u64, Vec<u8>>,
}

fn power_loss() -> io::Error {
    io::Error::other("simulated power loss")
}

fn not_found(name: &str) -> io::Error {
    io::Error::new(io::ErrorKind::NotFound, format!("{name}: no such file"))
}

impl CrashFiles {
    /// An empty directory `dir` (which must exist on disk for the writer's lock file).
    pub fn new(dir: &Path) -> Self {
        CrashFiles {
            dir: dir.to_path_buf(),
            state: Mutex::new(State::default()),
        }
    }

    /// The directory `dir` holding `files`, all of them durable (a disk after a reboot).
    pub fn with_durable_files(dir: &Path, files: BTreeMap<String, Vec<u8>>) -> Self {
        let mut state = State::default();
        for (name, contents) in files {
            state.next_inode += 1;
            state.entries.insert(name, state.next_inode);
            state.contents.insert(state.next_inode, contents.clone());
            state.durable_contents.insert(state.next_inode, contents);
        }
        state.durable_entries = state.entries.clone();
        CrashFiles {
            dir: dir.to_path_buf(),
            state: Mutex::new(state),
        }
    }

    /// Loses power at the mutating operation after `operations` more have succeeded.
    pub fn crash_after(&self, operations: usize) {
        self.lock().budget = Some(operations);
    }

    /// Mutating operations (write, fsync, rename, remove) that succeeded so far.
    pub fn operations(&self) -> usize {
        self.lock().operations
    }

    /// Whether the power is gone.
    pub fn crashed(&self) -> bool {
        self.lock().crashed
    }

    /// The files a reboot finds now, by name, under `loss`.
    pub fn after_power_loss(&self, loss: Loss) -> BTreeMap<String, Vec<u8>> {
        let state = self.lock();
        match loss {
            Loss::Everything => state
                .durable_entries
                .iter()
                .map(|(name, inode)| (name.clone(), state.durable(*inode).to_vec()))
                .collect(),
            Loss::Some(seed) => state.partly_lost(&mut SplitMix(seed)),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state
            .lock()
            .expect("no test thread panicked holding it")
    }

    /// The entry name of `path`, which must be directly in the directory.
    fn name(&self, path: &Path) -> io::Result<String> {
        match path.strip_prefix(&self.dir) {
            Ok(rest) if rest.components().count() == 1 => Ok(rest.to_string_lossy().into_owned()),
            _ => Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{} is outside {}", path.display(), self.dir.display()),
            )),
        }
    }

    /// Runs a mutating operation unless the power is gone, or goes now.
    fn mutate<T>(&self, apply: impl FnOnce(&mut State) -> io::Result<T>) -> io::Result<T> {
        let mut state = self.lock();
        if state.crashed || state.budget == Some(0) {
            state.crashed = true;
            return Err(power_loss());
        }
        let result = apply(&mut state)?;
        state.operations += 1;
        if let Some(budget) = &mut state.budget {
            *budget -= 1;
        }
        Ok(result)
    }

    /// Runs a read unless the power is gone.
    fn inspect<T>(&self, read: impl FnOnce(&State) -> io::Result<T>) -> io::Result<T> {
        let state = self.lock();
        if state.crashed {
            return Err(power_loss());
        }
        read(&state)
    }
}

impl State {
    fn inode(&self, name: &str) -> io::Result<u64> {
        self.entries
            .get(name)
            .copied()
            .ok_or_else(|| not_found(name))
    }

    fn durable(&self, inode: u64) -> &[u8] {
        self.durable_contents.get(&inode).map_or(&[], Vec::as_slice)
    }

    fn change_directory(&mut self, change: Vec<(String, Option<u64>)>) {
        for (name, inode) in &change {
            match inode {
                Some(inode) => self.entries.insert(name.clone(), *inode),
                None => self.entries.remove(name),
            };
        }
        self.unsynced_changes.push(change);
    }

    fn partly_lost(&self, rng: &mut SplitMix) -> BTreeMap<String, Vec<u8>> {
        let mut entries = self.durable_entries.clone();
        let kept = rng.below(self.unsynced_changes.len() as u64 + 1) as usize;
        for change in &self.unsynced_changes[..kept] {
            for (name, inode) in change {
                match inode {
                    Some(inode) => entries.insert(name.clone(), *inode),
                    None => entries.remove(name),
                };
            }
        }
        entries
            .into_iter()
            .map(|(name, inode)| (name, self.partly_written(inode, rng)))
            .collect()
    }

    fn partly_written(&self, inode: u64, rng: &mut SplitMix) -> Vec<u8> {
        let durable = self.durable(inode);
        let current = self.contents.get(&inode).map_or(&[][..], Vec::as_slice);
        if durable == current {
            return current.to_vec();
        }
        match rng.below(3) {
            0 => durable.to_vec(),
            1 => current.to_vec(),
            _ => current[..rng.below(current.len() as u64 + 1) as usize].to_vec(),
        }
    }
}

impl FileLayer for CrashFiles {
    fn write(&self, path: &Path, bytes: &[u8]) -> io::Result<()> {
        let name = self.name(path)?;
        self.mutate(|state| {
            let inode = match state.entries.get(&name) {
                Some(&inode) => inode,
                None => {
                    state.next_inode += 1;
                    let inode = state.next_inode;
                    state.change_directory(vec![(name, Some(inode))]);
                    inode
                }
            };
            state.contents.insert(inode, bytes.to_vec());
            Ok(())
        })
    }

    fn sync_file(&self, path: &Path) -> io::Result<()> {
        let name = self.name(path)?;
        self.mutate(|state| {
            let inode = state.inode(&name)?;
            let contents = state.contents.get(&inode).cloned().unwrap_or_default();
            state.durable_contents.insert(inode, contents);
            Ok(())
        })
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        let (from, to) = (self.name(from)?, self.name(to)?);
        self.mutate(|state| {
            let inode = state.inode(&from)?;
            state.change_directory(vec![(from, None), (to, Some(inode))]);
            Ok(())
        })
    }

    fn remove(&self, path: &Path) -> io::Result<()> {
        let name = self.name(path)?;
        self.mutate(|state| {
            state.inode(&name)?;
            state.change_directory(vec![(name, None)]);
            Ok(())
        })
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        if dir != self.dir {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{} is not {}", dir.display(), self.dir.display()),
            ));
        }
        self.mutate(|state| {
            state.durable_entries = state.entries.clone();
            state.unsynced_changes.clear();
            Ok(())
        })
    }

    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        let name = self.name(path)?;
        self.inspect(|state| Ok(state.contents[&state.inode(&name)?].clone()))
    }

    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        if dir != self.dir {
            return Err(not_found(&dir.to_string_lossy()));
        }
        self.inspect(|state| Ok(state.entries.keys().cloned().collect()))
    }
}

/// A small seeded generator (SplitMix64), so that every crash point can be replayed.
pub(crate) struct SplitMix(pub u64);

impl SplitMix {
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (`n > 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files() -> (CrashFiles, PathBuf) {
        let dir = PathBuf::from("/index");
        (CrashFiles::new(&dir), dir)
    }

    #[test]
    fn unsynced_contents_and_renames_are_lost() {
        let (files, dir) = files();
        files.write(&dir.join("a"), b"one").unwrap();
        files.sync_file(&dir.join("a")).unwrap();
        files.sync_dir(&dir).unwrap();
        files.write(&dir.join("a"), b"two").unwrap();
        files.write(&dir.join("b"), b"new").unwrap();
        files.sync_file(&dir.join("b")).unwrap();
        files.rename(&dir.join("b"), &dir.join("c")).unwrap();
        assert_eq!(files.list(&dir).unwrap(), vec!["a", "c"]);
        assert_eq!(files.read(&dir.join("a")).unwrap(), b"two");
        let after = files.after_power_loss(Loss::Everything);
        assert_eq!(after, BTreeMap::from([("a".into(), b"one".to_vec())]));
    }

    #[test]
    fn a_synced_directory_keeps_entries_but_not_unsynced_contents() {
        let (files, dir) = files();
        files.write(&dir.join("a"), b"data").unwrap();
        files.rename(&dir.join("a"), &dir.join("b")).unwrap();
        files.sync_dir(&dir).unwrap();
        let after = files.after_power_loss(Loss::Everything);
        // The name survives, pointing to a file whose data never reached the disk.
        assert_eq!(after, BTreeMap::from([("b".into(), Vec::new())]));
    }

    #[test]
    fn the_power_goes_after_the_budget_and_stays_gone() {
        let (files, dir) = files();
        files.crash_after(2);
        files.write(&dir.join("a"), b"x").unwrap();
        files.sync_file(&dir.join("a")).unwrap();
        assert!(files.sync_dir(&dir).is_err());
        assert!(files.crashed());
        assert!(files.read(&dir.join("a")).is_err());
        assert!(files.write(&dir.join("b"), b"y").is_err());
        assert_eq!(files.operations(), 2);
        assert!(files.after_power_loss(Loss::Everything).is_empty());
    }

    #[test]
    fn a_partial_loss_keeps_a_prefix_of_directory_changes() {
        for seed in 0..64 {
            let (files, dir) = files();
            for name in ["a", "b", "c"] {
                files.write(&dir.join(name), name.as_bytes()).unwrap();
                files.sync_file(&dir.join(name)).unwrap();
            }
            let names: Vec<String> = files
                .after_power_loss(Loss::Some(seed))
                .into_keys()
                .collect();
            let prefixes = [vec![], vec!["a"], vec!["a", "b"], vec!["a", "b", "c"]];
            assert!(prefixes.iter().any(|p| *p == names), "{names:?}");
        }
    }
}
