//! `add_files` on real files: what it counts, when it commits, where strict mode stops, and the
//! progress it reports.

use lector_index::{add_files, AddCounts, AddEvent, AddOptions, Error, Index, IndexWriter};
use lector_ingest::{walk, IngestOptions};
use std::ops::ControlFlow;
use std::path::Path;

fn options(commit_every: usize, strict: bool) -> AddOptions {
    AddOptions {
        ingest: IngestOptions::default(),
        commit_every,
        strict,
        fields: Default::default(),
    }
}

fn line(id: &str, text: &str) -> String {
    serde_json::json!({"id": id, "title": format!("Title {id}"), "text": text}).to_string() + "\n"
}

/// `a.jsonl`: d1, d2, a bad line 3, d3; `b.txt`: one document.
fn write_sources(src: &Path, d2_text: &str) {
    std::fs::create_dir_all(src).unwrap();
    let jsonl = line("d1", "Caffeine improves alertness.")
        + &line("d2", d2_text)
        + "{not json\n"
        + &line("d3", "Melatonin helps with jet lag.");
    std::fs::write(src.join("a.jsonl"), jsonl).unwrap();
    std::fs::write(src.join("b.txt"), "Tea contains theanine.").unwrap();
}

/// Runs `add_files` over `src`, returning its result and the events it sent (as text).
fn add(
    writer: &mut IndexWriter,
    src: &Path,
    options: &AddOptions,
) -> (Result<AddCounts, Error>, Vec<String>) {
    let mut events = Vec::new();
    let result = add_files(writer, walk(&[src.to_path_buf()]), options, &mut |event| {
        events.push(match event {
            AddEvent::Read { bytes } => format!("read {bytes}"),
            AddEvent::Skipped(err) => format!("skipped {err}"),
            AddEvent::Embedding { done, total } => format!("embedding {done}/{total}"),
            AddEvent::Committed(info) => {
                format!("committed {} {}", info.generation, info.documents)
            }
        });
        ControlFlow::Continue(())
    });
    (result, events)
}

fn skipped(events: &[String]) -> Vec<&String> {
    events.iter().filter(|e| e.starts_with("skipped")).collect()
}

#[test]
fn counts_added_then_replaced_unchanged_and_invalid() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    write_sources(&src, "Naps restore attention.");
    let mut writer =
        IndexWriter::open_or_create(tmp.path().join("idx"), Default::default()).unwrap();

    let (first, events) = add(&mut writer, &src, &options(100, false));
    let expected = AddCounts {
        added: 4,
        invalid: 1,
        ..AddCounts::default()
    };
    assert_eq!(first.unwrap(), expected);
    let skipped_lines = skipped(&events);
    assert_eq!(skipped_lines.len(), 1, "{events:?}");
    assert!(skipped_lines[0].contains("a.jsonl:3:"), "{events:?}");
    // The last batch is left for the caller to commit.
    assert_eq!(writer.pending(), 4);
    assert_eq!(writer.committed().len(), 0);
    writer.commit().unwrap();

    write_sources(&src, "Naps restore attention and mood.");
    std::fs::write(src.join("notes.csv"), "not indexed").unwrap();
    let (second, _) = add(&mut writer, &src, &options(100, false));
    let expected = AddCounts {
        replaced: 1,
        unchanged: 3,
        invalid: 1,
        ignored: 1,
        ..AddCounts::default()
    };
    assert_eq!(second.unwrap(), expected);
    assert_eq!(writer.pending(), 1);
}

#[test]
fn strict_stops_at_the_bad_line_and_the_index_keeps_its_last_commit() {
    let tmp = tempfile::tempdir().unwrap();
    let (src, idx) = (tmp.path().join("src"), tmp.path().join("idx"));
    std::fs::create_dir_all(&src).unwrap();
    std::fs::write(src.join("b.txt"), "Tea contains theanine.").unwrap();
    let mut writer = IndexWriter::open_or_create(&idx, Default::default()).unwrap();
    add(&mut writer, &src, &options(100, true)).0.unwrap();
    writer.commit().unwrap();

    // d1 and d2 fill a batch of two and are committed before the bad line 3 stops reading.
    write_sources(&src, "Naps restore attention.");
    let (result, events) = add(&mut writer, &src, &options(2, true));
    match result {
        Err(Error::AddStopped {
            cause,
            kept,
            before_adding: false,
        }) => {
            assert!(cause.to_string().contains("a.jsonl:3:"), "{cause}");
            assert_eq!(kept, 3);
        }
        other => panic!("expected AddStopped, got {other:?}"),
    }
    assert!(skipped(&events).is_empty(), "{events:?}");
    assert!(events.contains(&"committed 2 3".to_string()), "{events:?}");
    drop(writer);
    let index = Index::open(&idx).unwrap();
    assert_eq!(index.len(), 3);
    assert!(index.document("d3").is_none());
}

