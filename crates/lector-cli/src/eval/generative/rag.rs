//! `lector eval generative --squad DATA.json --retrieve`: retrieval-augmented generation end to
//! end. The file's paragraphs are indexed (one document per paragraph, as `eval odqa` does), and
//! every question, SQuAD v2.0's unanswerable ones and `--withhold-every` ones included, is
//! answered from the top `--k` retrieved passages, shown in `--order`, fitted to the context
//! window, then checked (claims, citations). The figures and their definitions are
//! `lector_generate::evaluate::rag_figures`'; each comes with a percentile-bootstrap interval.
//!
//! Per-question rows (`--per-question`) carry `em`/`f1` by the SQuAD v2.0 rules (a refusal scores
//! 1 on an unanswerable question), and likewise `bertscore_f1` and `judge` (1 for a refusal on an
//! unanswerable question, else 0 there), so that `lector eval compare A B --metric f1` compares
//! two runs on every question; the report's `exact_match`, `f1`, `bertscore_f1` and
//! `judge_correctness` are over the answerable questions only.

use super::super::odqa as odqa_cli;
use super::GenerativeArgs;
use crate::search::{notify, RerankOptions, RetrievalOptions};
use crate::table::{fmt2, print_table};
use anyhow::{bail, Context, Result};
use clap::{Args, ValueEnum};
use lector_eval::bertscore::Item;
use lector_eval::squad::{Dataset, Question};
use lector_eval::stats::Bootstrap;
use lector_generate::evaluate::{self, ExtraScore, Figure, RagQuestion};
use lector_generate::grounded::{Answered, Passage, PassageOrder};
use lector_generate::judge::{Judge, Verdict};
use lector_generate::Generator;
use lector_index::Index;
use lector_models::bertscore::{BertScorer, ScoreOptions};
use lector_models::TokenEncoder;
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// The options of a retrieval-augmented run (all need `--retrieve`).
#[derive(Args)]
pub struct RagArgs {
    /// Retrieve the passages instead of giving the gold paragraph: index the file's paragraphs,
    /// keep unanswerable questions, answer from the top --k passages.
    #[arg(long, requires = "squad", conflicts_with = "closed_book")]
    pub retrieve: bool,
    /// Index directory the paragraphs are added to (kept afterwards) [default: a temporary one].
    #[arg(long, value_name = "DIR", requires = "retrieve")]
    index: Option<PathBuf>,
    /// Passages retrieved per question (fewer are shown when the context window is full).
    #[arg(value_parser = crate::values::at_least_one, long, default_value_t = 5, requires = "retrieve")]
    k: usize,
    /// Retrieval options (dense and hybrid embed the paragraphs).
    #[command(flatten)]
    retrieval: RetrievalOptions,
    #[command(flatten)]
    rerank: RerankOptions,
    /// How the shown passages are placed in the prompt.
    #[arg(long, value_enum, default_value_t = OrderArg::Edges, requires = "retrieve")]
    order: OrderArg,
    /// Keep the paragraphs of every N-th article out of the index, so that their questions ask
    /// for what the corpus does not hold (unanswerable, unless a gold answer appears in an
    /// indexed paragraph).
    #[arg(long, value_name = "N", requires = "retrieve", value_parser = crate::values::at_least_one)]
    withhold_every: Option<usize>,
    /// BERTScore F1 of the short answer against the golds with this encoder checkpoint
    /// (as `lector eval bertscore --model`, no idf, no baseline).
    #[arg(long, value_name = "DIR", requires = "retrieve")]
    bertscore_model: Option<PathBuf>,
    /// The encoder layer BERTScore matches [default: the last].
    #[arg(long, value_name = "N", requires = "bertscore_model")]
    bertscore_layer: Option<usize>,
    #[command(flatten)]
    pub judge: crate::generate::JudgeModelArgs,
    /// Let the judge (--judge-model or --judge-endpoint) also decide each claim of each answer
    /// against its passage, instead of the lexical claim checker: faithfulness, citations and
    /// unsupported answers are then the judge's.
    #[arg(long, requires = "retrieve")]
    judge_claims: bool,
    /// Bootstrap resamples for the intervals (seed 0: reproducible).
    #[arg(value_parser = crate::values::at_least_one, long, default_value_t = 1000)]
    resamples: usize,
    /// Confidence level of the intervals.
    #[arg(long, default_value_t = 0.95, value_parser = crate::eval::parse_confidence)]
    confidence: f64,
}

