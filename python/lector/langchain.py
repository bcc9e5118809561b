"""A LangChain retriever over a lector index (``pip install lector[langchain]``, langchain-core 1.x).

>>> from lector.langchain import LectorRetriever
>>> retriever = LectorRetriever.from_path("/tmp/lector-sample", k=3)  # doctest: +SKIP
>>> retriever.invoke("Which team won Super Bowl 50?")[0].metadata["doc_id"]  # doctest: +SKIP
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Union

from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from pydantic import ConfigDict

import lector

__all__ = ["LectorRetriever"]


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
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> List[Document]:
        hits = self.index.search(query, self.k, mode=self.mode, filter=self.filter)
        return [_document(h) for h in hits]


def _document(hit: lector.Hit) -> Document:
    metadata: Dict[str, Any] = dict(hit.metadata or {})
    metadata.update(
        doc_id=hit.doc_id, title=hit.title, passage=hit.passage, start=hit.start, end=hit.end, score=hit.score
    )
    return Document(page_content=hit.text, metadata=metadata, id=f"{hit.doc_id}#p{hit.passage}")
