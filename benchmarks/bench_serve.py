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


def bench_server(
    name: str,
    cmd: list[str],
    port: int,
    ready: str,
    bodies: list[tuple[bytes, bytes]],
    levels: list[int],
    flood_n: int = 0,
) -> dict[str, Any]:
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        wait_ready(ready, proc)
        asyncio.run(load(port, bodies[:200], 4))  # warm: caches, the first request's imports
        rss_idle = tree_rss_mib(proc.pid)
        results = [asyncio.run(load(port, bodies, c)) for c in levels]
        out: dict[str, Any] = {"server": name, "rss_idle_mib": rss_idle, "load": results}
        if flood_n:
            before = tree_rss_mib(proc.pid)
            out["flood"] = asyncio.run(flood(port, flood_n, bodies[0]))
            out["flood"].update(rss_before_mib=before, rss_after_mib=tree_rss_mib(proc.pid))
        out["peak_rss_mib"] = tree_peak_mib(proc.pid)
        return out
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--requests", type=int, default=2000)
    ap.add_argument("--concurrency", type=int, nargs="+", default=[1, 20, 100])
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2])
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
        "date": time.strftime("%Y-%m-%d"),
        "requests": args.requests,
        "pipelines": {},
    }
    pipelines = {"bm25+hashing": ["embedder=hashing"]}
    if args.e5:
        pipelines["bm25+e5-onnx-int8"] = ["embedder.backend=onnx", "embedder.quantize=int8"]
    try:
        for label, overrides in pipelines.items():
            export = export_sample(work / label, overrides)
            rows = []
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
                rows.append(
                    bench_server(
                        f"rag-lab serve --workers {workers}",
                        cmd,
                        port,
                        f"http://127.0.0.1:{port}/readyz",
                        retrieve,
                        args.concurrency,
                        flood_n=args.flood if workers == args.workers[0] else 0,
                    )
                )
                print(json.dumps(rows[-1]), flush=True)
            if not args.no_mlflow and label == "bm25+hashing":
                store = f"sqlite:///{work / 'mlflow.db'}"
                subprocess.run(
                    [
                        RAG_LAB,
                        "register",
                        str(export),
                        "--tracking-uri",
                        store,
                        "--name",
                        "bench",
                    ],
                    check=True,
                    capture_output=True,
                )
                port = free_port()
                mlflow_bin = str(BIN / "mlflow")
                env_cmd = [
                    "env",
                    f"MLFLOW_TRACKING_URI={store}",
                    f"PATH={BIN}{os.pathsep}{os.environ.get('PATH', '')}",  # it execs uvicorn
                    mlflow_bin,
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
                rows.append(
                    bench_server(
                        "mlflow models serve",
                        env_cmd,
                        port,
                        f"http://127.0.0.1:{port}/ping",
                        invocations,
                        args.concurrency,
                    )
                )
                print(json.dumps(rows[-1]), flush=True)
                ours = next(r for r in rows if r["server"].startswith("rag-lab"))
                at = {r["concurrency"]: r["req_per_s"] for r in rows[-1]["load"]}
                report["ratio_vs_mlflow"] = {
                    str(c["concurrency"]): round(c["req_per_s"] / at[c["concurrency"]], 2)
                    for c in ours["load"]
                    if at.get(c["concurrency"])
                }
            report["pipelines"][label] = rows
    finally:
        shutil.rmtree(work, ignore_errors=True)
    report["bench_peak_rss_mib"] = peak_rss_mib()
    print(json.dumps(report.get("ratio_vs_mlflow", {})))
    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
