//! Which logged question to label next.
//!
//! Only asks not yet labelled are offered, one per question: questions are deduplicated by
//! their normalised text ([`normalise_question`]), and a question labelled once (under any
//! request id) is not offered again. Questions skipped earlier come after all the others, the
//! longest-skipped first, so skipping again walks through them instead of repeating one.

use super::store::{Label, LabelVerdict};
use crate::{AskRecord, Entry, Verdict};
use std::cmp::Ordering;
use std::collections::{HashMap, HashSet};

/// The seed of `random` when the request names none.
pub const DEFAULT_SEED: u64 = 0x1ec7_0a5e;

/// How the next question is chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sample {
    /// Active learning: the ask the system was least sure about first ([`margin`]).
    Uncertain,
    /// Asks a user voted down first (the newest vote first), then the rest as
    /// [`Sample::Uncertain`].
    DownVoted,
    /// A shuffle fixed by the seed: an unbiased sample of the traffic, for estimating accuracy.
    Random { seed: u64 },
}

impl Sample {
    /// `uncertain`, `down-voted` or `random` (with `seed`, else [`DEFAULT_SEED`]).
    pub fn parse(name: &str, seed: Option<u64>) -> Result<Self, String> {
        match (name, seed) {
            ("uncertain", None) => Ok(Sample::Uncertain),
            ("down-voted", None) => Ok(Sample::DownVoted),
            ("random", seed) => Ok(Sample::Random {
                seed: seed.unwrap_or(DEFAULT_SEED),
            }),
            ("uncertain" | "down-voted", Some(_)) => Err(format!(
                "`seed` only applies to sample=random, not `{name}`"
            )),
            _ => Err(format!(
                "unknown sample `{name}`: expected uncertain, down-voted or random"
            )),
        }
    }

    /// The name [`Sample::parse`] reads.
    pub fn name(self) -> &'static str {
        match self {
            Sample::Uncertain => "uncertain",
            Sample::DownVoted => "down-voted",
            Sample::Random { .. } => "random",
        }
    }
}

/// How close an ask came to a different outcome, in log-odds; the smaller, the more a label
/// teaches.
///
/// Two things can flip an extractive answer: the no-answer probability crossing the threshold
/// (answer ↔ abstain), and a rival overtaking the answer (one span ↔ another). The margin is
/// the smaller of the two distances: between `na_prob` and the threshold, and between the top
/// candidate's score and its best rival's. This is margin sampling, the classic active-learning
/// choice: labels near a decision boundary move a model most, and the reader's own scores are
/// all the log has.
///
/// - Both distances are taken in log-odds (`ln(p / (1 - p))`), not as plain differences of
///   probabilities. A candidate's score is the logistic of its log-odds against "no answer",
///   and confident scores saturate: on the bundled sample, the answer "Denver linebacker Von
///   Miller" scores 0.9999998 and its rival "Cam Newton" 0.9999985, a gap of 1e-6 that says
///   nothing, while their log-odds (15.5 and 13.4) are clearly apart. Log-odds also put both distances on one scale.
/// - A rival is a runner-up that is a different answer: one whose text contains the top
///   candidate's or is contained in it ("Von Miller" under "Denver linebacker Von Miller") is
///   the same answer with other boundaries and scores about the same.
/// - When the server abstained, the top candidate is the best runner-up, so an abstention whose
///   two best candidates were close counts as uncertain too, even far from the threshold.
/// - Probabilities are kept within 1e-12 of 0 and 1, so certainty is a large finite distance
///   (with `vote`, scores are sums above 1 and all sit at that bound). Asks with neither
///   distance (generative asks) have an infinite margin and come last.
pub fn margin(ask: &AskRecord) -> f64 {
    let threshold_gap = match (ask.na_prob, ask.threshold) {
        (Some(p), Some(t)) => (logit(p) - logit(t)).abs(),
        _ => f64::INFINITY,
    };
    let answer = ask
        .answer
        .as_ref()
        .and_then(|a| Some((a.text.as_str(), a.score?)));
    let mut candidates = answer
        .into_iter()
        .chain(ask.runner_ups.iter().map(|c| (c.text.as_str(), c.score)));
    let score_gap = match candidates.next() {
        Some((text, top)) => {
            let top_text = normalise_question(text);
            candidates
                .find(|(other, _)| !same_answer(&top_text, &normalise_question(other)))
                .map_or(f64::INFINITY, |(_, rival)| {
                    (logit(top) - logit(rival)).abs()
                })
        }
        None => f64::INFINITY,
    };
    threshold_gap.min(score_gap)
}

