"""Calling a judge the way the answer stage and ``rag-lab judge`` do: an on-disk cache, retries
with backoff, and failures recorded as missing scores with a count, never as a silent zero.

Cache: judges that are ``Identified`` (``rag_lab.judge.base``) are cached in the stage cache's
``judge`` namespace, keyed by that identity + query + contexts + response + reference
(``rag_lab.cache.keys.judge_key``); a rerun reads the verdict instead of calling the judge (an LLM)
again. Failures are not cached, so a rerun retries them.

Retries: any exception from the judge (endpoint error, unparseable output, timeout) and any score
outside [0, 1] is retried ``retries`` times (a ``RetryPolicy`` judge's own), sleeping
``backoff * 2**i`` seconds; then the result is ``JudgeResult(None, {"error": ..., "attempts": n})``
and ``failures`` counts it. One exception: when the judge has failed on ``abort_after`` inputs
without ever having worked, it is misconfigured (wrong URL, model or key), and the runner raises
instead of grinding through every input. Results a judge decides by rule without its model
(``details["by_rule"]``: a refusal, an empty response) do not show that it works.
"""

from __future__ import annotations

import logging
import math
import time
from collections import Counter
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from rag_lab.cache import StageCache
from rag_lab.cache.keys import judge_key
from rag_lab.errors import ConfigError, RagLabError
from rag_lab.judge.base import Identified, Judge, JudgeResult, RetryPolicy, TermAware

if TYPE_CHECKING:
    from rag_lab.text.terms import ContentTerms

log = logging.getLogger(__name__)

NAMESPACE = "judge"


class JudgeFailedError(RagLabError):
    """The judge failed on every input so far (see ``JudgeRunner``)."""


class JudgeRunner:
    """Wraps a judge (it satisfies the ``Judge`` protocol itself, and ``TermAware``).
    ``retries`` / ``backoff`` default to the judge's own (``RetryPolicy``; else 0 retries, 1 s);
    ``cache`` None = no cache, and only ``Identified`` judges are cached. ``counts``: ``calls``
    (judge invocations, retries included), ``cache_hits``, ``retries``, ``failures`` (inputs
    recorded as missing after the retries)."""

    def __init__(
        self,
        judge: Judge,
        cache: StageCache | None = None,
        retries: int | None = None,
        backoff: float | None = None,
        abort_after: int | None = 5,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.inner = judge
        if isinstance(judge, RetryPolicy):  # the judge's own policy, unless the caller sets one
            retries = judge.retries if retries is None else retries
            backoff = judge.backoff if backoff is None else backoff
        self.retries = int(0 if retries is None else retries)
        self.backoff = float(1.0 if backoff is None else backoff)
        if self.retries < 0 or self.backoff < 0:
            raise ConfigError("judge retries and backoff must be >= 0")
        self.identity = judge.identity if isinstance(judge, Identified) else None
        self.cache = cache if self.identity is not None else None
        self.abort_after, self.sleep = abort_after, sleep
        self.counts: Counter[str] = Counter()
        self._succeeded = False

    @property
    def terms(self) -> ContentTerms | None:
        """The wrapped judge's term analysis (``score_response`` uses it for context
        utilisation); None when the judge is not ``TermAware``."""
        return self.inner.terms if isinstance(self.inner, TermAware) else None

    def key(self, query: str, contexts: Sequence[str], response: str, reference: str | None) -> str:
        return judge_key(self.identity, query, contexts, response, reference)

    def judge(
        self, query: str, contexts: Sequence[str], response: str, reference: str | None = None
    ) -> JudgeResult:
        key = self.key(query, contexts, response, reference) if self.cache is not None else None
        if key is not None and self.cache is not None:
            hit = self.cache.get_json(NAMESPACE, key)
            if hit is not None:
                self.counts["cache_hits"] += 1
                self._succeeded = self._succeeded or not hit["details"].get("by_rule")
                return JudgeResult(hit["faithfulness"], hit["details"])
        errors: list[str] = []
        for attempt in range(self.retries + 1):
            if attempt:
                self.counts["retries"] += 1
                self.sleep(self.backoff * 2 ** (attempt - 1))
            self.counts["calls"] += 1
            try:
                res = self.inner.judge(query, list(contexts), response, reference)
                check(res)
            except ConfigError:
                raise  # a wrong setting does not get better with retries
            except Exception as exc:  # any judge failure becomes a missing score
                errors.append(f"{type(exc).__name__}: {str(exc).strip()[:300]}")
                log.warning(
                    "judge attempt %d/%d failed: %s", attempt + 1, self.retries + 1, errors[-1]
                )
                continue
            self._succeeded = self._succeeded or not res.details.get("by_rule")
            if key is not None and self.cache is not None:
                self.cache.put_json(
                    NAMESPACE, key, {"faithfulness": res.faithfulness, "details": res.details}
                )
            return res
        self.counts["failures"] += 1
        if not self._succeeded and self.abort_after and self.counts["failures"] >= self.abort_after:
            raise JudgeFailedError(
                f"the judge {self.inner!r} failed on {self.counts['failures']} "
                f"inputs ({self.retries + 1} attempt(s) each) and has not "
                f"worked once; last error: {errors[-1]}"
            )
        return JudgeResult(None, {"error": errors[-1], "attempts": len(errors)})


def check(res: Any) -> None:
    """``ValueError`` unless ``res`` is a ``JudgeResult`` with faithfulness None or in [0, 1]."""
    if not isinstance(res, JudgeResult):
        raise ValueError(f"judge returned {type(res).__name__}, not a JudgeResult")
    f = res.faithfulness
    if f is not None and not (isinstance(f, (int, float)) and math.isfinite(f) and 0.0 <= f <= 1.0):
        raise ValueError(f"judge returned faithfulness {f!r}, outside [0, 1]")
