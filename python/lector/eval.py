"""lector's evaluation on Python data: the same numbers as ``lector eval`` and the official scripts.

- :func:`squad`: SQuAD v1.1/v2.0 EM and F1, identical to the official evaluation scripts;
- :func:`retrieval`: trec_eval's nDCG, recall, precision, MRR and MAP (as ``pytrec_eval``);
- :func:`retrieval_run`: an index's own retrieval on a query file, scored against qrels or by
  answer containment (``lector eval retrieval --index``);
- :func:`hotpot`: HotpotQA's answer, supporting-fact and joint metrics (``hotpot_evaluate_v1.py``);
- :func:`hotpot_run`: multi-hop questions of a HotpotQA file asked end to end and scored so
  (``lector eval hotpot``);
- :func:`odqa`: a pipeline on a question set end to end (``lector eval odqa``): EM/F1 with
  bootstrap intervals, answer recall, and where each answer was lost;
- :func:`adversarial`: the reader with and without AddSent/AddAny-style distractor sentences
  (``lector eval adversarial``);
- :func:`equivalence`: rule-based answer equivalence and key-fact match of free-form answers
  (``lector eval equivalence``);
- :func:`rag`: retrieval-augmented generation end to end on a SQuAD file (``lector eval
  generative --retrieve``): correctness, faithfulness, citations, refusals with intervals;
- :func:`compare`: two systems on the same questions, paired bootstrap and randomisation test
  (``lector eval compare``);
- :func:`bertscore`: BERTScore with a local encoder, as the ``bert-score`` package
  (``lector eval bertscore``);
- :func:`judge`: a language model as judge of answers, with the judge's own reliability
  (``lector eval judge``);
- :func:`faithfulness`: the claim checker against labelled claims, beside word overlap
  (``lector eval faithfulness``);
- :func:`canary`: a fixed question set re-asked and compared with a stored baseline
  (``lector eval canary``);
- :func:`rouge`: ROUGE-1/2/L/Lsum, identical to Google's rouge-score (``lector eval rouge``).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Dict, Mapping, Optional, Sequence, Union

from . import _fspath, _lector

if TYPE_CHECKING:
    from . import Index, Pipeline, Reader

__all__ = ["BREAKDOWNS", "adversarial", "bertscore", "canary", "compare", "equivalence", "faithfulness", "generative", "hotpot", "hotpot_run", "judge", "odqa", "rag", "retrieval", "retrieval_run", "rouge", "shared_data", "squad"]

#: The cutoffs of ``lector eval retrieval``.
DEFAULT_KS = (1, 3, 5, 10, 20, 100)


#: The breakdowns of ``by=``: question type, and question-context lexical overlap.
BREAKDOWNS = ("qtype", "overlap")


def squad(
    dataset: Mapping[str, Any],
    predictions: Mapping[str, str],
    na_probs: Optional[Mapping[str, float]] = None,
    na_prob_thresh: float = 1.0,
    *,
    by: Sequence[str] = (),
    overlap_bins: int = 4,
    low_overlap: float = 0.5,
    resamples: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
    html: Optional[Union[str, "os.PathLike[str]"]] = None,
) -> Dict[str, Any]:
    """Scores ``predictions`` (``{question id: answer}``, ``""`` for no answer) against a SQuAD
    dataset (the parsed JSON file). Returns the official script's output: ``exact_match`` and
    ``f1`` for v1.1; ``exact``, ``f1``, ``total``, the ``HasAns_``/``NoAns_`` breakdown and, with
    ``na_probs``, the best thresholds for v2.0; and ``intervals`` (percentile bootstrap of each
    score, ``resamples`` at ``confidence``), as ``lector eval squad --json``. ``html`` writes the
    HTML report (``--html``) there.

    ``by`` (names from :data:`BREAKDOWNS`) adds ``breakdowns``, as ``lector eval squad --by``:
    ``{"qtype": [...], "overlap": [...]}``, each group with ``label``, ``questions`` and
    ``exact_match``/``f1`` (percent, with ``resamples`` bootstrap bounds at ``confidence``).
    Overlap groups are ``overlap_bins`` quantile bins plus the questions below ``low_overlap``."""
    probs = None if na_probs is None else list(na_probs.items())
    return _lector.squad(dataset, list(predictions.items()), probs, na_prob_thresh,
                         by=_facets(by), overlap_bins=overlap_bins, low_overlap=low_overlap,
                         resamples=resamples, confidence=confidence, seed=seed,
                         html=_fspath(html))


def _facets(by: Sequence[str]) -> list:
    # One name is a common slip for a one-element list: read it as one facet, not its letters.
    return [by] if isinstance(by, str) else list(by)


def retrieval(
    qrels: Mapping[str, Mapping[str, int]],
    run: Mapping[str, Mapping[str, float]],
    ks: Sequence[int] = DEFAULT_KS,
) -> Dict[str, Any]:
    """trec_eval's measures of ``run`` (``{query id: {doc id: score}}``) against ``qrels``
    (``{query id: {doc id: relevance}}``), the shapes ``pytrec_eval`` takes. Returns ``{"mean":
    {metric: value}, "queries": {query id: {metric: value}}}`` with ``ndcg@k``, ``recall@k``,
    ``p@k``, ``mrr@k`` for each cutoff, ``map`` and ``mrr``. Queries in only one of the two are
    not evaluated, as in ``pytrec_eval``."""
    return _lector.retrieval(
        {q: dict(d) for q, d in qrels.items()}, {q: dict(d) for q, d in run.items()}, list(ks)
    )


def retrieval_run(
    index: "Index",
    queries: Union[str, "os.PathLike[str]"],
    *,
    qrels: Optional[Union[str, "os.PathLike[str]"]] = None,
    mode: Optional[str] = None,
    embedder: Optional[Union[str, "os.PathLike[str]"]] = None,
    rerank: Optional[Union[str, "os.PathLike[str]"]] = None,
    rerank_depth: int = 20,
    depth: int = 1000,
    ks: Sequence[int] = DEFAULT_KS,
    max_k: int = 100,
    resamples: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
    per_query: bool = False,
    html: Optional[Union[str, "os.PathLike[str]"]] = None,
    progress: bool = False,
) -> Dict[str, Any]:
    """Runs the queries of ``queries`` (BEIR JSON lines ``{_id, text}``, or a SQuAD file) through
    ``index``'s retrieval (``mode``: ``bm25``, ``dense``, ``hybrid``, ``tfidf``; reranked by the
    cross-encoder ``rerank`` over its first ``rerank_depth`` passages) and scores them as
    ``lector eval retrieval --index --json`` does: with ``qrels`` (TREC or BEIR tsv), each query's
    ``depth`` documents (each by its best passage) by nDCG, recall, precision and MRR at ``ks``
    and MAP; without, whether the first ``max_k`` passages contain each question's answers
    (``mrr``, ``recall_curve``). Every metric comes with a bootstrap interval; ``per_query`` adds
    each query's record, ``html`` writes the HTML report there."""
    from . import Index

    if not isinstance(index, Index):
        raise TypeError(f"index must be a lector.Index, not {type(index).__name__}")

    return _lector.retrieval_run(
        index._inner, os.fspath(queries), qrels=_fspath(qrels), mode=mode, embedder=_fspath(embedder),
        rerank=_fspath(rerank), rerank_depth=rerank_depth, depth=depth, ks=list(ks), max_k=max_k,
        resamples=resamples, confidence=confidence, seed=seed, per_query=per_query, html=_fspath(html),
        progress=progress,
    )


