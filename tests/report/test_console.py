"""What evaluate prints: absent stages (NaN) left out, counts as integers, CJK aligned, one line
per multirun job, no library INFO lines on the console (unless verbose=true): the formatting
functions, then the console of real ``rag-lab evaluate`` runs on the sample."""

from __future__ import annotations

import json
import math
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from wcwidth import wcswidth

from rag_lab.report import console
from tests.cli.helpers import rag_lab


def test_nan_values_are_left_out_and_counts_are_integers():
    metrics = {
        "ndcg_at_10": 0.5,
        "embed_docs_per_second": math.nan,
        "cache_hits": 3.0,
        "n_queries": 66,
        "query_p50_ms": 1.25,
    }
    text = console.format_table(
        metrics,
        [
            "ndcg_at_10",
            "embed_docs_per_second",
            "cache_hits",
            "n_queries",
            "query_p50_ms",
            "absent",
        ],
    )
    assert "embed_docs_per_second" not in text and "nan" not in text and "absent" not in text
    assert "  cache_hits    3\n" in text + "\n" and "0.5000" in text and "1.2500" in text


def test_chinese_category_names_line_up():
    metrics = {
        "by_category/口语/ndcg_at_10": 0.25,
        "by_category/exact_code/ndcg_at_10": 0.9,
        "by_category/安全规程/hit_rate_at_5": math.nan,
        "by_category/安全规程/ndcg_at_10": 0.5,
    }
    lines = console.category_table(metrics).splitlines()
    assert len(lines) == 4
    assert len({wcswidth(line) for line in lines}) == 1  # every row as wide on screen as the header
    assert lines[-1].split()[1] == "-"  # a missing value is a dash, not nan


def test_counts_print_as_integers_whatever_their_type():
    metrics = {"misses_at_5/below_k": 22.0, "ingest/n_pages": 12.0, "ndcg_at_10": 1.0}
    text = console.format_table(metrics, list(metrics))
    assert text.split("\n")[0].split()[-1] == "22" and text.split("\n")[1].split()[-1] == "12"
    assert text.split("\n")[2].split()[-1] == "1.0000"  # a rate stays a rate, even at 1


def test_job_line_is_one_line_with_the_swept_values():
    metrics = {"ndcg_at_10": 0.5, "hit_rate_at_5": 0.75, "recall_at_100": math.nan}
    metrics["total_seconds"] = 2.04
    line = console.job_line("3", metrics, ["chunker.size=256"], "/x/3", first="mrr_at_10")
    assert line == "[3]  chunker.size=256  ndcg_at_10=0.5000 hit_rate_at_5=0.7500  2.0 s  /x/3"


def test_library_filter_keeps_warnings_and_own_info_lines():
    import logging

    quiet, loud = console.LibraryFilter(False), console.LibraryFilter(True)

    def rec(name: str, level: int) -> logging.LogRecord:
        return logging.LogRecord(name, level, __file__, 1, "m", None, None)

    assert quiet.filter(rec("rag_lab.pipeline", logging.INFO))
    assert quiet.filter(rec("sentence_transformers.base.model", logging.WARNING))
    assert not quiet.filter(rec("sentence_transformers.base.model", logging.INFO))
    assert not quiet.filter(rec("httpx", logging.INFO)) and not quiet.filter(rec("bm25s", 10))
    assert not quiet.filter(rec("rag_labx", logging.INFO))  # a prefix is not the package
    assert loud.filter(rec("httpx", logging.INFO))


# -- the console of a real `rag-lab evaluate` on the sample ------------------------------------

# two categories renamed to Chinese, so the table has names two cells wide per character
CJK = {"colloquial": "口语", "numeric": "数值参数"}
_LOG_LINE = re.compile(r"^\[[^\]]+\]\[([^\]]+)\]\[(\w+)\]")


