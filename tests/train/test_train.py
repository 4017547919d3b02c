"""Training on the toy dataset with the real all-MiniLM-L6-v2: a few optimiser steps change the
weights, adapters round-trip, merged == unmerged, the leakage guard fires, the cross-encoder
reranker keeps its contract (depth, interpolation, score cache)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hydra import compose, initialize_config_dir
from omegaconf import DictConfig, open_dict

from rag_lab.cache import StageCache
from rag_lab.dataset import BeirDataset
from rag_lab.errors import DataError
from rag_lab.paths import CONFIG_DIR
from rag_lab.ranking import ranked
from rag_lab.train.data import (
    build_examples,
    find_leakage,
    leakage_guard,
    normalise_query,
    split_dev,
)
from tests.cli.helpers import cli
from tests.compose import TOY

MINILM = "sentence-transformers/all-MiniLM-L6-v2"
PROBES = [
    "Fault E102 on the HX-200 means the oil is too hot.",
    "主轴温度超过 60 °C 时报警 E120。",
    "grease interval",
]
BASE = [
    "dataset=beir",
    f"dataset.path={TOY}",
    "dataset.split=test",
    "train.eval_splits=[dev]",
    "tokenizer=jieba",
    "chunker=none",
]


def compose_train(task: str, overrides: list[str], tmp_path: Path) -> DictConfig:
    with initialize_config_dir(config_dir=CONFIG_DIR, version_base="1.3"):
        cfg = compose(f"train_{task}", overrides=BASE + overrides)
    with open_dict(cfg):
        cfg.paths.output_dir = str(tmp_path / "run")
        cfg.paths.experiments = str(tmp_path / "experiments")
    return cfg


# -- data ----------------------------------------------------------------------------------------
@pytest.fixture
def leaky_toy(tmp_path) -> Path:
    """The toy set whose dev split repeats q1 (same text, other id and case) and q2 (same id)."""
    root = tmp_path / "toy"
    shutil.copytree(TOY, root)
    lines = (root / "queries.jsonl").read_text().splitlines()
    rows = [json.loads(line) for line in lines if line.strip()]
    q1 = next(r for r in rows if r["_id"] == "q1")
    with open(root / "queries.jsonl", "a") as fh:
        fh.write(json.dumps({"_id": "q10", "text": q1["text"].upper() + " ?"}) + "\n")
    (root / "qrels" / "dev.tsv").write_text(
        "query-id\tcorpus-id\tscore\nq9\td8\t2\nq10\td1\t2\nq2\td2\t2\n"
    )
    return root


def test_leakage_guard_by_id_and_by_text(leaky_toy):
    train = BeirDataset(str(leaky_toy), "test").load()
    dev = BeirDataset(str(leaky_toy), "dev").load()
    assert normalise_query(train.queries["q1"].text) == normalise_query(dev.queries["q10"].text)
    assert find_leakage(train, [dev]) == {"dev": ["q1", "q2"]}  # q1 by text, q2 by id
    with pytest.raises(DataError, match=r"leakage: .*2 also in split 'dev'.*train.leakage=drop"):
        leakage_guard(train, [dev])
    assert leakage_guard(train, [dev], mode="drop") == {"q1", "q2"}
    with pytest.raises(DataError, match="training split"):
        leakage_guard(train, [train])


@pytest.mark.parametrize("task", ["embedder", "reranker"])
def test_leakage_guard_fires_from_the_cli(leaky_toy, tmp_path, task):
    """`rag-lab train ...` whose training queries are also in an evaluation split: exit 2,
    nothing trained."""
    model = ["train.model=sentence-transformers/all-MiniLM-L6-v2"] if task == "reranker" else []
    proc = cli(
        "train",
        task,
        "dataset=beir",
        f"dataset.path={leaky_toy}",
        "dataset.split=test",
        "train.eval_splits=[dev]",
        "embedder=minilm",
        *model,
        f"hydra.run.dir={tmp_path / 'run'}",
        "tracking=none",
        "cache.dir=null",
    )
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert (
        "error: leakage: of 8 training queries in qrels/test.tsv, 2 also in split 'dev'"
        in proc.stderr
    )
    assert not (tmp_path / "run" / "model").exists() and not (tmp_path / "run" / "merged").exists()


def test_split_dev_is_deterministic_and_disjoint():
    ids = [f"q{i}" for i in range(50)]
    tr, dev = split_dev(ids, 0.2, seed=3)
    assert len(dev) == 10 and not set(tr) & set(dev) and sorted(tr + dev) == sorted(ids)
    assert split_dev(ids, 0.2, seed=3) == (tr, dev)
    assert split_dev(ids, 0.0, seed=3) == (sorted(ids), [])


def test_hard_negatives_never_come_from_relevant_documents(tmp_path):
    from rag_lab.train.common import prepare

    cfg = compose_train(
        "embedder",
        [
            "embedder=hashing",
            "train.negatives.num=3",
            "train.dev_fraction=0",
            "train.negatives.sampling=top",
        ],
        tmp_path,
    )
    setup = prepare(cfg)
    assert setup.info["n_train_queries"] == 7  # q7 is unanswerable: nothing to train on
    data = BeirDataset(str(TOY), "test").load()
    for ex in setup.examples:
        relevant = {d for d, g in data.qrels[ex.query_id].items() if g > 0}
        assert setup.chunks[ex.positive_id].doc_id in relevant
        assert len(ex.negatives) == 3
        assert not {setup.chunks[c].doc_id for c in ex.negative_ids} & relevant
    assert {ex.query_id for ex in setup.examples if ex.query_id == "q8"} == {"q8"}
    # one example per relevant document
    assert sum(ex.query_id == "q8" for ex in setup.examples) == 2
    # `top` sampling takes the miners' best non-relevant chunks, in rank order (ties by id)
    ex = next(e for e in setup.examples if e.query_id == "q1")
    order = ranked(setup.mined["q1"])
    assert list(ex.negative_ids) == [c for c in order if setup.chunks[c].doc_id != "d1"][:3]
    again = build_examples(data, ["q1"], setup.chunks, setup.mined, 3, sampling="random", seed=1)
    assert again == build_examples(
        data, ["q1"], setup.chunks, setup.mined, 3, sampling="random", seed=1
    )


# -- embedder --------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def trained_embedder(tmp_path_factory):
    from rag_lab.train.embedder import train_embedder

    tmp = tmp_path_factory.mktemp("train_emb")
    cfg = compose_train(
        "embedder",
        [
            "embedder=minilm",
            "train.max_steps=3",
            "train.batch_size=4",
            "train.learning_rate=2e-3",
            "train.select_best=false",
            "train.dev_fraction=0.3",
            "train.eval_steps=2",
            "train.logging_steps=1",
        ],
        tmp,
    )
    with open_dict(cfg):
        cfg.tracking.uri = f"sqlite:///{tmp / 'mlflow.db'}"
        cfg.tracking.artifact_location = str(tmp / "artifacts")
    summary = train_embedder(cfg)
    return tmp, cfg, summary


@pytest.mark.slow  # trained_embedder: LoRA MiniLM training, 7 s alone, 27 s on a busy box
def test_lora_training_changes_the_embeddings(trained_embedder):
    from rag_lab.embedder import SentenceTransformerEmbedder

    tmp, _, summary = trained_embedder
    assert summary["steps"] == 3 and summary["trainable_params"] < summary["total_params"] / 20
    base = SentenceTransformerEmbedder(MINILM).encode_documents(PROBES)
    tuned = summary["model"].encode(PROBES, normalize_embeddings=True, convert_to_numpy=True)
    assert np.abs(tuned - base).max() > 1e-3
    stored = json.loads((tmp / "run" / "train_metrics.json").read_text())
    assert [h["step"] for h in stored["dev_history"]] == [0.0, 2.0, 3.0]
    assert len(stored["loss_curve"]) == 3
    # time and peak memory per phase; dev evaluations inside training are not training steps
    ph = stored["phases"]
    assert {"prepare", "dev_eval", "train", "train_steps", "save"} <= set(ph)
    assert ph["dev_eval"]["count"] == 3 and ph["train"]["count"] == 1
    inside = ph["dev_eval"]["seconds"] - stored["dev_history"][0]["eval_seconds"]
    assert ph["train_steps"]["seconds"] == pytest.approx(ph["train"]["seconds"] - inside)
    assert 0 < ph["prepare"]["peak_rss_mib"] <= stored["peak_rss_mib"]
    # trained at train.max_seq_length (128), handed back at the embedder's own (256)
    assert summary["model"].max_seq_length == 256


@pytest.mark.slow  # trained_embedder
def test_adapter_reloads_identically_and_merged_equals_unmerged(trained_embedder):
    from rag_lab.embedder import LoraEmbedder, SentenceTransformerEmbedder

    tmp, _, summary = trained_embedder
    in_memory = summary["model"].encode(PROBES, normalize_embeddings=True, convert_to_numpy=True)
    unmerged = LoraEmbedder(str(tmp / "run" / "adapter"), merge=False)
    merged = LoraEmbedder(str(tmp / "run" / "adapter"), merge=True)
    merged_dir = SentenceTransformerEmbedder(str(tmp / "run" / "merged"))
    assert unmerged.model_name == MINILM  # resolvable id, not a local path
    for emb in (unmerged, merged, merged_dir):
        np.testing.assert_allclose(emb.encode_documents(PROBES), in_memory, atol=2e-5)
    # the cache key sees the adapter: a tuned model never reuses the base model's embeddings
    base = SentenceTransformerEmbedder("sentence-transformers/all-MiniLM-L6-v2")
    assert unmerged.identity != base.identity and unmerged.identity["adapter"]


@pytest.mark.slow  # trained_embedder
def test_training_logs_loss_curve_and_dev_metrics_to_mlflow(trained_embedder):
    import mlflow

    tmp, cfg, _ = trained_embedder
    client = mlflow.tracking.MlflowClient(cfg.tracking.uri)
    exp = client.get_experiment_by_name(cfg.tracking.experiment)
    (run,) = client.search_runs([exp.experiment_id], "tags.task = 'train_embedder'")
    assert [m.step for m in client.get_metric_history(run.info.run_id, "train/loss")] == [1, 2, 3]
    dev_steps = [m.step for m in client.get_metric_history(run.info.run_id, "dev/ndcg_at_10")]
    assert dev_steps == [0, 2, 3]
    assert run.data.params["train.lora.r"] == "16"


@pytest.mark.slow  # trained_embedder
def test_lora_embedder_in_a_pipeline(trained_embedder, tmp_path):
    from rag_lab.evaluate import evaluate
    from tests.compose import TOY_OVERRIDES, compose_evaluate

    tmp, _, _ = trained_embedder
    cfg = compose_evaluate(
        [
            *TOY_OVERRIDES,
            "embedder=lora",
            f"embedder.adapter={tmp / 'run' / 'adapter'}",
            "retrievers=[dense]",
            "tracking=none",
        ],
        tmp_path,
    )
    metrics = evaluate(cfg)
    assert 0.0 <= metrics["ndcg_at_10"] <= 1.0 and metrics["n_queries"] == 8


# -- reranker --------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def trained_reranker(tmp_path_factory):
    from rag_lab.train.reranker import train_reranker

    tmp = tmp_path_factory.mktemp("train_rr")
    cfg = compose_train(
        "reranker",
        [
            f"train.model={MINILM}",
            "train.max_steps=3",
            "train.batch_size=4",
            "train.negatives.num=2",
            "train.dev_fraction=0.3",
            "train.eval_steps=2",
            "train.rerank_depth=5",
            "tracking=none",
            "train.select_best=false",
            "train.learning_rate=1e-3",
        ],
        tmp,
    )
    return tmp, train_reranker(cfg)


def test_reranker_training_writes_a_model_with_its_dev_interpolation(trained_reranker):
    tmp, summary = trained_reranker
    meta = json.loads((tmp / "run" / "model" / "rag_lab_reranker.json").read_text())
    assert summary["steps"] == 3 and 0.0 <= meta["interpolation"] <= 1.0
    assert meta["interpolation"] == summary["interpolation"]
    by_w = summary["dev_by_interpolation"]
    # the chosen weight is dev's best
    assert summary["dev/ndcg@10_interpolated"] == max(by_w.values())
    assert summary["dev/ndcg@10_first_stage"] == by_w["0.0"]


def _toy_run(n: int = 8):
    from rag_lab.types import Chunk

    chunks = {
        f"d{i}#0": Chunk(f"d{i}#0", f"d{i}", f"text number {i} about pumps", 0, 10)
        for i in range(n)
    }
    run = {"q1": {f"d{i}#0": float(n - i) for i in range(n)}}
    return chunks, run


def test_cross_encoder_reranker_contract_and_score_cache(trained_reranker, tmp_path):
    from rag_lab.reranker import CrossEncoderReranker

    tmp, _ = trained_reranker
    chunks, run = _toy_run()
    queries = {"q1": "pump maintenance"}
    model = str(tmp / "run" / "model")
    scores = StageCache(tmp_path).view("rerank_scores")
    rr = CrossEncoderReranker(model, depth=4, interpolation=1.0)
    rr.attach_cache(scores)
    out = rr.rerank(queries, run, chunks)
    order = ranked(out["q1"])
    assert set(order[:4]) == {f"d{i}#0" for i in range(4)}  # only the head is reordered
    assert order[4:] == [f"d{i}#0" for i in range(4, 8)]  # the tail keeps its order
    assert rr.stats["pairs_scored"] == 4 and rr.stats.get("pairs_cached", 0) == 0
    raw = rr.score([(queries["q1"], chunks[c].index_text) for c in order[:4]])
    # pure reranker order
    assert order[:4] == [order[:4][i] for i in np.argsort(-raw, kind="stable")]
    # a depth sweep re-uses every cached pair and scores only the new ones
    deeper = CrossEncoderReranker(model, depth=6, interpolation=1.0)
    deeper.attach_cache(scores)
    deeper.rerank(queries, run, chunks)
    assert deeper.stats["pairs_cached"] == 4 and deeper.stats["pairs_scored"] == 2
    # interpolation 0 keeps the first-stage order; depth 0 passes the run through
    keep = CrossEncoderReranker(model, depth=8, interpolation=0.0).rerank(queries, run, chunks)
    assert ranked(keep["q1"]) == [f"d{i}#0" for i in range(8)]
    assert CrossEncoderReranker(model, depth=0).rerank(queries, run, chunks) == run
    # null interpolation = the weight training chose on dev
    assert (
        CrossEncoderReranker(model).interpolation
        == json.loads((Path(model) / "rag_lab_reranker.json").read_text())["interpolation"]
    )


def test_cross_encoder_in_evaluate(trained_reranker, tmp_path):
    from rag_lab.evaluate import evaluate
    from tests.compose import TOY_OVERRIDES, compose_evaluate

    tmp, _ = trained_reranker
    base = evaluate(
        compose_evaluate([*TOY_OVERRIDES, "retrievers=[bm25]", "tracking=none"], tmp_path / "a")
    )
    cfg = compose_evaluate(
        [
            *TOY_OVERRIDES,
            "retrievers=[bm25]",
            "tracking=none",
            "reranker=cross_encoder",
            f"reranker.model={tmp / 'run' / 'model'}",
            "reranker.depth=5",
            "reranker.interpolation=0.0",
        ],
        tmp_path / "b",
    )
    same = evaluate(cfg)
    assert same["ndcg_at_10"] == pytest.approx(base["ndcg_at_10"])  # weight 0 = the first stage
    assert same["reranker/pairs_scored"] + same["reranker/pairs_cached"] > 0


@pytest.mark.slow  # trained_embedder
def test_export_bundles_adapter_and_reranker(trained_embedder, trained_reranker, tmp_path):
    """A pipeline with a LoRA embedder and a trained reranker exports self-contained: it loads and
    ranks exactly as evaluation did after the original adapter and model folders are deleted."""
    import pandas as pd
    import yaml

    from rag_lab.evaluate import evaluate
    from rag_lab.export import export_pipeline, load_pipeline
    from tests.compose import TOY_OVERRIDES, compose_evaluate

    adapter = shutil.copytree(trained_embedder[0] / "run" / "adapter", tmp_path / "my-adapter")
    model = shutil.copytree(trained_reranker[0] / "run" / "model", tmp_path / "my-reranker")
    cfg = compose_evaluate(
        [
            *TOY_OVERRIDES,
            "embedder=lora",
            f"embedder.adapter={adapter}",
            "retrievers=[dense,bm25]",
            "reranker=cross_encoder",
            f"reranker.model={model}",
            "reranker.depth=4",
            "tracking=none",
        ],
        tmp_path,
    )
    evaluate(cfg)
    run_dir = Path(cfg.paths.output_dir)
    export_dir = export_pipeline(run_dir, tmp_path / "export")
    config = yaml.safe_load((export_dir / "pipeline.yaml").read_text())
    assert config["retrievers"]["dense"]["embedder"]["adapter"] == "adapter"
    assert config["reranker"]["model"] == "reranker" and "cache_dir" not in config["reranker"]
    shutil.rmtree(adapter)
    shutil.rmtree(model)
    exported = load_pipeline(export_dir)
    table = pd.read_parquet(run_dir / "per_query.parquet")
    got = exported.retrieve_batch(dict(zip(table.query_id, table.text)), k=10)
    for row in table.itertuples():
        assert [h["chunk_id"] for h in got[row.query_id]] == list(row.retrieved_chunk_ids)[:10]


def test_full_fine_tuning_and_cached_mnrl(tmp_path):
    """train.lora.enabled=false trains every weight (no adapter folder); cached MNRL runs."""
    from rag_lab.embedder import SentenceTransformerEmbedder
    from rag_lab.train.embedder import train_embedder

    cfg = compose_train(
        "embedder",
        [
            "embedder=minilm",
            "train.max_steps=1",
            "train.batch_size=4",
            "train.lora.enabled=false",
            "train.loss=cached_mnrl",
            "train.mini_batch_size=2",
            "train.dev_fraction=0",
            "train.learning_rate=1e-3",
            "train.warmup_ratio=0",
            "tracking=none",
        ],
        tmp_path,
    )
    summary = train_embedder(cfg)
    assert summary["trainable_params"] == summary["total_params"]
    assert not (tmp_path / "run" / "adapter").exists()
    tuned = SentenceTransformerEmbedder(str(tmp_path / "run" / "merged")).encode_documents(PROBES)
    base = SentenceTransformerEmbedder(MINILM).encode_documents(PROBES)
    assert np.abs(tuned - base).max() > 1e-3


def test_reranker_lora_and_bce(tmp_path):
    """LoRA on the cross-encoder's encoder (merged on save) and the pointwise BCE loss both
    train."""
    from sentence_transformers import CrossEncoder

    from rag_lab.train.reranker import train_reranker

    cfg = compose_train(
        "reranker",
        [
            f"train.model={MINILM}",
            "train.max_steps=2",
            "train.batch_size=4",
            "train.negatives.num=1",
            "train.dev_fraction=0.3",
            "train.rerank_depth=3",
            "train.lora.enabled=true",
            "train.loss=bce",
            "train.select_best=false",
            "train.learning_rate=1e-3",
            "tracking=none",
        ],
        tmp_path,
    )
    summary = train_reranker(cfg)
    assert summary["steps"] == 2
    # a plain cross-encoder: no peft needed to load it
    model = CrossEncoder(str(tmp_path / "run" / "model"))
    assert not any("lora" in n for n, _ in model.named_parameters())
    assert np.isfinite(model.predict([("pump", "pump maintenance")], activation_fn=None)).all()


@pytest.mark.parametrize(
    "argv, code, stream, text",
    [
        (["train"], 2, "stderr", "usage: rag-lab train <embedder|reranker|judge>"),
        (["train", "bogus"], 2, "stderr", "error: unknown task 'bogus'"),
        (["train", "--help"], 0, "stdout", "reranker"),
    ],
)
def test_train_cli_usage(argv, code, stream, text):
    proc = subprocess.run(
        [sys.executable, "-m", "rag_lab.cli", *argv], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == code and text in getattr(proc, stream)


def test_scores_are_cached_as_they_are_computed(trained_reranker, tmp_path):
    """Pairs reach the score cache in chunks, so an interrupted rerank keeps what it scored."""
    from rag_lab.reranker import CrossEncoderReranker

    chunks, run = _toy_run(8)
    model = str(trained_reranker[0] / "run" / "model")
    rr = CrossEncoderReranker(model, depth=8)
    rr.attach_cache(StageCache(tmp_path).view("rerank_scores"))
    rr.flush_every = 3
    calls = []
    original = rr.model.predict
    rr.model.predict = lambda pairs, **kw: (calls.append(len(pairs)), original(pairs, **kw))[1]
    rr.rerank({"q1": "pump"}, run, chunks)
    assert calls == [3, 3, 2]
    again = CrossEncoderReranker(model, depth=8)
    again.attach_cache(StageCache(tmp_path).view("rerank_scores"))
    again.rerank({"q1": "pump"}, run, chunks)
    assert again.stats["pairs_cached"] == 8 and again.stats["pairs_scored"] == 0