def hotpot(gold: Sequence[Mapping[str, Any]], prediction: Mapping[str, Any]) -> Dict[str, float]:
    """HotpotQA's official metrics of ``prediction`` (``{"answer": {id: text}, "sp": {id:
    [[title, sentence index], ...]}}``) against ``gold`` (the parsed HotpotQA file): ``em``,
    ``f1``, ``prec``, ``recall`` and their ``sp_`` and ``joint_`` forms."""
    return _lector.hotpot(list(gold), prediction)


def hotpot_run(
    data: Union[str, "os.PathLike[str]"],
    *,
    setting: str = "distractor",
    index: Optional[Union[str, "os.PathLike[str]"]] = None,
    k: int = 5,
    offset: int = 0,
    limit: Optional[int] = None,
    hops: int = 1,
    second_hop: str = "lexical",
    beam: Optional[int] = None,
    paths: Optional[int] = None,
    stop_confidence: Optional[float] = None,
    decompose: str = "rules",
    reader: Optional[Union[str, "os.PathLike[str]"]] = None,
    mode: Optional[str] = None,
    embedder: Optional[Union[str, "os.PathLike[str]"]] = None,
    rerank: Optional[Union[str, "os.PathLike[str]"]] = None,
    rerank_depth: int = 20,
    resamples: int = 1000,
    confidence: float = 0.95,
    per_question: bool = False,
    predictions: bool = False,
    html: Optional[Union[str, "os.PathLike[str]"]] = None,
    progress: bool = False,
) -> Dict[str, Any]:
    """Asks the questions of the HotpotQA file ``data`` (official distractor format; from
    ``offset``, the first ``limit``) with ``hops`` (1, or 2: bridges followed through
    ``second_hop`` ``"lexical"``, ``"dense"`` or ``"both"``, ``beam`` first-hop passages, ``paths``
    pairs read, bridge questions split by ``decompose`` ``"rules"`` or ``"none"``), each among its
    own ten paragraphs (``setting="distractor"``) or among every paragraph of the file
    (``"open"``, indexed in ``index`` when given), and scores them as ``lector eval hotpot --json``:
    the official ``metrics`` (answer, supporting-fact and joint EM/F1), ``intervals``, both-gold-
    paragraph recall, ``by_type`` and hop times. ``per_question`` adds each question's row (for
    :func:`compare`), ``predictions`` the official ``{"answer", "sp"}`` predictions, and ``html``
    writes the HTML report there."""
    import tempfile

    with tempfile.TemporaryDirectory() as work:
        return _lector.hotpot_run(
            os.fspath(data), work, setting=setting, index=_fspath(index), k=k, offset=offset,
            limit=limit, hops=hops, second_hop=second_hop, beam=beam, paths=paths,
            stop_confidence=stop_confidence, decompose=decompose, reader=_fspath(reader), mode=mode,
            embedder=_fspath(embedder), rerank=_fspath(rerank), rerank_depth=rerank_depth,
            resamples=resamples, confidence=confidence, per_question=per_question,
            predictions=predictions, html=_fspath(html), progress=progress,
        )


