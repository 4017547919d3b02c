"""Bad numeric and stage options (issue 13): refused at build time in one line naming the key and
the value, never a traceback, never a silent zero score.

The CLI cases run ``rag-lab evaluate dataset=beir dataset.path=<toy> embedder=hashing
tracking=none cache.dir=null`` in process (``tests.cli.helpers.cli``: the exit status and the
one error line; a fresh interpreter proves nothing more, tests/cli/test_cli.py runs one). Each stage
checks its own arguments in its constructor (``rag_lab.validate``); ``rag_lab.pipeline.build`` names
the stage.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from rag_lab.chunker import FixedSizeChunker, RecursiveChunker
from rag_lab.embedder import HashingEmbedder
from rag_lab.errors import ConfigError
from rag_lab.evaluate import check_config
from rag_lab.fusion import RRFFusion, WeightedFusion
from rag_lab.pipeline import build
from rag_lab.query_transforms import NormaliseQueries
from rag_lab.reranker import CrossEncoderReranker
from rag_lab.retrievers import BM25Retriever, DenseRetriever
from rag_lab.tokenizer import WhitespaceTokenizer
from rag_lab.validate import OptionError, integer, number
from tests.cli.helpers import Ran, cli, error_line
from tests.compose import TOY, TOY_OVERRIDES, compose_evaluate

TOK = WhitespaceTokenizer()


def evaluate_cli(tmp_path: Path, *extra: str) -> Ran:
    return cli(
        "evaluate",
        "dataset=beir",
        f"dataset.path={TOY}",
        "embedder=hashing",
        "tracking=none",
        "cache.dir=null",
        f"hydra.run.dir={tmp_path / 'run'}",
        *extra,
    )


def assert_names(line: str, where: str, rest: str) -> None:
    """The one error line names the stage and the argument with its value: today
    ``cannot build fusion: OptionError: k=-10.5: must be >= 0`` (rag_lab.pipeline.build wraps the
    stage's ValueError); ``fusion.k=-10.5: must be >= 0`` once build prefixes ``where``."""
    assert line in (f"error: {where}.{rest}", f"error: cannot build {where}: OptionError: {rest}")


# -- through the CLI: the cases of the issue -----------------------------------------------------


@pytest.mark.parametrize(
    "overrides, where, rest",
    [
        # before: fusion.k=-10.5 was accepted and ranked; fusion.k=-1 raised ZeroDivisionError
        (["fusion.k=-10.5"], "fusion", "k=-10.5: must be >= 0"),
        (["fusion.k=-1"], "fusion", "k=-1: must be >= 0"),
        # before: k1=-1 was accepted; k1=abc a TypeError traceback from numpy inside bm25s
        (["retrievers.bm25.k1=-1"], "retrievers.bm25", "k1=-1: must be >= 0"),
        (["retrievers.bm25.k1=abc"], "retrievers.bm25", "k1='abc': must be a number"),
        # before: "cannot build chunker: TypeError: '<=' not supported between 'str' and 'int'"
        (["chunker=fixed_size", "chunker.size=abc"], "chunker", "size='abc': must be an integer"),
        (["chunker=fixed_size", "chunker.overlap=-3"], "chunker", "overlap=-3: must be >= 0"),
        (["retrievers.dense.nprobe=0"], "retrievers.dense", "nprobe=0: must be >= 1"),
    ],
)
def test_bad_stage_number_is_one_line_naming_key_and_value(tmp_path, overrides, where, rest):
    proc = evaluate_cli(tmp_path, *overrides)
    assert proc.returncode == 2, proc.stderr
    assert_names(error_line(proc), where, rest)
    assert not (tmp_path / "run" / "metrics.json").exists()


@pytest.mark.parametrize(
    "override, line",
    [
        # before: "missing setting evaluation.retrieve_k" (0 read as unset) — or, past that
        # check, a run scoring every query 0
        ("evaluation.retrieve_k=0", "error: evaluation.retrieve_k=0: must be >= 1"),
        # before: ValueError traceback from inside bm25s ("k must be a non-negative integer")
        ("evaluation.retrieve_k=-3", "error: evaluation.retrieve_k=-3: must be >= 1"),
        ("evaluation.retrieve_k=abc", "error: evaluation.retrieve_k='abc': must be an integer"),
        ("evaluation.evidence_k=[5,0]", "error: evaluation.evidence_k[1]=0: must be >= 1"),
        ("cache.on_error=skip", "error: cache.on_error='skip': must be one of fail, bypass"),
    ],
)
def test_bad_evaluation_setting_is_refused_before_anything_runs(tmp_path, override, line):
    proc = evaluate_cli(tmp_path, override)
    assert proc.returncode == 2, proc.stderr
    assert error_line(proc) == line


def test_fusion_weight_for_an_unselected_retriever_is_refused_before_retrieving(tmp_path):
    """Before: a ValueError traceback from ``fuse`` after both retrievers had indexed and run."""
    proc = evaluate_cli(tmp_path, "retrievers=[dense,bm25]", "+fusion.weights.sparse=0.5")
    assert proc.returncode == 2, proc.stderr
    assert error_line(proc) == (
        "error: fusion.weights names sparse, not a retriever of this pipeline "
        "(retrievers: dense, bm25; drop the weight or add it to retrievers=[...])"
    )
    # refused when the pipeline is built, before anything is indexed or retrieved
    cfg = compose_evaluate(
        [*TOY_OVERRIDES, "retrievers=[dense,bm25]", "fusion=weighted", "+fusion.weights.sparse=1"],
        tmp_path / "inproc",
    )
    with pytest.raises(ConfigError, match="fusion.weights names sparse"):
        build.build_pipeline(cfg)


# -- in-process: every stage's constructor ------------------------------------------------------


@pytest.mark.parametrize(
    "factory, message",
    [
        (lambda: RRFFusion(k=-10.5), "k=-10.5: must be >= 0"),
        (lambda: RRFFusion(k="60"), "k='60': must be a number"),
        (lambda: RRFFusion(k=math.inf), "k=inf: must be a finite number"),
        (lambda: RRFFusion(weights={"bm25": -1}), "weights.bm25=-1: must be >= 0"),
        (lambda: WeightedFusion(weights={"dense": "x"}), "weights.dense='x': must be a number"),
        (lambda: WeightedFusion(weights=[1, 2]), "weights=[1, 2]: must be a mapping"),
        (lambda: BM25Retriever(TOK, k1=-1), "k1=-1: must be >= 0"),
        (lambda: BM25Retriever(TOK, b=1.5), "b=1.5: must be <= 1"),
        (lambda: BM25Retriever(TOK, method="bm26"), "method='bm26': must be one of lucene"),
        (lambda: BM25Retriever(TOK, k1=True), "k1=True: must be a number"),
        (lambda: DenseRetriever(HashingEmbedder(TOK), hnsw_m=1), "hnsw_m=1: must be >= 2"),
        (lambda: DenseRetriever(HashingEmbedder(TOK), ef_search=0), "ef_search=0: must be >= 1"),
        (lambda: DenseRetriever(HashingEmbedder(TOK), nlist=2.5), "nlist=2.5: must be an integer"),
        (lambda: FixedSizeChunker(size=0), "size=0: must be >= 1"),
        (lambda: FixedSizeChunker(size=10, overlap=10), "overlap=10: must be < size (10)"),
        (lambda: FixedSizeChunker(unit="words"), "unit='words': must be one of chars, tokens"),
        (lambda: RecursiveChunker(max_chars=-5), "max_chars=-5: must be >= 1"),
        (lambda: RecursiveChunker(100, 100), "overlap_chars=100: must be < max_chars (100)"),
        (lambda: HashingEmbedder(TOK, dimension=0), "dimension=0: must be >= 1"),
        (lambda: HashingEmbedder(TOK, char_ngrams=[4, 3]), "char_ngrams[1]=3: must be >= 4"),
        (lambda: HashingEmbedder(TOK, char_ngrams=3), "char_ngrams=3: must be [min, max]"),
        (lambda: CrossEncoderReranker("m", depth=-1), "depth=-1: must be >= 0"),
        (lambda: CrossEncoderReranker("m", batch_size=0), "batch_size=0: must be >= 1"),
        (lambda: CrossEncoderReranker("m", interpolation=2), "interpolation=2: must be <= 1"),
        (lambda: WhitespaceTokenizer(lowercase="no"), "lowercase='no': must be true or false"),
        (lambda: NormaliseQueries(lowercase=1), "lowercase=1: must be true or false"),
    ],
)
def test_constructor_refuses_bad_argument(factory, message):
    with pytest.raises(OptionError) as info:
        factory()
    assert str(info.value).startswith(message), str(info.value)
    assert isinstance(info.value, ValueError)  # what Python code constructing a stage expects


def test_good_values_pass_and_integral_floats_are_ints():
    assert integer(512.0, "size", ge=1) == 512 and isinstance(integer(512.0, "size"), int)
    assert number(0, "k", ge=0) == 0.0
    assert RRFFusion(k=0).k == 0.0  # k=0 is 1/rank: defined
    assert FixedSizeChunker(size=64, overlap=0).overlap == 0
    assert HashingEmbedder(TOK, char_ngrams=[0, 0]).char_ngrams == (0, 0)
    assert OptionError("k", -1, "must be >= 0").at("fusion").args == ("fusion.k=-1: must be >= 0",)


def test_check_config_names_the_evaluation_key(tmp_path):
    cfg = compose_evaluate([*TOY_OVERRIDES, "evaluation.report_depth=-1"], tmp_path)
    with pytest.raises(ConfigError, match=r"^evaluation.report_depth=-1: must be >= 0$"):
        check_config(cfg)
