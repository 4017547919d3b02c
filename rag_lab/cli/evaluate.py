"""``rag-lab evaluate [key=value ...] [-m]``: the Hydra task around
:func:`rag_lab.evaluate.evaluate`.

Returns the optimised metric (``optimized_metric`` in the config), which is what a sweeper
(``-m``, ``hparams_search=...``) optimises, penalised when a ``sweep.floors`` minimum is not met
(``rag_lab.metrics.names.objective_value``); ``None`` when the config names none.
"""

from __future__ import annotations

import functools
import gc
import sys
import warnings

import hydra
from omegaconf import DictConfig

from rag_lab.cli._compose import speed_up_compositions
from rag_lab.cli._run_dir import guard_run_dir
from rag_lab.distributed.runtime_env import string_env_overrides
from rag_lab.errors import user_errors
from rag_lab.llm.client import check_overrides
from rag_lab.metrics.names import objective_value
from rag_lab.paths import CONFIG_DIR
from rag_lab.sweep.plugin import register_fork_launcher

GC_THRESHOLDS = (50_000, 20, 100)


@hydra.main(config_path=CONFIG_DIR, config_name="evaluate", version_base="1.3")
@user_errors
def task(cfg: DictConfig) -> float | None:
    from rag_lab.evaluate import evaluate  # the pipeline's imports wait until a run starts
    from rag_lab.sweep.context import sweep_floors

    metrics = evaluate(cfg)
    opt = cfg.get("optimized_metric")
    return objective_value(metrics, opt, sweep_floors(cfg)) if opt else None


@functools.wraps(task)  # main.__wrapped__(cfg) runs the task on a composed config (tests)
def main() -> float | None:
    """The command: refuse a credential pasted on the command line before Hydra saves the
    command line in the run folder, then run the Hydra task."""
    user_errors(check_overrides)(sys.argv[1:])
    # Ray takes environment variables as strings only: env_vars.HF_HUB_OFFLINE=1 is quoted
    sys.argv[1:] = string_env_overrides(sys.argv[1:])
    # conf/hydra/launcher/ray.yaml completes hydra-ray-launcher's schema of the same name on
    # purpose (hydra/launcher=ray); Hydra 1.3 warns of that automatic schema matching
    warnings.filterwarnings("ignore", message=r"\s*'hydra/launcher/ray' is validated against")
    speed_up_compositions()  # a multirun composes each job once, each YAML file parsed once
    register_fork_launcher()  # hydra/launcher=fork, also from an editable install
    guard_run_dir()  # Hydra's own writes: atomic; a full disk is one line
    # a run allocates millions of small objects that live to its end (configs, chunks, runs);
    # at the default thresholds (700, 10, 10) the collector walks that growing heap again and
    # again (~0.6 s of a warm 12-job grid); rarer collections free the same garbage
    gc.set_threshold(*GC_THRESHOLDS)
    return task()


if __name__ == "__main__":
    main()
