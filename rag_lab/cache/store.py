"""Content-addressed on-disk cache of stage outputs: parsed documents, chunks, per-chunk
embeddings, retriever indexes, per-retriever runs (whole, and one row per query), cross-encoder
pair scores, and the answer stage's model calls (generated answers, judge verdicts). Keys come
from ``rag_lab.cache.keys``.

Entries are files (JSON, arrays, folders) or rows of SQLite tables (embeddings, pair scores,
per-query results: one row per chunk text, pair or query, so an edit or a new query recomputes
only what it touched). Counters
count entries, and rows for tables.

Writes go to a temporary file in the entry's folder and are renamed into place, so a killed run
leaves no partial entry and parallel jobs (Hydra's joblib launcher) can share the folder; two jobs
that compute the same entry write identical bytes, and the last rename wins. A temporary's name
carries its writer's host and pid (``.<entry>.<host>-<pid>.<random>.tmp``): opening the cache
removes those of dead writers on this host, and any older than ``STALE_AFTER_S``.

Faults: an entry that cannot be read back (truncated, garbage) is a miss, removed with a warning,
and recomputed. A write that fails (full disk, read-only or missing folder) is a ``CacheError``
naming the path (``on_error="fail"``, the default), or, with ``on_error="bypass"``, one warning
and the run goes on with the cache off.
"""

from __future__ import annotations

import contextlib
import errno
import gzip
import json
import logging
import os
import re
import shutil
import socket
import sqlite3
import tempfile
import time
import zlib
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import orjson

try:
    import fcntl
except ImportError:  # Windows: claims are no-ops
    fcntl = None  # type: ignore[assignment]

from rag_lab.cache import fingerprints
from rag_lab.errors import RagLabError
from rag_lab.runtime import threads

log = logging.getLogger(__name__)

T = TypeVar("T")

ON_ERROR = ("fail", "bypass")
# a temporary whose writer cannot be asked (another host, a name without a pid) is stale after
# this long: longer than any evaluate job writes one entry
STALE_AFTER_S = 6 * 3600
HOST = f"{zlib.crc32(socket.gethostname().encode()):08x}"
_TEMP = re.compile(r"^\.(?P<name>.+)\.(?P<host>[0-9a-f]{8})-(?P<pid>\d+)\.[a-z0-9_]+\.tmp$")
_SQLITE_SIDECARS = ("-journal", "-wal", "-shm")


class CacheError(RagLabError):
    """The cache folder cannot be written (the message names the path and the way out)."""


def _temp_prefix(name: str) -> str:
    return f".{name}.{HOST}-{os.getpid()}."


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's live process
        return True
    except OverflowError:
        return False
    return True


def is_stale_temp(path: Path, now: float | None = None) -> bool:
    """Whether ``path`` (a hidden file or folder in a shard folder) is a killed writer's leftover:
    its writer (host and pid in the name) is not alive on this host, or it is older than
    ``STALE_AFTER_S``."""
    m = _TEMP.match(path.name)
    if m and m["host"] == HOST:
        pid = int(m["pid"])
        if pid == os.getpid() or _pid_alive(pid):
            return False
        return True
    try:
        age = (time.time() if now is None else now) - path.lstat().st_mtime
    except OSError:
        return False
    return age > STALE_AFTER_S


def _size(path: Path) -> int:
    if path.is_dir() and not path.is_symlink():
        return sum(f.lstat().st_size for f in path.rglob("*") if f.is_file())
    return path.lstat().st_size


# the folder of notes: what each corpus was last built as (uncounted hints, not stage outputs)
NOTES = "notes"

# every namespace the cache holds; `rag-lab cache list|clear` and the counters read this
NAMESPACES = (
    "parsed_files",
    "documents",
    "chunks",
    "embeddings",
    "indexes",
    "runs",
    "query_runs",
    "rerank_scores",
    "generations",
    "judge",
    "adapters",  # a foreign component's per-query output (rag_lab/retrievers/_adapter.py)
)


