"""lector's LangChain components under LangChain's own standard suites (langchain-tests):
`RetrieversIntegrationTests` for `LectorRetriever` over an index of the bundled sample, and
`VectorStoreIntegrationTests` for `LectorVectorStore` with the suite's own embeddings."""

import functools
import tempfile
from typing import Any, Dict, Type

import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_tests.integration_tests import RetrieversIntegrationTests, VectorStoreIntegrationTests

import lector
from lector.langchain import LectorRetriever, LectorVectorStore

from conftest import SAMPLE


@functools.lru_cache(maxsize=None)
def sample_index() -> lector.Index:
    """An index of the bundled sample, built once for the module (kept until the process ends)."""
    index = lector.Index(tempfile.mkdtemp(prefix="lector-langchain-") + "/index")
    index.add(paths=[str(SAMPLE)])
    return index


class TestLectorRetriever(RetrieversIntegrationTests):
    @property
    def retriever_constructor(self) -> Type[LectorRetriever]:
        return LectorRetriever

    @property
    def retriever_constructor_params(self) -> Dict[str, Any]:
        return {"index": sample_index()}

    @property
    def retriever_query_example(self) -> str:
        return "Which NFL team represented the AFC at Super Bowl 50?"


class TestLectorVectorStore(VectorStoreIntegrationTests):
    @pytest.fixture()
    def vectorstore(self, tmp_path) -> LectorVectorStore:
        return LectorVectorStore(str(tmp_path / "index"), self.get_embeddings())


def test_the_vector_store_keeps_its_model_and_filters(tmp_path):
    store = LectorVectorStore(str(tmp_path / "index"), DeterministicFakeEmbedding(size=6))
    ids = store.add_texts(["cats purr", "dogs bark", "kettles whistle"], [{"kind": "pet"}, {"kind": "pet"}, {"kind": "thing"}])
    # The texts' vectors are lector's documents' own, kept under the embeddings' name.
    stored = lector.Index(str(tmp_path / "index")).documents()
    assert [d.id for d in stored] == ids and {d.embedding_model for d in stored} == {"DeterministicFakeEmbedding"}
    found = store.similarity_search_with_score("dogs bark", k=3, filter='kind == "pet"')
    assert [d.page_content for d, _ in found][0] == "dogs bark" and len(found) == 2
    assert found[0][1] == pytest.approx(1.0, abs=1e-6)
    other = LectorVectorStore(str(tmp_path / "index"), DeterministicFakeEmbedding(size=6), embedding_model="another")
    with pytest.raises(lector.LectorError, match="another"):
        other.add_texts(["owls hoot"])
    assert LectorVectorStore.from_texts(["a b"], DeterministicFakeEmbedding(size=6), index=str(tmp_path / "i2")).get_by_ids(["nope"]) == []
