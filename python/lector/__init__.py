"""lector: question answering with evidence, from Python.

The work is done by lector's Rust crates (the extension module ``lector._lector``) with the GIL
released; this module gives it typed, documented objects:

- :class:`Index`: an index directory on disk (the one ``lector index add`` writes): ``add``,
  ``delete``, ``search``;
- :class:`Reader`: the extractive reader (``lector read``): ``read``;
- :class:`Pipeline`: retrieve, read, aggregate (``lector ask``): ``ask`` with evidence, confidence
  and abstention;
- :func:`calibrate`: the no-answer threshold and confidence map of an index (``lector
  calibrate``);
- :mod:`lector.eval`: SQuAD, trec_eval and HotpotQA scoring on Python dicts, and every evaluation run;
- :mod:`lector.train`: fine-tuning the reader, the embedder and a reranker (``lector train``);
- :mod:`lector.querylog`: the query log, its labels and drift;
- :mod:`lector.haystack` and :mod:`lector.langchain`: components for those frameworks.

Errors from lector raise :class:`LectorError` with lector's message.

>>> import lector
>>> index = lector.Index("/tmp/lector-sample")
>>> index.add(paths=["samples/squad-v1.1-sample.json"])  # doctest: +SKIP
>>> lector.Pipeline(index).ask("Which team won Super Bowl 50?").answer.text  # doctest: +SKIP
'Broncos'
"""

from __future__ import annotations

import dataclasses
import os
import queue
import threading
import typing
from typing import (
    Any,
    Callable,
    Dict,
    Iterable,
    List,
    Mapping,
    Optional,
    Sequence,
    Tuple,
    Type,
    TypeVar,
    Union,
    overload,
)

from . import _lector
from ._lector import LectorError

__all__ = [
    "Answer",
    "Candidate",
    "Document",
    "Embedder",
    "Evidence",
    "GeneratedAnswer",
    "Generator",
    "Hit",
    "Index",
    "LectorError",
    "Pipeline",
    "Prediction",
    "Reader",
    "Response",
    "calibrate",
    "eval",
    "generate_questions",
]

PathLike = Union[str, "os.PathLike[str]"]


def _fspath(path: Optional[PathLike]) -> Optional[str]:
    """``path`` as a string for the extension module, ``None`` kept."""
    return None if path is None else os.fspath(path)
#: A filter: lector's text syntax (``'year >= 2023 and product in ["a", "b"]'``) or a Haystack 2
#: filter dict (``{"field": "meta.year", "operator": ">=", "value": 2023}``).
Filter = Union[str, Mapping[str, Any]]


_T = TypeVar("_T")


def _build(cls: Type[_T], fields: Mapping[str, Any], **converted: Any) -> _T:
    """``cls`` from the dict ``fields`` (keys it does not have are left out), with ``converted``."""
    names = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    values = {k: v for k, v in fields.items() if k in names}
    values.update(converted)
    return cls(**values)


@dataclasses.dataclass(frozen=True)
class Document:
    """A document to index: ``text`` is cut into passages; ``metadata`` fields can be filtered on.

    ``embedding`` is the document's own vector, made by the model ``embedding_model`` outside
    lector (OpenAI, Cohere, sentence-transformers): an index of such documents keeps it (as
    float32) for each of the document's passages, embeds nothing itself, and is searched with the
    query's vector from the same model (:meth:`Index.search` ``vector=``)."""

    id: str
    text: str
    title: Optional[str] = None
    date: Optional[str] = None
    metadata: Optional[Dict[str, Any]] = None
    embedding: Optional[List[float]] = None
    embedding_model: Optional[str] = None


