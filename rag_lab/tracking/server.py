"""An MLflow tracking server on PostgreSQL, started from nothing and stopped cleanly
(``rag-lab tracking-server start|stop|status [--dir DIR] [--port N]``).

The default store, a sqlite file, serves one machine and jobs that take turns to write
(:func:`rag_lab.tracking.mlflow.store_lock`). This server is for many writers at once, jobs on
several machines, and a UI a team shares. Everything lives in one folder ``DIR`` (default
``experiments/tracking_server``):

- ``pgdata/``: a PostgreSQL cluster of its own, made by ``initdb`` on the first start (superuser
  ``mlflow``, a random password in ``DIR/password``, mode 0600, password authentication), started
  by ``pg_ctl`` on a free port of 127.0.0.1 only, without a Unix socket. PostgreSQL refuses to
  run as root: as root it runs as the ``postgres`` user (the Debian package creates it), otherwise
  as the current user. Its database ``mlflow`` holds the runs; MLflow creates the tables.
- ``artifacts/``: the server's ``--artifacts-destination``; clients upload through the server
  (``mlflow-artifacts:/`` locations), so they need no access to this folder.
- ``state.json`` (while running): the tracking URI, ports, process ids; ``mlflow.log``,
  ``postgres.log``.

``start`` is idempotent: a server already running from ``DIR`` is reported, not started twice;
one left half-started (a killed ``start``, a crashed process) is stopped, then started again.
``stop`` ends ``mlflow server`` (its whole process group: SIGTERM, SIGKILL after
:data:`STOP_TIMEOUT_S`) and PostgreSQL (``pg_ctl stop -m fast``), checks that neither is left and
removes ``state.json``. The data stays: the next ``start`` serves the same runs; delete ``DIR`` to
begin again. Errors a user can fix (PostgreSQL or psycopg2 missing, the port taken, a folder the
``postgres`` user cannot reach) are one-line :class:`~rag_lab.errors.ConfigError`.
"""

from __future__ import annotations

import errno
import fcntl
import importlib.util
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rag_lab.errors import ConfigError
from rag_lab.paths import experiments_dir

HOST = "127.0.0.1"  # both servers listen here only
DEBIAN_PG = Path("/usr/lib/postgresql")  # <version>/bin: Debian's and Ubuntu's server programs
DEFAULT_PORT = 5000  # MLflow's own default; conf/tracking/server.yaml points at it
DB_NAME = DB_USER = "mlflow"
DEFAULT_WORKERS = 2  # uvicorn workers of `mlflow server` (its default, 4, is a lot for 2 cores)
HEALTH_TIMEOUT_S = 180.0  # a first start creates MLflow's tables before the port opens
STOP_TIMEOUT_S = 20.0
STATUS_TIMEOUT_S = 20.0  # how long a running server may take to answer /health before it is stale
PG_TIMEOUT_S = 60  # pg_ctl start/stop -t
WORKER_HEALTHCHECK_S = 60  # uvicorn --timeout-worker-healthcheck (its default: 5 s)


def default_dir() -> Path:
    return experiments_dir() / "tracking_server"


@dataclass(frozen=True)
class Layout:
    """The files of one server folder."""

    root: Path

    @property
    def pgdata(self) -> Path:
        return self.root / "pgdata"

    @property
    def artifacts(self) -> Path:
        return self.root / "artifacts"

    @property
    def state(self) -> Path:
        return self.root / "state.json"

    @property
    def password(self) -> Path:
        return self.root / "password"

    @property
    def mlflow_log(self) -> Path:
        return self.root / "mlflow.log"

    @property
    def postgres_log(self) -> Path:
        return self.root / "postgres.log"


# ---------------------------------------------------------------- what must be on the machine


def postgres_bindir() -> Path:
    """The folder of ``initdb`` and ``pg_ctl``: the one on ``PATH``, else the newest
    ``/usr/lib/postgresql/<version>/bin`` (where Debian and Ubuntu keep them, off ``PATH``)."""
    candidates = []
    on_path = shutil.which("initdb")
    if on_path:
        candidates.append(Path(on_path).resolve().parent)
    debian = DEBIAN_PG.glob("*/bin")
    candidates += sorted(debian, key=lambda p: _version_key(p.parent.name), reverse=True)
    for folder in candidates:
        if (folder / "initdb").is_file() and (folder / "pg_ctl").is_file():
            return folder
    raise ConfigError(
        "PostgreSQL server programs (initdb, pg_ctl) not found: install the package `postgresql` "
        "(bash scripts/install_system_deps.sh, or apt-get install postgresql), or put its bin "
        "folder on PATH"
    )


