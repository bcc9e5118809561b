//! Power-loss test of the commit protocol: seeded random workloads of adds, replacements and
//! removals (with the writer's segment merges) run through [`CrashFiles`]; at a random operation
//! the power goes, and the files a reboot would find are written to a real directory and opened
//! by the real code. Half the workloads are dense (vector files beside the segments), and half
//! defer merges as the server does: each merge is planned after a commit, written, and listed
//! only after the next commit (which must leave its unlisted files alone). Every
//! acknowledged document must be there with its text, the index must
//! hold exactly the last acknowledged commit or the one in flight, and must take new commits.
//!
//! `LECTOR_CRASH_POINTS` sets the number of crash points (default 400; `bench/crash_points.sh`
//! runs many more).

use crate::document::Document;
use crate::embed::Embedder;
use crate::file_layer::crash::{CrashFiles, Loss, SplitMix};
use crate::file_layer::{FileLayer, OsFiles};
use crate::index::Index;
use crate::merge::MergeJob;
use crate::store::{self, IndexSettings};
use crate::writer::IndexWriter;
use std::collections::{BTreeMap, HashSet};
use std::path::Path;
use std::sync::Arc;

/// Documents by id: the text each must have.
type Docs = BTreeMap<String, String>;

const DEFAULT_CRASH_POINTS: usize = 400;
/// Distinct workloads; crash points cycle through them.
const WORKLOADS: u64 = 8;
const COMMITS: usize = 40;

enum Step {
    /// Adds a new document or replaces the one with this id.
    Put(String, String),
    Remove(String),
}

/// Stands in for a sentence model: the values of the vectors do not matter here, only that
/// vector files are written and committed with their segments (a real model in a debug build
/// would make thousands of commits take minutes).
struct ByteHistogram;

impl Embedder for ByteHistogram {
    fn model(&self) -> &str {
        "byte-histogram"
    }
    fn dim(&self) -> usize {
        8
    }
    fn embed(&self, texts: &[&str]) -> std::result::Result<Vec<Vec<f32>>, String> {
        Ok(texts.iter().map(|t| histogram(t)).collect())
    }
}

fn histogram(text: &str) -> Vec<f32> {
    let mut v = [1.0f32; 8];
    for b in text.bytes() {
        v[usize::from(b % 8)] += 1.0;
    }
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    v.iter().map(|x| x / norm).collect()
}

/// Opens (or creates) the index at `dir` through `files`, with vectors when `dense`.
fn open_writer(files: Arc<CrashFiles>, dir: &Path, dense: bool) -> crate::Result<IndexWriter> {
    open_writer_for(files, dir, dense, false)
}

/// [`open_writer`], leaving merges to the caller when `deferred`.
fn open_writer_for(
    files: Arc<CrashFiles>,
    dir: &Path,
    dense: bool,
    deferred: bool,
) -> crate::Result<IndexWriter> {
    let mut writer = IndexWriter::open_or_create_with(files, dir, IndexSettings::default())?;
    if dense {
        writer.set_embedder(Arc::new(ByteHistogram))?;
    }
    writer.defer_merges(deferred);
    Ok(writer)
}

/// A workload: commits, each a list of staged changes.
fn plan(seed: u64, texts: &[String]) -> Vec<Vec<Step>> {
    let mut rng = SplitMix(seed);
    let mut model = Docs::new();
    (0..COMMITS)
        .map(|_| {
            (0..1 + rng.below(5))
                .map(|_| random_step(&mut rng, &mut model, texts))
                .collect()
        })
        .collect()
}

/// Half the steps touch an existing document (a third of those remove it), half add a new one.
fn random_step(rng: &mut SplitMix, model: &mut Docs, texts: &[String]) -> Step {
    let existing = match model.len() as u64 {
        0 => None,
        n if rng.below(2) == 0 => model.keys().nth(rng.below(n) as usize).cloned(),
        _ => None,
    };
    let id = existing.unwrap_or_else(|| format!("doc{}", rng.next_u64() % 1_000_000));
    if model.contains_key(&id) && rng.below(3) == 0 {
        model.remove(&id);
        return Step::Remove(id);
    }
    let mut text = texts[rng.below(texts.len() as u64) as usize].clone();
    if model.get(&id) == Some(&text) {
        text.push_str(" Revised.");
    }
    model.insert(id.clone(), text.clone());
    Step::Put(id, text)
}

fn apply(step: &Step, writer: &mut IndexWriter, model: &mut Docs) {
    match step {
        Step::Put(id, text) => {
            writer.add(Document::new(id.clone(), text.clone()));
            model.insert(id.clone(), text.clone());
        }
        Step::Remove(id) => {
            writer.remove(id);
            model.remove(id);
        }
    }
}

