"""ONNX Runtime's transformer fusions on or off: e5 (the default embedder) on the sample's chunks.

    python benchmarks/bench_onnx_fusion.py --out benchmarks/results/onnx_fusion.json
    python benchmarks/bench_onnx_fusion.py --variants int8_plain,int8_fused --repeats 6

Encodes the README job's 204 chunks (``rag-lab evaluate``'s parser and chunker on the shipped
sample) with ``embedder=e5_small`` (max_seq_length 512, batch 64, ``passage:`` prompt) through
``SentenceTransformerEmbedder`` in each variant: ONNX Runtime fp32 / int8, with the exported graph
fused (``fuse=True``: Attention, SkipLayerNormalization, BiasGelu, EmbedLayerNormalization) or
plain (``fuse=False``, the default). The repeats are interleaved in ``--variants`` order (plain,
fused, plain, fused, ...) so a load change on a shared machine hits every variant alike; a load
that keeps falling (or rising) still favours the variant run second, so run it in both orders.
Printed: the best and the median wall time of each, its CPU seconds (this process), and the
ratios fused / plain. Also the cosine of each variant's embeddings to torch fp32 (computed
once). Export (once per machine, in ``$RAG_LAB_HOME``) and warm-up are outside the timing.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path

VARIANTS = {
    "fp32_plain": ("none", False),
    "fp32_fused": ("none", True),
    "int8_plain": ("int8", False),
    "int8_fused": ("int8", True),
}


def sample_chunks() -> list[str]:
    """The index texts of the README job's chunks (its parser and chunker on the sample)."""
    from hydra import compose, initialize_config_dir

    from rag_lab.pipeline.build import build_parser, instantiate
    from rag_lab.pipeline.corpus import parse_corpus

    conf = Path(__file__).resolve().parents[1] / "conf"
    with initialize_config_dir(config_dir=str(conf), version_base=None):
        cfg = compose("evaluate", overrides=["tracking=none"])
    root = Path(__file__).resolve().parents[1] / "rag_lab" / "sample" / "maintenance_kb" / "docs"
    docs = parse_corpus(build_parser(cfg.parser)[0], sorted(root.rglob("*.*")), root)
    return [c.index_text for c in instantiate(cfg.chunker, "chunker").chunk(docs)]


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--variants", default="int8_plain,int8_fused,fp32_plain,fp32_fused")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--threads", type=int, default=None, help="intra-op threads (default: cores)")
    ap.add_argument("--no-torch", action="store_true", help="skip the cosine to torch fp32")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from rag_lab.embedder import SentenceTransformerEmbedder

    texts = sample_chunks()
    names = args.variants.split(",")

    def embedder(**kw):
        return SentenceTransformerEmbedder(
            "intfloat/multilingual-e5-small",
            document_prompt="passage: ",
            max_seq_length=512,
            batch_size=args.batch_size,
            threads=args.threads,
            **kw,
        )

    embs = {
        v: embedder(backend="onnx", quantize=VARIANTS[v][0], fuse=VARIANTS[v][1]) for v in names
    }
    for e in embs.values():
        e.encode_documents(texts[:4])  # load, export once, warm up
    res: dict = {"n_chunks": len(texts), "batch_size": args.batch_size, "cpu_count": os.cpu_count()}
    res["load_average_start"] = list(os.getloadavg())
    wall: dict[str, list[float]] = {v: [] for v in names}
    cpu: dict[str, list[float]] = {v: [] for v in names}
    for r in range(args.repeats):
        for v, e in embs.items():
            t, c = time.perf_counter(), time.process_time()
            e.encode_documents(texts)
            wall[v].append(time.perf_counter() - t)
            cpu[v].append(time.process_time() - c)
        print(r, {v: round(len(texts) / wall[v][-1], 2) for v in names}, flush=True)
    res["load_average_end"] = list(os.getloadavg())
    ref = None if args.no_torch else embedder().encode_documents(texts)
    for v, e in embs.items():
        out = {
            "docs_per_second_best": len(texts) / min(wall[v]),
            "docs_per_second_median": len(texts) / statistics.median(wall[v]),
            "cpu_seconds_median": statistics.median(cpu[v]),
            "wall_seconds": wall[v],
        }
        if ref is not None:
            cos = (e.encode_documents(texts) * ref).sum(1)
            out |= {
                "min_cosine_to_torch": float(cos.min()),
                "mean_cosine_to_torch": float(cos.mean()),
            }
        res[v] = out
    for q in ("fp32", "int8"):
        plain, fused = f"{q}_plain", f"{q}_fused"
        if plain in res and fused in res:
            res[f"{q}_fused_over_plain"] = {
                "best": min(wall[plain]) / min(wall[fused]),
                "median": statistics.median(wall[plain]) / statistics.median(wall[fused]),
                "cpu": statistics.median(cpu[plain]) / statistics.median(cpu[fused]),
            }
    for v in names:
        x = res[v]
        cos = f"  cosine to torch min {x['min_cosine_to_torch']:.4f}" if ref is not None else ""
        print(
            f"{v:11s} {x['docs_per_second_best']:6.2f} docs/s best, "
            f"{x['docs_per_second_median']:6.2f} median, {x['cpu_seconds_median']:6.1f} CPU-s{cos}"
        )
    for k in ("fp32_fused_over_plain", "int8_fused_over_plain"):
        if k in res:
            print(k, {a: round(b, 2) for a, b in res[k].items()})
    print("load average", res["load_average_start"], "->", res["load_average_end"])
    if args.out:
        Path(args.out).write_text(json.dumps(res, indent=2) + "\n")


if __name__ == "__main__":
    main()
