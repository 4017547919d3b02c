"""The multirun launcher of ``rag-lab evaluate``: a sweep's jobs in forked worker processes on
this machine (``hydra/launcher=fork``, the default; the Hydra plugin class is
``hydra_plugins.rag_lab_launcher.fork_launcher.ForkLauncher``, a shell around :func:`launch`).

Why not Hydra's joblib launcher: its workers are fresh interpreters that import the whole stack
and unpickle every config (a warm 12-job SciFact grid took longer with two of them than with
none); forked workers start in milliseconds with the stack already imported (``preload``) and the
jobs' configs already composed (the sweeper composed each one to validate the batch).

- **Workers:** ``workers`` processes (``auto`` = as many as this process may use CPUs, at most one
  per job). ``workers: 1`` runs the jobs here, one after another, exactly as Hydra's basic
  launcher does (no fork).
- **Threads:** each worker's OpenMP / BLAS pools, torch and faiss get ``CPUs // running`` threads,
  ``running`` being the workers neither finished nor waiting for another's claim
  (``rag_lab.runtime.threads``): together they use the cores once, not ``workers`` times over, and a
  worker that computes a stage the others wait for gets every core.
- **Scheduling:** the jobs are split into one contiguous block per worker, in the sweep's order
  (Hydra varies the last override fastest, so neighbouring jobs share their parse, chunk and
  embedding stages in the stage cache); a worker that finishes its block takes the last job of
  the block with the most jobs left, whose upstream stages its owner has most likely cached.
- **Results:** each job's ``JobReturn`` comes back to this process in the sweep's order, as
  Hydra's sweepers (basic, Optuna) expect. A job that raised is ``FAILED`` with its exception (as a
  ``RuntimeError`` with the same text when the exception cannot cross a process boundary). A
  worker that dies (killed, out of memory) fails the job it was running, naming the worker's exit
  code; the jobs it had not started are run by the others. Finished jobs' folders are on disk
  whatever happens to the others.
- **State a fork must not share:** a worker resets SIGINT / SIGTERM unless the sweep ignores them
  (the sweep's MLflow parent guard belongs to this process). It drops MLflow's cached tracking
  stores and the open stage caches (their database connections were opened here).
- **The sweep process dies** (SIGTERM, SIGKILL): its workers get SIGTERM (Linux's parent-death
  signal), so none is left running or waiting.
- **Ctrl-C:** an interrupted job closes its runs as ``KILLED``, as in one process. The sweep
  process passes SIGINT on to the workers that did not get it from the terminal, waits for them
  (``STOP_GRACE_S``), then terminates the rest.
- **Shared stages:** parallel jobs that need the same stage-cache entry (documents, a chunk set,
  an index with its embeddings, a run) compute it once: the first takes the entry's claim
  (``StageCache.claim``, an ``flock``), the others wait for it and read what it wrote.
- **Callbacks:** ``on_job_start`` / ``on_job_end`` run in the worker, so state a callback keeps
  in memory stays there (rag_lab's sweep callback reads the job folders instead).
- **Platforms:** ``auto`` means one worker (no fork) off Linux: macOS forbids forking a process
  that has loaded its system frameworks, Windows has no fork (there every value means one).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import importlib
import logging
import os
import pickle
import signal
import sys
import time
from collections.abc import Sequence
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any, cast

from rag_lab import errors
from rag_lab.runtime import threads

PR_SET_PDEATHSIG = 1  # prctl(2): the signal a process gets when its parent dies
STOP_GRACE_S = 10.0  # an interrupted worker's time to close its runs before SIGTERM
# The sweep process waits on its workers' pipes at most this long at a time: the kernel may hand a
# Ctrl-C to another of its threads (MLflow's, a library's), and then nothing wakes the main
# thread's wait to run Python's handler; it runs at the next timeout instead.
POLL_S = 0.25
SAID_SLOTS = 64  # distinct error lines a sweep's workers print once each

# named as the plugin, not rag_lab.*: like Hydra's basic launcher's, its INFO lines (the jobs'
# overrides) reach the console only with verbose=true (rag_lab.report.console)
log = logging.getLogger("hydra_plugins.rag_lab_launcher")


def worker_count(workers: Any, n_jobs: int) -> int:
    """``workers`` (an int >= 1 or ``"auto"``) as a process count for ``n_jobs`` jobs."""
    if workers in (None, "auto"):
        n = threads.usable_cpus() if sys.platform.startswith("linux") else 1
    elif isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        from rag_lab.validate import OptionError

        raise OptionError("hydra.launcher.workers", workers, "give a whole number >= 1 or auto")
    else:
        n = workers
    import multiprocessing as mp

    if "fork" not in mp.get_all_start_methods():  # Windows: the jobs run here
        return 1
    return max(1, min(n, n_jobs))


def blocks(n_jobs: int, n_workers: int) -> list[tuple[int, int]]:
    """``[start, end)`` of each worker's contiguous block of job positions, sizes within one."""
    size, extra = divmod(n_jobs, n_workers)
    out, start = [], 0
    for w in range(n_workers):
        end = start + size + (w < extra)
        out.append((start, end))
        start = end
    return out


