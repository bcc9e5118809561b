"""lector's evaluation on Python data: the same numbers as ``lector eval`` and the official scripts.

- :func:`squad`: SQuAD v1.1/v2.0 EM and F1, identical to the official evaluation scripts;
- :func:`retrieval`: trec_eval's nDCG, recall, precision, MRR and MAP (as ``pytrec_eval``);
- :func:`hotpot`: HotpotQA's answer, supporting-fact and joint metrics (``hotpot_evaluate_v1.py``).
"""

from __future__ import annotations

from typing import Any, Dict, Mapping, Optional, Sequence

from . import _lector

__all__ = ["hotpot", "retrieval", "shared_data", "squad"]

#: The cutoffs of ``lector eval retrieval``.
DEFAULT_KS = (1, 3, 5, 10, 20, 100)


def squad(
    dataset: Mapping[str, Any],
    predictions: Mapping[str, str],
    na_probs: Optional[Mapping[str, float]] = None,
    na_prob_thresh: float = 1.0,
) -> Dict[str, Any]:
    """Scores ``predictions`` (``{question id: answer}``, ``""`` for no answer) against a SQuAD
    dataset (the parsed JSON file). Returns the official script's output: ``exact_match`` and
    ``f1`` for v1.1; ``exact``, ``f1``, ``total``, the ``HasAns_``/``NoAns_`` breakdown and, with
    ``na_probs``, the best thresholds for v2.0."""
    probs = None if na_probs is None else list(na_probs.items())
    return _lector.squad(dataset, list(predictions.items()), probs, na_prob_thresh)


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


def hotpot(gold: Sequence[Mapping[str, Any]], prediction: Mapping[str, Any]) -> Dict[str, float]:
    """HotpotQA's official metrics of ``prediction`` (``{"answer": {id: text}, "sp": {id:
    [[title, sentence index], ...]}}``) against ``gold`` (the parsed HotpotQA file): ``em``,
    ``f1``, ``prec``, ``recall`` and their ``sp_`` and ``joint_`` forms."""
    return _lector.hotpot(list(gold), prediction)


def shared_data(relative: str) -> str:
    """The path of ``relative`` in the shared evaluation data: ``$LECTOR_DATA_DIR``, else
    ``../shared/data`` beside the checkout lector was built from (as lector's own tests resolve it).
    Raises :class:`lector.LectorError` saying where it looked when it is missing."""
    return str(_lector.shared_data(relative))
