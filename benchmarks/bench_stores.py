"""Vector stores against faiss flat on SciFact (5,183 documents, one chunk each), and the filter
order (before retrieval vs after) each way.

    python benchmarks/bench_stores.py --data ../shared/data/scifact \
        --out benchmarks/results/stores.json [--queries 300]

The hashing embedder (256-d, no model: what is measured is the store, not the encoder) encodes
the corpus once; every store is built from the same vectors. Per store: build seconds (vectors
in, searchable), query latency (p50 / p95 ms, one query at a time, top 10), recall@10 against
faiss flat's top 10 (the share of faiss' ids a store returns) and the largest score difference
on shared ids. Chroma (HNSW only) is measured when installed, for the choice of the second
embedded store; it is not a rag_lab retriever.

Filter order: each document gets a synthetic ``source_type`` (one of ten, by a hash of its id:
10% selectivity) and ``section_type`` (one of two: 50%); per selectivity and order, recall@10
against the exact filtered ranking (faiss' full ranking, filtered) and p50 latency. ``after``
runs with ``after_depth`` 100 (fast; a query whose 10 matches are not in the first 100 loses
some) and null (the whole ranking: full recall).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rag_lab.embedder import HashingEmbedder  # noqa: E402
from rag_lab.retrievers import DenseRetriever, LanceDBRetriever, QdrantRetriever  # noqa: E402
from rag_lab.tokenizer import EnglishTokenizer  # noqa: E402
from rag_lab.types import Chunk  # noqa: E402

K = 10


def load(path: Path, n_queries: int) -> tuple[list[Chunk], dict[str, str]]:
    chunks = []
    for line in (path / "corpus.jsonl").read_text().splitlines():
        rec = json.loads(line)
        h = int(hashlib.sha256(rec["_id"].encode()).hexdigest(), 16)
        meta = {"source_type": f"type{h % 10}", "section_type": f"sec{h % 2}"}
        chunks.append(
            Chunk(f"{rec['_id']}#0", rec["_id"], rec["text"], 0, 0, rec["title"], "", meta)
        )
    queries = {}
    for line in (path / "queries.jsonl").read_text().splitlines()[:n_queries]:
        rec = json.loads(line)
        queries[rec["_id"]] = rec["text"]
    return chunks, queries


def timed(retriever: Any, queries: dict[str, str], k: int) -> tuple[dict[str, Any], list[float]]:
    run, ms = {}, []
    for qid, text in queries.items():
        t0 = time.perf_counter()
        run.update(retriever.retrieve({qid: text}, k))
        ms.append(1000 * (time.perf_counter() - t0))
    return run, ms


def recall(got: dict[str, dict[str, float]], want: dict[str, list[str]]) -> float:
    shares = [len(set(got.get(q, {})) & set(w)) / len(w) for q, w in want.items() if w]
    return statistics.mean(shares) if shares else float("nan")


def pct(ms: list[float], p: float) -> float:
    return float(np.percentile(ms, p))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", type=Path, required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--queries", type=int, default=300)
    args = ap.parse_args()
    chunks, queries = load(args.data, args.queries)
    embedder = HashingEmbedder(EnglishTokenizer())
    flat = DenseRetriever(embedder)
    flat.index(chunks)  # encodes once; the stores below reuse the vectors through _embed
    vectors = flat._embed([c.index_text for c in chunks])[0]  # noqa: SLF001 (benchmark)
    out: dict[str, Any] = {
        "machine": platform.platform(),
        "n_chunks": len(chunks),
        "n_queries": len(queries),
        "note": "2 shared cores, measured under load (other jobs running)",
        "stores": {},
        "filter_order": {},
    }
    exact, ms = timed(flat, queries, K)
    full = flat.retrieve(queries, len(chunks))
    top = {q: list(exact[q]) for q in queries}
    out["stores"]["faiss_flat"] = {
        "p50_ms": pct(ms, 50),
        "p95_ms": pct(ms, 95),
        "recall_at_10": 1.0,
    }
    stores = {"qdrant_embedded": QdrantRetriever, "lancedb": LanceDBRetriever}
    for name, cls in stores.items():
        store = cls(embedder)
        store._ids = [c.chunk_id for c in chunks]  # noqa: SLF001 (benchmark: same vectors)
        payloads = [store.where.payload(c.metadata) for c in chunks]
        t0 = time.perf_counter()
        store._create(vectors, payloads)  # noqa: SLF001
        build = time.perf_counter() - t0
        store._payloads = payloads  # noqa: SLF001
        run, ms = timed(store, queries, K)
        diff = max(
            abs(run[q][c] - exact[q][c]) for q in queries for c in set(run[q]) & set(exact[q])
        )
        out["stores"][name] = {
            "build_seconds": build,
            "p50_ms": pct(ms, 50),
            "p95_ms": pct(ms, 95),
            "recall_at_10": recall(run, top),
            "max_score_diff": diff,
        }
        print(name, out["stores"][name], flush=True)
    try:
        import chromadb
    except ImportError:
        chromadb = None
    if chromadb is not None:
        client = chromadb.EphemeralClient()
        t0 = time.perf_counter()
        col = client.create_collection("bench", metadata={"hnsw:space": "ip"})
        ids = [c.chunk_id for c in chunks]
        for s in range(0, len(ids), 2000):
            col.add(ids=ids[s : s + 2000], embeddings=vectors[s : s + 2000])
        build = time.perf_counter() - t0
        qv = np.asarray(embedder.encode_queries(list(queries.values())), np.float32)
        run, ms = {}, []
        for qid, v in zip(queries, qv):
            t1 = time.perf_counter()
            found = col.query(query_embeddings=[v], n_results=K)
            ms.append(1000 * (time.perf_counter() - t1))
            run[qid] = {c: 1 - d for c, d in zip(found["ids"][0], found["distances"][0])}
        out["stores"]["chroma_hnsw"] = {
            "build_seconds": build,
            "p50_ms": pct(ms, 50),
            "p95_ms": pct(ms, 95),
            "recall_at_10": recall(run, top),
        }
        print("chroma", out["stores"]["chroma_hnsw"], flush=True)
    by_id = {c.chunk_id: c for c in chunks}
    for label, spec in (
        ("10%", {"equals": {"source_type": "type3"}}),
        ("50%", {"equals": {"section_type": "sec1"}}),
    ):
        field, value = next(iter(spec["equals"].items()))
        want = {
            q: [
                c
                for c in sorted(full[q], key=lambda c: -full[q][c])
                if by_id[c].metadata[field] == value
            ][:K]
            for q in queries
        }
        rows: dict[str, Any] = {}
        for name, cls in stores.items():
            for order, depth in (("before", None), ("after", 100), ("after", None)):
                store = cls(embedder, filter_order=order, after_depth=depth, **spec)
                store._ids = [c.chunk_id for c in chunks]  # noqa: SLF001
                store._payloads = [store.where.payload(c.metadata) for c in chunks]  # noqa: SLF001
                store._create(vectors, store._payloads)  # noqa: SLF001
                run, ms = timed(store, queries, K)
                key = f"{name}/{order}" + ("" if order == "before" else f"/depth_{depth or 'all'}")
                rows[key] = {
                    "recall_at_10": recall(run, want),
                    "p50_ms": pct(ms, 50),
                    "p95_ms": pct(ms, 95),
                }
                print(label, key, rows[key], flush=True)
        out["filter_order"][label] = rows
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
