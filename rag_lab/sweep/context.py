"""What a sweep's jobs and its callback share, without importing each other: the parent-run file
the callback writes for the jobs (``PARENT_FILE``), a job's view of its sweep
(``sweep_context``), and the refusals every sweep applies (``check_sweep``): selecting on the split
reserved for reporting, an Optuna sweeper optimising against the metric's direction, and a noise
ratio as the objective without a hit-rate or recall floor (``sweep.floors``)."""

from __future__ import annotations

import json
from enum import Enum
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from rag_lab.errors import ConfigError
from rag_lab.metrics.names import canonical_key, higher_is_better, noise_refusal

PARENT_FILE = "sweep_parent.json"


def sweep_context() -> dict[str, Any] | None:
    """Inside a Hydra multirun job: the parent run written by the sweep callback, this job's number
    and overrides. ``None`` in a single run (or outside Hydra)."""
    try:
        from hydra.core.hydra_config import HydraConfig
        from hydra.types import RunMode

        hc = HydraConfig.get()
    except Exception:
        return None
    if hc.mode != RunMode.MULTIRUN:
        return None
    parent = Path(hc.sweep.dir) / PARENT_FILE
    info = json.loads(parent.read_text()) if parent.exists() else {}
    return {**info, "job": hc.job.num, "overrides": list(hc.overrides.task)}


def check_selection_split(cfg: DictConfig) -> None:
    """A sweep selects a configuration: refuse to do that on the split reserved for reporting."""
    report = OmegaConf.select(cfg, "sweep.report_split", default="test")
    if (
        sweep_context() is not None
        and cfg.dataset.split == report
        and not OmegaConf.select(cfg, "sweep.allow_test_selection", default=False)
    ):
        raise ConfigError(selection_refusal(cfg.dataset.split))


def selection_refusal(split: str) -> str:
    return (
        f"a sweep selects a configuration, and dataset.split={split} is the split reserved "
        f"for reporting the winner: sweep on dataset.split=dev (or train), or force it with "
        f"sweep.allow_test_selection=true"
    )


def direction_refusal(metric: str | None, direction: Any) -> str | None:
    """The refusal when an Optuna ``direction`` (``maximize`` | ``minimize``) contradicts the
    direction of ``optimized_metric`` (``rag_lab.metrics.names.higher_is_better``); None when
    they agree or there is nothing to compare (no metric, no direction)."""
    if not metric or direction is None:
        return None
    if not isinstance(direction, (str, Enum)):  # a list: one direction per objective
        directions = list(direction)
        if len(directions) != 1:
            return (
                f"hydra.sweeper.direction={directions}: rag_lab optimises one metric "
                f"(optimized_metric={metric}); give one direction"
            )
        direction = directions[0]
    # the plugin's default is its own ``Direction`` enum; a config gives the name
    name = (direction.name if isinstance(direction, Enum) else str(direction)).lower()
    if name not in ("maximize", "minimize"):
        return f"hydra.sweeper.direction={direction}: expected maximize or minimize"
    want = "maximize" if higher_is_better(metric) else "minimize"
    if name == want:
        return None
    return (
        f"hydra.sweeper.direction={name} contradicts optimized_metric={metric}, where "
        f"{'higher' if want == 'maximize' else 'lower'} is better: set "
        f"hydra.sweeper.direction={want}"
    )


def sweeper_direction(cfg: DictConfig) -> Any:
    """``hydra.sweeper.direction`` of the composed config (the callback sees ``cfg.hydra``), or
    of the running Hydra app (a job's config has no ``hydra`` node); None without a sweeper that
    has one (the basic sweeper, a single run)."""
    if "hydra" in cfg:
        return OmegaConf.select(cfg, "hydra.sweeper.direction", default=None)
    try:
        from hydra.core.hydra_config import HydraConfig

        return HydraConfig.get().sweeper.get("direction")
    except Exception:
        return None


def check_direction(cfg: DictConfig) -> None:
    """Refuse (``ConfigError``) an Optuna sweep whose direction contradicts
    ``optimized_metric``'s: it would search for the worst configuration."""
    msg = direction_refusal(cfg.get("optimized_metric"), sweeper_direction(cfg))
    if msg is not None:
        raise ConfigError(msg)


def sweep_floors(cfg: DictConfig) -> dict[str, float]:
    """``sweep.floors`` as ``{metric key: minimum}`` (``rag_lab.metrics.names.canonical_key``);
    ``ConfigError`` naming the key for a value that is not a number."""
    raw = OmegaConf.select(cfg, "sweep.floors", default=None) or {}
    out: dict[str, float] = {}
    for name, value in dict(raw).items():
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"sweep.floors.{name}: expected a number (a minimum), got {value!r}")
        out[canonical_key(str(name))] = float(value)
    return out


def check_objective(cfg: DictConfig) -> None:
    """Inside a multirun, refuse a noise-ratio ``optimized_metric`` without a hit-rate or recall
    floor in ``sweep.floors`` (``rag_lab.metrics.names.noise_refusal``)."""
    floors = sweep_floors(cfg)
    metric = cfg.get("optimized_metric")
    if sweep_context() is None or not metric:
        return
    msg = noise_refusal([str(metric)], floors, "+sweep.floors.hit_rate_at_{k}=0.8")
    if msg is not None:
        raise ConfigError(f"optimized_metric={metric}: {msg}")


def check_sweep(cfg: DictConfig) -> None:
    """Every refusal a sweep job applies before it runs: the selection split (inside a multirun),
    the sweeper's direction and a noise-ratio objective without a floor."""
    check_selection_split(cfg)
    check_direction(cfg)
    check_objective(cfg)
