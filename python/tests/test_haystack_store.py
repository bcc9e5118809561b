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
