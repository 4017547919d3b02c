"""Cost of editing one document, as a share of the cold encode (per-chunk embedding cache).

    python benchmarks/bench_edit.py --data ../shared/data --out benchmarks/results/edit.json

Measured in one run, in one process, with a real embedder (``--embedder``, default MiniLM):
1. cold: SciFact parsed, chunked (``--chunker``), every chunk text encoded and indexed, empty cache;
2. warm: the same corpus again (the faiss index is restored from the cache);
3. edit: one document's text changed (a sentence prepended), then indexed again: documents,
   chunks and the faiss index are rebuilt, and only that document's new chunk texts are encoded.
Prints each phase's seconds, the encoded counts, the edit / cold ratio and peak memory.
``--docs N`` keeps the first N documents (a quick run; the README numbers use all of them).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def index(overrides: list[str], work: Path) -> tuple[float, dict[str, float], int]:
    from hydra import compose, initialize_config_dir
    from omegaconf import open_dict

    from rag_lab.paths import CONFIG_DIR
    from rag_lab.pipeline.build import build_dataset, build_pipeline

    with initialize_config_dir(config_dir=CONFIG_DIR, version_base="1.3"):
        cfg = compose("evaluate", overrides=overrides)
    with open_dict(cfg):
        cfg.paths.output_dir = str(work / "run")
    t0 = time.perf_counter()
    data = build_dataset(cfg).load()
    pipe = build_pipeline(cfg)
    assert pipe.cache is not None
    before = pipe.cache.stats()
    pipe.load_corpus(data.corpus_sources, data.corpus_root, data.corpus_fingerprint)
    pipe.index_all()
    after = pipe.cache.stats()
    return (
        time.perf_counter() - t0,
        {k: after[k] - before.get(k, 0.0) for k in after},
        len(pipe.chunks),
    )


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--data", default=os.environ.get("RAG_LAB_DATA", "../shared/data"))
    ap.add_argument("--embedder", default="minilm")
    ap.add_argument("--chunker", default="recursive")
    ap.add_argument("--docs", type=int, default=0, help="first N documents only (0 = all)")
    ap.add_argument("--work", default=None, help="scratch folder (default: a temporary one)")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    work = Path(args.work or tempfile.mkdtemp(prefix="rag_lab_bench_edit_"))
    shutil.rmtree(work / "scifact", ignore_errors=True)
    shutil.rmtree(work / "cache", ignore_errors=True)
    shutil.copytree(Path(args.data) / "scifact", work / "scifact")
    corpus = work / "scifact" / "corpus.jsonl"
    lines = corpus.read_text(encoding="utf-8").splitlines()
    if args.docs:
        lines = lines[: args.docs]
        corpus.write_text("\n".join(lines) + "\n", encoding="utf-8")
    overrides = [
        "dataset=beir",
        f"dataset.path={work / 'scifact'}",
        f"chunker={args.chunker}",
        f"embedder={args.embedder}",
        "retrievers=[dense]",
        "tracking=none",
        f"cache.dir={work / 'cache'}",
    ]
    res: dict = {"embedder": args.embedder, "chunker": args.chunker, "documents": len(lines)}
    cold_s, cold, n_chunks = index(overrides, work)
    res.update(cold_seconds=cold_s, cold_encoded=cold["cache/embeddings/misses"], chunks=n_chunks)
    print(
        f"cold: {cold_s:.1f} s, {cold['cache/embeddings/misses']:.0f} chunk texts encoded",
        flush=True,
    )
    warm_s, warm, _ = index(overrides, work)
    res.update(warm_seconds=warm_s, warm_encoded=warm["cache/embeddings/misses"])
    print(f"warm: {warm_s:.1f} s, {warm['cache/embeddings/misses']:.0f} encoded", flush=True)
    rec = json.loads(lines[100])
    rec["text"] = "Editorial note: this abstract was revised. " + rec["text"]
    lines[100] = json.dumps(rec, ensure_ascii=False)
    corpus.write_text("\n".join(lines) + "\n", encoding="utf-8")
    edit_s, edit, _ = index(overrides, work)
    res.update(
        edit_seconds=edit_s,
        edit_encoded=edit["cache/embeddings/misses"],
        edit_reused=edit["cache/embeddings/hits"],
        edit_over_cold=edit_s / cold_s,
        peak_rss_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    )
    print(
        f"edit one document: {edit_s:.1f} s, {edit['cache/embeddings/misses']:.0f} encoded, "
        f"{edit['cache/embeddings/hits']:.0f} read back; "
        f"edit / cold = {res['edit_over_cold']:.3f}; "
        f"peak RSS {res['peak_rss_mb']:.0f} MB",
        flush=True,
    )
    if args.out:
        Path(args.out).write_text(json.dumps(res, indent=2) + "\n")


if __name__ == "__main__":
    sys.path.insert(0, str(HERE.parent))
    main()