/// `--order` on the command line.
#[derive(Clone, Copy, ValueEnum)]
enum OrderArg {
    /// Strongest passages first and last ("lost in the middle" placement).
    Edges,
    /// Retrieval rank order.
    Rank,
}

impl From<OrderArg> for PassageOrder {
    fn from(o: OrderArg) -> PassageOrder {
        match o {
            OrderArg::Edges => PassageOrder::Edges,
            OrderArg::Rank => PassageOrder::Rank,
        }
    }
}

impl OrderArg {
    fn name(self) -> &'static str {
        match self {
            OrderArg::Edges => "edges",
            OrderArg::Rank => "rank",
        }
    }
}

/// What the run was over.
struct Setting {
    questions: usize,
    unanswerable: usize,
    withheld: usize,
    documents: usize,
    passages: usize,
    mode: &'static str,
    generator: String,
    seconds: f64,
    tokens_per_second: f64,
}

pub fn run(args: &GenerativeArgs) -> Result<()> {
    let rag = &args.rag;
    let path = args.squad.as_deref().context("--retrieve needs --squad")?;
    let (dataset, withheld, titles) =
        odqa_cli::squad_with_withheld(path, args.limit, rag.withhold_every)?;
    let (index_dir, _temp) = odqa_cli::squad_index_dir(rag.index.as_deref())?;
    let (documents, passages) =
        odqa_cli::index_paragraphs(path, &index_dir, &rag.retrieval, &titles)?;
    let index = Index::open(&index_dir)?;
    let (search, embedder) = rag.retrieval.config().resolve(&index, &notify)?;
    let retriever = index.retriever(&search, embedder.as_deref())?;
    let prompting = args.prompt.load()?;
    let options = args.generator.options_for(&prompting)?;
    let generator = args.generator.load()?;
    let order = PassageOrder::from(rag.order);
    let start = Instant::now();
    let bar = super::super::odqa::progress_bar(dataset.questions.len() as u64);
    bar.set_message("questions answered");
    let mut answered = evaluate::generate_retrieved(
        generator.as_ref(),
        &dataset,
        &mut |q: &Question| {
            crate::ask::passages_for(&rag.rerank, retriever.as_ref(), &q.question, rag.k)
        },
        &options,
        &prompting,
        order,
        &mut || bar.inc(1),
    )?;
    bar.finish_and_clear();
    let seconds = start.elapsed().as_secs_f64();
    let judge = rag.judge.load()?;
    let claims_checker = match (rag.judge_claims, &judge) {
        (false, _) => "lexical".to_string(),
        (true, Some(judge)) => judge_claims(judge.as_ref(), &dataset, &mut answered)?,
        (true, None) => bail!("--judge-claims needs --judge-model or --judge-endpoint"),
    };
    let generated: Vec<Answered> = answered.iter().map(|(_, a)| a.clone()).collect();
    let shorts = evaluate::short_answers(&generated);
    let (scores, rouge_l) = evaluate::score_answers(&dataset, &shorts)?;
    let verdicts = evaluate::equivalence(&dataset, &shorts);
    let equivalent: Vec<f64> = verdicts
        .iter()
        .map(|v| f64::from(u8::from(v.equivalent)))
        .collect();
    let key_fact: Vec<f64> = verdicts
        .iter()
        .map(|v| f64::from(u8::from(v.key_fact)))
        .collect();
    let rows: Vec<RagQuestion> = dataset
        .questions
        .iter()
        .zip(&answered)
        .map(|(q, (passages, a))| RagQuestion::new(q, passages, a, order))
        .collect();
    let bert = match &rag.bertscore_model {
        Some(dir) => Some(bertscore_f1(dir, rag.bertscore_layer, &dataset, &shorts)?),
        None => None,
    };
    let judged = match &judge {
        Some(judge) => Some(judge_correctness(judge.as_ref(), &dataset, &shorts)?),
        None => None,
    };
    let equivalence_judged = match &judge {
        Some(judge) => Some(super::judge_equivalence(judge.as_ref(), &dataset, &shorts)?),
        None => None,
    };
    // 1 for an answer the judge calls equivalent to a gold; unanswerable questions as for the
    // correctness judge (1 for a refusal).
    let judge_equivalent: Option<Vec<f64>> = equivalence_judged.as_ref().map(|(_, verdicts)| {
        let mut values = unanswerable_values(&dataset, &shorts);
        for (value, verdict) in values.iter_mut().zip(verdicts) {
            if let Some(v) = verdict {
                *value = f64::from(u8::from(*v == Verdict::Equivalent));
            }
        }
        values
    });
    let mut extra = vec![
        ExtraScore {
            name: "equivalent",
            values: &equivalent,
        },
        ExtraScore {
            name: "key_fact",
            values: &key_fact,
        },
    ];
    if let Some((_, values)) = &bert {
        extra.push(ExtraScore {
            name: "bertscore_f1",
            values,
        });
    }
    if let Some(j) = &judged {
        extra.push(ExtraScore {
            name: "judge_correctness",
            values: &j.values,
        });
    }
    if let Some(values) = &judge_equivalent {
        extra.push(ExtraScore {
            name: "judge_equivalent",
            values,
        });
    }
    let settings = Bootstrap {
        resamples: rag.resamples,
        confidence: rag.confidence,
        seed: 0,
    };
    let figures = evaluate::rag_figures(&rows, &scores, &extra, rag.k, &settings);
    if let Some(out) = &args.per_question {
        let mut lines = evaluate::per_question(&dataset, &generated, &scores, &rouge_l, &verdicts);
        for (i, line) in lines.iter_mut().enumerate() {
            add_rag_fields(line, &rows[i], &answered[i].0, &generated[i]);
            if let Some((_, values)) = &bert {
                line["bertscore_f1"] = values[i].into();
            }
            if let Some(j) = &judged {
                line["judge"] = j.values[i].into();
                line["judge_verdict"] = j.verdicts[i].map(Verdict::name).into();
            }
            if let Some((_, verdicts)) = &equivalence_judged {
                line["judge_equivalence"] = verdicts[i].map(Verdict::name).into();
            }
        }
        super::super::write_jsonl(out, &lines)?;
    }
    let setting = Setting {
        questions: dataset.questions.len(),
        unanswerable: rows.iter().filter(|r| !r.answerable).count(),
        withheld,
        documents,
        passages,
        mode: search.mode.name(),
        generator: generator.name(),
        seconds,
        tokens_per_second: evaluate::tokens_per_second(&generated),
    };
    let mut extras = Map::new();
    extras.insert("claims_checked_by".into(), claims_checker.into());
    if let Some((layer, _)) = &bert {
        let model = rag
            .bertscore_model
            .as_ref()
            .expect("BERTScore was asked for");
        extras.insert(
            "bertscore".into(),
            json!({"model": model.display().to_string(), "layer": layer}),
        );
    }
    if let Some(j) = &judged {
        extras.insert("judge".into(), j.summary());
    }
    if let Some((model, judged)) = &equivalence_judged {
        extras.insert(
            "judge_equivalence".into(),
            evaluate::judge_equivalence_summary(model, judged, &super::exact(&scores), &verdicts),
        );
    }
    report(args, &setting, &figures, &counts(&rows, &generated), extras)
}

