"""BM25 over chunks, with two backends: ``bm25s`` (sparse-matrix, vectorised; default) and
``rank_bm25`` (the pure-Python reference implementation, for cross-checking)."""

from __future__ import annotations

import contextlib
import gc
import json
import time
from collections.abc import Iterator, Mapping, Sequence, Set
from pathlib import Path
from typing import Any

import numpy as np

from rag_lab.retrievers.base import Row, topk_to_run
from rag_lab.tokenizer.base import Tokenizer
from rag_lab.types import Chunk, Run
from rag_lab.validate import choice, number

BM25S_METHODS = ("lucene", "robertson", "atire", "bm25l", "bm25+")
TOKENIZE_BLOCK = 16_384  # chunks tokenised at a time while counting terms


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


def _top_k(
    engine: Any, queries: list[list[str]], k: int, mask: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` best chunks per query from a ``bm25s.BM25``, by its own scores; a tie at the
    cut goes to the earlier chunks (bm25s leaves it to the selection). bm25s' ``retrieve``
    selects with ``np.argpartition(scores, -k)``, which numpy 2.4 takes 14 ms for on 100k
    scores that are mostly zero (0.45 ms on the negated scores): BM25 queries over 100k chunks
    ran at 4-5 ms p50 instead of under 1 (``benchmarks/bench_scale.py``). ``mask``: the rows
    that may be returned (a pre-filter: the others never reach the selection); ``k`` must not
    exceed how many it allows."""
    idx = np.zeros((len(queries), k), dtype=np.int64)
    top_scores = np.zeros((len(queries), k), dtype=np.float32)
    for row, tokens in enumerate(queries if k else []):
        neg = -(engine.get_scores(tokens) if tokens else np.zeros(engine.scores["num_docs"]))
        if mask is not None:
            neg = np.where(mask, neg, np.inf)
        cut = np.partition(neg, k - 1)[k - 1]
        above = np.flatnonzero(neg < cut)
        best = np.concatenate([above, np.flatnonzero(neg == cut)[: k - len(above)]])
        best = best[np.lexsort((best, neg[best]))]
        idx[row], top_scores[row] = best, -neg[best]
    return idx, top_scores


class _TermCounts:
    """A corpus as (chunk, term, count) triples, chunk-major, and each chunk's length: tokenised
    ``TOKENIZE_BLOCK`` chunks at a time, so the corpus' token strings are never all held (1M
    chunks of 50 words: 50M strings and the index built from them peaked at 6.3 GB, and took
    12x as long as 100k chunks).

    ``index_into`` fills a ``bm25s.BM25`` with exactly the score matrix its own ``index`` builds
    from the same tokens, computed with its own idf and tf scorers over whole arrays instead of
    one Python loop step per chunk (``tests/retrievers/test_bm25_build.py``). Term ids follow
    first appearance; bm25s numbers them in set order, which changes from run to run."""

    def __init__(self, vocab: dict[str, int], lengths: np.ndarray, triples: list[np.ndarray]):
        self.vocab, self.lengths = vocab, lengths
        self.chunk, self.term, self.count = triples

    idf: np.ndarray | None = None  # the idf per term and mean length of the last index_into
    avg_len: float = 0.0

    @classmethod
    def of(
        cls, tokenizer: Tokenizer, texts: Sequence[str], vocab: dict[str, int] | None = None
    ) -> _TermCounts:
        """The texts' term counts; ``vocab``: term ids to extend (new terms get the next ids)."""
        vocab = {} if vocab is None else vocab
        lengths, chunk, term, count = [], [], [], []
        for start in range(0, len(texts), TOKENIZE_BLOCK):
            docs = tokenizer(list(texts[start : start + TOKENIZE_BLOCK]))
            n = np.fromiter(map(len, docs), np.int64, len(docs))
            ids = np.fromiter(
                (vocab.setdefault(t, len(vocab)) for doc in docs for t in doc), np.int64, n.sum()
            )
            del docs
            # one (chunk, term) key per token; unique keys come sorted, so chunk-major
            width = len(vocab)
            keys, tf = np.unique(np.repeat(np.arange(len(n)), n) * width + ids, return_counts=True)
            lengths.append(n)
            chunk.append((keys // width + start).astype(np.int32))
            term.append((keys % width).astype(np.int32))
            count.append(tf.astype(np.float32))
        joined = [
            np.concatenate(a) if a else np.zeros(0, d)
            for a, d in ((chunk, np.int32), (term, np.int32), (count, np.float32))
        ]
        return cls(vocab, np.concatenate(lengths) if lengths else np.zeros(0, np.int64), joined)

    def index_into(self, engine: Any) -> None:
        import scipy.sparse as sp
        from bm25s import scoring

        n_docs, n_vocab = len(self.lengths), len(self.vocab)
        avg_len = self.lengths.mean()
        df = np.bincount(self.term, minlength=n_vocab)
        idf_of = scoring._select_idf_scorer(engine.idf_method)
        engine.nonoccurrence_array = None
        if engine.method in engine.methods_requiring_nonoccurrence:
            engine.nonoccurrence_array = scoring._build_nonoccurrence_array(
                doc_frequencies=dict(enumerate(df.tolist())),
                n_docs=n_docs,
                compute_idf_fn=idf_of,
                calculate_tfc_fn=scoring._select_tfc_scorer(engine.method),
                l_d=avg_len,
                l_avg=avg_len,
                k1=engine.k1,
                b=engine.b,
                delta=engine.delta,
                dtype=engine.dtype,
            )
        idf = _idf_array(df, n_docs, idf_of, engine.dtype)
        self.idf, self.avg_len = idf, float(avg_len)
        tfc = scoring._select_tfc_scorer(engine.method)(
            tf_array=self.count,
            l_d=self.lengths[self.chunk],
            l_avg=avg_len,
            k1=engine.k1,
            b=engine.b,
            delta=engine.delta,
        )
        scores = idf[self.term] * tfc
        if engine.nonoccurrence_array is not None:
            scores -= engine.nonoccurrence_array[self.term]
        matrix = sp.csc_matrix(
            (scores.astype(engine.dtype), (self.chunk, self.term)),
            shape=(n_docs, n_vocab),
            dtype=engine.dtype,
        )
        engine.scores = {
            "data": matrix.data,
            "indices": matrix.indices,
            "indptr": matrix.indptr,
            "num_docs": n_docs,
        }
        vocab = dict(self.vocab)
        if "" not in vocab:  # bm25s' empty token: scores chunks that have no terms
            vocab[""] = max(vocab.values(), default=-1) + 1
        engine.vocab_dict = vocab
        engine.unique_token_ids_set = set(vocab.values())

    def save(self, directory: Path) -> None:
        """The counts beside a saved index (``terms.npz``, ``terms.json``): what ``update``
        splices instead of tokenising the corpus again."""
        np.savez(
            directory / "terms.npz",
            lengths=self.lengths,
            chunk=self.chunk,
            term=self.term,
            count=self.count,
        )
        (directory / "terms.json").write_text(json.dumps(list(self.vocab), ensure_ascii=False))

    @classmethod
    def load(cls, directory: Path) -> _TermCounts | None:
        """What ``save`` wrote; ``None`` for an index saved without it (rag_lab < 0.5)."""
        if not (directory / "terms.npz").is_file():
            return None
        with np.load(directory / "terms.npz") as z:
            arrays = [z["chunk"], z["term"], z["count"]]
            lengths = z["lengths"]
        terms = json.loads((directory / "terms.json").read_text())
        return cls({t: i for i, t in enumerate(terms)}, lengths, arrays)

    def spliced(
        self, tokenizer: Tokenizer, source: Sequence[int], texts: Sequence[str]
    ) -> tuple[_TermCounts, np.ndarray]:
        """The counts of a new corpus: row ``i`` is this corpus' chunk ``source[i]``, or, where
        that is ``-1``, the next of ``texts`` (tokenised here). Terms no chunk holds any more are
        dropped; the others keep their order. Returns the counts and, per term of the result,
        its id here (``-1``: a new term)."""
        src = np.asarray(source, dtype=np.int64)
        n_old = len(self.lengths)
        vocab = dict(self.vocab)
        fresh = _TermCounts.of(tokenizer, list(texts), vocab)
        # where each old chunk's triples start: chunk-major, so counted per chunk
        starts = np.concatenate([[0], np.cumsum(np.bincount(self.chunk, minlength=n_old))])
        new_of_old = np.full(n_old, -1, dtype=np.int64)
        kept = np.flatnonzero(src >= 0)
        new_of_old[src[kept]] = kept
        take = np.repeat(new_of_old >= 0, np.diff(starts))
        new_rows = np.flatnonzero(src < 0)
        chunk = np.concatenate([new_of_old[self.chunk[take]], new_rows[fresh.chunk]])
        term = np.concatenate([self.term[take], fresh.term])
        count = np.concatenate([self.count[take], fresh.count])
        # each chunk's triples come from one side, sorted by term there: a stable sort by chunk
        # alone gives the (chunk, term) order (about 3x faster than a lexsort of both)
        order = np.argsort(chunk, kind="stable")
        chunk, term, count = chunk[order], term[order], count[order]
        lengths = np.zeros(len(src), dtype=np.int64)
        lengths[kept] = self.lengths[src[kept]]
        lengths[new_rows] = fresh.lengths
        # drop the terms no chunk holds any more; the rest keep their order
        used = np.bincount(term, minlength=len(vocab)) > 0
        renumber = np.cumsum(used) - 1
        names = [t for t, u in zip(vocab, used.tolist()) if u]
        was = np.flatnonzero(used)
        was = np.where(was < len(self.vocab), was, -1)
        out = _TermCounts(
            {t: i for i, t in enumerate(names)},
            lengths,
            [chunk.astype(np.int32), renumber[term].astype(np.int32), count],
        )
        return out, was


def _idf_array(df: np.ndarray, n_docs: int, idf_of: Any, dtype: Any) -> np.ndarray:
    """bm25s' ``_build_idf_array`` over document frequencies ``df`` (one per term), the scorer
    called once per distinct frequency rather than once per term (SciFact: ~30k terms, a few
    hundred frequencies): the same values, each cast to ``dtype`` as bm25s casts it."""
    distinct, where = np.unique(df, return_inverse=True)
    table = np.zeros(len(distinct), dtype=dtype)
    for i, d in enumerate(distinct.tolist()):
        if d != 0:
            table[i] = idf_of(d, N=n_docs)
    return table[where.reshape(-1)]


class _Edit:
    """What an ``update`` changed: the old mean length and, per term of the new vocabulary, its
    old idf (0: a new term); the new chunks and the stale ids (``BM25Retriever.carry``)."""

    def __init__(self, avg_len: float, old_idf: np.ndarray, method: str) -> None:
        self.avg_len, self.old_idf, self.method = avg_len, old_idf, method
        self.fresh: list[str] = []
        self.stale: frozenset[str] = frozenset()

    @classmethod
    def before(cls, old: _TermCounts, was: np.ndarray, method: str) -> _Edit:
        from bm25s import scoring

        n_docs = len(old.lengths)
        df = np.bincount(old.term, minlength=len(old.vocab))
        idf = old.idf
        if idf is None:  # restored from disk: computed as index_into computes it
            idf_of = scoring._select_idf_scorer(method)
            idf = _idf_array(df, n_docs, idf_of, "float32")
        aligned = np.where(was >= 0, idf[np.maximum(was, 0)], 0.0)
        return cls(float(old.lengths.mean()) if n_docs else 0.0, aligned, method)

    def after(self, terms: _TermCounts, fresh: list[str], stale: Set[str]) -> _Edit:
        self.fresh, self.stale = fresh, frozenset(stale)
        return self

    def carry(
        self, retriever: BM25Retriever, queries: Mapping[str, str], rows: Mapping[str, Row], k: int
    ) -> dict[str, Row]:
        terms = retriever._terms
        if self.method != "lucene" or terms is None or terms.idf is None or self.avg_len <= 0:
            return {}
        n_vocab = len(terms.vocab)
        keys = terms.chunk.astype(np.int64) * n_vocab + terms.term
        pos = {c: i for i, c in enumerate(retriever._ids)}
        idf = terms.idf
        # per term, new idf / old idf (terms new to the corpus: no unchanged chunk holds them)
        rho = np.where(self.old_idf > 0, idf / np.where(self.old_idf > 0, self.old_idf, 1), 1.0)
        length = max(1.0, terms.avg_len / self.avg_len)
        depth = retriever.row_depth(k)
        qids = list(rows)
        # every query's candidates (its row's unchanged chunks, then the new ones) and term ids
        cands: list[list[str]] = []
        at: list[np.ndarray] = []
        ids: list[np.ndarray] = []
        for qid, tokens in zip(qids, retriever.tokenizer([queries[q] for q in qids])):
            cands.append([c for c in rows[qid][0] if c not in self.stale] + self.fresh)
            at.append(np.fromiter((pos[c] for c in cands[-1]), np.int64, len(cands[-1])))
            ids.append(np.fromiter((terms.vocab[t] for t in tokens if t in terms.vocab), np.int64))
        scores = self._scores(retriever, at, ids, keys)
        out: dict[str, Row] = {}
        start = 0
        for qid, mine, where, own in zip(qids, cands, at, ids):
            row, floor = rows[qid]
            got = scores[start : start + len(mine)]
            start += len(mine)
            rise = length * max(1.0, float(rho[own].max()) if len(own) else 1.0)
            bound = floor * rise * (1 + (4 * len(own) + 16) * 2.0**-23) if floor > 0 else 0.0
            order = np.lexsort((where, -got))  # score, then position: as a search ranks
            above = order[((got > bound) & (got > 0))[order]]
            if floor > 0 and len(above) < k:
                continue  # the top may lie outside what the row knows: searched
            kept = above[:depth]
            rest = np.ones(len(mine), dtype=bool)
            rest[kept] = False
            new_floor = max(bound, 0.0, float(got[rest].max()) if rest.any() else 0.0)
            out[qid] = ({mine[i]: float(got[i]) for i in kept.tolist()}, new_floor)
        return out

    @staticmethod
    def _scores(
        retriever: BM25Retriever, at: Sequence[np.ndarray], ids: Sequence[np.ndarray], keys: Any
    ) -> np.ndarray:
        """Every query's candidates (chunk rows ``at``) scored for its terms (``ids``, in query
        order) exactly as a search scores them: all (candidate, term) pairs of all queries in one
        pass, each value in float32, then summed term by term in query order."""
        from bm25s import scoring

        terms = retriever._terms
        assert terms is not None and terms.idf is not None
        sizes = np.fromiter(map(len, at), np.int64, len(at))
        widths = np.fromiter(map(len, ids), np.int64, len(ids))
        n = int(sizes.sum())
        if not n or not widths.any():
            return np.zeros(n, dtype=np.float32)
        rows = np.concatenate(at)
        # pair p: candidate cand[p] (of query q) and the j-th term of q
        of_query = np.repeat(np.arange(len(at)), sizes)
        per_cand = widths[of_query]
        cand = np.repeat(np.arange(n), per_cand)
        first = np.concatenate([[0], np.cumsum(per_cand)[:-1]])
        j = np.arange(len(cand)) - np.repeat(first, per_cand)
        term_start = np.concatenate([[0], np.cumsum(widths)[:-1]])
        term = np.concatenate(ids)[np.repeat(term_start[of_query], per_cand) + j]
        row = rows[cand]
        want = row * len(terms.vocab) + term
        found = np.minimum(np.searchsorted(keys, want), len(keys) - 1)
        hit = keys[found] == want
        tf = np.where(hit, terms.count[found], 0).astype(np.float32)
        tfc = scoring._select_tfc_scorer("lucene")(
            tf_array=tf,
            l_d=terms.lengths[row],
            l_avg=terms.avg_len,
            k1=retriever.k1,
            b=retriever.b,
            delta=None,
        )
        vals = np.where(hit, (terms.idf[term] * tfc).astype(np.float32), 0)
        out = np.zeros(n, dtype=np.float32)
        order = np.argsort(j, kind="stable")
        bounds = np.concatenate([[0], np.cumsum(np.bincount(j))])
        for lo, hi in zip(bounds[:-1].tolist(), bounds[1:].tolist()):
            # term j of every query that has one: summed as bm25s sums, in float32, in order
            take = order[lo:hi]
            out[cand[take]] = out[cand[take]] + vals[take]
        return out


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
        self._terms: _TermCounts | None = None  # the counts the engine was built from
        self._loaded: Path | None = None  # the folder of the index load_index restored
        self._edit: _Edit | None = None  # what the last update changed (carry reads it)

    @property
    def chunk_ids(self) -> list[str]:
        return list(self._ids)

    def index(self, chunks: Sequence[Chunk]) -> None:
        t0 = time.perf_counter()
        self._ids = [c.chunk_id for c in chunks]
        self._terms, self._loaded, self._edit = None, None, None
        with _gc_paused():
            if self.backend == "bm25s":
                self._engine = _bm25s().BM25(k1=self.k1, b=self.b, method=self.method)
                terms = _TermCounts.of(self.tokenizer, [c.index_text for c in chunks])
                t1 = time.perf_counter()
                terms.index_into(self._engine)
                self._terms = terms
            else:
                from rank_bm25 import BM25Okapi

                tokens = self.tokenizer([c.index_text for c in chunks])
                t1 = time.perf_counter()
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
        if self._terms is not None:
            self._terms.save(directory)
            if self._edit is None:  # kept for a carry after an update only: as large as the matrix
                self._terms = None

    def load_index(self, directory: Path) -> None:
        """Restore what ``save_index`` wrote (no re-tokenising of the corpus)."""
        bm25s = _bm25s()

        self._ids = json.loads((directory / "ids.json").read_text())
        # memory-mapped: server workers share the matrix pages instead of each holding a copy
        self._engine = bm25s.BM25.load(str(directory / "bm25s"), mmap=True)
        self._terms, self._loaded, self._edit = None, directory, None
        self.stats = {"index_loaded": 1.0}

    # -- edits ------------------------------------------------------------------------------------
    def update(self, chunks: Sequence[Chunk], stale: Set[str]) -> bool:
        """The index of ``chunks`` from the loaded one: the unchanged chunks' term counts are
        kept, only the others are tokenised, and the score matrix is computed again from the
        counts (the mean length and idf move with any edit). The same matrix, bit for bit, as
        ``index(chunks)`` builds (``tests/pipeline/test_edits.py``)."""
        if self.backend != "bm25s" or self._loaded is None:
            return False
        old = self._terms or _TermCounts.load(self._loaded)
        if old is None or len(old.lengths) != len(self._ids):
            return False
        t0 = time.perf_counter()
        where = {c: i for i, c in enumerate(self._ids)}
        source = [-1 if c.chunk_id in stale else where.get(c.chunk_id, -1) for c in chunks]
        fresh = [c for c, i in zip(chunks, source) if i < 0]
        with _gc_paused():
            terms, was = old.spliced(self.tokenizer, source, [c.index_text for c in fresh])
            t1 = time.perf_counter()
            engine = _bm25s().BM25(k1=self.k1, b=self.b, method=self.method)
            terms.index_into(engine)
        before = _Edit.before(old, was, self.method)
        self._engine, self._terms, self._ids = engine, terms, [c.chunk_id for c in chunks]
        self._edit = before.after(terms, [c.chunk_id for c in fresh], stale)
        self._loaded = None
        t2 = time.perf_counter()
        self.stats = {
            "tokenize_seconds": t1 - t0,
            "index_seconds": t2 - t0,
            "updated_chunks": float(len(fresh)),
        }
        return True

    def row_depth(self, k: int) -> int:
        """Stored rows keep ``k`` plus a tenth (at least 10) more: ``carry`` needs a gap below
        the ``k``-th score that an edit's small shift in the scores does not close."""
        return k + max(10, k // 10) if self.method == "lucene" else k

    def carry(self, queries: Mapping[str, str], rows: Mapping[str, Row], k: int) -> dict[str, Row]:
        """The rows still exact after the last ``update`` (lucene scoring), rescored.

        An unchanged chunk's new score is at most ``R`` times its old one, where ``R`` is the
        larger of 1 and new / old mean length (the length term: ``tf / (tf + k1 (1 - b + b
        l / avgdl))`` grows by at most that factor) times the largest new / old idf of the
        query's terms (every idf is positive). So no chunk outside a row (old score at most its
        floor) now scores above ``R * floor`` (widened for float32 rounding). A row is carried
        when at least ``k`` of its unchanged chunks and the new chunks, scored exactly as a
        search scores them, lie above that bound: they are then the top of the new ranking, in
        its order (score, then position). A row that lost a chunk or whose top moved too close
        to the bound is left to be searched."""
        edit = self._edit
        if edit is None or self._terms is None or not rows:
            return {}
        return edit.carry(self, queries, rows, k)

    def retrieve(self, queries: Mapping[str, str], k: int) -> Run:
        return self._retrieve(queries, k, None)

    def retrieve_within(self, queries: Mapping[str, str], k: int, allowed: Set[str]) -> Run:
        """``retrieve`` over the chunks in ``allowed`` only (masked before the top-k cut)."""
        mask = np.fromiter((c in allowed for c in self._ids), bool, len(self._ids))
        return self._retrieve(queries, k, mask)

    def _retrieve(self, queries: Mapping[str, str], k: int, mask: np.ndarray | None) -> Run:
        qids = list(queries)
        if not qids:
            return {}
        tokens = self.tokenizer([queries[q] for q in qids])
        k = min(k, len(self._ids) if mask is None else int(mask.sum()))
        if k <= 0:
            return {q: {} for q in qids}
        if self.backend == "bm25s":
            idx, scores = _top_k(self._engine, tokens, k, mask)
        else:
            all_scores = (
                np.stack([self._engine.get_scores(t) for t in tokens])
                if tokens
                else np.zeros((0, 0))
            )
            if mask is not None:
                all_scores = np.where(mask, all_scores, -np.inf)
            idx = np.argsort(-all_scores, axis=1, kind="stable")[:, :k]
            scores = np.take_along_axis(all_scores, idx, axis=1)
        return topk_to_run(
            qids, self._ids, np.asarray(idx), np.asarray(scores), drop_nonpositive=True
        )
