"""``rag_lab.io.yaml_text``: the config files a job writes through libyaml are byte for byte what
``OmegaConf.to_yaml`` (PyYAML's emitter) writes, and what ``load_own`` reads back is what
``yaml.safe_load`` reads (issue 36: the fixed cost of a multirun job)."""

from __future__ import annotations

import random
import string

import pytest
import yaml
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf
from omegaconf._utils import get_omega_conf_dumper

from rag_lab.io import yaml_text
from rag_lab.paths import CONFIG_DIR

pytestmark = pytest.mark.skipif(not yaml.__with_libyaml__, reason="PyYAML without libyaml")


def pyyaml_text(data: object) -> str:
    """``OmegaConf.to_yaml``'s dump of a container (without parsing ``${`` in the fuzzed
    strings as interpolations first)."""
    return yaml.dump(
        data,
        default_flow_style=False,
        allow_unicode=True,
        sort_keys=False,
        Dumper=get_omega_conf_dumper(),
    )


def test_every_shipped_experiment_config_dumps_as_omegaconf_does():
    with initialize_config_dir(config_dir=CONFIG_DIR, version_base="1.3"):
        for overrides in ([], ["experiment=production_rag"], ["dataset=sample", "judge=lexical"]):
            cfg = compose("evaluate", overrides=overrides, return_hydra_config=True)
            for node in (cfg, cfg.hydra, cfg.hydra.overrides.task):
                assert yaml_text.config_yaml(node) == OmegaConf.to_yaml(node)
            resolved = OmegaConf.to_container(cfg.evaluation, resolve=True)
            assert yaml_text.omegaconf_yaml(resolved) == OmegaConf.to_yaml(resolved)
            job = OmegaConf.to_container(cfg)
            del job["hydra"]  # .hydra/config.yaml: the fast path is taken
            assert yaml_text._c_safe(job)
            # hydra.yaml holds multi-line help texts, which libyaml folds differently: PyYAML
            assert not yaml_text._c_safe(OmegaConf.to_container(cfg.hydra))


def test_fuzzed_strings_and_keys_dump_the_same(monkeypatch):
    rng = random.Random(36)
    alphabet = string.printable + "中文äé€\u00a0\u2028\x85\ufeff\x00 -:#'\"{}[]!&*|>%@`?"
    taken = 0
    for _ in range(3000):
        s = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 160)))
        data = {
            "k": s,
            "l": [s, {"x": s, "n": [1, 2.5, None, True, -1e-20, 10**20, float("nan")]}],
            s[: rng.randint(0, 140)] or "e": 1.5,
        }
        ours = yaml_text.omegaconf_yaml(data)
        assert ours == pyyaml_text(data), repr(s)
        taken += yaml_text._c_safe(data)
        assert yaml_text.load_own(ours) == yaml.safe_load(ours) or s != s  # NaN compares unequal
    assert taken > 150  # the comparison covered libyaml's path, not only the fallback


def test_the_fallback_cases_are_those_libyaml_writes_differently():
    long_key = {"ä" * 70: 1}  # 70 characters, 140 UTF-8 bytes: PyYAML's simple key, not libyaml's
    control = {"k": '"\x85N'}  # NEL: PyYAML writes a line break in single quotes
    for data in (long_key, control):
        assert not yaml_text._c_safe(data)
        c_text = yaml.dump(
            data,
            default_flow_style=False,
            allow_unicode=True,
            sort_keys=False,
            Dumper=yaml_text._dumper(True),
        )
        assert c_text != pyyaml_text(data)  # why the fallback exists
        assert yaml_text.omegaconf_yaml(data) == pyyaml_text(data) == OmegaConf.to_yaml(data)


def test_load_own_falls_back_to_pyyaml_and_its_error():
    assert yaml_text.load_own("a: [1, 'x']\nb: {c: null}\n") == {"a": [1, "x"], "b": {"c": None}}
    with pytest.raises(yaml.YAMLError):
        yaml_text.load_own("a: [1\n")
