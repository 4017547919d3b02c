"""YAML text of configs through libyaml when it writes (reads) exactly what PyYAML's pure Python
code does: a multirun job writes four config files (``.hydra/config.yaml``, ``hydra.yaml``,
``overrides.yaml``, ``config_resolved.yaml``) and the sweep's report reads them back; the C
emitter and parser take about a third of the time (issue 36, fixed cost per invocation).

- :func:`omegaconf_yaml` is ``OmegaConf.to_yaml``'s text (its ``yaml.dump`` call and its dumper's
  string representer) for plain data. libyaml's emitter differs from PyYAML's on strings that are
  not printable (control characters, ``\\x85``, a byte-order mark: other escapes) and on mapping
  keys longer than 128 UTF-8 bytes (PyYAML counts characters before writing an explicit ``?``
  key), so data holding either, or any value but a dict, list, str, int, float, bool or None, is
  dumped by PyYAML as before
  (``tests/io/test_yaml_text.py`` fuzzes the rest against PyYAML).
- :func:`load_own` reads a YAML file rag_lab wrote (a run folder's configs) with libyaml's
  parser and PyYAML's safe constructor, falling back to PyYAML's parser on anything libyaml
  refuses.
"""

from __future__ import annotations

from typing import Any

MAX_KEY_BYTES = 100  # below both emitters' simple-key limit (128: characters / UTF-8 bytes)


def _c_safe(value: Any) -> bool:
    """Whether libyaml writes ``value`` as PyYAML does (see the module docstring)."""
    if isinstance(value, dict):
        return all(
            (not isinstance(k, str) or (k.isprintable() and len(k.encode()) <= MAX_KEY_BYTES))
            and _c_safe(k)
            and _c_safe(v)
            for k, v in value.items()
        )
    if isinstance(value, (list, tuple)):
        return all(_c_safe(v) for v in value)
    if isinstance(value, str):
        return value.isprintable()
    return value is None or type(value) in (bool, int, float)  # others: PyYAML, to be sure


def _dumper(c: bool) -> Any:
    import yaml
    from omegaconf._utils import OmegaConfDumper, get_omega_conf_dumper

    if not c or not getattr(yaml, "__with_libyaml__", False):
        return get_omega_conf_dumper()
    global _C_DUMPER
    if _C_DUMPER is None:
        # CDumper is CEmitter + PyYAML's own Representer and Resolver: only the emitter is C
        _C_DUMPER = type("OmegaConfCDumper", (yaml.CDumper,), {})
        _C_DUMPER.add_representer(str, OmegaConfDumper.str_representer)
    return _C_DUMPER


_C_DUMPER: Any = None


def config_yaml(cfg: Any) -> str:
    """``OmegaConf.to_yaml(cfg)``: the same text, through libyaml when that gives the same."""
    from omegaconf import OmegaConf
    from omegaconf.omegaconf import _ensure_container

    return omegaconf_yaml(OmegaConf.to_container(_ensure_container(cfg), enum_to_str=True))


def omegaconf_yaml(data: Any) -> str:
    """``OmegaConf.to_yaml``'s text of a container it made (or of plain data: what it writes back
    unchanged), through libyaml when that gives the same text."""
    import yaml

    return yaml.dump(  # OmegaConf.to_yaml's call
        data,
        default_flow_style=False,
        allow_unicode=True,
        sort_keys=False,
        Dumper=_dumper(_c_safe(data)),
    )


def load_own(text: str) -> Any:
    """``yaml.safe_load(text)`` of a file rag_lab wrote, through libyaml's parser."""
    import yaml

    loader = getattr(yaml, "CSafeLoader", None)
    if loader is not None:
        try:
            return yaml.load(text, Loader=loader)  # noqa: S506 - CSafeLoader is safe_load's
        except yaml.YAMLError:
            pass  # PyYAML's own parser decides (and words the error)
    return yaml.safe_load(text)
