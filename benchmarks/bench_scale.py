"""Scale curve: index time, query latency and peak memory of BM25 and faiss flat / HNSW / IVF on a
synthetic corpus grown 10k -> 100k -> 1M chunks, with recall@10 of the ANN indexes against flat.

    flock /tmp/notes/timing.lock python benchmarks/bench_scale.py \\
        --sizes 10000 100000 1000000 --out benchmarks/results/scale.json --plot docs/scale.png

The corpus: a 50k-word pseudo-word vocabulary, a Zipf background distribution and 100 topics
(each a Zipf distribution over its own 300 words); a chunk is 50 words, half from its topic,
half from the background. Chunks are generated in seeded blocks of 10k, so a larger corpus
extends the smaller one. Queries are 6 distinct words of a chunk drawn from the first 10k (the
same queries at every size); that chunk is the known relevant one (``hit@10``).

Stages, each run in its own subprocess, so its peak RSS (``VmHWM``) is its own; it counts the
memory-mapped file pages the stage touched too:
- ``bm25``: ``BM25Retriever`` (bm25s, whitespace tokenizer), tokenising included.
- ``encode``: ``DenseRetriever(store=memmap)`` over a cold stage cache: the hashing embedder's
  vectors streamed to the cache's memmap block by block (and the flat index built from it).
- ``flat`` / ``hnsw`` / ``ivf``: the index built from that cached memmap (nothing encoded;
  flat searches the float32 file in place, HNSW and IVF add it in slices), ``--repeats`` times
  in the stage's process, the fastest build reported. HNSW with the config's M=32,
  efConstruction=40, efSearch=128 and one graph per 20,000-row segment
  (``hnsw_segment_rows``); IVF with the config's nlist=256 (one setting every size can train:
  faiss wants 39 points per list), nprobe=16, trained on a seeded 65,536-vector sample.
  Two comparisons, run only when ``--stages`` names them: ``hnsw_100k``, the same HNSW with
  one graph per 100,000 rows (the default before 0.5: a fifth of the graphs to search, each
  past the CPU cache), and ``hnsw_1graph``, one graph at any size, as before segments.
Query latency: queries one at a time through ``retrieve`` (query encoding included), p50/p95,
with faiss on one thread (index builds use its default threads).

The log-log slope of index time between consecutive sizes is printed per stage; a slope > 1.1
(worse than linear) is flagged. ``--skip 1000000:hnsw`` leaves a stage out at one size (said
in the JSON and the table).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

BLOCK = 10_000
VOCAB, TOPICS, TOPIC_WORDS, WORDS_PER_CHUNK = 50_000, 100, 300, 50
# hnsw last: the slowest builds; the graph-size comparisons only when --stages names them
STAGES = ("bm25", "encode", "flat", "ivf", "hnsw", "hnsw_100k", "hnsw_1graph")
DEFAULT_STAGES = STAGES[:-2]
DIMENSION = 256
IVF = {"nlist": 256, "nprobe": 16, "train_size": 65536}
HNSW = {"hnsw_m": 32, "ef_construction": 40, "ef_search": 128, "hnsw_segment_rows": 20_000}
LARGE_SEGMENTS = 100_000  # the hnsw_100k stage: one graph per 100k rows


# -- corpus -------------------------------------------------------------------------------------
def vocabulary(seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    syll = np.array([c + v for c in "bcdfghjklmnprstvz" for v in "aeiou"])
    words: dict[str, None] = {}
    while len(words) < VOCAB:
        n = rng.integers(2, 5)
        words["".join(rng.choice(syll, n))] = None
    return np.array(list(words))


def zipf(n: int, s: float = 1.07) -> np.ndarray:
    p = 1.0 / np.arange(1, n + 1) ** s
    return p / p.sum()


def corpus_block(block: int, vocab: np.ndarray, seed: int = 0) -> list[str]:
    """The ``block``-th 10k chunk texts (deterministic per block)."""
    topic_rng = np.random.default_rng(seed + 1)
    topic_words = np.stack(
        [topic_rng.choice(VOCAB, TOPIC_WORDS, replace=False) for _ in range(TOPICS)]
    )
    rng = np.random.default_rng([seed, block])
    topics = rng.integers(0, TOPICS, BLOCK)
    from_topic = rng.random((BLOCK, WORDS_PER_CHUNK)) < 0.5
    topic_pick = rng.choice(TOPIC_WORDS, size=(BLOCK, WORDS_PER_CHUNK), p=zipf(TOPIC_WORDS))
    background = rng.choice(VOCAB, size=(BLOCK, WORDS_PER_CHUNK), p=zipf(VOCAB))
    ids = np.where(from_topic, topic_words[topics[:, None], topic_pick], background)
    return [" ".join(row) for row in vocab[ids].tolist()]


def write_corpus(folder: Path, size: int, n_queries: int) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    vocab = vocabulary()
    first: list[str] = []
    with open(folder / "corpus.txt", "w") as fh:
        for b in range(math.ceil(size / BLOCK)):
            texts = corpus_block(b, vocab)[: size - b * BLOCK]
            first = first or texts
            fh.write("\n".join(texts) + "\n")
    rng = np.random.default_rng(7)
    queries = {}
    for i, c in enumerate(rng.choice(len(first), n_queries, replace=False).tolist()):
        words = list(dict.fromkeys(first[c].split()))
        pick = rng.choice(len(words), min(6, len(words)), replace=False)
        queries[f"q{i}"] = {"text": " ".join(words[j] for j in sorted(pick)), "relevant": f"c{c}"}
    (folder / "queries.json").write_text(json.dumps(queries))


# -- one stage (child process) ------------------------------------------------------------------
def peak_rss_mb() -> float:
    """This process's peak resident set (``VmHWM``: reset at exec, unlike ``ru_maxrss``, which
    keeps the forking parent's peak); file pages of a memmap it touched count too."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024  # kB
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def run_stage(stage: str, folder: Path, repeats: int = 1) -> dict:
    from rag_lab.cache import StageCache
    from rag_lab.embedder import HashingEmbedder
    from rag_lab.retrievers import BM25Retriever, DenseRetriever
    from rag_lab.tokenizer import WhitespaceTokenizer
    from rag_lab.types import Chunk

    texts = (folder / "corpus.txt").read_text().splitlines()
    chunks = [Chunk(f"c{i}", f"c{i}", t, 0, len(t)) for i, t in enumerate(texts)]
    del texts
    queries = json.loads((folder / "queries.json").read_text())
    base_rss = peak_rss_mb()
    tok = WhitespaceTokenizer()
    emb = HashingEmbedder(tokenizer=tok, dimension=DIMENSION)
    options = {**IVF, **HNSW}
    options["hnsw_segment_rows"] = {"hnsw_100k": LARGE_SEGMENTS, "hnsw_1graph": None}.get(
        stage, HNSW["hnsw_segment_rows"]
    )

    def make() -> BM25Retriever | DenseRetriever:
        if stage == "bm25":
            return BM25Retriever(tok)
        index_type = "flat" if stage == "encode" else stage.split("_")[0]
        dense = DenseRetriever(emb, index_type=index_type, store="memmap", **options)
        dense.attach_cache(StageCache(folder / "cache").view("embeddings"))
        return dense

    retriever: BM25Retriever | DenseRetriever | None = None
    out: dict = {"stage": stage, "chunks": len(chunks)}
    # bm25 and encode run once (encode needs the cold cache); a build from the cached memmap runs
    # ``repeats`` times and reports its fastest (timeit's rule: the slower runs measured the
    # machine), with every time in ``build_seconds_all``
    builds = []
    for _ in range(1 if stage in ("bm25", "encode") else repeats):
        retriever = None  # the previous build freed first
        retriever = make()
        t0 = time.perf_counter()
        retriever.index(chunks)
        index_s = time.perf_counter() - t0
        out["index_seconds"] = index_s
        if isinstance(retriever, DenseRetriever):
            embed = retriever.stats["embed_seconds"]
            out["embedded_chunks"] = int(retriever.stats["embedded_chunks"])
            if stage == "encode":
                out["index_seconds"] = embed  # the encode into the memmap; flat is measured alone
            else:
                builds.append(index_s - embed)  # the build from the cached memmap
                out["memmap_open_seconds"] = embed
    if builds:
        out["index_seconds"], out["build_seconds_all"] = min(builds), builds
    out["index_peak_rss_mb"] = peak_rss_mb()
    import faiss

    # one query at a time gains nothing from threads, and on a loaded 2-core machine faiss' two
    # OpenMP threads wait on each other (flat over 100k: 60 ms p50 vs 9 ms at one thread)
    faiss.omp_set_num_threads(1)
    assert retriever is not None
    lat = []
    top: dict[str, list[str]] = {}
    for qid, q in queries.items():
        t = time.perf_counter()
        row = retriever.retrieve({qid: q["text"]}, 10)[qid]
        lat.append((time.perf_counter() - t) * 1000)
        top[qid] = sorted(row, key=lambda c: (-row[c], c))
    out["p50_ms"] = float(np.percentile(lat, 50))
    out["p95_ms"] = float(np.percentile(lat, 95))
    out["hit_at_10"] = float(np.mean([q["relevant"] in top[qid] for qid, q in queries.items()]))
    (folder / f"top10_{stage}.json").write_text(json.dumps(top))
    if stage.startswith(("hnsw", "ivf")) and (folder / "top10_flat.json").exists():
        flat = json.loads((folder / "top10_flat.json").read_text())
        out["recall_at_10_vs_flat"] = float(
            np.mean([len(set(top[q]) & set(flat[q])) / max(len(flat[q]), 1) for q in flat])
        )
    out["baseline_rss_mb"] = base_rss  # interpreter + corpus, before the stage
    out["peak_rss_mb"] = peak_rss_mb()
    return out


