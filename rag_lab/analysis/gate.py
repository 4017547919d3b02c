"""The regression gate: compare a candidate run against a baseline (``rag-lab gate``, whose
command line is :mod:`rag_lab.cli.gate`).

A *side* (baseline or candidate) is any of: an evaluate run folder (or an export folder) holding
``metrics.json`` and, optionally, ``per_query.parquet`` and a ``dataset_fingerprint`` file; a path
to a ``metrics.json`` (the per-query table is read from the same folder); or an MLflow run id
(artifacts ``metrics/metrics.json`` and ``tables/per_query.parquet``, tag ``dataset_fingerprint``).

Contract:

- Both sides must carry the same dataset fingerprint (a ``dataset_fingerprint`` key in
  ``metrics.json``, else the ``dataset_fingerprint`` file, which for an MLflow run is its tag;
  key and file must agree); a mismatch or a missing fingerprint is refused unless
  ``allow_fingerprint_mismatch``.
- The fingerprint is a file anyone can copy, so the sides' own records are checked too: the
  query ids of the two per-query tables must be the same set, each query's ``n_relevant`` the
  same, and where both folders hold ``qrels.trec`` (evaluate writes it) the judgments must be
  equal. A mismatch is refused like a fingerprint mismatch (exit 2; the same flag overrides it,
  as a note). A side without a per-query table (a bare ``metrics.json``) is checked by its
  fingerprint alone.
- ``--max-drop m=t`` regresses when ``candidate - baseline < -t``; ``--max-rise m=t`` when
  ``candidate - baseline > t``. When both sides have per-query scores for ``m``, a breach only
  fails if the paired randomisation test gives ``p < alpha``; a breach with ``p >= alpha`` is a
  warning ("within noise"). ``--no-significance`` fails on the tolerance alone. Without per-query
  scores the tolerance alone decides.
- A noise ratio is refused as a criterion (``ConfigError``, exit 2) unless a ``--max-drop`` on a
  hit rate or recall is checked with it: noise skips queries with nothing retrieved, so a
  candidate that retrieves nothing for the hard queries would pass on noise alone
  (``rag_lab.metrics.names.noise_refusal``). Metric names go through
  ``rag_lab.metrics.names.canonical_key`` (``ndcg@10`` = ``ndcg_at_10``).
- Metrics not named are not checked; the headline ones (``rag_lab.metrics.names.HEADLINE``) are
  listed for information, with whether they moved the better or the worse way.
- :attr:`GateResult.exit_code`: 0 no regression (warnings allowed), 1 at least one regression;
  a refusal raises :class:`GateError` (the command exits 2).
"""

from __future__ import annotations

import json
import math
import re
import tempfile
import xml.etree.ElementTree as ET
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import pandas as pd

from rag_lab.analysis.stats import align, randomization_test
from rag_lab.errors import ConfigError, RagLabError
from rag_lab.metrics.names import HEADLINE, canonical_key, higher_is_better, noise_refusal
from rag_lab.tracking.fetch import FINGERPRINT as FINGERPRINT_FILE
from rag_lab.tracking.fetch import METRICS, download_run, resolve_tracking_uri

N_PERMUTATIONS = 10000
_RUN_ID = re.compile(r"^[A-Za-z0-9_-]+$")

Status = Literal["pass", "warn", "fail", "info"]
Direction = Literal["drop", "rise"]


class GateError(RagLabError):
    """The gate refuses to compare (unresolvable side, fingerprint mismatch, unknown metric)."""


@dataclass(frozen=True)
class Side:
    """One resolved side: its flat metrics, per-query table (``None`` if absent) and fingerprint."""

    ref: str
    metrics: Mapping[str, object]
    per_query: pd.DataFrame | None
    fingerprint: str | None
    qrels: Mapping[str, Mapping[str, int]] | None = None  # qrels.trec beside metrics.json


@dataclass(frozen=True)
class Row:
    """One metric of the comparison. ``direction``/``tolerance`` are ``None`` for informational
    rows; ``p_value`` is ``None`` when per-query scores are unavailable on either side."""

    metric: str
    baseline: float
    candidate: float
    delta: float
    direction: Direction | None
    tolerance: float | None
    p_value: float | None
    status: Status
    reason: str


