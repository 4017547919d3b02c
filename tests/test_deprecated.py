"""Import paths and config targets that moved in 0.5 keep working until ``REMOVED_IN``, each with
a ``DeprecationWarning`` naming the new path and the release that removes the old one."""

from __future__ import annotations

import importlib
import subprocess
import sys
import warnings

import pytest

from rag_lab._deprecated import MOVED_MODULES, MOVED_TARGETS, REMOVED_IN, upgrade_targets
from tests.cli.helpers import ENV


@pytest.mark.parametrize("old, new", sorted(MOVED_MODULES.items()))
def test_old_module_path_warns_and_is_the_new_module(old: str, new: str):
    sys.modules.pop(old, None)  # an earlier test may have imported it already
    with pytest.warns(DeprecationWarning) as caught:
        module = importlib.import_module(old)
    message = str(caught[0].message)
    assert f"{old} moved to {new}" in message and f"removed in rag_lab {REMOVED_IN}" in message
    assert module is importlib.import_module(new)
    assert module.__name__ == new and module.__spec__.name == new  # its identity is kept


def test_the_warning_points_at_the_importing_line(tmp_path):
    script = tmp_path / "user.py"
    script.write_text("import warnings\nwarnings.simplefilter('always')\nimport rag_lab.gate\n")
    proc = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, env=ENV, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    assert f"{script}:3: DeprecationWarning: rag_lab.gate moved to rag_lab.analysis.gate" in (
        proc.stderr
    )


def test_from_import_of_a_name_through_an_old_path_in_a_fresh_interpreter():
    probe = (
        "import warnings; warnings.simplefilter('error', DeprecationWarning)\n"
        "try:\n    from rag_lab.build import build_pipeline\n"
        "except DeprecationWarning as w:\n    print('warned', w)\n"
        "warnings.simplefilter('ignore')\n"
        "from rag_lab.build import build_pipeline\n"
        "from rag_lab.pipeline.build import build_pipeline as new\n"
        "assert build_pipeline is new\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, env=ENV, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    assert "warned rag_lab.build moved to rag_lab.pipeline.build" in proc.stdout


def test_new_paths_import_without_any_warning():
    probe = (
        "import warnings\n"
        "warnings.filterwarnings('error', message='rag_lab', category=DeprecationWarning)\n"
        + "".join(f"import {new}\n" for new in sorted(set(MOVED_MODULES.values())))
    )
    proc = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        env=ENV,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]


def test_a_moved_target_is_read_as_its_new_class_with_a_warning():
    config = {"postprocess": {"rules": {"_target_": "rag_lab.postprocess.RuleReranker"}}}
    with pytest.warns(DeprecationWarning, match=r"postprocess\.rules\._target_="):
        upgraded = upgrade_targets(config)
    assert upgraded["postprocess"]["rules"]["_target_"] == "rag_lab.reranker.RuleReranker"
    assert config["postprocess"]["rules"]["_target_"] == "rag_lab.postprocess.RuleReranker"
    for new in MOVED_TARGETS.values():
        module, name = new.rsplit(".", 1)
        assert isinstance(getattr(importlib.import_module(module), name), type)


def test_targets_that_did_not_move_are_left_alone():
    config = {"fusion": {"_target_": "rag_lab.fusion.RRFFusion", "k": 60}, "x": [1, {"y": 2}]}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert upgrade_targets(config) == config