def _plain_dumps(value: Any) -> bytes:
    """A ``plain`` entry's JSON through orjson; through ``json.dumps`` (as before) where orjson
    would not write what ``json.loads`` reads back: a NaN or infinity (orjson: ``null``), keys
    that are not strings, what it refuses."""
    try:
        data = orjson.dumps(value)
    except TypeError:
        data = b"null"
    return json.dumps(value, ensure_ascii=False).encode() if b"null" in data else data


def _plain_loads(data: bytes) -> Any:
    """A ``plain`` entry (``StageCache.put_json``), through orjson; one written before entries
    were plain (``json.dumps``: a NaN latency is ``NaN``) through ``json.loads``."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return json.loads(data)


def _file_id(path: Path) -> tuple[int, int, int] | None:
    """Size, mtime and inode: an entry rewritten (renamed into place) has another."""
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_size, st.st_mtime_ns, st.st_ino)


# decoded entries kept per process (StageCache.get_decoded): a SciFact chunk set of 64-token
# windows is ~25k records, decoded in ~0.4 s and held in ~40 MB
DECODED_ENTRIES = 4
# (cache root, namespace, key) of the claims this process holds (a claim is re-entrant)
_CLAIMED: set[tuple[str, str, str]] = set()
_DECODED: OrderedDict[tuple[str, str], tuple[tuple[int, int, int], Any]] = OrderedDict()


class StageCache:
    """Entries live at ``root/<namespace>/<key[:2]>/<key>.<ext>``; counters say what this process
    read and wrote (``stats()``), for the run's metrics."""

    def __init__(self, root: str | os.PathLike, on_error: str = "fail") -> None:
        if on_error not in ON_ERROR:
            raise ValueError(f"cache.on_error must be fail or bypass, got {on_error!r}")
        self.root = Path(root)
        self.on_error = on_error
        self.bypassed = False  # a write failed under on_error="bypass": the cache is off
        self.hits: Counter[str] = Counter()
        self.misses: Counter[str] = Counter()
        self.bytes_read: Counter[str] = Counter()
        self.bytes_written: Counter[str] = Counter()
        self._tables: dict[tuple[str, str], sqlite3.Connection] = {}

    def path(self, namespace: str, key: str, ext: str) -> Path:
        return self.root / namespace / key[:2] / f"{key}.{ext}"

    @contextlib.contextmanager
    def claim(self, namespace: str, key: str) -> Iterator[None]:
        """Compute entry ``key`` of ``namespace`` under an exclusive lock, so that parallel jobs
        (``hydra/launcher=fork``, joblib) that miss the same entry compute it once: the others
        wait here, then find it written. Use it around *re-reading* the entry and computing it
        on a miss. The lock is an ``flock`` on ``root/.claims/<namespace>/<key>``: the OS drops it
        when its holder dies, so a killed job blocks nobody. Re-entrant within a process; a
        no-op without ``flock`` (Windows) or when the lock file cannot be made (the jobs then
        may compute an entry twice, as before, and write identical bytes).

        Call it after a read that missed (and was counted a miss); read the entry again inside
        it: that read's hit or miss is counted instead."""
        held = (str(self.root), namespace, key)
        if not self.bypassed:  # the caller's read after the lock counts in place of its miss
            self.misses[namespace] -= 1
        if fcntl is None or self.bypassed or held in _CLAIMED:
            yield
            return
        fd = -1
        try:
            folder = self.root / ".claims" / namespace
            folder.mkdir(parents=True, exist_ok=True)
            fd = os.open(folder / key, os.O_CREAT | os.O_RDWR, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:  # another process computes the entry: wait, lending cores
                with threads.waiting():
                    fcntl.flock(fd, fcntl.LOCK_EX)
        except OSError as exc:
            log.debug("cache: no claim on %s/%s (%s)", namespace, key, exc)
            if fd >= 0:
                os.close(fd)
            yield
            return
        _CLAIMED.add(held)
        try:
            yield
        finally:
            _CLAIMED.discard(held)
            os.close(fd)  # releases the lock

    # -- faults ------------------------------------------------------------------------------
    def memo(
        self,
        namespace: str,
        key: str,
        compute: Callable[[], T],
        read: Callable[[], T | None] | None = None,
        write: Callable[[T], None] | None = None,
    ) -> T:
        """Entry ``key`` of ``namespace``: read back when present, else computed once and written.

        The one read / claim / re-read / compute / write sequence every cached stage follows:
        ``read()`` (default ``get_json``) returns the entry or ``None`` on a miss; on a miss the
        entry is claimed (``claim``: parallel jobs that miss it compute it once, the others wait
        and find it written), read again, and only then computed and stored with
        ``write(value)`` (default ``put_json``). A ``read`` that cannot use what it finds (an
        index that does not load) returns ``None`` and the entry is recomputed."""
        read = read or (lambda: self.get_json(namespace, key))
        write = write or (lambda value: self.put_json(namespace, key, value))
        found = read()
        if found is not None:
            return found
        with self.claim(namespace, key):
            found = read()
            if found is not None:
                return found
            value = compute()
            write(value)
            return value

    def failed(self, path: Path, exc: BaseException) -> None:
        """A write under ``path`` failed: ``CacheError`` (on_error=fail) or, with bypass, one
        warning and the cache is off for the rest of the run."""
        why = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
        if self.on_error == "fail":
            raise CacheError(
                f"cache.dir={self.root}: cannot write {path} ({why}); free space or fix the "
                "folder, or run on without the cache: cache.on_error=bypass (or cache.dir=null)"
            ) from None
        if not self.bypassed:
            log.warning(
                "cache: cannot write %s (%s); running on without the cache (cache.on_error=bypass)",
                path,
                why,
            )
        self.bypassed = True

    def corrupt(
        self, namespace: str, path: Path, exc: BaseException, *, was_hit: bool = False
    ) -> None:
        """An entry that does not read back: removed (it will be recomputed) and counted as a
        miss (``was_hit``: not the hit ``get_dir`` counted when it found the folder), with a
        warning naming it."""
        if was_hit:
            self.hits[namespace] -= 1
        why = f"{type(exc).__name__}: {exc}".splitlines()[0][:300] if str(exc) else type(exc)
        log.warning("cache: corrupt entry %s (%s): recomputing it", path, why)
        try:
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            else:
                path.unlink(missing_ok=True)
        except OSError:
            pass  # a read-only cache: the next write says so
        self.misses[namespace] += 1

    def unusable(self, namespace: str) -> None:
        """A read found an entry its reader cannot use (a format of an earlier release, a run with
        too few timed queries): counted as the miss it is, not a hit. The caller recomputes it
        and the write replaces it."""
        self.hits[namespace] -= 1
        self.misses[namespace] += 1

    def prepare(self) -> None:
        """Check that the folder can be written (``failed`` otherwise) and remove the stale
        temporaries of killed writers; ``open_cache`` calls it once per process and folder."""
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            fd, probe = tempfile.mkstemp(dir=self.root, prefix=_temp_prefix("probe"), suffix=".tmp")
            os.close(fd)
            os.unlink(probe)
        except OSError as exc:
            self.failed(self.root, exc)
            return
        removed = clean_stale(self.root)
        if removed:
            log.info("cache: removed %d stale temporary file(s) of killed jobs", removed)

    def _write(self, path: Path, writer: Callable[[Any], None]) -> bool:
        """Write ``path`` atomically; ``False`` when the cache is (or just went) off."""
        if self.bypassed:
            return False
        tmp = ""
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(
                dir=path.parent, prefix=_temp_prefix(path.name), suffix=".tmp"
            )
            with os.fdopen(fd, "wb") as fh:
                writer(fh)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, path)
        except OSError as exc:
            if tmp:
                Path(tmp).unlink(missing_ok=True)
            self.failed(path, exc)
            return False
        except BaseException:
            if tmp:
                Path(tmp).unlink(missing_ok=True)
            raise
        return True

    def _count(self, namespace: str, path: Path | None, write: bool = False) -> None:
        if path is None:
            self.misses[namespace] += 1
            return
        size = path.stat().st_size
        if write:
            self.bytes_written[namespace] += size
        else:
            self.hits[namespace] += 1
            self.bytes_read[namespace] += size

    # -- JSON (documents, chunks, runs): gzip-compressed ------------------------------------
    def get_json(self, namespace: str, key: str, plain: bool = False) -> Any | None:
        """The entry, or ``None`` (a miss). ``plain``: one ``put_json`` wrote ``plain``."""
        p = self.path(namespace, key, "json.gz")
        if self.bypassed:
            return None
        try:  # one decompress call: GzipFile's streaming reads cost ~1.5x (13 MB chunk set)
            data = gzip.decompress(p.read_bytes())
            value = _plain_loads(data) if plain else json.loads(data)
        except FileNotFoundError:
            self._count(namespace, None)
            return None
        except (OSError, EOFError, ValueError, zlib.error) as exc:
            self.corrupt(namespace, p, exc)
            return None
        self._count(namespace, p)
        return value

    def get_decoded(self, namespace: str, key: str, decode: Callable[[Any], Any]) -> Any | None:
        """``decode(get_json(namespace, key))``, kept in this process (the last
        ``DECODED_ENTRIES``) while the entry's file is the one it was decoded from (size, mtime,
        inode): a multirun's jobs that share a stage decode it once. Counted as ``get_json``
        counts it; ``decode`` must return a value nobody mutates (frozen records in a tuple), or
        ``None`` for an entry it cannot use (counted as a miss)."""
        p = self.path(namespace, key, "json.gz")
        memo_key = (str(p), f"{decode.__module__}.{decode.__qualname__}")
        if not self.bypassed and memo_key in _DECODED:
            seen = _file_id(p)
            if seen is not None and seen == _DECODED[memo_key][0]:
                self.hits[namespace] += 1
                self.bytes_read[namespace] += seen[0]
                _DECODED.move_to_end(memo_key)
                return _DECODED[memo_key][1]
            del _DECODED[memo_key]
        before = _file_id(p)
        raw = self.get_json(namespace, key)
        if raw is None:
            return None
        value = decode(raw)
        if value is None:  # an entry the decoder cannot use (an earlier format): a miss
            self.unusable(namespace)
            return None
        if before is not None and before == _file_id(p):  # not replaced while it was read
            _DECODED[memo_key] = (before, value)
        while len(_DECODED) > DECODED_ENTRIES:
            _DECODED.popitem(last=False)
        return value

    def put_json(self, namespace: str, key: str, value: Any, plain: bool = False) -> None:
        """Write the entry. ``plain``: ``value`` holds only strings, finite floats, integers of
        64 bits, lists and mappings with string keys (a run: query and chunk ids, scores,
        latencies): written through orjson and compressed faster (a 300-query run: ~0.1 s of an
        edit's retrieval -> ~0.04 s); ``get_json(..., plain=True)`` reads it."""
        p = self.path(namespace, key, "json.gz")
        data = _plain_dumps(value) if plain else json.dumps(value, ensure_ascii=False).encode()
        level = 1 if plain else 3
        if self._write(p, lambda fh: fh.write(gzip.compress(data, compresslevel=level, mtime=0))):
            self._count(namespace, p, write=True)

    # -- notes (what a corpus was last built as: rag_lab.pipeline.edits) -------------------------
    def get_note(self, key: str) -> Any | None:
        """A note (JSON) under ``root/notes/``: hints, not stage outputs, so not counted; an
        unreadable one is ``None``."""
        return self.get_note_at(NOTES, key)

    def get_note_at(self, namespace: str, key: str) -> Any | None:
        """A JSON entry read without counting it (part of reading another entry); ``None`` when
        it is absent or unreadable."""
        if self.bypassed:
            return None
        try:
            return json.loads(gzip.decompress(self.path(namespace, key, "json.gz").read_bytes()))
        except (OSError, EOFError, ValueError, zlib.error):
            return None

    def put_note(self, key: str, value: Any) -> None:
        data = json.dumps(value, ensure_ascii=False).encode()
        self._write(
            self.path(NOTES, key, "json.gz"),
            lambda fh: fh.write(gzip.compress(data, compresslevel=1, mtime=0)),
        )

    # -- arrays (embeddings) -----------------------------------------------------------------
    def get_array(self, namespace: str, key: str) -> np.ndarray | None:
        p = self.path(namespace, key, "npy")
        if self.bypassed:
            return None
        try:
            arr = np.load(p, allow_pickle=False)
        except FileNotFoundError:
            self._count(namespace, None)
            return None
        except (OSError, ValueError, EOFError) as exc:
            self.corrupt(namespace, p, exc)
            return None
        self._count(namespace, p)
        return arr

    def put_array(self, namespace: str, key: str, arr: np.ndarray) -> None:
        p = self.path(namespace, key, "npy")
        if self._write(p, lambda fh: np.save(fh, np.ascontiguousarray(arr), allow_pickle=False)):
            self._count(namespace, p, write=True)

    # -- folders (retriever indexes in their own formats) ----------------------------------
    def dir_path(self, namespace: str, key: str) -> Path:
        return self.root / namespace / key[:2] / key

    def get_dir(self, namespace: str, key: str) -> Path | None:
        """The entry's folder if it is complete (it only appears, by rename, once fully written).
        A caller that cannot load it calls ``corrupt(namespace, path, exc)``."""
        p = self.dir_path(namespace, key)
        if self.bypassed:
            return None
        if not p.is_dir():
            self._count(namespace, None)
            return None
        self.hits[namespace] += 1
        self.bytes_read[namespace] += _size(p)
        return p

    def put_dir(self, namespace: str, key: str, writer: Callable[[Path], None]) -> Path | None:
        """Let ``writer`` fill a temporary folder, then rename it into place (a concurrent job that
        got there first wins; both wrote the same content). ``None`` when the cache is off."""
        if self.bypassed:
            return None
        final = self.dir_path(namespace, key)
        tmp: Path | None = None
        try:
            final.parent.mkdir(parents=True, exist_ok=True)
            tmp = Path(tempfile.mkdtemp(dir=final.parent, prefix=_temp_prefix(key), suffix=".tmp"))
            writer(tmp)
            try:
                os.replace(tmp, final)
            except OSError as exc:
                if exc.errno not in (errno.ENOTEMPTY, errno.EEXIST) or not final.is_dir():
                    raise
                shutil.rmtree(tmp, ignore_errors=True)  # already there: keep the existing entry
        except OSError as exc:
            if tmp is not None:
                shutil.rmtree(tmp, ignore_errors=True)
            self.failed(final, exc)
            return None
        except BaseException:
            if tmp is not None:
                shutil.rmtree(tmp, ignore_errors=True)
            raise
        self.bytes_written[namespace] += _size(final)
        return final

    # -- tables (per-item values: embeddings, pair scores) ---------------------------------
    def _table(self, namespace: str, table: str) -> sqlite3.Connection | None:
        """The table's connection; ``None`` when the cache is off or the table cannot be opened
        (``failed``)."""
        if self.bypassed:
            return None
        if (namespace, table) not in self._tables:
            path = self.root / namespace / f"{table}.sqlite"
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                # parallel jobs wait for each other's writes
                db = sqlite3.connect(str(path), timeout=60)
                db.execute("CREATE TABLE IF NOT EXISTS kv (k TEXT PRIMARY KEY, v BLOB NOT NULL)")
                db.commit()
            except (OSError, sqlite3.Error) as exc:
                self.failed(path, exc)
                return None
            self._tables[(namespace, table)] = db
        return self._tables[(namespace, table)]

    def get_many(
        self, namespace: str, table: str, keys: Sequence[str], counted: bool = True
    ) -> dict[str, bytes]:
        """The rows of ``keys`` that ``table`` holds; each key found counts a hit, each absent a
        miss (``counted=False``: neither, a look into another stage's table for what an edit
        can carry over)."""
        db = self._table(namespace, table)
        out: dict[str, bytes] = {}
        unique = list(dict.fromkeys(keys))
        if db is None:
            return out
        try:
            for i in range(0, len(unique), 500):
                part = unique[i : i + 500]
                marks = ",".join("?" * len(part))
                rows = db.execute(f"SELECT k, v FROM kv WHERE k IN ({marks})", part)
                out.update(rows.fetchall())
        except sqlite3.DatabaseError as exc:  # a damaged table file: everything is a miss
            log.warning("cache: cannot read %s/%s.sqlite (%s): recomputing", namespace, table, exc)
            out = {}
        if counted:
            self.hits[namespace] += len(out)
            self.misses[namespace] += len(unique) - len(out)
        self.bytes_read[namespace] += sum(len(v) for v in out.values())
        return out

    def put_many(self, namespace: str, table: str, items: Mapping[str, bytes]) -> None:
        """Store rows in one transaction (a killed run keeps every batch committed before it)."""
        db = self._table(namespace, table)
        if db is None:
            return
        try:
            with db:
                db.executemany("INSERT OR REPLACE INTO kv VALUES (?, ?)", list(items.items()))
        except sqlite3.Error as exc:  # full disk, read-only file, damaged table
            self.failed(self.root / namespace / f"{table}.sqlite", exc)
            return
        self.bytes_written[namespace] += sum(len(v) for v in items.values())

    def view(self, namespace: str) -> CacheView:
        return CacheView(self, namespace)

    def stats(self) -> dict[str, float]:
        out: dict[str, float] = {
            "cache_hits": float(sum(self.hits.values())),
            "cache_misses": float(sum(self.misses.values())),
            "cache_bytes_read": float(sum(self.bytes_read.values())),
            "cache_bytes_written": float(sum(self.bytes_written.values())),
        }
        for ns in NAMESPACES:
            out[f"cache/{ns}/hits"] = float(self.hits[ns])
            out[f"cache/{ns}/misses"] = float(self.misses[ns])
        return out


