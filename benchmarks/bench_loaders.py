"""The dataset loaders against the BEIR loader on the same data, and ``tokenizer=auto`` on Chinese.

    python benchmarks/bench_loaders.py --data ../shared/data --out benchmarks/results/loaders.json

BM25 (``retrievers=[bm25]``, each dataset's default tokenizer unless named), all in one process,
with a fresh stage cache per run:

- SciFact test through ``dataset=beir`` (the reference, published bm25s nDCG@10 0.687), through
  ``dataset=hf`` from a local copy of the mteb hub layout this script writes (parquet shards and
  a README config table), and through ``dataset=ir_datasets`` (``beir/scifact/test``) from an
  ``IR_DATASETS_HOME`` holding the BEIR zip this script writes where ir_datasets caches it;
- CMRC 2018 (BEIR-shaped in the data folder) written back as a SQuAD-format file, read by
  ``dataset=squad`` with ``tokenizer=english``, ``jieba`` and ``auto``, and by ``dataset=beir``
  with jieba (the reference).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

from peak import peak_rss_mib  # benchmarks/peak.py (scripts run from benchmarks/)

ROOT = Path(__file__).resolve().parents[1]

MTEB_README = """---
configs:
- config_name: corpus
  data_files: [{split: corpus, path: corpus/corpus-00000-of-00001.parquet}]
- config_name: queries
  data_files: [{split: queries, path: queries/queries-00000-of-00001.parquet}]
- config_name: default
  data_files: [{split: test, path: data/test-00000-of-00001.parquet}]
---
"""


def jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in open(path, encoding="utf-8") if line.strip()]


def qrels_rows(path: Path) -> list[tuple[str, str, int]]:
    with open(path, encoding="utf-8") as fh:
        rows = list(csv.reader(fh, delimiter="\t"))[1:]
    return [(q, d, int(s)) for q, d, s in rows]


def write_mteb_snapshot(beir: Path, out: Path) -> Path:
    import importlib

    datasets = importlib.import_module("datasets")
    datasets.disable_progress_bars()
    for sub in ("corpus", "queries", "data"):
        (out / sub).mkdir(parents=True)
    (out / "README.md").write_text(MTEB_README)
    corpus = [
        {"_id": r["_id"], "title": r["title"], "text": r["text"]}
        for r in jsonl(beir / "corpus.jsonl")
    ]
    queries = [{"_id": r["_id"], "text": r["text"]} for r in jsonl(beir / "queries.jsonl")]
    qrels = [
        {"query-id": q, "corpus-id": d, "score": s}
        for q, d, s in qrels_rows(beir / "qrels/test.tsv")
    ]
    datasets.Dataset.from_list(corpus).to_parquet(str(out / "corpus/corpus-00000-of-00001.parquet"))
    datasets.Dataset.from_list(queries).to_parquet(
        str(out / "queries/queries-00000-of-00001.parquet")
    )
    datasets.Dataset.from_list(qrels).to_parquet(str(out / "data/test-00000-of-00001.parquet"))
    return out


def write_irds_home(beir: Path, home: Path) -> Path:
    """The BEIR zip at ir_datasets' cache path for beir/scifact (no md5 check on a cached file)."""
    target = home / "beir" / "scifact" / "source.zip"
    target.parent.mkdir(parents=True)
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.write(beir / "corpus.jsonl", "scifact/corpus.jsonl")
        zf.write(beir / "queries.jsonl", "scifact/queries.jsonl")
        for split in ("test", "train"):
            zf.write(beir / "qrels" / f"{split}.tsv", f"scifact/qrels/{split}.tsv")
    return home


