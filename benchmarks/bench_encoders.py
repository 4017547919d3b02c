"""Encoder backends: torch fp32 vs ONNX Runtime fp32 vs ONNX Runtime int8, measured in one run.

    python benchmarks/bench_encoders.py --data ../shared/data --out benchmarks/results/encoders.json
    python benchmarks/bench_encoders.py --ndcg-docs 300 --rerank-queries 10   # a quick check
    # the nDCG part alone (quality: no timing lock needed), then the timed part, same JSON:
    python benchmarks/bench_encoders.py --only-ndcg --out benchmarks/results/encoders.json
    python benchmarks/bench_encoders.py --skip-ndcg --out benchmarks/results/encoders.json

Prints (and writes as JSON):
- ``embedder``: docs/s of the MiniLM embedder (``SentenceTransformerEmbedder``, as
  ``conf/embedder/minilm.yaml``: max_seq_length 256) on the same SciFact documents and batch size
  for each variant; repeats are interleaved (torch, onnx, int8, torch, ...) so a load change on a
  shared machine hits every variant alike; best of ``--repeats``. Ratios to torch.
- ``cross_encoder``: pairs/s of ``CrossEncoderReranker.score`` (no score cache) on the same
  (test query, document) pairs, ``--rerank-max-length`` tokens, same batch size per variant.
- ``ndcg``: nDCG@10 on SciFact test, dense retrieval only, for each embedder variant, each in its
  own process (its peak RSS is that variant's alone); the full corpus unless ``--ndcg-docs N``
  (the test-judged documents plus the first N others: a development check, not the README number).
- ``rerank``: seconds per query at depth ``--rerank-depth`` (BM25 first stage, the first
  ``--rerank-queries`` test queries, reranker alone: interpolation 1.0, no score cache) and the
  nDCG@10 of each reranked run over those queries.

The cross-encoder is ``--reranker`` when given (a trained one: ``rag-lab train reranker``'s
``model/``); otherwise all-MiniLM-L6-v2 with a fresh, seeded one-logit head (no pretrained
reranker loads offline), so its nDCG measures fp32-vs-int8 agreement, not reranking quality.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

MINILM = "sentence-transformers/all-MiniLM-L6-v2"
VARIANTS = {
    "torch_fp32": ("torch", "none"),
    "onnx_fp32": ("onnx", "none"),
    "onnx_int8": ("onnx", "int8"),
}


def peak_rss_mb() -> float:
    """Peak resident memory since the last ``reset_peak_rss`` (Linux ``VmHWM``), else since
    the start."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def reset_peak_rss() -> None:
    """Start the peak over (``/proc/self/clear_refs`` 5, Linux): loading SciFact is not the
    encoder's memory."""
    import gc

    gc.collect()
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        pass


def load_scifact(data: Path):
    from rag_lab.chunker import NoneChunker
    from rag_lab.dataset import read_queries
    from rag_lab.dataset.beir import read_qrels
    from rag_lab.parser import BeirCorpusParser
    from rag_lab.pipeline.corpus import parse_corpus

    root = data / "scifact"
    docs = parse_corpus(BeirCorpusParser(), [root / "corpus.jsonl"], root)
    chunks = NoneChunker().chunk(docs)
    qrels = read_qrels(root / "qrels" / "test.tsv")
    queries = {q: x.text for q, x in read_queries(root / "queries.jsonl").items() if q in qrels}
    return chunks, queries, qrels


def embedder(model: str, variant: str, batch_size: int, threads: int | None):
    from rag_lab.embedder import SentenceTransformerEmbedder

    backend, quantize = VARIANTS[variant]
    return SentenceTransformerEmbedder(
        model,
        batch_size=batch_size,
        max_seq_length=256,
        backend=backend,
        quantize=quantize,
        threads=threads,
    )


def reranker(model: str, variant: str, batch_size: int, max_length: int, threads: int | None):
    from rag_lab.reranker import CrossEncoderReranker

    backend, quantize = VARIANTS[variant]
    return CrossEncoderReranker(
        model,
        depth=100,
        interpolation=1.0,
        batch_size=batch_size,
        max_length=max_length,
        backend=backend,
        quantize=quantize,
        threads=threads,
    )


def untrained_cross_encoder(out: Path) -> str:
    """all-MiniLM-L6-v2 with a seeded fresh head, saved so every variant scores the same weights."""
    import torch
    from sentence_transformers import CrossEncoder

    from rag_lab.models.resolve import resolve_model

    torch.manual_seed(0)
    CrossEncoder(resolve_model(MINILM), num_labels=1, device="cpu").save(str(out))
    return str(out)


