"""Hydra callback that turns a multirun into one MLflow parent run with a child per configuration.

- ``on_multirun_start``: refuses to *select* on the split reserved for reporting (``sweep.
  report_split``, default ``test``) unless ``sweep.allow_test_selection=true``, and an Optuna
  direction that contradicts ``optimized_metric``'s (``rag_lab.sweep.context``; Hydra only logs a
  callback's error, so every job refuses on its own too); opens the parent run (named after the
  split and the swept keys, with the sweep's search space, fixed overrides, objective and
  sweeper settings as params: :func:`sweep_params`) and leaves its id in
  ``<sweep dir>/sweep_parent.json`` for the jobs (which may be other processes, with the
  joblib launcher) to attach their child runs to. A parent an earlier sweep in the same folder
  left RUNNING (killed) is marked KILLED first; this sweep's parent is closed on a signal or an
  early exit too (``rag_lab.sweep.parent``).
- ``on_multirun_end``: reads every finished job folder (``metrics.json``, ``per_query.parquet``,
  ``.hydra/overrides.yaml``), writes the leaderboard (CSV + Markdown, paired bootstrap CIs and a
  randomisation test of every configuration against the winner) and plots into the sweep folder,
  logs them on the parent, tags the winner, then evaluates the winner on the report split and logs
  those metrics on the parent as ``<report split>/<metric>``. Which trial wins follows the
  metric's direction (``rag_lab.metrics.names.higher_is_better``); a trial below a
  ``sweep.floors`` minimum loses to every trial that meets them (``objective_value``).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf, open_dict

from rag_lab.errors import ConfigError
from rag_lab.io.atomic import write_atomic
from rag_lab.metrics.names import canonical_key, higher_is_better, objective_value
from rag_lab.sweep.context import PARENT_FILE, check_direction, selection_refusal, sweep_floors
from rag_lab.sweep.parent import ParentGuard, close_stale_parent
from rag_lab.sweep.winner import WINNER_FILE, job_dir

log = logging.getLogger(__name__)

SWEEP_FUNCTIONS = ("range", "choice", "interval", "tag", "glob", "sort", "shuffle")


def _top_level_comma(value: str) -> bool:
    """``a,b`` and ``[x],[y]`` sweep; ``[x,y]`` (one list value) does not."""
    depth = 0
    for ch in value:
        depth += ch in "[({"
        depth -= ch in "])}"
        if ch == "," and depth == 0:
            return True
    return False


def swept_keys(config: DictConfig) -> list[str]:
    """The config keys a sweep varies: command-line overrides with several values or a sweep
    function (``a=1,2``, ``range(...)``, ``choice(...)``, ``interval(...)``) and the sweeper's own
    ``params`` (Optuna)."""
    keys = []
    for o in config.hydra.overrides.task:
        key, _, value = o.partition("=")
        if _top_level_comma(value) or value.split("(", 1)[0] in SWEEP_FUNCTIONS:
            keys.append(key.lstrip("+~"))
    params = OmegaConf.select(config, "hydra.sweeper.params", default=None) or {}
    keys.extend(str(k).lstrip("+~") for k in params)
    return sorted(set(keys))


def _short(target: Any) -> str | None:
    return str(target).rsplit(".", 1)[-1] if target else None


def sweep_params(config: DictConfig, report_split: str) -> dict[str, Any]:
    """The parent run's params: ``search.<key>`` (each swept key's values or distribution, as
    written), ``fixed.<key>`` (the other command-line overrides, typed and unescaped), the
    objective (``optimized_metric``, ``direction``), the sweeper and launcher (class, trials, jobs,
    sampler and seed) and the splits."""
    from rag_lab.report.leaderboard import parse_overrides

    swept = set(swept_keys(config))
    search: dict[str, Any] = {}
    fixed = []
    for o in config.hydra.overrides.task:
        key, _, value = o.partition("=")
        if key.lstrip("+~") in swept:
            search[key.lstrip("+~")] = value
        else:
            fixed.append(o)
    sweeper = OmegaConf.select(config, "hydra.sweeper", default=None) or {}
    launcher = OmegaConf.select(config, "hydra.launcher", default=None) or {}
    for key, value in (sweeper.get("params") or {}).items():
        search[str(key).lstrip("+~")] = str(value)
    direction = sweeper.get("direction")
    sampler = sweeper.get("sampler") or {}
    out = {
        "search": search,
        "fixed": parse_overrides(fixed),
        "optimized_metric": config.get("optimized_metric"),
        "direction": getattr(direction, "name", direction),
        "sweeper": _short(sweeper.get("_target_")),
        "n_trials": sweeper.get("n_trials"),
        "n_jobs": sweeper.get("n_jobs"),
        "sampler": _short(sampler.get("_target_")),
        "seed": sampler.get("seed"),
        "launcher": _short(launcher.get("_target_")),
        "launcher_n_jobs": launcher.get("n_jobs"),
        "split": OmegaConf.select(config, "dataset.split"),
        "report_split": report_split,
    }
    return {k: v for k, v in out.items() if v is not None and v != {}}


class MlflowSweepCallback(Callback):
    def __init__(
        self,
        report_split: str = "test",
        allow_test_selection: bool = False,
        report_winner: bool = True,
    ) -> None:
        self.report_split = report_split
        self.allow_test_selection = allow_test_selection
        self.report_winner = report_winner
        self._guard: ParentGuard | None = None

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        split = OmegaConf.select(config, "dataset.split")
        # Hydra logs a callback's exception and carries on; each job refuses on its own (evaluate)
        if split == self.report_split and not self.allow_test_selection:
            raise ConfigError(selection_refusal(str(split)))
        check_direction(config)
        sweep_dir = Path(config.hydra.sweep.dir)
        sweep_dir.mkdir(parents=True, exist_ok=True)
        info: dict[str, Any] = {"split": split, "swept": swept_keys(config)}
        from rag_lab.pipeline.build import build_tracker

        tracker = build_tracker(config)
        if tracker is not None:
            tags = {"sweep_dir": str(sweep_dir), "split": str(split)}
            previous = close_stale_parent(tracker, sweep_dir / PARENT_FILE)
            if previous:
                tags["previous_parent"] = previous
            swept = ", ".join(info["swept"]) or "nothing"
            info.update(
                tracker.start_parent(
                    run_name=f"sweep {split}: {swept}"[:250],
                    tags=tags,
                    params=sweep_params(config, self.report_split),
                )
            )
            self._guard = ParentGuard(tracker, info["run_id"])
        write_atomic(sweep_dir / PARENT_FILE, json.dumps(info))

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        from rag_lab.report.figures import cached_in

        # the plots are drawn once per content: a warm rerun copies them from the stage cache
        with cached_in(OmegaConf.select(config, "cache.dir", default=None)):
            self._end(config)

    def _end(self, config: DictConfig) -> None:
        from rag_lab.report.leaderboard import load_trials, report_files, varying

        sweep_dir = Path(config.hydra.sweep.dir)
        metric = canonical_key(config.optimized_metric)
        trials = load_trials(sweep_dir)
        if not trials:
            log.warning("no finished job in %s: nothing to report", sweep_dir)
            self._stand_down(failed="no job of the sweep finished")
            return
        hib = higher_is_better(metric)
        floors = sweep_floors(config)  # a trial below a floor cannot beat one that meets them
        shown = varying(trials)
        board, files = report_files(
            shown, metric, sweep_dir / "report", higher_is_better=hib, floors=floors
        )
        # the HTML page shows the same jobs, leaderboard (when no floor reorders it) and plots
        computed: dict[str, Any] = {}
        if all((sweep_dir / t.name / ".hydra").is_dir() for t in trials):
            computed["trials"] = shown
            computed["plots"] = [p for p in files.values() if p.suffix == ".png"]
            if not floors:
                computed["board"] = board
        worst = float("-inf") if hib else float("inf")

        def objective(t: Any) -> float:
            value = objective_value(t.metrics, metric, floors)
            return worst if value is None or value != value else value  # absent or NaN: worst

        best = (max if hib else min)(trials, key=objective)
        winner: dict[str, Any] = {
            "job": best.name,
            "overrides": best.params,
            metric: best.metrics.get(metric),
        }
        if self.report_winner:
            winner["report"] = self._report(job_dir(sweep_dir, best.name), metric)
        write_atomic(sweep_dir / WINNER_FILE, json.dumps(winner, indent=2, default=str))
        try:  # the page is a view of files already written: failing it loses no result
            from rag_lab.report import write_sweep_report

            files["report.html"] = write_sweep_report(sweep_dir, **computed)
        except Exception as exc:
            log.warning("sweep report.html not written: %s", exc)
        print(
            f"\nsweep winner (job {best.name}, {metric}={best.metrics.get(metric):.4f} on "
            f"{OmegaConf.select(config, 'dataset.split')}): {best.params}"
        )
        if "report" in winner:
            value = winner["report"].get(metric, float("nan"))
            print(f"  on {self.report_split}: {metric}={value:.4f}")
        print((sweep_dir / "report" / "leaderboard.md").read_text())
        parent = sweep_dir / PARENT_FILE
        info = json.loads(parent.read_text()) if parent.exists() else {}
        from rag_lab.pipeline.build import build_tracker

        tracker = build_tracker(config) if info.get("run_id") else None
        if tracker is not None:
            report_metrics = {
                f"{self.report_split}/{k}": v
                for k, v in winner.get("report", {}).items()
                if isinstance(v, (int, float))
            }
            overrides = " ".join(f"{k}={v}" for k, v in best.params.items())
            tracker.finish_parent(
                info["run_id"],
                metrics={f"best/{metric}": best.metrics.get(metric), **report_metrics},
                tags={
                    "winner_job": best.name,
                    "winner_run_id": best.metrics.get("_run_id", ""),
                    "winner_overrides": overrides,
                },
                artifacts=[*files.values(), sweep_dir / WINNER_FILE],
            )
        self._stand_down()

    def _stand_down(self, failed: str | None = None) -> None:
        """The sweep reached its end: the parent is closed (``FAILED`` with reason ``failed``
        when given, else by ``finish_parent``), so its guard stands down."""
        if self._guard is not None:
            if failed:
                self._guard.close("FAILED", failed)
            self._guard.done()
            self._guard = None

    def _report(self, job: Path, metric: str) -> dict[str, float]:
        """Evaluate the winner's composed config on the report split (no child run, no cache writes
        skipped: cached stages are reused). ``rag_lab.evaluate.evaluate`` is the library function
        (imported here: evaluate reads this package's ``context``)."""
        from rag_lab.evaluate import evaluate

        cfg = OmegaConf.load(job / ".hydra" / "config.yaml")
        assert isinstance(cfg, DictConfig)
        with open_dict(cfg):
            cfg.dataset.split = self.report_split
            cfg.paths.output_dir = str(job.parent / f"winner_{self.report_split}")
            cfg.tracking = None  # logged on the parent instead
        log.info("evaluating the winner (%s) on %s", job.name, self.report_split)
        return evaluate(cfg)
