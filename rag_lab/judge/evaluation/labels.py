"""Human verdicts on logged answers (``rag-lab judge --labels FILE``): reading, validating and
matching them to the answers of the inputs.

Format: JSONL (``.jsonl``: one object a line) or CSV (``.csv``: a header row), with

- ``id`` (required): the answer's key, the ``id`` of its logged record (the query id in a run
  folder's ``answers.jsonl``), or its line number when the record has no ``id``;
- ``faithful`` (required): ``1`` (the answer is grounded in its contexts) or ``0`` (JSON ``true``
  / ``false`` too);
- ``run`` (required with several inputs): the input the answer belongs to, as given on the command
  line or by its last path component (a run folder's name), when that is unambiguous;
- any other field (a note, the labeller) is ignored.

Every line is checked before anything is judged; the first bad one is a ``DataError``
``<file>:<line>: '<key>': ...`` (exit status 2): a missing or malformed key, a duplicate
(run, id), a run or id that names no logged answer.

``mlflow:<experiment>[@<tracking uri>]`` (default URI: ``$MLFLOW_TRACKING_URI``, else the store
under ``experiments/``) reads the labels from MLflow instead (:func:`read_mlflow_labels`): the
human ``faithful`` feedback people gave on the traces of ``rag-lab evaluate`` runs
(``rag_lab.tracking.feedback``); a trace's ``query_id`` tag is the answer's ``id`` and the run it
is linked to picks the input (the run folder whose ``mlflow_run_id`` names it).
"""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rag_lab.errors import DataError
from rag_lab.io.files import read_jsonl, read_text, require_file
from rag_lab.judge.evaluation.logs import LoggedAnswers

__all__ = ["Label", "match_labels", "read_labels", "read_mlflow_labels"]

_TRUE = {"1", "true", "1.0"}
_FALSE = {"0", "false", "0.0"}


@dataclass(frozen=True)
class Label:
    """One verdict: ``faithful`` 0/1 on the answer ``id`` of input ``run`` (None: the only
    input); ``where`` is ``file:line``, for error messages."""

    run: str | None
    id: str
    faithful: int
    where: str


def _faithful(value: Any, where: str) -> int:
    if isinstance(value, bool):
        return int(value)
    text = str(value).strip().lower() if isinstance(value, (str, int, float)) else None
    if text in _TRUE:
        return 1
    if text in _FALSE:
        return 0
    raise DataError(f"{where}: 'faithful' must be 0 or 1, got {value!r}")


def _text(value: Any, key: str, where: str, required: bool) -> str | None:
    if value is None or (isinstance(value, str) and not value.strip()):
        if required:
            raise DataError(f"{where}: missing required key {key!r}")
        return None
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise DataError(f"{where}: {key!r} must be a string or an integer, got {value!r}")
    return str(value).strip()


def _rows(path: Path) -> list[tuple[int, dict[str, Any]]]:
    suffix = path.suffix.lower()
    if suffix == ".jsonl":
        return list(read_jsonl(path))
    if suffix != ".csv":
        raise DataError(f"{path}: labels must be a .jsonl or .csv file")
    reader = csv.DictReader(io.StringIO(read_text(path), newline=""))
    missing = [c for c in ("id", "faithful") if c not in (reader.fieldnames or [])]
    if missing:
        raise DataError(f"{path}:1: {missing[0]!r}: missing column (header: id,faithful[,run])")
    rows = []
    for rec in reader:
        if any(v not in (None, "") for v in rec.values()):  # blank lines carry no label
            rows.append((reader.line_num, dict(rec)))
    return rows


def read_labels(path: Path) -> list[Label]:
    """The validated labels of ``path``; ``DataError`` naming ``file:line: 'key'`` on the first
    bad one, or when there is none."""
    out: list[Label] = []
    first: dict[tuple[str | None, str], str] = {}
    for lineno, rec in _rows(require_file(path, "labels")):
        where = f"{path}:{lineno}"
        key = _text(rec.get("id"), "id", where, required=True)
        assert key is not None
        if rec.get("faithful") is None or rec.get("faithful") == "":
            raise DataError(f"{where}: missing required key 'faithful'")
        label = Label(
            _text(rec.get("run"), "run", where, required=False),
            key,
            _faithful(rec["faithful"], where),
            where,
        )
        if (label.run, label.id) in first:
            raise DataError(
                f"{where}: 'id': a second label for {label.id!r}"
                + (f" of run {label.run!r}" if label.run else "")
                + f" (first at {first[label.run, label.id]})"
            )
        first[label.run, label.id] = where
        out.append(label)
    if not out:
        raise DataError(f"{path}: no labels")
    return out


