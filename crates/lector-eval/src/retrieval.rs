//! Retrieval evaluation.
//!
//! Two families of measures:
//!
//! - [`evaluate`]: ranking metrics computed exactly as `trec_eval` 9.x (and its Python binding
//!   `pytrec_eval`) computes them, from a [`Run`] (ranked documents with scores) and [`Qrels`]
//!   (relevance judgements). Per-query values are kept so that callers can bootstrap them.
//! - [`answer_recall`]: DPR-style open-domain answer recall, where a retrieved passage counts as a
//!   hit when it contains a gold answer as a whole-token sequence after SQuAD normalisation.
//!
//! # Metric names
//!
//! [`evaluate`] reports, for every cutoff `k` of its `ks` argument, and then once per query:
//!
//! | name | trec_eval measure | meaning |
//! | --- | --- | --- |
//! | `ndcg@k` | `ndcg_cut.k` | nDCG with gain = relevance value, `log2(rank + 1)` discount, ideal ranking over all judged documents |
//! | `recall@k` | `recall.k` | relevant documents in the top `k` / relevant documents judged (0 when none is judged relevant) |
//! | `p@k` | `P.k` | relevant documents in the top `k` / `k` (missing ranks count as non-relevant) |
//! | `mrr@k` | `recip_rank` on the run cut to `k` | 1 / rank of the first relevant document if it is within the top `k`, else 0 |
//! | `map` | `map` | average precision over the whole ranking |
//! | `mrr` | `recip_rank` | 1 / rank of the first relevant document in the whole ranking, else 0 |
//!
//! A document is relevant when its judged relevance is at least 1; unjudged documents are
//! non-relevant with gain 0.
//!
//! # Ranking order
//!
//! Like `trec_eval`, the rank column of a run file is ignored: each query's documents are sorted by
//! score, highest first, and documents with equal scores are ordered by document id in
//! *descending* byte order (`strcmp(b, a)` in `trec_eval`'s `form_res_rels.c`). For example, with
//! equal scores `c` comes before `b`, `b` before `aa`, `aa` before `a`, and `a` before `B`.

mod answers;
mod queries;
mod trec;

pub use answers::{
    answer_recall, contains_answer, read_answer_items, AnswerItem, AnswerQuery, AnswerRecall,
    Passage,
};
pub use queries::{read_queries, LabelledQuery};
pub use trec::{
    evaluate, metric_names, parse_qrels, parse_run, read_qrels, read_run, Qrels, QueryMetrics,
    RetrievalEval, Run, DEFAULT_KS,
};
