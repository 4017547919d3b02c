"""Metric names, their logged keys and their direction: the one source every consumer reads
(evaluate's console table, MLflow, sweeps and Optuna, the gate, the leaderboard, export cards).

Names are ranx-style ``<metric>@<k>``; logged keys replace ``@`` with ``_at_`` and any other
character MLflow rejects with ``_`` (``ndcg@10`` → ``ndcg_at_10``). MLflow accepts Unicode word
characters, so Chinese category names stay as they are (``by_category/口语/ndcg_at_10``).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable

# what MLflow's name check accepts: Unicode word characters, - . space / and :
_BAD = re.compile(r"[^\w\-. /:]")

# the metrics a person looks at first, in this order (tables, cards, gate summaries, leaderboards)
HEADLINE = (
    "ndcg_at_10",
    "hit_rate_at_5",
    "noise_ratio_at_5",
    "recall_at_100",
    "mrr_at_10",
    "map_at_100",
)

# keys where lower is better, matched on the last path segment (``evidence_noise_ratio_at_5``,
# ``by_category/x/noise_ratio_at_5``, ``answer/wrong_refusal_rate``, ``query_p95_ms``)
_LOWER_IS_BETTER = re.compile(
    r"(^|_)noise_ratio(_at_\d+)?$|wrong_refusal_rate$|_ms$|_seconds$|^cache_misses$|n_judge_failures$"
)


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
    return _LOWER_IS_BETTER.search(metric_key(key).rsplit("/", 1)[-1]) is None