/// What the workload got through before the power went.
#[derive(Default)]
struct Outcome {
    /// The state of the last commit that returned Ok (`None`: creating the index never did).
    acknowledged: Option<Docs>,
    /// The state the commit cut short would have made.
    in_flight: Option<Docs>,
    /// Commits that merged segments.
    merges: usize,
}

fn run(files: Arc<CrashFiles>, dir: &Path, plan: &[Vec<Step>], workload: usize) -> Outcome {
    let mut outcome = Outcome::default();
    let deferred = is_deferred(workload);
    let Ok(mut writer) = open_writer_for(files, dir, is_dense(workload), deferred) else {
        return outcome;
    };
    let mut model = Docs::new();
    outcome.acknowledged = Some(model.clone());
    let mut merged = HashSet::new();
    let mut written_merge = None;
    for steps in plan {
        steps.iter().for_each(|s| apply(s, &mut writer, &mut model));
        if writer.commit().is_err() {
            outcome.in_flight = Some(model);
            return outcome;
        }
        outcome.acknowledged = Some(model.clone());
        if deferred {
            // A merge changes no document, so a failed one leaves nothing in flight.
            if let Some(done) = written_merge.take() {
                if writer.finish_merge(done).is_err() {
                    return outcome;
                }
            }
            written_merge = writer.next_merge().map(MergeJob::run);
        }
        merged.extend(merged_segments(writer.committed()));
    }
    outcome.merges = merged.len();
    outcome
}

/// The segments of `index` written by merges (a merge names its segment `seg-<g>-m<n>`).
fn merged_segments(index: &Index) -> Vec<String> {
    let segments = index.manifest.segments.iter();
    segments
        .filter(|s| s.file.contains("-m"))
        .map(|s| s.file.clone())
        .collect()
}

fn docs_of(index: &Index) -> Docs {
    index
        .documents()
        .map(|d| (d.id.to_string(), d.text.to_string()))
        .collect()
}

/// Figures over all crash points.
#[derive(Debug, Default)]
struct Tally {
    crash_points: usize,
    acknowledged_documents: usize,
    lost_documents: usize,
    failed_opens: usize,
    /// Opened indexes holding neither the acknowledged state nor the one in flight.
    inconsistent: usize,
    failed_recoveries: usize,
    failures: Vec<String>,
}

impl Tally {
    fn fail(&mut self, point: &str, what: String) {
        if self.failures.len() < 10 {
            self.failures.push(format!("{point}: {what}"));
        }
    }
}

/// What survived a crash, and how to check it.
struct Reboot<'a> {
    /// A real directory, to hold the files that survived.
    disk: &'a Path,
    files: BTreeMap<String, Vec<u8>>,
    dense: bool,
    /// Names the crash point in failure messages.
    point: String,
}

/// Reboots after `outcome`. Checks opening, the documents, and that the index takes a new
/// commit.
fn check(reboot: Reboot, outcome: &Outcome, tally: &mut Tally) {
    let (disk, point) = (reboot.disk, reboot.point.as_str());
    for (name, bytes) in &reboot.files {
        std::fs::write(disk.join(name), bytes).unwrap();
    }
    let Some(acknowledged) = &outcome.acknowledged else {
        // Never created: it may or may not be there, but creating it again must work.
        return check_recovery(&reboot, &Docs::new(), tally);
    };
    tally.acknowledged_documents += acknowledged.len();
    let index = match Index::open_with(&OsFiles, disk) {
        Ok(index) => index,
        Err(e) => {
            tally.failed_opens += 1;
            return tally.fail(point, format!("does not open: {e}"));
        }
    };
    let found = docs_of(&index);
    let lost = lost_documents(acknowledged, outcome.in_flight.as_ref(), &found);
    tally.lost_documents += lost;
    if lost > 0 {
        tally.fail(point, format!("{lost} acknowledged documents lost"));
    }
    if found != *acknowledged && Some(&found) != outcome.in_flight.as_ref() {
        tally.inconsistent += 1;
        tally.fail(
            point,
            "neither the acknowledged nor the in-flight state".into(),
        );
    }
    check_recovery(&reboot, &found, tally);
}

/// Acknowledged documents missing or with other text, unless the commit in flight changed them
/// that way.
fn lost_documents(acknowledged: &Docs, in_flight: Option<&Docs>, found: &Docs) -> usize {
    acknowledged
        .iter()
        .filter(|&(id, text)| {
            let kept = found.get(id) == Some(text);
            let changed_by_in_flight = in_flight.is_some_and(|f| f.get(id) == found.get(id));
            !kept && !changed_by_in_flight
        })
        .count()
}

