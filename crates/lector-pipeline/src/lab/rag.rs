//! `lector eval generative --squad DATA.json --retrieve` as a run: retrieval-augmented
//! generation end to end. The file's paragraphs are indexed (one document per paragraph, as `eval
//! odqa` does), and every question, SQuAD v2.0's unanswerable ones and withheld ones included, is
//! answered from the top `k` retrieved passages, shown in `order`, fitted to the context window,
//! then checked (claims, citations). The figures and their definitions are
//! `lector_generate::evaluate::rag_figures`'; each comes with a percentile-bootstrap interval.
//!
//! Per-question records carry `em`/`f1` by the SQuAD v2.0 rules (a refusal scores 1 on an
//! unanswerable question), and likewise `bertscore_f1` and `judge` (1 for a refusal on an
//! unanswerable question, else 0 there), so that `eval compare A B --metric f1` compares two runs
//! on every question; the report's `exact_match`, `f1`, `bertscore_f1` and `judge_correctness`
//! are over the answerable questions only.

use crate::config::Reranker;
use crate::{odqa, Error, RerankConfig, Result, RetrievalConfig};
use lector_eval::bertscore::Item;
use lector_eval::squad::{Dataset, Question};
use lector_eval::stats::Bootstrap;
use lector_generate::evaluate::{self, ExtraScore, Figure, RagQuestion};
use lector_generate::grounded::{Answered, Passage, PassageOrder};
use lector_generate::judge::{self, Judge, Verdict};
use lector_generate::prompt::Prompting;
use lector_generate::{GenerateOptions, Generator};
use lector_index::{Index, Retriever};
use lector_models::bertscore::{BertScorer, ScoreOptions};
use lector_models::TokenEncoder;
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// How a retrieval-augmented run retrieves, shows and scores.
#[derive(Debug, Clone)]
pub struct Options {
    /// Only the first N questions.
    pub limit: Option<usize>,
    /// Keep the paragraphs of every N-th article out of the index, so that their questions ask
    /// for what the corpus does not hold ([`odqa::withhold_articles`]).
    pub withhold_every: Option<usize>,
    /// Passages retrieved per question (fewer are shown when the context window is full).
    pub k: usize,
    /// How the shown passages are placed in the prompt.
    pub order: PassageOrder,
    /// How passages are retrieved (dense and hybrid embed the paragraphs).
    pub retrieval: RetrievalConfig,
    /// A cross-encoder that reorders the retrieved passages.
    pub rerank: Option<RerankConfig>,
    /// BERTScore F1 of each short answer against its golds with this encoder.
    pub bertscore: Option<BertScoreModel>,
    /// Let the judge decide each claim against its passage instead of the lexical checker.
    pub judge_claims: bool,
    /// The intervals' resampling.
    pub bootstrap: Bootstrap,
}

/// The encoder BERTScore matches tokens with (no idf, no baseline).
#[derive(Debug, Clone)]
pub struct BertScoreModel {
    /// Its checkpoint directory.
    pub dir: PathBuf,
    /// The layer matched; `None`: the last.
    pub layer: Option<usize>,
}

/// The models a run answers and judges with.
pub struct Models<'a> {
    /// Writes the answers.
    pub generator: &'a dyn Generator,
    /// How it decodes.
    pub generation: &'a GenerateOptions,
    /// The prompt (and few-shot examples).
    pub prompting: &'a Prompting,
    /// A judge of correctness and equivalence (and of claims, with `judge_claims`).
    pub judge: Option<&'a dyn Generator>,
}

/// What a run is busy with, for progress.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Questions answered.
    Answer,
    /// Answers whose claims the judge decided.
    JudgeClaims,
    /// Answers the judge called correct or not.
    JudgeCorrectness,
    /// Answers the judge compared with the golds.
    JudgeEquivalence,
}

