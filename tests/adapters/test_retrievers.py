"""retrievers=[langchain] and [llamaindex] on the sample: real components (LangChain's
InMemoryVectorStore and BM25Retriever, LlamaIndex's VectorStoreIndex and a query engine) over
rag_lab's chunks and embedder, mapped back by id, cached per query, behind the allow-list."""

from __future__ import annotations

import pytest

from rag_lab.cache import open_cache
from rag_lab.embedder import HashingEmbedder
from rag_lab.errors import ConfigError
from rag_lab.pipeline.build import check_code_loading, instantiate
from rag_lab.ranking import ranked
from rag_lab.retrievers import DenseRetriever, LangChainRetriever, LlamaIndexRetriever
from rag_lab.tokenizer import JiebaTokenizer


@pytest.fixture(scope="module")
def corpus(sample_chunks):
    data, chunks = sample_chunks
    queries = {q: x.text for q, x in list(data.queries.items())[:40]}
    return chunks, queries


@pytest.fixture(scope="module")
def embedder():
    return HashingEmbedder(JiebaTokenizer())


@pytest.fixture(scope="module")
def dense_run(corpus, embedder):
    """retrievers=[dense]'s scores of every chunk, per query."""
    chunks, queries = corpus
    native = DenseRetriever(embedder)
    native.index(chunks)
    return native.retrieve(queries, len(chunks))


def _same_ranking(run, want, queries, k=10):
    """The same ranking up to ties: the chunk at each rank has the native score of that rank
    (the sample holds identical sections in two versions of a manual)."""
    for q in queries:
        got = [want[q][c] for c in ranked(run[q])]
        assert got == pytest.approx(sorted(want[q].values(), reverse=True)[:k], abs=1e-5), q
        assert len(got) == k


def test_a_langchain_vector_store_over_rags_embedder_ranks_as_the_dense_retriever(
    corpus, embedder, dense_run
):
    chunks, queries = corpus
    node = {
        "_target_": "rag_lab.retrievers.LangChainRetriever",
        "factory": "langchain_core.vectorstores.InMemoryVectorStore.from_documents",
        "embedder": embedder,
        "embedder_argument": "embedding",
    }
    r = instantiate(node, "retrievers.langchain")
    r.index(chunks)
    run = r.retrieve(queries, 10)
    _same_ranking(run, dense_run, queries)  # k=10 reached the vector store retriever
    assert r.stats["mapped_by_metadata"] == r.stats["sources"] == 400
    assert r.stats["unmapped_sources"] == 0


def test_langchain_bm25_retriever_runs_as_langchain_ranks_it(corpus):
    from langchain_community.retrievers import BM25Retriever

    from rag_lab.adapters.langchain import to_documents

    chunks, queries = corpus
    r = LangChainRetriever(
        "langchain_community.retrievers.BM25Retriever.from_documents", corpus_argument="documents"
    )
    r.index(chunks)
    run = r.retrieve(queries, 5)
    direct = BM25Retriever.from_documents(to_documents(chunks), k=5)
    for q, text in queries.items():
        assert ranked(run[q]) == [d.metadata["chunk_id"] for d in direct.invoke(text)]
    # a real ranking: a query quoting an alarm code finds a chunk with that code first
    code = next(q for q, t in queries.items() if "E120" in t)
    assert "E120" in {c.chunk_id: c for c in chunks}[ranked(run[code])[0]].text


def test_a_llamaindex_vector_index_ranks_as_the_dense_retriever(corpus, embedder, dense_run):
    chunks, queries = corpus
    r = LlamaIndexRetriever("llama_index.core.VectorStoreIndex", embedder=embedder)
    r.index(chunks)
    run = r.retrieve(queries, 10)
    _same_ranking(run, dense_run, queries)
    assert r.stats["mapped_by_metadata"] == 400


def test_a_llamaindex_query_engine_as_a_retriever_gives_its_source_nodes(
    corpus, embedder, dense_run
):
    chunks, queries = corpus
    r = LlamaIndexRetriever(
        "rag_lab.adapters.examples.tutorial_query_engine", {"k": 3}, embedder=embedder
    )
    r.index(chunks)
    run = r.retrieve(queries, 10)
    _same_ranking(run, dense_run, queries, k=3)  # the engine's own top 3, whatever k asks


def test_outputs_are_cached_per_query_and_keyed_by_package_versions(
    corpus, embedder, tmp_path, monkeypatch
):
    chunks, queries = corpus
    cache = open_cache(tmp_path / "cache")

    def fresh():
        r = LangChainRetriever(
            "langchain_core.vectorstores.InMemoryVectorStore.from_documents",
            embedder=embedder,
            embedder_argument="embedding",
        )
        r.attach_cache(cache.view(r.cache_namespace))
        r.index(chunks)
        return r

    first = fresh()
    run = first.retrieve(queries, 10)
    assert "build_seconds" in first.stats and first.stats["adapter_cache_hits"] == 0
    assert first.identity["packages"]["langchain-core"]
    again = fresh()
    assert again.retrieve(queries, 10) == run
    assert "build_seconds" not in again.stats  # nothing built: every query read back
    assert again.stats["adapter_cache_hits"] == len(set(queries.values()))
    assert again.stats["mapped_by_metadata"] == 400  # counts come back with the outputs
    # another langchain-core release is another key
    import rag_lab.retrievers._adapter as adapter

    real = adapter.package_versions
    monkeypatch.setattr(
        adapter, "package_versions", lambda fw: {**real(fw), "langchain-core": "0.0.1"}
    )
    newer = fresh()
    assert newer.retrieve(queries, 10) == run
    assert newer.stats["adapter_cache_hits"] == 0 and "build_seconds" in newer.stats


def _build(factory, **args):
    node = {"_target_": "rag_lab.retrievers.LangChainRetriever", "factory": factory, **args}
    return instantiate(node, "retrievers.langchain")


def test_the_factory_is_behind_the_allow_list_with_an_explicit_opt_in():
    # one line naming the full key (build turns the stage's OptionError into a ConfigError)
    with pytest.raises(ConfigError, match=r"^retrievers.langchain.factory='os.system': not allow"):
        _build("os.system")
    # an allowed prefix that resolves outside the allowed packages (importlib's function)
    with pytest.raises(ConfigError, match="defined in importlib"):
        _build("rag_lab.adapters.imports.importlib.import_module")
    with pytest.raises(ConfigError, match=r"not allowed.*allow_imports: \[tests\]"):
        _build("tests.adapters.foreign.answer_only")
    opted = _build("tests.adapters.foreign.answer_only", allow_imports=["tests.adapters"])
    assert opted.factory == "tests.adapters.foreign.answer_only"
    with pytest.raises(ConfigError, match="has no NoSuchRetriever"):
        _build("langchain_community.retrievers.NoSuchRetriever")
    with pytest.raises(ConfigError, match="cannot import no_such_package"):
        _build("no_such_package.X", allow_imports=["no_such_package"])
    # a config read from disk (an export) may not opt in by itself
    check_code_loading({"retrievers": {"x": {"allow_imports": []}}})
    with pytest.raises(ConfigError, match="allow_imports"):
        check_code_loading({"retrievers": {"x": {"allow_imports": ["my_rag"]}}})


def test_what_a_factory_builds_must_be_a_retriever(corpus):
    chunks, queries = corpus
    r = LangChainRetriever("tests.adapters.foreign.answer_only", allow_imports=["tests.adapters"])
    r.index(chunks)
    with pytest.raises(ConfigError, match="not a langchain BaseRetriever or VectorStore"):
        r.retrieve(queries, 5)
