"""Where a corpus' embedding matrix lives while a dense index is built: in memory, or streamed to
a memory-mapped ``.npy`` file one batch at a time (``store: memmap``), so the encode holds one
batch of vectors, not the corpus.

A stored matrix is ``(rows, dimension)`` in ``float32`` or ``float16`` (half the bytes; the
vectors are rounded to 11 significant bits, so inner products move by ~1e-3 at most for unit
vectors). Readers get it back as ``float32`` slices (``float32_slices``), which is what faiss
adds: the index is built slice by slice from the file, never from one in-memory copy.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np

from rag_lab.validate import choice

STORES = ("memory", "memmap")
DTYPES = ("float32", "float16")
FILE_NAME = "vectors.npy"
# rows converted to float32 and handed to faiss at a time: 64k x 1024 dims = 256 MiB
SLICE_ROWS = 65536


def store_dtype(name: str) -> np.dtype:
    """``float32`` | ``float16`` as a numpy dtype (``OptionError`` naming ``store_dtype``)."""
    return np.dtype(choice(name, "store_dtype", DTYPES))


class MemmapWriter:
    """A ``rows x dimension`` matrix written into ``directory/vectors.npy`` block by block, in
    row order; ``close`` flushes it. Reopen it read-only with ``open_matrix``."""

    def __init__(self, directory: Path, rows: int, dimension: int, dtype: str) -> None:
        self.path = directory / FILE_NAME
        self._arr = np.lib.format.open_memmap(
            self.path, mode="w+", dtype=store_dtype(dtype), shape=(rows, dimension)
        )
        self.rows = 0

    def write(self, block: np.ndarray) -> None:
        """Append ``block`` (``(n, dimension)``, any float dtype) after the rows written so far."""
        end = self.rows + len(block)
        if end > self._arr.shape[0]:
            raise ValueError(f"{self.path}: {end} rows written into a matrix of {len(self._arr)}")
        self._arr[self.rows : end] = block
        self.rows = end

    def close(self) -> None:
        if self.rows != self._arr.shape[0]:
            raise ValueError(f"{self.path}: {self.rows} of {self._arr.shape[0]} rows written")
        self._arr.flush()
        del self._arr


def open_matrix(directory: Path, rows: int, dimension: int, dtype: str) -> np.ndarray:
    """The matrix ``MemmapWriter`` wrote, memory-mapped read-only; ``ValueError`` when the file
    does not hold ``rows x dimension`` values of ``dtype`` (a truncated or foreign entry)."""
    arr = np.load(directory / FILE_NAME, mmap_mode="r", allow_pickle=False)
    if arr.shape != (rows, dimension) or arr.dtype != store_dtype(dtype):
        raise ValueError(
            f"{directory / FILE_NAME}: holds {arr.shape} {arr.dtype}, "
            f"not ({rows}, {dimension}) {dtype}"
        )
    return arr


def float32_slices(matrix: np.ndarray, rows: int = SLICE_ROWS) -> Iterator[np.ndarray]:
    """``matrix`` in consecutive row slices, each a C-contiguous ``float32`` copy (a memmap is
    read from disk one slice at a time)."""
    for start in range(0, len(matrix), rows):
        yield np.ascontiguousarray(matrix[start : start + rows], dtype=np.float32)


def sample_rows(matrix: np.ndarray, size: int, seed: int = 0) -> np.ndarray:
    """``size`` rows of ``matrix`` chosen uniformly without replacement (seeded, in row order, as
    ``float32``): all rows, in order, when it has no more than ``size``."""
    if len(matrix) <= size:
        return np.ascontiguousarray(matrix, dtype=np.float32)
    idx = np.sort(np.random.default_rng(seed).choice(len(matrix), size, replace=False))
    return np.ascontiguousarray(matrix[idx], dtype=np.float32)
