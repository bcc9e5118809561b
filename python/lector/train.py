"""Training from Python, as ``lector train`` trains: a reader fine-tuned on SQuAD files
(:func:`reader`), the sentence embedder or a cross-encoder reranker for retrieval
(:func:`retriever`). Each writes a Hugging Face checkpoint into ``out`` with ``train-log.jsonl``
and a resumable ``checkpoint/``; ``resume=True`` continues an interrupted run from its last
checkpoint with the settings saved in ``out/run.json``.

>>> import lector.train
>>> lector.train.reader("my-reader", ["train.json"], dev="dev.json", epochs=2)  # doctest: +SKIP
{'out': 'my-reader', 'steps': ..., 'windows': ..., 'best': {...}, 'last_dev': {...}}
"""

from __future__ import annotations

import os
from typing import Any, Dict, Optional, Sequence

from . import PathLike, _fspath, _lector

__all__ = ["reader", "retriever"]


def _schedule(**settings: Any) -> Dict[str, Any]:
    """The schedule settings given (``None``: the library's default)."""
    return {key: value for key, value in settings.items() if value is not None}


def _files(train: Sequence[PathLike]) -> list:
    if isinstance(train, (str, bytes, os.PathLike)):
        raise TypeError("train is a list of SQuAD files (FILE or FILE:WEIGHT)")
    return [os.fspath(f) for f in train]


def reader(
    out: PathLike,
    train: Sequence[PathLike] = (),
    *,
    resume: bool = False,
    model: Optional[PathLike] = None,
    dev: Optional[PathLike] = None,
    max_seq_len: Optional[int] = None,
    doc_stride: Optional[int] = None,
    max_question_len: Optional[int] = None,
    shared_norm: bool = False,
    negatives_from: Optional[PathLike] = None,
    negatives: int = 2,
    negatives_depth: int = 10,
    epochs: Optional[int] = None,
    batch_size: Optional[int] = None,
    accumulation: Optional[int] = None,
    lr: Optional[float] = None,
    weight_decay: Optional[float] = None,
    warmup_ratio: Optional[float] = None,
    max_grad_norm: Optional[float] = None,
    max_steps: Optional[int] = None,
    seed: Optional[int] = None,
    dropout: Optional[bool] = None,
    save_every: Optional[int] = None,
    progress: bool = False,
) -> Dict[str, Any]:
    """``lector train reader``: fine-tunes an extractive reader on the SQuAD v1.1/v2.0 files
    ``train`` (each ``FILE`` or ``FILE:WEIGHT``), starting from ``model`` (a reader, or a bare
    encoder under a fresh head; default the shipped reader), and writes the checkpoint into
    ``out``. ``dev`` is scored after each epoch and the best checkpoint kept in ``out/best``;
    ``negatives_from`` (an index) adds hard negatives; ``shared_norm`` one softmax over a
    question's windows. The schedule (``epochs`` 2, ``batch_size`` 12, ``lr`` 3e-5, linear
    warm-up ``warmup_ratio`` 0.1 and decay, ``max_steps``, ``seed`` 42, a resumable checkpoint
    every ``save_every`` steps) is the CLI's. Returns ``lector train reader --json``'s summary:
    ``steps``, ``windows``, ``best`` and ``last_dev`` scores."""
    return _lector.train_reader(
        os.fspath(out), _files(train), resume=resume, model=_fspath(model), dev=_fspath(dev),
        max_seq_len=max_seq_len, doc_stride=doc_stride, max_question_len=max_question_len,
        shared_norm=shared_norm, negatives_from=_fspath(negatives_from), negatives=negatives,
        negatives_depth=negatives_depth,
        schedule=_schedule(epochs=epochs, batch_size=batch_size, accumulation=accumulation, lr=lr,
                           weight_decay=weight_decay, warmup_ratio=warmup_ratio,
                           max_grad_norm=max_grad_norm, max_steps=max_steps, seed=seed,
                           dropout=dropout, save_every=save_every),
        progress=progress,
    )


def retriever(
    out: PathLike,
    train: Sequence[PathLike] = (),
    *,
    kind: str = "embedder",
    resume: bool = False,
    model: Optional[PathLike] = None,
    negatives_from: Optional[PathLike] = None,
    negatives: int = 2,
    negatives_depth: int = 10,
    max_tokens: int = 256,
    scale: float = 20.0,
    epochs: Optional[int] = None,
    batch_size: Optional[int] = None,
    accumulation: Optional[int] = None,
    lr: Optional[float] = None,
    weight_decay: Optional[float] = None,
    warmup_ratio: Optional[float] = None,
    max_grad_norm: Optional[float] = None,
    max_steps: Optional[int] = None,
    seed: Optional[int] = None,
    dropout: Optional[bool] = None,
    save_every: Optional[int] = None,
    progress: bool = False,
) -> Dict[str, Any]:
    """``lector train embedder`` (``kind="embedder"``: the sentence embedder fine-tuned for
    question-to-passage retrieval with in-batch and hard negatives; default start the registry's
    all-MiniLM-L6-v2) or ``lector train reranker`` (``kind="reranker"``: a cross-encoder, which
    needs ``negatives_from``; default start the shipped reader's encoder), on the answerable
    questions of ``train``, into ``out``. ``max_tokens`` per text or pair, ``scale`` the
    embedder loss's similarity scale; the schedule as for :func:`reader`. Returns the summary of
    ``lector train ... --json``."""
    return _lector.train_retriever(
        os.fspath(out), _files(train), kind=kind, resume=resume, model=_fspath(model),
        negatives_from=_fspath(negatives_from), negatives=negatives, negatives_depth=negatives_depth,
        max_tokens=max_tokens, scale=scale,
        schedule=_schedule(epochs=epochs, batch_size=batch_size, accumulation=accumulation, lr=lr,
                           weight_decay=weight_decay, warmup_ratio=warmup_ratio,
                           max_grad_norm=max_grad_norm, max_steps=max_steps, seed=seed,
                           dropout=dropout, save_every=save_every),
        progress=progress,
    )
