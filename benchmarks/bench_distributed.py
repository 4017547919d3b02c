"""Corpus encoding in Ray tasks (``encoding=ray``) against one process, on SciFact with MiniLM.

    flock /tmp/notes/timing.lock python benchmarks/bench_distributed.py \
        --data ../shared/data/scifact --out benchmarks/results/distributed.json

Starts a local Ray cluster (a head and one worker node on 127.0.0.1, one CPU each:
``tests/distributed/cluster.py``), then encodes the corpus' chunk texts (the BEIR parser, one
chunk per document: what ``retrievers=[dense]`` embeds) twice, each from a fresh embedder so both
times include loading the model:

- single process: ``SentenceTransformerEmbedder`` (MiniLM) in this process, torch's default
  threads (all cores);
- sharded: ``RayShardedEmbedder`` with ``workers`` Ray tasks, one CPU (one torch thread) each,
  every task loading its own model.

Records the wall time of each, the cluster's start-up time, and the largest absolute difference
between the two sets of vectors (the contract: < 1e-5). On one machine this measures correctness
and Ray's overhead; the gain needs nodes with cores of their own.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

from peak import peak_rss_mib  # benchmarks/peak.py (scripts run from benchmarks/)

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

MINILM = {
    "_target_": "rag_lab.embedder.SentenceTransformerEmbedder",
    "model": "sentence-transformers/all-MiniLM-L6-v2",
    "max_seq_length": 256,
}


def chunk_texts(data: Path, limit: int | None) -> list[str]:
    from rag_lab.chunker import NoneChunker
    from rag_lab.parser import BeirCorpusParser
    from rag_lab.pipeline.corpus import parse_corpus

    docs = parse_corpus(BeirCorpusParser(), [data / "corpus.jsonl"], data)
    texts = [c.index_text for c in NoneChunker().chunk(docs)]
    return texts[:limit] if limit else texts


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data" / "scifact")
    ap.add_argument("--docs", type=int, default=None, help="first N documents (default: all)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks/results/distributed.json")
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    import numpy as np
    import torch

    from rag_lab.distributed import RayShardedEmbedder
    from rag_lab.pipeline.build import instantiate
    from tests.distributed.cluster import local_ray_cluster

    texts = chunk_texts(args.data, args.docs)
    load_before = os.getloadavg()
    t0 = time.perf_counter()
    single = instantiate(MINILM, "embedder").encode_documents(texts)
    single_s = time.perf_counter() - t0
    with tempfile.TemporaryDirectory(prefix="bench-ray-") as tmp:
        t0 = time.perf_counter()
        with local_ray_cluster(Path(tmp)):
            start_s = time.perf_counter() - t0
            t0 = time.perf_counter()
            sharded = RayShardedEmbedder(MINILM, workers=args.workers).encode_documents(texts)
            sharded_s = time.perf_counter() - t0
    load_after = os.getloadavg()
    result = {
        "dataset": f"{args.data.name} corpus"
        + (f", first {args.docs} documents" if args.docs else ""),
        "n_texts": len(texts),
        "model": MINILM["model"],
        "dimension": int(single.shape[1]),
        "single_process": {
            "wall_s": round(single_s, 2),
            "torch_threads": torch.get_num_threads(),
            "texts_per_s": round(len(texts) / single_s, 1),
        },
        "ray_sharded": {
            "workers": args.workers,
            "nodes": 2,
            "cpus_per_task": 1,
            "wall_s": round(sharded_s, 2),
            "texts_per_s": round(len(texts) / sharded_s, 1),
            "cluster_start_s": round(start_s, 2),
        },
        "max_abs_diff": float(np.abs(sharded - single).max()),
        "identical_shape": sharded.shape == single.shape,
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "loadavg_before": [round(x, 2) for x in load_before],
            "loadavg_after": [round(x, 2) for x in load_after],
        },
        "command": "python benchmarks/bench_distributed.py " + " ".join(sys.argv[1:]),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    result["peak_rss_mib"] = peak_rss_mib()  # Ray's workers are not children: see the cluster
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