def _cjk_sample(dst: Path) -> Path:
    from rag_lab.paths import SAMPLE_DIR

    # without its two PDFs (OCR costs seconds): their queries count as misses, which is fine here
    shutil.copytree(SAMPLE_DIR / "maintenance_kb", dst, ignore=shutil.ignore_patterns("*.pdf"))
    lines = []
    for line in (dst / "queries.jsonl").read_text(encoding="utf-8").splitlines():
        q = json.loads(line)
        cat = q.get("metadata", {}).get("category")
        if cat in CJK:
            q["metadata"]["category"] = CJK[cat]
        lines.append(json.dumps(q, ensure_ascii=False))
    (dst / "queries.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return dst


@pytest.fixture(scope="module")
def sample(tmp_path_factory) -> tuple[Path, Path]:
    """A CJK-category copy of the sample and an experiments folder the runs share (its cache:
    the corpus is parsed once)."""
    root = tmp_path_factory.mktemp("console")
    return _cjk_sample(root / "kb"), root / "exp"


def _evaluate(sample: tuple[Path, Path], run: str, *extra: str) -> subprocess.CompletedProcess:
    data, exp = sample
    return rag_lab(
        "evaluate",
        *[a for a in extra if a == "-m"],  # Hydra wants its flags before the overrides
        f"dataset.path={data}",
        f"paths.experiments={exp}",
        f"hydra.run.dir={exp / run}",
        f"hydra.sweep.dir={exp / run}",
        *[a for a in extra if a != "-m"],
    )


def _library_info(stderr: str) -> list[str]:
    """Console log lines at INFO or DEBUG from a logger outside rag_lab, and MLflow's own."""
    out = []
    for line in stderr.splitlines():
        m = _LOG_LINE.match(line)
        if m and m.group(2) in ("INFO", "DEBUG") and not m.group(1).startswith("rag_lab"):
            out.append(line)
        elif re.match(r"^\d{4}/\d\d/\d\d \d\d:\d\d:\d\d (INFO|DEBUG) ", line):
            out.append(line)  # MLflow's handler ("... INFO mlflow.store.db.utils: ...")
    return out


def _value_column(table: list[str]) -> set[int]:
    """The display column where each ``  key  value`` row's value starts."""
    return {wcswidth(ln.rstrip().rsplit(" ", 1)[0]) + 1 for ln in table}


def test_evaluate_console_hybrid(sample):
    proc = _evaluate(
        sample, "hybrid", "retrievers=[dense,bm25]", "embedder=hashing", "tracking=none"
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout
    head, _, rest = out.partition("\n\n  category")
    rows = [ln for ln in head.splitlines() if ln.startswith(("  ", "* "))]
    assert len(rows) > 20 and len(_value_column(rows)) == 1  # every value in one column
    values = {ln[2:].split()[0]: ln.split()[-1] for ln in rows}
    # the headline metrics first, marked (issue 31: 38 lines, the headline ones unmarked)
    marked = [ln[2:].split()[0] for ln in rows if ln.startswith("* ")]
    assert marked == [ln[2:].split()[0] for ln in rows[: len(marked)]]
    assert marked[:3] == ["ndcg_at_10", "hit_rate_at_5", "noise_ratio_at_5"]
    assert "(* = headline)" in head
    for key in ("n_queries", "n_unanswerable", "cache_hits", "cache_misses"):
        assert re.fullmatch(r"\d+", values[key]), (key, values[key])
    assert all(re.fullmatch(r"\d+", v) for k, v in values.items() if "misses_at_" in k)
    assert re.fullmatch(r"\d+\.\d{4}", values["ndcg_at_10"])
    assert "embed_docs_per_second" in values  # the dense stage ran
    cats = ("  category" + rest).split("\n\n")[0].splitlines()
    assert any("口语" in ln for ln in cats) and any("数值参数" in ln for ln in cats)
    assert len({wcswidth(ln) for ln in cats}) == 1, cats  # CJK rows as wide as the header
    assert not re.search(r"\bnan\b", out, re.IGNORECASE)
    # library INFO lines (faiss' CPU probing) are not on the console but are in the run's log
    # file (the filter, not their absence)
    assert _library_info(proc.stderr) == [], _library_info(proc.stderr)
    assert "[faiss.loader][INFO]" in (sample[1] / "hybrid" / "evaluate.log").read_text()
    assert "%|" not in proc.stderr  # stderr is a pipe: no progress bars


def test_evaluate_console_bm25_only_with_mlflow(sample):
    proc = _evaluate(sample, "bm25", "retrievers=[bm25]")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert not re.search(r"\bnan\b", proc.stdout, re.IGNORECASE)
    assert "embed_docs_per_second" not in proc.stdout  # no encoder: the line is left out
    assert "mlflow run:" in proc.stdout
    # MLflow's own handler (its new sqlite store: "Creating initial MLflow database tables")
    assert _library_info(proc.stderr) == [], _library_info(proc.stderr)
    assert "MLflow database tables" not in proc.stderr and "View run" not in proc.stderr


def test_verbose_puts_library_info_lines_on_the_console(sample):
    # no cache: faiss is loaded again, and says so at INFO
    dense = ["retrievers=[dense]", "embedder=hashing", "cache.dir=null", "tracking=none"]
    proc = _evaluate(sample, "verbose", *dense, "verbose=true")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert any("[faiss.loader][INFO]" in ln for ln in _library_info(proc.stderr))


SWEEP = ["-m", "retrievers=[bm25]", "retrievers.bm25.k1=1.2,1.5", "dataset.split=dev"]
SWEEP += ["tracking=none", "sweep.report_winner=false"]


def test_multirun_prints_one_line_per_job(sample):
    proc = _evaluate(sample, "sweep", *SWEEP)
    assert proc.returncode == 0, proc.stderr[-3000:]
    jobs = [ln for ln in proc.stdout.splitlines() if ln.startswith("[")]
    # parallel jobs (hydra/launcher=fork) print as they finish, each line led by its number
    assert sorted(ln.split()[:2] for ln in jobs) == [
        ["[0]", "retrievers.bm25.k1=1.2"],
        ["[1]", "retrievers.bm25.k1=1.5"],
    ], proc.stdout
    assert all("ndcg_at_10=0." in ln and "hit_rate_at_5=" in ln for ln in jobs)
    assert "  category " not in proc.stdout and "  outputs:" not in proc.stdout
    assert "Launching 2 jobs" not in proc.stdout + proc.stderr  # Hydra's launcher lines: log only


def test_a_verbose_multirun_prints_every_summary(sample):
    loud = _evaluate(sample, "sweep_verbose", *SWEEP, "verbose=true")
    assert loud.returncode == 0, loud.stderr[-3000:]
    assert loud.stdout.count("  category ") == 2 and loud.stdout.count("  outputs: ") == 2
    assert "Launching 2 jobs" in loud.stdout + loud.stderr


@pytest.mark.parametrize(
    "override,message",
    [
        ("verbose=maybe", "error: verbose='maybe': must be true or false"),
        ("progress=sometimes", "error: progress='sometimes': use auto, true or false"),
    ],
)
def test_a_bad_console_setting_is_a_one_line_error(tmp_path, override, message):
    from tests.cli.helpers import cli, error_line

    proc = cli("evaluate", override, f"hydra.run.dir={tmp_path}", "tracking=none")
    assert proc.returncode == 2 and error_line(proc) == message
