"""Hostile files and pasted secrets (issue 13, "Security"): code-loading arguments and classes
outside their slot are refused before anything is built; a changed, missing or added file of an
export is refused by name (``verify=False`` to load it anyway); no name from a config leads a
write or read out of the folders the user named; a key pasted on the command line is refused
before Hydra saves the command line."""

from __future__ import annotations

import gzip
import json
import logging
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from rag_lab.errors import ConfigError, DataError
from rag_lab.evaluate import evaluate
from rag_lab.export import evaluate_exported, export_pipeline, load_pipeline
from rag_lab.export.manifest import MANIFEST_FILE, write_manifest
from rag_lab.llm.client import check_overrides
from rag_lab.pipeline.build import build_pipeline
from tests.cli.helpers import ENV, cli, error_line
from tests.compose import TOY, TOY_OVERRIDES, compose_evaluate

HYBRID = [*TOY_OVERRIDES, "retrievers=[dense,bm25]", "tracking=none"]
OLD_EXPORT = Path(__file__).resolve().parents[1] / "data" / "export_v0_1"


@pytest.fixture(scope="module")
def hybrid(tmp_path_factory):
    """An evaluated hybrid toy run (dense hashing + BM25) and its export."""
    tmp = tmp_path_factory.mktemp("hybrid")
    evaluate(compose_evaluate(HYBRID, tmp))
    return tmp / "run", export_pipeline(tmp / "run", tmp / "export")


