"""BM25 over chunks, with two backends: ``bm25s`` (sparse-matrix, vectorised; default) and
``rank_bm25`` (the pure-Python reference implementation, for cross-checking)."""

from __future__ import annotations

import contextlib
import gc
import json
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from rag_lab.retrievers.base import topk_to_run
from rag_lab.tokenizer.base import Tokenizer
from rag_lab.types import Chunk, Run
from rag_lab.validate import choice, number

BM25S_METHODS = ("lucene", "robertson", "atire", "bm25l", "bm25+")


_quieted = False


@contextlib.contextmanager
def _gc_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector while the token lists are built and indexed.

    Tokenising a corpus makes one small list per chunk and one string per token; the collector
    rescans them all at every generation-2 pass, which made indexing grow faster than the corpus
    (log-log slope 1.27 for the tokenizer from 100k to 300k chunks, 1.05 with the collector off;
    ``benchmarks/bench_scale.py``). Token lists hold no reference cycles, so nothing is missed.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _bm25s() -> Any:
    """bm25s, imported on first use. Its import sets its own logger to DEBUG (a "Building index
    from tokens" line on every index): once, that goes back to WARNING."""
    import logging

    import bm25s

    global _quieted
    if not _quieted:
        logger = logging.getLogger("bm25s")
        if logger.level == logging.DEBUG:
            logger.setLevel(logging.WARNING)
        _quieted = True
    return bm25s


class BM25Retriever:
    """Args:
    tokenizer: term analysis for chunks and queries (``english``, ``jieba``, ``whitespace``).
    backend: ``bm25s`` or ``rank_bm25``.
    k1, b: BM25 saturation (``>= 0``) and length normalisation (in ``[0, 1]``).
    method: bm25s scoring variant (``lucene``, ``robertson``, ``atire``, ``bm25l``, ``bm25+``);
        ``rank_bm25`` always scores as its ``BM25Okapi``.
    """

    def __init__(
        self,
        tokenizer: Tokenizer,
        backend: str = "bm25s",
        k1: float = 1.5,
        b: float = 0.75,
        method: str = "lucene",
    ) -> None:
        self.tokenizer = tokenizer
        self.backend = choice(backend, "backend", ("bm25s", "rank_bm25"))
        self.k1 = number(k1, "k1", ge=0)
        self.b = number(b, "b", ge=0, le=1)
        self.method = choice(method, "method", BM25S_METHODS)
        self.stats: dict[str, float] = {}
        self._ids: list[str] = []

    @property
    def chunk_ids(self) -> list[str]:
        return list(self._ids)

    def index(self, chunks: Sequence[Chunk]) -> None:
        t0 = time.perf_counter()
        self._ids = [c.chunk_id for c in chunks]
        with _gc_paused():
            tokens = self.tokenizer([c.index_text for c in chunks])
            t1 = time.perf_counter()
            if self.backend == "bm25s":
                bm25s = _bm25s()

                self._engine = bm25s.BM25(k1=self.k1, b=self.b, method=self.method)
                self._engine.index(tokens, show_progress=False)
            else:
                from rank_bm25 import BM25Okapi

                self._engine = BM25Okapi([t or [""] for t in tokens], k1=self.k1, b=self.b)
            del tokens
        t2 = time.perf_counter()
        self.stats = {
            "tokenize_seconds": t1 - t0,
            "index_seconds": t2 - t0,
            "chunks_per_second": len(chunks) / max(t2 - t0, 1e-9),
        }

    def save_index(self, directory: Path) -> None:
        """Write the index (chunk ids + the backend's own format) into an empty ``directory``."""
        if (
            self.backend != "bm25s"
        ):  # rank-bm25 has no format of its own; it is rebuilt from the chunks
            raise NotImplementedError(
                "the rank_bm25 backend is not persisted (it is the reference backend)"
            )
        (directory / "ids.json").write_text(json.dumps(self._ids))
        self._engine.save(str(directory / "bm25s"))

    def load_index(self, directory: Path) -> None:
        """Restore what ``save_index`` wrote (no re-tokenising of the corpus)."""
        bm25s = _bm25s()

        self._ids = json.loads((directory / "ids.json").read_text())
        self._engine = bm25s.BM25.load(str(directory / "bm25s"))
        self.stats = {"index_loaded": 1.0}

    def retrieve(self, queries: Mapping[str, str], k: int) -> Run:
        qids = list(queries)
        if not qids:
            return {}
        tokens = self.tokenizer([queries[q] for q in qids])
        k = min(k, len(self._ids))
        if self.backend == "bm25s":
            idx, scores = self._engine.retrieve(tokens, k=k, show_progress=False)
        else:
            all_scores = (
                np.stack([self._engine.get_scores(t) for t in tokens])
                if tokens
                else np.zeros((0, 0))
            )
            idx = np.argsort(-all_scores, axis=1, kind="stable")[:, :k]
            scores = np.take_along_axis(all_scores, idx, axis=1)
        return topk_to_run(
            qids, self._ids, np.asarray(idx), np.asarray(scores), drop_nonpositive=True
        )