def shared_data(relative: str) -> str:
    """The path of ``relative`` in the shared evaluation data: ``$LECTOR_DATA_DIR``, else
    ``../shared/data`` beside the checkout lector was built from (as lector's own tests resolve it).
    Raises :class:`lector.LectorError` saying where it looked when it is missing."""
    return str(_lector.shared_data(relative))


def odqa(
    pipeline: "Pipeline",
    data: Union[str, "os.PathLike[str]"],
    *,
    k: int = 5,
    limit: Optional[int] = None,
    squad: bool = True,
    vote: bool = False,
    rank_prior: float = 2.0,
    ambiguity_odds: float = 3.0,
    resamples: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
    per_question: bool = False,
    progress: bool = False,
    by: Sequence[str] = (),
    overlap_bins: int = 4,
    low_overlap: float = 0.5,
    html: Optional[Union[str, "os.PathLike[str]"]] = None,
) -> Dict[str, Any]:
    """Asks every question of ``data`` through ``pipeline`` (its index, reader, retrieval and
    calibration) from the top ``k`` passages and scores the answers, as ``lector eval odqa
    --json`` does: ``data`` is a SQuAD file whose paragraphs the index holds (unanswerable v2.0
    questions included, and each answerable one also read in its gold paragraph), or with
    ``squad=False`` JSON lines ``{"question", "answer": [...]}`` (NQ-open). Returns EM/F1 with
    ``resamples`` bootstrap intervals at ``confidence``, answer recall at k, abstentions and the
    outcome of every question (retrieval, ranking or reading miss); ``per_question`` adds the
    per-question records of ``--per-question``; ``by`` the end-to-end ``breakdowns`` of
    :func:`squad` (overlap needs SQuAD data, whose questions have their paragraphs); ``html``
    writes the HTML report of ``--html`` there."""
    from . import Pipeline

    if not isinstance(pipeline, Pipeline):
        raise TypeError(f"pipeline must be a lector.Pipeline, not {type(pipeline).__name__}")
    return _lector.odqa(
        pipeline._inner, os.fspath(data), k=k, limit=limit, squad=squad, vote=vote,
        rank_prior=rank_prior, ambiguity_odds=ambiguity_odds, resamples=resamples,
        confidence=confidence, seed=seed, per_question=per_question, progress=progress,
        by=_facets(by), overlap_bins=overlap_bins, low_overlap=low_overlap,
        html=_fspath(html),
    )


