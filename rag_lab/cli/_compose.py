"""Cheaper Hydra compositions for ``rag-lab evaluate`` (a multirun composes 14 configs or more).

Four patches of Hydra's config loading, each idempotent, none changing a composed config:

- :func:`share_validated_configs`: one composition per multirun job instead of two. Hydra's
  sweepers compose every job's config before launching the batch
  (``Sweeper.validate_batch_is_legal``: a bad override fails before any job runs), and the
  launcher then composes each job again (defaults tree, YAML, merges; ~0.15 s each for
  ``evaluate``). The launcher gets the config the validation just composed, for the same master
  config and overrides; it is used once, and a job whose validation did not run is composed as
  before. A launcher that composes every job of the batch itself before it runs any
  (``composes_before_running(n_jobs)`` true: ``hydra/launcher=fork`` with several workers, which
  compose in parallel) gets the batch unvalidated: the same check, once, in its workers.
- :func:`share_mode_probe`: Hydra composes the primary config twice before any job starts
  (``Hydra.get_mode`` reads ``hydra.mode`` off one, ``Hydra.run`` or ``Hydra.multirun``
  composes it again with the same overrides: ~0.2 CPU-s of every ``rag-lab evaluate``). The
  second call gets the probe's config (after the sweep-override check the probe skipped; a
  plain run only where composing again could not differ); used once.
- :func:`cache_config_files`: every composition reads and parses each YAML file of its defaults
  tree again (Hydra's file cache lives for one composition). A file's parsed config is kept for
  the process, keyed by its path and checked against its bytes at every read (an edited file is
  parsed again), and each caller gets its own deep copy (Hydra mutates what it loads). Copying
  a parsed config costs ~1/5 of parsing it. A file is parsed by libyaml under OmegaConf's own
  loader (the same config; the 24 files of ``evaluate``'s composition load in ~0.045 CPU-s
  instead of ~0.085); anything libyaml or the checks refuse is loaded by Hydra itself, which
  words the error.
- :func:`skip_unused_interpolation_maps`: Hydra builds an OmegaConf map of the known group
  choices for every node of every defaults tree (330 maps for a 12-job grid, ~0.5 s), read only
  to resolve interpolated defaults (``data: ${model}``); nodes without one skip it.
"""

from __future__ import annotations

import copy
import functools
import os
from typing import Any

_PATCHED = "_rag_lab_shares_validated_configs"
_PROBE_PATCHED = "_rag_lab_shares_the_mode_probe"
_FILES_PATCHED = "_rag_lab_caches_config_files"
_MAP_PATCHED = "_rag_lab_skips_unused_interpolation_maps"

# (source class, source path, config) -> (the file's bytes, the config parsed from them)
_PARSED: dict[tuple[str, str, str], tuple[bytes, Any]] = {}


def speed_up_compositions() -> None:
    """All four patches (what ``rag-lab evaluate`` applies before Hydra starts)."""
    cache_config_files()
    share_mode_probe()
    share_validated_configs()
    skip_unused_interpolation_maps()


def skip_unused_interpolation_maps() -> None:
    """Patch ``hydra._internal.defaults_list._create_interpolation_map`` (idempotent): it builds an
    OmegaConf map of the known choices for every node of the defaults tree, used only to resolve
    the node's interpolated defaults (``db: ${choice}``); a node without one gets ``None``."""
    from hydra._internal import defaults_list as module
    from hydra.core.default_element import InputDefault

    build = module._create_interpolation_map
    if getattr(build, _MAP_PATCHED, False):
        return

    @functools.wraps(build)
    def interpolation_map(overrides: Any, defaults: list[Any], self_added: bool) -> Any:
        if any(isinstance(d, InputDefault) and d.is_interpolation() for d in defaults):
            return build(overrides, defaults, self_added)
        return None  # read by nothing: only interpolated defaults resolve against it

    setattr(interpolation_map, _MAP_PATCHED, True)
    module._create_interpolation_map = interpolation_map  # type: ignore[assignment]


def share_validated_configs() -> None:
    """Patch Hydra's ``ConfigLoaderImpl.load_sweep_config`` (idempotent)."""
    from hydra._internal.config_loader_impl import ConfigLoaderImpl
    from hydra.plugins.sweeper import Sweeper

    if getattr(ConfigLoaderImpl, _PATCHED, False):
        return
    compose = ConfigLoaderImpl.load_sweep_config
    validate = Sweeper.validate_batch_is_legal
    validated: dict[tuple[int, int, tuple[str, ...]], Any] = {}
    validating: list[bool] = []

    @functools.wraps(compose)
    def load_sweep_config(self: Any, master_config: Any, sweep_overrides: list[str]) -> Any:
        key = (id(self), id(master_config), tuple(sweep_overrides))
        if not validating and key in validated:
            return validated.pop(key)  # the launcher: the config validation composed
        config = compose(self, master_config, sweep_overrides)
        if validating:
            validated[key] = config
        return config

    @functools.wraps(validate)
    def validate_batch_is_legal(self: Any, batch: Any) -> None:
        validated.clear()  # only this batch's configs wait for the launcher
        composes = getattr(getattr(self, "launcher", None), "composes_before_running", None)
        if composes is not None and composes(len(batch)):
            return  # the launcher composes (validates) every job before it runs any
        validating.append(True)
        try:
            validate(self, batch)
        finally:
            validating.pop()

    ConfigLoaderImpl.load_sweep_config = load_sweep_config  # type: ignore[method-assign]
    Sweeper.validate_batch_is_legal = validate_batch_is_legal  # type: ignore[method-assign]
    setattr(ConfigLoaderImpl, _PATCHED, True)