@dataclasses.dataclass(frozen=True)
class Hit:
    """A retrieved passage of a document."""

    doc_id: str
    text: str
    score: float
    #: Position of the passage in its document (0-based).
    passage: int
    #: Character offsets of the passage in the document's text.
    start: int
    end: int
    title: Optional[str] = None
    metadata: Optional[Dict[str, Any]] = None
    #: The page the passage starts on (PDF), 1-based.
    page: Optional[int] = None
    #: The headings above the passage (``Installation > Linux``).
    section: Optional[str] = None
    #: Each retriever's rank and score: ``[{"retriever": "bm25", "rank": 1, "score": 7.2}]``.
    sources: List[Dict[str, Any]] = dataclasses.field(default_factory=list)
    #: The passage as lector returned it (with its byte offsets), for :meth:`Pipeline.read_passages`.
    raw: Dict[str, Any] = dataclasses.field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def _from(cls, hit: Mapping[str, Any]) -> "Hit":
        span = hit["span"]
        return _build(cls, hit, start=span["char_start"], end=span["char_end"], raw=dict(hit))


@dataclasses.dataclass(frozen=True)
class Answer:
    """A span the reader found: ``context[start:end] == text`` (character offsets)."""

    text: str
    score: float
    start: int
    end: int


@dataclasses.dataclass(frozen=True)
class Prediction:
    """The reader's answers to one question about one context, best first."""

    answers: List[Answer]
    #: ``null / (null + best span score)``: how strongly the reader says "no answer here".
    na_prob: float
    null_score: float
    #: The question was longer than ``max_question_len`` tokens and was cut.
    question_truncated: bool

    @property
    def answer(self) -> Optional[Answer]:
        """The best answer, or None when the context has no usable span."""
        return self.answers[0] if self.answers else None

    @classmethod
    def _from(cls, p: Mapping[str, Any]) -> "Prediction":
        answers = [Answer(a["answer"], a["score"], a["start"], a["end"]) for a in p["answers"]]
        return _build(cls, p, answers=answers)


@dataclasses.dataclass(frozen=True)
class Evidence:
    """Where an answer was read: the passage and the answer's character offsets in it
    (``passage_start``, ``passage_end``) and in the document (``start``, ``end``)."""

    doc_id: str
    title: Optional[str]
    date: Optional[str]
    #: Retrieval rank of the passage (1-based).
    rank: int
    passage: int
    passage_text: str
    passage_start: int
    passage_end: int
    start: int
    end: int


@dataclasses.dataclass(frozen=True)
class Candidate:
    """An answer with its evidence; ``confidence`` is the calibrated probability that it is right
    (None until ``lector calibrate`` gave the index a confidence map)."""

    text: str
    score: float
    reader_score: float
    log_odds: float
    confidence: Optional[float]
    #: Passages that gave this answer.
    passages: int
    evidence: Evidence

    @classmethod
    def _from(cls, c: Mapping[str, Any]) -> "Candidate":
        return _build(cls, c, evidence=_build(Evidence, c["evidence"]))


@dataclasses.dataclass(frozen=True)
class Response:
    """What :meth:`Pipeline.ask` found: the answer, or why it abstains, with the runner-ups and the
    passages read. ``raw`` holds every field of ``lector ask --json``."""

    question: str
    answer: Optional[Candidate]
    #: Why there is no answer, when the pipeline abstains: ``"no_passages"``, ``"no_span"`` or
    #: ``"below_threshold"`` (the no-answer probability is above the threshold).
    abstention: Optional[str]
    na_prob: float
    threshold: float
    calibrated: bool
    candidates: List[Candidate]
    ambiguous: bool
    passages: List[Dict[str, Any]]
    timings: Dict[str, float]
    raw: Dict[str, Any] = dataclasses.field(repr=False, compare=False)
    #: Multi-hop asks (``hops=2``): the question's kind, the passage pairs read and the chain of
    #: sub-answers, as ``lector ask --hops 2 --json`` gives them.
    hops: Optional[Dict[str, Any]] = None

    @classmethod
    def _from(cls, r: Mapping[str, Any]) -> "Response":
        candidates = [Candidate._from(c) for c in r["candidates"]]
        answer = Candidate._from(r["answer"]) if r["answer"] is not None else None
        return _build(cls, r, answer=answer, candidates=candidates, raw=dict(r))