def generative(
    data: Union[str, "os.PathLike[str]"],
    *,
    squad: bool = True,
    closed_book: bool = False,
    limit: Optional[int] = None,
    prompt: Optional[Union[str, "os.PathLike[str]"]] = None,
    examples: Optional[Union[str, "os.PathLike[str]"]] = None,
    shots: int = 3,
    select: str = "fixed",
    generator_model: Optional[Union[str, "os.PathLike[str]"]] = None,
    max_new_tokens: Optional[int] = None,
    reader: bool = False,
    reader_model: Optional[Union[str, "os.PathLike[str]"]] = None,
    judge_model: Optional[Union[str, "os.PathLike[str]"]] = None,
    judge_endpoint: Optional[str] = None,
    judge_api_model: Optional[str] = None,
    judge_api_key: Optional[str] = None,
    per_question: bool = False,
    progress: bool = False,
) -> Dict[str, Any]:
    """Generated answers scored as ``lector eval generative --json`` scores them (with
    ``reader=True`` the extractive reader, ``reader_model`` or the shipped one, reads the same
    paragraphs under ``extractive``, as the CLI does unless ``--no-reader``; a judge,
    ``judge_model`` or ``judge_api_model`` behind ``judge_endpoint``, adds its equivalence
    verdicts under ``judge_equivalence``).
    ``data`` is a SQuAD file (open book: each answerable question with its gold paragraph as
    passage ``[1]``, unless ``closed_book``) or, with ``squad=False``, NQ-open JSON lines asked
    closed book; the first ``limit`` questions, decoded greedily by the local GGUF
    ``generator_model`` (default: the registry's SmolLM2-135M-Instruct). ``prompt`` is a prompt
    file (TOML or YAML) or a shipped prompt's name (``"default"``, ``"chain-of-thought"``);
    ``examples`` few-shot examples (JSON lines, a JSON array or a SQuAD file), ``shots`` per
    question, chosen ``"fixed"`` or ``"similar"`` (nearest by the embedder); ``max_new_tokens``
    defaults to the prompt's own, else 64. Returns EM/F1, ROUGE-L, equivalence, key fact,
    refusals, citations and faithfulness under ``generative``; ``per_question`` adds the rows
    of ``--per-question`` (with ``reasoning`` for a chain-of-thought prompt), which
    :func:`compare` takes."""
    return _lector.generative(
        os.fspath(data), squad=squad, closed_book=closed_book, limit=limit, prompt=_fspath(prompt),
        examples=_fspath(examples), shots=shots, select=select,
        generator_model=_fspath(generator_model), max_new_tokens=max_new_tokens, reader=reader,
        reader_model=_fspath(reader_model), judge_model=_fspath(judge_model), judge_endpoint=judge_endpoint,
        judge_api_model=judge_api_model, judge_api_key=judge_api_key,
        per_question=per_question, progress=progress,
    )


