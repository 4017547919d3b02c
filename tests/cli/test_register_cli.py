"""``rag-lab register EXPORT``: log an export as an MLflow pyfunc model (the MLflow path of
serving); a folder that is not an export is refused with one line, before anything is logged."""

from __future__ import annotations

from pathlib import Path

import pytest

from rag_lab.cli.register import main
from rag_lab.errors import exit_status
from tests.cli.helpers import cli, error_line
from tests.compose import TOY_OVERRIDES, compose_evaluate


@pytest.fixture(scope="module")
def export_dir(tmp_path_factory) -> Path:
    from rag_lab.evaluate import evaluate
    from rag_lab.export import export_pipeline

    root = tmp_path_factory.mktemp("serve")
    cfg = compose_evaluate([*TOY_OVERRIDES, "retrievers=[bm25]", "tracking=none"], root)
    evaluate(cfg)
    return export_pipeline(Path(cfg.paths.output_dir), root / "export")


def test_logs_and_registers_the_export(export_dir, tmp_path, capsys):
    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    assert exit_status(main, [str(export_dir), "--tracking-uri", uri, "--name", "toy"]) == 0
    out = capsys.readouterr().out
    assert "logged model: models:/toy/1" in out
    assert f"MLFLOW_TRACKING_URI={uri} mlflow models serve -m models:/toy/1" in out
    assert str(MlflowClient(uri).get_registered_model("toy").latest_versions[0].version) == "1"


def test_not_an_export_is_refused(tmp_path):
    (tmp_path / "empty").mkdir()
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    proc = cli("register", str(tmp_path / "empty"), "--tracking-uri", uri)
    assert proc.returncode == 2 and "not a rag_lab export folder" in error_line(proc)
    assert not (tmp_path / "mlflow.db").exists()


def test_a_tampered_export_is_refused_unless_no_verify(export_dir, tmp_path, capsys):
    import shutil

    copy = tmp_path / "export"
    shutil.copytree(export_dir, copy)
    with open(copy / "card.md", "a") as fh:
        fh.write("edited\n")
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    assert exit_status(main, [str(copy), "--tracking-uri", uri]) == 2
    err = capsys.readouterr().err
    assert "card.md differs from its sha256 in manifest.json" in err and "--no-verify" in err
    assert exit_status(main, [str(copy), "--tracking-uri", uri, "--no-verify"]) == 0
    assert "logged model:" in capsys.readouterr().out