class Index:
    """An index directory (the one ``lector index add`` writes and ``lector search`` reads).

    Each write opens the index's writer, commits and closes it, so the ``lector`` CLI and other
    processes may write between calls (one writer at a time: a second raises
    :class:`LectorError`). Searches read the last commit this object saw; :meth:`reload` reads
    commits made elsewhere.

    Args:
        path: The index directory; created by the first :meth:`add`.
        dense: Keep passage vectors (dense and hybrid search) in a new index. The embedder,
            all-MiniLM-L6-v2, is fetched into the user cache on first use unless ``embedder``
            names a checkpoint folder.
        embedder: Embedder checkpoint folder or pulled hub repository.
        passage_words: Most words per passage of a new index (default 100).
        tfidf: Also index hashed unigrams and bigrams in a new index, for ``mode="tfidf"``
            (DrQA's TF-IDF retriever, a baseline).
    """

    def __init__(
        self,
        path: PathLike,
        *,
        dense: bool = False,
        embedder: Optional[PathLike] = None,
        passage_words: Optional[int] = None,
        tfidf: bool = False,
    ) -> None:
        self._inner = _lector.Index(
            os.fspath(path),
            dense=dense,
            embedder=_fspath(embedder),
            passage_words=passage_words,
            tfidf=tfidf,
        )

    @property
    def path(self) -> str:
        """The index directory."""
        return os.fspath(self._inner.path)

    def add(
        self,
        documents: Optional[Iterable[Union[Document, Mapping[str, Any]]]] = None,
        *,
        paths: Optional[Sequence[PathLike]] = None,
        fields: Optional[Mapping[str, Any]] = None,
        strict: bool = False,
        progress: bool = False,
    ) -> Dict[str, int]:
        """Adds ``documents`` (:class:`Document` or dicts ``{id, text, title?, date?, metadata?}``)
        and the files and folders in ``paths`` (txt, md, html, pdf, docx, jsonl, SQuAD json), then
        commits. A document with a known id and other content replaces it; the same content is
        left alone. ``fields`` are set in every document's metadata. Unreadable files are skipped
        with a warning and counted (``skipped_invalid``) unless ``strict``. ``progress`` shows a
        progress bar on stderr.

        Returns the counts of ``lector index add --json``: added, replaced, unchanged,
        skipped_invalid, ignored_files, and the index's documents and passages."""
        if documents is None and not paths:
            raise ValueError("give documents or paths")
        if isinstance(documents, (str, bytes, Document)) or isinstance(documents, Mapping):
            raise TypeError("documents must be a list of documents (for files, use paths=...)")
        if isinstance(paths, (str, bytes, os.PathLike)):
            paths = [paths]  # one path, never its characters
        counts: Dict[str, int] = {}
        if documents is not None:
            docs = [dataclasses.asdict(d) if isinstance(d, Document) else d for d in documents]
            counts = self._inner.add_documents(docs, fields=fields, progress=progress)
        if paths:
            files = self._inner.add_files(
                [os.fspath(p) for p in paths], fields=fields, strict=strict, progress=progress
            )
            counts = _sum_counts(counts, files)
        return counts

    def delete(self, ids: Union[str, Iterable[str]]) -> int:
        """Removes documents by id (one id, or several) and commits; returns how many were
        there."""
        if isinstance(ids, str):
            ids = [ids]  # one id, never its characters
        ids = list(ids)
        for i, id in enumerate(ids):
            if not isinstance(id, str):
                raise TypeError(f"ids[{i}] must be a str, not {type(id).__name__}")
        return self._inner.delete(ids)

    def search(
        self,
        query: str,
        k: int = 10,
        *,
        mode: Optional[str] = None,
        filter: Optional[Filter] = None,
        vector: Optional[Sequence[float]] = None,
    ) -> List[Hit]:
        """The best ``k`` passages for ``query``, best first. ``mode``: ``"bm25"``, ``"dense"``, ``"tfidf"`` or
        ``"hybrid"`` (default: hybrid on an index that embeds its passages, else BM25). ``vector``:
        the query's own vector, from the model of the documents' own vectors (the mode is then
        dense unless given)."""
        vector = None if vector is None else [float(x) for x in vector]
        return [Hit._from(h) for h in self._inner.search(query, k, mode=mode, filter=filter, vector=vector)]

    def search_documents(
        self,
        query: str,
        k: int = 10,
        *,
        mode: Optional[str] = None,
        filter: Optional[Filter] = None,
        vector: Optional[Sequence[float]] = None,
    ) -> List[Tuple[Document, float]]:
        """The best ``k`` documents for ``query`` (options as :meth:`search`), each scored by its
        best passage (MaxP), best first, with their own vectors."""
        vector = None if vector is None else [float(x) for x in vector]
        found = self._inner.search(query, k, mode=mode, filter=filter, vector=vector, documents=True)
        return [(_build(Document, d), d["score"]) for d in found]

    def documents(self, *, filter: Optional[Filter] = None) -> List[Document]:
        """The documents that pass ``filter`` (all without one), with their own vectors, in the
        index's order (oldest commit first, in the order they were added); none before the
        index exists."""
        return [_build(Document, d) for d in self._inner.documents(filter=filter)]

    def count(self, *, filter: Optional[Filter] = None) -> int:
        """How many documents pass ``filter`` (all without one); 0 before the index exists."""
        return self._inner.count(filter=filter)

    def stats(self) -> Dict[str, Any]:
        """Document, passage and term counts and the index's settings (``lector index stats``)."""
        return self._inner.stats()

    def reload(self) -> None:
        """Reads the latest commit, made by another process or object."""
        self._inner.reload()

    def __repr__(self) -> str:
        return f"lector.Index({self.path!r})"


