"""One composition per multirun job instead of two.

Hydra's sweepers compose every job's config before launching the batch
(``Sweeper.validate_batch_is_legal``: a bad override fails before any job runs), and the
launcher then composes each job again: two full compositions (defaults tree, YAML, merges;
~0.15 s each for ``evaluate``) per job. ``share_validated_configs`` hands the launcher the
config the validation just composed, for the same master config and overrides; it is used
once, and a job whose validation did not run is composed as before.
"""

from __future__ import annotations

import functools
from typing import Any

_PATCHED = "_rag_lab_shares_validated_configs"


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
        validating.append(True)
        try:
            validate(self, batch)
        finally:
            validating.pop()

    ConfigLoaderImpl.load_sweep_config = load_sweep_config  # type: ignore[method-assign]
    Sweeper.validate_batch_is_legal = validate_batch_is_legal  # type: ignore[method-assign]
    setattr(ConfigLoaderImpl, _PATCHED, True)