def interleaved(fns: dict, repeats: int) -> dict[str, float]:
    """Best wall time of each function, the repeats taken round-robin."""
    best = {k: float("inf") for k in fns}
    for _ in range(repeats):
        for k, fn in fns.items():
            t0 = time.perf_counter()
            fn()
            best[k] = min(best[k], time.perf_counter() - t0)
    return best


def bench_throughput(args, chunks, queries, ce_model: str) -> dict:
    texts = [c.index_text for c in chunks[: args.throughput_docs]]
    embs = {v: embedder(args.model, v, args.batch_size, args.threads) for v in VARIANTS}
    for e in embs.values():
        e.encode_documents(texts[: args.batch_size])  # load, export once, warm up
    secs = interleaved(
        {v: (lambda e=e: e.encode_documents(texts)) for v, e in embs.items()}, args.repeats
    )
    ref = embs["torch_fp32"].encode_documents(texts)
    emb_out: dict = {"n_docs": len(texts), "batch_size": args.batch_size, "max_seq_length": 256}
    for v, e in embs.items():
        cos = (e.encode_documents(texts) * ref).sum(1)
        emb_out[v] = {
            "docs_per_second": len(texts) / secs[v],
            "speedup_vs_torch": secs["torch_fp32"] / secs[v],
            "min_cosine_to_torch": float(cos.min()),
            "mean_cosine_to_torch": float(cos.mean()),
        }
    del embs
    qs = list(queries.values())
    pairs = [(qs[i % len(qs)], texts[(7 * i) % len(texts)]) for i in range(args.pairs)]
    rrs = {
        v: reranker(ce_model, v, args.rerank_batch_size, args.rerank_max_length, args.threads)
        for v in VARIANTS
    }
    for r in rrs.values():
        r.score(pairs[: args.rerank_batch_size])
    secs = interleaved({v: (lambda r=r: r.score(pairs)) for v, r in rrs.items()}, args.repeats)
    ref_s = rrs["torch_fp32"].score(pairs)
    ce_out: dict = {
        "model": "untrained-head MiniLM" if not args.reranker else args.reranker,
        "n_pairs": len(pairs),
        "batch_size": args.rerank_batch_size,
        "max_length": args.rerank_max_length,
    }
    for v, r in rrs.items():
        s = r.score(pairs)
        ce_out[v] = {
            "pairs_per_second": len(pairs) / secs[v],
            "speedup_vs_torch": secs["torch_fp32"] / secs[v],
            "max_abs_score_diff_to_torch": float(np.abs(s - ref_s).max()),
            "score_spread_torch": float(ref_s.max() - ref_s.min()),
        }
    return {"embedder": emb_out, "cross_encoder": ce_out}


def bench_threads(args, chunks, queries, ce_model: str, counts: list[int]) -> dict:
    """ONNX int8 docs/s and pairs/s at each intra-op thread count (None = ONNX Runtime's
    default, one per core), the repeats interleaved round-robin in this one process."""
    texts = [c.index_text for c in chunks[: args.throughput_docs]]
    qs = list(queries.values())
    pairs = [(qs[i % len(qs)], texts[(7 * i) % len(texts)]) for i in range(args.pairs)]
    keys = {str(n): (n or None) for n in counts}
    embs = {k: embedder(args.model, "onnx_int8", args.batch_size, n) for k, n in keys.items()}
    rrs = {
        k: reranker(ce_model, "onnx_int8", args.rerank_batch_size, args.rerank_max_length, n)
        for k, n in keys.items()
    }
    for k in keys:
        embs[k].encode_documents(texts[: args.batch_size])
        rrs[k].score(pairs[: args.rerank_batch_size])
    e_secs = interleaved(
        {k: (lambda e=e: e.encode_documents(texts)) for k, e in embs.items()}, args.repeats
    )
    r_secs = interleaved({k: (lambda r=r: r.score(pairs)) for k, r in rrs.items()}, args.repeats)
    out = {
        k: {
            "docs_per_second": len(texts) / e_secs[k],
            "pairs_per_second": len(pairs) / r_secs[k],
        }
        for k in keys
    }
    return {
        "n_docs": len(texts),
        "n_pairs": len(pairs),
        "by_threads": out,
        "load_average": list(os.getloadavg()),
    }


def ndcg10(run, qrels) -> float:
    from rag_lab.metrics import mean_metrics, run_metrics

    return mean_metrics(run_metrics(run, qrels, ["ndcg@10"]), ["ndcg@10"])["ndcg@10"]


def subset(chunks, qrels, n_docs: int):
    if not n_docs:
        return chunks
    judged = {d for g in qrels.values() for d in g}
    others = [c for c in chunks if c.doc_id not in judged][:n_docs]
    return [c for c in chunks if c.doc_id in judged] + others