def _check_str(name: str, value: Any) -> None:
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a str, not {type(value).__name__}")


def _sum_counts(a: Dict[str, int], b: Dict[str, int]) -> Dict[str, int]:
    totals = ("generation", "documents", "passages")  # the index's state after the last commit
    return {k: b[k] if k in totals else a.get(k, 0) + b[k] for k in b}


class Embedder:
    """The sentence embedder of lector's dense indexes (all-MiniLM-L6-v2 unless ``model`` names
    another checkpoint; fetched into the user cache on first use): unit-length vectors, so inner
    products are cosine similarities. For frameworks that embed texts themselves
    (:mod:`lector.llama_index`), and for documents' own vectors."""

    def __init__(self, model: Optional[PathLike] = None) -> None:
        self._inner = _lector.Embedder(_fspath(model))

    @property
    def model(self) -> str:
        """The model's name, as a dense index records it."""
        return self._inner.model

    @property
    def dim(self) -> int:
        """The vector dimension."""
        return self._inner.dim

    def embed(self, texts: Sequence[str]) -> List[List[float]]:
        """One vector per text (as passages are embedded)."""
        texts = _texts(texts)
        return self._inner.embed(texts) if texts else []

    def embed_queries(self, queries: Sequence[str]) -> List[List[float]]:
        """One vector per query (as queries are embedded)."""
        queries = _texts(queries)
        return self._inner.embed_queries(queries) if queries else []

    def __repr__(self) -> str:
        return f"lector.Embedder({self.model!r})"


def _texts(texts: Sequence[str]) -> List[str]:
    if isinstance(texts, str):
        raise TypeError("texts must be a list of str (for one text, use [text])")
    texts = list(texts)
    for i, text in enumerate(texts):
        _check_str(f"texts[{i}]", text)
    return texts


class Generator:
    """A text generator: the local GGUF ``model`` (default: the registry's SmolLM2-135M-Instruct,
    fetched into the user cache on first use), or ``api_model`` behind the OpenAI-compatible
    ``endpoint`` (``api_key``: default ``$OPENAI_API_KEY``). For frameworks that prompt a model
    themselves (:mod:`lector.llama_index`); :meth:`Pipeline.generate` answers with evidence."""

    def __init__(
        self,
        model: Optional[PathLike] = None,
        *,
        endpoint: Optional[str] = None,
        api_model: Optional[str] = None,
        api_key: Optional[str] = None,
        timeout: float = 120.0,
        api_context: int = 8192,
    ) -> None:
        self._inner = _lector.Generator(
            _fspath(model),
            endpoint=endpoint,
            api_model=api_model,
            api_key=api_key,
            timeout=timeout,
            api_context=api_context,
        )

    @property
    def name(self) -> str:
        """The model's name."""
        return self._inner.name

    @property
    def context_window(self) -> int:
        """Prompt and generated tokens together, at most."""
        return self._inner.context_window

    def chat(
        self,
        messages: Sequence[Mapping[str, str]],
        *,
        on_token: Optional[Callable[[str], None]] = None,
        **decoding: Any,
    ) -> Dict[str, Any]:
        """The assistant's reply to ``messages`` (``{"role", "content"}``; roles ``system``,
        ``user``, ``assistant``) as ``{"text", "finish_reason", "timings"}``. ``decoding``:
        ``temperature`` (0: greedy), ``top_p``, ``seed``, ``max_new_tokens``, ``stop``,
        ``repeat_penalty``. ``on_token`` gets each piece of text as it is generated."""
        return self._inner.chat([dict(m) for m in messages], on_token=on_token, **decoding)

    def __repr__(self) -> str:
        return f"lector.Generator({self.name!r})"