def take(w: int, bounds: Any) -> int | None:
    """The next job position for worker ``w`` (call with the bounds' lock held): the head of its
    own block, else the tail of the block with the most jobs left, else None. ``bounds`` holds
    ``head, end`` per worker."""
    head, end = bounds[2 * w], bounds[2 * w + 1]
    if head < end:
        bounds[2 * w] = head + 1
        return int(head)
    n = len(bounds) // 2
    v = max(range(n), key=lambda u: bounds[2 * u + 1] - bounds[2 * u])
    if bounds[2 * v + 1] <= bounds[2 * v]:
        return None
    bounds[2 * v + 1] -= 1
    return int(bounds[2 * v + 1])


def _interrupted(flags: Any, w: int, signum: int, frame: Any) -> None:
    """Worker ``w``'s SIGINT: ``KeyboardInterrupt`` (its job closes its runs as ``KILLED``), and
    a flag telling the sweep process not to pass on a Ctrl-C this worker already got."""
    flags[w] = 1
    raise KeyboardInterrupt


def _die_with(parent: int) -> None:
    """End this worker when the sweep process ends, however it ends (SIGKILL, or SIGTERM with
    the MLflow parent guard's re-raise, skip every ``finally``): Linux's parent-death signal,
    set before checking that the parent is still there."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            import ctypes

            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != parent:
        os._exit(1)


def _after_fork(w: int, shared: Any) -> None:
    """What a worker drops of its parent's state (see the module docstring)."""
    running, lock, flags = shared
    if signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:  # ignored by the sweep: here too
        signal.signal(signal.SIGINT, functools.partial(_interrupted, flags, w))
    if signal.getsignal(signal.SIGTERM) is not signal.SIG_IGN:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
    registry = getattr(
        sys.modules.get("mlflow.tracking._tracking_service.registry"), "TrackingStoreRegistry", None
    )
    cached = getattr(registry, "_get_store_with_resolved_uri", None)
    if cached is not None and hasattr(cached, "cache_clear"):
        cached.cache_clear()
    store = sys.modules.get("rag_lab.cache.store")
    if store is not None:
        store._OPEN.clear()  # their SQLite connections are the parent's: a job opens its own
    threads.share(running, lock, threads.usable_cpus())


def _said_before(said: Any, lock: Any, message: str) -> bool:
    """Whether a worker of this sweep already printed ``message`` (then this one prints nothing);
    records it otherwise. Distinct messages past ``SAID_SLOTS`` all print."""
    digest = hashlib.blake2b(message.encode(), digest_size=8).digest()
    key = int.from_bytes(digest, "little", signed=True) or 1  # 0 marks a free slot
    with lock:
        if key in said[:]:
            return True
        free = [i for i, k in enumerate(said) if k == 0]
        if free:
            said[free[0]] = key
        return False


def _portable(ret: Any) -> bytes:
    """``ret`` pickled, its exception replaced by a ``RuntimeError`` with the same text when it
    does not survive the round trip (an exception whose ``__init__`` wants other arguments)."""
    try:
        data = pickle.dumps(ret)
        pickle.loads(data)
        return data
    except Exception:
        exc = ret._return_value
        ret._return_value = RuntimeError(f"{type(exc).__name__}: {exc}")
        return pickle.dumps(ret)