class CacheView:
    """One namespace of a ``StageCache``: what the pipeline hands a stage (``CacheAware``), so a
    stage stores and reads its own entries without opening a cache or naming a namespace."""

    def __init__(self, cache: StageCache, namespace: str) -> None:
        if namespace not in NAMESPACES:
            raise ValueError(
                f"unknown cache namespace {namespace!r} (known: {', '.join(NAMESPACES)})"
            )
        self.cache, self.namespace = cache, namespace

    def get_json(self, key: str) -> Any | None:
        return self.cache.get_json(self.namespace, key)

    def put_json(self, key: str, value: Any) -> None:
        self.cache.put_json(self.namespace, key, value)

    def get_dir(self, key: str) -> Path | None:
        return self.cache.get_dir(self.namespace, key)

    def put_dir(self, key: str, writer: Callable[[Path], None]) -> Path | None:
        return self.cache.put_dir(self.namespace, key, writer)

    def get_many(self, table: str, keys: Sequence[str]) -> dict[str, bytes]:
        return self.cache.get_many(self.namespace, table, keys)

    def put_many(self, table: str, items: Mapping[str, bytes]) -> None:
        self.cache.put_many(self.namespace, table, items)

    def get_floats(self, table: str, keys: Sequence[str]) -> dict[str, float]:
        """Rows stored by ``put_floats`` (one float64 each)."""
        return {
            k: float(np.frombuffer(v, dtype=np.float64)[0])
            for k, v in self.get_many(table, keys).items()
        }

    def put_floats(self, table: str, items: Mapping[str, float]) -> None:
        self.put_many(table, {k: np.float64(v).tobytes() for k, v in items.items()})

    def get_vectors(self, table: str, keys: Sequence[str]) -> dict[str, np.ndarray]:
        """Rows stored by ``put_vectors`` (float32 vectors)."""
        return {
            k: np.frombuffer(v, dtype=np.float32) for k, v in self.get_many(table, keys).items()
        }

    def put_vectors(self, table: str, items: Mapping[str, np.ndarray]) -> None:
        self.put_many(
            table,
            {k: np.ascontiguousarray(v, dtype=np.float32).tobytes() for k, v in items.items()},
        )


