"""Hashing embedder: signed feature hashing of terms and character n-grams. No model, no training.

A real, cheap baseline (and the embedder tests use): texts that share terms are close. It
knows nothing of synonyms or paraphrase, which is exactly what separates it from a trained model.

The vector of a text: every term the tokenizer returns and every character n-gram of
``<term>`` is a feature; a feature's CRC-32 ``h`` picks bucket ``h % dimension`` and sign
``-1`` when bit 31 of ``h`` is set; bucket counts ``c`` become ``sign(c) * log1p(|c|)``
(sublinear term frequency) and the row is L2-normalised. The arithmetic is vectorised: each
distinct term is hashed once (into its row of a term -> bucket table) and a batch is the
term-frequency counts of its texts times that table, summed in integers, so the vectors are
exactly those of a feature-by-feature loop (tested), at the cost of numpy calls.

The table holds the terms of the documents encoded (the corpus): a query's terms that the corpus
lacks are hashed into a table of that call alone, so a long-running server's memory does not grow
with the distinct terms its queries bring. Safe under concurrent calls: the shared table is
replaced, never changed in place, under a lock; a call reads one consistent version of it.
"""

from __future__ import annotations

import threading
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from rag_lab.tokenizer.base import Tokenizer
from rag_lab.validate import OptionError, integer

# texts encoded per numpy pass: bounds the (text, feature) arrays, not the result
_BATCH = 1024


@dataclass(frozen=True)
class _Table:
    """Terms → their (bucket, signed count) pairs: term ``i``'s are ``cols/vals[ptr[i]:ptr[i+1]]``
    (never modified: a grown table is a new one)."""

    term_id: Mapping[str, int]
    ptr: np.ndarray
    cols: np.ndarray
    vals: np.ndarray


_EMPTY = _Table({}, np.zeros(1, dtype=np.int64), np.zeros(0, np.int64), np.zeros(0, np.float64))