def _worker(w: int, shared: Any, conn: Connection, job: Any) -> None:
    """Compose this worker's block of jobs, wait until every worker has (a bad override stops
    them all before any job runs), then run jobs until none is left or one exits (``SystemExit``:
    rag_lab's one-line user errors), which stops every worker from starting another."""
    bounds, lock, go, abort, running, running_lock, flags, parent, said = shared
    _die_with(parent)
    _after_fork(w, (running, running_lock, flags))
    errors.printed_elsewhere = functools.partial(_said_before, said, lock)
    try:
        try:
            for own in range(bounds[2 * w], bounds[2 * w + 1]):
                job.compose(own)
        except Exception as exc:
            conn.send(("error", _portable_error(exc)))
            return
        conn.send(("composed",))
        while not go.wait(1.0):  # every worker composed its share, or one could not
            if os.getppid() != parent:
                return
        while not abort.value:
            with lock:
                pos = take(w, bounds)
            if pos is None:
                break
            conn.send(("start", pos))
            threads.rebalance()
            try:
                ret = job.run(pos)
            except SystemExit as exc:
                abort.value = 1
                conn.send(("exit", pos, exc.code))
                return
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
            conn.send(("done", pos, _portable(ret)))
    except KeyboardInterrupt:  # Ctrl-C reaches every process of the group: the parent reports it
        raise SystemExit(130) from None
    finally:
        threads.leave()
        conn.close()


def _portable_error(exc: BaseException) -> bytes:
    """``exc`` pickled, or a ``ConfigCompositionException`` with its text when it does not
    survive the round trip."""
    try:
        data = pickle.dumps(exc)
        pickle.loads(data)
        return data
    except Exception:
        from hydra.errors import ConfigCompositionException

        return pickle.dumps(ConfigCompositionException(str(exc)))


def _failed(overrides: Sequence[str], task_name: str, why: str) -> Any:
    from hydra.core.utils import JobReturn, JobStatus

    return JobReturn(
        overrides=list(overrides),
        task_name=task_name,
        status=JobStatus.FAILED,
        _return_value=RuntimeError(why),
    )