_OPEN: dict[Path, StageCache] = {}


def open_cache(root: str | os.PathLike, on_error: str | None = None) -> StageCache:
    """The process-wide cache object for ``root``, so every stage's reads and writes add up in one
    set of counters (callers diff ``stats()`` before and after a run). The first open checks the
    folder can be written and removes stale temporaries (``StageCache.prepare``); input-file
    fingerprints are recorded in the folder from then on (``rag_lab.cache.fingerprints``);
    ``on_error`` (``fail`` | ``bypass``) sets the fault policy, ``None`` keeps the one it was
    opened with."""
    key = Path(root).resolve()
    cache = _OPEN.get(key)
    if cache is None:
        cache = StageCache(key, on_error or "fail")
        cache.prepare()  # raises CacheError (on_error=fail) before it is shared
        _OPEN[key] = cache
    if not cache.bypassed:  # input fingerprints recorded beside the stages they key
        fingerprints.attach(key / fingerprints.FILE_NAME)
    elif on_error is not None:
        cache.on_error = on_error
    return cache


def memo(
    cache: StageCache | None,
    namespace: str,
    key: str,
    compute: Callable[[], T],
    read: Callable[[], T | None] | None = None,
    write: Callable[[T], None] | None = None,
) -> T:
    """``cache.memo(...)``, or just ``compute()`` without a cache."""
    return compute() if cache is None else cache.memo(namespace, key, compute, read, write)


