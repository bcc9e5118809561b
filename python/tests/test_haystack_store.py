"""`LectorDocumentStore` under Haystack's own document-store test classes
(`haystack.testing.document_store.DocumentStoreBaseTests`: count, write with each duplicate
policy, delete, and the whole filter suite), on a real index directory."""

import struct
from typing import List

import pytest
from haystack import Document
from haystack.document_stores.types import DuplicatePolicy
from haystack.testing.document_store import DocumentStoreBaseTests

import lector
from lector.haystack import LectorDocumentStore


def as_float32(values):
    """What a float32 store gives back for ``values``."""
    return None if values is None else [struct.unpack("f", struct.pack("f", x))[0] for x in values]


class TestLectorDocumentStore(DocumentStoreBaseTests):
    @pytest.fixture
    def document_store(self, tmp_path) -> LectorDocumentStore:
        return LectorDocumentStore(index=str(tmp_path / "index"))

    @staticmethod
    def assert_documents_are_equal(received: List[Document], expected: List[Document]):
        # Embeddings are stored as float32: expected back exactly as float32 rounds them.
        expected = [Document.from_dict({**d.to_dict(), "embedding": as_float32(d.embedding)}) for d in expected]
        assert received == expected

    def test_write_documents(self, document_store: LectorDocumentStore):
        # Without a policy, a known id fails the write (as Haystack's in-memory store).
        doc = Document(content="test doc")
        assert document_store.write_documents([doc]) == 1
        with pytest.raises(Exception, match="already stored"):
            document_store.write_documents([doc])
        self.assert_documents_are_equal(document_store.filter_documents(), [doc])


def test_the_store_round_trips_and_serves_dense_search(tmp_path):
    store = LectorDocumentStore(index=str(tmp_path / "index"), embedding_model="toy")
    docs = [
        Document(id="a", content="Cats purr.", meta={"kind": "pet", "year": 2020}, embedding=[1.0, 0.0, 0.0]),
        Document(id="b", content="Dogs bark.", meta={"kind": "pet", "year": 2024}, embedding=[0.0, 1.0, 0.0]),
        Document(id="c", content="Kettles whistle.", meta={"kind": "thing"}),
    ]
    assert store.write_documents(docs) == 3
    assert store.to_dict()["init_parameters"] == {"index": str(tmp_path / "index"), "embedding_model": "toy"}
    assert LectorDocumentStore.from_dict(store.to_dict()).filter_documents() == docs
    assert store.filter_documents({"field": "meta.year", "operator": ">=", "value": 2021}) == [docs[1]]
    # The index is lector's: dense search with the query's own vector, BM25 for the rest.
    index = lector.Index(str(tmp_path / "index"))
    assert [h.doc_id for h in index.search("", 3, vector=[0.1, 0.9, 0.0])] == ["b", "a"]
    assert [h.doc_id for h in index.search("kettles", 3)] == ["c"]
    with pytest.raises(lector.LectorError, match="outside lector"):
        index.search("", 3, vector=[1.0, 0.0])
    with pytest.raises(lector.LectorError, match="text-embedding-3-small"):
        LectorDocumentStore(index=str(tmp_path / "index"), embedding_model="text-embedding-3-small").write_documents(
            [Document(id="d", content="Owls hoot.", embedding=[0.0, 0.0, 1.0])]
        )
    assert store.write_documents([Document(id="a", content="Cats nap.")], policy=DuplicatePolicy.SKIP) == 0
    assert store.write_documents([Document(id="a", content="Cats nap.")], policy=DuplicatePolicy.OVERWRITE) == 1
    assert store.count_documents() == 3 and store.filter_documents({"field": "id", "operator": "==", "value": "a"})[0].content == "Cats nap."


def sample_paragraphs(sample: dict) -> List[Document]:
    """The bundled sample's paragraphs as Haystack documents, titled in their metadata."""
    return [
        Document(id=f"{article['title']}#{i}", content=p["context"], meta={"title": article["title"], "n": i})
        for article in sample["data"]
        for i, p in enumerate(article["paragraphs"])
    ]