/// What the prompt showed and what the answer cites, on a per-question row.
fn add_rag_fields(line: &mut Value, row: &RagQuestion, passages: &[Passage], a: &Answered) {
    let doc = |n: &usize| passages[n - 1].doc_id.clone();
    line["answerable"] = row.answerable.into();
    line["retrieved"] = passages
        .iter()
        .map(|p| p.doc_id.clone())
        .collect::<Vec<_>>()
        .into();
    line["shown"] = row.shown.clone().into();
    line["shown_doc_ids"] = row.shown.iter().map(doc).collect::<Vec<_>>().into();
    line["cut"] = row.cut.clone().into();
    line["truncated"] = a.prompt.as_ref().and_then(|p| p.truncated).into();
    line["gold_passages"] = row.gold_passages.clone().into();
    line["written_citations"] = row.written.clone().into();
    line["attributed_citations"] = row.attributed.clone().into();
    line["cites_gold"] = row.cites_gold().into();
    line["gold_shown"] = row.gold_shown().into();
}

/// Counts behind the figures.
fn counts(rows: &[RagQuestion], answered: &[Answered]) -> Vec<(&'static str, usize)> {
    let sum = |f: &dyn Fn(&RagQuestion) -> usize| rows.iter().map(f).sum::<usize>();
    let count = |f: &dyn Fn(&RagQuestion) -> bool| rows.iter().filter(|r| f(r)).count();
    vec![
        ("answerable", count(&|r| r.answerable)),
        ("unanswerable", count(&|r| !r.answerable)),
        ("refused", count(&|r| r.refused)),
        (
            "answerable_with_gold_shown",
            count(&|r| r.answerable && r.gold_shown()),
        ),
        ("passages_shown", sum(&|r| r.shown.len())),
        ("passages_cut", sum(&|r| r.cut.len())),
        (
            "passages_truncated",
            answered
                .iter()
                .filter(|a| a.prompt.as_ref().is_some_and(|p| p.truncated.is_some()))
                .count(),
        ),
        ("citations_written", sum(&|r| r.written.len())),
        ("citations_attributed", sum(&|r| r.attributed.len())),
        ("claims", sum(&|r| r.claims)),
        ("claims_supported", sum(&|r| r.supported_claims)),
    ]
}