def diff_stats(after: dict[str, float], before: dict[str, float]) -> dict[str, float]:
    return {k: v - before.get(k, 0.0) for k, v in after.items()}


def clean_stale(root: str | os.PathLike, now: float | None = None) -> int:
    """Remove the stale temporaries (``is_stale_temp``) under ``root/<namespace>/<shard>/``;
    returns how many were removed."""
    removed = 0
    base = Path(root)
    for tmp in base.glob("*/*/.*"):
        if tmp.parent.name.startswith(".") or not is_stale_temp(tmp, now):
            continue
        try:
            if tmp.is_dir() and not tmp.is_symlink():
                shutil.rmtree(tmp)
            else:
                tmp.unlink()
            removed += 1
        except OSError:
            continue  # gone already (another job cleaned it) or not ours to remove
    return removed


def _entries(ns_dir: Path) -> tuple[list[Path], list[Path]]:
    """Complete entries and temporaries of one namespace folder. An entry is a file or folder in
    a shard folder (``<key[:2]>/``) or a table file at the top; a name starting with ``.`` is a
    temporary; SQLite's journal files belong to their table (bytes, not entries)."""
    entries: list[Path] = []
    temps: list[Path] = []
    for child in sorted(ns_dir.iterdir()):
        if child.name.startswith("."):
            temps.append(child)
        elif child.is_dir():
            for item in sorted(child.iterdir()):
                (temps if item.name.startswith(".") else entries).append(item)
        else:
            entries.append(child)
    return entries, temps