def test_a_haystack_pipeline_writes_into_lector_and_reads_its_documents(tmp_path, sample):
    from haystack import Pipeline
    from haystack.components.writers import DocumentWriter
    from lector.haystack import LectorBM25Retriever, LectorReader

    store = LectorDocumentStore(index=str(tmp_path / "index"))
    writing = Pipeline()
    writing.add_component("writer", DocumentWriter(document_store=store, policy=DuplicatePolicy.OVERWRITE))
    paragraphs = sample_paragraphs(sample)
    assert writing.run({"writer": {"documents": paragraphs}})["writer"]["documents_written"] == len(paragraphs)
    assert store.count_documents() == len(paragraphs)

    qa = Pipeline()
    qa.add_component("retriever", LectorBM25Retriever(document_store=store, top_k=5))
    qa.add_component("reader", LectorReader(index=store.index))
    qa.connect("retriever.documents", "reader.documents")
    qa = Pipeline.loads(qa.dumps(), allowed_modules=["lector.haystack"])
    first = sample["data"][0]["paragraphs"][0]["qas"][0]
    q, gold = first["question"], {a["text"] for a in first["answers"]}
    result = qa.run({"retriever": {"query": q}, "reader": {"query": q}}, include_outputs_from={"retriever"})
    documents = result["retriever"]["documents"]
    assert len(documents) == 5 and all(d.score is not None for d in documents)
    assert [d.score for d in documents] == sorted((d.score for d in documents), reverse=True)
    assert result["reader"]["answers"][0].data in gold, gold
    # The same documents as lector's own document ranking; filters apply before ranking.
    ranked = lector.Index(store.index).search_documents(q, 5, mode="bm25")
    assert [d.id for d in documents] == [d.id for d, _ in ranked]
    only = {"field": "meta.n", "operator": ">=", "value": 5}
    filtered = qa.run({"retriever": {"query": q, "filters": only}, "reader": {"query": q}},
                      include_outputs_from={"retriever"})["retriever"]["documents"]
    assert filtered and all(d.meta["n"] >= 5 for d in filtered)


def test_embedding_and_hybrid_retrievers_with_the_documents_own_vectors(tmp_path):
    from haystack.document_stores.types import FilterPolicy
    from lector.haystack import LectorEmbeddingRetriever, LectorHybridRetriever

    store = LectorDocumentStore(index=str(tmp_path / "index"), embedding_model="toy")
    assert LectorEmbeddingRetriever(document_store=store).run(query_embedding=[1.0, 0.0])["documents"] == []
    store.write_documents([
        Document(id="a", content="Cats purr.", meta={"kind": "pet"}, embedding=[1.0, 0.0]),
        Document(id="b", content="Dogs bark loudly.", meta={"kind": "pet"}, embedding=[0.6, 0.8]),
        Document(id="c", content="Kettles whistle.", meta={"kind": "thing"}, embedding=[0.0, 1.0]),
    ])
    dense = LectorEmbeddingRetriever(document_store=store, top_k=2, return_embedding=True)
    found = dense.run(query_embedding=[0.0, 1.0])["documents"]
    assert [(d.id, round(d.score, 3)) for d in found] == [("c", 1.0), ("b", 0.8)]
    assert found[0].embedding == [0.0, 1.0]
    # Init filters, replaced (the default) or merged with run-time ones.
    pets = {"field": "meta.kind", "operator": "==", "value": "pet"}
    only_b = {"field": "id", "operator": "==", "value": "b"}
    merged = LectorEmbeddingRetriever(document_store=store, filters=pets, filter_policy=FilterPolicy.MERGE)
    assert [d.id for d in merged.run(query_embedding=[0.0, 1.0])["documents"]] == ["b", "a"]
    assert [d.id for d in merged.run(query_embedding=[0.0, 1.0], filters=only_b)["documents"]] == ["b"]
    replaced = LectorEmbeddingRetriever(document_store=store, filters=pets)
    assert [d.id for d in replaced.run(query_embedding=[0.0, 1.0], filters={"field": "id", "operator": "==", "value": "c"})["documents"]] == ["c"]
    again = LectorEmbeddingRetriever.from_dict(merged.to_dict())
    assert again.filter_policy == FilterPolicy.MERGE and again.document_store.index == store.index
    hybrid = LectorHybridRetriever(document_store=store, top_k=3)
    fused = hybrid.run(query="cats", query_embedding=[0.0, 1.0])["documents"]
    assert {d.id for d in fused} == {"a", "b", "c"} and fused[0].id in ("a", "c")
    with pytest.raises(Exception, match="FilterError|ISO 8601"):
        dense.run(query_embedding=[0.0, 1.0], filters={"field": "meta.kind", "operator": ">", "value": "pet"})