class Reader:
    """The extractive reader: a BERT/RoBERTa/DistilBERT question-answering checkpoint, read with
    the windows, batching and span decoding of the Hugging Face question-answering pipeline.

    Args:
        model: A checkpoint folder or a pulled hub repository name (``lector models pull``);
            default ``$LECTOR_READER``, else the reader shipped in the repository.
    """

    def __init__(self, model: Optional[PathLike] = None) -> None:
        self._inner = _lector.Reader(_fspath(model))

    @property
    def model_dir(self) -> str:
        """The checkpoint folder."""
        return os.fspath(self._inner.model_dir)

    @overload
    def read(self, question: str, context: str, *, top_k: int = ..., **params: Any) -> Prediction: ...

    @overload
    def read(
        self, question: str, *, contexts: Sequence[str], top_k: int = ..., **params: Any
    ) -> List[Prediction]: ...

    def read(
        self,
        question: str,
        context: Optional[str] = None,
        *,
        contexts: Optional[Sequence[str]] = None,
        top_k: int = 1,
        **params: Any,
    ) -> Union[Prediction, List[Prediction]]:
        """The best ``top_k`` answers to ``question`` in ``context``, or in each of ``contexts``
        (read in one batch). ``params``: ``handle_impossible_answer``, ``max_seq_len`` (384),
        ``doc_stride`` (128), ``max_question_len`` (64), ``max_answer_len`` (15),
        ``batch_size`` (32), as for ``lector read``."""
        if (context is None) == (contexts is None):
            raise ValueError("give either context or contexts")
        _check_str("question", question)
        if context is not None:
            _check_str("context", context)
        if context is not None:
            return self.read_batch([(question, context)], top_k=top_k, **params)[0]
        return self.read_batch([(question, c) for c in contexts or []], top_k=top_k, **params)

    def read_batch(
        self, pairs: Sequence[Tuple[str, str]], *, top_k: int = 1, progress: bool = False, **params: Any
    ) -> List[Prediction]:
        """Answers many ``(question, context)`` pairs, batching their windows (as ``lector read
        --squad`` does); ``progress`` shows a progress bar on stderr."""
        pairs = list(pairs)
        for i, pair in enumerate(pairs):
            if not (isinstance(pair, tuple) and len(pair) == 2):
                raise TypeError(f"pairs[{i}] must be a (question, context) tuple, not {type(pair).__name__}")
            _check_str(f"pairs[{i}] question", pair[0])
            _check_str(f"pairs[{i}] context", pair[1])
        raw = self._inner.read_pairs(pairs, top_k=top_k, progress=progress, **params)
        return [Prediction._from(p) for p in raw]

    def __repr__(self) -> str:
        return f"lector.Reader({self.model_dir!r})"


_T_done = TypeVar("_T_done")