# -- parent -------------------------------------------------------------------------------------
def slopes(results: list[dict]) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for stage in STAGES:
        pts = sorted((r["chunks"], r["index_seconds"]) for r in results if r["stage"] == stage)
        out[stage] = [
            {
                "from": a[0],
                "to": b[0],
                "slope": math.log(b[1] / a[1]) / math.log(b[0] / a[0]),
            }
            for a, b in zip(pts, pts[1:])
            if a[1] > 0 and b[1] > 0
        ]
    return out


def plot(results: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(14, 4.2))
    panels = [
        ("index_seconds", "index time (s)"),
        ("p50_ms", "query latency p50 (ms)"),
        ("peak_rss_mb", "peak RSS (MB)"),
    ]
    for ax, (key, label) in zip(axes, panels):
        for stage in STAGES:
            pts = sorted((r["chunks"], r[key]) for r in results if r["stage"] == stage)
            if pts:
                ax.plot(*zip(*pts), marker="o", label=stage)
        if key == "index_seconds":  # a linear reference through the first bm25 point
            bm = sorted((r["chunks"], r[key]) for r in results if r["stage"] == "bm25")
            if len(bm) > 1:
                xs = [bm[0][0], bm[-1][0]]
                ax.plot(xs, [bm[0][1], bm[0][1] * xs[1] / xs[0]], "k:", label="linear")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("chunks")
        ax.set_title(label)
        ax.grid(True, which="both", alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.suptitle("rag_lab scale curve (synthetic corpus, hashing embedder 256-d, 2 cores)")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)


