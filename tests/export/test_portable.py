"""What an export can make its loader do (issue 32, case 1): ``pipeline.yaml`` is plain data, and
no endpoint is reached, no key variable read, that the user did not name. A hostile author can
always re-make the manifest; these exports are edited and re-manifested as one would."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from rag_lab.errors import ConfigError
from rag_lab.evaluate import evaluate
from rag_lab.export import export_pipeline, load_pipeline
from rag_lab.export.manifest import MANIFEST_FILE, write_manifest
from rag_lab.export.portable import escape_interpolations, refuse_interpolations
from tests.compose import TOY_OVERRIDES, compose_evaluate
from tests.fake_openai import FakeOpenAI

HYBRID = [*TOY_OVERRIDES, "retrievers=[dense,bm25]", "tracking=none"]


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("portable")
    evaluate(compose_evaluate(HYBRID, tmp))
    return export_pipeline(tmp / "run", tmp / "export")


def hostile(export_dir: Path, dest: Path, edit) -> Path:
    out = shutil.copytree(export_dir, dest)
    config = yaml.safe_load((out / "pipeline.yaml").read_text())
    edit(config)
    (out / "pipeline.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    (out / MANIFEST_FILE).unlink()
    write_manifest(out)
    return out


def add_hyde(config: dict, base_url: str, key_env: str) -> None:
    config["query_transforms"] = {
        "hyde": {
            "_target_": "rag_lab.query_transforms.HydeTransform",
            "retrievers": ["dense"],
            "include_query": True,
            "max_tokens": 32,
            "generator": {
                "_target_": "rag_lab.generator.OpenAIGenerator",
                "model": "m",
                "timeout": 5,
                "retries": 0,
                "base_url": base_url,
                "api_key_env": key_env,
            },
        }
    }


@pytest.fixture
def listener():
    server = FakeOpenAI(lambda body: "a hypothetical passage about pressure")
    with server:
        yield server


def test_an_interpolation_reading_a_variable_is_refused_naming_the_key(
    exported, tmp_path, listener, monkeypatch
):
    monkeypatch.setenv("SOME_VAR", "s3cret")
    url = listener.url.rstrip("/") + "/${oc.env:SOME_VAR}/v1"
    out = hostile(exported, tmp_path / "e", lambda c: add_hyde(c, url, "SOME_VAR"))
    with pytest.raises(ConfigError, match=r"query_transforms\.hyde\.generator\.base_url holds an"):
        load_pipeline(out)
    assert listener.requests == []


def test_a_run_name_from_the_environment_is_refused(exported, tmp_path, monkeypatch):
    monkeypatch.setenv("VAR", "leaked")
    out = hostile(exported, tmp_path / "e", lambda c: c.update(run_name="${oc.env:VAR}"))
    with pytest.raises(ConfigError, match=r"run_name holds an interpolation"):
        load_pipeline(out)


def test_an_endpoint_named_by_the_file_is_never_reached(exported, tmp_path, listener, monkeypatch):
    """The file names a listener and the host's OpenAI key variable: loading without the user's
    endpoint is refused in one line; with it, requests go to the user's URL, with the user's key
    variable, and the file's listener receives nothing."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-host-key")
    monkeypatch.setenv("MY_KEY", "sk-mine")
    theirs = listener.url
    out = hostile(exported, tmp_path / "e", lambda c: add_hyde(c, theirs, "OPENAI_API_KEY"))
    with pytest.raises(ConfigError, match=r"query_transforms\.hyde\.generator calls an endpoint"):
        load_pipeline(out)
    mine = FakeOpenAI(lambda body: "hydraulic pressure passage")
    with mine:
        given = {
            "query_transforms.hyde.generator": {
                "base_url": mine.url,
                "api_key_env": "MY_KEY",
            }
        }
        pipe = load_pipeline(out, endpoints=given)
        assert pipe.retrieve("hydraulic pressure too low", k=3)
        assert mine.requests and listener.requests == []
        assert all(h.get("authorization") == "Bearer sk-mine" for h in mine.headers)


def test_an_endpoint_the_user_names_must_exist(exported):
    with pytest.raises(ConfigError, match=r"endpoint 'generator' names no stage"):
        load_pipeline(exported, endpoints={"generator": {"base_url": "http://127.0.0.1:1/v1"}})


def test_a_written_export_strips_endpoints_and_records_what_the_run_used(tmp_path):
    """An export of a run whose dense retriever called an embeddings endpoint keeps the URL and
    key variable name only as a record; its stage config has neither."""
    config = {
        "retrievers": {
            "dense": {
                "_target_": "rag_lab.retrievers.DenseRetriever",
                "embedder": {"_target_": "x", "base_url": "http://h/v1", "api_key_env": "K"},
            }
        },
        "embedder": {"base_url": "http://h/v1", "api_key_env": "K"},
    }
    from rag_lab.export.portable import strip_endpoints

    used = strip_endpoints(config)
    assert used == {"retrievers.dense.embedder": {"base_url": "http://h/v1", "api_key_env": "K"}}
    assert config["retrievers"]["dense"]["embedder"]["base_url"] is None
    assert config["embedder"] == {"base_url": None, "api_key_env": None}


def test_a_literal_dollar_brace_survives_an_export():
    config = {"postprocess": {"rules": {"entity_pattern": r"\bE${2}\d", "x": ["${a}"]}}}
    escape_interpolations(config)
    refuse_interpolations(config, "pipeline.yaml")  # escaped: accepted
    from omegaconf import OmegaConf

    loaded = OmegaConf.create(config)
    assert loaded.postprocess.rules.entity_pattern == r"\bE${2}\d"
    assert list(loaded.postprocess.rules.x) == ["${a}"]


def test_files_a_stage_names_travel_inside_the_export(tmp_path):
    """``experiment=stacked`` reads the sample's synonyms dictionary: the export holds a copy,
    its pipeline.yaml names no path outside the folder, and it loads after the dataset moved."""
    cfg = compose_evaluate(
        ["experiment=stacked", "embedder=hashing", "dataset.split=dev", "tracking=none"],
        tmp_path,
    )
    evaluate(cfg)
    out = export_pipeline(Path(cfg.paths.output_dir), tmp_path / "export")
    config = yaml.safe_load((out / "pipeline.yaml").read_text())
    path = config["query_transforms"]["synonyms"]["path"]
    assert path.startswith("files/") and (out / path).is_file()
    text = (out / "pipeline.yaml").read_text()
    assert str(Path(cfg.dataset.path).resolve()) not in text
    moved = shutil.copytree(out, tmp_path / "elsewhere")
    assert load_pipeline(moved).retrieve("HX-200 液压油", k=3)
