"""The walk: from one pipeline to another a stage at a time, selected on one split, reported on
another (``rag-lab walk``; the plan is a file under ``conf/walk/``).

Greedy forward selection. Step 0 is ``base`` (evaluate overrides). Each later step adds its stage
on top of the steps *kept* so far and is evaluated on ``select_split`` and ``report_split``; it is
kept when its decision metric (the step's ``metric``, else the walk's ``select_metric``) improves
on ``select_split`` by more than ``min_gain`` in that metric's direction (``noise_ratio``
improves downwards); an exact tie goes to the ``tie_break`` metrics in order (:func:`decide`).
The report split's numbers are recorded for every step, kept or dropped, and never decide
anything. A step marked ``always`` (a prerequisite, such as the metadata contract the
metadata stages read) is kept without a decision, its differences still reported. A step whose
``requires`` keys are not among the walk's overrides (the cross-encoder's model path) is
trained first when it says how (``train``: ``rag-lab train reranker`` overrides; the model under
``models/<step>``, then that key is the step's own override), else skipped, and so is a step
that cannot be built on the kept steps (a one-line :class:`~rag_lab.errors.RagLabError`); the
result says why. ``walk.json`` is rewritten after every step.

Every step's differences are paired, query by query, against the state it was built on (the
last kept one): bootstrap CIs and sign-flip tests from :mod:`rag_lab.analysis.stats`, overall and
the per-category means. The stage cache makes a step cost only what it adds (chunks, embeddings and
retriever runs of earlier steps are read back).

Evaluation is injected (:data:`Evaluator`): :func:`evaluate_step` composes the ``evaluate``
config with Hydra and runs :func:`rag_lab.evaluate.evaluate`; tests may pass their own.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, wait
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import yaml

from rag_lab.analysis.stats import paired_bootstrap_diff_ci, randomization_test
from rag_lab.errors import ConfigError, RagLabError
from rag_lab.io.atomic import write_atomic
from rag_lab.metrics.names import higher_is_better, metric_key

WALK_FILE = "walk.json"
_NAME = re.compile(r"^[A-Za-z0-9_.-]+$")
_PLAN_KEYS = {
    "name",
    "base",
    "select_split",
    "report_split",
    "select_metric",
    "tie_break",
    "min_gain",
    "metrics",
    "ci",
    "lists",
    "steps",
}
_STEP_KEYS = {"name", "note", "overrides", "append", "metric", "requires", "always", "train"}
ALWAYS = "always"  # decided_by of a step kept without a decision (a prerequisite)
# the walk's own overrides that also reach a step's training (the data it trains on, how its
# corpus is read and cached); the others are evaluate's alone
TRAIN_PASSTHROUGH = ("dataset", "parser", "tokenizer", "cache", "paths")

# (overrides, split, run folder) -> the run's per-query table (per_query.parquet's columns)
Evaluator = Callable[[Sequence[str], str, Path], pd.DataFrame]
# what runs a step's two splits at once: ``submit(evaluate, overrides, split, folder)`` -> a future
# (a concurrent.futures executor, or :class:`StepWorkers`)
Submitter = Any
# (train overrides, output folder) -> the trained model's folder (rag-lab train reranker)
Trainer = Callable[[Sequence[str], Path], Path]


@dataclass(frozen=True)
class Step:
    """One stage added: ``overrides`` (``group=option`` / ``key=value``, later ones win per key)
    and ``append`` (items added to choose-many groups, in order)."""

    name: str
    note: str = ""
    overrides: tuple[str, ...] = ()
    append: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    metric: str | None = None
    requires: tuple[str, ...] = ()
    always: bool = False  # a prerequisite of later steps: kept whatever it measures
    # ``rag-lab train reranker`` overrides: when a ``requires`` key is not given, the walk trains
    # the model and sets each such key to the trained model's folder
    train: tuple[str, ...] | None = None


@dataclass(frozen=True)
class WalkPlan:
    name: str
    base: tuple[str, ...]
    steps: tuple[Step, ...]
    lists: Mapping[str, tuple[str, ...]]
    select_split: str = "dev"
    report_split: str = "test"
    select_metric: str = "hit_rate@5"
    tie_break: tuple[str, ...] = ()
    min_gain: float = 0.0
    metrics: tuple[str, ...] = ("hit_rate@5",)
    n_resamples: int = 2000
    alpha: float = 0.05
    seed: int = 0

    def decision_metric(self, step: Step) -> str:
        return step.metric or self.select_metric

    def decision_metrics(self, step: Step) -> list[str]:
        """The step's decision metric, then the tie-breakers (each once)."""
        first = self.decision_metric(step)
        return [first, *(m for m in self.tie_break if metric_key(m) != metric_key(first))]


