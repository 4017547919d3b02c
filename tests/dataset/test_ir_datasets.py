"""rag_lab.dataset.ir_datasets: an ir_datasets BEIR id read from the local files ir_datasets
itself reads (``$IR_DATASETS_HOME/beir/scifact/source.zip``, written here from the toy set), and
the one-line errors (package missing, unknown id, files not in the cache).

ir_datasets fixes its cache folder when it is imported, so each load runs in a fresh interpreter
with ``IR_DATASETS_HOME`` pointing at the test's folder."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from rag_lab.dataset import BeirDataset, IrDatasetsDataset
from rag_lab.errors import ConfigError
from tests.compose import TOY

pytest.importorskip("ir_datasets")

LOAD = """
import json, sys
from rag_lab.dataset import IrDatasetsDataset
from rag_lab.errors import RagLabError
try:
    ds = IrDatasetsDataset(sys.argv[1], materialise_dir=sys.argv[2]).load()
except RagLabError as exc:
    print(json.dumps({"error": type(exc).__name__, "message": str(exc)}))
else:
    print(json.dumps({
        "name": ds.name, "split": ds.split, "qrels": ds.qrels,
        "queries": {q: x.text for q, x in ds.queries.items()},
        "corpus": [json.loads(line) for line in ds.corpus_sources[0].read_text().splitlines()],
        "fingerprint": ds.fingerprint,
    }))
"""


def beir_zip(home: Path, name: str, source: Path) -> None:
    """What ir_datasets downloads for ``beir/<name>``: the BEIR zip, at its cache path."""
    target = home / "beir" / name / "source.zip"
    target.parent.mkdir(parents=True)
    with zipfile.ZipFile(target, "w") as zf:
        zf.write(source / "corpus.jsonl", f"{name}/corpus.jsonl")
        zf.write(source / "queries.jsonl", f"{name}/queries.jsonl")
        for split in ("test", "train"):  # beir/scifact has a train and a test split
            qrels = source / "qrels" / f"{split}.tsv"
            if not qrels.exists():
                qrels = source / "qrels" / "dev.tsv"
            zf.write(qrels, f"{name}/qrels/{split}.tsv")


def load_in_subprocess(dataset_id: str, home: Path, out: Path, **env_extra: str) -> dict:
    env = {**os.environ, "IR_DATASETS_HOME": str(home), **env_extra}
    done = subprocess.run(
        [sys.executable, "-c", LOAD, dataset_id, str(out)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=Path(__file__).parents[2],
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_beir_scifact_from_the_local_cache(tmp_path):
    home = tmp_path / "irds"
    beir_zip(home, "scifact", TOY)
    got = load_in_subprocess("beir/scifact/test", home, tmp_path / "mat")
    beir = BeirDataset(str(TOY)).load()
    assert (got["name"], got["split"]) == ("beir-scifact-test", "test")
    assert got["qrels"] == beir.qrels
    assert got["queries"] == {q: x.text for q, x in beir.queries.items()}
    toy = [json.loads(line) for line in open(TOY / "corpus.jsonl", encoding="utf-8")]
    assert [(d["_id"], d["title"], d["text"]) for d in got["corpus"]] == [
        (d["_id"], d["title"], d["text"]) for d in toy
    ]
    # the train split of the same cache: other labels, the same corpus folder
    train = load_in_subprocess("beir/scifact/train", home, tmp_path / "mat")
    assert train["qrels"] == {"q9": {"d8": 2}} and train["fingerprint"] != got["fingerprint"]


def test_files_not_in_the_cache_offline_is_one_line(tmp_path):
    home = tmp_path / "empty"
    home.mkdir()
    # a proxy that refuses: the download fails at once, network or not
    proxy = "http://127.0.0.1:9"
    got = load_in_subprocess(
        "beir/scifact/test", home, tmp_path / "mat", https_proxy=proxy, HTTPS_PROXY=proxy
    )
    assert got["error"] == "DataError" and "\n" not in got["message"]
    assert got["message"].startswith(
        f"ir_datasets cannot read 'beir/scifact/test' from its cache {home}"
    )


def test_unknown_id_is_a_config_error(tmp_path):
    got = load_in_subprocess("beir/no-such-set/test", tmp_path / "irds", tmp_path / "mat")
    assert got["error"] == "ConfigError"
    assert got["message"].startswith(
        "dataset.dataset_id='beir/no-such-set/test': not an ir_datasets id"
    )


def test_without_the_package_says_what_to_install(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "ir_datasets", None)  # import ir_datasets -> ImportError
    with pytest.raises(ConfigError) as err:
        IrDatasetsDataset("beir/scifact/test", materialise_dir=str(tmp_path)).load()
    assert str(err.value) == (
        "dataset=ir_datasets needs the ir_datasets package: pip install 'rag_lab[ir_datasets]'"
    )
