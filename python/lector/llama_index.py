"""LlamaIndex over lector (``pip install lector[llama-index]``, llama-index-core 0.14).

- :class:`LectorRetriever`: passages of a lector index (BM25, dense or hybrid) as nodes;
- :class:`LectorVectorStore`: a vector store whose nodes and vectors live in a lector index
  (cosine similarity, metadata filters, dense or hybrid queries);
- :class:`LectorEmbedding`: lector's sentence embedder (all-MiniLM-L6-v2) as an embed model;
- :class:`LectorLLM`: lector's generator (a local GGUF model or an endpoint) as an LLM.

>>> from llama_index.core.query_engine import RetrieverQueryEngine
>>> from lector.llama_index import LectorLLM, LectorRetriever
>>> engine = RetrieverQueryEngine.from_args(LectorRetriever("/tmp/lector-sample"), llm=LectorLLM())  # doctest: +SKIP
>>> engine.query("Which team won Super Bowl 50?")  # doctest: +SKIP
"""

from __future__ import annotations

import math
from typing import Any, Dict, List, Optional, Sequence, Union

from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.base.llms.types import CompletionResponse, CompletionResponseGen, LLMMetadata
from llama_index.core.bridge.pydantic import PrivateAttr
from llama_index.core.llms.callbacks import llm_completion_callback
from llama_index.core.llms.custom import CustomLLM
from llama_index.core.retrievers import BaseRetriever
from llama_index.core.schema import BaseNode, MetadataMode, NodeWithScore, QueryBundle, TextNode
from llama_index.core.vector_stores.types import (
    BasePydanticVectorStore,
    FilterCondition,
    FilterOperator,
    MetadataFilter,
    MetadataFilters,
    VectorStoreQuery,
    VectorStoreQueryMode,
    VectorStoreQueryResult,
)
from llama_index.core.vector_stores.utils import metadata_dict_to_node, node_to_metadata_dict

import lector

__all__ = ["LectorEmbedding", "LectorLLM", "LectorRetriever", "LectorVectorStore"]


