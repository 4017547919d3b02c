"""Judging logged answers (what ``rag-lab judge`` runs): read and validate a JSONL of
``{"query", "retrieved_contexts": [str, ...], "response" [, "reference": str | [str, ...]]
[, "id"]}`` records, build a judge from ``conf/judge/<name>.yaml``, score each record.

An input is such a file or a run folder of ``rag-lab evaluate`` with a generator, whose
``answers.jsonl`` (``rag_lab.io.run_folder.write_answer_log``) is in that format, ``id`` = query id.
A record's *key* (what labels name) is its ``id`` when it has one, else its line number.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rag_lab.errors import ConfigError, DataError
from rag_lab.io.files import read_jsonl, require_file, require_key
from rag_lab.io.run_folder import ANSWERS_FILE
from rag_lab.judge.runner import JudgeRunner
from rag_lab.paths import CONFIG_DIR

JUDGE_CONF = Path(CONFIG_DIR) / "judge"


def judge_names() -> list[str]:
    """The judges ``build_runner`` knows: the configs of ``conf/judge/``."""
    return sorted(p.stem for p in JUDGE_CONF.glob("*.yaml"))


def read_logs(path: Path) -> list[tuple[int, dict[str, Any]]]:
    """Validated ``(line, record)`` pairs; ``DataError`` naming ``file:line`` on the first bad
    one (no line is scored before every line is read)."""
    out = []
    for lineno, rec in read_jsonl(require_file(path, "input")):
        where = f"{path}:{lineno}"
        if not isinstance(require_key(rec, "query", path, lineno), str):
            raise DataError(f"{where}: 'query' must be a string")
        ctx = require_key(rec, "retrieved_contexts", path, lineno)
        if not isinstance(ctx, list) or not all(isinstance(c, str) for c in ctx):
            raise DataError(f"{where}: 'retrieved_contexts' must be a list of strings")
        if not isinstance(require_key(rec, "response", path, lineno), str):
            raise DataError(f"{where}: 'response' must be a string")
        ref = rec.get("reference")
        if ref is not None and not (
            isinstance(ref, str) or (isinstance(ref, list) and all(isinstance(r, str) for r in ref))
        ):
            raise DataError(f"{where}: 'reference' must be a string or a list of strings")
        out.append((lineno, rec))
    return out


@dataclass(frozen=True)
class LoggedAnswers:
    """One input of ``rag-lab judge``: ``name`` (the path as given), the JSONL ``path`` read and
    its validated ``(line, record)`` pairs."""

    name: str
    path: Path
    records: list[tuple[int, dict[str, Any]]]

    def keys(self) -> list[str]:
        """Each record's key, in order: its ``id`` as a string, else its line number."""
        return [record_key(lineno, rec) for lineno, rec in self.records]


def record_key(lineno: int, rec: dict[str, Any]) -> str:
    return str(rec["id"]) if rec.get("id") is not None else str(lineno)


def read_inputs(paths: Sequence[Path]) -> list[LoggedAnswers]:
    """Every input read and validated (a folder: its ``answers.jsonl``) before any is scored;
    ``DataError`` for a folder without one or an input given twice."""
    out: list[LoggedAnswers] = []
    seen: set[Path] = set()
    for p in paths:
        path = p / ANSWERS_FILE if p.is_dir() else p
        if p.is_dir() and not path.is_file():
            raise DataError(
                f"{p}: no {ANSWERS_FILE} in this folder (rag-lab evaluate writes one when a "
                "generator is set)"
            )
        if path.resolve() in seen:
            raise DataError(f"input given twice: {p}")
        seen.add(path.resolve())
        out.append(LoggedAnswers(str(p), path, read_logs(path)))
    return out


def score_record(judge: Any, lineno: int, rec: dict[str, Any]) -> dict[str, Any]:
    """``score_response`` of one record, with its ``line`` (and ``id`` when it has one)."""
    from rag_lab.pipeline.answers import score_response

    row = score_response(
        judge, rec["query"], rec["retrieved_contexts"], rec["response"], rec.get("reference")
    )
    return {"line": lineno, **({"id": rec["id"]} if "id" in rec else {}), **row}


def build_runner(name: str, overrides: Sequence[str], cache_dir: Path | None) -> JudgeRunner:
    """The judge of ``conf/judge/<name>.yaml`` with ``key=value`` overrides, in a ``JudgeRunner``
    (verdicts cached in the stage cache at ``cache_dir`` when given)."""
    from omegaconf import OmegaConf

    from rag_lab.cache import open_cache
    from rag_lab.pipeline.build import instantiate

    bad = [o for o in overrides if "=" not in o]
    if bad:
        raise ConfigError(f"--set expects KEY=VALUE, got {bad[0]!r}")
    cfg = OmegaConf.merge(
        OmegaConf.load(JUDGE_CONF / f"{name}.yaml"), OmegaConf.from_dotlist(list(overrides))
    )
    missing = sorted(OmegaConf.missing_keys(cfg))
    if missing:
        raise ConfigError(f"judge={name} needs {', '.join(missing)} (e.g. --set {missing[0]}=...)")
    judge = instantiate(cfg, f"judge={name}")
    return JudgeRunner(judge, open_cache(cache_dir) if cache_dir else None)