@dataclass(frozen=True)
class Diff:
    """``candidate - previous`` on one split: mean, bootstrap CI, sign-flip p, query pairs."""

    mean: float
    low: float
    high: float
    p: float
    n: int


@dataclass(frozen=True)
class StepResult:
    """One step of the walk. ``kept`` is None for step 0 and for a skipped step; ``means`` and
    ``diffs`` are keyed by split then metric key; ``by_category`` by split, category, metric
    (means) and ``category_diffs`` by split, category, metric (mean paired difference)."""

    index: int
    name: str
    note: str
    overrides: tuple[str, ...]
    decision_metric: str
    kept: bool | None
    skipped: str = ""
    decided_by: str = ""
    means: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    diffs: Mapping[str, Mapping[str, Diff]] = field(default_factory=dict)
    by_category: Mapping[str, Mapping[str, Mapping[str, float]]] = field(default_factory=dict)
    category_diffs: Mapping[str, Mapping[str, Mapping[str, float]]] = field(default_factory=dict)
    run_dirs: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class WalkResult:
    plan: WalkPlan
    steps: tuple[StepResult, ...]

    @property
    def final_overrides(self) -> tuple[str, ...]:
        """The overrides of the last kept state (step 0 when nothing was kept)."""
        kept = [s for s in self.steps if s.kept is not False and not s.skipped]
        return kept[-1].overrides


# ---------------------------------------------------------------------------------------------
# the plan