def _version_key(name: str) -> tuple[int, ...]:
    return tuple(int(n) for n in re.findall(r"\d+", name)) or (0,)


def check_driver() -> None:
    """``mlflow server`` reaches PostgreSQL through psycopg2 (the ``server`` extra)."""
    if importlib.util.find_spec("psycopg2") is None:
        raise ConfigError(
            "the PostgreSQL driver psycopg2 is not installed: pip install 'rag_lab[server]'"
        )


def postgres_user() -> str | None:
    """Who runs PostgreSQL: ``None`` (the current user), or ``postgres`` when we are root
    (PostgreSQL refuses to run as root)."""
    if os.geteuid() != 0:
        return None
    import pwd

    try:
        pwd.getpwnam("postgres")
    except KeyError:
        raise ConfigError(
            "running as root, and PostgreSQL refuses root: there is no `postgres` user to run it "
            "as (the package `postgresql` creates one); install it or run as a normal user"
        ) from None
    return "postgres"


# ---------------------------------------------------------------- processes and ports


def _stat(pid: int) -> tuple[str, int, int] | None:
    """``(state, process group, start time in clock ticks)`` of a process; None when it is gone
    (a zombie counts as gone: it runs nothing, it only waits for its parent to read it)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2 :].split()
    if fields[0] in ("Z", "X"):
        return None
    return fields[0], int(fields[2]), int(fields[19])


def _has_proc() -> bool:
    return Path("/proc/self/stat").is_file()


def alive(pid: int) -> bool:
    """Whether process ``pid`` runs (and is not a zombie)."""
    if _has_proc():
        return _stat(pid) is not None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def group_members(pgid: int, since: int) -> list[int]:
    """The running processes of process group ``pgid`` started at or after ``since`` (clock
    ticks): the server's workers, and never a later group that happens to reuse the number."""
    if not _has_proc():
        try:
            os.killpg(pgid, 0)
        except OSError:
            return []
        return [pgid]
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            st = _stat(int(entry.name))
            if st is not None and st[1] == pgid and st[2] >= since:
                out.append(int(entry.name))
    return out


