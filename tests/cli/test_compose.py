"""rag_lab.cli._compose: the patched Hydra composes the same configs, fewer times, and sees an
edited YAML file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

ENV = {**os.environ, "PYTHONWARNINGS": "ignore"}

COMPOSE = textwrap.dedent(
    """
    import sys
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf
    from rag_lab.paths import CONFIG_DIR
    if sys.argv[1] == "patched":
        from rag_lab.cli._compose import speed_up_compositions
        speed_up_compositions()
    runs = [["embedder=hashing", "chunker=none"], ["retrievers=[dense,bm25]", "fusion=rrf"], []]
    with initialize_config_dir(config_dir=CONFIG_DIR, version_base="1.3"):
        for overrides in runs * 2:  # the second round reads every file from the process cache
            cfg = compose("evaluate", overrides=overrides, return_hydra_config=True)
            print(OmegaConf.to_yaml(cfg))
    """
)

APP = textwrap.dedent(
    """
    import json, sys
    import hydra
    from hydra._internal.config_loader_impl import ConfigLoaderImpl
    from omegaconf import OmegaConf
    conf, mode = sys.argv.pop(1), sys.argv.pop(1)
    if mode == "patched":
        from rag_lab.cli._compose import speed_up_compositions
        speed_up_compositions()
    calls = []
    load = ConfigLoaderImpl.load_configuration
    def counted(self, *args, **kw):
        calls.append(1)
        return load(self, *args, **kw)
    ConfigLoaderImpl.load_configuration = counted
    jobs = []
    @hydra.main(config_path=conf, config_name="app", version_base="1.3")
    def app(cfg):
        from hydra.core.hydra_config import HydraConfig
        hydra_cfg = OmegaConf.to_container(HydraConfig.get(), resolve=True, enum_to_str=True)
        jobs.append({**OmegaConf.to_container(cfg, resolve=True), "hydra": hydra_cfg})
    app()
    print(json.dumps({"compositions": len(calls), "jobs": jobs}))
    """
)


def _python(code: str, *args: str) -> str:
    proc = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, env=ENV, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


def test_patched_compositions_are_hydras_own():
    assert _python(COMPOSE, "patched") == _python(COMPOSE, "plain")


def _app(tmp_path: Path) -> Path:
    conf = tmp_path / "conf"
    (conf / "model").mkdir(parents=True)
    (conf / "app.yaml").write_text("defaults:\n  - model: small\n  - _self_\nname: app\nk: 1\n")
    (conf / "model" / "small.yaml").write_text("size: 1\n")
    (conf / "model" / "large.yaml").write_text("size: 100\n")
    return conf


def test_a_multirun_composes_the_primary_config_once_and_each_job_once(tmp_path):
    conf = _app(tmp_path)
    args = ["-m", "model=small,large", "k=2", f"hydra.sweep.dir={tmp_path / 'sweep'}"]
    args.append(f"hydra.run.dir={tmp_path / 'run'}")  # Hydra's default has the time in it
    plain = json.loads(_python(APP, str(conf), "plain", *args).splitlines()[-1])
    patched = json.loads(_python(APP, str(conf), "patched", *args).splitlines()[-1])
    assert patched["jobs"] == plain["jobs"]  # the task's and Hydra's config of every job
    assert {j["hydra"]["mode"] for j in patched["jobs"]} == {"MULTIRUN"}
    assert [(j["model"]["size"], j["k"]) for j in patched["jobs"]] == [(1, 2), (100, 2)]
    # Hydra: the mode probe, the primary config, and each job twice; patched: probe + one per job
    assert (plain["compositions"], patched["compositions"]) == (6, 3)


def _run_app(conf: Path, mode: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", APP, str(conf), mode, *args],
        capture_output=True,
        text=True,
        env=ENV,
        timeout=300,
    )


def test_a_run_composes_its_config_once(tmp_path):
    conf = _app(tmp_path)
    # (the app resolves Hydra's whole config: the sweep's folder has the time, its subdir the job
    # number a run does not have)
    sweep = [f"hydra.sweep.dir={tmp_path / 'sweep'}", "hydra.sweep.subdir=0"]
    args = ["model=large", "k=3", f"hydra.run.dir={tmp_path / 'run'}", *sweep]
    plain = json.loads(_python(APP, str(conf), "plain", *args).splitlines()[-1])
    patched = json.loads(_python(APP, str(conf), "patched", *args).splitlines()[-1])
    assert patched["jobs"] == plain["jobs"]  # the task's and Hydra's config, mode RUN included
    assert patched["jobs"][0]["hydra"]["mode"] == "RUN"
    assert [(j["model"]["size"], j["k"]) for j in patched["jobs"]] == [(100, 3)]
    assert (plain["compositions"], patched["compositions"]) == (2, 1)


def test_a_run_hydra_refuses_is_still_refused(tmp_path):
    """A sweep override without ``-m`` and a group left ``???`` compose in the mode probe (which
    skips both) but not in a run: the run composes again and fails as Hydra's own does."""
    conf = _app(tmp_path)
    run_dir = f"hydra.run.dir={tmp_path / 'run'}"
    subdir = "hydra.sweep.subdir=0"
    sweep = [_run_app(conf, mode, "model=small,large", run_dir) for mode in ("plain", "patched")]
    assert [p.returncode for p in sweep] == [1, 1]
    assert "Ambiguous value for argument 'model=small,large'" in sweep[1].stderr
    (conf / "app.yaml").write_text("defaults:\n  - model: ???\n  - _self_\nname: app\nk: 1\n")
    missing = [_run_app(conf, mode, run_dir) for mode in ("plain", "patched")]
    assert [p.returncode for p in missing] == [1, 1]
    assert "You must specify 'model'" in missing[1].stderr
    chosen = _python(APP, str(conf), "patched", "model=small", run_dir, subdir).splitlines()[-1]
    chosen = json.loads(chosen)
    assert chosen["compositions"] == 1 and chosen["jobs"][0]["model"]["size"] == 1


