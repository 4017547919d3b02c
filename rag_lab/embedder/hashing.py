"""Hashing embedder: signed feature hashing of terms and character n-grams. No model, no training.

A real, cheap baseline (and the embedder tests use): texts that share terms are close. It
knows nothing of synonyms or paraphrase, which is exactly what separates it from a trained model.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence

import numpy as np

from rag_lab.tokenizer.base import Tokenizer
from rag_lab.validate import OptionError, integer


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
        self._cache: dict[str, int] = {}

    @property
    def identity(self) -> dict:
        return {
            "kind": "hashing",
            "dimension": self.dimension,
            "char_ngrams": list(self.char_ngrams),
            "tokenizer": type(self.tokenizer).__name__,
        }

    def _features(self, terms: list[str]) -> list[str]:
        lo, hi = self.char_ngrams
        feats = list(terms)
        if lo > 0:
            for t in terms:
                padded = f"<{t}>"
                for n in range(lo, hi + 1):
                    feats.extend(padded[i : i + n] for i in range(len(padded) - n + 1))
        return feats

    def _hash(self, feat: str) -> int:
        h = self._cache.get(feat)
        if h is None:
            h = self._cache[feat] = zlib.crc32(feat.encode("utf-8"))
        return h

    def _encode(self, texts: Sequence[str]) -> np.ndarray:
        rows, cols, vals = [], [], []
        for i, terms in enumerate(self.tokenizer(list(texts))):
            hs = np.fromiter((self._hash(f) for f in self._features(terms)), dtype=np.uint64)
            rows.append(np.full(len(hs), i))
            cols.append((hs % self.dimension).astype(np.int64))
            vals.append(np.where((hs >> np.uint64(31)) & np.uint64(1), -1.0, 1.0))
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        if rows:
            np.add.at(out, (np.concatenate(rows), np.concatenate(cols)), np.concatenate(vals))
        out = np.sign(out) * np.log1p(np.abs(out))  # sublinear term frequency
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.where(norms == 0, 1.0, norms)

    def encode_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self._encode(texts)

    def encode_documents(self, texts: Sequence[str]) -> np.ndarray:
        return self._encode(texts)