def test_a_haystack_rag_pipeline_on_lectors_parts_scored_by_lectors_metrics(tmp_path, sample):
    from haystack import Pipeline
    from haystack.components.builders import AnswerBuilder, PromptBuilder
    from lector.haystack import LectorAnswerEvaluator, LectorBM25Retriever, LectorGenerator

    store = LectorDocumentStore(index=str(tmp_path / "index"))
    store.write_documents(sample_paragraphs(sample))
    template = (
        "Answer the question from the passages in a few words.\n"
        "{% for d in documents %}Passage: {{ d.content }}\n{% endfor %}Question: {{ query }}\nAnswer:"
    )
    rag = Pipeline()
    rag.add_component("retriever", LectorBM25Retriever(document_store=store, top_k=2))
    rag.add_component("prompt", PromptBuilder(template=template, required_variables=["query", "documents"]))
    chunks = []
    rag.add_component("llm", LectorGenerator(generation_kwargs={"max_new_tokens": 24}, streaming_callback=chunks.append))
    rag.add_component("answers", AnswerBuilder())
    rag.connect("retriever.documents", "prompt.documents")
    rag.connect("prompt.prompt", "llm.prompt")
    rag.connect("llm.replies", "answers.replies")
    rag.connect("llm.meta", "answers.meta")
    rag.connect("retriever.documents", "answers.documents")
    qas = [qa for p in sample["data"][0]["paragraphs"][:3] for qa in p["qas"][:2]]
    predicted, golds = [], []
    for qa in qas:
        q = qa["question"]
        out = rag.run({"retriever": {"query": q}, "prompt": {"query": q}, "answers": {"query": q}})
        answer = out["answers"]["answers"][0]
        assert answer.meta["model"] and answer.documents
        predicted.append(answer.data)
        golds.append([a["text"] for a in qa["answers"]])
    assert "".join(c.content for c in chunks).strip()  # streamed as it was generated

    scores = {m: LectorAnswerEvaluator(metric=m).run(golds, predicted) for m in ("exact_match", "f1", "equivalent", "key_fact")}
    direct = lector.eval.equivalence([{"answer": p, "golds": g} for p, g in zip(predicted, golds)])["per_item"]
    for metric, result in scores.items():
        assert result["individual_scores"] == [float(j[metric]) for j in direct]
        assert result["score"] == pytest.approx(sum(result["individual_scores"]) / len(qas))
    assert scores["equivalent"]["score"] >= scores["exact_match"]["score"]
    # What exact match misses and the rules see.
    rules = LectorAnswerEvaluator(metric="equivalent").run([["3"], "February 7, 2016"], ["three", "7 February 2016"])
    assert rules["individual_scores"] == [1.0, 1.0]
    verbose = LectorAnswerEvaluator(metric="key_fact").run(["1996"], ["It was founded in 1996."])
    assert verbose["individual_scores"] == [1.0] and verbose["answer_tokens"] == [5]
    assert LectorAnswerEvaluator(metric="exact_match").run([["3"]], ["three"])["score"] == 0.0
    with pytest.raises(ValueError, match="metric"):
        LectorAnswerEvaluator(metric="bleu")