def share_mode_probe() -> None:
    """Patch ``Hydra.get_mode`` and ``Hydra.compose_config`` (idempotent): the run's or the
    multirun's primary config is the one ``get_mode`` composed, when the overrides are the same."""
    from hydra._internal.config_loader_impl import ConfigLoaderImpl
    from hydra._internal.hydra import Hydra
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.types import RunMode

    if getattr(Hydra, _PROBE_PATCHED, False):
        return
    get_mode = Hydra.get_mode
    compose_config = Hydra.compose_config
    probe: dict[tuple[int, Any, tuple[str, ...]], tuple[int, Any]] = {}
    probing: list[bool] = []

    @functools.wraps(compose_config)
    def compose(self: Any, config_name: Any, overrides: list[str], run_mode: Any, **kw: Any) -> Any:
        key = (id(self), config_name, tuple(overrides))
        if probing:
            cfg = compose_config(self, config_name, overrides, run_mode, **kw)
            if run_mode == RunMode.MULTIRUN:
                probe[key] = (len(overrides), cfg)
            return cfg
        # the probe's overrides, or those plus the hydra.mode=RUN|MULTIRUN Hydra appends when
        # the config sets no mode (then that override is applied here, as Hydra applies it: last)
        kept = probe.pop(key, None) or probe.pop((*key[:2], tuple(overrides[:-1])), None)
        probe.clear()  # used once, and only by the call right after the probe
        modes = (RunMode.RUN, RunMode.MULTIRUN)
        if kept is None or run_mode not in modes or not kw.get("from_shell", True):
            return compose_config(self, config_name, overrides, run_mode, **kw)
        n_probed, cfg = kept
        parsed = OverridesParser.create().parse_overrides(overrides=overrides)
        added = parsed[n_probed:]
        if added and (
            [o.input_line for o in added] != [f"hydra.mode={run_mode.name}"]
            or cfg.hydra.mode is not None
        ):
            return compose_config(self, config_name, overrides, run_mode, **kw)
        if run_mode == RunMode.RUN and (
            any(o.is_sweep_override() for o in parsed) or _missing_choice(cfg)
        ):
            # the probe skips what a run refuses (a sweep without -m, a group left ``???``):
            # Hydra composes the run, and refuses it, as always
            return compose_config(self, config_name, overrides, run_mode, **kw)
        if kw.get("validate_sweep_overrides", True):  # the check the probe skipped
            ConfigLoaderImpl.validate_sweep_overrides_legal(parsed, run_mode, from_shell=True)
        if added:
            ConfigLoaderImpl._apply_overrides_to_config(added, cfg)
            for o in added:
                cfg.hydra.overrides.hydra.append(o.input_line)
        if kw.get("with_log_configuration", False):  # what compose_config does after loading
            return _log_configuration(self, cfg, config_name, overrides, run_mode)
        return cfg

    @functools.wraps(get_mode)
    def probe_mode(self: Any, *args: Any, **kw: Any) -> Any:
        probe.clear()
        probing.append(True)
        try:
            return get_mode(self, *args, **kw)
        finally:
            probing.pop()

    Hydra.compose_config = compose  # type: ignore[method-assign,assignment]
    Hydra.get_mode = probe_mode  # type: ignore[method-assign]
    setattr(Hydra, _PROBE_PATCHED, True)


def _missing_choice(cfg: Any) -> bool:
    """Whether a config group's choice in ``cfg`` is still ``???`` (a composition that skips
    missing groups, as Hydra's mode probe does, leaves it so)."""
    from omegaconf import OmegaConf

    choices = cfg.hydra.runtime.choices
    return any(OmegaConf.is_missing(choices, key) for key in choices)


def _log_configuration(self: Any, cfg: Any, config_name: Any, overrides: Any, mode: Any) -> Any:
    """The tail of Hydra 1.3's ``Hydra.compose_config`` when ``with_log_configuration``."""
    import logging

    from hydra._internal import hydra as hydra_module
    from hydra.core.utils import configure_log

    configure_log(cfg.hydra.hydra_logging, cfg.hydra.verbose)
    hydra_module.log = logging.getLogger(hydra_module.__name__)
    self._print_debug_info(config_name, overrides, mode)
    return cfg


def cache_config_files() -> None:
    """Patch Hydra's file and package config sources (idempotent): a YAML file is parsed once
    per process while its bytes are unchanged; every load gets its own copy.

    Hydra's plugin scan executes its ``core_plugins`` modules again (new source classes), so
    the source classes are patched when a config repository first loads from them."""
    from hydra._internal.config_repository import ConfigRepository

    if getattr(ConfigRepository, _FILES_PATCHED, False):
        return
    load = ConfigRepository.load_config

    @functools.wraps(load)
    def load_config(self: Any, config_path: str) -> Any:
        for source in self.sources:
            _patch_source(type(source))
        return load(self, config_path)

    ConfigRepository.load_config = load_config  # type: ignore[method-assign]
    setattr(ConfigRepository, _FILES_PATCHED, True)