#[test]
fn strict_stops_at_a_walk_error_before_adding_anything() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    write_sources(&src, "Naps restore attention.");
    std::os::unix::fs::symlink(src.join("missing.txt"), src.join("dangling.txt")).unwrap();
    let mut writer =
        IndexWriter::open_or_create(tmp.path().join("idx"), Default::default()).unwrap();

    let (result, events) = add(&mut writer, &src, &options(1, true));
    let err = result.unwrap_err();
    assert!(
        matches!(
            err,
            Error::AddStopped {
                before_adding: true,
                kept: 0,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(err.to_string().contains("dangling.txt"), "{err}");
    assert!(events.is_empty(), "{events:?}");
    assert_eq!(writer.pending(), 0);

    // Without strict the dangling link is skipped and counted like a bad line.
    let (result, events) = add(&mut writer, &src, &options(100, false));
    assert_eq!(result.unwrap().invalid, 2);
    assert!(skipped(&events)[0].contains("dangling.txt"), "{events:?}");
}

#[test]
fn commit_every_two_commits_full_batches() {
    let tmp = tempfile::tempdir().unwrap();
    let (src, idx) = (tmp.path().join("src"), tmp.path().join("idx"));
    write_sources(&src, "Naps restore attention.");
    std::fs::write(src.join("c.txt"), "Walking lowers blood pressure.").unwrap();
    let mut writer = IndexWriter::open_or_create(&idx, Default::default()).unwrap();

    let (result, events) = add(&mut writer, &src, &options(2, false));
    assert_eq!(result.unwrap().added, 5);
    let commits: Vec<&String> = events
        .iter()
        .filter(|e| e.starts_with("committed"))
        .collect();
    assert_eq!(commits, ["committed 1 2", "committed 2 4"]);
    assert_eq!(Index::open(&idx).unwrap().len(), 4);
    assert_eq!(writer.pending(), 1);
}

#[test]
fn an_interrupt_after_a_commit_stops_before_the_next_document_and_keeps_that_commit() {
    let tmp = tempfile::tempdir().unwrap();
    let (src, idx) = (tmp.path().join("src"), tmp.path().join("idx"));
    write_sources(&src, "Naps restore attention.");
    let mut writer = IndexWriter::open_or_create(&idx, Default::default()).unwrap();

    // The user interrupts as the first batch (d1, d2) is committed.
    let mut interrupted = false;
    let result = add_files(
        &mut writer,
        walk(&[src.to_path_buf()]),
        &options(2, false),
        &mut |event| {
            interrupted |= matches!(event, AddEvent::Committed(_));
            match interrupted {
                true => ControlFlow::Break(()),
                false => ControlFlow::Continue(()),
            }
        },
    );
    let err = result.unwrap_err();
    match &err {
        Error::AddStopped {
            cause,
            kept: 2,
            before_adding: false,
        } => assert_eq!(cause.to_string(), "interrupted"),
        other => panic!("expected an interrupted AddStopped, got {other:?}"),
    }
    assert!(
        err.to_string()
            .contains("keeps its last commit, 2 documents"),
        "{err}"
    );
    assert_eq!(writer.pending(), 0, "nothing staged after the interrupt");
    drop(writer);
    let index = Index::open(&idx).unwrap();
    assert_eq!(index.len(), 2);
    assert!(index.document("d3").is_none());
}

#[test]
fn read_events_never_decrease_and_end_at_the_total() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    write_sources(&src, "Naps restore attention.");
    // Trailing blank lines send no item, so only the end of the file reports its last bytes.
    std::fs::write(
        src.join("z.jsonl"),
        line("z1", "Sleep and memory.") + "\n\n\n",
    )
    .unwrap();
    let total: u64 = walk(std::slice::from_ref(&src))
        .files
        .iter()
        .map(|f| f.bytes)
        .sum();
    let mut writer =
        IndexWriter::open_or_create(tmp.path().join("idx"), Default::default()).unwrap();

    let (result, events) = add(&mut writer, &src, &options(100, false));
    result.unwrap();
    let read: Vec<u64> = events
        .iter()
        .filter_map(|e| e.strip_prefix("read ")?.parse().ok())
        .collect();
    assert!(read.len() > 3, "{events:?}");
    assert!(read.windows(2).all(|w| w[0] <= w[1]), "{read:?}");
    assert_eq!(read.last(), Some(&total));
    assert!(
        read[..read.len() - 1].iter().all(|&b| b < total),
        "{read:?}"
    );
}
