"""Where a corpus' embedding matrix lives while a dense index is built: in memory, or streamed to
a memory-mapped file one batch at a time (``store: memmap``), so the encode holds one batch of
vectors, not the corpus.

A stored matrix is ``(rows, dimension)`` in ``float32`` or ``float16`` (half the bytes; the
vectors are rounded to 11 significant bits, so inner products move by ~1e-3 at most for unit
vectors). Readers get it back as ``float32`` slices (``float32_slices``), which is what faiss
adds: an HNSW or IVF index is built slice by slice from the file, never from one in-memory copy.

A ``float32`` matrix is written as a faiss ``IndexFlatIP`` file (``vectors.faiss``: faiss'
45-byte header, then the rows), so an exact index over it needs no build and no copy: faiss
memory-maps the file and searches it where it lies (``flat_index_file``), and its pages are the
kernel's file cache, shared by every process that searches it. A ``float16`` matrix is a
``.npy`` file.
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from rag_lab.validate import choice

STORES = ("memory", "memmap")
DTYPES = ("float32", "float16")
FILE_NAMES = {"float32": "vectors.faiss", "float16": "vectors.npy"}
# rows converted to float32 and handed to faiss at a time: 64k x 1024 dims = 256 MiB
SLICE_ROWS = 65536
# faiss/impl/index_write.cpp, IndexFlatIP: fourcc, then d (int32), ntotal (int64), two unused
# int64 (1 << 20), is_trained (bool), the metric (int32, 0 = inner product) and the number of
# floats that follow (uint64), little-endian and unpadded
_FLAT_FOURCC = b"IxFI"
_FLAT_FIELDS = struct.Struct("<iqqq?iQ")
_FLAT_UNUSED = 1 << 20
FLAT_HEADER_BYTES = len(_FLAT_FOURCC) + _FLAT_FIELDS.size  # 45


def flat_header(rows: int, dimension: int) -> bytes:
    """The header faiss' ``write_index`` puts before the vectors of an ``IndexFlatIP`` holding
    ``rows`` vectors of ``dimension`` floats."""
    fields = (dimension, rows, _FLAT_UNUSED, _FLAT_UNUSED, True, 0, rows * dimension)
    return _FLAT_FOURCC + _FLAT_FIELDS.pack(*fields)


@functools.cache
def faiss_maps_flat_files() -> bool:
    """Whether this faiss memory-maps flat index files (``IO_FLAG_MMAP_IFC``, faiss >= 1.11) and
    writes them as ``flat_header`` says (checked on a two-row index, once per process)."""
    import faiss

    if not hasattr(faiss, "IO_FLAG_MMAP_IFC"):
        return False
    rows = np.arange(6, dtype=np.float32).reshape(2, 3)
    index = faiss.IndexFlatIP(3)
    index.add(rows)
    return bool(faiss.serialize_index(index).tobytes() == flat_header(2, 3) + rows.tobytes())


def store_dtype(name: str) -> np.dtype:
    """``float32`` | ``float16`` as a numpy dtype (``OptionError`` naming ``store_dtype``)."""
    return np.dtype(choice(name, "store_dtype", DTYPES))


class MemmapWriter:
    """A ``rows x dimension`` matrix written into ``directory`` (``FILE_NAMES[dtype]``) block by
    block, in row order; ``close`` flushes it. Reopen it read-only with ``open_matrix``."""

    def __init__(self, directory: Path, rows: int, dimension: int, dtype: str) -> None:
        self.path = directory / FILE_NAMES[store_dtype(dtype).name]
        self._arr: np.memmap
        # a new file, never the old one rewritten: a process may be searching it (flat_index_file)
        self.path.unlink(missing_ok=True)
        if dtype == "float32":
            with self.path.open("wb") as f:
                f.write(flat_header(rows, dimension))
                f.truncate(FLAT_HEADER_BYTES + rows * dimension * 4)
            self._arr = np.memmap(self.path, np.float32, "r+", FLAT_HEADER_BYTES, (rows, dimension))
        else:
            self._arr = np.lib.format.open_memmap(
                self.path, mode="w+", dtype=np.float16, shape=(rows, dimension)
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


def _open_flat(path: Path) -> np.ndarray:
    """The rows of a flat index file ``flat_header`` describes; ``ValueError`` when the header
    is not that or the file's size is not what the header says."""
    with path.open("rb") as f:
        head = f.read(FLAT_HEADER_BYTES)
    if len(head) < FLAT_HEADER_BYTES or not head.startswith(_FLAT_FOURCC):
        raise ValueError(f"{path}: not a faiss flat inner-product index file")
    d, n, *_ = _FLAT_FIELDS.unpack(head[len(_FLAT_FOURCC) :])
    if head != flat_header(n, d) or path.stat().st_size != FLAT_HEADER_BYTES + n * d * 4:
        raise ValueError(f"{path}: its header and size do not describe {n} x {d} float32")
    return np.memmap(path, np.float32, "r", FLAT_HEADER_BYTES, (n, d))


def open_matrix(directory: Path, rows: int, dimension: int, dtype: str) -> np.ndarray:
    """The matrix ``MemmapWriter`` wrote, memory-mapped read-only; ``ValueError`` when the file
    does not hold ``rows x dimension`` values of ``dtype`` (a truncated or foreign entry)."""
    path = directory / FILE_NAMES[store_dtype(dtype).name]
    if dtype == "float32":
        arr = _open_flat(path)
    else:
        arr = np.load(path, mmap_mode="r", allow_pickle=False)
    if arr.shape != (rows, dimension) or arr.dtype != store_dtype(dtype):
        raise ValueError(
            f"{path}: holds {arr.shape} {arr.dtype}, not ({rows}, {dimension}) {dtype}"
        )
    return arr


def flat_index_file(matrix: np.ndarray) -> Path | None:
    """The file of ``matrix`` when faiss can search it in place as an ``IndexFlatIP``
    (``faiss.read_index(path, faiss.IO_FLAG_MMAP_IFC)``): a whole ``float32`` matrix
    ``open_matrix`` opened, and a faiss that maps flat index files and writes their header as
    ``flat_header`` does. ``None`` otherwise: the index is then built from copies."""
    if not isinstance(matrix, np.memmap) or matrix.filename is None:
        return None
    path = Path(matrix.filename)
    if path.name != FILE_NAMES["float32"] or matrix.offset != FLAT_HEADER_BYTES:
        return None
    whole = matrix.dtype == np.float32 and matrix.ndim == 2 and matrix.flags.c_contiguous
    rows, dimension = matrix.shape
    if not whole or path.stat().st_size != FLAT_HEADER_BYTES + rows * dimension * 4:
        return None
    return path if faiss_maps_flat_files() else None


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
