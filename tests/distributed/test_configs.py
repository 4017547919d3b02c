"""Without a cluster: the launcher configs compose with what a Ray job needs, ``encoding=ray``
wraps the dense retriever's embedder (and encodes a small call in this process), a Ray worker
enters the sweep's folder, and a sweep job refuses to log its child into another store than its
parent's."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import numpy as np
import pytest
from hydra import compose, initialize_config_dir
from hydra.utils import get_object
from omegaconf import OmegaConf

from rag_lab.errors import ConfigError
from rag_lab.paths import CONFIG_DIR
from tests.compose import TOY_OVERRIDES, compose_evaluate

# conf/hydra/launcher/ray.yaml fills in the plugin's schema of the same name on purpose
pytestmark = pytest.mark.filterwarnings(r"ignore:\s*'hydra/launcher/ray' is validated against")


def launcher(name: str, tmp_path: Path, *overrides: str):
    with initialize_config_dir(config_dir=CONFIG_DIR, version_base="1.3"):
        cfg = compose(
            "evaluate",
            overrides=[f"hydra/launcher={name}", f"paths.experiments={tmp_path}", *overrides],
            return_hydra_config=True,
        )
    return cfg


def test_ray_launcher_joins_a_running_cluster_and_passes_the_sweeps_folders(tmp_path):
    cfg = launcher("ray", tmp_path)
    init = OmegaConf.to_container(cfg.hydra.launcher.ray.init, resolve=True)
    assert cfg.hydra.launcher._target_.endswith("hydra_ray_launcher.ray_launcher.RayLauncher")
    assert init["address"] is None
    # present and null: the launcher's setdefault would otherwise pass 75 MiB, which ray.init
    # refuses when it joins a running cluster (hydra issue #2893)
    assert "object_store_memory" in init and init["object_store_memory"] is None
    env = init["runtime_env"]["env_vars"]
    assert env == {"RAG_LAB_WORKDIR": os.getcwd(), "RAG_LAB_EXPERIMENTS": str(tmp_path)}
    assert callable(get_object(init["runtime_env"]["worker_process_setup_hook"]))
    assert cfg.hydra.launcher.ray.remote == {"num_cpus": 1, "max_retries": 0}


def test_slurm_launcher_extends_the_plugins_schema(tmp_path):
    cfg = launcher("slurm", tmp_path, "hydra.launcher.partition=cpu")
    node = cfg.hydra.launcher
    assert get_object(node._target_).__name__ == "SlurmLauncher"
    assert (node.partition, node.timeout_min, node.cpus_per_task) == ("cpu", 120, 4)
    assert node.mem_gb == 16
    assert node.max_num_timeout == 0 and "signal_delay_s" in node  # the plugin's own keys stay
    assert node.submitit_folder == f"{cfg.hydra.sweep.dir}/.submitit/%j"


def test_encoding_ray_wraps_the_top_level_embedder(tmp_path):
    from rag_lab.distributed import RayShardedEmbedder
    from rag_lab.embedder import HashingEmbedder
    from rag_lab.pipeline import build_pipeline

    base = [*TOY_OVERRIDES, "retrievers=[dense]"]
    plain = compose_evaluate(base, tmp_path)
    assert plain.retrievers.dense.embedder._target_ == "rag_lab.embedder.HashingEmbedder"
    cfg = compose_evaluate([*base, "encoding=ray", "encoding.workers=3"], tmp_path)
    node = OmegaConf.to_container(cfg.retrievers.dense.embedder, resolve=True)
    assert node["_target_"] == "rag_lab.distributed.RayShardedEmbedder"
    assert node["embedder"] == OmegaConf.to_container(plain.embedder, resolve=True)
    embedder = build_pipeline(cfg).retrievers["dense"].embedder
    assert isinstance(embedder, RayShardedEmbedder) and embedder.workers == 3
    assert isinstance(embedder.local, HashingEmbedder)
    assert embedder.identity == embedder.local.identity  # the same cache table
    assert embedder.dimension == 1024
    # how the corpus is encoded does not key the dense retriever's index and runs
    assert build_pipeline(plain).stage_configs == build_pipeline(cfg).stage_configs


def test_a_call_below_min_texts_is_encoded_here(tmp_path):
    """No cluster is joined for a few texts (``ray`` need not even be installed)."""
    from rag_lab.distributed import RayShardedEmbedder
    from rag_lab.pipeline.build import instantiate

    config = {
        "_target_": "rag_lab.embedder.HashingEmbedder",
        "tokenizer": {"_target_": "rag_lab.tokenizer.WhitespaceTokenizer"},
    }
    texts = ["pump seal leak", "PLC fault E-102", "replace the filter"]
    sharded = RayShardedEmbedder(config, workers=2, min_texts=64)
    expected = instantiate(config, "embedder").encode_documents(texts)
    assert np.array_equal(sharded.encode_documents(texts), expected)
    assert np.array_equal(sharded.encode_queries(texts[:1]), expected[:1])


def test_bad_workers_is_one_line_naming_the_key(tmp_path):
    from rag_lab.pipeline import build_pipeline

    cfg = compose_evaluate(
        [*TOY_OVERRIDES, "retrievers=[dense]", "encoding=ray", "encoding.workers=0"], tmp_path
    )
    with pytest.raises(ConfigError) as err:
        build_pipeline(cfg)
    assert str(err.value).endswith("workers=0: must be >= 1") and "\n" not in str(err.value)


def test_worker_enters_the_sweeps_folder(tmp_path, monkeypatch, caplog):
    from rag_lab.distributed.ray_worker import enter_workdir

    monkeypatch.chdir(tmp_path)
    (tmp_path / "sweep").mkdir()
    monkeypatch.setenv("RAG_LAB_WORKDIR", str(tmp_path / "sweep"))
    enter_workdir()
    assert Path.cwd() == tmp_path / "sweep"
    monkeypatch.setenv("RAG_LAB_WORKDIR", str(tmp_path / "not-on-this-node"))
    with caplog.at_level(logging.WARNING):
        enter_workdir()
    assert Path.cwd() == tmp_path / "sweep"
    assert "not-on-this-node: cannot enter it on this node" in caplog.text


def test_a_child_is_refused_outside_its_parents_store(tmp_path):
    from rag_lab.tracking import MlflowTracker
    from rag_lab.tracking.evaluation import evaluation_run

    cfg = compose_evaluate(TOY_OVERRIDES, tmp_path)
    job_store = f"sqlite:///{tmp_path / 'ray_cwd' / 'experiments' / 'mlflow.db'}"
    sweep = {"run_id": "abc", "uri": f"sqlite:///{tmp_path / 'mlflow.db'}", "job": 0}
    with pytest.raises(ConfigError) as err:
        with evaluation_run(MlflowTracker(uri=job_store), cfg, {}, tmp_path / "run", sweep):
            pass
    msg = str(err.value)
    assert msg.startswith(f"tracking.uri={job_store}: this sweep job's MLflow store is not")
    assert "\n" not in msg and sweep["uri"] in msg
    assert not (tmp_path / "ray_cwd").exists()  # refused before anything was written
