"""Judge protocol: scores how well a response is grounded in the contexts it was given; the
optional capabilities a judge may declare (``Identified``, ``RetryPolicy``, ``TermAware``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from rag_lab.protocols import Identified

if TYPE_CHECKING:
    from rag_lab.text.terms import ContentTerms

__all__ = ["Identified", "Judge", "JudgeResult", "RetryPolicy", "TermAware"]


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
    ``details["by_rule"] = True``. Optional capabilities: ``Identified`` (``rag_lab.protocols``,
    re-exported here: ``identity`` is JSON-ready, what defines the scores, e.g. model + weights +
    settings, never a secret; ``JudgeRunner`` caches such judges' verdicts on disk), and below
    ``RetryPolicy`` (its own retries) and ``TermAware`` (its term analysis)."""

    def judge(
        self, query: str, contexts: Sequence[str], response: str, reference: str | None = None
    ) -> JudgeResult: ...


@runtime_checkable
class RetryPolicy(Protocol):
    """A judge that says how often ``JudgeRunner`` retries it: ``retries`` extra attempts,
    sleeping ``backoff`` seconds before the first (doubling). Others: 0 retries."""

    @property
    def retries(self) -> int: ...

    @property
    def backoff(self) -> float: ...


@runtime_checkable
class TermAware(Protocol):
    """A judge that reads content terms (lexical): context utilisation reuses its analysis, so an
    answer's terms mean the same for its faithfulness and for the contexts it used."""

    @property
    def terms(self) -> ContentTerms | None: ...