def _patch_source(cls: type) -> None:
    """Parse a file source's (``file://``) or package source's (``pkg://``) YAML once."""
    if cls.__dict__.get(_FILES_PATCHED, False):
        return
    if cls.__name__ == "FileConfigSource" and "load_config" in cls.__dict__:
        load_file = cls.__dict__["load_config"]

        @functools.wraps(load_file)
        def load_config(self: Any, config_path: str) -> Any:
            name = self._normalize_file_name(config_path)
            full_path = os.path.realpath(os.path.join(self.path, name))
            key = ("file", self.path, full_path)
            read = functools.partial(_read_bytes, full_path)
            return _parsed(key, read, lambda data: _loaded(self, data, load_file, config_path))

        cls.load_config = load_config  # type: ignore[attr-defined]
    elif cls.__name__ == "ImportlibResourcesConfigSource" and "_read_config" in cls.__dict__:
        read_resource = cls.__dict__["_read_config"]

        @functools.wraps(read_resource)
        def read_config(self: Any, res: Any) -> Any:
            key = ("pkg", self.path, str(res))
            return _parsed(
                key, res.read_bytes, lambda data: _loaded(self, data, read_resource, res)
            )

        cls._read_config = read_config  # type: ignore[attr-defined]
    setattr(cls, _FILES_PATCHED, True)


def _read_bytes(path: str) -> bytes | None:
    try:
        with open(path, "rb") as fh:
            return fh.read()
    except OSError:
        return None  # Hydra's own load says what is wrong


def _parsed(key: tuple[str, str, str], read: Any, load: Any) -> Any:
    """The config ``load(data)`` returns for ``key``'s file (``data``: the bytes ``read()``
    returns, ``None`` when unreadable), from the process cache when those bytes are the ones it
    was parsed from."""
    from hydra.plugins.config_source import ConfigResult

    data = read()
    hit = _PARSED.get(key)
    if data is not None and hit is not None and hit[0] == data:
        kept = hit[1]
        return ConfigResult(
            provider=kept.provider,
            path=kept.path,
            config=copy.deepcopy(kept.config),
            header=dict(kept.header),
        )
    ret = load(data)
    if data is not None and read() == data:  # unchanged while Hydra read it
        kept = ConfigResult(
            provider=ret.provider,
            path=ret.path,
            config=copy.deepcopy(ret.config),
            header=dict(ret.header),
        )
        _PARSED[key] = (data, kept)
    else:
        _PARSED.pop(key, None)
    return ret


def _loaded(source: Any, data: bytes | None, load: Any, where: Any) -> Any:
    """What Hydra's ``load(source, where)`` returns for a config file of ``data``: parsed through
    libyaml (:func:`_yaml_config`) when it can, else (unreadable, not UTF-8, anything libyaml or
    the checks refuse) by Hydra itself, which words the error."""
    if data is not None:
        try:
            return _yaml_config(source, data)
        except Exception:  # noqa: BLE001, S110 - Hydra's own load decides and says why
            pass
    return load(source, where)


_C_LOADER: list[Any] = []


def _yaml_config(source: Any, data: bytes) -> Any:
    """``ConfigResult`` of a YAML config file's bytes as Hydra's file and package sources build it
    (``# @package`` header from the first 512 characters, ``OmegaConf.load``), with libyaml's
    parser under OmegaConf's own loader (its float resolver, no timestamps, duplicate keys
    refused): the same config, its YAML parsed ~15x faster (``tests/cli/test_compose.py``)."""
    import yaml
    from hydra.plugins.config_source import ConfigResult, ConfigSource
    from omegaconf import OmegaConf

    if not _C_LOADER:
        from omegaconf._utils import get_yaml_loader
        from yaml.cyaml import CParser

        base = get_yaml_loader()

        class Loader(CParser, base):  # type: ignore[valid-type,misc]
            def __init__(self, stream: Any) -> None:
                CParser.__init__(self, stream)
                yaml.constructor.SafeConstructor.__init__(self)
                yaml.resolver.Resolver.__init__(self)

        _C_LOADER.append(Loader)
    # as a text-mode read gives it: universal newlines
    text = data.decode("utf-8").replace("\r\n", "\n").replace("\r", "\n")
    header = ConfigSource._get_header_dict(text[:512])
    obj = yaml.load(text, Loader=_C_LOADER[0])  # noqa: S506 - OmegaConf's safe loader
    if obj is not None and not isinstance(obj, (list, dict, str)):
        raise TypeError(type(obj).__name__)  # OmegaConf.load refuses it: Hydra says so
    return ConfigResult(
        config=OmegaConf.create() if obj is None else OmegaConf.create(obj),
        path=f"{source.scheme()}://{source.path}",
        provider=source.provider,
        header=header,
    )