/// BERTScore F1 of each short answer against its golds at `layer` (default the last), with the
/// layer used. Values for unanswerable questions: 1 for a refusal (empty short answer), else 0.
fn bertscore_f1(
    dir: &Path,
    layer: Option<usize>,
    dataset: &Dataset,
    shorts: &[&str],
) -> Result<(usize, Vec<f64>)> {
    let encoder = TokenEncoder::load(dir)
        .with_context(|| format!("cannot load the BERTScore encoder in {}", dir.display()))?;
    let layer = layer.unwrap_or(encoder.layers());
    let scorer =
        BertScorer::new(encoder, layer).with_context(|| format!("--bertscore-layer {layer}"))?;
    let answerable: Vec<usize> = (0..dataset.questions.len())
        .filter(|&i| dataset.questions[i].has_answer())
        .collect();
    let items: Vec<Item> = answerable
        .iter()
        .map(|&i| Item {
            id: dataset.questions[i].id.clone(),
            candidate: shorts[i].to_string(),
            references: dataset.questions[i].answers.clone(),
        })
        .collect();
    let scored = scorer.score(&items, &ScoreOptions::default(), &mut |_, _| {})?;
    let mut values: Vec<f64> = unanswerable_values(dataset, shorts);
    for (&i, s) in answerable.iter().zip(&scored.scores) {
        // An empty candidate scores NaN or 0 in the package; a refusal is simply wrong here.
        values[i] = if s.f1.is_finite() { s.f1 } else { 0.0 };
    }
    Ok((layer, values))
}

/// Per question: 1 for a refusal on an unanswerable question, 0 otherwise (answerable questions
/// are filled in by the scorer).
fn unanswerable_values(dataset: &Dataset, shorts: &[&str]) -> Vec<f64> {
    dataset
        .questions
        .iter()
        .zip(shorts)
        .map(|(q, s)| f64::from(u8::from(!q.has_answer() && s.is_empty())))
        .collect()
}

/// The judge's verdicts on the answerable questions' short answers, and per-question values.
struct Judged {
    model: String,
    /// Correct 1, partially correct 0.5, incorrect or unparseable 0; on unanswerable questions
    /// 1 for a refusal, else 0.
    values: Vec<f64>,
    /// `None`: not asked (an unanswerable question, or a refusal, counted incorrect).
    verdicts: Vec<Option<Verdict>>,
}

impl Judged {
    fn summary(&self) -> Value {
        let mut verdicts: BTreeMap<&str, usize> = BTreeMap::new();
        for v in self.verdicts.iter().flatten() {
            *verdicts.entry(v.name()).or_default() += 1;
        }
        json!({
            "model": self.model,
            "asked": self.verdicts.iter().flatten().count(),
            "verdicts": verdicts,
            "unparseable": verdicts.get("unparseable").copied().unwrap_or(0),
        })
    }
}

