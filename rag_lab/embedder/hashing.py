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
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence

import numpy as np

from rag_lab.tokenizer.base import Tokenizer
from rag_lab.validate import OptionError, integer

# texts encoded per numpy pass: bounds the (text, feature) arrays, not the result
_BATCH = 1024


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
        # the term -> bucket table, grown as new terms are seen: term i's (bucket, signed count)
        # pairs are _cols/_vals[_ptr[i]:_ptr[i + 1]]
        self._term_id: dict[str, int] = {}
        self._ptr = np.zeros(1, dtype=np.int64)
        self._cols = np.zeros(0, dtype=np.int64)
        self._vals = np.zeros(0, dtype=np.float64)

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

    def _add_terms(self, terms: list[str]) -> None:
        """Hash each new term's features once into its row of the bucket table."""
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
        for term in terms:
            self._term_id[term] = len(self._term_id)
        self._ptr = np.concatenate([self._ptr, self._ptr[-1] + np.cumsum(per_term)])
        self._cols = np.concatenate([self._cols, cells % dim])
        self._vals = np.concatenate([self._vals, signed])

    def _counts(self, docs: list[list[str]]) -> np.ndarray:
        """Signed bucket counts, ``(len(docs), dimension)``, exact integers in float32."""
        n, dim = len(docs), self.dimension
        flat = [t for terms in docs for t in terms]
        if not flat:
            return np.zeros((n, dim), dtype=np.float32)
        new = [t for t in dict.fromkeys(flat) if t not in self._term_id]
        if new:
            self._add_terms(new)
        ids = np.fromiter(map(self._term_id.__getitem__, flat), dtype=np.int64, count=len(flat))
        rows = np.repeat(np.arange(n, dtype=np.int64), [len(terms) for terms in docs])
        # each (text, term) pair once, with its frequency
        pairs, tf = np.unique(rows * len(self._term_id) + ids, return_counts=True)
        row, term = np.divmod(pairs, len(self._term_id))
        # ... expanded to the term's buckets
        start, width = self._ptr[term], self._ptr[term + 1] - self._ptr[term]
        ends = np.cumsum(width)
        at = np.repeat(start - ends + width, width) + np.arange(int(ends[-1]))
        weights = self._vals[at] * np.repeat(tf, width)
        cells = np.repeat(row, width) * dim + self._cols[at]
        counts = np.bincount(cells, weights=weights, minlength=n * dim)
        return counts.reshape(n, dim).astype(np.float32)  # integers: exact in float32

    def _encode(self, texts: Sequence[str]) -> np.ndarray:
        texts = list(texts)
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        for s in range(0, len(texts), _BATCH):
            out[s : s + _BATCH] = self._counts(self.tokenizer(texts[s : s + _BATCH]))
        out = np.sign(out) * np.log1p(np.abs(out))  # sublinear term frequency
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.where(norms == 0, 1.0, norms)

    def encode_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self._encode(texts)

    def encode_documents(self, texts: Sequence[str]) -> np.ndarray:
        return self._encode(texts)
