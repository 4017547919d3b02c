"""Load on ``rag-lab serve`` against ``mlflow models serve`` of the same export, in one run.

    python benchmarks/bench_serve.py --out benchmarks/results/serve.json

Exports the shipped sample's hybrid pipeline (BM25 + hashing; ``--e5`` adds BM25 + multilingual
e5 through ONNX int8) from a fresh run, then for each server: ``--requests`` requests (the
sample's test queries in turn, ``k=5``) at each ``--concurrency`` over 127.0.0.1, each client
connection keeping its connection alive, and reports req/s, p50 / p95 / p99 latency, errors
(anything but 200) and the server's peak RSS (its processes' ``VmHWM``). Then a flood of
``--flood`` requests announcing 100 MB bodies against ``rag-lab serve`` (each must be a 413,
answered before the body is sent): RSS before, after, and the small requests' latency meanwhile.

The load generator is this script (asyncio, raw HTTP/1.1 on keep-alive connections), on the same
2 cores as the server: what it costs is the same for both servers.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent  # the interpreter's own rag-lab and mlflow, activated or not
RAG_LAB = str(BIN / "rag-lab")
sys.path.insert(0, str(ROOT))

from benchmarks.peak import peak_rss_mib  # noqa: E402


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def tree_peak_mib(pid: int) -> float:
    """Peak RSS (``VmHWM``) of ``pid`` and its children, summed, in MiB."""
    pids = [pid]
    try:
        out = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout
        pids += [int(p) for p in out.split()]
    except FileNotFoundError:
        pass
    total = 0
    for p in pids:
        try:
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    total += int(line.split()[1])
        except OSError:
            continue
    return round(total / 1024, 1)


def tree_rss_mib(pid: int) -> float:
    pids = [pid]
    out = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout
    pids += [int(p) for p in out.split()]
    total = 0
    for p in pids:
        try:
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except OSError:
            continue
    return round(total / 1024, 1)


async def _request(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, head: bytes, body: bytes
) -> int:
    writer.write(head + body)
    await writer.drain()
    status_line = await reader.readline()
    status = int(status_line.split()[1])
    length = 0
    while True:
        line = await reader.readline()
        if line in (b"\r\n", b""):
            break
        name, _, value = line.decode("latin-1").partition(":")
        if name.lower() == "content-length":
            length = int(value)
    if length:
        await reader.readexactly(length)
    return status


def _post(path: str, payload: Any) -> tuple[bytes, bytes]:
    body = json.dumps(payload, ensure_ascii=False).encode()
    head = (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode()
    return head, body


async def load(port: int, requests: list[tuple[bytes, bytes]], concurrency: int) -> dict[str, Any]:
    queue = list(enumerate(requests))
    latencies: list[float] = []
    errors = 0

    async def client() -> None:
        nonlocal errors
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            while queue:
                _, (head, body) = queue.pop()
                t0 = time.perf_counter()
                try:
                    status = await _request(reader, writer, head, body)
                except (ConnectionError, asyncio.IncompleteReadError, IndexError):
                    errors += 1
                    writer.close()
                    reader, writer = await asyncio.open_connection("127.0.0.1", port)
                    continue
                latencies.append(1000 * (time.perf_counter() - t0))
                errors += status != 200
        finally:
            writer.close()

    t0 = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(concurrency)))
    wall = time.perf_counter() - t0
    q = statistics.quantiles(latencies, n=100) if len(latencies) > 1 else [0.0] * 99
    return {
        "concurrency": concurrency,
        "requests": len(requests),
        "seconds": round(wall, 3),
        "req_per_s": round(len(requests) / wall, 1),
        "p50_ms": round(q[49], 2),
        "p95_ms": round(q[94], 2),
        "p99_ms": round(q[98], 2),
        "errors": errors,
    }


async def flood(port: int, n: int, probe: tuple[bytes, bytes]) -> dict[str, Any]:
    """``n`` requests announcing a 100 MB body (1 KB of it sent), while small requests run."""
    statuses: list[int] = []
    small: list[float] = []
    stop = False

    async def big() -> None:
        for _ in range(n):
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(
                b"POST /v1/retrieve HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                b"Content-Length: 104857600\r\n\r\n" + b"{" * 1024
            )
            await writer.drain()
            line = await reader.readline()
            statuses.append(int(line.split()[1]) if line else 0)
            writer.close()

    async def probes() -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        while not stop:
            t0 = time.perf_counter()
            await _request(reader, writer, *probe)
            small.append(1000 * (time.perf_counter() - t0))
        writer.close()

    task = asyncio.create_task(probes())
    await asyncio.gather(*(big() for _ in range(4)))
    stop = True
    await task
    return {
        "requests": len(statuses),
        "all_413": all(s == 413 for s in statuses),
        "small_p95_ms": round(statistics.quantiles(small, n=100)[94], 2) if len(small) > 1 else 0,
    }


def wait_ready(url: str, proc: subprocess.Popen, timeout: float = 300) -> None:
    import httpx

    deadline = time.monotonic() + timeout
    while True:
        try:
            if httpx.get(url, timeout=2).status_code < 500:
                return
        except httpx.HTTPError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"server did not start: {proc.communicate()}")
        time.sleep(0.3)


def quiet(cmd: list[str]) -> None:
    """Run ``cmd``; on failure stop with its last lines of output."""
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"{' '.join(cmd)}: exit {done.returncode}\n{done.stderr[-2000:]}")


def export_sample(workdir: Path, overrides: list[str]) -> Path:
    run = workdir / "run"
    quiet(
        [
            RAG_LAB,
            "evaluate",
            "retrievers=[bm25,dense]",
            *overrides,
            "tracking=none",
            f"hydra.run.dir={run}",
            f"paths.experiments={workdir / 'exp'}",
        ]
    )
    out = workdir / "export"
    quiet([RAG_LAB, "export", "--run", str(run), "--out", str(out)])
    return out


def queries() -> list[str]:
    from rag_lab.paths import SAMPLE_DIR

    path = SAMPLE_DIR / "maintenance_kb" / "queries.jsonl"
    return [json.loads(line)["text"] for line in path.read_text(encoding="utf-8").splitlines()]


class Server:
    """A server process under test, started once and loaded in turns with the others."""

    def __init__(self, name: str, cmd: list[str], port: int, ready: str, bodies: list) -> None:
        self.name, self.port, self.bodies = name, port, bodies
        self.proc = subprocess.Popen(
            cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
        )
        wait_ready(ready, self.proc)
        asyncio.run(load(port, bodies[:200], 4))  # warm: caches, the first request's imports
        self.rss_idle = tree_rss_mib(self.proc.pid)
        self.rounds: dict[int, list[dict[str, Any]]] = {}

    def measure(self, concurrency: int) -> dict[str, Any]:
        result = asyncio.run(load(self.port, self.bodies, concurrency))
        self.rounds.setdefault(concurrency, []).append(result)
        return result

    def summary(self) -> dict[str, Any]:
        """Per concurrency: the best round (most req/s) and the median req/s of all rounds."""
        load_rows = []
        for rows in self.rounds.values():
            best = max(rows, key=lambda r: r["req_per_s"])
            load_rows.append(
                {
                    **best,
                    "median_req_per_s": statistics.median(r["req_per_s"] for r in rows),
                    "rounds": len(rows),
                    "errors": sum(r["errors"] for r in rows),
                }
            )
        return {
            "server": self.name,
            "rss_idle_mib": self.rss_idle,
            "load": load_rows,
            "peak_rss_mib": tree_peak_mib(self.proc.pid),
        }

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def mlflow_server(export: Path, work: Path, bodies: list) -> Server:
    store = f"sqlite:///{work / 'mlflow.db'}"
    quiet([RAG_LAB, "register", str(export), "--tracking-uri", store, "--name", "bench"])
    port = free_port()
    cmd = [
        "env",
        f"MLFLOW_TRACKING_URI={store}",
        f"PATH={BIN}{os.pathsep}{os.environ.get('PATH', '')}",  # it execs uvicorn
        str(BIN / "mlflow"),
        "models",
        "serve",
        "-m",
        "models:/bench/1",
        "--env-manager",
        "local",
        "-p",
        str(port),
        "-h",
        "127.0.0.1",
    ]
    return Server("mlflow models serve", cmd, port, f"http://127.0.0.1:{port}/ping", bodies)


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--requests", type=int, default=2000)
    ap.add_argument("--concurrency", type=int, nargs="+", default=[1, 20, 100])
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--rounds", type=int, default=3, help="each server loaded in turn, R times")
    ap.add_argument("--flood", type=int, default=200, help="100 MB requests in the flood")
    ap.add_argument("--e5", action="store_true", help="also BM25 + e5 (ONNX int8)")
    ap.add_argument("--no-mlflow", action="store_true")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()

    texts = queries()
    retrieve = [
        _post("/v1/retrieve", {"query": texts[i % len(texts)], "k": 5})
        for i in range(args.requests)
    ]
    invocations = [
        _post("/invocations", {"dataframe_records": [{"query": texts[i % len(texts)], "k": 5}]})
        for i in range(args.requests)
    ]
    work = Path(tempfile.mkdtemp(prefix="bench_serve_"))
    report: dict[str, Any] = {
        "machine": platform.platform(),
        "cpus": os.cpu_count(),
        "load_avg_at_start": os.getloadavg(),
        "date": time.strftime("%Y-%m-%d"),
        "requests": args.requests,
        "rounds": args.rounds,
        "pipelines": {},
    }
    pipelines = {"bm25+hashing": ["embedder=hashing"]}
    if args.e5:
        pipelines["bm25+e5-onnx-int8"] = ["embedder.backend=onnx", "embedder.quantize=int8"]
    try:
        for label, overrides in pipelines.items():
            export = export_sample(work / label, overrides)
            servers: list[Server] = []
            try:
                for workers in args.workers:
                    port = free_port()
                    cmd = [
                        RAG_LAB,
                        "serve",
                        str(export),
                        "--port",
                        str(port),
                        "--workers",
                        str(workers),
                    ]
                    servers.append(
                        Server(
                            f"rag-lab serve --workers {workers}",
                            cmd,
                            port,
                            f"http://127.0.0.1:{port}/readyz",
                            retrieve,
                        )
                    )
                if not args.no_mlflow and label == "bm25+hashing":
                    servers.append(mlflow_server(export, work / label, invocations))
                # rounds: every server at every concurrency in turn, so a load spike from
                # elsewhere on the machine hits all of them alike; ratios are paired per round
                ratios: dict[int, list[float]] = {}
                for _ in range(args.rounds):
                    for c in args.concurrency:
                        got = {srv.name: srv.measure(c)["req_per_s"] for srv in servers}
                        if "mlflow models serve" in got:
                            ours = got[servers[0].name]
                            ratios.setdefault(c, []).append(ours / got["mlflow models serve"])
                first = servers[0]
                before = tree_rss_mib(first.proc.pid)
                flooded = asyncio.run(flood(first.port, args.flood, retrieve[0]))
                flooded.update(rss_before_mib=before, rss_after_mib=tree_rss_mib(first.proc.pid))
                rows = [srv.summary() for srv in servers]
                rows[0]["flood"] = flooded
                for row in rows:
                    print(json.dumps(row), flush=True)
                report["pipelines"][label] = rows
                if ratios:
                    report["ratio_vs_mlflow"] = {
                        str(c): round(statistics.median(r), 2) for c, r in ratios.items()
                    }
            finally:
                for srv in servers:
                    srv.stop()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    report["load_avg_at_end"] = os.getloadavg()
    report["bench_peak_rss_mib"] = peak_rss_mib()
    print(json.dumps(report.get("ratio_vs_mlflow", {})))
    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