/// A writer opens the rebooted index (cleaning leftovers), commits one more document, and the
/// result holds `found` plus that document and no leftover file.
fn check_recovery(reboot: &Reboot, found: &Docs, tally: &mut Tally) {
    let (disk, point) = (reboot.disk, reboot.point.as_str());
    let recovered = Arc::new(CrashFiles::with_durable_files(disk, reboot.files.clone()));
    let result = recover(recovered.clone(), disk, reboot.dense)
        .and_then(|()| Index::open_with(&*recovered, disk));
    let mut expected = found.clone();
    expected.insert("after-reboot".into(), "Written after the reboot.".into());
    let clean = |index: &Index| {
        let listed = |name: &String| {
            let segments = index.manifest.segments.iter();
            segments
                .flat_map(|s| [Some(&s.file), s.vectors.as_ref().map(|v| &v.file)])
                .any(|f| f == Some(name))
        };
        let names = recovered.list(disk).unwrap_or_default();
        names.iter().all(|n| n == store::MANIFEST || listed(n))
    };
    match result {
        Ok(index) if docs_of(&index) == expected && clean(&index) => {}
        Ok(_) => {
            tally.failed_recoveries += 1;
            tally.fail(
                point,
                "wrong documents or leftover files after recovery".into(),
            );
        }
        Err(e) => {
            tally.failed_recoveries += 1;
            tally.fail(point, format!("recovery failed: {e}"));
        }
    }
}

fn recover(files: Arc<CrashFiles>, disk: &Path, dense: bool) -> crate::Result<()> {
    let mut writer = open_writer(files, disk, dense)?;
    writer.add(Document::new("after-reboot", "Written after the reboot."));
    writer.commit().map(drop)
}

/// Real paragraphs: SQuAD v1.1 dev contexts.
fn squad_paragraphs(limit: usize) -> Vec<String> {
    let path = lector_eval::data::require("squad/dev-v1.1.json");
    let json: serde_json::Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    json["data"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|article| article["paragraphs"].as_array().unwrap())
        .map(|p| p["context"].as_str().unwrap().to_string())
        .take(limit)
        .collect()
}

fn crash_points() -> usize {
    std::env::var("LECTOR_CRASH_POINTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(DEFAULT_CRASH_POINTS)
}

/// Operations each workload makes when the power never goes; also checks the workload merges.
fn workload_operations(plans: &[Vec<Vec<Step>>]) -> Vec<usize> {
    plans
        .iter()
        .enumerate()
        .map(|(w, plan)| {
            let dir = tempfile::tempdir().unwrap();
            let files = Arc::new(CrashFiles::new(dir.path()));
            let outcome = run(files.clone(), dir.path(), plan, w);
            assert!(
                outcome.in_flight.is_none() && outcome.merges >= 2,
                "merges: {}",
                outcome.merges
            );
            let index = Index::open_with(&*files, dir.path()).unwrap();
            assert_eq!(Some(docs_of(&index)), outcome.acknowledged);
            assert_eq!(index.dense_meta().is_some(), is_dense(w));
            files.operations()
        })
        .collect()
}

fn is_dense(workload: usize) -> bool {
    workload % 2 == 1
}

fn is_deferred(workload: usize) -> bool {
    workload % 4 >= 2
}

#[test]
fn acknowledged_commits_survive_power_loss_at_random_points() {
    let texts = squad_paragraphs(300);
    let plans: Vec<_> = (0..WORKLOADS).map(|w| plan(w, &texts)).collect();
    let operations = workload_operations(&plans);
    let mut tally = Tally::default();
    let mut rng = SplitMix(0x1EC7_0819);
    for point in 0..crash_points() {
        let w = point % plans.len();
        // One more than the operations: the power may also go after the last commit.
        let budget = rng.below(operations[w] as u64 + 1) as usize;
        // Both kinds of loss on every workload.
        let loss = if (point / plans.len()) % 2 == 0 {
            Loss::Everything
        } else {
            Loss::Some(rng.next_u64())
        };
        let dir = tempfile::tempdir().unwrap();
        let files = Arc::new(CrashFiles::new(dir.path()));
        files.crash_after(budget);
        let outcome = run(files.clone(), dir.path(), &plans[w], w);
        let disk = dir.path().join("disk");
        std::fs::create_dir(&disk).unwrap();
        let reboot = Reboot {
            disk: &disk,
            files: files.after_power_loss(loss),
            dense: is_dense(w),
            point: format!(
                "point {point} (workload {w}, crash after {budget} operations, {loss:?})"
            ),
        };
        check(reboot, &outcome, &mut tally);
        tally.crash_points += 1;
    }
    eprintln!(
        "crash points: {}, acknowledged documents checked: {}, acknowledged documents lost: {}, \
         indexes that failed to open: {}, inconsistent states: {}, failed recoveries: {}",
        tally.crash_points,
        tally.acknowledged_documents,
        tally.lost_documents,
        tally.failed_opens,
        tally.inconsistent,
        tally.failed_recoveries
    );
    assert!(tally.failures.is_empty(), "{tally:#?}");
}
