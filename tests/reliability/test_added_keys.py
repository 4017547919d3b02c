"""Keys added with ``+`` under rag_lab's own settings (issue 32, item 11).

Before: ``+evaluation.retrive_k=5`` (a typo of ``retrieve_k``) was added as a new key that nothing
reads, and the run went on with ``retrieve_k=100``. Now a key added under ``evaluation``,
``cache``, ``sweep`` or ``paths`` must be one the section has: one line naming the closest known
key, exit 2. Free-form maps (``sweep.floors``), stages' arguments and new top-level keys that are
not near a known one stay allowed."""

from __future__ import annotations

import pytest
from hydra import compose, initialize_config_dir

from rag_lab.errors import ConfigError
from rag_lab.paths import CONFIG_DIR
from rag_lab.validate import check_added_keys
from tests.cli.helpers import cli, error_line
from tests.compose import TOY_OVERRIDES


def composed(tmp_path, overrides: list[str]):
    with initialize_config_dir(config_dir=CONFIG_DIR, version_base="1.3"):
        return compose(
            "evaluate", overrides=[*TOY_OVERRIDES, f"paths.experiments={tmp_path}", *overrides]
        )


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("+evaluation.retrive_k=5", "unknown key evaluation.retrive_k; did you mean "
         "evaluation.retrieve_k?"),
        ("+cache.on_eror=bypass", "unknown key cache.on_eror; did you mean cache.on_error?"),
        ("+sweep.report_splt=dev", "unknown key sweep.report_splt; did you mean "
         "sweep.report_split?"),
        ("+evalution.retrieve_k=5", "unknown key evalution; did you mean evaluation?"),
        ("+run_nam=x", "unknown key run_nam; did you mean run_name?"),
        ("+evaluation.zzz=1", "unknown key evaluation.zzz; evaluation has answer_k, "),
    ],
)  # fmt: skip
def test_an_unknown_added_key_is_refused_with_the_closest_known_one(tmp_path, override, message):
    cfg = composed(tmp_path, [override])
    with pytest.raises(ConfigError) as info:
        check_added_keys(cfg, [override])
    assert str(info.value).startswith(f"{override}: {message}")


@pytest.mark.parametrize(
    "override",
    [
        "+sweep.floors.hit_rate_at_5=0.8",  # a free-form map
        "++evaluation.retrieve_k=5",  # a known key, forced (++ is not checked)
        "+postprocess.rules.section_type_weights.troubleshooting=1.5",  # a stage's argument map
        "+fusion.weights.colbert=0.3",
        "+my_setting=3",  # a new top-level key of the user's own
        "+x.password=abc",
    ],
)
def test_legitimate_additions_pass(tmp_path, override):
    extra = {"+postprocess.rules": ["postprocess=[rules]"], "+fusion.weights": ["fusion=weighted"]}
    groups = next((v for k, v in extra.items() if override.startswith(k)), [])
    cfg = composed(tmp_path, [*groups, override])
    check_added_keys(cfg, [*groups, override])


def test_the_command_refuses_it_in_one_line(tmp_path):
    ran = cli(
        "evaluate", *TOY_OVERRIDES, "retrievers=[bm25]", "tracking=none", "cache.dir=null",
        f"hydra.run.dir={tmp_path / 'run'}", "+evaluation.retrive_k=5",
    )  # fmt: skip
    assert ran.returncode == 2
    assert error_line(ran) == (
        "error: +evaluation.retrive_k=5: unknown key evaluation.retrive_k; did you mean "
        "evaluation.retrieve_k?"
    )
    assert not (tmp_path / "run" / "metrics.json").exists()
