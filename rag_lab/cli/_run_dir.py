"""Hydra's own writes in a run folder (the folder itself, the job's ``.log`` file,
``.hydra/config.yaml``, ``hydra.yaml``, ``overrides.yaml``) held to rag_lab's rule for outputs:
written atomically, and a full disk, an exhausted quota or a read-only folder is one line naming
the path, exit status 2, instead of Hydra's traceback (exit 1).

Hydra makes the folder and saves the configs in ``hydra.core.utils.run_job`` before the task
function runs, so outside :func:`rag_lab.errors.user_errors`. :func:`guard_run_dir` patches two
module functions (idempotent): ``hydra.core.utils._save_config`` (same signature, same text:
``OmegaConf.to_yaml``'s text of the config (``rag_lab.io.yaml_text.config_yaml``: libyaml
where it writes the same), written with :func:`rag_lab.io.atomic.write_atomic`) and
``hydra._internal.utils.run_and_report`` (what ``@hydra.main`` runs the whole job in; a disk
error escaping it becomes :func:`rag_lab.errors.fail`'s one line)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rag_lab.errors import DiskError, fail, is_disk_error
from rag_lab.io.atomic import write_atomic

_PATCHED = "_rag_lab_guards_the_run_dir"


def guard_run_dir() -> None:
    """Patch Hydra's config saving and its job runner (idempotent)."""
    from hydra._internal import utils as internal
    from hydra.core import utils

    if not getattr(utils._save_config, _PATCHED, False):
        save = utils._save_config

        @functools.wraps(save)
        def save_config(cfg: Any, filename: str, output_dir: Path) -> None:
            from rag_lab.io.yaml_text import config_yaml

            write_atomic(Path(output_dir) / filename, config_yaml(cfg))

        setattr(save_config, _PATCHED, True)
        utils._save_config = save_config

    if not getattr(internal.run_and_report, _PATCHED, False):
        report = internal.run_and_report

        @functools.wraps(report)
        def run_and_report(func: Callable[[], Any]) -> Any:
            def job() -> Any:
                try:
                    return func()
                except DiskError as exc:
                    fail(str(exc))
                except OSError as exc:
                    if not is_disk_error(exc):
                        raise
                    fail(str(DiskError.of(exc)))

            return report(job)

        setattr(run_and_report, _PATCHED, True)
        internal.run_and_report = run_and_report