def rag(
    data: Union[str, "os.PathLike[str]"],
    *,
    index: Optional[Union[str, "os.PathLike[str]"]] = None,
    k: int = 5,
    limit: Optional[int] = None,
    withhold_every: Optional[int] = None,
    order: str = "edges",
    mode: Optional[str] = None,
    embedder: Optional[Union[str, "os.PathLike[str]"]] = None,
    rerank: Optional[Union[str, "os.PathLike[str]"]] = None,
    rerank_depth: int = 20,
    prompt: Optional[Union[str, "os.PathLike[str]"]] = None,
    examples: Optional[Union[str, "os.PathLike[str]"]] = None,
    shots: int = 3,
    select: str = "fixed",
    generator_model: Optional[Union[str, "os.PathLike[str]"]] = None,
    endpoint: Optional[str] = None,
    api_model: Optional[str] = None,
    api_key: Optional[str] = None,
    temperature: float = 0.0,
    seed: int = 0,
    max_new_tokens: Optional[int] = None,
    judge_model: Optional[Union[str, "os.PathLike[str]"]] = None,
    judge_endpoint: Optional[str] = None,
    judge_api_model: Optional[str] = None,
    judge_api_key: Optional[str] = None,
    judge_claims: bool = False,
    bertscore_model: Optional[Union[str, "os.PathLike[str]"]] = None,
    bertscore_layer: Optional[int] = None,
    resamples: int = 1000,
    confidence: float = 0.95,
    per_question: bool = False,
    progress: bool = False,
) -> Dict[str, Any]:
    """Retrieval-augmented generation scored end to end, as ``lector eval generative --squad DATA
    --retrieve --json``: the SQuAD file's paragraphs are indexed (in ``index``, kept afterwards;
    default a temporary directory), and every question, unanswerable ones included (and those of
    every ``withhold_every``-th article, kept out of the index), is answered from the top ``k``
    passages retrieved by ``mode`` (``bm25``, ``dense``, ``hybrid``; reranked by the cross-encoder
    ``rerank``), shown in ``order`` (``"edges"``: strongest first and last, or ``"rank"``). The
    generator is the local GGUF ``generator_model`` (default: the registry's) or ``api_model``
    behind the OpenAI-compatible ``endpoint``, greedy unless ``temperature`` > 0; ``prompt``,
    ``examples``, ``shots``, ``select`` as in :func:`generative`. A judge (``judge_model`` or
    ``judge_endpoint`` with ``judge_api_model``) adds correctness and equivalence verdicts, and
    with ``judge_claims`` decides each claim; ``bertscore_model`` adds BERTScore F1.

    Returns ``figures`` (``exact_match``, ``f1``, ``claims_supported``, ``citation_precision``,
    ``refusal_rate_unanswerable``, ``recall@K_shown``, ... each with ``mean``, ``low``, ``high``
    and ``n``), ``counts``, and the setting; ``per_question`` adds the per-question records
    (SQuAD v2.0 ``em``/``f1``), which :func:`compare` takes."""
    import tempfile

    def run(directory: str) -> Dict[str, Any]:
        return _lector.rag(
            os.fspath(data), directory, k=k, limit=limit, withhold_every=withhold_every, order=order,
            mode=mode, embedder=_fspath(embedder), rerank=_fspath(rerank), rerank_depth=rerank_depth,
            prompt=_fspath(prompt), examples=_fspath(examples), shots=shots, select=select,
            generator_model=_fspath(generator_model), endpoint=endpoint, api_model=api_model,
            api_key=api_key, temperature=temperature, seed=seed, max_new_tokens=max_new_tokens,
            judge_model=_fspath(judge_model), judge_endpoint=judge_endpoint,
            judge_api_model=judge_api_model, judge_api_key=judge_api_key, judge_claims=judge_claims,
            bertscore_model=_fspath(bertscore_model), bertscore_layer=bertscore_layer,
            resamples=resamples, confidence=confidence, per_question=per_question, progress=progress,
        )

    if index is not None:
        return run(os.fspath(index))
    with tempfile.TemporaryDirectory() as temp:
        return run(os.path.join(temp, "index"))


def compare(
    a: Union[str, "os.PathLike[str]", Sequence[Mapping[str, Any]]],
    b: Union[str, "os.PathLike[str]", Sequence[Mapping[str, Any]]],
    *,
    metric: str = "f1",
    trials: int = 10_000,
    resamples: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
) -> Dict[str, Any]:
    """System ``b`` against system ``a`` on the same questions (``lector eval compare``): each is a
    JSON lines file or a list of per-question dicts with ``id`` and ``metric`` (such as
    ``odqa(..., per_question=True)["per_question"]``). Returns ``mean_a``, ``mean_b``,
    ``difference`` (the mean of ``b - a`` with its paired-bootstrap interval at ``confidence``)
    and the approximate-randomisation ``p_value`` over ``trials``."""
    def side(x: Any) -> Any:
        return os.fspath(x) if isinstance(x, (str, os.PathLike)) else list(x)

    return _lector.compare(side(a), side(b), metric=metric, trials=trials, resamples=resamples,
                           confidence=confidence, seed=seed)