def _streamed(run: Callable[[Callable[[str], None]], _T_done]) -> typing.Generator[str, None, _T_done]:
    """The pieces of text ``run`` hands its callback, as an iterator while ``run`` works in a
    thread (lector releases the GIL); ``run``'s result is the iterator's return value, and its
    exception is raised in the caller's thread."""
    pieces: "queue.Queue[object]" = queue.Queue()
    done = object()
    outcome: Dict[str, Any] = {}

    def work() -> None:
        try:
            outcome["result"] = run(pieces.put)
        except BaseException as err:  # raised in the caller's thread below
            outcome["error"] = err
        finally:
            pieces.put(done)

    worker = threading.Thread(target=work, name="lector-generate", daemon=True)
    worker.start()
    while (piece := pieces.get()) is not done:
        yield piece  # type: ignore[misc]
    worker.join()
    if "error" in outcome:
        raise outcome["error"]
    return outcome["result"]


#: The keyword settings of a multi-hop :meth:`Pipeline.ask`.
_HOP_SETTINGS = (
    "second_hop", "beam", "paths", "stop_confidence", "decompose", "generator_model", "endpoint", "api_model",
)

#: The keyword settings of :meth:`Pipeline.generate` that choose the prompt, generator and decoding.
_GENERATION_SETTINGS = (
    "prompt", "examples", "shots", "select", "generator_model", "endpoint", "api_model", "api_key",
    "timeout", "api_context", "temperature", "top_p", "seed", "beams", "length_penalty",
    "max_new_tokens", "stop", "repeat_penalty",
)


@dataclasses.dataclass(frozen=True)
class GeneratedAnswer:
    """A generated answer (``lector ask --generate``): ``text`` as the user gets it (with
    lector's sentence naming disagreeing readings, if any), its ``citations`` (``{number,
    doc_id, title}``: passage ``[number]``), the ``unsupported`` sentences (no passage supports
    them), the model's ``reasoning`` (chain-of-thought prompts), and every field of ``ask
    --generate --json`` in ``raw``."""

    text: str
    question: str
    generator: str
    citations: List[Dict[str, Any]]
    unsupported: List[str]
    reasoning: Optional[str] = None
    raw: Dict[str, Any] = dataclasses.field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def _from(cls, raw: Mapping[str, Any]) -> "GeneratedAnswer":
        answer = raw.get("answer") or {}
        sentences = answer.get("sentences") or []
        unsupported = [sentences[i]["text"] for i in answer.get("flagged") or [] if i < len(sentences)]
        return cls(
            text=raw["text"],
            question=raw["question"],
            generator=raw["generator"],
            citations=list(answer.get("citations") or []),
            unsupported=unsupported,
            reasoning=raw.get("reasoning"),
            raw=dict(raw),
        )