/// `ln(p / (1 - p))`, with `p` kept within 1e-12 of 0 and 1.
fn logit(p: f64) -> f64 {
    let p = p.clamp(1e-12, 1.0 - 1e-12);
    (p / (1.0 - p)).ln()
}

/// Whether two normalised answer texts are one answer with different boundaries.
fn same_answer(a: &str, b: &str) -> bool {
    a.contains(b) || b.contains(a)
}

/// The question as compared for duplicates: lowercase, runs of anything but letters and digits
/// as one space, trimmed ("Who won  Super Bowl 50?" and "who won super bowl 50" are one).
pub fn normalise_question(question: &str) -> String {
    let mut out = String::with_capacity(question.len());
    let mut gap = false;
    for c in question.chars().flat_map(char::to_lowercase) {
        if c.is_alphanumeric() {
            if gap && !out.is_empty() {
                out.push(' ');
            }
            gap = false;
            out.push(c);
        } else {
            gap = true;
        }
    }
    out
}

/// The asks left to label, in the order to label them.
#[derive(Debug, Default)]
pub struct Queue<'a> {
    /// Neither labelled nor skipped, in the sample's order.
    pub fresh: Vec<&'a AskRecord>,
    /// Skipped earlier, the longest-skipped first.
    pub skipped: Vec<&'a AskRecord>,
}

impl<'a> Queue<'a> {
    /// The ask to label next.
    pub fn next(&self) -> Option<&'a AskRecord> {
        self.fresh.first().or(self.skipped.first()).copied()
    }

    /// Asks left, skipped ones included.
    pub fn len(&self) -> usize {
        self.fresh.len() + self.skipped.len()
    }

    /// Whether every logged question is labelled.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The asks of `entries` (the log, oldest first) still to label after `labels` (the last label
/// of each request id, oldest first), ordered by `sample`.
pub fn order<'a, I>(entries: I, labels: &[&Label], sample: Sample) -> Queue<'a>
where
    I: IntoIterator<Item = &'a Entry>,
    I::IntoIter: Clone,
{
    let entries = entries.into_iter();
    let done = Decisions::of(labels);
    let down = down_votes(entries.clone());
    let key = |position: usize, ask: &AskRecord| SortKey {
        down: match sample {
            // Only a vote from the ask's own tenant counts (see `FeedbackRecord::judges`).
            Sample::DownVoted => down
                .get(&(ask.request_id.as_str(), ask.settings.tenant.as_deref()))
                .copied(),
            _ => None,
        },
        random: match sample {
            Sample::Random { seed } => shuffle_key(seed, &ask.request_id),
            _ => 0,
        },
        margin: margin(ask),
        position,
    };
    // Each ask's key and normalised question are made once, not at every comparison.
    let mut asks: Vec<(SortKey, String, &AskRecord)> = entries
        .enumerate()
        .filter_map(|(position, e)| match e {
            Entry::Ask(ask) if !ask.question.trim().is_empty() => Some((position, ask)),
            _ => None,
        })
        .filter_map(|(position, ask)| {
            let question = normalise_question(&ask.question);
            let open = !done.decided(ask, &question);
            open.then(|| (key(position, ask), question, ask))
        })
        .collect();
    asks.sort_by(|a, b| a.0.cmp(&b.0));
    let mut seen = HashSet::new();
    let mut queue = Queue::default();
    let mut skipped = Vec::new();
    for (_, question, ask) in asks {
        let skip = done.skipped.get(&question).copied();
        if !seen.insert(question) {
            continue;
        }
        match skip {
            Some(rank) => skipped.push((rank, ask)),
            None => queue.fresh.push(ask),
        }
    }
    // Stable: among questions skipped together, the sample's order stays.
    skipped.sort_by_key(|&(rank, _)| rank);
    queue.skipped = skipped.into_iter().map(|(_, ask)| ask).collect();
    queue
}