def inventory(root: str | os.PathLike) -> dict[str, dict[str, int]]:
    """``{namespace: {"entries": n, "bytes": b, "temporary": t, "temporary_bytes": tb}}`` of a
    cache folder: ``entries`` counts complete entries only (an index folder is one entry);
    temporaries are what killed or running writers left (``rag-lab cache list`` reports them)."""
    out: dict[str, dict[str, int]] = {}
    base = Path(root)
    if not base.is_dir():
        return out
    for ns_dir in sorted(p for p in base.iterdir() if p.is_dir() and not p.name.startswith(".")):
        entries, temps = _entries(ns_dir)
        counted = [p for p in entries if not p.name.endswith(_SQLITE_SIDECARS)]
        out[ns_dir.name] = {
            "entries": len(counted),
            "bytes": sum(_size(p) for p in entries),
            "temporary": len(temps),
            "temporary_bytes": sum(_size(p) for p in temps),
        }
    return out


def clear(root: str | os.PathLike, namespaces: Iterable[str] | None = None) -> int:
    """Delete the given namespaces (all when ``None``: the recorded fingerprints too),
    temporaries included; returns bytes freed."""
    base = Path(root)
    inv = inventory(base)
    chosen = list(inv) if namespaces is None else [n for n in namespaces if n in inv]
    freed = 0
    for cache in _OPEN.values():  # this process's open tables of them would outlive the files
        if cache.root == base.resolve():
            for ns, table in [t for t in cache._tables if t[0] in chosen]:
                cache._tables.pop((ns, table)).close()
    for ns in chosen:
        freed += inv[ns]["bytes"] + inv[ns]["temporary_bytes"]
        shutil.rmtree(base / ns)
    if namespaces is None:  # everything: the recorded input fingerprints too
        for p in base.glob(f"{fingerprints.FILE_NAME}*"):
            freed += p.stat().st_size
            p.unlink()
    return freed
