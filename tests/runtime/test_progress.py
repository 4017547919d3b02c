"""Progress bars: the on/off decision (option > $RAG_LAB_PROGRESS > CI / terminal), and a real
``rag-lab evaluate`` drawing a bar on a pseudo-terminal but not into a pipe."""

from __future__ import annotations

import fcntl
import io
import os
import pty
import struct
import subprocess
import sys
import termios
from pathlib import Path

import pytest

from rag_lab.errors import ConfigError
from rag_lab.runtime import progress


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture(autouse=True)
def _auto():
    progress.configure("auto")
    yield
    progress.configure("auto")


@pytest.mark.parametrize(
    "env,tty,want",
    [
        ({}, True, True),  # a user at a terminal
        ({}, False, False),  # a pipe or a log file
        ({"CI": "true"}, True, False),  # CI, even with a terminal
        ({"CI": "1"}, True, False),
        ({"CI": "false"}, True, True),  # CI=false is not CI
        ({"CI": ""}, True, True),
        ({"RAG_LAB_PROGRESS": "0"}, True, False),  # the variable wins over the terminal
        ({"RAG_LAB_PROGRESS": "off"}, True, False),
        ({"RAG_LAB_PROGRESS": "1", "CI": "true"}, False, True),  # ... and over CI
        ({"RAG_LAB_PROGRESS": "auto", "CI": "true"}, True, False),
    ],
)
def test_auto_decision(env, tty, want):
    stream = Tty() if tty else io.StringIO()
    assert progress.enabled(stream, env) is want


def test_an_option_wins_over_the_environment():
    assert progress.enabled(Tty(), {}, setting=False) is False
    assert progress.enabled(io.StringIO(), {"CI": "true"}, setting="true") is True
    progress.configure(False)  # what progress=false on a Hydra command line sets
    assert progress.enabled(Tty(), {"RAG_LAB_PROGRESS": "1"}) is False
    progress.configure(True)
    assert progress.enabled(io.StringIO(), {"CI": "true"}) is True
    progress.configure("auto")
    assert progress.enabled(io.StringIO(), {}) is False


def test_a_closed_stream_means_off():
    stream = io.StringIO()
    stream.close()
    assert progress.enabled(stream, {}) is False


@pytest.mark.parametrize("bad", ["maybe", 2, "yes please"])
def test_a_bad_setting_is_a_config_error_naming_it(bad):
    with pytest.raises(ConfigError, match=r"progress=.*use auto, true or false"):
        progress.configure(bad)
    with pytest.raises(ConfigError, match=r"\$RAG_LAB_PROGRESS="):
        progress.enabled(Tty(), {"RAG_LAB_PROGRESS": str(bad)})


def test_bar_is_silent_when_off_and_counts_anyway(capsys):
    progress.configure(False)
    seen = list(progress.bar(range(5), desc="parse", unit="file"))
    assert seen == [0, 1, 2, 3, 4] and capsys.readouterr().err == ""


# -- real processes: a bar on a terminal, none in a pipe -----------------------------------------

_BAR_SCRIPT = (
    "import time\n"
    "from rag_lab import progress\n"
    "for _ in progress.bar(range(8), desc='encode', unit='batch'):\n"
    "    time.sleep(0.15)\n"
    "print('done')\n"
)


def _run(cmd: list[str], tty: bool) -> tuple[str, str]:
    """Run ``cmd`` (stdout piped) with stderr on a pseudo-terminal or a pipe; ``(out, err)``."""
    env = {k: v for k, v in os.environ.items() if k not in ("CI", progress.ENV)}
    env.update(HF_HUB_OFFLINE="1", PYTHONWARNINGS="ignore")
    if not tty:
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
        assert proc.returncode == 0, proc.stderr[-2000:]
        return proc.stdout, proc.stderr
    master, slave = pty.openpty()
    # a new pseudo-terminal is 0 columns wide (tqdm then draws nothing): give it a window size
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 120, 0, 0))
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=slave, env=env)
    os.close(slave)
    err = b""
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # the child closed the terminal
            break
        if not data:
            break
        err += data
    os.close(master)
    out = p.stdout.read().decode() if p.stdout else ""
    assert p.wait(timeout=300) == 0, err.decode(errors="replace")[-2000:]
    return out, err.decode(errors="replace")


def test_a_bar_draws_on_a_terminal_not_into_a_pipe():
    cmd = [sys.executable, "-c", _BAR_SCRIPT]
    out, err = _run(cmd, tty=True)
    assert out == "done\n" and "encode:" in err and "%|" in err and "batch" in err, err
    out, err = _run(cmd, tty=False)
    assert out == "done\n" and err == ""