class HashingEmbedder:
    """Args:
    tokenizer: term analysis (the same choices as BM25).
    dimension: number of hash buckets.
    char_ngrams: ``(min, max)`` character n-gram sizes added per term (``(0, 0)`` = none);
        they give partial credit to inflections and to Chinese words jieba splits differently.
    """

    def __init__(
        self, tokenizer: Tokenizer, dimension: int = 1024, char_ngrams: Sequence[int] = (3, 4)
    ) -> None:
        self.tokenizer = tokenizer
        self.dimension = integer(dimension, "dimension", ge=1)
        pair = isinstance(char_ngrams, Sequence) and not isinstance(char_ngrams, str)
        if not pair or len(char_ngrams) != 2:
            raise OptionError("char_ngrams", char_ngrams, "must be [min, max]")
        lo = integer(char_ngrams[0], "char_ngrams[0]", ge=0)
        hi = integer(char_ngrams[1], "char_ngrams[1]", ge=lo)
        if lo == 0 and hi != 0:
            raise OptionError("char_ngrams", list(char_ngrams), "[0, 0] or 1 <= min <= max")
        self.char_ngrams = (lo, hi)
        # the documents' terms, grown as new documents are encoded (replaced under the lock)
        self._table = _EMPTY
        self._lock = threading.Lock()

    @property
    def identity(self) -> dict:
        return {
            "kind": "hashing",
            "dimension": self.dimension,
            "char_ngrams": list(self.char_ngrams),
            "tokenizer": type(self.tokenizer).__name__,
        }

    def _features(self, term: str) -> list[str]:
        """The term and the character n-grams of ``<term>``."""
        lo, hi = self.char_ngrams
        feats = [term]
        if lo > 0:
            padded = f"<{term}>"
            for n in range(lo, hi + 1):
                feats.extend(padded[i : i + n] for i in range(len(padded) - n + 1))
        return feats

    def _extended(self, table: _Table, terms: list[str]) -> _Table:
        """``table`` plus the rows of ``terms`` (each term's features hashed once)."""
        dim = self.dimension
        hashes: list[int] = []
        width: list[int] = []
        for term in terms:
            feats = self._features(term)
            hashes.extend(zlib.crc32(f.encode("utf-8")) for f in feats)
            width.append(len(feats))
        h = np.asarray(hashes, dtype=np.int64)
        owner = np.repeat(np.arange(len(terms), dtype=np.int64), width)
        # one (term, bucket) cell per distinct pair, its signs summed
        cells, where = np.unique(owner * dim + h % dim, return_inverse=True)
        signed = np.bincount(where, weights=np.where((h >> 31) & 1, -1.0, 1.0))
        per_term = np.bincount(cells // dim, minlength=len(terms))
        base = len(table.term_id)
        return _Table(
            {**table.term_id, **{t: base + i for i, t in enumerate(terms)}},
            np.concatenate([table.ptr, table.ptr[-1] + np.cumsum(per_term)]),
            np.concatenate([table.cols, cells % dim]),
            np.concatenate([table.vals, signed]),
        )

    def _counts(self, docs: list[list[str]], remember: bool) -> np.ndarray:
        """Signed bucket counts, ``(len(docs), dimension)``, exact integers in float32. Terms the
        table lacks join it when ``remember`` (documents); otherwise (queries) they are hashed
        into a table of this call only."""
        n, dim = len(docs), self.dimension
        flat = [t for terms in docs for t in terms]
        if not flat:
            return np.zeros((n, dim), dtype=np.float32)
        table = self._table
        new = [t for t in dict.fromkeys(flat) if t not in table.term_id]
        if not new:
            return _bucket_counts(table, docs, dim)
        if remember:
            with self._lock:  # another call may have grown it meanwhile
                table = self._table
                new = [t for t in new if t not in table.term_id]
                if new:
                    table = self._table = self._extended(table, new)
            return _bucket_counts(table, docs, dim)
        # a query's unseen terms: counted from a table of this call alone, added to the counts of
        # the known ones (integers: the sum is exact), so nothing is kept and nothing is copied
        unseen = set(new)
        known = [[t for t in terms if t not in unseen] for terms in docs]
        fresh = [[t for t in terms if t in unseen] for terms in docs]
        return _bucket_counts(table, known, dim) + _bucket_counts(
            self._extended(_EMPTY, new), fresh, dim
        )

    def _encode(self, texts: Sequence[str], remember: bool) -> np.ndarray:
        texts = list(texts)
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        for s in range(0, len(texts), _BATCH):
            out[s : s + _BATCH] = self._counts(self.tokenizer(texts[s : s + _BATCH]), remember)
        out = np.sign(out) * np.log1p(np.abs(out))  # sublinear term frequency
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.where(norms == 0, 1.0, norms)

    def encode_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self._encode(texts, remember=False)

    def encode_documents(self, texts: Sequence[str]) -> np.ndarray:
        return self._encode(texts, remember=True)


def _bucket_counts(table: _Table, docs: list[list[str]], dim: int) -> np.ndarray:
    """The term-frequency counts of ``docs`` times the table's rows of their terms (every term
    of ``docs`` is in the table)."""
    n, n_terms = len(docs), len(table.term_id)
    flat = [t for terms in docs for t in terms]
    if not flat:
        return np.zeros((n, dim), dtype=np.float32)
    ids = np.fromiter(map(table.term_id.__getitem__, flat), dtype=np.int64, count=len(flat))
    rows = np.repeat(np.arange(n, dtype=np.int64), [len(terms) for terms in docs])
    # each (text, term) pair once, with its frequency
    pairs, tf = np.unique(rows * n_terms + ids, return_counts=True)
    row, term = np.divmod(pairs, n_terms)
    # ... expanded to the term's buckets
    start, width = table.ptr[term], table.ptr[term + 1] - table.ptr[term]
    ends = np.cumsum(width)
    at = np.repeat(start - ends + width, width) + np.arange(int(ends[-1]))
    weights = table.vals[at] * np.repeat(tf, width)
    cells = np.repeat(row, width) * dim + table.cols[at]
    counts = np.bincount(cells, weights=weights, minlength=n * dim)
    return counts.reshape(n, dim).astype(np.float32)  # integers: exact in float32