@dataclass(frozen=True)
class GateResult:
    """Rows for every checked metric (then informational headline rows) and the verdict."""

    baseline: Side
    candidate: Side
    rows: list[Row]
    alpha: float
    significance: bool
    fingerprint_note: str | None = None

    @property
    def checked(self) -> list[Row]:
        return [r for r in self.rows if r.direction is not None]

    @property
    def regressions(self) -> list[Row]:
        return [r for r in self.rows if r.status == "fail"]

    @property
    def warnings(self) -> list[Row]:
        return [r for r in self.rows if r.status == "warn"]

    @property
    def exit_code(self) -> int:
        """1 if any checked metric regressed, else 0."""
        return 1 if self.regressions else 0


# ---------------------------------------------------------------- resolving a side


def _why(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"


def _read_json(path: Path) -> dict[str, object]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:  # ValueError: bad JSON, bytes that are not UTF-8
        raise GateError(f"{path}: cannot read metrics ({_why(exc)})") from None
    if not isinstance(data, dict):
        raise GateError(f"{path}: expected a flat JSON object of metrics")
    return data


def _read_table(path: Path) -> pd.DataFrame | None:
    """The per-query table, ``None`` when absent; a file that is not a readable table is a
    refusal naming it (exit 2), never a regression."""
    if not path.is_file():
        return None
    try:
        return pd.read_parquet(path)
    except Exception as exc:  # pyarrow's ArrowInvalid, OSError, ...: a truncated or foreign file
        raise GateError(f"{path}: cannot read the per-query table ({_why(exc)})") from None


def _folder_fingerprint(metrics: Mapping[str, object], folder: Path) -> str | None:
    """``dataset_fingerprint`` key of ``metrics.json``, else the ``dataset_fingerprint`` file."""
    key = metrics.get(FINGERPRINT_FILE)
    file = folder / FINGERPRINT_FILE
    try:
        on_disk = file.read_text(encoding="utf-8").strip() if file.is_file() else None
    except (OSError, ValueError) as exc:
        raise GateError(f"{file}: cannot read the dataset fingerprint ({_why(exc)})") from None
    if key is not None and on_disk is not None and str(key) != on_disk:
        raise GateError(
            f"{folder}: metrics.json says dataset_fingerprint={key} but {file} says {on_disk}"
        )
    return str(key) if key is not None else on_disk or None


def _read_qrels(path: Path) -> dict[str, dict[str, int]] | None:
    """``qrels.trec`` (the judgments the run was scored with), ``None`` when absent."""
    from rag_lab.io.run_folder import read_trec_qrels

    if not path.is_file():
        return None
    try:
        return read_trec_qrels(path)
    except (OSError, ValueError) as exc:  # not UTF-8, a line without four columns, a bad grade
        raise GateError(f"{path}: cannot read the judgments ({_why(exc)})") from None


def load_metrics_file(path: Path, ref: str | None = None) -> Side:
    """A side from a ``metrics.json`` path; ``per_query.parquet``, the fingerprint file and
    ``qrels.trec`` beside it."""
    from rag_lab.io.run_folder import TREC_QRELS_FILE

    metrics = _read_json(path)
    return Side(
        ref or str(path),
        metrics,
        _read_table(path.parent / "per_query.parquet"),
        _folder_fingerprint(metrics, path.parent),
        _read_qrels(path.parent / TREC_QRELS_FILE),
    )


def load_mlflow_run(run_id: str, tracking_uri: str) -> Side:
    """A side from an MLflow run logged by ``rag-lab evaluate``, read as the run folder it wrote
    (:func:`rag_lab.tracking.fetch.download_run`: ``metrics.json`` required, ``per_query.parquet``
    when logged, the ``dataset_fingerprint`` tag as the fingerprint file). Raises
    :class:`GateError` if the store, the run or its metrics artifact cannot be found."""
    with tempfile.TemporaryDirectory(prefix="rag_lab_gate_") as tmp:
        try:
            folder = download_run(run_id, tracking_uri, Path(tmp), required=(METRICS,))
        except ConfigError as exc:
            raise GateError(str(exc)) from None
        return load_metrics_file(folder / "metrics.json", run_id)


def resolve_side(ref: str | Path, tracking_uri: str | None = None, verify: bool = True) -> Side:
    """A run folder, an export folder, a ``metrics.json`` path or an MLflow run id → :class:`Side`.

    ``tracking_uri`` defaults to ``$MLFLOW_TRACKING_URI``, else ``experiments/mlflow.db``. An
    export folder's files are checked against its ``manifest.json`` unless ``verify`` is false
    (``DataError`` naming the file that differs). Raises :class:`GateError` with a one-line
    reason when ``ref`` is none of these."""
    ref = str(ref)
    path = Path(ref)
    if path.is_dir():
        if verify and (path / "pipeline.yaml").is_file():
            from rag_lab.export.manifest import verify_manifest

            verify_manifest(path)
        if not (path / "metrics.json").is_file():
            raise GateError(
                f"{ref}: folder has no metrics.json (not an evaluate run or export folder)"
            )
        return load_metrics_file(path / "metrics.json", ref)
    if path.is_file():
        return load_metrics_file(path, ref)
    if not _RUN_ID.match(ref):
        raise GateError(f"{ref}: no such run folder or metrics.json, and not an MLflow run id")
    try:
        return load_mlflow_run(ref, resolve_tracking_uri(tracking_uri))
    except GateError as exc:
        raise GateError(
            f"{ref}: not a run folder or metrics.json, nor a usable MLflow run id: {exc}"
        ) from None


# ---------------------------------------------------------------- comparing


def check_fingerprints(baseline: Side, candidate: Side, allow_mismatch: bool) -> str | None:
    """Raise :class:`GateError` unless both fingerprints are present and equal; with
    ``allow_mismatch`` return a note instead (``None`` when they match)."""
    b, c = baseline.fingerprint, candidate.fingerprint
    if b and c and b == c:
        return None
    why = "missing on one side" if not (b and c) else "differ"
    note = f"dataset fingerprints {why}: baseline {b or '(none)'}, candidate {c or '(none)'}"
    if allow_mismatch:
        return note
    raise GateError(
        f"refusing to compare: {note} (the runs scored different data; "
        f"--allow-fingerprint-mismatch overrides)"
    )


def _examples(ids: set[str], n: int = 3) -> str:
    shown = sorted(ids)[:n]
    return ", ".join(shown) + (f" (+{len(ids) - n} more)" if len(ids) > n else "")


def data_mismatch(baseline: Side, candidate: Side) -> str | None:
    """Why the two sides were not scored on the same queries and judgments (``None``: they
    were, as far as their files tell): the per-query tables' query ids, each query's
    ``n_relevant``, and ``qrels.trec`` where both sides have it."""
    tb, tc = baseline.per_query, candidate.per_query
    if tb is not None and tc is not None and "query_id" in tb and "query_id" in tc:
        qb, qc = set(tb["query_id"].astype(str)), set(tc["query_id"].astype(str))
        if qb != qc:
            parts = [f"baseline {len(qb)}, candidate {len(qc)}, {len(qb & qc)} in common"]
            if qb - qc:
                parts.append(f"only in the baseline: {_examples(qb - qc)}")
            if qc - qb:
                parts.append(f"only in the candidate: {_examples(qc - qb)}")
            return f"the sides scored different queries ({'; '.join(parts)})"
        if "n_relevant" in tb and "n_relevant" in tc:
            nb = dict(zip(tb["query_id"].astype(str), tb["n_relevant"], strict=True))
            nc = dict(zip(tc["query_id"].astype(str), tc["n_relevant"], strict=True))
            differ = {q for q in nb if int(nb[q]) != int(nc[q])}
            if differ:
                q = min(differ)
                return (
                    f"the sides' judgments differ: {len(differ)} of {len(nb)} queries have "
                    f"another number of relevant documents (e.g. {q}: baseline {int(nb[q])}, "
                    f"candidate {int(nc[q])})"
                )
    if baseline.qrels is not None and candidate.qrels is not None:
        rb, rc = baseline.qrels, candidate.qrels
        differ = {q for q in set(rb) | set(rc) if dict(rb.get(q, {})) != dict(rc.get(q, {}))}
        if differ:
            return (
                f"the sides' qrels.trec differ for {len(differ)} of {len(set(rb) | set(rc))} "
                f"queries (e.g. {_examples(differ)})"
            )
    return None


def check_data(baseline: Side, candidate: Side, allow_mismatch: bool) -> str | None:
    """Raise :class:`GateError` when :func:`data_mismatch` finds one; with ``allow_mismatch``
    return it as a note instead (``None`` when the sides agree)."""
    why = data_mismatch(baseline, candidate)
    if why is None or allow_mismatch:
        return why
    raise GateError(
        f"refusing to compare: {why}, whatever their dataset fingerprints say "
        "(--allow-fingerprint-mismatch overrides)"
    )


def _value(side: Side, metric: str, role: str) -> float:
    """The finite numeric value of ``metric`` on one side; :class:`GateError` otherwise."""
    if metric not in side.metrics:
        known = [k for k in HEADLINE if k in side.metrics] or sorted(side.metrics)[:5]
        raise GateError(
            f"metric {metric!r} not in the {role} metrics ({side.ref}); "
            f"known e.g.: {', '.join(known)}"
        )
    value = side.metrics[metric]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise GateError(
            f"metric {metric!r} is not a finite number in the {role} metrics: {value!r}"
        )
    return float(value)


def p_value(
    baseline: Side, candidate: Side, metric: str, n_permutations: int = N_PERMUTATIONS
) -> float | None:
    """Paired randomisation-test p of ``metric`` over the queries both per-query tables share;
    ``None`` when either table or column is missing or no pair is usable."""
    b, c = baseline.per_query, candidate.per_query
    if (
        b is None
        or c is None
        or any(metric not in t.columns or "query_id" not in t.columns for t in (b, c))
    ):
        return None
    try:
        wide = align({"baseline": b, "candidate": c}, metric)
    except ValueError as exc:
        raise GateError(f"per-query table for {metric!r}: {exc}") from None
    p = randomization_test(
        wide["candidate"].to_numpy(), wide["baseline"].to_numpy(), n_permutations
    )
    return None if math.isnan(p) else p


def _breached(delta: float, direction: Direction, tolerance: float) -> bool:
    return delta < -tolerance if direction == "drop" else delta > tolerance


def judge(
    metric: str,
    b: float,
    c: float,
    direction: Direction,
    tolerance: float,
    p: float | None,
    alpha: float,
    significance: bool,
) -> Row:
    """One checked metric: pass within tolerance; beyond it, fail unless significance is on, a
    p-value exists and ``p >= alpha`` (then warn: within noise)."""
    delta = c - b
    word = "dropped" if direction == "drop" else "rose"
    if not _breached(delta, direction, tolerance):
        return Row(metric, b, c, delta, direction, tolerance, p, "pass", "within tolerance")
    breach = f"{word} by {abs(delta):.4f}, beyond the tolerance {tolerance:g}"
    if significance and p is not None and p >= alpha:
        return Row(
            metric,
            b,
            c,
            delta,
            direction,
            tolerance,
            p,
            "warn",
            f"{breach}, but not significant (p={p:.3g} >= alpha={alpha:g}): within noise",
        )
    if not significance:
        how = "--no-significance: tolerance alone"
    elif p is None:
        how = "no per-query scores: tolerance alone"
    else:
        how = f"significant, p={p:.3g} < alpha={alpha:g}"
    return Row(metric, b, c, delta, direction, tolerance, p, "fail", f"{breach} ({how})")


def _info_row(baseline: Side, candidate: Side, metric: str) -> Row | None:
    try:
        b, c = _value(baseline, metric, "baseline"), _value(candidate, metric, "candidate")
    except GateError:
        return None
    p = p_value(baseline, candidate, metric)
    return Row(metric, b, c, c - b, None, None, p, "info", "not checked")


def gate(
    baseline: Side | str | Path,
    candidate: Side | str | Path,
    max_drop: Mapping[str, float],
    max_rise: Mapping[str, float],
    alpha: float = 0.05,
    *,
    significance: bool = True,
    allow_fingerprint_mismatch: bool = False,
    tracking_uri: str | None = None,
    verify: bool = True,
) -> GateResult:
    """Compare ``candidate`` against ``baseline`` (sides or references for :func:`resolve_side`;
    ``verify``: check export folders against their manifest).

    One row per (metric, direction) in ``max_drop`` / ``max_rise`` (tolerances are absolute,
    ``>= 0``), then one informational row per headline metric not checked and present on both
    sides. Raises :class:`GateError` on a fingerprint refusal or an unknown/non-finite checked
    metric. See the module docstring for the pass/warn/fail rule."""
    if not 0 < alpha < 1:
        raise GateError(f"alpha must be in (0, 1), got {alpha}")
    refusal = noise_refusal([*max_drop, *max_rise], max_drop, "--max-drop hit_rate_at_{k}=0.02")
    if refusal:
        raise ConfigError(refusal)
    base = baseline if isinstance(baseline, Side) else resolve_side(baseline, tracking_uri, verify)
    cand = (
        candidate if isinstance(candidate, Side) else resolve_side(candidate, tracking_uri, verify)
    )
    notes = [
        check_fingerprints(base, cand, allow_fingerprint_mismatch),
        check_data(base, cand, allow_fingerprint_mismatch),
    ]
    note = "; ".join(n for n in notes if n) or None
    rows: list[Row] = []
    checks: tuple[tuple[Direction, Mapping[str, float]], ...] = (
        ("drop", max_drop),
        ("rise", max_rise),
    )
    for direction, limits in checks:
        for name, tolerance in limits.items():
            metric = canonical_key(name)  # ndcg@10 (a config's name) means ndcg_at_10
            if not (tolerance >= 0 and math.isfinite(tolerance)):
                raise GateError(f"--max-{direction} {name}: tolerance must be a finite number >= 0")
            b, c = _value(base, metric, "baseline"), _value(cand, metric, "candidate")
            p = p_value(base, cand, metric)
            rows.append(judge(metric, b, c, direction, tolerance, p, alpha, significance))
    checked = {r.metric for r in rows}
    rows += [
        r for m in HEADLINE if m not in checked and (r := _info_row(base, cand, m)) is not None
    ]
    return GateResult(base, cand, rows, alpha, significance, note)


# ---------------------------------------------------------------- reporting

_STATUS_TEXT = {"pass": "pass", "warn": "warn (within noise)", "fail": "**FAIL**", "info": "info"}


def _status_text(row: Row) -> str:
    """The status cell; an informational row also says which way its metric moved."""
    if row.status != "info":
        return _STATUS_TEXT[row.status]
    if row.delta == 0:
        return "info (same)"
    return "info (better)" if (row.delta > 0) == higher_is_better(row.metric) else "info (worse)"


def _tolerance_text(row: Row) -> str:
    if row.direction is None:
        return "-"
    return f"drop <= {row.tolerance:g}" if row.direction == "drop" else f"rise <= {row.tolerance:g}"


def render_markdown(result: GateResult) -> str:
    """The Markdown summary (GitHub job-summary ready): sides, table, verdict, warnings."""
    verdict = "FAIL" if result.exit_code else "PASS"
    sig = (
        f"a breach fails only if significant (paired randomisation test, alpha={result.alpha:g})"
        if result.significance
        else "--no-significance: a breach of tolerance fails on its own"
    )
    lines = [
        f"## rag-lab gate: {verdict}",
        "",
        f"- baseline: `{result.baseline.ref}` "
        f"(dataset fingerprint `{result.baseline.fingerprint}`)",
        f"- candidate: `{result.candidate.ref}` "
        f"(dataset fingerprint `{result.candidate.fingerprint}`)",
        f"- rule: {sig}",
        "",
    ]
    if result.fingerprint_note:
        lines += [
            f"> **Warning:** {result.fingerprint_note} "
            f"(compared anyway: --allow-fingerprint-mismatch)",
            "",
        ]
    lines += [
        "| metric | baseline | candidate | delta | tolerance | p | status |",
        "|---|---:|---:|---:|---|---:|---|",
    ]
    for r in result.rows:
        p = "-" if r.p_value is None else f"{r.p_value:.3g}"
        lines.append(
            f"| {r.metric} | {r.baseline:.4f} | {r.candidate:.4f} | {r.delta:+.4f} | "
            f"{_tolerance_text(r)} | {p} | {_status_text(r)} |"
        )
    lines.append("")
    if result.regressions:
        lines.append(
            f"**Verdict: FAIL** — {len(result.regressions)} regression(s): "
            + "; ".join(f"{r.metric} {r.reason}" for r in result.regressions)
        )
    else:
        lines.append(f"**Verdict: PASS** — {len(result.checked)} checked metric(s), no regression.")
    for r in result.warnings:
        lines.append(f"\n- Warning: {r.metric} {r.reason} — reported, not a failure.")
    if not result.checked:
        lines.append(
            "\nNo metric was checked (give --max-drop / --max-rise); "
            "the rows above are informational."
        )
    return "\n".join(lines) + "\n"


def render_junit(result: GateResult) -> str:
    """JUnit XML: one testcase per checked metric, ``<failure>`` for regressions, warnings in
    ``<system-out>``."""
    suite = ET.Element(
        "testsuite",
        name="rag-lab gate",
        tests=str(len(result.checked)),
        failures=str(len(result.regressions)),
        errors="0",
        skipped="0",
    )
    for r in result.checked:
        case = ET.SubElement(
            suite, "testcase", classname="rag_lab.gate", name=f"{r.metric} (max-{r.direction})"
        )
        p = "n/a" if r.p_value is None else f"{r.p_value:.3g}"
        detail = (
            f"baseline={r.baseline:.6g} candidate={r.candidate:.6g} delta={r.delta:+.6g} "
            f"tolerance={r.tolerance:g} p={p}"
        )
        if r.status == "fail":
            failure = ET.SubElement(
                case, "failure", message=f"{r.metric} {r.reason}", type="regression"
            )
            failure.text = detail
        else:
            ET.SubElement(case, "system-out").text = f"{r.status}: {r.reason}; {detail}"
    root = ET.Element("testsuites")
    root.append(suite)
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"