impl Step {
    /// What the count counts, for a progress bar.
    pub fn name(self) -> &'static str {
        match self {
            Step::Answer => "questions answered",
            Step::JudgeClaims => "answers' claims judged",
            Step::JudgeCorrectness => "answers judged",
            Step::JudgeEquivalence => "answers judged for equivalence",
        }
    }
}

/// A run's report: the setting, the figures with intervals, the counts behind them, what the
/// optional scorers used, and every question's record.
#[derive(Debug, Clone)]
pub struct Report {
    pub questions: usize,
    pub unanswerable: usize,
    /// Questions made unanswerable by `withhold_every`.
    pub withheld: usize,
    pub documents: usize,
    pub passages: usize,
    /// The retrieval mode's name.
    pub mode: &'static str,
    pub k: usize,
    pub order: PassageOrder,
    pub generator: String,
    /// Seconds spent answering (not judging).
    pub seconds: f64,
    pub generated_tokens_per_second: f64,
    pub confidence: f64,
    pub figures: Vec<Figure>,
    pub counts: Vec<(&'static str, usize)>,
    /// `claims_checked_by`, and `bertscore`, `judge`, `judge_equivalence` when they ran.
    pub extras: Map<String, Value>,
    /// One record per question.
    pub per_question: Vec<Value>,
}

impl Report {
    /// The report as `lector eval generative --retrieve --json` prints it (without the
    /// per-question records).
    pub fn to_json(&self) -> Value {
        let mut out = json!({
            "questions": self.questions,
            "unanswerable": self.unanswerable,
            "withheld": self.withheld,
            "documents": self.documents,
            "passages": self.passages,
            "mode": self.mode,
            "k": self.k,
            "order": self.order.name(),
            "generator": self.generator,
            "seconds": self.seconds,
            "generated_tokens_per_second": self.generated_tokens_per_second,
            "confidence": self.confidence,
            "figures": self.figures.iter().map(|f| (f.name.clone(), json!(f))).collect::<Map<_, _>>(),
            "counts": self.counts.iter().map(|(n, c)| (n.to_string(), json!(c))).collect::<Map<_, _>>(),
        });
        for (key, value) in &self.extras {
            out[key] = value.clone();
        }
        out
    }
}

/// Runs the questions of the SQuAD file `squad` over its paragraphs, added to the index at
/// `index_dir` (created when missing); `progress` gets (step, done, total). `notify` hears of
/// models being fetched.
pub fn run(
    squad: &Path,
    index_dir: &Path,
    options: &Options,
    models: &Models<'_>,
    notify: &dyn Fn(&str),
    progress: &mut dyn FnMut(Step, usize, usize),
) -> Result<Report> {
    options.check()?;
    models.generation.validate()?;
    if options.judge_claims && models.judge.is_none() {
        return Err(Error::Options("judging claims needs a judge model".into()));
    }
    let (dataset, withheld, titles) =
        odqa::squad_with_withheld(squad, options.limit, options.withhold_every)?;
    let (documents, passages) =
        odqa::index_squad_for(squad, index_dir, &options.retrieval, &titles, notify)?;
    let index = Index::open(index_dir)?;
    let (search, embedder) = options.retrieval.resolve(&index, notify)?;
    let retriever = index.retriever(&search, embedder.as_deref())?;
    let reranker = match &options.rerank {
        Some(rerank) => Some((rerank.load()?, rerank.depth)),
        None => None,
    };
    let total = dataset.questions.len();
    let start = Instant::now();
    let mut done = 0;
    let mut answered = evaluate::generate_retrieved(
        models.generator,
        &dataset,
        &mut |q: &Question| passages_for(retriever.as_ref(), reranker.as_ref(), q, options.k),
        models.generation,
        models.prompting,
        options.order,
        &mut || {
            done += 1;
            progress(Step::Answer, done, total)
        },
    )?;
    let seconds = start.elapsed().as_secs_f64();
    let claims_checked_by = match (options.judge_claims, models.judge) {
        (true, Some(judge)) => judge_claims(judge, &dataset, &mut answered, progress)?,
        _ => "lexical".to_string(),
    };
    let generated: Vec<Answered> = answered.iter().map(|(_, a)| a.clone()).collect();
    let shorts = evaluate::short_answers(&generated);
    let (scores, rouge_l) = evaluate::score_answers(&dataset, &shorts)?;
    let verdicts = evaluate::equivalence(&dataset, &shorts);
    let rows: Vec<RagQuestion> = dataset
        .questions
        .iter()
        .zip(&answered)
        .map(|(q, (passages, a))| RagQuestion::new(q, passages, a, options.order))
        .collect();
    let bert = match &options.bertscore {
        Some(model) => Some(bertscore_f1(model, &dataset, &shorts)?),
        None => None,
    };
    let judged = match models.judge {
        Some(judge) => Some(judge_correctness(judge, &dataset, &shorts, progress)?),
        None => None,
    };
    let equivalence_judged = match models.judge {
        Some(judge) => Some(super::generative::judge_equivalence(
            judge,
            &dataset,
            &shorts,
            &mut |done, total| progress(Step::JudgeEquivalence, done, total),
        )?),
        None => None,
    };
    let judge_equivalent = equivalence_judged
        .as_ref()
        .map(|(_, verdicts)| equivalence_values(&dataset, &shorts, verdicts));
    let indicators = |pick: fn(&lector_eval::equivalence::Verdict) -> bool| -> Vec<f64> {
        verdicts
            .iter()
            .map(|v| f64::from(u8::from(pick(v))))
            .collect()
    };
    let equivalent = indicators(|v| v.equivalent);
    let key_fact = indicators(|v| v.key_fact);
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
    let figures = evaluate::rag_figures(&rows, &scores, &extra, options.k, &options.bootstrap);
    let mut per_question =
        evaluate::per_question(&dataset, &generated, &scores, &rouge_l, &verdicts);
    for (i, line) in per_question.iter_mut().enumerate() {
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
    let mut extras = Map::new();
    extras.insert("claims_checked_by".into(), claims_checked_by.into());
    if let (Some((layer, _)), Some(model)) = (&bert, &options.bertscore) {
        extras.insert(
            "bertscore".into(),
            json!({"model": model.dir.display().to_string(), "layer": layer}),
        );
    }
    if let Some(j) = &judged {
        extras.insert("judge".into(), j.summary());
    }
    if let Some((model, judged)) = &equivalence_judged {
        extras.insert(
            "judge_equivalence".into(),
            evaluate::judge_equivalence_summary(
                model,
                judged,
                &super::generative::exact(&scores),
                &verdicts,
            ),
        );
    }
    Ok(Report {
        questions: dataset.questions.len(),
        unanswerable: rows.iter().filter(|r| !r.answerable).count(),
        withheld,
        documents,
        passages,
        mode: search.mode.name(),
        k: options.k,
        order: options.order,
        generator: models.generator.name(),
        seconds,
        generated_tokens_per_second: evaluate::tokens_per_second(&generated),
        confidence: options.bootstrap.confidence,
        figures,
        counts: counts(&rows, &generated),
        extras,
        per_question,
    })
}

impl Options {
    /// Refuses options no run can use (`k` or `withhold_every` 0, no resamples, a confidence
    /// outside (0, 1)), naming the option.
    pub fn check(&self) -> Result<()> {
        let invalid = |m: &str| Err(Error::Options(m.into()));
        let options = self;
        if options.k == 0 {
            return invalid("k must be at least 1");
        }
        if options.withhold_every == Some(0) {
            return invalid("withhold_every must be at least 1");
        }
        options.bootstrap.check().map_err(Error::Options)
    }
}

/// The top `k` passages for `question`, reranked from the depth when a reranker is given, as
/// the generator takes them.
fn passages_for(
    retriever: &dyn Retriever,
    reranker: Option<&(Reranker, usize)>,
    question: &Question,
    k: usize,
) -> Result<Vec<Passage>> {
    let hits = match reranker {
        Some((reranker, depth)) => reranker.retrieve(retriever, *depth, &question.question, k)?,
        None => retriever.retrieve(&question.question, k)?,
    };
    Ok(hits.iter().map(crate::generative::passage_of).collect())
}

/// What the prompt showed and what the answer cites, on a per-question record.
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

/// BERTScore F1 of each short answer against its golds, with the layer used. Values for
/// unanswerable questions: 1 for a refusal (empty short answer), else 0.
fn bertscore_f1(
    model: &BertScoreModel,
    dataset: &Dataset,
    shorts: &[&str],
) -> Result<(usize, Vec<f64>)> {
    let model_error = |e: lector_models::Error| Error::Model {
        what: "BERTScore encoder",
        path: model.dir.clone(),
        message: e.to_string(),
    };
    let encoder = TokenEncoder::load(&model.dir).map_err(model_error)?;
    let layer = model.layer.unwrap_or(encoder.layers());
    let scorer = BertScorer::new(encoder, layer)
        .map_err(|e| Error::Options(format!("BERTScore layer {layer}: {e}")))?;
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
    let scored = scorer
        .score(&items, &ScoreOptions::default(), &mut |_, _| {})
        .map_err(model_error)?;
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

/// 1 for an answer the judge calls equivalent to a gold; unanswerable questions as for the
/// correctness judge (1 for a refusal).
fn equivalence_values(
    dataset: &Dataset,
    shorts: &[&str],
    verdicts: &[Option<Verdict>],
) -> Vec<f64> {
    let mut values = unanswerable_values(dataset, shorts);
    for (value, verdict) in values.iter_mut().zip(verdicts) {
        if let Some(v) = verdict {
            *value = f64::from(u8::from(*v == Verdict::Equivalent));
        }
    }
    values
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
    progress: &mut dyn FnMut(Step, usize, usize),
) -> Result<Judged> {
    let judge = Judge::new(generator, judge::decoding())?;
    let mut values = unanswerable_values(dataset, shorts);
    let mut verdicts = vec![None; shorts.len()];
    let total = dataset.questions.len();
    for (i, q) in dataset.questions.iter().enumerate() {
        progress(Step::JudgeCorrectness, i + 1, total);
        if !q.has_answer() || shorts[i].is_empty() {
            continue;
        }
        let verdict = judge
            .correctness(&q.question, &q.answers, shorts[i])
            .map_err(|e| in_question(q, e))?
            .verdict;
        values[i] = match verdict {
            Verdict::Correct => 1.0,
            Verdict::PartiallyCorrect => 0.5,
            _ => 0.0,
        };
        verdicts[i] = Some(verdict);
    }
    Ok(Judged {
        model: judge.model().to_string(),
        values,
        verdicts,
    })
}

/// Checks every answer's claims again with the judge deciding each; the checker's name.
fn judge_claims(
    generator: &dyn Generator,
    dataset: &Dataset,
    answered: &mut [(Vec<Passage>, Answered)],
    progress: &mut dyn FnMut(Step, usize, usize),
) -> Result<String> {
    let judge = Judge::new(generator, judge::decoding())?;
    let total = answered.len();
    for (i, (q, (passages, a))) in dataset
        .questions
        .iter()
        .zip(answered.iter_mut())
        .enumerate()
    {
        a.judge_claims(passages, &judge)
            .map_err(|e| in_question(q, e))?;
        progress(Step::JudgeClaims, i + 1, total);
    }
    Ok(format!("judge {}", judge.model()))
}

/// A generation error on question `q`, naming it.
fn in_question(q: &Question, source: lector_generate::Error) -> Error {
    Error::Generate(lector_generate::Error::Question {
        id: q.id.clone(),
        source: Box::new(source),
    })
}