def _input_of(label: Label, inputs: Sequence[LoggedAnswers]) -> int:
    if label.run is None:
        if len(inputs) > 1:
            raise DataError(f"{label.where}: 'run': required with several inputs")
        return 0
    exact = [i for i, x in enumerate(inputs) if x.name == label.run]
    if exact:
        return exact[0]
    by_name = [i for i, x in enumerate(inputs) if Path(x.name).name == label.run]
    if len(by_name) == 1:
        return by_name[0]
    names = ", ".join(x.name for x in inputs)
    if by_name:
        raise DataError(f"{label.where}: 'run': {label.run!r} names several inputs ({names})")
    raise DataError(f"{label.where}: 'run': no input named {label.run!r} (inputs: {names})")


def match_labels(
    labels: Sequence[Label], inputs: Sequence[LoggedAnswers]
) -> dict[tuple[int, int], int]:
    """``{(input index, line of the record): faithful}``; ``DataError`` naming the label's
    ``file:line`` when its run or id names no logged answer, or an id that two records share."""
    index: list[dict[str, list[int]]] = []
    for x in inputs:
        keys: dict[str, list[int]] = {}
        for (lineno, _), key in zip(x.records, x.keys(), strict=True):
            keys.setdefault(key, []).append(lineno)
        index.append(keys)
    out: dict[tuple[int, int], int] = {}
    for label in labels:
        i = _input_of(label, inputs)
        lines = index[i].get(label.id)
        if not lines:
            raise DataError(
                f"{label.where}: 'id': {inputs[i].path} has no answer with id {label.id!r}"
            )
        if len(lines) > 1:
            raise DataError(
                f"{label.where}: 'id': {label.id!r} names {len(lines)} answers of "
                f"{inputs[i].path} (lines {', '.join(map(str, lines))})"
            )
        if (i, lines[0]) in out:  # the same answer named by path and by folder name
            raise DataError(f"{label.where}: 'id': a second label for {label.id!r}")
        out[i, lines[0]] = label.faithful
    return out


def read_mlflow_labels(spec: str, inputs: Sequence[LoggedAnswers]) -> list[Label]:
    """The human ``faithful`` feedback on the traces of ``spec`` (``mlflow:<experiment>[@uri]``,
    module docstring) that belong to ``inputs``: a trace linked to the run an input's folder
    names in ``mlflow_run_id`` labels that input's answer ``query_id`` (with one input and no
    ``mlflow_run_id``, every trace labels it). ``DataError`` when none is found."""
    from rag_lab.tracking.feedback import human_labels, split_spec
    from rag_lab.tracking.fetch import RUN_ID_FILE, resolve_tracking_uri

    experiment, uri = split_spec(spec, resolve_tracking_uri())
    run_of: dict[str, int] = {}
    for i, x in enumerate(inputs):
        marker = x.path.parent / RUN_ID_FILE
        if marker.is_file():
            run_of[marker.read_text().strip()] = i
    out: list[Label] = []
    first: dict[tuple[str, str], str] = {}
    for trace, value in human_labels(experiment, uri):
        where = f"mlflow:{experiment}: trace {trace.trace_id}"
        if trace.query_id is None:
            continue
        if run_of:
            if trace.run_id not in run_of:
                continue
            i = run_of[trace.run_id]
        elif len(inputs) == 1:
            i = 0
        else:
            raise DataError(
                f"{where}: 'run': several inputs and none has an {RUN_ID_FILE} to match traces"
            )
        label = Label(inputs[i].name, trace.query_id, _faithful(value, where), where)
        if (inputs[i].name, label.id) in first:
            raise DataError(
                f"{where}: 'id': a second label for {label.id!r} "
                f"(first: {first[inputs[i].name, label.id]})"
            )
        first[inputs[i].name, label.id] = where
        out.append(label)
    if not out:
        raise DataError(
            f"mlflow:{experiment}: no human 'faithful' feedback on the traces of these runs"
        )
    return out
