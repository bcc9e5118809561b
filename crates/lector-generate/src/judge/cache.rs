//! The judgement cache: replies keyed by (model name, decoding settings, prompt text), kept as
//! JSON lines in `judgements.jsonl` of a directory the caller chooses.
//!
//! The file is read once when the cache opens and appended to, one line per new reply, as each
//! arrives (a run cut short keeps what it paid for). The file is read by the rule of
//! [`lector_eval::jsonl`]: a torn last line (a write cut off by a crash) is left out, counted and
//! cut off before the next append; any other line that does not parse is an error naming it.
//! The decoding settings are part of the key because the
//! same prompt sampled at another temperature, or cut at another length, is another reply.

use crate::error::{io_err, Result};
use crate::{GenerateOptions, Message};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// The cache file's name inside the cache directory.
pub const CACHE_FILE: &str = "judgements.jsonl";

/// One cached reply.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    /// The judge model's name.
    pub model: String,
    /// The decoding settings as JSON.
    pub settings: String,
    /// The messages as JSON.
    pub prompt: String,
    /// The reply as generated.
    pub reply: String,
    /// Prompt tokens of the request that produced it.
    pub prompt_tokens: usize,
    /// Tokens generated for it.
    pub generated_tokens: usize,
}

type Key = (String, String, String);

/// A cache directory's judgements, shared by the judge's threads.
pub struct Cache {
    path: PathBuf,
    entries: Mutex<HashMap<Key, Entry>>,
    file: Mutex<File>,
    skipped: usize,
}

/// The key of a prompt: model, settings and messages, each as text.
pub fn key(model: &str, options: &GenerateOptions, messages: &[Message]) -> Key {
    // Both serialise infallibly: plain structs of strings and numbers.
    let settings = serde_json::to_string(options).unwrap_or_default();
    let prompt = serde_json::to_string(messages).unwrap_or_default();
    (model.to_string(), settings, prompt)
}

impl Cache {
    /// Opens (creating it if needed) the cache in `dir`; a torn last line is cut off, so the
    /// next entry starts on a line of its own.
    pub fn open(dir: &Path) -> Result<Cache> {
        std::fs::create_dir_all(dir).map_err(io_err(dir))?;
        let path = dir.join(CACHE_FILE);
        let mut file = OpenOptions::new()
            .create(true)
            .read(true)
            .append(true)
            .open(&path)
            .map_err(io_err(&path))?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes).map_err(io_err(&path))?;
        let lines = lector_eval::jsonl::parse::<Entry>(&path, &bytes, Default::default())?;
        end_on_a_line_of_its_own(&mut file, &bytes, lines.end.offset).map_err(io_err(&path))?;
        let mut entries = HashMap::new();
        for (_, e) in lines.records {
            entries.insert((e.model.clone(), e.settings.clone(), e.prompt.clone()), e);
        }
        Ok(Cache {
            path,
            entries: Mutex::new(entries),
            file: Mutex::new(file),
            skipped: usize::from(lines.torn.is_some()),
        })
    }

    /// The cache file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Lines of the file left out when it was opened: a torn last line (0 or 1).
    pub fn skipped_lines(&self) -> usize {
        self.skipped
    }

    /// Replies cached.
    pub fn len(&self) -> usize {
        self.lock_entries().len()
    }

    /// Whether nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The cached reply for `key`.
    pub fn get(&self, key: &Key) -> Option<Entry> {
        self.lock_entries().get(key).cloned()
    }

    /// Stores `entry` in memory and appends it to the file (one write per line, so lines of
    /// concurrent writers do not interleave).
    pub fn put(&self, entry: Entry) -> Result<()> {
        let mut line = serde_json::to_string(&entry).unwrap_or_default();
        line.push('\n');
        {
            let mut file = self.file.lock().unwrap_or_else(|e| e.into_inner());
            file.write_all(line.as_bytes())
                .map_err(io_err(&self.path))?;
        }
        let key = (
            entry.model.clone(),
            entry.settings.clone(),
            entry.prompt.clone(),
        );
        self.lock_entries().insert(key, entry);
        Ok(())
    }

    fn lock_entries(&self) -> std::sync::MutexGuard<'_, HashMap<Key, Entry>> {
        // A thread that panicked while holding the lock left the map whole (inserts are atomic).
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Cuts `file` (whose content is `bytes`) back to the `read` bytes its reader took (a torn
/// last line is not taken), or ends a whole last entry's line, so that an append starts a line.
fn end_on_a_line_of_its_own(file: &mut File, bytes: &[u8], read: u64) -> std::io::Result<()> {
    if read < bytes.len() as u64 {
        file.set_len(read)
    } else if bytes.last().is_some_and(|&b| b != b'\n') {
        file.write_all(b"\n")
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(prompt: &str, reply: &str) -> Entry {
        let (model, settings, prompt) =
            key("m", &GenerateOptions::default(), &[Message::user(prompt)]);
        Entry {
            model,
            settings,
            prompt,
            reply: reply.into(),
            prompt_tokens: 10,
            generated_tokens: 2,
        }
    }

    #[test]
    fn replies_survive_reopening_and_a_torn_line_is_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let cache = Cache::open(dir.path()).unwrap();
        assert!(cache.is_empty());
        cache.put(entry("q1", "Verdict: A")).unwrap();
        cache.put(entry("q2", "Verdict: B")).unwrap();
        drop(cache);
        // A crash in the middle of a write.
        let path = dir.path().join(CACHE_FILE);
        let mut f = OpenOptions::new().append(true).open(&path).unwrap();
        f.write_all(b"{\"model\": \"m\", \"sett").unwrap();
        drop(f);
        let cache = Cache::open(dir.path()).unwrap();
        assert_eq!((cache.len(), cache.skipped_lines()), (2, 1));
        // The torn line is cut off, so the next entry starts on a line of its own.
        cache.put(entry("q3", "Verdict: tie")).unwrap();
        drop(cache);
        let cache = Cache::open(dir.path()).unwrap();
        assert_eq!((cache.len(), cache.skipped_lines()), (3, 0));
        assert!(!std::fs::read_to_string(&path).unwrap().contains("\"sett\n"));
        let k = key("m", &GenerateOptions::default(), &[Message::user("q2")]);
        assert_eq!(cache.get(&k).unwrap().reply, "Verdict: B");
        let other_model = key("n", &GenerateOptions::default(), &[Message::user("q2")]);
        assert!(cache.get(&other_model).is_none());
        let longer = GenerateOptions {
            max_new_tokens: 7,
            ..GenerateOptions::default()
        };
        assert!(cache
            .get(&key("m", &longer, &[Message::user("q2")]))
            .is_none());
    }

    #[test]
    fn a_broken_line_before_the_last_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let cache = Cache::open(dir.path()).unwrap();
        cache.put(entry("q1", "Verdict: A")).unwrap();
        drop(cache);
        let path = dir.path().join(CACHE_FILE);
        let whole = std::fs::read_to_string(&path).unwrap();
        std::fs::write(&path, format!("{{\"model\": \"m\", \"sett\n{whole}")).unwrap();
        let err = Cache::open(dir.path()).err().unwrap().to_string();
        assert!(err.contains("judgements.jsonl:1:"), "{err}");
    }
}