def test_an_edited_yaml_file_is_parsed_again(tmp_path):
    conf = _app(tmp_path)
    code = textwrap.dedent(
        f"""
        from pathlib import Path
        from hydra import compose, initialize_config_dir
        from rag_lab.cli._compose import speed_up_compositions
        speed_up_compositions()
        small = Path({str(conf / "model" / "small.yaml")!r})
        with initialize_config_dir(config_dir={str(conf)!r}, version_base="1.3"):
            first = compose("app")
            first.model.size = 7  # a composed config is the caller's own
            again = compose("app")
            small.write_text("size: 2\\n")  # same length, same second: only the bytes differ
            edited = compose("app")
        print(again.model.size, edited.model.size)
        """
    )
    assert _python(code).split() == ["1", "2"]


def test_an_interpolated_default_still_follows_its_choice(tmp_path):
    """``data: ${model}`` in a defaults list resolves against the known choices, which the
    patched Hydra builds only for nodes that hold such a default."""
    conf = _app(tmp_path)
    (conf / "app.yaml").write_text(
        "defaults:\n  - model: small\n  - data: ${model}\n  - _self_\nname: app\nk: 1\n"
    )
    (conf / "data").mkdir()
    (conf / "data" / "small.yaml").write_text("rows: 10\n")
    (conf / "data" / "large.yaml").write_text("rows: 1000\n")
    args = ["-m", "model=small,large", f"hydra.sweep.dir={tmp_path / 'sweep'}"]
    args.append(f"hydra.run.dir={tmp_path / 'run'}")
    plain = json.loads(_python(APP, str(conf), "plain", *args).splitlines()[-1])
    patched = json.loads(_python(APP, str(conf), "patched", *args).splitlines()[-1])
    assert patched["jobs"] == plain["jobs"]
    assert [(j["model"]["size"], j["data"]["rows"]) for j in patched["jobs"]] == [
        (1, 10),
        (100, 1000),
    ]


def test_yaml_parsed_through_libyaml_is_what_hydra_parses(tmp_path):
    """Config files are parsed with libyaml under OmegaConf's loader (``_yaml_config``): CRLF
    lines and a ``# @package`` header, OmegaConf's floats (``1e3``), dates kept as strings, a
    non-ASCII value compose as plain Hydra composes them; a file Hydra refuses (a duplicate key,
    bad YAML) is refused with Hydra's own message."""
    conf = _app(tmp_path)
    (conf / "model" / "crlf.yaml").write_bytes(
        "# @package _global_\r\nmodel:\r\n  size: 1e3\r\n"
        "  day: 2020-01-01\r\n  name: 温度\r\n".encode()
    )
    (conf / "model" / "dup.yaml").write_text("size: 1\nsize: 2\n")
    (conf / "model" / "bad.yaml").write_text("size: [1\n")
    code = textwrap.dedent(
        f"""
        import sys
        from hydra import compose, initialize_config_dir
        from omegaconf import OmegaConf
        if sys.argv[1] == "patched":
            from rag_lab.cli._compose import speed_up_compositions
            speed_up_compositions()
        with initialize_config_dir(config_dir={str(conf)!r}, version_base="1.3"):
            print(OmegaConf.to_yaml(compose("app", overrides=["model=crlf"])))
            for bad in ("dup", "bad"):
                try:
                    compose("app", overrides=["model=" + bad])
                except Exception as exc:
                    print(type(exc).__name__, exc)
        """
    )
    patched = _python(code, "patched")
    assert patched == _python(code, "plain")
    assert "size: 1000.0" in patched and "day: '2020-01-01'" in patched and "温度" in patched
    assert "found duplicate key size" in patched and "ParserError" in patched  # Hydra's words