def _strings(value: Any, where: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{where}: expected a list of strings, got {value!r}")
    return tuple(value)


def _lists(value: Any, where: str) -> dict[str, tuple[str, ...]]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: expected a mapping group -> list, got {value!r}")
    return {str(k): _strings(v, f"{where}.{k}") for k, v in value.items()}


def _step(raw: Any, i: int, where: str, lists: Mapping[str, Any]) -> Step:
    at = f"{where}: steps[{i}]"
    if not isinstance(raw, dict):
        raise ConfigError(f"{at}: expected a mapping, got {raw!r}")
    unknown = sorted(set(raw) - _STEP_KEYS)
    if unknown:
        raise ConfigError(f"{at}: unknown key(s) {unknown} (known: {sorted(_STEP_KEYS)})")
    name = raw.get("name")
    if not isinstance(name, str) or not _NAME.match(name):
        raise ConfigError(f"{at}.name: expected a name of letters, digits, _ . -, got {name!r}")
    append = _lists(raw.get("append"), f"{at}.append")
    for group in append:
        if group not in lists:
            raise ConfigError(
                f"{at}.append.{group}: not a group under `lists` (known: {sorted(lists)})"
            )
    metric = raw.get("metric")
    if metric is not None and not isinstance(metric, str):
        raise ConfigError(f"{at}.metric: expected a metric name, got {metric!r}")
    always = raw.get("always", False)
    if not isinstance(always, bool):
        raise ConfigError(f"{at}.always: expected true or false, got {always!r}")
    train = None if raw.get("train") is None else _strings(raw.get("train"), f"{at}.train")
    return Step(
        name=name,
        note=str(raw.get("note") or ""),
        overrides=_strings(raw.get("overrides"), f"{at}.overrides"),
        append=append,
        metric=metric,
        requires=_strings(raw.get("requires"), f"{at}.requires"),
        always=always,
        train=train,
    )


def plan_from_dict(raw: Any, where: str = "walk") -> WalkPlan:
    """A :class:`WalkPlan` from the YAML mapping; a bad key is one :class:`ConfigError` line
    naming ``where`` and the key."""
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: expected a mapping, got {type(raw).__name__}")
    unknown = sorted(set(raw) - _PLAN_KEYS)
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {unknown} (known: {sorted(_PLAN_KEYS)})")
    lists = _lists(raw.get("lists"), f"{where}: lists")
    steps = raw.get("steps")
    if not isinstance(steps, list) or not steps:
        raise ConfigError(f"{where}: steps: expected a non-empty list of steps")
    parsed = tuple(_step(s, i, where, lists) for i, s in enumerate(steps))
    names = [s.name for s in parsed]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes or "base" in names:
        raise ConfigError(f"{where}: steps: names must be unique and not 'base', got {dupes}")
    ci = raw.get("ci") or {}
    if not isinstance(ci, dict) or set(ci) - {"n_resamples", "alpha", "seed"}:
        raise ConfigError(f"{where}: ci: expected {{n_resamples, alpha, seed}}, got {ci!r}")
    try:
        min_gain = float(raw.get("min_gain", 0.0))
        n_resamples, alpha, seed = (
            int(ci.get("n_resamples", 2000)),
            float(ci.get("alpha", 0.05)),
            int(ci.get("seed", 0)),
        )
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{where}: min_gain / ci: {exc}") from None
    if n_resamples < 1 or not 0 < alpha < 1:
        raise ConfigError(f"{where}: ci: n_resamples >= 1 and 0 < alpha < 1, got {ci!r}")
    splits = (str(raw.get("select_split", "dev")), str(raw.get("report_split", "test")))
    if splits[0] == splits[1]:
        raise ConfigError(f"{where}: select_split and report_split must differ, got {splits[0]}")
    select_metric = str(raw.get("select_metric", "hit_rate@5"))
    metrics = _strings(raw.get("metrics"), f"{where}: metrics") or (select_metric,)
    return WalkPlan(
        name=str(raw.get("name") or "walk"),
        base=_strings(raw.get("base"), f"{where}: base"),
        steps=parsed,
        lists=lists,
        select_split=splits[0],
        report_split=splits[1],
        select_metric=select_metric,
        tie_break=_strings(raw.get("tie_break"), f"{where}: tie_break"),
        min_gain=min_gain,
        metrics=metrics,
        n_resamples=n_resamples,
        alpha=alpha,
        seed=seed,
    )


def load_plan(path: Path) -> WalkPlan:
    """Read a walk file (``conf/walk/<name>.yaml``)."""
    try:
        raw = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the walk file ({exc.strerror})") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f":{mark.line + 1}" if mark is not None else ""
        raise ConfigError(f"{path}{line}: not valid YAML") from None
    return plan_from_dict(raw, str(path))


# ---------------------------------------------------------------------------------------------
# overrides of a state


def _key(override: str) -> str:
    return override.split("=", 1)[0].lstrip("+~")


def state_overrides(
    plan: WalkPlan, steps: Sequence[Step], extra: Sequence[str] = ()
) -> tuple[str, ...]:
    """The evaluate overrides of ``base`` plus ``steps`` in order (then ``extra``, the walk's own
    overrides): one override per key, the last one winning; each choose-many group of ``lists``
    written once as ``group=[a,b]`` with every step's ``append`` added (no duplicates)."""
    by_key: dict[str, str] = {}
    lists = {g: list(items) for g, items in plan.lists.items()}
    for step in steps:
        for group, items in step.append.items():
            lists[group] += [x for x in items if x not in lists[group]]
    for override in [*plan.base, *(o for s in steps for o in s.overrides)]:
        by_key.pop(_key(override), None)  # re-inserted last: the order the user reads
        by_key[_key(override)] = override
    touched = {g for s in steps for g in s.append}
    for group in plan.lists:
        if group in touched:
            by_key.pop(group, None)
            by_key[group] = f"{group}=[{','.join(lists[group])}]"
    for override in extra:
        by_key.pop(_key(override), None)
        by_key[_key(override)] = override
    return tuple(by_key.values())


def missing_requirements(step: Step, extra: Sequence[str]) -> list[str]:
    given = {_key(o) for o in extra}
    return [r for r in step.requires if r not in given]


# ---------------------------------------------------------------------------------------------
# statistics of one step against the previous state


def _categories(table: pd.DataFrame) -> list[str]:
    if "category" not in table:
        return []
    return sorted(str(c) for c in table["category"].dropna().unique())


def _column(table: pd.DataFrame, metric: str) -> pd.Series:
    key = metric_key(metric)
    if key not in table:
        raise ConfigError(
            f"walk: metric {metric!r}: no per-query column {key!r} in the run "
            f"(answer metrics need generator= and judge=)"
        )
    return pd.to_numeric(table.set_index("query_id")[key], errors="coerce")


def _means(table: pd.DataFrame, metrics: Sequence[str]) -> dict[str, float]:
    return {metric_key(m): float(_column(table, m).mean()) for m in metrics}


def _by_category(table: pd.DataFrame, metrics: Sequence[str]) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for cat in _categories(table):
        sub = table[table["category"].astype(str) == cat]
        out[cat] = {metric_key(m): float(_column(sub, m).mean()) for m in metrics}
    return out


def paired_diff(
    candidate: pd.DataFrame, previous: pd.DataFrame, metric: str, plan: WalkPlan
) -> Diff:
    """``candidate - previous`` of one metric, paired by query id (pairs with a NaN dropped)."""
    a, b = _column(candidate, metric), _column(previous, metric)
    ids = a.index.intersection(b.index)
    x, y = a.loc[ids].to_numpy(np.float64), b.loc[ids].to_numpy(np.float64)
    mean, low, high = paired_bootstrap_diff_ci(x, y, plan.n_resamples, plan.alpha, plan.seed)
    p = randomization_test(x, y, seed=plan.seed)
    return Diff(mean, low, high, p, int((np.isfinite(x) & np.isfinite(y)).sum()))


def _category_diffs(
    candidate: pd.DataFrame, previous: pd.DataFrame, metrics: Sequence[str]
) -> dict[str, dict[str, float]]:
    a, b = _by_category(candidate, metrics), _by_category(previous, metrics)
    return {cat: {k: a[cat][k] - b[cat][k] for k in a[cat]} for cat in a if cat in b}


def gain(diff: Diff, metric: str) -> float:
    """The improvement a difference is: ``mean`` where higher is better, ``-mean`` otherwise."""
    return diff.mean if higher_is_better(metric) else -diff.mean


def keeps(diff: Diff, metric: str, min_gain: float) -> bool:
    """Kept on one metric: its select split gain is finite and > ``min_gain``."""
    g = gain(diff, metric)
    return math.isfinite(g) and g > min_gain


def decide(diffs: Mapping[str, Diff], metrics: Sequence[str], min_gain: float) -> tuple[bool, str]:
    """The walk's rule, lexicographic: the first of ``metrics`` (the decision metric, then the
    tie-breakers) whose select split difference is not exactly zero decides — kept iff it gains
    more than ``min_gain`` (the tie-breakers: more than 0). Returns ``(kept, deciding metric)``;
    all tied (or undefined): dropped, decided by the first."""
    for i, m in enumerate(metrics):
        d = diffs[metric_key(m)]
        if math.isfinite(d.mean) and d.mean != 0.0:
            return keeps(d, m, min_gain if i == 0 else 0.0), m
    return False, metrics[0]


# ---------------------------------------------------------------------------------------------
# the walk


def _prepared(
    step: Step,
    extra: Sequence[str],
    train: Trainer | None,
    out_dir: Path,
    prefix: str,
    log: Callable[[str], None],
) -> tuple[Step, str]:
    """``step`` ready to run, or why not: a ``requires`` key the walk was not given is trained
    first when the step says how (``train``) and a trainer is at hand; the model folder becomes
    the step's own override (later steps keep it when the step is kept). The reason (what is
    missing, or why training failed) is ``""`` when the step can run."""
    missing = missing_requirements(step, extra)
    if not missing:
        return step, ""
    if step.train is None or train is None:
        return step, "needs " + ", ".join(f"{k}=..." for k in missing)
    log(f"{prefix} {step.name}: training {', '.join(missing)} ({' '.join(step.train)})")
    shared = [o for o in extra if _key(o).split(".")[0] in TRAIN_PASSTHROUGH]
    try:
        model = train([*shared, *step.train], out_dir / "models" / step.name)
    except RagLabError as exc:  # a step that cannot train is recorded as skipped, not fatal
        return step, f"training failed: {exc}"
    return replace(step, overrides=(*step.overrides, *(f"{k}={model}" for k in missing))), ""


def run_walk(
    plan: WalkPlan,
    evaluate: Evaluator,
    out_dir: Path,
    extra: Sequence[str] = (),
    log: Callable[[str], None] = lambda _: None,
    train: Trainer | None = None,
    workers: Submitter | None = None,
) -> WalkResult:
    """Walk ``plan``: step 0, then each step on the kept state; writes ``walk.json`` into
    ``out_dir`` (step runs under ``out_dir/<split>/<nn>_<step>``) and returns the result.
    ``train``: trains the model a step ``requires`` and was not given (a step with ``train``
    overrides; the model under ``out_dir/models/<step>``). ``workers``: evaluates a step's
    select and report splits at the same time (:class:`StepWorkers`); the steps stay in order,
    since each is built on the decisions before it, and the result is the sequential one."""
    splits = (plan.select_split, plan.report_split)
    metrics = list(
        dict.fromkeys([*plan.metrics, *(m for s in plan.steps for m in plan.decision_metrics(s))])
    )
    kept: list[Step] = []

    def run(index: int, name: str, overrides: Sequence[str]) -> dict[str, pd.DataFrame]:
        tables = {}
        jobs = {}
        for split in splits:
            folder = out_dir / split / f"{index:02d}_{name}"
            log(f"step {index} {name} on {split}: {' '.join(overrides)}")
            args = ([*overrides, f"dataset.split={split}"], split, folder)
            if workers is None:
                tables[split] = evaluate(*args)
            else:
                jobs[split] = workers.submit(evaluate, *args)
        wait(jobs.values())  # every split finishes before a failure is raised
        for split, job in jobs.items():
            tables[split] = job.result()
        return tables

    base_overrides = state_overrides(plan, [], extra)
    current = run(0, "base", base_overrides)
    results = [
        StepResult(
            index=0,
            name="base",
            note=" ".join(plan.base),
            overrides=base_overrides,
            decision_metric=plan.select_metric,
            kept=None,
            means={s: _means(current[s], metrics) for s in splits},
            by_category={s: _by_category(current[s], metrics) for s in splits},
            run_dirs={s: str(out_dir / s / "00_base") for s in splits},
        )
    ]
    for i, step in enumerate(plan.steps, start=1):
        step, reason = _prepared(step, extra, train, out_dir, f"step {i}", log)
        overrides = state_overrides(plan, [*kept, step], extra)
        if reason:
            log(f"step {i} {step.name}: skipped ({reason})")
            results.append(
                StepResult(
                    i, step.name, step.note, overrides, plan.decision_metric(step), None, reason
                )
            )
            continue
        try:
            tables = run(i, step.name, overrides)
        except RagLabError as exc:  # a stage that cannot be built on the kept steps
            reason = f"cannot run on the kept steps: {exc}"
            log(f"step {i} {step.name}: skipped ({reason})")
            results.append(
                StepResult(
                    i, step.name, step.note, overrides, plan.decision_metric(step), None, reason
                )
            )
            write_result(WalkResult(plan, tuple(results)), out_dir)
            continue
        diffs = {
            s: {metric_key(m): paired_diff(tables[s], current[s], m, plan) for m in metrics}
            for s in splits
        }
        if step.always:
            keep, by = True, ALWAYS
        else:
            keep, by = decide(diffs[plan.select_split], plan.decision_metrics(step), plan.min_gain)
        log(f"step {i} {step.name}: {'kept' if keep else 'dropped'} (decided by {by})")
        results.append(
            StepResult(
                index=i,
                name=step.name,
                note=step.note,
                overrides=overrides,
                decision_metric=plan.decision_metric(step),
                kept=keep,
                decided_by=by,
                means={s: _means(tables[s], metrics) for s in splits},
                diffs=diffs,
                by_category={s: _by_category(tables[s], metrics) for s in splits},
                category_diffs={s: _category_diffs(tables[s], current[s], metrics) for s in splits},
                run_dirs={s: str(out_dir / s / f"{i:02d}_{step.name}") for s in splits},
            )
        )
        if keep:
            kept.append(step)
            current = tables
        write_result(WalkResult(plan, tuple(results)), out_dir)  # a walk cut short keeps its steps
    result = WalkResult(plan, tuple(results))
    write_result(result, out_dir)
    return result


# ---------------------------------------------------------------------------------------------
# walk.json


def _finite_or_none(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite_or_none(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite_or_none(v) for v in value]
    return value


def write_result(result: WalkResult, out_dir: Path) -> Path:
    """``out_dir/walk.json``: the plan and every step (NaN written as null)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    payload = {"plan": asdict(result.plan), "steps": [asdict(s) for s in result.steps]}
    path = out_dir / WALK_FILE
    write_atomic(path, json.dumps(_finite_or_none(payload), indent=2, ensure_ascii=False))
    return path


def _nan(value: Any) -> float:
    return math.nan if value is None else float(value)


def read_result(out_dir: Path) -> WalkResult:
    """The :class:`WalkResult` of a walk folder's ``walk.json``."""
    path = Path(out_dir) / WALK_FILE
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path}: not a walk result ({exc})") from None
    p = raw["plan"]
    plan = WalkPlan(
        name=p["name"],
        base=tuple(p["base"]),
        steps=tuple(
            Step(
                name=s["name"],
                note=s["note"],
                overrides=tuple(s["overrides"]),
                append={g: tuple(v) for g, v in s["append"].items()},
                metric=s["metric"],
                requires=tuple(s["requires"]),
                always=s.get("always", False),
                train=None if s.get("train") is None else tuple(s["train"]),
            )
            for s in p["steps"]
        ),
        lists={g: tuple(v) for g, v in p["lists"].items()},
        **{k: p[k] for k in ("select_split", "report_split", "select_metric", "min_gain")},
        tie_break=tuple(p["tie_break"]),
        metrics=tuple(p["metrics"]),
        **{k: p[k] for k in ("n_resamples", "alpha", "seed")},
    )

    def floats(d: Mapping[str, Any]) -> dict[str, float]:
        return {k: _nan(v) for k, v in d.items()}

    steps = tuple(
        StepResult(
            index=s["index"],
            name=s["name"],
            note=s["note"],
            overrides=tuple(s["overrides"]),
            decision_metric=s["decision_metric"],
            kept=s["kept"],
            skipped=s["skipped"],
            decided_by=s["decided_by"],
            means={sp: floats(m) for sp, m in s["means"].items()},
            diffs={
                sp: {
                    k: Diff(_nan(d["mean"]), _nan(d["low"]), _nan(d["high"]), _nan(d["p"]), d["n"])
                    for k, d in m.items()
                }
                for sp, m in s["diffs"].items()
            },
            by_category={
                sp: {c: floats(m) for c, m in cats.items()} for sp, cats in s["by_category"].items()
            },
            category_diffs={
                sp: {c: floats(m) for c, m in cats.items()}
                for sp, cats in s["category_diffs"].items()
            },
            run_dirs=s["run_dirs"],
        )
        for s in raw["steps"]
    )
    return WalkResult(plan, steps)


# ---------------------------------------------------------------------------------------------
# parallel splits


def _start_worker(running: Any, lock: Any, cpus: int) -> None:
    from rag_lab.runtime import threads

    threads.share(running, lock, cpus)


def _evaluate_in_worker(
    evaluate: Evaluator, overrides: Sequence[str], split: str, run_dir: Path
) -> pd.DataFrame:
    """One split of a step in a worker: its threads counted while it runs, its console summary
    written to ``run_dir/console.txt`` (two summaries printed at once would interleave)."""
    import contextlib
    import io

    from rag_lab.runtime import threads

    buffer = io.StringIO()
    with threads.busy(), contextlib.redirect_stdout(buffer):
        try:
            return evaluate(overrides, split, run_dir)
        finally:
            run_dir.mkdir(parents=True, exist_ok=True)
            (run_dir / "console.txt").write_text(buffer.getvalue(), encoding="utf-8")


class StepWorkers:
    """``n`` forked worker processes that evaluate a step's splits at once (``rag-lab walk
    --workers``). Forked before any model is loaded; each worker keeps what it loaded (the
    embedder: :data:`rag_lab.embedder.sentence_transformer.SHARED_MODELS`) for the later steps.
    While both run each gets half the cores (:mod:`rag_lab.runtime.threads`); one waiting for
    the other's stage-cache claim (the corpus both splits embed) lends it its cores."""

    def __init__(self, n: int) -> None:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        from rag_lab.runtime import threads

        ctx = multiprocessing.get_context("fork")
        cpus = threads.usable_cpus()
        self.running = ctx.Value("i", 0)
        self.pool = ProcessPoolExecutor(
            max_workers=n,
            mp_context=ctx,
            initializer=_start_worker,
            initargs=(self.running, self.running.get_lock(), cpus or 1),
        )

    def submit(
        self, evaluate: Evaluator, overrides: Sequence[str], split: str, run_dir: Path
    ) -> Future[pd.DataFrame]:
        return self.pool.submit(_evaluate_in_worker, evaluate, overrides, split, run_dir)

    def __enter__(self) -> StepWorkers:
        return self

    def __exit__(self, *exc: object) -> None:
        self.pool.shutdown(wait=True, cancel_futures=True)


# ---------------------------------------------------------------------------------------------
# the real evaluator


def evaluate_step(overrides: Sequence[str], split: str, run_dir: Path) -> pd.DataFrame:
    """Compose ``evaluate`` with ``overrides`` as the command line would, run it with its outputs
    in ``run_dir`` (no HTML page per step: the walk writes its own), and return the per-query
    table it wrote."""
    from hydra import compose, initialize_config_dir
    from hydra.errors import HydraException
    from omegaconf import open_dict

    from rag_lab.evaluate import evaluate
    from rag_lab.paths import CONFIG_DIR

    try:
        with initialize_config_dir(config_dir=CONFIG_DIR, version_base="1.3"):
            cfg = compose("evaluate", overrides=list(overrides))
    except HydraException as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ConfigError(f"walk step on {split} ({' '.join(overrides)}): {first}") from None
    with open_dict(cfg):
        cfg.paths.output_dir = str(run_dir)
        cfg.evaluation.html_report = "false"
    evaluate(cfg)
    return pd.read_parquet(run_dir / "per_query.parquet")


def _failure(done: Any, out_dir: Path) -> str:
    """Why a training process failed, in one line: the signal that killed it (SIGKILL is what
    the kernel's out-of-memory killer sends; its last stderr line is then only whatever a library
    last warned about) or its last stderr line."""
    import signal

    if done.returncode < 0:
        sig = signal.Signals(-done.returncode).name
        why = " (the kernel's out-of-memory killer sends it: see dmesg)" if sig == "SIGKILL" else ""
        return f"killed by {sig}{why}; its log: {Path(out_dir) / 'train_reranker.log'}"
    lines = [line for line in (done.stderr or "").splitlines() if line.strip()]
    return lines[-1][:300] if lines else f"exit status {done.returncode}"


def train_step(overrides: Sequence[str], out_dir: Path) -> Path:
    """``rag-lab train reranker`` with ``overrides``, its outputs in ``out_dir``, in a process of
    its own (a model trained inside the walk's process stayed in its memory: the cold walk on the
    sample was killed at 9.7 GB); returns the trained model's folder (``out_dir/model``). A model
    already trained there by an earlier walk with the same overrides is reused."""
    import subprocess
    import sys

    model = Path(out_dir) / "model"
    stamp = Path(out_dir) / "walk_train.json"
    if model.is_dir() and stamp.is_file():
        if json.loads(stamp.read_text(encoding="utf-8")) == list(overrides):
            return model
    Path(out_dir).mkdir(parents=True, exist_ok=True)
    command = [
        sys.executable,
        "-m",
        "rag_lab.cli",
        "train",
        "reranker",
        *overrides,
        f"hydra.run.dir={out_dir}",
    ]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0 or not model.is_dir():
        raise ConfigError(f"walk training ({' '.join(overrides)}): {_failure(done, out_dir)}")
    stamp.write_text(json.dumps(list(overrides)), encoding="utf-8")
    return model


__all__ = [
    "ALWAYS",
    "Diff",
    "Evaluator",
    "Step",
    "StepResult",
    "StepWorkers",
    "WalkPlan",
    "WalkResult",
    "evaluate_step",
    "gain",
    "keeps",
    "load_plan",
    "decide",
    "missing_requirements",
    "paired_diff",
    "plan_from_dict",
    "read_result",
    "run_walk",
    "state_overrides",
    "train_step",
    "Trainer",
    "write_result",
]