def write_report(
    args: argparse.Namespace,
    results: list[dict],
    skipped: list[str],
    load_before: tuple[float, float, float],
    t_all: float,
    final: bool = False,
) -> None:
    """The JSON and the plot of what has run so far (written after every stage, so a run stopped
    at a deadline keeps its finished sizes); the slope table printed at the end."""
    slope = slopes(results)
    flagged = [
        f"{stage} {s['from']}->{s['to']}: {s['slope']:.2f}"
        for stage, ss in slope.items()
        for s in ss
        if s["slope"] > 1.1
    ]
    if final:
        print("\nindex-time log-log slope between sizes (> 1.1 = worse than linear):")
        for stage, ss in slope.items():
            parts = [f"{s['from']:,}->{s['to']:,}: {s['slope']:.2f}" for s in ss]
            print(f"  {stage:<7} " + ("  ".join(parts) or "-"))
        print("FLAGGED: " + "; ".join(flagged) if flagged else "no stage grows worse than linearly")
    report = {
        "command": " ".join(["python", *sys.argv]),
        "corpus": {
            "vocabulary": VOCAB,
            "topics": TOPICS,
            "topic_words": TOPIC_WORDS,
            "words_per_chunk": WORDS_PER_CHUNK,
            "queries": args.queries,
        },
        "embedder": {"kind": "hashing", "dimension": DIMENSION, "char_ngrams": [3, 4]},
        "ivf": IVF,
        "hnsw": HNSW,
        "hnsw_100k": {**HNSW, "hnsw_segment_rows": LARGE_SEGMENTS},
        "complete": final,  # false: written mid-run (a stopped run keeps its finished stages)
        "results": results,
        "slopes": slope,
        "flagged": flagged,
        "skipped": skipped,
        "load_average_before": load_before,
        "load_average_after": os.getloadavg(),
        "cpu_count": os.cpu_count(),
        "total_seconds": time.perf_counter() - t_all,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    plot(results, args.plot)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--work", type=Path, default=Path("/tmp/rag_lab_scale"))
    ap.add_argument("--stages", nargs="+", choices=STAGES, default=list(DEFAULT_STAGES))
    ap.add_argument("--skip", nargs="*", default=[], help="SIZE:STAGE pairs to leave out")
    ap.add_argument("--timeout", type=float, default=1800, help="seconds per stage process")
    ap.add_argument(
        "--repeats", type=int, default=3, help="builds from the cached memmap per stage (fastest)"
    )
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results/scale.json"))
    ap.add_argument("--plot", type=Path, default=Path("docs/scale.png"))
    ap.add_argument("--child", nargs=3, metavar=("STAGE", "FOLDER", "N"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(run_stage(args.child[0], Path(args.child[1]), int(args.child[2]))))
        return
    import shutil

    load_before = os.getloadavg()
    results: list[dict] = []
    skipped: list[str] = []
    t_all = time.perf_counter()
    for size in args.sizes:
        folder = args.work / str(size)
        shutil.rmtree(folder, ignore_errors=True)
        t0 = time.perf_counter()
        write_corpus(folder, size, args.queries)
        print(f"{size:>9,} chunks: corpus written in {time.perf_counter() - t0:.1f} s", flush=True)
        for stage in args.stages:
            if f"{size}:{stage}" in args.skip:
                skipped.append(f"{size}:{stage}")
                print(f"{size:>9,} {stage:<7} skipped (--skip)", flush=True)
                continue
            cmd = [sys.executable, __file__, "--child", stage, str(folder), str(args.repeats)]
            try:
                proc = subprocess.run(
                    cmd, capture_output=True, text=True, timeout=args.timeout, check=False
                )
            except subprocess.TimeoutExpired:
                skipped.append(f"{size}:{stage} (timeout {args.timeout:.0f} s)")
                print(f"{size:>9,} {stage:<7} timed out after {args.timeout:.0f} s", flush=True)
                continue
            if proc.returncode != 0:
                sys.exit(f"{size}:{stage} failed:\n{proc.stderr[-3000:]}")
            r = json.loads(proc.stdout.strip().splitlines()[-1])
            results.append(r)
            extra = (
                f"  recall@10 vs flat {r['recall_at_10_vs_flat']:.3f}"
                if "recall_at_10_vs_flat" in r
                else ""
            )
            print(
                f"{size:>9,} {stage:<7} index {r['index_seconds']:8.2f} s  "
                f"p50 {r['p50_ms']:7.2f} ms  p95 {r['p95_ms']:7.2f} ms  "
                f"peak {r['peak_rss_mb']:7.0f} MB  hit@10 {r['hit_at_10']:.3f}{extra}",
                flush=True,
            )
            write_report(args, results, skipped, load_before, t_all)
        shutil.rmtree(folder / "cache", ignore_errors=True)  # the memmap and table: disk space
    write_report(args, results, skipped, load_before, t_all, final=True)
    print(f"wrote {args.out} and {args.plot}")


if __name__ == "__main__":
    main()