/// Asks the judge whether each answerable question's short answer is correct (a refusal is not
/// asked: it is incorrect).
fn judge_correctness(
    generator: &dyn Generator,
    dataset: &Dataset,
    shorts: &[&str],
) -> Result<Judged> {
    let judge = Judge::new(generator, crate::generate::judge_options())?;
    let mut values = unanswerable_values(dataset, shorts);
    let mut verdicts = vec![None; shorts.len()];
    let bar = super::super::odqa::progress_bar(dataset.questions.len() as u64);
    bar.set_message("answers judged");
    for (i, q) in dataset.questions.iter().enumerate() {
        bar.inc(1);
        if !q.has_answer() || shorts[i].is_empty() {
            continue;
        }
        let verdict = judge
            .correctness(&q.question, &q.answers, shorts[i])
            .with_context(|| format!("judging question {}", q.id))?
            .verdict;
        values[i] = match verdict {
            Verdict::Correct => 1.0,
            Verdict::PartiallyCorrect => 0.5,
            _ => 0.0,
        };
        verdicts[i] = Some(verdict);
    }
    bar.finish_and_clear();
    Ok(Judged {
        model: judge.model().to_string(),
        values,
        verdicts,
    })
}

/// Checks every answer's claims again with the judge deciding each; the judge's model.
fn judge_claims(
    generator: &dyn Generator,
    dataset: &Dataset,
    answered: &mut [(Vec<Passage>, Answered)],
) -> Result<String> {
    let judge = Judge::new(generator, crate::generate::judge_options())?;
    let bar = super::super::odqa::progress_bar(answered.len() as u64);
    bar.set_message("answers' claims judged");
    for (q, (passages, a)) in dataset.questions.iter().zip(answered.iter_mut()) {
        a.judge_claims(passages, &judge)
            .with_context(|| format!("judging the claims of question {}", q.id))?;
        bar.inc(1);
    }
    bar.finish_and_clear();
    Ok(format!("judge {}", judge.model()))
}

fn report(
    args: &GenerativeArgs,
    s: &Setting,
    figures: &[Figure],
    counts: &[(&str, usize)],
    extras: Map<String, Value>,
) -> Result<()> {
    let rag = &args.rag;
    if args.json {
        let mut out = json!({
            "questions": s.questions,
            "unanswerable": s.unanswerable,
            "withheld": s.withheld,
            "documents": s.documents,
            "passages": s.passages,
            "mode": s.mode,
            "k": rag.k,
            "order": rag.order.name(),
            "generator": s.generator,
            "seconds": s.seconds,
            "generated_tokens_per_second": s.tokens_per_second,
            "confidence": rag.confidence,
            "figures": figures.iter().map(|f| (f.name.clone(), json!(f))).collect::<Map<_, _>>(),
            "counts": counts.iter().map(|(n, c)| (n.to_string(), json!(c))).collect::<Map<_, _>>(),
        });
        for (key, value) in extras {
            out[key] = value;
        }
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(());
    }
    println!(
        "{} questions ({} unanswerable, {} of them withheld from the index) over {} documents \
         ({} passages); {}, k = {}, order {}; generator {} ({:.1} s, {:.1} generated tokens/s)",
        s.questions,
        s.unanswerable,
        s.withheld,
        s.documents,
        s.passages,
        s.mode,
        rag.k,
        rag.order.name(),
        s.generator,
        s.seconds,
        s.tokens_per_second
    );
    let ci = format!("{:.0}% CI", rag.confidence * 100.0);
    let rows: Vec<Vec<String>> = figures
        .iter()
        .map(|f| {
            let i = f.interval;
            vec![
                f.name.clone(),
                fmt2(i.mean),
                format!("[{}, {}]", fmt2(i.low), fmt2(i.high)),
                f.n.to_string(),
            ]
        })
        .collect();
    print_table(&["metric (%)", "value", &ci, "n"], &rows);
    println!();
    let rows: Vec<Vec<String>> = counts
        .iter()
        .map(|(name, c)| vec![name.to_string(), c.to_string()])
        .collect();
    print_table(&["count", "n"], &rows);
    for (key, value) in extras {
        println!("{key}: {value}");
    }
    Ok(())
}