def adversarial(
    reader: "Reader",
    data: Union[str, "os.PathLike[str]"],
    *,
    limit: Optional[int] = None,
    kinds: Sequence[str] = ("addsent", "addany"),
    positions: Sequence[str] = ("start", "end", "random"),
    candidates: int = 4,
    distractor_seed: int = 0,
    resamples: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
    per_question: bool = False,
    html: Optional[Union[str, "os.PathLike[str]"]] = None,
    progress: bool = False,
) -> Dict[str, Any]:
    """Reads the answerable questions of ``data`` (a SQuAD or MRQA file), the first ``limit``,
    in their own contexts and with a distractor sentence inserted, as ``lector eval adversarial
    --json`` does: ``addsent`` turns the question into a statement with a fake answer of the
    right kind, ``addany`` draws ten words from the question and common words (``candidates``
    tried, the reader's worst kept), each at ``positions`` (``start``, ``end``, ``random``).
    Returns ``questions``, the original ``exact_match``/``f1`` and one entry of ``variants`` per
    kind and position: EM/F1 before and after on the same questions, ``f1_change`` with its
    paired-bootstrap interval, and ``answers_from_distractor`` (percent). ``per_question`` adds
    each distractor with both answers; ``html`` writes the HTML report there."""
    from . import Reader

    if not isinstance(reader, Reader):
        raise TypeError(f"reader must be a lector.Reader, not {type(reader).__name__}")
    return _lector.adversarial(
        reader._inner, os.fspath(data), limit=limit, kinds=list(kinds), positions=list(positions),
        candidates=candidates, distractor_seed=distractor_seed, resamples=resamples,
        confidence=confidence, seed=seed, per_question=per_question,
        html=_fspath(html), progress=progress,
    )


def equivalence(
    items: Sequence[Mapping[str, Any]],
    *,
    judge_model: Optional[Union[str, "os.PathLike[str]"]] = None,
    judge_endpoint: Optional[str] = None,
    judge_api_model: Optional[str] = None,
    judge_api_key: Optional[str] = None,
) -> Dict[str, Any]:
    """Judges free-form answers as ``lector eval equivalence --json`` does. Each item is a dict
    ``{"answer", "golds": [...], "id"?, "question"?, "context"?, "label"?}``. Returns the CLI's
    summary: the shares (%) of ``exact_match``, ``equivalent`` (the same meaning by rules:
    numbers, dates, units, acronyms) and ``key_fact`` (a gold answer inside the answer as whole
    tokens), ``answer_tokens`` per answer, and ``agreement``: where items carry a person's
    ``label``, each verdict's ``precision``, ``recall``, ``accuracy`` and ``kappa``; plus
    ``per_item``: each item's ``exact_match``, ``f1`` (SQuAD's, against the best gold),
    ``equivalent``, ``key_fact`` and ``answer_tokens``. A judge (``judge_model``, a local GGUF,
    or ``judge_api_model`` behind ``judge_endpoint``) adds its verdicts, asked in both orders
    (``judge_equivalence``)."""
    return _lector.equivalence(
        [dict(item) for item in items],
        judge_model=_fspath(judge_model),
        judge_endpoint=judge_endpoint, judge_api_model=judge_api_model, judge_api_key=judge_api_key,
    )


def bertscore(
    items: Sequence[Mapping[str, Any]],
    model: Union[str, "os.PathLike[str]"],
    *,
    layer: Optional[int] = None,
    idf: bool = False,
    baseline: Optional[Union[str, "os.PathLike[str]"]] = None,
    resamples: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
    per_item: bool = False,
) -> Dict[str, Any]:
    """BERTScore of ``items`` (``{"id"?, "candidate", "references": [...]}`` or ``"reference"``)
    with the encoder checkpoint ``model``, identical to the ``bert-score`` package for the same
    model, layer and settings, as ``lector eval bertscore --json`` reports it: the settings
    (``model``, ``layer`` of ``layers``, ``idf``, ``baseline``, ``products``) and ``precision``,
    ``recall``, ``f1`` as ``{mean, low, high}`` at ``confidence``. ``layer``: default the
    package's tuned layer for a model it knows, else the last. With ``per_item``, each item's
    ``{id, precision, recall, f1}`` under ``per_item``."""
    return _lector.bertscore(
        [dict(item) for item in items], os.fspath(model), layer=layer, idf=idf,
        baseline=_fspath(baseline), resamples=resamples,
        confidence=confidence, seed=seed, per_item=per_item,
    )