/// What the labels decided, by request id and by normalised question.
struct Decisions {
    ids: HashSet<String>,
    questions: HashSet<String>,
    /// Skipped questions, and when (the rank of their last skip among the labels).
    skipped: HashMap<String, usize>,
}

impl Decisions {
    fn of(labels: &[&Label]) -> Self {
        let mut decisions = Decisions {
            ids: HashSet::new(),
            questions: HashSet::new(),
            skipped: HashMap::new(),
        };
        for (rank, label) in labels.iter().enumerate() {
            let question = normalise_question(&label.question);
            match label.verdict {
                LabelVerdict::Skip => {
                    decisions.skipped.insert(question, rank);
                }
                LabelVerdict::Answer | LabelVerdict::Unanswerable => {
                    decisions.ids.insert(label.request_id.clone());
                    decisions.questions.insert(question);
                }
            }
        }
        decisions
    }

    /// Whether `ask`, whose normalised question is `question`, is labelled.
    fn decided(&self, ask: &AskRecord, question: &str) -> bool {
        self.ids.contains(&ask.request_id) || self.questions.contains(question)
    }
}

/// Down votes by request id and the voter's tenant, with the log position of the last one.
fn down_votes<'a>(
    entries: impl Iterator<Item = &'a Entry>,
) -> HashMap<(&'a str, Option<&'a str>), usize> {
    let mut down = HashMap::new();
    for (i, entry) in entries.enumerate() {
        if let Entry::Feedback(f) = entry {
            if f.verdict == Verdict::Down {
                down.insert((f.request_id.as_str(), f.tenant.as_deref()), i);
            }
        }
    }
    down
}

/// The order of asks: down-voted first (the newest vote first), then the seeded shuffle, then
/// the smallest margin, then the newest ask.
struct SortKey {
    down: Option<usize>,
    random: u64,
    margin: f64,
    position: usize,
}

impl SortKey {
    fn cmp(&self, other: &Self) -> Ordering {
        let down = match (self.down, other.down) {
            (Some(a), Some(b)) => b.cmp(&a),
            (Some(_), None) => Ordering::Less,
            (None, Some(_)) => Ordering::Greater,
            (None, None) => Ordering::Equal,
        };
        down.then(self.random.cmp(&other.random))
            .then(self.margin.total_cmp(&other.margin))
            .then(other.position.cmp(&self.position))
    }
}

