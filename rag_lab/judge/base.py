"""Judge protocol: scores how well a response is grounded in the contexts it was given."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable


@dataclass(frozen=True)
class JudgeResult:
    """``faithfulness`` in [0, 1] (share of the response's claims the contexts support), or None
    when the judge could not score (empty response, judge failure): a missing score, never 0.
    ``details`` is JSON-ready and judge-specific (e.g. the unsupported sentences); judges that
    score more than faithfulness put those scores there (``context_precision``, ``context_recall``;
    None = missing)."""

    faithfulness: float | None
    details: dict[str, Any] = field(default_factory=dict)


@runtime_checkable
class Judge(Protocol):
    """Contract: deterministic for a given input unless the judge says otherwise; ``contexts`` are
    the texts the generator saw (best first); ``reference`` (a gold answer) is optional and a
    faithfulness judge must not need it. A refusal counts as faithful (1.0, nothing is claimed).

    A judge may raise on failure (an endpoint error, unparseable model output, a timeout): callers
    go through ``rag_lab.judge.runner.JudgeRunner``, which retries and then records a missing
    score. Results decided without the judge's model (a refusal, an empty response) carry
    ``details["by_rule"] = True``. Optional attributes the runner reads: ``identity`` (JSON-ready:
    what defines the scores, e.g. model + weights + settings; never a secret; judges that have one
    are cached on disk), ``retries`` and ``backoff`` (seconds before the first retry, doubling)."""

    def judge(self, query: str, contexts: Sequence[str], response: str,
              reference: str | None = None) -> JudgeResult: ...