def ndcg_worker(args, variant: str) -> dict:
    """One embedder variant's dense nDCG@10 (run in a child process: its own peak RSS)."""
    from rag_lab.metrics import to_document_run
    from rag_lab.retrievers import DenseRetriever

    chunks, queries, qrels = load_scifact(Path(args.data))
    chunks = subset(chunks, qrels, args.ndcg_docs)
    reset_peak_rss()
    emb = embedder(args.model, variant, args.batch_size, args.threads)
    _ = emb.model
    ret = DenseRetriever(emb)
    t0 = time.perf_counter()
    ret.index(chunks)
    index_s = time.perf_counter() - t0
    run = to_document_run(ret.retrieve(queries, 100), {c.chunk_id: c.doc_id for c in chunks})
    return {
        "n_docs": len(chunks),
        "ndcg@10": ndcg10(run, qrels),
        "encode_seconds": index_s,
        "docs_per_second": len(chunks) / index_s,
        "peak_rss_mb": peak_rss_mb(),  # model load + encoding + search, after the corpus load
    }


def bench_ndcg(args) -> dict:
    out: dict = {}
    for v in VARIANTS:
        cmd = [sys.executable, __file__, "--worker", v, *sys.argv[1:]]
        res = subprocess.run(cmd, check=True, capture_output=True, text=True)
        out[v] = json.loads(res.stdout.strip().splitlines()[-1])
        print(
            f"  {v:11s} nDCG@10 {out[v]['ndcg@10']:.4f}  ({out[v]['n_docs']} docs, "
            f"{out[v]['docs_per_second']:.1f} docs/s, peak RSS {out[v]['peak_rss_mb']:.0f} MB)"
        )
    for v in VARIANTS:
        out[v]["ndcg@10_minus_torch"] = out[v]["ndcg@10"] - out["torch_fp32"]["ndcg@10"]
    return out