class Pipeline:
    """Open-domain question answering over an :class:`Index`, as ``lector ask`` does it: retrieve
    ``k`` passages, read them, aggregate the answers, abstain when the no-answer probability is
    above the index's calibrated threshold (else 0.5).

    Args:
        index: The index; the pipeline follows its commits.
        reader: The reader (default: ``Reader()``'s checkpoint). Its checkpoint is loaded again.
        mode: ``"bm25"``, ``"dense"`` or ``"hybrid"`` (default: hybrid on a dense index, else BM25).
        filter: Only passages of documents passing it are retrieved.
        rerank: A cross-encoder checkpoint that reorders ``rerank_depth`` retrieved passages.
    """

    def __init__(
        self,
        index: Index,
        reader: Optional[Reader] = None,
        *,
        mode: Optional[str] = None,
        filter: Optional[Filter] = None,
        rerank: Optional[PathLike] = None,
        rerank_depth: int = 20,
    ) -> None:
        if not isinstance(index, Index):
            raise TypeError(f"index must be a lector.Index, not {type(index).__name__}")
        if reader is not None and not isinstance(reader, Reader):
            raise TypeError(f"reader must be a lector.Reader, not {type(reader).__name__}")
        self.index = index
        self._inner = _lector.Pipeline(
            index._inner,
            None if reader is None else reader._inner,
            mode=mode,
            filter=filter,
            rerank=_fspath(rerank),
            rerank_depth=rerank_depth,
        )

    def ask(self, question: str, *, k: int = 5, hops: int = 1, **options: Any) -> Response:
        """Answers ``question`` from the best ``k`` passages. ``options``: ``filter`` (added to
        the pipeline's), ``vote`` (add up equal answers' scores), ``answers_per_passage`` (3),
        ``rank_prior`` (2.0), ``prefer_recent``, ``ambiguity_odds`` (3.0), as for ``lector ask``.

        ``hops=2`` asks a multi-hop question as ``lector ask --hops 2`` does (the chain in
        :attr:`Response.hops`), with ``second_hop`` (``"lexical"``, ``"dense"``, ``"both"``),
        ``beam``, ``paths``, ``stop_confidence``, ``decompose`` (``"rules"``, ``"llm"``,
        ``"none"``; ``llm`` with ``generator_model`` or ``endpoint`` + ``api_model``)."""
        if hops == 1:
            return self.ask_many([question], k=k, **options)[0]
        if hops != 2:
            raise ValueError(f"hops must be 1 or 2, not {hops}")
        _check_str("question", question)
        settings = {key: options.pop(key) for key in _HOP_SETTINGS if key in options}
        if settings.get("generator_model") is not None:
            settings["generator_model"] = os.fspath(settings["generator_model"])
        return Response._from(self._inner.ask_hops(question, dict(options, k=k), **settings))

    def ask_many(
        self, questions: Sequence[str], *, k: int = 5, progress: bool = False, **options: Any
    ) -> List[Response]:
        """Answers many questions, reading all their passages in one batch; ``progress`` shows
        the reading on stderr."""
        if isinstance(questions, str):
            raise TypeError("questions must be a list of str (for one question, use ask)")
        questions = list(questions)
        for i, question in enumerate(questions):
            _check_str(f"questions[{i}]", question)
        raw = self._inner.ask_many(questions, dict(options, k=k), progress)
        return [Response._from(r) for r in raw]

    def generate(
        self,
        question: str,
        *,
        k: int = 5,
        closed_book: bool = False,
        on_token: Optional[Callable[[str], None]] = None,
        **settings: Any,
    ) -> GeneratedAnswer:
        """A generated answer to ``question`` from the best ``k`` passages, as ``lector ask
        --generate`` gives it (the same seed gives the same text): citations checked against the
        passages, sentences without support flagged, disagreeing readings named. ``settings``:
        ``prompt`` (a prompt file or a shipped name), ``examples``/``shots``/``select`` (few-shot),
        ``generator_model`` (a GGUF file; default: the registry's SmolLM2-135M-Instruct) or
        ``endpoint`` + ``api_model`` (+ ``api_key``, default ``$OPENAI_API_KEY``; ``timeout``,
        ``api_context``), ``temperature`` (0: greedy), ``top_p``, ``seed``, ``beams``,
        ``length_penalty``, ``max_new_tokens``, ``stop``, ``repeat_penalty``; ``filter`` and the
        other options of :meth:`ask`. ``on_token`` gets each piece of text as it is generated
        (:meth:`stream` yields them instead). ``closed_book``: no retrieval."""
        _check_str("question", question)
        known = set(_GENERATION_SETTINGS)
        options = {key: value for key, value in settings.items() if key not in known}
        chosen = {key: value for key, value in settings.items() if key in known}
        if "examples" in chosen and chosen["examples"] is not None:
            chosen["examples"] = os.fspath(chosen["examples"])
        if "generator_model" in chosen and chosen["generator_model"] is not None:
            chosen["generator_model"] = os.fspath(chosen["generator_model"])
        raw = self._inner.generate(
            question, dict(options, k=k), closed_book=closed_book, on_token=on_token, **chosen
        )
        return GeneratedAnswer._from(raw)

    def stream(self, question: str, **settings: Any) -> typing.Generator[str, None, GeneratedAnswer]:
        """:meth:`generate` as an iterator of the pieces of text as they are generated; the
        finished answer is the iterator's return value (``StopIteration.value``, or ``answer =
        yield from pipeline.stream(...)``)."""
        return _streamed(lambda on_token: self.generate(question, on_token=on_token, **settings))

    def read_passages(self, question: str, hits: Sequence[Union[Hit, Mapping[str, Any]]], **options: Any) -> Response:
        """Reads passages found by another retriever (best first) and aggregates their answers as
        :meth:`ask` does: ``hits`` are :class:`Hit` or dicts with ``doc_id``, ``text``,
        ``score``, ``passage`` and ``span`` (``{byte_start, byte_end, char_start, char_end}``)."""
        raw = [h.raw if isinstance(h, Hit) else dict(h) for h in hits]
        return Response._from(self._inner.answer_passages(question, raw, options))


