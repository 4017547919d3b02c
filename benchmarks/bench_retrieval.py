"""Throughput benchmark: BM25 backends and the dense encoding path, measured in one run.

    python benchmarks/bench_retrieval.py --data ../shared/data \\
        --out benchmarks/results/retrieval.json

Prints (and writes as JSON):
- BM25 on SciFact (5,183 docs; test + train queries): queries/s of the bm25s backend (target
  >= 1,000 q/s on 2 cores) and of rank-bm25, and their ratio; both through rag_lab's retriever.
- Dense encoding: docs/s of raw ``SentenceTransformer.encode`` vs rag_lab's
  ``DenseRetriever.index`` (no cache) on the same model, texts and batch size; the ratio must be
  >= 0.9 (the harness adds < 10 % overhead).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

from peak import peak_rss_mib  # benchmarks/peak.py (scripts run from benchmarks/)

from rag_lab.chunker import NoneChunker
from rag_lab.dataset import read_queries
from rag_lab.embedder import SentenceTransformerEmbedder
from rag_lab.parser import BeirCorpusParser
from rag_lab.pipeline.corpus import parse_corpus
from rag_lab.retrievers import BM25Retriever, DenseRetriever
from rag_lab.tokenizer import EnglishTokenizer


def best_of(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def bench_bm25(chunks, queries: dict[str, str], repeats: int) -> dict:
    out = {"n_docs": len(chunks), "n_queries": len(queries)}
    for backend in ("bm25s", "rank_bm25"):
        r = BM25Retriever(EnglishTokenizer(), backend=backend)
        t0 = time.perf_counter()
        r.index(chunks)
        out[f"{backend}_index_seconds"] = time.perf_counter() - t0
        qs = (
            queries if backend == "bm25s" else dict(list(queries.items())[:100])
        )  # rank-bm25 is slow
        secs = best_of(lambda r=r, qs=qs: r.retrieve(qs, 100), repeats if backend == "bm25s" else 1)
        out[f"{backend}_queries_per_second"] = len(qs) / secs
    out["bm25s_over_rank_bm25"] = (
        out["bm25s_queries_per_second"] / out["rank_bm25_queries_per_second"]
    )
    return out


def bench_dense(chunks, model: str, n_docs: int, batch_size: int, repeats: int) -> dict:
    sample = chunks[:n_docs]
    texts = [c.index_text for c in sample]
    emb = SentenceTransformerEmbedder(model, batch_size=batch_size)
    st = emb.model
    st.encode(texts[:batch_size], batch_size=batch_size)  # warm-up
    raw = best_of(
        lambda: st.encode(
            texts,
            batch_size=batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        ),
        repeats,
    )
    ret = DenseRetriever(emb, cache_dir=None)
    harness = best_of(lambda: ret.index(sample), repeats)
    return {
        "model": model,
        "n_docs": len(sample),
        "batch_size": batch_size,
        "raw_encode_docs_per_second": len(sample) / raw,
        "rag_lab_index_docs_per_second": len(sample) / harness,
        "rag_lab_over_raw": raw / harness,
    }


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--data", default=os.environ.get("RAG_LAB_DATA", "../shared/data"))
    ap.add_argument("--model", default="sentence-transformers/all-MiniLM-L6-v2")
    ap.add_argument("--dense-docs", type=int, default=256)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--skip-dense", action="store_true")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    root = Path(args.data) / "scifact"
    docs = parse_corpus(BeirCorpusParser(), [root / "corpus.jsonl"], root)
    chunks = NoneChunker().chunk(docs)
    queries = {q: x.text for q, x in read_queries(root / "queries.jsonl").items()}
    res = {"bm25": bench_bm25(chunks, queries, args.repeats)}
    b = res["bm25"]
    print(f"BM25 on SciFact ({b['n_docs']} docs, {b['n_queries']} queries, top-100):")
    print(
        f"  bm25s     {b['bm25s_queries_per_second']:10.0f} queries/s  "
        f"(index {b['bm25s_index_seconds']:.2f} s)"
    )
    print(
        f"  rank_bm25 {b['rank_bm25_queries_per_second']:10.1f} queries/s  "
        f"(index {b['rank_bm25_index_seconds']:.2f} s)"
    )
    print(f"  ratio bm25s / rank_bm25: {b['bm25s_over_rank_bm25']:.0f}x")
    if not args.skip_dense:
        res["dense"] = d = bench_dense(
            chunks, args.model, args.dense_docs, args.batch_size, args.repeats
        )
        print(
            f"Dense encoding, {d['model']} on {d['n_docs']} SciFact docs, batch {d['batch_size']}:"
        )
        print(f"  raw SentenceTransformer.encode {d['raw_encode_docs_per_second']:8.1f} docs/s")
        print(f"  rag_lab DenseRetriever.index   {d['rag_lab_index_docs_per_second']:8.1f} docs/s")
        print(f"  ratio rag_lab / raw: {d['rag_lab_over_raw']:.3f}")
    res["peak_rss_mib"] = peak_rss_mib()
    print(f"peak RSS {res['peak_rss_mib']}")
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(res, indent=2))


if __name__ == "__main__":
    main()
