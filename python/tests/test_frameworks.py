"""lector's components inside the real Haystack and LangChain packages."""

from haystack import Document, Pipeline
from haystack.components.retrievers.in_memory import InMemoryBM25Retriever
from haystack.document_stores.in_memory import InMemoryDocumentStore
from langchain_core.retrievers import BaseRetriever

import lector
from lector.haystack import LectorReader, LectorRetriever
from lector.langchain import LectorRetriever as LangChainRetriever


def haystack_qa(index: str) -> Pipeline:
    qa = Pipeline()
    qa.add_component("retriever", LectorRetriever(index=index, top_k=5))
    qa.add_component("reader", LectorReader(index=index))
    qa.connect("retriever.documents", "reader.documents")
    return qa


def test_a_haystack_pipeline_answers_as_lector_does(odqa):
    # Survives Haystack's serialization (the user allows the module, as for any component).
    qa = Pipeline.loads(haystack_qa(odqa["index"]).dumps(), allowed_modules=["lector.haystack"])
    for row in odqa["rows"]:
        q = row["question"]
        answers = qa.run({"retriever": {"query": q}, "reader": {"query": q}})["reader"]["answers"]
        assert answers[0].data == row["prediction"], q
        if answers[0].data is not None:
            assert answers[0].document.meta["doc_id"] == row["doc_id"]
            assert answers[0].document.content[answers[0].document_offset.start : answers[0].document_offset.end] == answers[0].data
        no_answer = [a for a in answers if a.data is None]
        assert len(no_answer) == 1 and no_answer[0].score == row["na_prob"]


def test_haystack_filters_and_documents_from_haystacks_own_retriever(odqa):
    retriever = LectorRetriever(index=odqa["index"], top_k=3)
    documents = retriever.run("Super Bowl", filters={"field": "meta.doc_id", "operator": "==", "value": "x"})["documents"]
    assert documents == []  # metadata filters apply to the document's own fields only
    by_id = retriever.run("Super Bowl", filters={"field": "id", "operator": "==", "value": "Super_Bowl_50#3"})["documents"]
    assert [d.meta["doc_id"] for d in by_id] == ["Super_Bowl_50#3"]

    store = InMemoryDocumentStore()
    store.write_documents([Document(content=h.text, id=f"{h.doc_id}#p{h.passage}") for h in lector.Index(odqa["index"]).search("Super Bowl", k=16)])
    qa = Pipeline()
    qa.add_component("retriever", InMemoryBM25Retriever(document_store=store, top_k=5))
    qa.add_component("reader", LectorReader(index=odqa["index"]))
    qa.connect("retriever.documents", "reader.documents")
    q = "Which team won Super Bowl 50?"
    answers = qa.run({"retriever": {"query": q}, "reader": {"query": q}})["reader"]["answers"]
    assert answers[0].data == "Denver Broncos" or answers[0].data == "Broncos"
    assert answers[0].document.id.startswith("Super_Bowl_50#")


def test_a_langchain_retriever_returns_the_index_passages(odqa):
    retriever = LangChainRetriever.from_path(odqa["index"], k=3)
    assert isinstance(retriever, BaseRetriever)
    query = "Where was Super Bowl 50 played?"
    documents = retriever.invoke(query)
    hits = lector.Index(odqa["index"]).search(query, k=3)
    assert [d.metadata["doc_id"] for d in documents] == [h.doc_id for h in hits]
    assert [d.page_content for d in documents] == [h.text for h in hits]
    only = LangChainRetriever.from_path(odqa["index"], k=3, filter='id == "Super_Bowl_50#1"').invoke(query)
    assert only and {d.metadata["doc_id"] for d in only} == {"Super_Bowl_50#1"}


def test_the_haystack_reader_abstains_when_nothing_was_retrieved(odqa):
    # As the README says: a no-answer entry whenever lector abstains, no passages included.
    q = "Which team won Super Bowl 50?"
    answers = LectorReader(index=odqa["index"]).run(query=q, documents=[])["answers"]
    assert [(a.data, a.score, a.meta["abstention"]) for a in answers] == [(None, 1.0, "no_passages")]
    assert LectorReader(index=odqa["index"], no_answer=False).run(query=q, documents=[])["answers"] == []