class LectorRetriever(BaseRetriever):
    """Passages of a lector index as nodes: the passage text, the document's metadata plus
    ``doc_id``, ``title``, ``passage``, ``start`` and ``end`` (character offsets in the document),
    and the retrieval score.

    Args:
        index: The index directory or a :class:`lector.Index`.
        similarity_top_k: Passages to return.
        mode: ``"bm25"``, ``"dense"`` or ``"hybrid"`` (default: hybrid on an index that embeds
            its passages, else BM25).
        filter: lector's filter text or a Haystack filter dict.
    """

    def __init__(
        self,
        index: Union[str, lector.Index],
        similarity_top_k: int = 4,
        mode: Optional[str] = None,
        filter: Optional[Union[str, Dict[str, Any]]] = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.index = index if isinstance(index, lector.Index) else lector.Index(index)
        self.similarity_top_k = similarity_top_k
        self.mode = mode
        self.filter = filter

    def _retrieve(self, query_bundle: QueryBundle) -> List[NodeWithScore]:
        hits = self.index.search(query_bundle.query_str, self.similarity_top_k, mode=self.mode, filter=self.filter)
        return [NodeWithScore(node=_passage_node(h), score=h.score) for h in hits]


def _passage_node(hit: lector.Hit) -> TextNode:
    metadata: Dict[str, Any] = dict(hit.metadata or {})
    metadata.update(doc_id=hit.doc_id, title=hit.title, passage=hit.passage, start=hit.start, end=hit.end)
    return TextNode(id_=f"{hit.doc_id}#p{hit.passage}", text=hit.text, metadata=metadata)


class LectorVectorStore(BasePydanticVectorStore):
    """A LlamaIndex vector store over a lector index: each node is a lector document (its text,
    its metadata with LlamaIndex's node fields, its embedding normalised to unit length and kept
    as the document's own vector under ``embedding_model``). Queries are dense (cosine
    similarity) or, in ``hybrid`` mode with the query's text, fused with BM25 by lector. Filters:
    ``==``, ``!=``, ``>``, ``>=``, ``<``, ``<=``, ``in``, ``nin`` and ``is_empty``, joined by
    ``and``, ``or`` or ``not``; other operators are refused by name.

    Args:
        path: The index directory (created by the first add).
        embedding_model: The name the nodes' embeddings are kept under; an index refuses
            vectors of another name.
    """

    stores_text: bool = True
    is_embedding_query: bool = True
    flat_metadata: bool = False
    path: str
    embedding_model: str = "llama-index"
    _index: lector.Index = PrivateAttr()

    def __init__(self, path: str, embedding_model: str = "llama-index", **kwargs: Any) -> None:
        super().__init__(path=path, embedding_model=embedding_model, **kwargs)
        self._index = lector.Index(path)

    @classmethod
    def class_name(cls) -> str:
        return "LectorVectorStore"

    @property
    def client(self) -> lector.Index:
        return self._index

    def add(self, nodes: Sequence[BaseNode], **add_kwargs: Any) -> List[str]:
        """Adds ``nodes`` (with their embeddings); a node id already stored is replaced."""
        documents = []
        for node in nodes:
            embedding = node.get_embedding()
            documents.append(
                lector.Document(
                    id=node.node_id,
                    text=node.get_content(metadata_mode=MetadataMode.NONE),
                    metadata=node_to_metadata_dict(node, remove_text=True, flat_metadata=False),
                    embedding=_unit(embedding),
                    embedding_model=self.embedding_model,
                )
            )
        if documents:
            self._index.add(documents)
        return [node.node_id for node in nodes]

    def delete(self, ref_doc_id: str, **delete_kwargs: Any) -> None:
        """Deletes the nodes of the source document ``ref_doc_id``."""
        if self._index.count() == 0:
            return
        nodes = self._index.documents(filter={"field": "meta.ref_doc_id", "operator": "==", "value": ref_doc_id})
        if nodes:
            self._index.delete([d.id for d in nodes])

    def query(self, query: VectorStoreQuery, **kwargs: Any) -> VectorStoreQueryResult:
        """The ``similarity_top_k`` nodes nearest to the query's embedding (cosine)."""
        if query.mode not in (VectorStoreQueryMode.DEFAULT, VectorStoreQueryMode.HYBRID):
            raise ValueError(f"LectorVectorStore answers default and hybrid queries, not {query.mode.value}")
        if query.query_embedding is None:
            raise ValueError("LectorVectorStore needs the query's embedding")
        if self._index.count() == 0:
            return VectorStoreQueryResult(nodes=[], similarities=[], ids=[])
        hybrid = query.mode == VectorStoreQueryMode.HYBRID and bool(query.query_str)
        found = self._index.search_documents(
            query.query_str if hybrid else "",
            query.similarity_top_k,
            mode="hybrid" if hybrid else "dense",
            filter=_filter(query),
            vector=_unit(query.query_embedding),
        )
        nodes = [metadata_dict_to_node(d.metadata or {}, text=d.text) for d, _ in found]
        return VectorStoreQueryResult(nodes=nodes, similarities=[s for _, s in found], ids=[d.id for d, _ in found])


def _unit(vector: Optional[Sequence[float]]) -> Optional[List[float]]:
    if vector is None:
        return None
    norm = math.sqrt(sum(x * x for x in vector))
    if norm == 0 or not math.isfinite(norm):
        raise ValueError("an embedding with no direction (all zeros) or a value that is not finite")
    return [x / norm for x in vector]


#: LlamaIndex's filter operators as Haystack filter dict operators (lector's JSON filters).
_OPERATORS = {
    FilterOperator.EQ: "==",
    FilterOperator.NE: "!=",
    FilterOperator.GT: ">",
    FilterOperator.GTE: ">=",
    FilterOperator.LT: "<",
    FilterOperator.LTE: "<=",
    FilterOperator.IN: "in",
    FilterOperator.NIN: "not in",
}


def _filter(query: VectorStoreQuery) -> Optional[Dict[str, Any]]:
    """The query's metadata filters, node ids and document ids as one lector filter."""
    conditions = []
    if query.filters is not None and query.filters.filters:
        conditions.append(_filters(query.filters))
    if query.node_ids:
        conditions.append({"field": "id", "operator": "in", "value": list(query.node_ids)})
    if query.doc_ids:
        conditions.append({"field": "meta.ref_doc_id", "operator": "in", "value": list(query.doc_ids)})
    if not conditions:
        return None
    return conditions[0] if len(conditions) == 1 else {"operator": "AND", "conditions": conditions}


def _filters(filters: MetadataFilters) -> Dict[str, Any]:
    joins = {FilterCondition.AND: "AND", FilterCondition.OR: "OR", FilterCondition.NOT: "NOT"}
    conditions = [_filters(f) if isinstance(f, MetadataFilters) else _condition(f) for f in filters.filters]
    return {"operator": joins[filters.condition or FilterCondition.AND], "conditions": conditions}


def _condition(condition: MetadataFilter) -> Dict[str, Any]:
    field = f"meta.{condition.key}"
    if condition.operator == FilterOperator.IS_EMPTY:
        return {"field": field, "operator": "==", "value": None}
    if condition.operator not in _OPERATORS:
        raise ValueError(
            f"LectorVectorStore has no filter operator `{condition.operator.value}` (it has "
            f"{', '.join(o.value for o in _OPERATORS)}, is_empty)"
        )
    return {"field": field, "operator": _OPERATORS[condition.operator], "value": condition.value}


class LectorEmbedding(BaseEmbedding):
    """lector's sentence embedder (all-MiniLM-L6-v2 unless ``model`` names another checkpoint)
    as a LlamaIndex embed model: unit-length vectors."""

    _embedder: lector.Embedder = PrivateAttr()

    def __init__(self, model: Optional[str] = None, **kwargs: Any) -> None:
        embedder = lector.Embedder(model)
        kwargs.setdefault("model_name", embedder.model)
        super().__init__(**kwargs)
        self._embedder = embedder

    @classmethod
    def class_name(cls) -> str:
        return "LectorEmbedding"

    def _get_query_embedding(self, query: str) -> List[float]:
        return self._embedder.embed_queries([query])[0]

    async def _aget_query_embedding(self, query: str) -> List[float]:
        return self._get_query_embedding(query)

    def _get_text_embedding(self, text: str) -> List[float]:
        return self._embedder.embed([text])[0]

    def _get_text_embeddings(self, texts: List[str]) -> List[List[float]]:
        return self._embedder.embed(texts)


class LectorLLM(CustomLLM):
    """lector's generator as a LlamaIndex LLM: the local GGUF ``model`` (default: the registry's
    SmolLM2-135M-Instruct) or ``api_model`` behind ``endpoint``; a completion is the reply to the
    prompt as one user message. ``temperature`` 0 decodes greedily."""

    max_new_tokens: int = 256
    temperature: float = 0.0
    seed: int = 0
    _generator: lector.Generator = PrivateAttr()

    def __init__(
        self,
        model: Optional[str] = None,
        *,
        endpoint: Optional[str] = None,
        api_model: Optional[str] = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self._generator = lector.Generator(model, endpoint=endpoint, api_model=api_model)

    @classmethod
    def class_name(cls) -> str:
        return "LectorLLM"

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(
            context_window=self._generator.context_window,
            num_output=self.max_new_tokens,
            model_name=self._generator.name,
        )

    def _chat(self, prompt: str, on_token: Any = None) -> Dict[str, Any]:
        return self._generator.chat(
            [{"role": "user", "content": prompt}],
            temperature=self.temperature,
            seed=self.seed,
            max_new_tokens=self.max_new_tokens,
            on_token=on_token,
        )

    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        reply = self._chat(prompt)
        return CompletionResponse(text=reply["text"], raw=reply)

    @llm_completion_callback()
    def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponseGen:
        text = ""
        for piece in lector._streamed(lambda on_token: self._chat(prompt, on_token=on_token)):
            text += piece
            yield CompletionResponse(text=text, delta=piece)