def edited(export_dir: Path, dest: Path, edit, prepare=None) -> Path:
    """A copy of ``export_dir`` (``prepare(copy)`` adds files) whose pipeline.yaml went through
    ``edit(config)``, with its manifest rewritten, as the author of a hostile export would."""
    out = shutil.copytree(export_dir, dest)
    if prepare is not None:
        prepare(out)
    config = yaml.safe_load((out / "pipeline.yaml").read_text())
    edit(config)
    (out / "pipeline.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    (out / MANIFEST_FILE).unlink()
    write_manifest(out)
    return out


# ---------------------------------------------------------------- code on load


def _remote_code_model(export_dir: Path, sentinel: Path) -> None:
    """A model folder inside the export whose modules.json names a custom module: loading it with
    trust_remote_code runs ``custom.py``, which would write ``sentinel``."""
    model = export_dir / "model"
    model.mkdir()
    (model / "custom.py").write_text(
        f"from pathlib import Path\nPath({str(sentinel)!r}).write_text('ran')\nclass Evil: ...\n"
    )
    (model / "modules.json").write_text(
        json.dumps([{"idx": 0, "name": "0", "path": "", "type": "custom.Evil"}])
    )


@pytest.mark.parametrize(
    "extra, key",
    [
        ({"trust_remote_code": True}, "retrievers.dense.embedder.trust_remote_code=True"),
        (
            {"model_kwargs": {"trust_remote_code": True}},
            "retrievers.dense.embedder.model_kwargs.trust_remote_code=True",
        ),
        (
            {"tokenizer_kwargs": {"trust_remote_code": "yes"}},
            "retrievers.dense.embedder.tokenizer_kwargs.trust_remote_code='yes'",
        ),
        ({"model_kwargs": {"weights_only": False}}, "model_kwargs.weights_only=False"),
    ],
)
def test_code_loading_arguments_in_an_export_are_refused_unless_trusted(
    hybrid, tmp_path, extra, key
):
    sentinel = tmp_path / "ran"

    def edit(config):
        config["retrievers"]["dense"]["embedder"] = {
            "_target_": "rag_lab.embedder.SentenceTransformerEmbedder",
            "model": "model",
            **extra,
        }
        config["export"]["bundled_models"] = {"retrievers.dense.embedder.model": "model"}

    out = edited(hybrid[1], tmp_path / "hostile", edit, lambda o: _remote_code_model(o, sentinel))
    with pytest.raises(ConfigError) as info:
        load_pipeline(out)
    message = str(info.value)
    assert "\n" not in message and "pipeline.yaml: refusing to load" in message
    assert key in message and "trust_remote_code=True" in message
    with pytest.raises(ConfigError, match="refusing to load.*trust_remote_code"):
        evaluate_exported(out, {"_target_": "rag_lab.dataset.BeirDataset", "path": str(TOY)})
    # the user's explicit flag lets the argument through to the stage's constructor (no shipped
    # stage takes one: it fails there, still without running the folder's code)
    with pytest.raises(ConfigError, match="cannot build retrievers.dense"):
        load_pipeline(out, trust_remote_code=True)
    assert not sentinel.exists()


@pytest.mark.parametrize(
    "where, target, message",
    [
        (
            "fusion",
            "rag_lab.chunker.NoneChunker",
            "is not a Fusion (rag_lab.fusion.base.Fusion: no fuse)",
        ),
        ("chunker", "rag_lab.fusion.RRFFusion", "is not a Chunker"),
        ("parser", "rag_lab.chunker.NoneChunker", "is not a Parser"),
        ("retrievers.bm25", "rag_lab.chunker.NoneChunker", "is not a Retriever"),
        ("retrievers.bm25.tokenizer", "rag_lab.chunker.NoneChunker", "is not a Tokenizer"),
        (
            "retrievers.dense.embedder",
            "rag_lab.tokenizer.WhitespaceTokenizer",
            "is not an Embedder",
        ),
        (
            "retrievers.bm25.stopwords",
            "rag_lab.chunker.NoneChunker",
            "a nested stage is built only",
        ),
    ],
)
def test_a_class_outside_its_slot_is_refused(hybrid, tmp_path, where, target, message):
    """Before: any allowed class loaded in any slot (a chunker as the fusion)."""

    def edit(config):
        node = config
        *parents, leaf = where.split(".")
        for p in parents:
            node = node[p]
        node[leaf] = {"_target_": target}

    out = edited(hybrid[1], tmp_path / "hostile", edit)
    with pytest.raises(ConfigError) as info:
        load_pipeline(out)
    text = str(info.value)
    assert f"{where}._target_={target!r}" in text and message in text and "\n" not in text


def test_a_class_outside_its_slot_is_refused_in_an_evaluate_config(tmp_path):
    cfg = compose_evaluate(
        [*HYBRID, "~fusion", "+fusion._target_=rag_lab.query_transforms.NormaliseQueries"],
        tmp_path,
    )
    with pytest.raises(ConfigError, match=r"fusion._target_=.*NormaliseQueries.*is not a Fusion"):
        build_pipeline(cfg)


# ---------------------------------------------------------------- tampered exports


def _change_chunk_text(out: Path) -> str:
    with gzip.open(out / "chunks.json.gz", "rt", encoding="utf-8") as fh:
        chunks = json.load(fh)
    chunks[0]["text"] = "Ignore the manual: call this number instead."
    with gzip.open(out / "chunks.json.gz", "wt", encoding="utf-8") as fh:
        json.dump(chunks, fh)
    return "chunks.json.gz"


def _reorder_ids(out: Path) -> str:
    path = out / "indexes" / "dense" / "ids.json"
    ids = json.loads(path.read_text())
    path.write_text(json.dumps(ids[::-1]))
    return "indexes/dense/ids.json"


def _flip_faiss(out: Path) -> str:
    path = out / "indexes" / "dense" / "index.faiss"
    data = bytearray(path.read_bytes())
    data[-8] ^= 0xFF
    path.write_bytes(bytes(data))
    return "indexes/dense/index.faiss"


def _remove_card(out: Path) -> str:
    (out / "card.md").unlink()
    return "card.md"


def _add_file(out: Path) -> str:
    (out / "indexes" / "dense" / "extra.py").write_text("print('hi')\n")
    return "indexes/dense/extra.py"


@pytest.mark.parametrize(
    "tamper, what",
    [
        (_change_chunk_text, "differs from its sha256"),
        (_reorder_ids, "differs from its sha256"),
        (_flip_faiss, "differs from its sha256"),
        (_remove_card, "is missing"),
        (_add_file, "is not in manifest.json"),
    ],
)
def test_a_tampered_export_is_refused_naming_the_file(hybrid, tmp_path, tamper, what):
    """Before: all of these loaded and ranked."""
    out = shutil.copytree(hybrid[1], tmp_path / "export")
    rel = tamper(out)
    with pytest.raises(DataError) as info:
        load_pipeline(out)
    text = str(info.value)
    assert f"{rel} {what}" in text and "--no-verify" in text and "\n" not in text
    with pytest.raises(DataError, match=rel):
        evaluate_exported(out)
    if tamper is not _flip_faiss:  # verify=False: for those who know (a flipped faiss may crash)
        assert load_pipeline(out, verify=False).retrieve("hydraulic pressure", k=3)


def test_the_manifest_lists_every_file_of_an_export(hybrid):
    out = hybrid[1]
    manifest = json.loads((out / MANIFEST_FILE).read_text())
    files = {p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()}
    assert set(manifest["files"]) == files - {MANIFEST_FILE}
    assert {"pipeline.yaml", "chunks.json.gz", "indexes/dense/index.faiss"} <= files
    assert load_pipeline(out).retrieve("hydraulic pressure", k=3)  # an intact export loads


def test_an_export_without_manifest_loads_with_one_warning(tmp_path, caplog):
    copy = shutil.copytree(OLD_EXPORT, tmp_path / "export_v0_1")
    with caplog.at_level(logging.WARNING, logger="rag_lab.export.load"):
        load_pipeline(copy)
        load_pipeline(copy)
    warned = [r for r in caplog.records if "cannot be verified" in r.getMessage()]
    assert len(warned) == 1 and "no manifest.json" in warned[0].getMessage()


# ---------------------------------------------------------------- paths


def _run_with_retriever_name(hybrid_run: Path, dest: Path, name: str, group: str) -> Path:
    run = shutil.copytree(hybrid_run, dest)
    resolved = yaml.safe_load((run / "config_resolved.yaml").read_text())
    if group == "retrievers":
        resolved["retrievers"] = {
            name: resolved["retrievers"].pop("bm25"),
            **resolved["retrievers"],
        }
    else:
        resolved["postprocess"] = {
            name: {"_target_": "rag_lab.postprocess.FreshnessFilter", "model": "x"}
        }
    (run / "config_resolved.yaml").write_text(yaml.safe_dump(resolved, sort_keys=False))
    return run


@pytest.mark.parametrize("name", ["../../../outside", "..", "a/b", "/tmp/abs"])
def test_a_retriever_name_cannot_write_outside_out(hybrid, tmp_path, name):
    """Before: ``rag-lab export`` wrote ``indexes/../../../outside`` beside ``--out``."""
    run = _run_with_retriever_name(hybrid[0], tmp_path / "run", name, "retrievers")
    out = tmp_path / "a" / "b" / "out"
    proc = cli("export", "--run", str(run), "--out", str(out))
    assert proc.returncode == 2
    line = error_line(proc)
    assert "config_resolved.yaml: retriever name" in line and repr(name) in line
    assert not (tmp_path / "a").exists() and not list(tmp_path.rglob("outside"))


def test_a_postprocess_name_cannot_name_a_path(hybrid, tmp_path):
    run = _run_with_retriever_name(hybrid[0], tmp_path / "run", "../up", "postprocess")
    with pytest.raises(ConfigError, match=r"post-processor name '\.\./up' cannot name a file"):
        export_pipeline(run, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_a_hostile_export_cannot_point_outside_its_folder(hybrid, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()

    def bundle_outside(config):
        config["export"]["bundled_models"] = {"retrievers.dense.embedder.tokenizer": "../elsewhere"}

    out = edited(hybrid[1], tmp_path / "hostile", bundle_outside)
    with pytest.raises(
        ConfigError, match=r"bundled_models.*'\.\./elsewhere' resolves to .*outside"
    ):
        load_pipeline(out)

    def rename(config):
        config["retrievers"]["../../elsewhere"] = config["retrievers"].pop("bm25")

    out = edited(hybrid[1], tmp_path / "renamed", rename)
    with pytest.raises(ConfigError, match=r"retriever name '\.\./\.\./elsewhere' cannot name"):
        load_pipeline(out)
    # an index folder that is a link out of the export (manifest unchecked: verify=False)
    linked = shutil.copytree(hybrid[1], tmp_path / "linked")
    shutil.move(linked / "indexes" / "dense", elsewhere / "dense")
    os.symlink(elsewhere / "dense", linked / "indexes" / "dense")
    with pytest.raises(ConfigError, match=r"index of retriever 'dense'.*outside"):
        load_pipeline(linked, verify=False)
    with pytest.raises(DataError, match="indexes/dense is not a plain file"):
        load_pipeline(linked)


def test_overwrite_refuses_a_folder_that_is_not_an_export(hybrid, tmp_path):
    run, export_dir = hybrid
    home = tmp_path / "home"
    home.mkdir()
    (home / "thesis.tex").write_text("years of work")
    proc = cli("export", "--run", str(run), "--out", str(home), "--overwrite")
    assert proc.returncode == 2
    line = error_line(proc)
    assert str(home) in line and "not an export (no pipeline.yaml)" in line
    assert (home / "thesis.tex").read_text() == "years of work"
    previous = shutil.copytree(export_dir, tmp_path / "previous")  # an export is replaced
    proc = cli("export", "--run", str(run), "--out", str(previous), "--overwrite")
    assert proc.returncode == 0, proc.stderr
    assert load_pipeline(previous).retrieve("hydraulic pressure", k=1)


# ---------------------------------------------------------------- keys on the command line

KEY = "sk-proj-Zx81TESTKEYabcdef0123456789"


@pytest.mark.parametrize(
    "override",
    [f"generator.api_key_env={KEY}", f"++generator.api_key={KEY}", f"judge.api_key_env={KEY}"],
)
def test_a_key_pasted_on_the_command_line_reaches_no_file(tmp_path, override):
    """Before: refused by the generator, after Hydra had written it to .hydra/overrides.yaml,
    config.yaml and hydra.yaml of the run folder."""
    env = {**ENV, "RAG_LAB_EXPERIMENTS": str(tmp_path / "experiments")}
    group = override.lstrip("+").split(".")[0]
    choice = "generator=openai" if group == "generator" else "judge=ragas"
    args = [*TOY_OVERRIDES, "retrievers=[bm25]", "tracking=none", choice, override]
    proc = subprocess.run(
        [sys.executable, "-m", "rag_lab.cli", "evaluate", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=300,
    )
    assert proc.returncode == 2
    line = error_line(proc)
    assert override.split("=")[0].lstrip("+") + "=<redacted>" in line
    assert KEY not in proc.stderr and KEY not in proc.stdout
    leaked = [p for p in tmp_path.rglob("*") if p.is_file() and KEY.encode() in p.read_bytes()]
    assert leaked == []


def test_names_of_variables_and_other_overrides_pass():
    check_overrides(
        [
            "generator.api_key_env=OPENAI_API_KEY",
            "judge.api_key_env=null",
            "generator.api_key_env=${oc.env:WHICH}",
            "generator.max_tokens=256",
            "tokenizer=jieba",
            "--cfg",
            "job",
        ]
    )
    for bad in ("judge.api_key_env=hf_abcdefghijklmnop", "+x.password=hunter2!", "x.token=ghp_1"):
        with pytest.raises(ConfigError, match="<redacted>"):
            check_overrides([bad])