def calibrate(
    index: Index,
    data: PathLike,
    *,
    target: str = "max-f1",
    confidence: str = "isotonic",
    retrieve: Optional[int] = None,
    limit: Optional[int] = None,
    evaluate: bool = False,
    dry_run: bool = False,
    reader: Optional[Reader] = None,
    mode: Optional[str] = None,
    html: Optional[PathLike] = None,
    progress: bool = False,
) -> Dict[str, Any]:
    """Chooses the no-answer threshold and fits the confidence map of ``index`` on labelled
    questions, as ``lector calibrate`` does, and stores them with the index (``calibration.json``)
    unless ``dry_run``; pipelines made afterwards abstain and give confidences by them.

    Args:
        index: The index the calibration belongs to.
        data: A SQuAD file: v2.0 (with unanswerable questions) to learn the threshold; v1.1 fits
            only the confidence map.
        target: ``"max-f1"`` or ``"precision=P"`` (the most answers whose exact-match precision
            is at least P).
        confidence: ``"isotonic"``, ``"platt"`` or ``"none"``.
        retrieve: Read each question in the top ``retrieve`` passages of the index (as
            ``Pipeline.ask(k=retrieve)``) instead of its gold paragraph.
        limit: Only the first ``limit`` questions.
        evaluate: Measure the stored calibration on ``data`` instead (nothing is written).
        reader: The reader (default: ``Reader()``'s checkpoint).
        mode: Retrieval of ``retrieve``: ``"bm25"``, ``"dense"`` or ``"hybrid"``.
        html: Write the HTML report (``--html``: the coverage curve and the chosen cut, or the
            stored threshold measured, with the confidence map's reliability) there.
        progress: A progress bar on stderr.

    Returns the fields of ``lector calibrate --json``: ``calibration`` (what is stored),
    ``chosen`` and ``default`` (EM, F1, coverage and precision at the chosen and the default
    threshold), ``confidence`` (ECE raw and calibrated) and ``written``; with ``evaluate``,
    those of ``lector calibrate --evaluate --json``."""
    if not isinstance(index, Index):
        raise TypeError(f"index must be a lector.Index, not {type(index).__name__}")
    return _lector.calibrate(
        index._inner,
        os.fspath(data),
        target=target,
        confidence=confidence,
        retrieve=retrieve,
        limit=limit,
        evaluate=evaluate,
        dry_run=dry_run,
        reader=None if reader is None else reader.model_dir,
        mode=mode,
        html=_fspath(html),
        progress=progress,
    )


def generate_questions(
    pipeline: Pipeline,
    *,
    per_passage: int = 3,
    limit_passages: Optional[int] = None,
    min_f1: float = 1.0,
    k: int = 5,
    progress: bool = False,
) -> Dict[str, Any]:
    """A test set from the documents of ``pipeline``'s index, as ``lector generate-questions``
    makes it (rule-made questions): candidate answers (dates, numbers, names; ``per_passage`` per
    passage of the first ``limit_passages``) turned into questions, kept when the pipeline's reader
    recovers the answer (F1 at least ``min_f1``; 1: the same answer) and its retrieval ranks the
    passage within ``k``. Returns ``{"report": counts of each step and the round-trip pass rate,
    "squad": the questions as SQuAD v1.1 JSON, each with its source passage}``; the ``squad``
    part is what ``eval.odqa`` and ``lector eval odqa --squad`` take once written to a file."""
    if not isinstance(pipeline, Pipeline):
        raise TypeError(f"pipeline must be a lector.Pipeline, not {type(pipeline).__name__}")
    return _lector.generate_questions(
        pipeline._inner, per_passage=per_passage, limit_passages=limit_passages, min_f1=min_f1,
        k=k, progress=progress,
    )


from . import eval  # noqa: E402  (the submodule needs the names above)