def _evaluate(tmp_path: Path, name: str, tty: bool) -> str:
    """``rag-lab evaluate`` on the sample without a cache; its stderr."""
    cmd = [sys.executable, "-m", "rag_lab.cli", "evaluate", "retrievers=[bm25]", "tracking=none"]
    cmd += ["cache.dir=null", f"hydra.run.dir={tmp_path / name}"]
    return _run([*cmd, f"paths.experiments={tmp_path / 'exp'}"], tty)[1]


@pytest.mark.slow  # two uncached parses of the sample: ~30 s on 2 busy cores
def test_evaluate_on_a_terminal_shows_the_parse_bars_and_in_a_pipe_does_not(tmp_path):
    # the sample's files (a scanned PDF page among them) take seconds to parse, past the bar's
    # half-second delay
    err_tty = _evaluate(tmp_path, "tty", tty=True)
    assert "parse:" in err_tty and "%|" in err_tty, err_tty[-2000:]
    assert "read hx200-manual-v1.pdf:" in err_tty  # a PDF's pages (the scanned one OCR'd)
    err_pipe = _evaluate(tmp_path, "pipe", tty=False)
    assert "%|" not in err_pipe and "\r" not in err_pipe
    # a parse past the interval (a loaded machine) logs lines, never a bar
    assert all(" file (" in line for line in err_pipe.splitlines() if "parse: " in line)


# -- without a terminal: one log line per interval -----------------------------------------------


@pytest.mark.parametrize(
    "env,tty,want",
    [
        ({}, True, "bar"),
        ({}, False, "log"),  # a pipe, a log file, nohup
        ({"CI": "true"}, True, "log"),
        ({"RAG_LAB_PROGRESS": "0"}, False, "off"),  # forced off: silence, no lines either
        ({"RAG_LAB_PROGRESS": "1"}, False, "bar"),
    ],
)
def test_the_mode(env, tty, want):
    assert progress.mode(Tty() if tty else io.StringIO(), env) == want


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_log_lines_at_a_steady_interval_with_rate_and_eta():
    clock = Clock()
    shown = progress.LogProgress(total=200, desc="embed", unit="text", every=30, clock=clock)
    for _ in range(20):  # 10 texts every 5 s: 2 texts/s
        clock.now += 5
        shown.update(10)
    assert shown.lines == [
        "embed: 60/200 text (30%), 2 text/s, ETA 1 min 10 s",
        "embed: 120/200 text (60%), 2 text/s, ETA 40 s",
        "embed: 180/200 text (90%), 2 text/s, ETA 10 s",
    ]
    quick = progress.LogProgress(range(50), desc="parse", unit="file", every=30, clock=clock)
    assert list(quick) == list(range(50)) and quick.lines == []  # a step shorter than a line


def test_a_bad_interval_is_one_line():
    with pytest.raises(ConfigError, match=r"RAG_LAB_PROGRESS_INTERVAL='soon'"):
        progress.interval({"RAG_LAB_PROGRESS_INTERVAL": "soon"})
    assert progress.interval({}) == 30.0


_LOG_SCRIPT = (
    "import logging, time\n"
    "logging.basicConfig(level=logging.INFO, format='%(message)s')\n"
    "from rag_lab.runtime import progress\n"
    "for _ in progress.bar(range(8), desc='encode', unit='batch'):\n"
    "    time.sleep(0.15)\n"
    "print('done')\n"
)


def test_in_a_pipe_a_long_step_logs_lines_not_a_bar(monkeypatch):
    monkeypatch.setenv(progress.INTERVAL_ENV, "0.3")
    out, err = _run([sys.executable, "-c", _LOG_SCRIPT], tty=False)
    lines = [line for line in err.splitlines() if line.startswith("encode: ")]
    assert out == "done\n" and 2 <= len(lines) <= 5 and "\r" not in err, err
    assert all("/8 batch (" in line and "batch/s" in line for line in lines), lines


def test_the_embedder_logs_its_batches_and_encodes_the_same(monkeypatch, caplog):
    """A forward hook counts sentence-transformers' batches: the vectors are the ones the plain
    call gives (the call and its batches are untouched)."""
    from rag_lab.embedder import SentenceTransformerEmbedder

    texts = [f"hydraulic pump {i} pressure {'low ' * (i % 7)}" for i in range(40)]
    emb = SentenceTransformerEmbedder("sentence-transformers/all-MiniLM-L6-v2", batch_size=8)
    progress.configure(False)
    plain = emb.encode_documents(texts)
    progress.configure("auto")
    monkeypatch.setenv(progress.INTERVAL_ENV, "0.000001")
    with caplog.at_level("INFO", logger="rag_lab.progress"):
        logged = emb.encode_documents(texts)
    assert progress.mode() == "log"  # pytest's captured stderr is no terminal
    assert (logged == plain).all()
    lines = [r.getMessage() for r in caplog.records if r.name == "rag_lab.progress"]
    assert len(lines) == 5 and lines[-1].startswith("embed: 40/40 text (100%)"), lines
