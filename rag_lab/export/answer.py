"""An answer from a loaded export that has a generator: the query's top ``answer_k`` chunks
(``search``) through the context stages, the generator (with a note when sources disagree) and,
when the export has one, the judge, as ``rag-lab evaluate`` answers a labelled query.

The reply: the answer text, the chunks the generator read (``context_chunk_ids``), the ones its
answer cites (``[1]`` marks, as the prompts ask; ``cited_chunk_ids``), the judge's faithfulness and
verdict (``None`` without a judge), the search's flags and each stage's time.
"""

from __future__ import annotations

import re
import threading
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from omegaconf import DictConfig

from rag_lab.errors import ConfigError
from rag_lab.export.search import Flags, search
from rag_lab.generator.base import Generator
from rag_lab.judge.runner import JudgeRunner
from rag_lab.pipeline import build
from rag_lab.pipeline.answers import generate, score_response
from rag_lab.pipeline.pipeline import Pipeline
from rag_lab.postprocess.conflicts import KEY as CONFLICT
from rag_lab.postprocess.conflicts import conflict_notes
from rag_lab.text.language import detect_language

_CITE = re.compile(r"\[(\d{1,3})\]")


@dataclass(frozen=True)
class AnswerResult:
    query: str
    answer: str
    context_chunk_ids: list[str]
    cited_chunk_ids: list[str]
    faithfulness: float | None
    faithful: bool | None
    flags: Flags
    timings_ms: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class Answerer:
    """The export's generator, context stages and judge, built once (their models load on the
    first answer). Answers take turns: a local model is not safe under concurrent calls."""

    def __init__(self, pipe: Pipeline, config: DictConfig) -> None:
        self.pipe = pipe
        generator = build.build_generator(config)
        if generator is None:
            raise ConfigError("this export has no generator: it retrieves, it does not answer")
        self.generator: Generator = generator
        judge = build.build_judge(config)
        self.runner = JudgeRunner(judge) if judge is not None else None
        self.stages = build.build_context_stages(config, self.generator)
        self.answer_k = int(config.evaluation.get("answer_k", 5))
        self._lock = threading.Lock()

    def answer(
        self,
        query: str,
        *,
        as_of: str | None = None,
        filters: Mapping[str, Any] | None = None,
        metadata: Mapping[str, Any] | None = None,
        age_rule: Any = None,
    ) -> AnswerResult:
        found = search(
            self.pipe,
            query,
            self.answer_k,
            as_of=as_of,
            filters=filters,
            metadata=metadata,
            age_rule=age_rule,
        )
        chunks = self.pipe.all_chunks
        top = [chunks[h.chunk_id] for h in found.hits]
        timings = dict(found.timings_ms)
        with self._lock:
            given = top
            for name, stage in self.stages.items():
                t0 = time.perf_counter()
                given = list(stage.apply(query, given))
                timings[f"context/{name}"] = round(1000 * (time.perf_counter() - t0), 3)
            notes = conflict_notes({CONFLICT: found.flags.conflicts}, detect_language(query))
            t0 = time.perf_counter()
            response = generate(self.generator, query, given, None, Counter(), notes)
            timings["generator"] = round(1000 * (time.perf_counter() - t0), 3)
            faithfulness = faithful = None
            if self.runner is not None:
                t0 = time.perf_counter()
                contexts = [
                    chunks[c.chunk_id].text if c.chunk_id in chunks else c.text for c in given
                ]
                row = score_response(self.runner, query, contexts, response, None)
                faithfulness, faithful = row["faithfulness"], row.get("faithful")
                timings["judge"] = round(1000 * (time.perf_counter() - t0), 3)
        ids = [c.chunk_id for c in given]
        cited = [ids[int(n) - 1] for n in _CITE.findall(response) if 0 < int(n) <= len(ids)]
        return AnswerResult(
            query,
            response,
            ids,
            list(dict.fromkeys(cited)),
            faithfulness,
            faithful,
            found.flags,
            timings,
        )
