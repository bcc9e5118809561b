"""LangChain over lector (``pip install lector[langchain]``, langchain-core 1.x).

- :class:`LectorRetriever`: passages of a lector index (BM25, dense or hybrid);
- :class:`LectorVectorStore`: a ``VectorStore`` whose vectors come from any LangChain
  ``Embeddings`` and live in a lector index (with its filters and BM25 beside them).

>>> from lector.langchain import LectorRetriever
>>> retriever = LectorRetriever.from_path("/tmp/lector-sample", k=3)  # doctest: +SKIP
>>> retriever.invoke("Which team won Super Bowl 50?")[0].metadata["doc_id"]  # doctest: +SKIP
"""

from __future__ import annotations

import math
import uuid
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple, Union

from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.retrievers import BaseRetriever
from langchain_core.vectorstores import VectorStore
from pydantic import ConfigDict

import lector

__all__ = ["LectorRetriever", "LectorVectorStore"]


class LectorRetriever(BaseRetriever):
    """Passages of a lector index (BM25, dense or hybrid) as LangChain documents: the passage text
    as ``page_content``; the document's metadata plus ``doc_id``, ``title``, ``passage``,
    ``start``, ``end`` (character offsets in the document) and ``score`` as ``metadata``."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    index: lector.Index
    #: Passages to return.
    k: int = 4
    #: ``"bm25"``, ``"dense"`` or ``"hybrid"`` (default: hybrid on a dense index, else BM25).
    mode: Optional[str] = None
    #: lector's filter text or a Haystack filter dict.
    filter: Optional[Union[str, Dict[str, Any]]] = None

    @classmethod
    def from_path(cls, path: str, **kwargs: Any) -> "LectorRetriever":
        """The retriever over the index directory ``path``."""
        return cls(index=lector.Index(path), **kwargs)

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, k: Optional[int] = None
    ) -> List[Document]:
        hits = self.index.search(query, self.k if k is None else k, mode=self.mode, filter=self.filter)
        return [_document(h) for h in hits]


def _document(hit: lector.Hit) -> Document:
    metadata: Dict[str, Any] = dict(hit.metadata or {})
    metadata.update(
        doc_id=hit.doc_id, title=hit.title, passage=hit.passage, start=hit.start, end=hit.end, score=hit.score
    )
    return Document(page_content=hit.text, metadata=metadata, id=f"{hit.doc_id}#p{hit.passage}")


class LectorVectorStore(VectorStore):
    """A LangChain ``VectorStore`` over a lector index: texts are embedded by ``embedding`` (any
    LangChain ``Embeddings``), their vectors normalised to unit length (scores are cosine
    similarities) and kept by lector as the documents' own vectors under ``embedding_model``;
    ``filter`` takes lector's filter text or a Haystack filter dict.

    Args:
        index: The index directory (created by the first add) or a :class:`lector.Index`.
        embedding: The model that embeds texts and queries.
        embedding_model: The name its vectors are kept under (default: the class name of
            ``embedding`` and its ``model`` attribute when it has one); an index refuses vectors of
            another name.
    """

    def __init__(
        self, index: Union[str, lector.Index], embedding: Embeddings, embedding_model: Optional[str] = None
    ) -> None:
        self.index = index if isinstance(index, lector.Index) else lector.Index(index)
        self.embedding = embedding
        named = getattr(embedding, "model", None)
        self.embedding_model = embedding_model or ":".join(
            x for x in (type(embedding).__name__, named if isinstance(named, str) else None) if x
        )

    @property
    def embeddings(self) -> Embeddings:
        return self.embedding

    def add_texts(
        self,
        texts: Iterable[str],
        metadatas: Optional[List[dict]] = None,
        *,
        ids: Optional[List[Optional[str]]] = None,
        **kwargs: Any,
    ) -> List[str]:
        """Embeds and adds ``texts``; an id already stored is replaced. Returns the ids (new
        ones are UUIDs)."""
        texts = list(texts)
        ids = [i or str(uuid.uuid4()) for i in (ids or [None] * len(texts))]
        metadatas = metadatas or [{} for _ in texts]
        if not len(ids) == len(metadatas) == len(texts):
            raise ValueError("texts, metadatas and ids must have the same length")
        vectors = self.embedding.embed_documents(texts) if texts else []
        self.index.add(
            [
                lector.Document(
                    id=i, text=t, metadata=dict(m) or None, embedding=_unit(v), embedding_model=self.embedding_model
                )
                for i, t, m, v in zip(ids, texts, metadatas, vectors)
            ]
        )
        return ids

    def delete(self, ids: Optional[List[str]] = None, **kwargs: Any) -> Optional[bool]:
        """Deletes the documents with these ids (ids not stored are ignored)."""
        if ids:
            self.index.delete(ids)
        return True

    def get_by_ids(self, ids: Sequence[str], /) -> List[Document]:
        """The stored documents with these ids, in that order (ids not stored are left out)."""
        if not ids or self.index.count() == 0:
            return []
        found = {d.id: d for d in self.index.documents(filter={"field": "id", "operator": "in", "value": list(ids)})}
        return [_langchain_document(found[i]) for i in ids if i in found]

    def similarity_search(
        self, query: str, k: int = 4, filter: Optional[Union[str, Dict[str, Any]]] = None, **kwargs: Any
    ) -> List[Document]:
        return [d for d, _ in self.similarity_search_with_score(query, k, filter=filter)]

    def similarity_search_with_score(
        self, query: str, k: int = 4, filter: Optional[Union[str, Dict[str, Any]]] = None, **kwargs: Any
    ) -> List[Tuple[Document, float]]:
        """The ``k`` documents nearest to ``query`` with their cosine similarity."""
        return self._nearest(self.embedding.embed_query(query), k, filter)

    def similarity_search_by_vector(
        self, embedding: List[float], k: int = 4, filter: Optional[Union[str, Dict[str, Any]]] = None, **kwargs: Any
    ) -> List[Document]:
        return [d for d, _ in self._nearest(embedding, k, filter)]

    def _nearest(self, vector: List[float], k: int, filter: Any) -> List[Tuple[Document, float]]:
        if self.index.count() == 0:
            return []  # nothing added yet: there may be no index to search
        found = self.index.search_documents("", k, mode="dense", filter=filter, vector=_unit(vector))
        return [(_langchain_document(d), score) for d, score in found]

    def _select_relevance_score_fn(self) -> Callable[[float], float]:
        return lambda similarity: (1.0 + similarity) / 2.0  # cosine similarity to [0, 1]

    @classmethod
    def from_texts(
        cls,
        texts: List[str],
        embedding: Embeddings,
        metadatas: Optional[List[dict]] = None,
        *,
        ids: Optional[List[str]] = None,
        index: Optional[Union[str, lector.Index]] = None,
        **kwargs: Any,
    ) -> "LectorVectorStore":
        """A store over ``index`` (required) holding ``texts``."""
        if index is None:
            raise ValueError("from_texts needs index=: the lector index directory to write")
        store = cls(index, embedding, **kwargs)
        store.add_texts(texts, metadatas, ids=ids)
        return store


def _unit(vector: Sequence[float]) -> List[float]:
    norm = math.sqrt(sum(x * x for x in vector))
    if norm == 0 or not math.isfinite(norm):
        raise ValueError("an embedding with no direction (all zeros) or a value that is not finite")
    return [x / norm for x in vector]


def _langchain_document(document: lector.Document) -> Document:
    return Document(id=document.id, page_content=document.text, metadata=document.metadata or {})
