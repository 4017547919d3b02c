"""``rag_lab.runtime.threads``: a sweep worker's share of the cores follows how many workers run."""

from __future__ import annotations

import json
import subprocess
import sys

SCRIPT = """
import json, multiprocessing as mp, os
import numpy  # an OpenBLAS pool threadpoolctl can limit
from threadpoolctl import threadpool_info
from rag_lab.runtime import threads

def pools():
    return sorted({p["num_threads"] for p in threadpool_info()})

out = {"outside": [os.environ.get("OMP_NUM_THREADS")]}
threads.rebalance()  # not a worker: nothing changes
out["outside"].append(os.environ.get("OMP_NUM_THREADS"))
running, lock = mp.RawValue("i", 2), mp.Lock()
threads.share(running, lock, 4)  # two workers on four CPUs
out["two running"] = [os.environ["OMP_NUM_THREADS"], pools()]
with threads.waiting():  # this one waits: the other may use every core
    out["while waiting"] = running.value
out["after waiting"] = [running.value, os.environ["OMP_NUM_THREADS"]]
running.value = 1  # the other worker finished (its threads.leave())
threads.rebalance()
out["alone"] = [os.environ["OMP_NUM_THREADS"], pools()]
threads.leave()
out["left"] = running.value
print(json.dumps(out))
"""


def test_a_worker_gets_cpus_over_running_workers_and_lends_its_share_while_waiting():
    env = {"PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "3"}
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["outside"] == ["3", "3"]
    assert out["two running"] == ["2", [2]]
    assert out["while waiting"] == 1
    assert out["after waiting"] == [2, "2"]
    assert out["alone"] == ["4", [4]]
    assert out["left"] == 0