def start_ticks(pid: int) -> int:
    st = _stat(pid) if _has_proc() else None
    return st[2] if st else 0


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def check_port_free(port: int) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((HOST, port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise ConfigError(
                    f"port {port} on {HOST} is already in use: stop what listens there or "
                    "choose another with --port (0 = any free port)"
                ) from None
            raise ConfigError(f"cannot listen on {HOST}:{port}: {exc.strerror}") from None


def healthy(uri: str, timeout: float = 2.0) -> bool:
    try:
        with urllib.request.urlopen(f"{uri}/health", timeout=timeout) as resp:
            return bool(resp.status == 200)
    except (urllib.error.URLError, OSError, ValueError):
        return False


# ---------------------------------------------------------------- PostgreSQL


def _run_pg(cmd: list[str], user: str | None, timeout: float = 120) -> subprocess.CompletedProcess:
    """A PostgreSQL program as ``user`` (``None``: us), from ``/`` (root's working folder may be
    closed to that user); output captured for the error message."""
    try:
        return subprocess.run(
            cmd,
            user=user,
            cwd="/",
            capture_output=True,
            text=True,
            timeout=timeout,
            env={**os.environ, "LC_ALL": "C"},
        )
    except subprocess.TimeoutExpired:
        raise ConfigError(f"{Path(cmd[0]).name} did not finish in {timeout:.0f} s") from None


def _first_error(proc: subprocess.CompletedProcess) -> str:
    lines = [ln.strip() for ln in (proc.stderr + proc.stdout).splitlines() if ln.strip()]
    errors = [ln for ln in lines if "error" in ln.lower() or "fatal" in ln.lower()]
    return (errors or lines or [f"exit status {proc.returncode}"])[0]


def _own(path: Path, user: str | None) -> None:
    """Hand ``path`` to ``user`` (root only: the folder and files PostgreSQL writes)."""
    if user is not None:
        import pwd

        pw = pwd.getpwnam(user)
        os.chown(path, pw.pw_uid, pw.pw_gid)


def init_cluster(layout: Layout, bindir: Path, user: str | None) -> None:
    """``initdb`` into ``layout.pgdata`` once (``PG_VERSION`` marks a finished cluster)."""
    if (layout.pgdata / "PG_VERSION").is_file():
        return
    layout.pgdata.mkdir(mode=0o700, parents=True, exist_ok=True)
    if any(layout.pgdata.iterdir()):
        raise ConfigError(
            f"{layout.pgdata} holds files but no PostgreSQL cluster (an interrupted first start?): "
            "delete the folder and start again"
        )
    _own(layout.pgdata, user)
    if not layout.password.is_file():
        fd = os.open(layout.password, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(secrets.token_urlsafe(24) + "\n")
    _own(layout.password, user)
    if user is not None and _run_pg(["test", "-w", str(layout.pgdata)], user).returncode:
        raise ConfigError(
            f"the `{user}` user, which runs PostgreSQL for root, cannot write {layout.pgdata} "
            "(a parent folder is closed to other users): choose a --dir it can reach"
        )
    proc = _run_pg(
        [
            str(bindir / "initdb"),
            "-D",
            str(layout.pgdata),
            "-U",
            DB_USER,
            f"--pwfile={layout.password}",
            "--auth=scram-sha-256",
            "-E",
            "UTF8",
            "--no-locale",
        ],
        user,
    )
    if proc.returncode:
        raise ConfigError(f"initdb {layout.pgdata} failed: {_first_error(proc)}")


def postmaster_pid(layout: Layout) -> int | None:
    """The running postmaster of the cluster (its ``postmaster.pid``), None when it is down (a
    file a crash left, naming a process that is not PostgreSQL's, counts as down)."""
    try:
        pid = int((layout.pgdata / "postmaster.pid").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    if not alive(pid):
        return None
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return pid  # no /proc: trust the file, as pg_ctl does
    return pid if b"postgres" in command else None


def start_postgres(layout: Layout, bindir: Path, user: str | None, port: int) -> int:
    """Start the cluster on ``HOST:port`` (TCP only) and return the postmaster's pid."""
    layout.postgres_log.touch()
    _own(layout.postgres_log, user)
    options = f"-p {port} -c listen_addresses={HOST} -c unix_socket_directories="
    proc = _run_pg(
        [
            str(bindir / "pg_ctl"),
            "start",
            "-D",
            str(layout.pgdata),
            "-l",
            str(layout.postgres_log),
            "-w",
            "-t",
            str(PG_TIMEOUT_S),
            "-o",
            options,
        ],
        user,
        timeout=PG_TIMEOUT_S + 30,
    )
    pid = postmaster_pid(layout)
    if proc.returncode or pid is None:
        why = _last_line(layout.postgres_log) or _first_error(proc)
        raise ConfigError(f"PostgreSQL did not start ({why}; see {layout.postgres_log})")
    return pid


def stop_postgres(layout: Layout, bindir: Path | None, user: str | None) -> None:
    """``pg_ctl stop -m fast`` (``-m immediate`` when that fails), then make sure it is gone."""
    pid = postmaster_pid(layout)
    if pid is None:
        return
    if bindir is not None:
        for mode in ("fast", "immediate"):
            cmd = [str(bindir / "pg_ctl"), "stop", "-D", str(layout.pgdata), "-m", mode, "-w"]
            if _run_pg([*cmd, "-t", str(PG_TIMEOUT_S)], user, PG_TIMEOUT_S + 30).returncode == 0:
                break
    if alive(pid):  # no pg_ctl at hand, or it failed: the postmaster's own fast shutdown signal
        _signal_and_wait([pid], signal.SIGINT)
    if alive(pid):
        raise ConfigError(f"PostgreSQL (pid {pid}) did not stop; see {layout.postgres_log}")


def create_database(port: int, password: str) -> None:
    """The database ``mlflow``, once."""
    import psycopg2

    conn = psycopg2.connect(
        host=HOST,
        port=port,
        user=DB_USER,
        password=password,
        dbname="postgres",
        connect_timeout=10,
    )
    try:
        conn.autocommit = True  # CREATE DATABASE cannot run in a transaction
        with conn.cursor() as cur:
            cur.execute("SELECT 1 FROM pg_database WHERE datname = %s", (DB_NAME,))
            if cur.fetchone() is None:
                cur.execute(f"CREATE DATABASE {DB_NAME}")
    finally:
        conn.close()


# ---------------------------------------------------------------- MLflow


def start_mlflow(layout: Layout, port: int, backend_uri: str, workers: int) -> subprocess.Popen:
    """``mlflow server`` in a session of its own (``stop`` ends the whole group: uvicorn's
    workers too). The backend URI, which holds the password, goes by environment, not argv."""
    layout.artifacts.mkdir(parents=True, exist_ok=True)
    with open(layout.mlflow_log, "ab") as log:
        return subprocess.Popen(
            [
                *(sys.executable, "-m", "mlflow", "server"),
                *("--host", HOST, "--port", str(port)),
                *("--artifacts-destination", str(layout.artifacts.resolve())),
                *("--workers", str(workers)),
                # uvicorn restarts a worker that misses a 5 s health check: on a busy machine a
                # worker still importing MLflow does, and the start takes minutes
                *("--uvicorn-opts", f"--timeout-worker-healthcheck {WORKER_HEALTHCHECK_S}"),
            ],
            # no job execution: its eight helper processes run GenAI jobs (online scoring, judge
            # jobs), which rag_lab does not use
            env={
                **os.environ,
                "MLFLOW_BACKEND_STORE_URI": backend_uri,
                "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false",
            },
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=layout.root,
            start_new_session=True,
        )


def wait_healthy(proc: subprocess.Popen, uri: str, layout: Layout, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            why = _last_line(layout.mlflow_log) or f"exit status {proc.returncode}"
            raise ConfigError(f"mlflow server exited ({why}; see {layout.mlflow_log})")
        if healthy(uri):
            return
        time.sleep(0.5)
    raise ConfigError(f"mlflow server did not answer at {uri} in {timeout:.0f} s")


def _last_line(path: Path) -> str:
    try:
        lines = [ln.strip() for ln in path.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return ""
    return lines[-1] if lines else ""


def _signal_and_wait(pids: list[int], sig: int, timeout: float = STOP_TIMEOUT_S) -> bool:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not any(alive(p) for p in pids):
            return True
        time.sleep(0.2)
    return not any(alive(p) for p in pids)


def stop_group(pgid: int, since: int) -> None:
    """SIGTERM to every process of the server's group, SIGKILL to what is left after
    :data:`STOP_TIMEOUT_S`."""
    members = group_members(pgid, since)
    if members and not _signal_and_wait(members, signal.SIGTERM):
        _signal_and_wait(group_members(pgid, since), signal.SIGKILL, 5.0)
    left = group_members(pgid, since)
    if left:
        raise ConfigError(f"mlflow server processes {left} did not stop")


# ---------------------------------------------------------------- start / stop / status


@contextmanager
def _locked(layout: Layout) -> Iterator[None]:
    """One ``start`` or ``stop`` of a folder at a time."""
    try:
        layout.root.mkdir(parents=True, exist_ok=True)
        handle = open(layout.root / ".lock", "a")  # noqa: SIM115 (closed below)
    except OSError as exc:
        raise ConfigError(f"cannot write the server folder {layout.root}: {exc.strerror}") from None
    with handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def read_state(layout: Layout) -> dict[str, Any] | None:
    try:
        state = json.loads(layout.state.read_text())
    except (OSError, ValueError):
        return None
    return state if isinstance(state, dict) else None


def _write_state(layout: Layout, state: dict[str, Any]) -> None:
    tmp = layout.state.with_suffix(".tmp")
    tmp.write_text(json.dumps(state, indent=2) + "\n")
    tmp.replace(layout.state)


def status(directory: str | Path | None = None) -> dict[str, Any] | None:
    """The state of the server running from ``directory`` (``tracking_uri``, ports, pids), None
    when none runs there (or it no longer answers)."""
    layout = Layout(Path(directory or default_dir()).resolve())
    state = read_state(layout)
    if state is None or not state.get("mlflow_pid"):
        return None
    pid, since = int(state["mlflow_pid"]), int(state.get("mlflow_start_ticks", 0))
    if not group_members(pid, since) or postmaster_pid(layout) is None:
        return None
    # both processes run: a busy machine may answer slowly, and `start` stops what does not answer
    deadline = time.monotonic() + STATUS_TIMEOUT_S
    while not healthy(str(state["tracking_uri"]), timeout=5.0):
        if time.monotonic() > deadline or not alive(pid):
            return None
        time.sleep(1.0)
    return state


def start(
    directory: str | Path | None = None,
    port: int | None = None,
    workers: int = DEFAULT_WORKERS,
) -> dict[str, Any]:
    """Start PostgreSQL and ``mlflow server`` from ``directory`` (made from nothing the first
    time) and return the state, ``tracking_uri`` included. ``port``: MLflow's port on 127.0.0.1
    (``None``: :data:`DEFAULT_PORT`; 0: any free one); PostgreSQL gets a free one. A server
    already running there is returned as it is (``already_running: True``)."""
    if port is not None and not 0 <= port <= 65535:
        raise ConfigError(f"--port {port}: expected 0..65535")
    if workers < 1:
        raise ConfigError(f"--workers {workers}: expected 1 or more")
    layout = Layout(Path(directory or default_dir()).resolve())
    with _locked(layout):
        running = status(layout.root)
        if running is not None:
            if port not in (None, 0, running["port"]):
                raise ConfigError(
                    f"a server already runs from {layout.root} at {running['tracking_uri']}: "
                    "stop it first to change the port"
                )
            return {**running, "already_running": True}
        check_driver()
        bindir = postgres_bindir()
        user = postgres_user()
        _stop(layout)  # what a killed start or a crash left behind
        mlflow_port = DEFAULT_PORT if port is None else port
        if mlflow_port == 0:
            mlflow_port = free_port()
        check_port_free(mlflow_port)
        init_cluster(layout, bindir, user)
        password = layout.password.read_text().strip()
        pg_port = free_port()
        state: dict[str, Any] = {
            "tracking_uri": f"http://{HOST}:{mlflow_port}",
            "port": mlflow_port,
            "backend_store": f"postgresql+psycopg2://{DB_USER}@{HOST}:{pg_port}/{DB_NAME}",
            "artifacts": str(layout.artifacts),
            "postgres_port": pg_port,
            "postgres_user": user,
            "postgres_bindir": str(bindir),
        }
        try:
            state["postgres_pid"] = start_postgres(layout, bindir, user, pg_port)
            _write_state(layout, state)  # from here on `stop` knows what to stop
            create_database(pg_port, password)
            backend = f"postgresql+psycopg2://{DB_USER}:{password}@{HOST}:{pg_port}/{DB_NAME}"
            proc = start_mlflow(layout, mlflow_port, backend, workers)
            state["mlflow_pid"] = proc.pid
            state["mlflow_start_ticks"] = start_ticks(proc.pid)
            _write_state(layout, state)
            wait_healthy(proc, state["tracking_uri"], layout, HEALTH_TIMEOUT_S)
        except BaseException:
            _stop(layout)
            raise
        return {**state, "already_running": False}


def stop(directory: str | Path | None = None) -> bool:
    """Stop the server of ``directory``; True when something was running."""
    layout = Layout(Path(directory or default_dir()).resolve())
    if not layout.root.is_dir():
        return False
    with _locked(layout):
        return _stop(layout)


def _stop(layout: Layout) -> bool:
    state = read_state(layout) or {}
    was_running = False
    pid = state.get("mlflow_pid")
    if pid:
        since = int(state.get("mlflow_start_ticks", 0))
        was_running = bool(group_members(int(pid), since))
        stop_group(int(pid), since)
    if postmaster_pid(layout) is not None:
        was_running = True
        bindir = state.get("postgres_bindir")
        try:
            found: Path | None = Path(bindir) if bindir else postgres_bindir()
        except ConfigError:
            found = None
        user = state["postgres_user"] if "postgres_user" in state else postgres_user()
        stop_postgres(layout, found, user)
    layout.state.unlink(missing_ok=True)
    return was_running


__all__ = ["DEFAULT_PORT", "Layout", "default_dir", "start", "status", "stop"]
