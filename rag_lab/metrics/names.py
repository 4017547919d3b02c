"""Metric names, their logged keys and their direction: the one source every consumer reads
(evaluate's console table, MLflow, sweeps and Optuna, the gate, the leaderboard, export cards).

Names are ranx-style ``<metric>@<k>``; logged keys replace ``@`` with ``_at_`` and any other
character MLflow rejects with ``_`` (``ndcg@10`` → ``ndcg_at_10``). MLflow accepts Unicode word
characters, so Chinese category names stay as they are (``by_category/口语/ndcg_at_10``).

A metric name a *user* gives (``rag-lab gate --max-drop``, ``optimized_metric``, ``sweep.floors``)
goes through :func:`canonical_key`, the one normaliser: ``ndcg@10``, ``ndcg_at_10`` and
`` NDCG@10`` all mean ``ndcg_at_10``.

The objective rule (:func:`noise_refusal`): ``noise_ratio@k`` is undefined for a query with nothing
retrieved, so a method that retrieves nothing for hard queries lowers it. It is refused as a sweep
objective or gate criterion on its own, unless paired with a floor on a metric that counts an
answerable query with nothing retrieved as a miss (:data:`FLOOR_METRICS`: hit rate or recall).
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Iterable, Mapping

# what MLflow's name check accepts: Unicode word characters, - . space / and :
_BAD = re.compile(r"[^\w\-. /:]")

# the metrics a person looks at first, in this order (tables, cards, gate summaries, leaderboards)
HEADLINE = (
    "ndcg_at_10",
    "hit_rate_at_5",
    "noise_ratio_at_5",
    "empty_result_rate",  # beside noise: noise skips queries with nothing retrieved
    "recall_at_100",
    "mrr_at_10",
    "map_at_100",
)

# keys where lower is better, matched on the last path segment (``evidence_noise_ratio_at_5``,
# ``by_category/x/noise_ratio_at_5``, ``empty_result_rate``, ``answer/wrong_refusal_rate``,
# ``query_p95_ms``)
_LOWER_IS_BETTER = re.compile(
    r"(^|_)noise_ratio(_at_\d+)?$|empty_result_rate$|wrong_refusal_rate$|_ms$|_seconds$"
    r"|^cache_misses$|n_judge_failures$|unsupported_fact_rate$"
)


# what a query with nothing retrieved does to a metric: these count it as a miss (0), so a floor on
# one of them closes noise ratio's loophole (noise skips such a query)
FLOOR_METRICS = ("hit_rate", "recall")
_NOISE = re.compile(r"(^|_)noise_ratio(_at_\d+)?$")
_FLOOR = re.compile(rf"(^|_)({'|'.join(FLOOR_METRICS)})(_at_\d+)?$")
# keys whose values are counts (written as integers in metrics.json): ``n_queries``,
# ``ingest/n_pages``, ``answer/n_judge_failures``, cache counters, miss-reason counts, flags
_COUNT = re.compile(
    r"(^|/)n_[^/]+$|(^|/)cache_(hits|misses|bytes_read|bytes_written)$|^cache/[^/]+/(hits|misses)$"
    r"|(^|/)(evidence_)?misses_at_\d+/|(^|/)answer_misses/|/(run_from_cache|index_loaded)$"
)


# keys that measure the machine, not the pipeline's output: durations, rates, latencies
_TIMING = re.compile(r"(_seconds|_ms|per_second|ms_per_query)$")


def is_timing(key: str) -> bool:
    """Whether a ``metrics.json`` key is a duration, latency or rate (``index_seconds``,
    ``query_p95_ms``, ``embed_docs_per_second``, ``bm25/tokenize_seconds``)."""
    return _TIMING.search(key.rsplit("/", 1)[-1]) is not None


def metric_key(name: str) -> str:
    """``ndcg@10`` → ``ndcg_at_10``; any other character MLflow rejects → ``_``; a name that
    would not read back as itself as a path (``a//b``, ``/a``, ``a/../b``) is tidied the same way
    (MLflow refuses those too)."""
    key = _BAD.sub("_", name.replace("@", "_at_"))
    parts = ["_" if p in ("", ".", "..") else p for p in key.split("/")]
    return "/".join(parts)


def logged_keys(names: Iterable[str]) -> dict[str, str]:
    """``{name: logged key}`` for a run's names: ``metric_key`` of each, and where two different
    names would become one key (``a@1`` and ``a_at_1``), the later ones get a short hash of the
    name appended, so no value overwrites another."""
    out: dict[str, str] = {}
    taken: dict[str, str] = {}
    for name in names:
        key = metric_key(name)
        if key in taken and taken[key] != name:
            key = f"{key}_{hashlib.blake2b(name.encode(), digest_size=3).hexdigest()}"
        taken.setdefault(key, name)
        out[name] = key
    return out


def higher_is_better(key: str) -> bool:
    """Direction of a metric, given as a name (``noise_ratio@5``) or a logged key."""
    return _LOWER_IS_BETTER.search(canonical_key(key).rsplit("/", 1)[-1]) is None


def canonical_key(name: str) -> str:
    """The one normaliser of a metric name taken from a user: surrounding blanks dropped, the
    metric (last path segment) lower-cased, then :func:`metric_key` (``NDCG@10``, ``ndcg@10`` and
    ``ndcg_at_10`` → ``ndcg_at_10``; ``by_category/口语/ndcg@10`` keeps its category)."""
    head, sep, last = str(name).strip().rpartition("/")
    return metric_key(f"{head}{sep}{last.lower()}")


def is_noise(name: str) -> bool:
    """``noise_ratio@k`` in any of its forms (``evidence_noise_ratio_at_5``, per category)."""
    return _NOISE.search(canonical_key(name).rsplit("/", 1)[-1]) is not None


def is_floor_metric(name: str) -> bool:
    """A metric that counts an answerable query with nothing retrieved as a miss
    (:data:`FLOOR_METRICS`, also evidence-level and per category)."""
    return _FLOOR.search(canonical_key(name).rsplit("/", 1)[-1]) is not None


def is_count(key: str) -> bool:
    """Whether a ``metrics.json`` key holds a count (written as an integer)."""
    return _COUNT.search(key) is not None


def noise_refusal(criteria: Iterable[str], floors: Iterable[str], add: str) -> str | None:
    """The one-line refusal when a noise ratio is among ``criteria`` (a sweep objective, gate
    checks) and none of ``floors`` is a hit-rate or recall floor; ``add`` says how to add one,
    ``{k}`` in it standing for the noise ratio's cut-off (``"--max-drop hit_rate_at_{k}=0.02"``).
    None when the rule is met."""
    criteria, floors = list(criteria), list(floors)
    noise = [c for c in criteria if is_noise(c)]
    if not noise or any(is_floor_metric(f) for f in floors):
        return None
    k = re.search(r"_at_(\d+)$", canonical_key(noise[0]))
    return (
        f"{noise[0]} alone is not a safe criterion (a query with nothing retrieved has no noise "
        f"ratio, so retrieving nothing lowers it): add a hit-rate or recall floor, e.g. "
        + add.replace("{k}", k.group(1) if k else "5")
    )


def objective_value(
    metrics: Mapping[str, object], metric: str, floors: Mapping[str, float] | None = None
) -> float | None:
    """The sweep objective: ``metrics[canonical_key(metric)]``, or, when a floor of ``floors``
    (``{name: minimum}``) is not met, a value worse than any a [0, 1] metric can take (higher is
    better: ``0 − shortfall``; lower is better: ``1 + shortfall``; ``shortfall`` = the summed
    distance below the floors, a floor metric that is missing or NaN counting from 0), so an
    optimiser steers away and the sweep's winner is one that meets the floors. ``None`` when the
    metric is absent; NaN stays NaN when every floor is met."""
    value = _number(metrics.get(canonical_key(metric)))
    if value is None:
        return None
    shortfall = 0.0
    for name, minimum in (floors or {}).items():
        got = _number(metrics.get(canonical_key(name)))
        got = got if got is not None and math.isfinite(got) else 0.0
        shortfall += max(float(minimum) - got, 0.0)
    if shortfall <= 0:
        return value
    return 1.0 + shortfall if not higher_is_better(metric) else -shortfall


def meets_floors(metrics: Mapping[str, object], floors: Mapping[str, float]) -> bool:
    """Every floor of ``floors`` (``{name: minimum}``) met by ``metrics`` (a missing or NaN
    floor metric counts as 0, as in ``objective_value``): the trials it does not penalise."""
    for name, minimum in floors.items():
        got = _number(metrics.get(canonical_key(name)))
        if (got if got is not None and math.isfinite(got) else 0.0) < float(minimum):
            return False
    return True


def _number(value: object) -> float | None:
    """``value`` as a float when it is a number (not a bool), else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)
