"""A local Ray cluster (a head and one worker node on 127.0.0.1, one CPU and a small object store
each) and an MLflow server with a sqlite backend, started in a folder and stopped at the end
(tests/distributed, benchmarks/bench_distributed.py)."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

BIN = Path(sys.executable).parent
ENV = {
    **os.environ,
    "HF_HUB_OFFLINE": "1",
    "PYTHONWARNINGS": "ignore",
    "RAY_USAGE_STATS_ENABLED": "0",
    # Ray 2.5x turns token authentication on for `ray start` once ~/.ray/auth_token exists (a
    # local `ray.init()` writes one), yet a driver that joins does not send it unless told:
    # every process of these 127.0.0.1 clusters says the same, explicitly
    "RAY_AUTH_MODE": "disabled",
}
ENV.pop("RAG_LAB_EXPERIMENTS", None)  # jobs must find the sweep's folder without it
ENV.pop("RAY_ADDRESS", None)
START_TIMEOUT_S = 90
OBJECT_STORE_BYTES = 80 * 1024 * 1024  # Ray's minimum is 75 MiB


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _start(args: list[str], cwd: Path, log: Path) -> subprocess.Popen:
    """A process in its own session, so stopping it stops everything it started."""
    with open(log, "ab") as out:
        return subprocess.Popen(
            args, cwd=cwd, env=ENV, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )


def _stop(proc: subprocess.Popen) -> None:
    """SIGKILL to the process' session group: everything it started, nothing else (a SIGTERM
    makes a Ray node drain for 30 s first; these clusters hold nothing worth draining)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        return
    proc.wait(timeout=30)


@dataclass
class RayCluster:
    address: str
    cwd: Path  # where `ray start` ran: Ray starts worker processes in this folder


@contextmanager
def local_ray_cluster(root: Path) -> Iterator[RayCluster]:
    """``ray start --head`` and one ``ray start --address=...`` worker node on 127.0.0.1 (every
    port chosen free, so two clusters on one machine do not collide), both ``--block`` in their
    own session; yields once both nodes are alive, with this process joined as a driver."""
    import ray

    cwd = root / "ray_cwd"
    cwd.mkdir(parents=True)
    # Ray's unix sockets live under the temp dir: keep its path short (108-byte limit)
    temp = Path(tempfile.mkdtemp(prefix="rl-ray-", dir="/tmp"))
    port = free_port()
    address = f"127.0.0.1:{port}"
    node = [
        "--block",
        "--node-ip-address=127.0.0.1",
        "--num-cpus=1",
        f"--object-store-memory={OBJECT_STORE_BYTES}",
        "--disable-usage-stats",
        f"--dashboard-agent-listen-port={free_port()}",
    ]
    head_args = [
        str(BIN / "ray"),
        "start",
        "--head",
        f"--port={port}",
        "--include-dashboard=false",
        f"--dashboard-port={free_port()}",
        f"--ray-client-server-port={free_port()}",
        f"--temp-dir={temp}",
        *node,
    ]
    procs = [_start(head_args, cwd, root / "ray_head.log")]
    auth_mode = os.environ.get("RAY_AUTH_MODE")
    os.environ["RAY_AUTH_MODE"] = ENV["RAY_AUTH_MODE"]  # this process joins as a driver
    try:
        _wait_port(port, procs[0], root / "ray_head.log")
        worker_args = [str(BIN / "ray"), "start", f"--address={address}", *node]
        procs.append(_start(worker_args, cwd, root / "ray_worker.log"))
        ray.init(address=address, log_to_driver=False)
        deadline = time.monotonic() + START_TIMEOUT_S
        while sum(n["Alive"] for n in ray.nodes()) < 2:
            if time.monotonic() > deadline or procs[1].poll() is not None:
                log = (root / "ray_worker.log").read_text(errors="replace")[-2000:]
                raise RuntimeError(f"the worker node did not join {address}:\n{log}")
            time.sleep(0.5)
        yield RayCluster(address, cwd)
    finally:
        ray.shutdown()
        for proc in reversed(procs):
            _stop(proc)
        shutil.rmtree(temp, ignore_errors=True)
        if auth_mode is None:
            os.environ.pop("RAY_AUTH_MODE", None)
        else:
            os.environ["RAY_AUTH_MODE"] = auth_mode


def _wait_port(port: int, proc: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        if time.monotonic() > deadline or proc.poll() is not None:
            raise RuntimeError(f"no Ray head on port {port}:\n{log.read_text()[-2000:]}")
        time.sleep(0.5)


@contextmanager
def mlflow_server(root: Path) -> Iterator[str]:
    """``mlflow server`` on 127.0.0.1 with a sqlite backend and an artifact folder under
    ``root``; yields its URI once ``/health`` answers."""
    port = free_port()
    args = [
        str(BIN / "mlflow"),
        "server",
        "--backend-store-uri",
        f"sqlite:///{root / 'mlflow.db'}",
        "--default-artifact-root",
        str(root / "mlartifacts"),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--workers",
        "1",
    ]
    proc = _start(args, root, root / "mlflow_server.log")
    uri = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            try:
                with urllib.request.urlopen(f"{uri}/health", timeout=2):
                    break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    log = (root / "mlflow_server.log").read_text(errors="replace")[-2000:]
                    raise RuntimeError(f"mlflow server did not start:\n{log}") from None
                time.sleep(0.5)
        yield uri
    finally:
        _stop(proc)
