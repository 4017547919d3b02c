"""Every cache key recipe, and the one canonical form they hash.

A stage's key hashes what defines its output: its resolved config subtree, the keys of its inputs
(or the corpus fingerprint) and the identity of any model it runs (name or path plus a hash of
the weights). Change one of those and exactly that stage and the ones downstream miss.

Per-item keys (one embedding per chunk text, one score per (query, chunk text) pair) live in a
table named by the model's identity, so an edited document re-encodes only its own chunks.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from typing import Any

from rag_lab._version import __version__


def canonical(obj: Any) -> bytes:
    """Key order, whitespace and non-ASCII spelling do not change the bytes; anything JSON cannot
    hold is written with ``str``."""
    return json.dumps(
        obj, sort_keys=True, default=str, ensure_ascii=False, separators=(",", ":")
    ).encode()


def _digest(*parts: bytes, size: int = 20) -> str:
    h = hashlib.blake2b(digest_size=size)
    for p in parts:  # length-prefixed: ("ab", "c") and ("a", "bc") differ
        h.update(len(p).to_bytes(8, "little"))
        h.update(p)
    return h.hexdigest()


def stage_key(stage: str, config: Any, *inputs: str) -> str:
    """Key of a stage: its name, its resolved config, the keys/fingerprints of its inputs and the
    rag_lab release (a new release's parser or chunker may cut the same config differently;
    per-item embeddings and pair scores, keyed by model identity, survive a release)."""
    payload = {"stage": stage, "config": config, "inputs": list(inputs), "rag_lab": __version__}
    return hashlib.blake2b(canonical(payload), digest_size=20).hexdigest()


# where an endpoint stage's server lives and how it is reached, not what it computes: dropped from
# an embedder's config before it keys a stage (its identity names the model), so the same model id
# on another host or behind another key, timeout or rate limit reuses the cached indexes and runs
ENDPOINT_FIELDS = frozenset(
    {"base_url", "api_key_env", "timeout", "retries", "backoff"}
    | {"requests_per_second", "tokens_per_minute"}
)


# embedder configs that wrap another and change only which processes encode (encoding=ray): the
# wrapped embedder's config keys the dense retriever's index and runs
ENCODING_WRAPPERS = frozenset({"rag_lab.distributed.RayShardedEmbedder"})


def embedder_key_config(node: Mapping[str, Any]) -> dict[str, Any]:
    """An embedder's config as it keys the stages downstream of it: the embedder an encoding
    wrapper wraps (``ENCODING_WRAPPERS``), without the ``ENDPOINT_FIELDS`` (a copy)."""
    inner = node.get("embedder")
    if node.get("_target_") in ENCODING_WRAPPERS and isinstance(inner, Mapping):
        node = inner
    return {k: v for k, v in node.items() if k not in ENDPOINT_FIELDS}


def content_key(identity: Any, texts: Iterable[str]) -> str:
    """Key of an ordered list of texts under an encoder's identity."""
    return _digest(canonical(identity), *(t.encode("utf-8") for t in texts))


# -- corpus stages ------------------------------------------------------------------------------
def documents_key(parser_config: Any, corpus_fingerprint: str) -> str:
    return stage_key("documents", parser_config, corpus_fingerprint)


def parsed_file_key(parser_config: Any, file_fingerprint: str) -> str:
    """One source file parsed (the per-file entry: an edited PDF is the only one re-OCR'd)."""
    return stage_key("parsed_file", parser_config, file_fingerprint)


def chunks_key(chunker_config: Any, documents: str) -> str:
    return stage_key("chunks", chunker_config, documents)


def lineage_key(parser_config: Any, chunker_config: Any, corpus: str) -> str:
    """The note of one corpus (its folder, as configured to be read and chunked): whatever its
    files hold, so that an edited corpus finds what it was built as before."""
    return stage_key("lineage", {"parser": parser_config, "chunker": chunker_config}, corpus)


def index_key(retriever_config: Any, identity: Any, chunks: str) -> str:
    return stage_key("index", {"retriever": retriever_config, "identity": identity}, chunks)


def queries_key(queries: Mapping[str, str]) -> str:
    return stage_key("queries", sorted(queries.items()))


def run_key(
    retriever_config: Any,
    identity: Any,
    k: int,
    chunks: str,
    queries: Mapping[str, str],
    query_metadata: Mapping[str, Mapping[str, Any]] | None = None,
) -> str:
    """A retriever's run over ``queries`` (the texts after every query transform: an expansion's
    terms, a dictionary mined from the corpus, key it through them). ``query_metadata``: the
    metadata fields a ``QueryMetadataAware`` retriever reads (``None``: it reads none, and the key
    is the one it always was)."""
    config: dict[str, Any] = {"retriever": retriever_config, "identity": identity, "k": k}
    if query_metadata is not None:
        config["query_metadata"] = sorted((q, dict(m)) for q, m in query_metadata.items())
    return stage_key("run", config, chunks, queries_key(queries))


def adapter_key(recipe: Any, identity: Any, corpus: str, k: int, query: str) -> str:
    """One query's output of a foreign component (``rag_lab/retrievers/_adapter.py``): its
    rebuild recipe (import path, arguments), identity (package versions, embedder), the corpus
    it was built over (``content_key`` of the chunk ids and texts), the depth and the query."""
    return stage_key("adapter", {"recipe": recipe, "identity": identity, "k": k}, corpus, query)


def query_run_table(retriever_config: Any, identity: Any, k: int, chunks: str) -> str:
    """The table of one retriever's per-query results over one chunk set at depth ``k`` (and
    this rag_lab release, as every stage key): a run that misses reads back the queries it
    shares with earlier runs, so adding a query searches only it."""
    return stage_key(
        "query_runs", {"retriever": retriever_config, "identity": identity, "k": k}, chunks
    )


def query_run_key(text: str, metadata: Any = None) -> str:
    """One query's row: its text as the retriever sees it, and the metadata fields a
    ``QueryMetadataAware`` retriever reads (``None``: none)."""
    parts = [text.encode("utf-8")] + ([] if metadata is None else [canonical(metadata)])
    return _digest(*parts, size=16)


# -- per-item tables ----------------------------------------------------------------------------
def model_table(identity: Any) -> str:
    """Name of the table holding one model's per-item values (embeddings, pair scores)."""
    return _digest(canonical(identity), size=12)


def text_key(text: str) -> str:
    """One chunk text's row in an embedding table."""
    return _digest(text.encode("utf-8"), size=16)


def pair_key(query: str, text: str) -> str:
    """One (query, chunk text) pair's row in a score table."""
    return _digest(query.encode("utf-8"), text.encode("utf-8"), size=16)


# -- answer stage -------------------------------------------------------------------------------
def generation_key(request: Any) -> str:
    """A generated answer: everything the generator sends (model, prompt, sampling settings)."""
    return _digest(b"generation", canonical(request))


def judge_key(
    identity: Any, query: str, contexts: Iterable[str], response: str, reference: str | None
) -> str:
    """A judge's verdict on one answer."""
    return _digest(
        b"judge",
        canonical(identity),
        canonical(
            {
                "query": query,
                "contexts": list(contexts),
                "response": response,
                "reference": reference,
            }
        ),
    )
