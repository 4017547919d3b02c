"""Ray's ``env_vars`` given on the command line (issue 32, item 14).

Before: ``+hydra.launcher.ray.init.runtime_env.env_vars.HF_HUB_OFFLINE=1``, the example in
conf/hydra/launcher/ray.yaml, reached ``ray.init`` as the integer 1 and Ray raised a TypeError
(its runtime environment takes strings only). Now ``rag-lab evaluate`` quotes such a value before
Hydra reads the command line; the composed launcher config holds the string."""

from __future__ import annotations

import pytest
from hydra import compose, initialize_config_dir

from rag_lab.distributed.runtime_env import ENV_VARS_KEY, string_env_overrides
from rag_lab.paths import CONFIG_DIR

pytestmark = pytest.mark.filterwarnings(r"ignore:\s*'hydra/launcher/ray' is validated against")


@pytest.mark.parametrize(
    ("value", "quoted"),
    [("1", "'1'"), ("0.5", "'0.5'"), ("true", "'true'"), ("False", "'False'"),
     ("null", "'null'"), ("-3", "'-3'"), ("1e3", "'1e3'")],
)  # fmt: skip
def test_values_hydra_reads_as_non_strings_are_quoted(value, quoted):
    for prefix in ("", "+", "++"):
        arg = f"{prefix}{ENV_VARS_KEY}.X={value}"
        assert string_env_overrides([arg]) == [f"{prefix}{ENV_VARS_KEY}.X={quoted}"]


@pytest.mark.parametrize(
    "arg",
    [
        f"+{ENV_VARS_KEY}.X=offline",  # a string already
        f"+{ENV_VARS_KEY}.X='1'",  # quoted
        f"+{ENV_VARS_KEY}.X=1,2",  # a sweep over two values
        f"+{ENV_VARS_KEY}.X=${{oc.env:HOME}}",  # an interpolation
        f"~{ENV_VARS_KEY}.X",  # a deletion
        "evaluation.retrieve_k=1",  # not Ray's
    ],
)
def test_other_overrides_pass_unchanged(arg):
    assert string_env_overrides([arg]) == [arg]


def test_the_composed_launcher_config_holds_strings(tmp_path):
    argv = [
        "hydra/launcher=ray",
        f"paths.experiments={tmp_path}",
        f"+{ENV_VARS_KEY}.HF_HUB_OFFLINE=1",
        f"+{ENV_VARS_KEY}.OMP_NUM_THREADS=4",
    ]
    with initialize_config_dir(config_dir=CONFIG_DIR, version_base="1.3"):
        raw = compose("evaluate", overrides=argv, return_hydra_config=True)
        cfg = compose("evaluate", overrides=string_env_overrides(argv), return_hydra_config=True)
    assert raw.hydra.launcher.ray.init.runtime_env.env_vars.HF_HUB_OFFLINE == 1  # the bug
    env = cfg.hydra.launcher.ray.init.runtime_env.env_vars
    assert (env.HF_HUB_OFFLINE, env.OMP_NUM_THREADS) == ("1", "4")
    assert all(isinstance(v, str) for v in env.values())


def test_rag_lab_evaluate_rewrites_its_command_line(monkeypatch):
    """``main`` hands Hydra the quoted override (Hydra itself is not run here)."""
    import sys

    from rag_lab.cli import evaluate

    seen: list[str] = []
    monkeypatch.setattr(evaluate, "task", lambda: seen.extend(sys.argv[1:]))
    monkeypatch.setattr(sys, "argv", ["rag-lab evaluate", f"+{ENV_VARS_KEY}.HF_HUB_OFFLINE=1"])
    evaluate.main()
    assert seen == [f"+{ENV_VARS_KEY}.HF_HUB_OFFLINE='1'"]