def write_squad(beir: Path, out: Path) -> Path:
    """CMRC 2018 back in SQuAD shape: one article per paragraph, its questions and answers."""
    docs = {r["_id"]: r for r in jsonl(beir / "corpus.jsonl")}
    queries = {r["_id"]: r for r in jsonl(beir / "queries.jsonl")}
    by_doc: dict[str, list[str]] = {}
    for q, d, s in qrels_rows(beir / "qrels/test.tsv"):
        if s > 0:
            by_doc.setdefault(d, []).append(q)
    data = []
    for did, qids in by_doc.items():
        context = docs[did]["text"]
        qas = []
        for q in qids:
            answers = (queries[q].get("metadata") or {}).get("answers") or []
            qas.append(
                {
                    "id": q,
                    "question": queries[q]["text"],
                    "answers": [{"text": a, "answer_start": context.find(a)} for a in answers],
                }
            )
        data.append(
            {
                "title": docs[did].get("title") or "",
                "paragraphs": [{"context": context, "qas": qas}],
            }
        )
    out.write_text(json.dumps({"version": "v1.0", "data": data}, ensure_ascii=False), "utf-8")
    return out


RUN = """
import json, sys
from hydra import compose, initialize_config_dir
from omegaconf import open_dict
from rag_lab.evaluate import evaluate
from rag_lab.paths import CONFIG_DIR
overrides, tmp = json.loads(sys.argv[1]), sys.argv[2]
with initialize_config_dir(config_dir=CONFIG_DIR, version_base="1.3"):
    cfg = compose("evaluate", overrides=overrides)
with open_dict(cfg):
    cfg.paths.output_dir = tmp + "/run"
    cfg.paths.experiments = tmp + "/experiments"
    cfg.evaluation.latency_queries = 0
    cfg.evaluation.html_report = False
m = evaluate(cfg)
print("METRICS " + json.dumps(m))
"""


def evaluate(overrides: list[str], tmp: Path, env: dict[str, str] | None = None) -> dict:
    """One run in a fresh interpreter (ir_datasets reads IR_DATASETS_HOME on import)."""
    tmp.mkdir(parents=True)
    all_overrides = [*overrides, "retrievers=[bm25]", "tracking=none", f"cache.dir={tmp / 'cache'}"]
    t0 = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", RUN, json.dumps(all_overrides), str(tmp)],
        cwd=ROOT,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise SystemExit(f"{overrides}: failed\n{done.stderr[-3000:]}")
    line = next(x for x in done.stdout.splitlines() if x.startswith("METRICS "))
    m = json.loads(line[len("METRICS ") :])
    keys = (
        "ndcg_at_10",
        "recall_at_10",
        "hit_rate_at_5",
        "evidence_hit_rate_at_5",
        "n_queries",
        "n_documents",
    )
    out = {k: m[k] for k in keys if k in m}
    out["wall_seconds"] = round(time.perf_counter() - t0, 1)
    print(
        f"{' '.join(overrides):<110} "
        + "  ".join(f"{k}={v:.4f}" if isinstance(v, float) else f"{k}={v}" for k, v in out.items()),
        flush=True,
    )
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", type=Path, default=Path("../shared/data"))
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    data = args.data.resolve()
    results: dict[str, dict] = {}
    with tempfile.TemporaryDirectory() as tmp_str:
        tmp = Path(tmp_str)
        scifact = data / "scifact"
        results["scifact/beir"] = evaluate(["dataset=beir", f"dataset.path={scifact}"], tmp / "a")
        snap = write_mteb_snapshot(scifact, tmp / "scifact_mteb")
        results["scifact/hf_parquet"] = evaluate(
            ["dataset=hf", f"dataset.path={snap}", "dataset.name=scifact"], tmp / "b"
        )
        home = write_irds_home(scifact, tmp / "irds")
        results["scifact/ir_datasets"] = evaluate(
            ["dataset=ir_datasets", "dataset.dataset_id=beir/scifact/test"],
            tmp / "c",
            {"IR_DATASETS_HOME": str(home)},
        )
        cmrc = data / "cmrc2018"
        squad = write_squad(cmrc, tmp / "cmrc2018_dev.json")
        results["cmrc2018/beir_jieba"] = evaluate(
            ["dataset=beir", f"dataset.path={cmrc}", "tokenizer=jieba"], tmp / "d"
        )
        for tok in ("english", "jieba", "auto"):
            results[f"cmrc2018/squad_{tok}"] = evaluate(
                ["dataset=squad", f"dataset.path={squad}", f"tokenizer={tok}"], tmp / f"e_{tok}"
            )
    results["peak_rss_mib"] = peak_rss_mib()
    print(f"peak RSS {results['peak_rss_mib']}")
    if args.out:
        args.out.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
