"""The pipeline as an ordered list of stages: ``run`` results, composition of query transforms and
post-processors, ``restore``/``index_all``, and group arguments given by option name."""

from __future__ import annotations

import dataclasses
import datetime as dt
from pathlib import Path

import pytest
from omegaconf import open_dict

from rag_lab.errors import ConfigError
from rag_lab.pipeline import Pipeline, RetrievalResult, build
from rag_lab.pipeline.build import build_dataset, build_pipeline
from rag_lab.ranking import ranked
from tests.compose import TOY_OVERRIDES, compose_evaluate

SAMPLE = ["embedder=hashing", "tracking=none", "cache.dir=null"]


def loaded(tmp_path: Path, *overrides: str) -> tuple[Pipeline, dict[str, str]]:
    cfg = compose_evaluate(list(overrides), tmp_path)
    data = build_dataset(cfg).load()
    pipe = build_pipeline(cfg)
    pipe.load_corpus(data.corpus_sources, data.corpus_root, data.corpus_fingerprint)
    return pipe, {q: x.text for q, x in data.queries.items()}


def test_run_returns_every_stage_in_order_and_is_frozen(tmp_path):
    pipe, queries = loaded(
        tmp_path,
        *TOY_OVERRIDES,
        "retrievers=[dense,bm25]",
        "cache.dir=null",
        "query_transforms=[normalise]",
    )
    result = pipe.run(queries, 10, latency_queries=3)
    assert isinstance(result, RetrievalResult)
    assert list(result.runs) == ["dense", "bm25", "fusion"]
    assert result.final is result.runs["fusion"]
    assert set(result.final) == set(queries) and all(len(r) <= 10 for r in result.final.values())
    assert len(result.latency_ms) == 3 and all(ms > 0 for ms in result.latency_ms)
    assert dict(result.from_cache) == {"dense": False, "bm25": False}
    assert {"dense/embed_seconds", "bm25/tokenize_seconds"} <= set(result.stats)
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.final = {}  # type: ignore[misc]
    with pytest.raises(TypeError):
        result.runs["x"] = {}  # type: ignore[index]


def test_postprocessors_compose_in_order_after_fusion(tmp_path):
    as_of = "2023-09-01"
    pipe, queries = loaded(
        tmp_path, *SAMPLE, "postprocess=[freshness]", f"postprocess.freshness.as_of={as_of}"
    )
    result = pipe.run(queries, 20)
    assert list(result.runs) == ["bm25", "dense", "fusion", "freshness"]
    day = dt.date.fromisoformat(as_of)

    def valid(cid: str) -> bool:
        meta = pipe.chunks[cid].metadata
        lo, hi = meta.get("valid_from"), meta.get("valid_to")
        return (not lo or dt.date.fromisoformat(lo) <= day) and (
            not hi or day <= dt.date.fromisoformat(hi)
        )

    fused, final = result.runs["fusion"], result.final
    dropped = 0
    for qid in queries:
        assert all(valid(c) for c in final[qid])
        kept = [c for c in ranked(fused[qid]) if valid(c)]
        assert ranked(final[qid]) == kept  # the order among valid chunks is the fused order
        dropped += len(fused[qid]) - len(kept)
    assert dropped > 0  # the sample set has expired versions (hx200 manual v1, old firmware notes)
    assert result.stats["freshness/invalid_per_query"] == pytest.approx(dropped / len(queries))
    demote, _ = loaded(
        tmp_path,
        *SAMPLE,
        "postprocess=[freshness]",
        f"postprocess.freshness.as_of={as_of}",
        "postprocess.freshness.mode=demote",
    )
    demoted = demote.run(queries, 20).final
    for qid in queries:
        order = ranked(demoted[qid])
        assert set(order) == set(fused[qid])  # nothing lost, invalid ones at the tail
        n_valid = sum(valid(c) for c in order)
        assert all(valid(c) for c in order[:n_valid]) and not any(valid(c) for c in order[n_valid:])


def test_query_transform_changes_what_retrievers_see(tmp_path):
    pipe, _ = loaded(
        tmp_path,
        *TOY_OVERRIDES,
        "retrievers=[bm25]",
        "cache.dir=null",
        "query_transforms=[normalise]",
    )
    full_width = {"q": "ＨＸ－２００\u3000\u3000overheating  "}
    result = pipe.run(full_width, 5)
    assert result.queries["q"] == "HX-200 overheating"
    plain, _ = loaded(tmp_path, *TOY_OVERRIDES, "retrievers=[bm25]", "cache.dir=null")
    assert result.final == plain.run({"q": "HX-200 overheating"}, 5).final
    assert plain.run(full_width, 5).final != result.final  # without the transform BM25 misses


def test_restore_from_saved_indexes_ranks_like_the_indexed_pipeline(tmp_path):
    overrides = [*TOY_OVERRIDES, "retrievers=[dense,bm25]", "cache.dir=null"]
    pipe, queries = loaded(tmp_path, *overrides)
    pipe.index_all()
    dirs = {}
    for name, retriever in pipe.retrievers.items():
        dirs[name] = tmp_path / "idx" / name
        dirs[name].mkdir(parents=True)
        retriever.save_index(dirs[name])  # type: ignore[attr-defined]
    fresh = build_pipeline(compose_evaluate(overrides, tmp_path))
    with pytest.raises(ConfigError, match="no corpus"):
        fresh.run(queries, 10)
    fresh.restore(list(pipe.chunks.values()), dirs)
    assert fresh.run(queries, 10).final == pipe.run(queries, 10).final
    with pytest.raises(ConfigError, match="no saved index for retriever 'bm25'"):
        fresh.restore(list(pipe.chunks.values()), {"dense": dirs["dense"]})
    with pytest.raises(ConfigError, match="chunk"):
        fresh.restore(list(pipe.chunks.values())[:3], dirs)


def test_group_argument_by_option_name(tmp_path):
    # retrievers.bm25.tokenizer=jieba means the jieba option of the tokenizer group
    pipe, _ = loaded(
        tmp_path,
        *TOY_OVERRIDES,
        "tokenizer=english",
        "retrievers=[bm25]",
        "cache.dir=null",
        "retrievers.bm25.tokenizer=jieba",
    )
    assert type(pipe.retrievers["bm25"].tokenizer).__name__ == "JiebaTokenizer"  # type: ignore[attr-defined]
    cfg = compose_evaluate(
        [*TOY_OVERRIDES, "retrievers=[bm25]", "retrievers.bm25.tokenizer=nope"], tmp_path
    )
    with pytest.raises(ConfigError) as err:
        build_pipeline(cfg)
    assert str(err.value).startswith("retrievers.bm25.tokenizer=nope: no tokenizer option 'nope'")
    assert "jieba" in str(err.value) and "\n" not in str(err.value)


def test_allow_list_is_rag_lab_only(tmp_path):
    cfg = compose_evaluate([*TOY_OVERRIDES, "retrievers=[bm25]"], tmp_path)
    with open_dict(cfg):
        cfg.retrievers.bm25.tokenizer = {"_target_": "sentence_transformers.SentenceTransformer"}
    with pytest.raises(ConfigError, match=r"retrievers.bm25.tokenizer._target_=.* is not allowed"):
        build_pipeline(cfg)
    assert build.ALLOWED_TARGET_PREFIXES == ("rag_lab.",)
