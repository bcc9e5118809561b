"""The query log of ``lector serve --log-queries DIR`` from Python: what users asked and were
answered, their feedback, the labels made on the server's labelling page, and those labels as
SQuAD v2.0 training data for ``lector train`` (what ``lector label export`` writes).

>>> import lector.querylog
>>> asks = [e for e in lector.querylog.entries("logs") if e["type"] == "ask"]  # doctest: +SKIP
"""

from __future__ import annotations

import os
from typing import Any, Dict, List, Optional

import lector
from lector import PathLike, _fspath, _lector

__all__ = ["drift", "entries", "export", "labels"]


def entries(log: PathLike) -> List[Dict[str, Any]]:
    """Every entry of the log, oldest first: asks (``type`` ``"ask"``: the question, the answer
    or abstention, the passages, timings, ``request_id``) and feedback (``type``
    ``"feedback"``: ``request_id``, ``verdict`` ``up``/``down``, ``correct_answer``, ``note``)."""
    return _lector.read_log(os.fspath(log))


def labels(log: PathLike) -> List[Dict[str, Any]]:
    """The labels stored beside the log: ``request_id``, ``question``, ``verdict`` (``answer``,
    ``unanswerable`` or ``skip``) and, for an answer, ``doc_id``, ``start``, ``end`` and
    ``text``."""
    return _lector.read_labels(os.fspath(log))


def export(log: PathLike, index: lector.Index) -> Dict[str, Any]:
    """The labels as SQuAD v2.0 over ``index``'s documents (``squad``, ready for ``json.dump``
    and ``lector train``), with ``answers``, ``unanswerable``, ``skipped`` and the labels
    ``left_out`` (and why), as ``lector label export --json`` reports them."""
    return _lector.export_labels(os.fspath(log), index._inner)


def drift(
    log: PathLike,
    *,
    index: Optional[PathLike] = None,
    embedder: Optional[PathLike] = None,
    split: Optional[str] = None,
    before: Optional[str] = None,
    after: Optional[str] = None,
    far_below: float = 0.3,
    alpha: float = 0.01,
    min_effect: float = 0.05,
    html: Optional[PathLike] = None,
) -> Dict[str, Any]:
    """Whether the questions users ask, and how they are answered, changed between two windows
    of the log, as ``lector report drift --json``: the asks before and at-or-after ``split`` (an
    RFC 3339 time such as ``"2026-12-02T13:00:00Z"``, or a date; default the median ask time), or
    in the windows ``before`` and ``after`` (``"FROM..TO"``, either end open). Each signal
    (question length, abstention, confidence, top retrieval score; with ``index``, the directory
    the questions were asked of, terms outside its vocabulary, and for a dense index the nearness
    of the nearest passage, ``far_below`` a cosine) is tested and flagged when ``p < alpha`` and
    its effect is at least ``min_effect``. Returns ``windows``, ``signals``, ``drifted`` and
    ``warnings``; ``html`` also writes the report with before/after histograms there."""
    return _lector.drift(os.fspath(log), index=_fspath(index), embedder=_fspath(embedder), split=split,
                         before=before, after=after, far_below=far_below, alpha=alpha,
                         min_effect=min_effect, html=_fspath(html))