/// A position in the shuffle that depends only on the seed and the request id, so an ask
/// keeps its place while the others get labelled.
fn shuffle_key(seed: u64, request_id: &str) -> u64 {
    // FNV-1a of the id, then SplitMix64's finaliser over it and the seed.
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in request_id.bytes() {
        hash = (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3);
    }
    let mut z = hash ^ seed.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::{FeedbackRecord, LoggedAnswer, LoggedCandidate};

    /// An extractive ask: answered with `score` when given, else abstained.
    pub(crate) fn ask(id: &str, question: &str, na_prob: f64, scores: &[f64]) -> AskRecord {
        let (answer, runner_ups) = match scores.split_first() {
            Some((top, rest)) if na_prob < 0.5 => (
                Some(LoggedAnswer {
                    text: "answer".into(),
                    score: Some(*top),
                    doc_id: Some("d".into()),
                    passage: Some(0),
                    start: Some(0),
                    end: Some(1),
                }),
                rest,
            ),
            _ => (None, scores),
        };
        AskRecord {
            abstention: answer.is_none().then(|| "below_threshold".into()),
            answer,
            na_prob: Some(na_prob),
            confidence: Some(1.0 - na_prob),
            runner_ups: runner_ups
                .iter()
                .zip(["alpha", "bravo", "charlie", "delta"])
                .map(|(&score, text)| LoggedCandidate {
                    text: text.into(),
                    score,
                    doc_id: "d".into(),
                })
                .collect(),
            ..crate::record::abstained_ask(id, question)
        }
    }

    pub(crate) fn feedback(id: &str, verdict: Verdict) -> Entry {
        Entry::Feedback(FeedbackRecord {
            time: "2026-12-02T13:00:01.000Z".into(),
            request_id: id.into(),
            verdict,
            correct_answer: None,
            note: None,
            tenant: None,
        })
    }

    fn label(id: &str, question: &str, verdict: LabelVerdict) -> Label {
        Label {
            time: "2026-12-02T14:00:00.000Z".into(),
            request_id: id.into(),
            question: question.into(),
            verdict,
            doc_id: None,
            start: None,
            end: None,
            text: None,
        }
    }

    fn ids(queue: &Queue) -> (Vec<String>, Vec<String>) {
        let names = |asks: &[&AskRecord]| asks.iter().map(|a| a.request_id.clone()).collect();
        (names(&queue.fresh), names(&queue.skipped))
    }

    /// Margins in log-odds: c 0.04 (a close runner-up despite a confident answer), e 0.06 (near
    /// the threshold), d 0.10 (an abstention whose two candidates are close), a 0.20, b 1.39.
    fn log() -> Vec<Entry> {
        vec![
            Entry::Ask(ask("a", "Who won?", 0.45, &[0.9, 0.1])),
            Entry::Ask(ask("b", "Where is it?", 0.2, &[0.8, 0.5])),
            Entry::Ask(ask("c", "When was it?", 0.01, &[0.6, 0.59])),
            Entry::Ask(ask("d", "Why?", 0.99, &[0.3, 0.28])),
            Entry::Ask(ask("e", "who  WON", 0.485, &[0.9])),
        ]
    }

    #[test]
    fn margins_take_the_closer_of_threshold_and_runner_up() {
        let m = |id: &str| {
            let entries = log();
            let ask = entries.iter().find_map(|e| match e {
                Entry::Ask(a) if a.request_id == id => Some(a.clone()),
                _ => None,
            });
            margin(&ask.unwrap())
        };
        let l = |p: f64| (p / (1.0 - p)).ln();
        let close = |a: f64, b: f64| (a - b).abs() < 1e-9;
        assert!(close(m("a"), l(0.5) - l(0.45)), "the threshold: {}", m("a"));
        assert!(close(m("b"), l(0.5) - l(0.2)), "{}", m("b"));
        assert!(
            close(m("c"), l(0.6) - l(0.59)),
            "a close runner-up: {}",
            m("c")
        );
        assert!(
            close(m("d"), l(0.3) - l(0.28)),
            "an abstention with a close runner-up: {}",
            m("d")
        );
        assert!(close(m("e"), l(0.5) - l(0.485)), "no runner-up: {}", m("e"));
        // Saturated scores stay apart in log-odds.
        let sure = ask("s", "Who?", 1e-7, &[0.999_999_8, 0.999_998_5]);
        assert!(close(margin(&sure), l(0.999_999_8) - l(0.999_998_5)));
        assert!(margin(&sure) > 1.0, "{}", margin(&sure));
    }

    #[test]
    fn a_runner_up_overlapping_the_answer_is_no_rival() {
        let l = |p: f64| (p / (1.0 - p)).ln();
        let mut record = ask("v", "Who was the MVP?", 0.001, &[0.99, 0.98, 0.6]);
        record.answer.as_mut().unwrap().text = "Denver linebacker Von Miller".into();
        record.runner_ups[0].text = "Von Miller".into();
        // The rival is "bravo" (0.6).
        let expected = l(0.99) - l(0.6);
        assert!(
            (margin(&record) - expected).abs() < 1e-9,
            "{}",
            margin(&record)
        );
        record.runner_ups[0].text = "Jim Miller".into();
        assert!((margin(&record) - (l(0.99) - l(0.98))).abs() < 1e-9);
    }

    #[test]
    fn uncertain_orders_by_margin_and_keeps_one_ask_per_question() {
        let entries = log();
        let queue = order(&entries, &[], Sample::Uncertain);
        // e ("who WON") and a ("Who won?") are one question: the closer, e, stays.
        assert_eq!(ids(&queue).0, ["c", "e", "d", "b"]);
        assert!(queue.skipped.is_empty());
    }

    #[test]
    fn labelled_questions_go_and_skipped_ones_come_last_longest_skipped_first() {
        let entries = log();
        let labels = [
            label("c", "When was it?", LabelVerdict::Skip),
            label("d", "why", LabelVerdict::Skip),
            // Labelling a answers its duplicate e too.
            label("a", "Who won?", LabelVerdict::Answer),
        ];
        let refs: Vec<&Label> = labels.iter().collect();
        let queue = order(&entries, &refs, Sample::Uncertain);
        assert_eq!(
            ids(&queue),
            (vec!["b".into()], vec!["c".into(), "d".into()])
        );
        assert_eq!(queue.next().unwrap().request_id, "b");
        assert_eq!(queue.len(), 3);
        // Skipping c again sends it behind d.
        let again = [labels[0].clone(), labels[1].clone(), labels[0].clone()];
        let latest = crate::label::store::latest(&again);
        assert_eq!(
            ids(&order(&entries, &latest, Sample::Uncertain)).1,
            ["d", "c"]
        );
    }

    #[test]
    fn down_voted_asks_come_first_newest_vote_first() {
        let mut entries = log();
        entries.push(feedback("b", Verdict::Down));
        entries.push(feedback("c", Verdict::Up));
        entries.push(feedback("a", Verdict::Down));
        let queue = order(&entries, &[], Sample::DownVoted);
        // a's vote is the newest; the rest by margin (e is a's duplicate and drops out).
        assert_eq!(ids(&queue).0, ["a", "b", "c", "d"]);
    }

    #[test]
    fn random_is_fixed_by_the_seed_and_stable_as_asks_get_labelled() {
        let entries: Vec<Entry> = (0..40)
            .map(|i| Entry::Ask(ask(&format!("r{i}"), &format!("question {i}"), 0.3, &[])))
            .collect();
        let shuffled = |seed| ids(&order(&entries, &[], Sample::Random { seed })).0;
        assert_eq!(shuffled(7), shuffled(7));
        assert_ne!(shuffled(7), shuffled(8));
        let logged: Vec<String> = (0..40).map(|i| format!("r{i}")).collect();
        assert_ne!(shuffled(7), logged, "not the log order");
        let mut sorted = shuffled(7);
        sorted.sort();
        let mut expected = logged.clone();
        expected.sort();
        assert_eq!(sorted, expected, "a permutation");
        // Labelling the first leaves the others in their order.
        let first = shuffled(7)[0].clone();
        let labels = [label(
            &first,
            &format!("question {}", &first[1..]),
            LabelVerdict::Answer,
        )];
        let refs: Vec<&Label> = labels.iter().collect();
        let rest = ids(&order(&entries, &refs, Sample::Random { seed: 7 })).0;
        assert_eq!(rest, shuffled(7)[1..]);
    }

    #[test]
    fn parses_sample_names() {
        assert_eq!(Sample::parse("uncertain", None), Ok(Sample::Uncertain));
        assert_eq!(
            Sample::parse("random", None),
            Ok(Sample::Random { seed: DEFAULT_SEED })
        );
        assert_eq!(
            Sample::parse("random", Some(3)),
            Ok(Sample::Random { seed: 3 })
        );
        assert!(Sample::parse("down-voted", Some(3)).is_err());
        assert!(Sample::parse("newest", None)
            .unwrap_err()
            .contains("uncertain, down-voted or random"));
        assert_eq!(
            normalise_question("  Who won\tSuper-Bowl 50?! "),
            "who won super bowl 50"
        );
        assert_eq!(normalise_question("Où est Zürich ?"), "où est zürich");
    }
}