def bench_rerank(args, chunks, queries, qrels, ce_model: str) -> dict:
    from rag_lab.metrics import ranked, to_document_run
    from rag_lab.retrievers import BM25Retriever
    from rag_lab.tokenizer import EnglishTokenizer

    qids = sorted(queries)[: args.rerank_queries]
    sub = {q: queries[q] for q in qids}
    bm25 = BM25Retriever(EnglishTokenizer())
    bm25.index(chunks)
    first = bm25.retrieve(sub, args.rerank_depth)
    by_id = {c.chunk_id: c for c in chunks}
    chunk_doc = {c.chunk_id: c.doc_id for c in chunks}
    sub_qrels = {q: qrels[q] for q in qids}
    out: dict = {
        "n_queries": len(qids),
        "depth": args.rerank_depth,
        "batch_size": args.rerank_batch_size,
        "max_length": args.rerank_max_length,
        "bm25_ndcg@10": ndcg10(to_document_run(first, chunk_doc), sub_qrels),
    }
    runs = {}
    for v in ("torch_fp32", "onnx_int8"):
        r = reranker(ce_model, v, args.rerank_batch_size, args.rerank_max_length, args.threads)
        r.depth = args.rerank_depth
        _ = r.model  # loading (and the one-time export) is not reranking time
        r.score([("warm", "up")])
        t0 = time.perf_counter()
        runs[v] = r.rerank(sub, first, by_id)
        secs = time.perf_counter() - t0
        out[v] = {
            "seconds_per_query": secs / len(qids),
            "ndcg@10": ndcg10(to_document_run(runs[v], chunk_doc), sub_qrels),
        }
    out["onnx_int8"]["speedup_vs_torch"] = (
        out["torch_fp32"]["seconds_per_query"] / out["onnx_int8"]["seconds_per_query"]
    )
    top10 = [
        len(set(ranked(runs["torch_fp32"][q])[:10]) & set(ranked(runs["onnx_int8"][q])[:10])) / 10
        for q in qids
    ]
    out["top10_overlap_int8_vs_torch"] = float(np.mean(top10))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--data", default=os.environ.get("RAG_LAB_DATA", "../shared/data"))
    ap.add_argument("--model", default=MINILM)
    ap.add_argument("--reranker", default=None, help="cross-encoder path (default: fresh head)")
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--threads", type=int, default=None, help="ONNX Runtime intra-op threads")
    ap.add_argument("--throughput-docs", type=int, default=256)
    ap.add_argument("--pairs", type=int, default=512)
    ap.add_argument("--rerank-batch-size", type=int, default=32)
    ap.add_argument("--rerank-max-length", type=int, default=128)
    ap.add_argument("--rerank-depth", type=int, default=100)
    ap.add_argument("--rerank-queries", type=int, default=50)
    ap.add_argument("--ndcg-docs", type=int, default=0, help="0 = all of SciFact")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--skip-ndcg", action="store_true")
    ap.add_argument(
        "--only-rerank", action="store_true", help="run only the rerank part, add it to --out"
    )
    ap.add_argument(
        "--only-ndcg",
        action="store_true",
        help="run only the nDCG part and add it to --out (a quality number: needs no timing lock)",
    )
    ap.add_argument(
        "--only-threads",
        default=None,
        help="compare ONNX int8 at these intra-op thread counts (e.g. 1,2; 0 = the default) "
        "and add them to --out as 'threads_sweep'",
    )
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    if args.worker:
        print(json.dumps(ndcg_worker(args, args.worker)))
        return
    if args.only_ndcg:
        print("Dense nDCG@10 on SciFact test (each variant in its own process):")
        ndcg = bench_ndcg(args)
        if args.out:
            out = Path(args.out)
            res = json.loads(out.read_text()) if out.is_file() else {}
            out.write_text(json.dumps({**res, "ndcg": ndcg}, indent=2) + "\n")
        return
    t_start = time.perf_counter()
    chunks, queries, qrels = load_scifact(Path(args.data))
    if args.only_threads:
        counts = [int(x) for x in args.only_threads.split(",")]
        with tempfile.TemporaryDirectory() as tmp:
            ce_model = args.reranker or untrained_cross_encoder(Path(tmp) / "ce")
            sweep = bench_threads(args, chunks, queries, ce_model, counts)
        for k, v in sweep["by_threads"].items():
            print(
                f"  threads {k}: {v['docs_per_second']:.1f} docs/s, "
                f"{v['pairs_per_second']:.1f} pairs/s"
            )
        if args.out:
            out = Path(args.out)
            res = json.loads(out.read_text()) if out.is_file() else {}
            out.write_text(json.dumps({**res, "threads_sweep": sweep}, indent=2) + "\n")
        return
    if args.only_rerank:
        with tempfile.TemporaryDirectory() as tmp:
            ce_model = args.reranker or untrained_cross_encoder(Path(tmp) / "ce")
            rr = bench_rerank(args, chunks, queries, qrels, ce_model)
        print(json.dumps(rr, indent=2))
        if args.out:
            out = Path(args.out)
            res = json.loads(out.read_text()) if out.is_file() else {}
            out.write_text(json.dumps({**res, "rerank": rr}, indent=2) + "\n")
        return
    res: dict = {"threads": args.threads, "cpu_count": os.cpu_count()}
    with tempfile.TemporaryDirectory() as tmp:
        ce_model = args.reranker or untrained_cross_encoder(Path(tmp) / "ce")
        res.update(bench_throughput(args, chunks, queries, ce_model))
        e, c = res["embedder"], res["cross_encoder"]
        print(f"MiniLM embedder, {e['n_docs']} SciFact docs, batch {e['batch_size']}:")
        for v in VARIANTS:
            print(
                f"  {v:11s} {e[v]['docs_per_second']:8.1f} docs/s  x{e[v]['speedup_vs_torch']:.2f}"
                f"  (min cosine to torch {e[v]['min_cosine_to_torch']:.4f})"
            )
        print(
            f"Cross-encoder ({c['model']}), {c['n_pairs']} pairs, batch {c['batch_size']}, "
            f"max_length {c['max_length']}:"
        )
        for v in VARIANTS:
            print(
                f"  {v:11s} {c[v]['pairs_per_second']:8.1f} pairs/s x{c[v]['speedup_vs_torch']:.2f}"
            )
        res["rerank"] = rr = bench_rerank(args, chunks, queries, qrels, ce_model)
        print(
            f"Rerank depth {rr['depth']}, {rr['n_queries']} test queries (BM25 nDCG@10 "
            f"{rr['bm25_ndcg@10']:.4f}):"
        )
        for v in ("torch_fp32", "onnx_int8"):
            x = rr[v]
            print(f"  {v:11s} {x['seconds_per_query']:.3f} s/query  nDCG@10 {x['ndcg@10']:.4f}")
        print(f"  top-10 overlap int8 vs torch {rr['top10_overlap_int8_vs_torch']:.3f}")
    res["peak_rss_mb_throughput_process"] = peak_rss_mb()
    if not args.skip_ndcg:
        print("Dense nDCG@10 on SciFact test (each variant in its own process):")
        res["ndcg"] = bench_ndcg(args)
    res["wall_seconds"] = time.perf_counter() - t_start
    if args.out:
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        if args.skip_ndcg and out.is_file():  # keep an --only-ndcg result
            res = {**res, **{k: v for k, v in json.loads(out.read_text()).items() if k == "ndcg"}}
        out.write_text(json.dumps(res, indent=2) + "\n")


if __name__ == "__main__":
    main()