def judge(
    items: Sequence[Mapping[str, Any]],
    *,
    mode: str = "correctness",
    generator_model: Optional[Union[str, "os.PathLike[str]"]] = None,
    endpoint: Optional[str] = None,
    api_model: Optional[str] = None,
    api_key: Optional[str] = None,
    concurrency: int = 1,
    cache: Optional[Union[str, "os.PathLike[str]"]] = None,
    resamples: int = 1000,
    confidence: float = 0.95,
    per_item: bool = False,
) -> Dict[str, Any]:
    """A language model judges ``items`` as ``lector eval judge --json`` does (greedy): each
    item ``{"question", "references", "answer"}`` (``answer_a``/``answer_b`` pairwise,
    ``context`` for faithfulness; optional ``label``, ``generator``, ``id``), ``mode``
    ``correctness``, ``faithfulness``, ``pairwise`` (both orders) or ``equivalence`` (both
    orders). The judge: the local GGUF ``generator_model`` (default: the registry's
    SmolLM2-135M-Instruct) or ``api_model`` behind ``endpoint``. Returns the verdict counts,
    unparseable replies, agreement with the labels (Cohen's kappa with an interval), position
    and verbosity bias, self-judged items and cost; ``cache`` keeps replies in that directory
    (default: none). With ``per_item``, each item's verdict(s) and reply(ies)."""
    return _lector.judge(
        [dict(item) for item in items], mode=mode,
        generator_model=_fspath(generator_model),
        endpoint=endpoint, api_model=api_model, api_key=api_key, concurrency=concurrency,
        cache=_fspath(cache), resamples=resamples,
        confidence=confidence, per_item=per_item,
    )


def faithfulness(
    items: Sequence[Mapping[str, Any]],
    *,
    judge: bool = False,
    generator_model: Optional[Union[str, "os.PathLike[str]"]] = None,
    endpoint: Optional[str] = None,
    api_model: Optional[str] = None,
    api_key: Optional[str] = None,
    per_claim: bool = False,
) -> Dict[str, Any]:
    """How well lector's claim checker tells supported claims from unsupported ones, beside word
    overlap, as ``lector eval faithfulness --json`` reports it: each item ``{"id", "passage",
    "claim", "label": "supported" | "unsupported", "kind"}``; per checker the AUROC for
    "unsupported" and the accuracy at its threshold, and per kind of claim both accuracies and
    the checker's most frequent failure. With ``judge``, a language model decides each claim too
    (``generator_model``, or ``endpoint`` + ``api_model``). With ``per_claim``, every claim's
    scores and failures."""
    return _lector.faithfulness(
        [dict(item) for item in items], judge=judge,
        generator_model=_fspath(generator_model),
        endpoint=endpoint, api_model=api_model, api_key=api_key, per_claim=per_claim,
    )


def canary(
    pipeline: "Pipeline",
    questions: Union[str, "os.PathLike[str]"],
    *,
    k: int = 5,
    baseline: Optional[Union[str, "os.PathLike[str]"]] = None,
    write_baseline: bool = False,
    max_f1_drop: float = 2.0,
    max_abstain_change: float = 5.0,
    progress: bool = False,
) -> Dict[str, Any]:
    """Re-asks every question of the SQuAD file ``questions`` through ``pipeline`` (``k``
    passages each) as ``lector eval canary --index ... --json`` does: with ``write_baseline``,
    stores the run as the baseline (``baseline``, default ``<questions stem>.baseline.json``
    beside the file); else compares with it and sets ``alarm`` when F1 fell by more than
    ``max_f1_drop`` points or the abstention rate moved by more than ``max_abstain_change``
    (``checks``, ``changed_answers``)."""
    return _lector.canary(
        pipeline._inner, os.fspath(questions), k=k,
        baseline=_fspath(baseline), write_baseline=write_baseline,
        max_f1_drop=max_f1_drop, max_abstain_change=max_abstain_change, progress=progress,
    )


def rouge(
    items: Sequence[Mapping[str, Any]],
    *,
    stem: bool = False,
    resamples: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
    per_item: bool = False,
    html: Optional[Union[str, "os.PathLike[str]"]] = None,
) -> Dict[str, Any]:
    """ROUGE-1, ROUGE-2, ROUGE-L and ROUGE-Lsum of ``items`` (``{"id", "prediction",
    "references": [...]}``; each item scores against its best reference), identical to Google's
    ``rouge-score`` (``stem``: its ``use_stemmer=True``), as ``lector eval rouge --json``
    reports them: each measure's precision, recall and F-measure as ``{mean, low, high}`` at
    ``confidence``. With ``per_item``, each item's scores; ``html`` writes the HTML report there."""
    return _lector.rouge([dict(item) for item in items], stem=stem, resamples=resamples,
                         confidence=confidence, seed=seed, per_item=per_item,
                         html=_fspath(html))
