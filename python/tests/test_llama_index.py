"""lector inside LlamaIndex (llama-index-core): a vector store, embed model and LLM of lector's
in a real query engine over the bundled sample, and lector's retriever in another."""

import pytest
from llama_index.core import Document, StorageContext, VectorStoreIndex
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.core.vector_stores.types import FilterOperator, MetadataFilter, MetadataFilters

import lector
from lector.llama_index import LectorEmbedding, LectorLLM, LectorRetriever, LectorVectorStore

from conftest import SAMPLE


def paragraphs(sample: dict):
    return [
        Document(text=p["context"], metadata={"title": a["title"], "n": i}, id_=f"{a['title']}#{i}")
        for a in sample["data"]
        for i, p in enumerate(a["paragraphs"])
    ]


@pytest.fixture(scope="module")
def llm() -> LectorLLM:
    return LectorLLM(max_new_tokens=32)


def test_a_query_engine_over_lectors_vector_store_embedder_and_generator(tmp_path, sample, llm):
    docs = paragraphs(sample)
    store = LectorVectorStore(str(tmp_path / "index"))
    vindex = VectorStoreIndex.from_documents(
        docs, storage_context=StorageContext.from_defaults(vector_store=store),
        embed_model=LectorEmbedding(), transformations=[],
    )
    stored = lector.Index(str(tmp_path / "index")).documents()
    assert len(stored) == len(docs) and all(len(d.embedding) == 384 for d in stored)

    first = sample["data"][0]["paragraphs"][0]
    question, gold = first["qas"][0]["question"], first["qas"][0]["answers"][0]["text"]
    response = vindex.as_query_engine(llm=llm, similarity_top_k=2).query(question)
    assert gold in response.source_nodes[0].node.get_content()
    assert response.source_nodes[0].node.ref_doc_id == docs[0].id_
    assert response.response.strip()  # SmolLM2-135M's words, from those two paragraphs

    only_n0 = MetadataFilters(filters=[MetadataFilter(key="n", value=0, operator=FilterOperator.EQ)])
    nodes = vindex.as_retriever(similarity_top_k=5, filters=only_n0).retrieve(question)
    assert nodes and all(n.node.metadata["n"] == 0 for n in nodes)
    contains = MetadataFilters(filters=[MetadataFilter(key="title", value="x", operator=FilterOperator.CONTAINS)])
    with pytest.raises(ValueError, match="contains"):
        vindex.as_retriever(filters=contains).retrieve(question)

    vindex.delete_ref_doc(docs[0].id_)
    assert lector.Index(str(tmp_path / "index")).count() == len(docs) - 1


def test_lectors_retriever_in_a_query_engine_and_the_llm_streams(tmp_path, sample, llm):
    index = lector.Index(str(tmp_path / "bm25"))
    index.add(paths=[str(SAMPLE)])
    engine = RetrieverQueryEngine.from_args(LectorRetriever(index, similarity_top_k=3), llm=llm)
    question = sample["data"][0]["paragraphs"][0]["qas"][0]["question"]
    response = engine.query(question)
    assert [n.node.metadata["doc_id"] for n in response.source_nodes] == [h.doc_id for h in index.search(question, 3)]
    assert response.response.strip()

    prompt = "Name one planet of the solar system."
    deltas = [r.delta for r in llm.stream_complete(prompt)]
    assert len(deltas) > 1 and "".join(deltas) == llm.complete(prompt).text
