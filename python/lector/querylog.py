"""The query log of ``lector serve --log-queries DIR`` from Python: what users asked and were
answered, their feedback, the labels made on the server's labelling page, and those labels as
SQuAD v2.0 training data for ``lector train`` (what ``lector label export`` writes).

>>> import lector.querylog
>>> asks = [e for e in lector.querylog.entries("logs") if e["type"] == "ask"]  # doctest: +SKIP
"""

from __future__ import annotations

import os
from typing import Any, Dict, List

import lector
from lector import PathLike, _lector

__all__ = ["entries", "export", "labels"]


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
