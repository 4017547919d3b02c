"""The run folder as other tools read it (``rag_lab.io.run_folder``): ``metrics.json`` is strict
JSON (undefined values ``null``, counts integers), and ``run.trec`` + ``qrels.trec`` are all ranx
(or trec_eval, ir_measures) needs to reproduce rag_lab's numbers."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest

from rag_lab.evaluate import evaluate
from rag_lab.io.run_folder import read_metrics, strict_metrics, write_scores
from tests.compose import TOY_OVERRIDES, compose_evaluate


def strict_load(text: str) -> dict:
    """``json.loads`` that refuses NaN / Infinity (what JavaScript, jq and Go refuse)."""

    def refuse(token: str) -> None:
        raise ValueError(f"not strict JSON: {token}")

    return json.loads(text, parse_constant=refuse)


def test_write_scores_is_strict_json_with_integer_counts(tmp_path):
    metrics = {
        "ndcg_at_10": 0.5,
        "noise_ratio_at_5": math.nan,
        "query_p95_ms": math.inf,
        "n_queries": 8,
        "misses_at_5/below_k": 3.0,
        "cache/embeddings/hits": 12.0,
        "hit_rate_at_5": 1.0,  # a rate of 1 stays a float
        "ingest/n_pages": 2.5,  # not integral: left as it is
    }
    write_scores(tmp_path, metrics, pd.DataFrame({"query_id": ["q"]}), "fp")
    text = (tmp_path / "metrics.json").read_text()
    data = strict_load(text)
    assert data["noise_ratio_at_5"] is None and data["query_p95_ms"] is None
    assert data["misses_at_5/below_k"] == 3 and isinstance(data["misses_at_5/below_k"], int)
    assert isinstance(data["cache/embeddings/hits"], int) and isinstance(data["n_queries"], int)
    assert isinstance(data["hit_rate_at_5"], float) and data["ingest/n_pages"] == 2.5
    back = read_metrics(tmp_path / "metrics.json")
    assert math.isnan(back["noise_ratio_at_5"]) and back["ndcg_at_10"] == 0.5
    assert strict_metrics({"x": math.nan}) == {"x": None}


@pytest.fixture(scope="module")
def toy_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("run_files")
    cfg = compose_evaluate([*TOY_OVERRIDES, "retrievers=[dense,bm25]", "tracking=none"], root)
    return evaluate(cfg), root / "run"


def test_metrics_json_of_a_run_is_strict(toy_run):
    _, folder = toy_run
    data = strict_load((folder / "metrics.json").read_text())
    for key in ("n_queries", "n_answerable", "n_documents", "n_chunks", "cache_misses"):
        assert isinstance(data[key], int), key
    assert isinstance(data["empty_result_rate"], float)


def test_ranx_reads_run_and_qrels_files_and_reproduces_the_metrics(ranx, toy_run):
    Qrels, Run, ranx_evaluate = ranx.Qrels, ranx.Run, ranx.evaluate

    metrics, folder = toy_run
    run = Run.from_file(str(folder / "run.trec"), kind="trec")
    qrels = Qrels.from_file(str(folder / "qrels.trec"), kind="trec")
    grades = qrels.to_dict()
    assert len(grades) == metrics["n_queries"]  # every query of the split, unanswerable included
    # rag_lab averages ranking metrics over answerable queries (ranx would count the others as 0)
    answerable = {q: g for q, g in grades.items() if any(v > 0 for v in g.values())}
    assert len(answerable) == metrics["n_answerable"]
    run_dict = {q: r for q, r in run.to_dict().items() if q in answerable}
    names = ["ndcg@10", "recall@100", "mrr@10", "hit_rate@5", "map@100"]
    got = ranx_evaluate(Qrels(answerable), Run(run_dict), names)
    for name in names:
        assert got[name] == pytest.approx(metrics[name.replace("@", "_at_")], abs=1e-9), name


def test_ingest_report_and_config_files_are_the_plain_dumps(tmp_path):
    from omegaconf import OmegaConf

    from rag_lab.io.run_folder import write_config, write_ingest_report

    reports = [
        {"totals": {"n_files": 1}, "documents": [{"doc_id": "d1", "seconds": 2.5e-05}]},
        {"totals": {"n_files": 1}, "documents": [{"doc_id": "d1", "seconds": 2.5e-05}]},
        {"totals": {"n_files": 1.0}, "documents": [{"seconds": 2.5e-05, "doc_id": "d1"}]},
        {"totals": {"n_files": True}, "documents": [{"doc_id": "文档", "seconds": 2.5e-05}]},
    ]  # the same report again (written from memory), then ones equal to it as dicts but not as text
    for i, report in enumerate(reports):
        path = write_ingest_report(tmp_path, report)
        assert path.read_text() == json.dumps(report, indent=2, ensure_ascii=False), i
    configs = [
        {"a": "${x}", "b": "???", "c": [1, 2.5, None, True, "yes", "1e5", "~", ""], "z": 0},
        {"d": {"e": "中文", "f": "a: b", "h": 1e-05, "i": math.inf}, "j": "\\${esc}"},
        {"k": ("a", "tuple"), "p": {1: "int key"}},  # not plain: through OmegaConf itself
    ]
    for config in configs:
        assert write_config(tmp_path, config).read_text() == OmegaConf.to_yaml(config)


def test_trec_ids_escape_whitespace_and_percent_only():
    from rag_lab.io.run_folder import trec_id, untrec_id

    cases = {
        "hx200-manual#3": "hx200-manual#3",
        "手册/液压泵 第2章": "手册/液压泵%20第2章",  # CJK kept, the space escaped
        "a\nb\tc\u3000d": "a%0Ab%09c%E3%80%80d",
        "100%": "100%25",
    }
    for value, column in cases.items():
        assert trec_id(value) == column
        assert len(f"q Q0 {trec_id(value)} 1 1.0 t".split()) == 6
        assert untrec_id(column) == value
