//! lector-eval's lowercasing against Python's `str.lower()`, which the official SQuAD and ROUGE
//! scripts use: every code point, its lowercase and how it counts in the Final_Sigma context,
//! dumped by tools/unicode_lowercase_reference.py from the reference interpreter.
//!
//! rustc and Python may ship different Unicode versions (rustc 1.95: 17.0; Python 3.11: 14.0).
//! Code points that Python's version leaves unassigned may then differ, and so may the few whose
//! properties Unicode changed since (listed in `RECATEGORISED`); every other one must not. None of
//! them occurs in the SQuAD dev sets.

mod support;

use lector_eval::normalize::lowercase;
use lector_eval::squad::read_dataset;
use std::collections::{BTreeMap, BTreeSet};
use std::ops::RangeInclusive;

const SIGMA: char = '\u{3a3}';
const ALPHA: char = '\u{391}';
const FINAL_SIGMA: char = '\u{3c2}';

/// Assigned code points whose General_Category Unicode 16.0 changed, which changes how they count
/// for Final_Sigma: (code point, Unicode version of the change, what changed).
const RECATEGORISED: [(u32, &str, &str); 2] = [
    (0x0295, "16.0", "ʕ Ll -> Lo: no longer cased"),
    (
        0x1171E,
        "16.0",
        "Ahom medial ra Mn -> Mc: no longer case-ignorable",
    ),
];

/// A record kind and code point, with lector's and Python's values where they differ.
type Difference<'a> = (&'a (String, u32), Option<&'a String>, Option<&'a String>);

/// Python's answers: "lower"/"sigma" records by code point, and its unassigned ranges.
struct Reference {
    version: String,
    records: BTreeMap<(String, u32), String>,
    unassigned: Vec<RangeInclusive<u32>>,
}

fn hex(field: &str) -> u32 {
    u32::from_str_radix(field, 16).unwrap()
}

fn python_reference() -> Reference {
    let script = support::repo_root().join("tools/unicode_lowercase_reference.py");
    let dump = support::run_python(&script, &[]);
    let mut reference = Reference {
        version: String::new(),
        records: BTreeMap::new(),
        unassigned: Vec::new(),
    };
    for line in dump.lines() {
        let fields: Vec<&str> = line.split('\t').collect();
        match fields[..] {
            ["version", version] => reference.version = version.to_string(),
            ["unassigned", first, last] => reference.unassigned.push(hex(first)..=hex(last)),
            [kind, code_point, value] => {
                reference
                    .records
                    .insert((kind.to_string(), hex(code_point)), value.to_string());
            }
            _ => panic!("unexpected line {line:?}"),
        }
    }
    reference
}

/// Whether lowering `text` with lector gives a final sigma as its char number `at` (`None`: the last).
fn final_sigma_at(text: &str, at: Option<usize>) -> bool {
    let lowered = lowercase(text);
    let c = match at {
        Some(at) => lowered.chars().nth(at),
        None => lowered.chars().last(),
    };
    c == Some(FINAL_SIGMA)
}

/// The same records as the Python script, computed with lector's `lowercase`.
fn lector_records() -> BTreeMap<(String, u32), String> {
    let mut records = BTreeMap::new();
    for c in (0..=0x10FFFF).filter_map(char::from_u32) {
        let lowered = lowercase(&c.to_string());
        if lowered != c.to_string() {
            let hexes: Vec<String> = lowered.chars().map(|x| format!("{:x}", x as u32)).collect();
            records.insert(("lower".to_string(), c as u32), hexes.join("-"));
        }
        let probes = [
            final_sigma_at(&format!("{c}{SIGMA}"), None),
            final_sigma_at(&format!("{ALPHA}{c}{SIGMA}"), None),
            final_sigma_at(&format!("{ALPHA}{SIGMA}{c}"), Some(1)),
        ];
        if probes != [false, false, true] {
            let flags: Vec<&str> = probes.iter().map(|&p| if p { "1" } else { "0" }).collect();
            records.insert(("sigma".to_string(), c as u32), flags.join(" "));
        }
    }
    records
}

#[test]
fn lowercase_matches_python_on_every_code_point_python_assigns() {
    let reference = python_reference();
    let ours = lector_records();
    let keys: BTreeSet<&(String, u32)> = reference.records.keys().chain(ours.keys()).collect();
    let differing: Vec<Difference> = keys
        .into_iter()
        .map(|key| (key, ours.get(key), reference.records.get(key)))
        .filter(|(_, a, b)| a != b)
        .collect();
    let rust_version = char::UNICODE_VERSION;
    eprintln!(
        "Unicode: rustc {}.{}.{}, Python {}; {} records from Python, {} differ:",
        rust_version.0,
        rust_version.1,
        rust_version.2,
        reference.version,
        reference.records.len(),
        differing.len()
    );
    for (key, a, b) in &differing {
        eprintln!("  {} U+{:04X}: lector {a:?}, Python {b:?}", key.0, key.1);
    }
    let assigned_in_python = |c: u32| !reference.unassigned.iter().any(|r| r.contains(&c));
    let recategorised_since_python = |c: u32| {
        RECATEGORISED
            .iter()
            .any(|&(r, since, _)| r == c && version_below(&reference.version, since))
    };
    let unexplained: Vec<_> = differing
        .iter()
        .filter(|((_, c), _, _)| assigned_in_python(*c) && !recategorised_since_python(*c))
        .collect();
    assert!(
        unexplained.is_empty(),
        "lector differs from Python on code points assigned in both: {unexplained:?}"
    );
    assert!(
        reference.records.len() > 8_000,
        "the Python dump looks truncated"
    );
    assert_absent_from_squad(differing.iter().map(|((_, c), _, _)| *c));
}

/// Whether Unicode version `version` ("14.0.0") is older than `than` ("16.0").
fn version_below(version: &str, than: &str) -> bool {
    let parse = |v: &str| -> Vec<u32> { v.split('.').map(|n| n.parse().unwrap()).collect() };
    parse(version) < parse(than)
}

/// The code points where lector and Python differ appear nowhere in the SQuAD dev sets, so the
/// parity of `eval squad` there does not depend on the Python version.
fn assert_absent_from_squad(code_points: impl Iterator<Item = u32>) {
    let differing: BTreeSet<char> = code_points.filter_map(char::from_u32).collect();
    for relative in ["squad/dev-v1.1.json", "squad/dev-v2.0.json"] {
        // Parsed, not scanned raw: the files escape non-ASCII characters as \uXXXX.
        let dataset = read_dataset(&lector_eval::data::require(relative)).unwrap();
        let texts = dataset.questions.iter().flat_map(|q| {
            [q.context.as_ref(), q.question.as_str()]
                .into_iter()
                .chain(q.answers.iter().map(String::as_str))
        });
        let found: BTreeSet<char> = texts
            .flat_map(str::chars)
            .filter(|c| differing.contains(c))
            .collect();
        assert!(found.is_empty(), "{relative} contains {found:?}");
    }
}
