"""Haystack components over lector (``pip install lector[haystack]``, Haystack 3.x).

- :class:`LectorRetriever`: passages from a lector index (BM25, dense or hybrid, with Haystack
  filter dicts) as Haystack ``Document`` objects;
- :class:`LectorReader`: lector's extractive reader with its aggregation and abstention, on the
  documents of any retriever; its first answer is ``lector ask``'s answer, or a no-answer
  (``data=None``) when lector abstains;
- :class:`LectorDocumentStore`: Haystack's ``DocumentStore`` protocol over a lector index (write
  with each ``DuplicatePolicy``, filter with Haystack's filter semantics, count, delete), with
  documents' embeddings kept (as float32) for dense search;
- :class:`LectorBM25Retriever`, :class:`LectorEmbeddingRetriever`, :class:`LectorHybridRetriever`:
  whole documents from a :class:`LectorDocumentStore`, each scored by its best passage;
- :class:`LectorGenerator`: lector's generator (a local GGUF model or an endpoint) for Haystack's
  prompts;
- :class:`LectorAnswerEvaluator`: lector's answer metrics (SQuAD exact match and F1, rule-based
  equivalence, key fact) as a Haystack evaluator.

>>> from haystack import Pipeline
>>> from lector.haystack import LectorReader, LectorRetriever
>>> qa = Pipeline()
>>> qa.add_component("retriever", LectorRetriever(index="/tmp/lector-sample", top_k=5))
>>> qa.add_component("reader", LectorReader(index="/tmp/lector-sample"))
>>> qa.connect("retriever.documents", "reader.documents")  # doctest: +SKIP
>>> qa.run({"retriever": {"query": q}, "reader": {"query": q}})["reader"]["answers"][0].data  # doctest: +SKIP
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional

from haystack import Document, component, default_from_dict, default_to_dict
from haystack.dataclasses import ExtractedAnswer, StreamingChunk
from haystack.document_stores.errors import DuplicateDocumentError
from haystack.document_stores.types import DuplicatePolicy, FilterPolicy, apply_filter_policy
from haystack.errors import FilterError

import lector

__all__ = [
    "LectorAnswerEvaluator",
    "LectorBM25Retriever",
    "LectorDocumentStore",
    "LectorEmbeddingRetriever",
    "LectorGenerator",
    "LectorHybridRetriever",
    "LectorReader",
    "LectorRetriever",
]

#: The metadata key under which a document keeps the lector passage it came from.
HIT_KEY = "lector_hit"


def to_document(hit: lector.Hit) -> Document:
    """A Haystack document for a lector passage: the passage text as content, the document's
    metadata plus where the passage lies (``doc_id``, ``title``, ``passage``, ``start``, ``end``,
    ``page``, ``section``) and the whole hit under ``lector_hit``."""
    meta: Dict[str, Any] = dict(hit.metadata or {})
    meta.update(doc_id=hit.doc_id, title=hit.title, passage=hit.passage, start=hit.start, end=hit.end)
    meta.update({k: v for k, v in (("page", hit.page), ("section", hit.section)) if v is not None})
    meta[HIT_KEY] = hit.raw
    return Document(id=f"{hit.doc_id}#p{hit.passage}", content=hit.text, meta=meta, score=hit.score)


def to_hit(document: Document) -> Dict[str, Any]:
    """The lector passage of a document: the one it came from, or the whole content of a
    document from another retriever."""
    if HIT_KEY in document.meta:
        return document.meta[HIT_KEY]
    text = document.content or ""
    return {
        "doc_id": document.id,
        "title": document.meta.get("title"),
        "text": text,
        "score": document.score or 0.0,
        "passage": 0,
        "span": {"byte_start": 0, "byte_end": len(text.encode()), "char_start": 0, "char_end": len(text)},
    }


@component
class LectorRetriever:
    """Retrieves passages from a lector index.

    Args:
        index: The index directory (``lector index add`` writes it).
        top_k: Passages to return.
        mode: ``"bm25"``, ``"dense"`` or ``"hybrid"`` (default: hybrid on a dense index, else BM25).
        filters: A Haystack filter dict; filters given to ``run`` replace it (Haystack's default
            filter policy).
        embedder: The embedder checkpoint of a dense index (default: all-MiniLM-L6-v2).
    """

    def __init__(
        self,
        index: str,
        top_k: int = 10,
        mode: Optional[str] = None,
        filters: Optional[Dict[str, Any]] = None,
        embedder: Optional[str] = None,
    ) -> None:
        self.index = index
        self.top_k = top_k
        self.mode = mode
        self.filters = filters
        self.embedder = embedder
        self._index = lector.Index(index, embedder=embedder)

    def to_dict(self) -> Dict[str, Any]:
        return default_to_dict(
            self, index=self.index, top_k=self.top_k, mode=self.mode, filters=self.filters, embedder=self.embedder
        )

    @classmethod
    def from_dict(cls, data: Dict[str, Any]) -> "LectorRetriever":
        return default_from_dict(cls, data)

    @component.output_types(documents=List[Document])
    def run(
        self, query: str, filters: Optional[Dict[str, Any]] = None, top_k: Optional[int] = None
    ) -> Dict[str, List[Document]]:
        """The best ``top_k`` passages for ``query``, best first."""
        hits = self._index.search(
            query, self.top_k if top_k is None else top_k, mode=self.mode, filter=filters or self.filters
        )
        return {"documents": [to_document(h) for h in hits]}


@component
class LectorReader:
    """Reads documents with lector's extractive reader and aggregates their answers as ``lector
    ask`` does: equal answers merged, weighted by retrieval rank, a calibrated confidence, and a
    no-answer when the no-answer probability is above the index's threshold.

    Args:
        index: The lector index whose calibration (threshold and confidence map) applies and
            whose documents' dates break near-ties; any retriever's documents can be read.
        model: The reader checkpoint (default: ``$LECTOR_READER``, else the shipped reader).
        top_k: Answers to return (besides the no-answer).
        no_answer: Add the no-answer (``data=None``, ``score`` = the no-answer probability): first
            when lector abstains, last otherwise; the only answer (score 1, abstention
            ``"no_passages"``) when there are no documents to read.
    """

    def __init__(
        self, index: str, model: Optional[str] = None, top_k: int = 5, no_answer: bool = True
    ) -> None:
        self.index = index
        self.model = model
        self.top_k = top_k
        self.no_answer = no_answer
        self._pipeline: Optional[lector.Pipeline] = None

    def warm_up(self) -> None:
        """Loads the reader (Haystack calls this before the first run)."""
        if self._pipeline is None:
            reader = lector.Reader(self.model) if self.model is not None else None
            self._pipeline = lector.Pipeline(lector.Index(self.index), reader)

    def to_dict(self) -> Dict[str, Any]:
        return default_to_dict(self, index=self.index, model=self.model, top_k=self.top_k, no_answer=self.no_answer)

    @classmethod
    def from_dict(cls, data: Dict[str, Any]) -> "LectorReader":
        return default_from_dict(cls, data)

    @component.output_types(answers=List[ExtractedAnswer])
    def run(
        self, query: str, documents: List[Document], top_k: Optional[int] = None
    ) -> Dict[str, List[ExtractedAnswer]]:
        """The answers to ``query`` in ``documents`` (best first, in the retriever's order)."""
        self.warm_up()
        assert self._pipeline is not None
        if not documents:
            # Nothing to read: lector abstains, as `lector ask` does with no passages.
            none = ExtractedAnswer(query=query, score=1.0, data=None, meta={"abstention": "no_passages"})
            return {"answers": [none] if self.no_answer else []}
        response = self._pipeline.read_passages(query, [to_hit(d) for d in documents])
        answers = [
            _extracted(query, c, documents[c.evidence.rank - 1])
            for c in response.candidates[: self.top_k if top_k is None else top_k]
        ]
        if self.no_answer:
            none = ExtractedAnswer(
                query=query, score=response.na_prob, data=None, meta={"abstention": response.abstention}
            )
            answers.insert(0 if response.answer is None else len(answers), none)
        return {"answers": answers}


def _extracted(query: str, candidate: lector.Candidate, document: Document) -> ExtractedAnswer:
    evidence = candidate.evidence
    return ExtractedAnswer(
        query=query,
        score=candidate.score,
        data=candidate.text,
        document=document,
        context=evidence.passage_text,
        document_offset=ExtractedAnswer.Span(evidence.passage_start, evidence.passage_end),
        meta={
            "confidence": candidate.confidence,
            "log_odds": candidate.log_odds,
            "doc_id": evidence.doc_id,
            "start": evidence.start,
            "end": evidence.end,
        },
    )


class LectorDocumentStore:
    """Haystack's ``DocumentStore`` over a lector index directory.

    A Haystack document becomes a lector document: ``content`` its text, ``meta`` its metadata,
    ``embedding`` its own vector (stored as float32, under ``embedding_model``). Filters are
    Haystack's filter dicts with Haystack's semantics (``None`` for a missing field, ISO 8601
    dates compared by time, ``FilterError`` for a malformed filter or an ordering condition on a
    string that is not a date); where lector's filters still differ is listed in the README.
    Documents come back in the index's order (oldest write first), without a score.

    Args:
        index: The index directory; created by the first write.
        embedding_model: The name recorded for the documents' embeddings (vectors of two models
            are never mixed in one index).
    """

    def __init__(self, index: str, embedding_model: str = "haystack") -> None:
        self.index = index
        self.embedding_model = embedding_model
        self._index = lector.Index(index)

    def to_dict(self) -> Dict[str, Any]:
        return default_to_dict(self, index=self.index, embedding_model=self.embedding_model)

    @classmethod
    def from_dict(cls, data: Dict[str, Any]) -> "LectorDocumentStore":
        return default_from_dict(cls, data)

    def count_documents(self) -> int:
        """The number of documents in the store."""
        return self._index.count()

    def filter_documents(self, filters: Optional[Dict[str, Any]] = None) -> List[Document]:
        """The documents that pass ``filters`` (all of them without, or with ``{}``)."""
        if filters:
            _check_lists(filters)
        try:
            documents = self._index.documents(filter=filters or None)
        except ValueError as err:  # the filter, named where it is wrong
            raise FilterError(str(err)) from err
        return [_haystack_document(d) for d in documents]

    def write_documents(self, documents: List[Document], policy: DuplicatePolicy = DuplicatePolicy.NONE) -> int:
        """Writes ``documents``; returns how many were written. An id already stored fails the
        whole write under ``FAIL`` (and ``NONE``, as Haystack's in-memory store does), is left
        alone under ``SKIP`` and replaced under ``OVERWRITE``."""
        if not isinstance(documents, list) or not all(isinstance(d, Document) for d in documents):
            raise ValueError("write_documents takes a list of Haystack Document objects")
        ids = [d.id for d in documents]
        stored = {d.id for d in self._index.documents(filter={"field": "id", "operator": "in", "value": ids})} if ids else set()
        if policy in (DuplicatePolicy.NONE, DuplicatePolicy.FAIL):
            duplicates = [d.id for d in documents if d.id in stored]
            if duplicates:
                raise DuplicateDocumentError(f"documents with these ids are already stored: {duplicates}")
        if policy == DuplicatePolicy.SKIP:
            documents = [d for d in documents if d.id not in stored]
        if documents:
            self._index.add([self._lector_document(d) for d in documents])
        return len(documents)

    def delete_documents(self, document_ids: List[str]) -> None:
        """Deletes the documents with these ids (ids not stored are ignored)."""
        if document_ids:
            self._index.delete(document_ids)

    def search(
        self,
        query: str = "",
        top_k: int = 10,
        *,
        mode: str,
        filters: Optional[Dict[str, Any]] = None,
        query_embedding: Optional[List[float]] = None,
        return_embedding: bool = False,
    ) -> List[Document]:
        """The best ``top_k`` documents (``mode``: ``"bm25"``, ``"dense"`` or ``"hybrid"``),
        each scored by its best passage; what the retrievers below call."""
        if filters:
            _check_lists(filters)
        if self._index.count() == 0:
            return []  # nothing written yet: there may be no index to search
        try:
            found = self._index.search_documents(
                query, top_k, mode=mode, filter=filters or None, vector=query_embedding
            )
        except ValueError as err:
            raise FilterError(str(err)) from err
        return [
            _haystack_document(d, score=score, embedding=return_embedding) for d, score in found
        ]

    def _lector_document(self, document: Document) -> lector.Document:
        if document.content is None:
            raise ValueError(f"document {document.id} has no text content: lector stores text documents")
        if document.sparse_embedding is not None:
            raise ValueError(f"document {document.id} has a sparse embedding: lector keeps dense vectors only")
        return lector.Document(
            id=document.id,
            text=document.content,
            metadata=dict(document.meta) or None,
            embedding=document.embedding,
            embedding_model=self.embedding_model if document.embedding is not None else None,
        )


def _haystack_document(document: lector.Document, score: Optional[float] = None, embedding: bool = True) -> Document:
    return Document(
        id=document.id,
        content=document.text,
        meta=document.metadata or {},
        embedding=document.embedding if embedding else None,
        score=score,
    )


class _StoreRetriever:
    """What the three retrievers share: the store, default filters and how run-time filters
    combine with them (Haystack's ``FilterPolicy``), ``top_k``, serialization."""

    mode = ""

    def __init__(
        self,
        document_store: LectorDocumentStore,
        filters: Optional[Dict[str, Any]] = None,
        top_k: int = 10,
        filter_policy: FilterPolicy = FilterPolicy.REPLACE,
        return_embedding: bool = False,
    ) -> None:
        if not isinstance(document_store, LectorDocumentStore):
            raise ValueError("document_store must be a LectorDocumentStore")
        if top_k <= 0:
            raise ValueError(f"top_k must be greater than 0, not {top_k}")
        self.document_store = document_store
        self.filters = filters
        self.top_k = top_k
        self.filter_policy = FilterPolicy.from_str(filter_policy) if isinstance(filter_policy, str) else filter_policy
        self.return_embedding = return_embedding

    def to_dict(self) -> Dict[str, Any]:
        return default_to_dict(
            self,
            document_store=self.document_store.to_dict(),
            filters=self.filters,
            top_k=self.top_k,
            filter_policy=self.filter_policy.value,
            return_embedding=self.return_embedding,
        )

    @classmethod
    def from_dict(cls, data: Dict[str, Any]) -> Any:
        params = data["init_parameters"]
        params["document_store"] = LectorDocumentStore.from_dict(params["document_store"])
        return default_from_dict(cls, data)

    def _search(self, query: str, query_embedding: Optional[List[float]], filters, top_k) -> Dict[str, List[Document]]:
        filters = apply_filter_policy(self.filter_policy, self.filters, filters)
        documents = self.document_store.search(
            query,
            self.top_k if top_k is None else top_k,
            mode=self.mode,
            filters=filters,
            query_embedding=query_embedding,
            return_embedding=self.return_embedding,
        )
        return {"documents": documents}


@component
class LectorBM25Retriever(_StoreRetriever):
    """Documents from a :class:`LectorDocumentStore` by BM25, each scored by its best passage."""

    mode = "bm25"

    @component.output_types(documents=List[Document])
    def run(
        self, query: str, filters: Optional[Dict[str, Any]] = None, top_k: Optional[int] = None
    ) -> Dict[str, List[Document]]:
        """The best ``top_k`` documents for ``query``."""
        return self._search(query, None, filters, top_k)


@component
class LectorEmbeddingRetriever(_StoreRetriever):
    """Documents from a :class:`LectorDocumentStore` nearest to a query embedding (by the inner
    product of the vectors as given), from the model of the documents' embeddings."""

    mode = "dense"

    @component.output_types(documents=List[Document])
    def run(
        self, query_embedding: List[float], filters: Optional[Dict[str, Any]] = None, top_k: Optional[int] = None
    ) -> Dict[str, List[Document]]:
        """The ``top_k`` documents nearest to ``query_embedding``."""
        return self._search("", query_embedding, filters, top_k)


@component
class LectorHybridRetriever(_StoreRetriever):
    """Documents from a :class:`LectorDocumentStore` by BM25 and embedding similarity fused with
    reciprocal rank fusion (lector's hybrid mode)."""

    mode = "hybrid"

    @component.output_types(documents=List[Document])
    def run(
        self,
        query: str,
        query_embedding: List[float],
        filters: Optional[Dict[str, Any]] = None,
        top_k: Optional[int] = None,
    ) -> Dict[str, List[Document]]:
        """The best ``top_k`` documents for ``query`` and ``query_embedding`` together."""
        return self._search(query, query_embedding, filters, top_k)


def _check_lists(condition: Any) -> None:
    """Haystack's rule that ``in`` / ``not in`` take a list (a tuple is refused, not read as one)."""
    if not isinstance(condition, dict):
        raise FilterError(f"a filter condition must be a dict, not {type(condition).__name__}")
    if condition.get("operator") in ("in", "not in") and not isinstance(condition.get("value"), list):
        raise FilterError(f"`{condition['operator']}` needs a list value, not {type(condition.get('value')).__name__}")
    for inner in condition.get("conditions", []) if isinstance(condition.get("conditions"), list) else []:
        _check_lists(inner)


@component
class LectorGenerator:
    """lector's text generator as a Haystack generator: the reply to a prompt (one user message),
    from the local GGUF ``model`` (default: the registry's SmolLM2-135M-Instruct) or ``api_model``
    behind ``endpoint`` (key: ``$OPENAI_API_KEY``). ``generation_kwargs``: ``temperature`` (0:
    greedy), ``top_p``, ``seed``, ``max_new_tokens``, ``stop``, ``repeat_penalty``.
    ``streaming_callback`` gets each piece as a ``StreamingChunk``."""

    def __init__(
        self,
        model: Optional[str] = None,
        endpoint: Optional[str] = None,
        api_model: Optional[str] = None,
        generation_kwargs: Optional[Dict[str, Any]] = None,
        streaming_callback: Optional[Callable[[StreamingChunk], None]] = None,
    ) -> None:
        self.model = model
        self.endpoint = endpoint
        self.api_model = api_model
        self.generation_kwargs = dict(generation_kwargs or {})
        self.streaming_callback = streaming_callback
        self._generator: Optional[lector.Generator] = None

    def warm_up(self) -> None:
        """Loads the model (Haystack calls this before the first run)."""
        if self._generator is None:
            self._generator = lector.Generator(self.model, endpoint=self.endpoint, api_model=self.api_model)

    def to_dict(self) -> Dict[str, Any]:
        # A callback is code, not configuration: it is not serialized.
        return default_to_dict(
            self, model=self.model, endpoint=self.endpoint, api_model=self.api_model,
            generation_kwargs=self.generation_kwargs,
        )

    @classmethod
    def from_dict(cls, data: Dict[str, Any]) -> "LectorGenerator":
        return default_from_dict(cls, data)

    @component.output_types(replies=List[str], meta=List[Dict[str, Any]])
    def run(self, prompt: str, generation_kwargs: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
        """The model's reply to ``prompt``, with its finish reason and timings as ``meta``."""
        self.warm_up()
        assert self._generator is not None
        settings = {**self.generation_kwargs, **(generation_kwargs or {})}
        callback = self.streaming_callback
        on_token = None if callback is None else (lambda piece: callback(StreamingChunk(content=piece)))
        reply = self._generator.chat([{"role": "user", "content": prompt}], on_token=on_token, **settings)
        meta = {"model": self._generator.name, "finish_reason": reply["finish_reason"], "timings": reply["timings"]}
        return {"replies": [reply["text"]], "meta": [meta]}


#: The metrics :class:`LectorAnswerEvaluator` reports, as ``lector eval equivalence`` names them.
ANSWER_METRICS = ("exact_match", "f1", "equivalent", "key_fact")


@component
class LectorAnswerEvaluator:
    """lector's answer metrics as a Haystack evaluator: for each predicted answer against its
    ground truths, ``metric`` is SQuAD's ``exact_match`` or ``f1`` (the official normalisation),
    ``equivalent`` (the same meaning by rules: numbers, dates, units, acronyms; Haystack's
    exact match would miss them) or ``key_fact`` (a ground truth inside the answer as whole
    tokens, for verbose generated answers). ``score`` is the mean; ``answer_tokens`` says how long
    the answers were, so that verbosity cannot game ``key_fact``."""

    def __init__(self, metric: str = "f1") -> None:
        if metric not in ANSWER_METRICS:
            raise ValueError(f"metric must be one of {', '.join(ANSWER_METRICS)}, not {metric!r}")
        self.metric = metric

    def to_dict(self) -> Dict[str, Any]:
        return default_to_dict(self, metric=self.metric)

    @classmethod
    def from_dict(cls, data: Dict[str, Any]) -> "LectorAnswerEvaluator":
        return default_from_dict(cls, data)

    @component.output_types(score=float, individual_scores=List[float], answer_tokens=List[int])
    def run(self, ground_truth_answers: List[Any], predicted_answers: List[Optional[str]]) -> Dict[str, Any]:
        """Scores each of ``predicted_answers`` against its ground truth (a string or a list of
        acceptable strings); a missing prediction (``None``) scores 0."""
        if len(ground_truth_answers) != len(predicted_answers):
            raise ValueError("ground_truth_answers and predicted_answers must have the same length")
        items = [
            {"answer": answer or "", "golds": [golds] if isinstance(golds, str) else list(golds)}
            for golds, answer in zip(ground_truth_answers, predicted_answers)
        ]
        judged = lector.eval.equivalence(items)["per_item"] if items else []
        scores = [float(j[self.metric]) for j in judged]
        return {
            "score": sum(scores) / len(scores) if scores else 0.0,
            "individual_scores": scores,
            "answer_tokens": [j["answer_tokens"] for j in judged],
        }