def value_changes(
    repo: Any, base: Sequence[str], other: Sequence[str], sweeps: bool = False
) -> list[Any] | None:
    """The parsed overrides of ``other`` that differ from ``base``'s at the same position, when
    ``other``'s config is ``base``'s with only those applied: the same overrides in the same
    order but for plain config values (not a config group, no package, no ``++``/``~``, not a
    ``hydra.`` key, a scalar value) on keys no other override of the job touches. ``None``
    otherwise (``repo``: Hydra's config repository, which knows the groups).

    ``sweeps``: ``base`` is the multirun's own command line, whose config skipped its sweep
    overrides (``fusion.k=10,30,60``); a job's value for such a key is a change, and only
    ``key=value`` (a ``+key`` would be added after keys the composition adds after it)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.core.override_parser.types import OverrideType

    if len(base) != len(other):
        return None
    parser = OverridesParser.create()
    parsed = parser.parse_overrides(list(other))
    base_parsed = parser.parse_overrides(list(base))
    changed = [i for i, (a, b) in enumerate(zip(base, other, strict=True)) if a != b]
    keys = [o.key_or_group for o in parsed]
    out = []
    for i in changed:
        o, b = parsed[i], base_parsed[i]
        key = o.key_or_group
        scalar = (str, int, float, bool, type(None))
        swept = sweeps and b.is_sweep_override()
        if (
            o.type
            not in ((OverrideType.CHANGE,) if swept else (OverrideType.CHANGE, OverrideType.ADD))
            or b.type != o.type
            or b.key_or_group != key
            or o.package is not None
            or o.is_hydra_override()
            or o.is_sweep_override()
            or not isinstance(o.value(), scalar)
            or not (swept or isinstance(b.value(), scalar))
            or repo.group_exists(key)
        ):
            return None
        for j, other_key in enumerate(keys):  # an override before or after on the same node
            if j != i and (
                other_key == key
                or other_key.startswith(key + ".")
                or key.startswith(other_key + ".")
            ):
                return None
        out.append(o)
    return out


class _Jobs:
    """A batch's jobs, composed and run by position (in whichever process calls).

    A job whose overrides differ from the first composed job's only in plain config values
    (``fusion.k=10`` against ``fusion.k=60``: :func:`value_changes`) is not composed again:
    its config is that job's with those values applied, as Hydra applies command-line values
    after composing (``ConfigLoaderImpl._apply_overrides_to_config``), and its
    ``hydra.overrides.task`` and ``hydra.job.override_dirname`` rewritten (the same config as
    a composition gives: ``tests/sweep/test_launcher.py``). A job that changes a config group
    is composed in full."""

    def __init__(self, launcher: Any, job_overrides: Sequence[Sequence[str]], first: int) -> None:
        self.launcher, self.overrides, self.first = launcher, job_overrides, first
        self.configs: dict[int, Any] = {}
        self.template: tuple[int, Any] | None = None  # (position, its config as composed)

    def derivable(self) -> bool:
        """Whether every job's config derives from the first job's (:func:`value_changes`)."""
        repo = self.launcher.hydra_context.config_loader.repository
        base = self.overrides[0]
        return all(value_changes(repo, base, o) is not None for o in self.overrides[1:])

    def compose(self, pos: int) -> Any:
        import copy

        from omegaconf import open_dict

        if pos not in self.configs:
            cfg = self._derived(pos)
            if cfg is None:
                loader = self.launcher.hydra_context.config_loader
                cfg = loader.load_sweep_config(self.launcher.config, list(self.overrides[pos]))
                if self.template is None:  # kept as composed: the job's own copy is run
                    self.template = (pos, cfg)
                    cfg = copy.deepcopy(cfg)
            with open_dict(cfg):
                cfg.hydra.job.id = self.first + pos
                cfg.hydra.job.num = self.first + pos
            self.configs[pos] = cfg
        return self.configs[pos]

    def _derived(self, pos: int) -> Any:
        """Job ``pos``'s config from the template's (the class docstring), or ``None``."""
        import copy

        from hydra._internal.config_loader_impl import ConfigLoaderImpl, get_overrides_dirname
        from hydra.core.override_parser.overrides_parser import OverridesParser
        from hydra.core.override_parser.types import OverrideType
        from omegaconf import OmegaConf, open_dict

        loader = self.launcher.hydra_context.config_loader
        master = self.launcher.config
        # the multirun's own config first (composed already: value sweeps compose nothing more)
        base = master
        changes = value_changes(
            loader.repository, list(master.hydra.overrides.task), self.overrides[pos], True
        )
        if changes is None and self.template is not None:  # else the first job composed
            base_pos, base = self.template
            changes = value_changes(
                loader.repository, self.overrides[base_pos], self.overrides[pos]
            )
        if changes is None:
            return None
        cfg = copy.deepcopy(base)
        # +key=value added the key to the template: here it replaces its value (force-add, as
        # Hydra's ++ does), the same node a composition adds
        forced = [
            dataclasses.replace(o, type=OverrideType.FORCE_ADD) if o.type == OverrideType.ADD else o
            for o in changes
        ]
        ConfigLoaderImpl._apply_overrides_to_config(forced, cfg)
        hydra_lines = OmegaConf.to_container(master.hydra.overrides.hydra)
        assert isinstance(hydra_lines, list)
        parsed = OverridesParser.create().parse_overrides([*hydra_lines, *self.overrides[pos]])
        task = [o for o in parsed if not o.is_hydra_override()]
        dirname = cfg.hydra.job.config.override_dirname
        with open_dict(cfg.hydra):
            cfg.hydra.overrides.task = [o.input_line for o in task]
            cfg.hydra.job.override_dirname = get_overrides_dirname(
                overrides=task,
                kv_sep=dirname.kv_sep,
                item_sep=dirname.item_sep,
                exclude_keys=dirname.exclude_keys,
            )
        OmegaConf.copy_cache(from_config=master, to_config=cfg)
        return cfg

    def run(self, pos: int) -> Any:
        from hydra.core.utils import run_job

        return run_job(
            hydra_context=self.launcher.hydra_context,
            task_function=self.launcher.task_function,
            config=self.compose(pos),
            job_dir_key="hydra.sweep.dir",
            job_subdir_key="hydra.sweep.subdir",
        )


def run_forked(job: _Jobs, n_workers: int) -> list[Any]:
    """Every job of ``job`` in ``n_workers`` forked processes; the ``JobReturn`` of each, in
    order. Raises the first composition error before any job runs."""
    import multiprocessing as mp

    n = len(job.overrides)
    ctx = mp.get_context("fork")
    bounds = ctx.RawArray("q", [x for b in blocks(n, n_workers) for x in b])
    abort = ctx.RawValue("b", 0)
    go = ctx.Event()
    busy = ctx.RawValue("i", n_workers)  # workers neither done nor waiting on a claim
    interrupted = ctx.RawArray("b", n_workers)  # set by a worker that got SIGINT
    said = ctx.RawArray("q", SAID_SLOTS)  # hashes of the error lines the workers printed
    shared = (bounds, ctx.Lock(), go, abort, busy, ctx.Lock(), interrupted, os.getpid(), said)
    task_name = str(job.launcher.config.hydra.job.name)
    results: dict[int, Any] = {}
    running: dict[Connection, tuple[Any, int | None]] = {}
    error: bytes | None = None
    exit_code: Any = None
    waiting = n_workers  # workers still composing
    sys.stdout.flush()
    sys.stderr.flush()
    for w in range(n_workers):
        reader, writer = ctx.Pipe(duplex=False)
        proc = ctx.Process(target=_worker, args=(w, shared, writer, job), name=f"rag-lab-job-{w}")
        proc.start()
        writer.close()
        running[reader] = (proc, None)
    try:
        while running:
            for ready in wait(list(running), timeout=POLL_S):
                reader = cast(Connection, ready)
                proc, pos = running[reader]
                try:
                    msg = reader.recv()
                except EOFError:  # the worker is gone: finished, or died running `pos`
                    proc.join()
                    del running[reader]
                    if pos is not None:
                        why = (
                            f"worker process {proc.pid} exited with code {proc.exitcode} "
                            f"while running job #{job.first + pos}"
                        )
                        log.error("%s (%s)", why, " ".join(job.overrides[pos]))
                        results[pos] = _failed(job.overrides[pos], task_name, why)
                    continue
                if msg[0] == "start":
                    running[reader] = (proc, msg[1])
                elif msg[0] == "done":
                    results[msg[1]] = pickle.loads(msg[2])
                    running[reader] = (proc, None)
                elif msg[0] == "exit":  # the others finish the job they run, start no other
                    exit_code = msg[2] if exit_code is None else exit_code
                    running[reader] = (proc, None)
                else:  # "composed" or "error": every worker composes before any job runs
                    if msg[0] == "error" and error is None:
                        error = msg[1]
                    waiting -= 1
                    if waiting == 0:
                        abort.value = error is not None
                        go.set()
    finally:
        _stop([proc for proc, _ in running.values()], interrupted)
    if error is not None:
        raise pickle.loads(error)
    if exit_code is not None:
        raise SystemExit(exit_code)  # as the job's exit ends Hydra's basic launcher
    return [
        results.get(i) or _failed(job.overrides[i], task_name, "not run: every worker died")
        for i in range(n)
    ]


def _stop(procs: list[Any], interrupted: Any) -> None:
    """Stop the workers still running when the sweep process is interrupted (Ctrl-C, an error):
    SIGINT to those that did not get one themselves, so each ends its job as an interrupted run
    does (its MLflow child marked ``KILLED``); SIGINT again to any still alive after half of
    ``STOP_GRACE_S`` (Python drops an interrupt raised inside a finaliser); SIGTERM at the end."""

    def signal_alive(first: bool) -> None:
        for proc in procs:
            w = int(proc.name.rsplit("-", 1)[1])
            if proc.is_alive() and not (first and interrupted[w]):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(proc.pid, signal.SIGINT)

    def join(seconds: float) -> None:
        deadline = time.monotonic() + seconds
        for proc in procs:
            proc.join(max(0.0, deadline - time.monotonic()))

    signal_alive(first=True)
    join(STOP_GRACE_S / 2)
    signal_alive(first=False)
    join(STOP_GRACE_S / 2)
    for proc in procs:
        if proc.is_alive():
            proc.terminate()
            proc.join()


def launch(launcher: Any, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> list:
    """The launcher's ``launch`` (see the module docstring)."""
    from hydra.core.utils import configure_log, filter_overrides, setup_globals

    setup_globals()
    config = launcher.config
    configure_log(config.hydra.hydra_logging, config.hydra.verbose)
    Path(str(config.hydra.sweep.dir)).mkdir(parents=True, exist_ok=True)
    n_workers = worker_count(launcher.workers, len(job_overrides))
    log.info("Launching %d jobs locally in %d process(es)", len(job_overrides), n_workers)
    for i, overrides in enumerate(job_overrides):
        log.info("\t#%d : %s", initial_job_idx + i, " ".join(filter_overrides(overrides)))
    job = _Jobs(launcher, job_overrides, initial_job_idx)
    if n_workers == 1:  # Hydra's basic launcher, in this process
        runs = []
        for pos in range(len(job_overrides)):
            runs.append(job.run(pos))
            configure_log(config.hydra.hydra_logging, config.hydra.verbose)
        return runs
    for name in launcher.preload or ():
        importlib.import_module(name)  # once here, shared by every worker
    if job.derivable():  # one composition here; the workers derive their jobs' from it
        job.compose(0)
    runs = run_forked(job, n_workers)
    configure_log(config.hydra.hydra_logging, config.hydra.verbose)
    return runs
