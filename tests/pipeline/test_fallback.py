"""The fallback chain (rag_lab/pipeline/fallback.py): acceptance, the walk down the levels, refusal
metrics, and the chain inside a real evaluation (a second corpus, BM25 alone over the main corpus
through the same cached run, a refusal)."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path
from types import MappingProxyType

import pandas as pd
import pytest

from rag_lab.errors import ConfigError
from rag_lab.evaluate import evaluate
from rag_lab.export import evaluate_exported, export_pipeline
from rag_lab.pipeline import RetrievalResult
from rag_lab.pipeline.fallback import (
    Acceptance,
    FallbackChain,
    FallbackLevel,
    FallbackPipeline,
    acceptance,
    refusal_metrics,
    zscore,
)
from rag_lab.text.refusals import is_refusal
from rag_lab.types import Run
from tests.compose import TOY, compose_evaluate
from tests.export.roundtrip import assert_same_outputs


def result(final: Run, **stages: Run) -> RetrievalResult:
    runs = {**stages, "final_stage": final}
    empty = MappingProxyType({})
    return RetrievalResult(empty, MappingProxyType(runs), final, (), empty, empty, empty)


def test_zscore_is_scale_and_shift_free():
    s = [9.0, 4.0, 3.0, 2.0]
    mean = sum(s) / 4
    std = math.sqrt(sum((x - mean) ** 2 for x in s) / 4)
    assert zscore(s) == pytest.approx((9 - mean) / std)
    assert zscore([10 * x + 3 for x in s]) == pytest.approx(zscore(s))
    assert zscore([1.0]) == 0.0 and zscore([2.0, 2.0]) == 0.0


def test_acceptance_raw_zscore_stage_and_empty():
    r = result({"q": {"a": 0.03, "b": 0.01}}, bm25={"q": {"a": 7.0, "b": 1.0}})
    assert Acceptance(threshold=None).accepts(r, "q")
    assert Acceptance(threshold=0.02, score="raw").accepts(r, "q")
    assert not Acceptance(threshold=0.05, score="raw").accepts(r, "q")
    assert Acceptance(threshold=6.5, score="raw", stage="bm25").accepts(r, "q")
    assert not Acceptance(threshold=7.5, score="raw", stage="bm25").accepts(r, "q")
    assert Acceptance(score="zscore").strength(r, "q") == pytest.approx(1.0)  # two scores: ±1 std
    # an empty final run always falls through, whatever the threshold (a filter left nothing)
    empty = result({"q": {}}, bm25={"q": {"a": 7.0}})
    assert not Acceptance(threshold=None).accepts(empty, "q")
    assert not Acceptance(threshold=0.0, stage="bm25", score="raw").accepts(empty, "q")
    with pytest.raises(ConfigError, match="stage 'dense' is not a stage of the level"):
        Acceptance(threshold=1.0, stage="dense").accepts(r, "q")


def test_acceptance_config_errors_name_the_key():
    with pytest.raises(ConfigError, match=r"^fallback\.accept\.score='z': must be one of"):
        acceptance({"score": "z"}, "fallback.accept")
    with pytest.raises(ConfigError, match=r"^fallback\.levels\.x\.accept\.top_n=1: must be >= 2"):
        acceptance({"top_n": 1}, "fallback.levels.x.accept")
    with pytest.raises(ConfigError, match=r"^fallback\.accept: unknown key\(s\) treshold"):
        acceptance({"treshold": 1.0}, "fallback.accept")


def test_chain_walks_levels_and_refuses():
    first = result({"good": {"a": 5.0}, "weak": {"a": 1.0}, "none": {"a": 1.0}})
    second = result({"good": {"s": 9.0}, "weak": {"s": 4.0}, "none": {"s": 0.5}})
    calls: list[str] = []

    def run_level(level: FallbackLevel) -> RetrievalResult:
        calls.append(level.name)
        return second

    level = FallbackLevel("second", None, Acceptance(threshold=3.0, score="raw"))  # type: ignore[arg-type]
    chain = FallbackChain(Acceptance(threshold=3.0, score="raw"), [level])
    out = chain.resolve(first, run_level, ["good", "weak", "none"])
    assert dict(out.level) == {"good": 0, "weak": 1, "none": 2}
    assert out.final == {"good": {"a": 5.0}, "weak": {"s": 4.0}, "none": {}}
    assert dict(out.stats) == {"level_0": 1.0, "level_1": 1.0, "level_2": 1.0}
    assert chain.names() == ["main", "second", "refused"] and chain.refused_level == 2
    # nothing pending: the next level is never run
    calls.clear()
    chain.resolve(first, run_level, ["good"])
    assert calls == []


def test_refusal_metrics_count_empty_final_runs():
    qrels = {"a1": {"d": 1}, "a2": {"d": 2}, "u1": {"d": 0}, "u2": {"e": 0}}
    final: Run = {"a1": {"d#0": 1.0}, "a2": {}, "u1": {}, "u2": {"d#0": 0.5}}
    assert refusal_metrics(final, qrels) == {
        "refusal_rate_unanswerable": 0.5,
        "wrong_refusal_rate": 0.5,
    }
    assert refusal_metrics({}, {"a": {"d": 1}}) == {"wrong_refusal_rate": 1.0}


# -- the chain in an evaluation -------------------------------------------------------------------
STANDARDS = [
    {
        "_id": "std-rcd",
        "title": "Residual current devices",
        "text": "A residual current device RCD for socket outlets trips at 30 mA within 300 ms.",
    },
    {
        "_id": "std-ip",
        "title": "IP codes",
        "text": "The second digit of an IP code is protection against water ingress.",
    },
]


@pytest.fixture()
def toy_with_standards(tmp_path: Path) -> Path:
    """The toy dataset plus a standards-only query, an unanswerable nonsense query and a second
    corpus (BEIR layout) beside it."""
    root = tmp_path / "toy"
    shutil.copytree(TOY, root)
    with (root / "queries.jsonl").open("a", encoding="utf-8") as f:
        f.write(json.dumps({"_id": "qs", "text": "RCD residual current trip"}) + "\n")
        f.write(json.dumps({"_id": "qz", "text": "zebra xylophone quokka"}) + "\n")
    with (root / "qrels" / "test.tsv").open("a", encoding="utf-8") as f:
        f.write("qs\tstd-rcd\t2\nqz\td1\t0\n")
    (root / "standards").mkdir()
    (root / "standards" / "corpus.jsonl").write_text(
        "".join(json.dumps(d) + "\n" for d in STANDARDS), encoding="utf-8"
    )
    return root


def chain_overrides(root: Path, cache: Path, last_threshold: str) -> list[str]:
    return [
        "dataset=beir",
        f"dataset.path={root}",
        "embedder=hashing",
        "tokenizer=jieba",
        "retrievers=[bm25,dense]",
        "tracking=none",
        f"cache.dir={cache}",
        "fallback=chain",
        f"fallback.levels.standards.corpus={root}/standards",
        # in BM25 units: the toy corpus shares no term with the standards query
        "fallback.accept.threshold=0.5",
        "fallback.levels.standards.accept.stage=bm25",
        "fallback.levels.standards.accept.threshold=0.5",
        f"fallback.levels.bm25_unfiltered.accept.threshold={last_threshold}",
        "fallback.levels.bm25_unfiltered.accept.score=raw",
    ]


def test_chain_in_evaluate_levels_refusal_and_cache(toy_with_standards, tmp_path):
    cache = tmp_path / "cache"
    cfg = compose_evaluate(chain_overrides(toy_with_standards, cache, "0.5"), tmp_path / "a")
    metrics = evaluate(cfg)
    table = pd.read_parquet(Path(cfg.paths.output_dir) / "per_query.parquet").set_index("query_id")
    levels = table["fallback_level"].to_dict()
    assert levels["qs"] == 1  # answered by the second corpus
    assert levels["qz"] == 3  # no level finds a term of it: refused
    assert levels["q1"] == 0
    assert table.loc["qs", "hit_rate_at_5"] == 1.0  # scored against the second corpus's docs
    assert sum(int(metrics[f"fallback/level_{n}"]) for n in range(4)) == len(table)
    assert metrics["fallback/level_3"] >= 1
    unanswerable = ["qz", *(q for q in table.index if table.loc[q, "category"] == "unanswerable")]
    refused = {q for q, lv in levels.items() if lv == 3}
    assert metrics["refusal_rate_unanswerable"] == pytest.approx(
        len(refused & set(unanswerable)) / len(set(unanswerable))
    )
    assert metrics["wrong_refusal_rate"] == 0.0 and refused <= set(unanswerable)
    assert metrics["empty_result_rate"] == pytest.approx(len(refused) / len(table))
    # the BM25-only level over the main corpus replays the main pipeline's cached BM25 run:
    # runs computed are main bm25 + dense and the standards level's bm25 + dense, no fifth
    assert metrics["cache/runs/misses"] == 4
    assert metrics["cache/runs/hits"] >= 1
    # the export carries every level (the standards corpus and its indexes): re-scored, it gives
    # the run's metrics, each query answered by the same level
    out = export_pipeline(Path(cfg.paths.output_dir), tmp_path / "export")
    assert (out / "levels" / "standards" / "chunks.json.gz").is_file()
    again = evaluate_exported(out, out_dir=tmp_path / "again")
    assert_same_outputs(metrics, again)
    rescored = pd.read_parquet(tmp_path / "again" / "per_query.parquet").set_index("query_id")
    assert rescored["fallback_level"].to_dict() == levels


def test_without_the_chain_nothing_is_refused(toy_with_standards, tmp_path):
    overrides = [o for o in chain_overrides(toy_with_standards, tmp_path / "c", "0.5")]
    overrides = [o for o in overrides if not o.startswith("fallback")]
    cfg = compose_evaluate(overrides, tmp_path / "b")
    metrics = evaluate(cfg)
    table = pd.read_parquet(Path(cfg.paths.output_dir) / "per_query.parquet")
    assert "fallback_level" not in table.columns
    assert not any(k.startswith("fallback/") for k in metrics)
    assert metrics["refusal_rate_unanswerable"] == 0.0 and metrics["wrong_refusal_rate"] == 0.0
    assert table.set_index("query_id").loc["qs", "hit_rate_at_5"] == 0.0


def test_bad_level_configs_are_one_line_errors(toy_with_standards, tmp_path):
    base = chain_overrides(toy_with_standards, tmp_path / "c", "0.5")
    for extra, message in [
        (["fallback.levels.bm25_unfiltered.retrievers=[splade]"], r"retrievers: splade"),
        ([f"fallback.levels.standards.corpus={tmp_path}/nowhere"], r"standards\.corpus: no files"),
        (["+fallback.levels.standards.colour=red"], r"unknown key\(s\) colour"),
        (["fallback.levels.standards.postprocess=maybe"], r"postprocess='maybe'"),
    ]:
        cfg = compose_evaluate([*base, *extra], tmp_path / "x")
        with pytest.raises(ConfigError, match=message):
            evaluate(cfg)


def test_second_corpus_sharing_chunk_ids_is_refused(toy_with_standards, tmp_path):
    (toy_with_standards / "standards" / "corpus.jsonl").write_text(
        json.dumps({"_id": "d1", "title": "x", "text": "RCD 30 mA"}) + "\n", encoding="utf-8"
    )
    cfg = compose_evaluate(chain_overrides(toy_with_standards, tmp_path / "c", "0.5"), tmp_path)
    with pytest.raises(ConfigError, match=r"chunk id\(s\) also in the main corpus \(first: d1"):
        evaluate(cfg)


def test_stacked_experiment_builds_its_levels_from_the_main_config(tmp_path):
    from rag_lab.pipeline.build import build_pipeline

    cfg = compose_evaluate(["experiment=stacked", "embedder=hashing", "tracking=none"], tmp_path)
    pipe = build_pipeline(cfg)
    assert list(pipe.query_transforms) == ["synonyms"]
    assert list(pipe.postprocessors) == ["metadata_filter", "rules"]
    assert isinstance(pipe, FallbackPipeline)
    standards, bm25_only = pipe.levels
    assert standards.corpus is not None and standards.corpus.name == "standards"
    assert list(standards.pipeline.retrievers) == ["bm25", "dense"]
    assert list(standards.pipeline.postprocessors) == ["metadata_filter", "rules"]
    assert bm25_only.corpus is None and list(bm25_only.pipeline.retrievers) == ["bm25"]
    assert bm25_only.pipeline.postprocessors == {} and bm25_only.pipeline.fusion is None
    assert list(bm25_only.pipeline.query_transforms) == ["synonyms"]
    # the level's BM25 is configured exactly as the main one: the same run cache keys
    assert bm25_only.pipeline.stage_configs["retrievers"] == {
        "bm25": pipe.stage_configs["retrievers"]["bm25"]
    }
    off = compose_evaluate(["experiment=stacked", "fallback=off", "tracking=none"], tmp_path)
    assert not isinstance(build_pipeline(off), FallbackPipeline)


def test_a_chain_is_restored_only_with_every_levels_corpus_and_indexes(tmp_path, toy_chunks):
    from rag_lab.pipeline.build import build_pipeline

    cfg = compose_evaluate(["fallback=chain", "embedder=hashing", "tracking=none"], tmp_path)
    pipe = build_pipeline(cfg)
    assert isinstance(pipe, FallbackPipeline)
    with pytest.raises(ConfigError, match=r"fallback.levels.standards: no saved corpus or indexes"):
        pipe.restore(toy_chunks, {})


def test_levels_work_whatever_retrievers_the_main_pipeline_has(toy_with_standards, tmp_path):
    """A dense-only pipeline with the shipped chain: level 0 is judged on BM25 (run beside it,
    not fused into it) and the BM25-only level builds BM25 from its option. The main ranking is
    the dense one; the refusals are those of the hybrid's chain on the same queries."""
    base = chain_overrides(toy_with_standards, tmp_path / "c", "0.5")
    dense = [o if not o.startswith("retrievers=") else "retrievers=[dense]" for o in base]
    # the standards level judged on BM25 here: it lists it (the main pipeline has none)
    cfg = compose_evaluate([*dense, "fallback.levels.standards.retrievers=[bm25]"], tmp_path / "d")
    metrics = evaluate(cfg)
    table = pd.read_parquet(Path(cfg.paths.output_dir) / "per_query.parquet").set_index("query_id")
    levels = table["fallback_level"].to_dict()
    assert levels["qs"] == 1 and levels["qz"] == 3 and levels["q1"] == 0
    # the main run is dense alone: no bm25 run, no fusion among its stages
    plain = [o for o in dense if not o.startswith("fallback")]
    alone = evaluate(compose_evaluate(plain, tmp_path / "p"))
    answered = [q for q, lv in levels.items() if lv == 0]
    alone_table = pd.read_parquet(tmp_path / "p" / "run" / "per_query.parquet")
    alone_table = alone_table.set_index("query_id")
    assert (table.loc[answered, "ndcg_at_10"] == alone_table.loc[answered, "ndcg_at_10"]).all()
    assert alone["n_chunks"] == metrics["n_chunks"]


# -- the judge gates the fallback (accept.judge) ---------------------------------------------------
def test_judged_acceptance_moves_an_unfaithful_answer_to_the_next_level():
    first = result({"q1": {"a": 5.0}, "q2": {"a": 5.0}, "q3": {"a": 5.0}})
    second = result({"q1": {"s": 9.0}, "q2": {"s": 4.0}, "q3": {"s": 4.0}})
    # the answer written from a run is faithful for: q1 at the main level, q2 at the second
    faithful = {(None, "q1"), ("second", "q2")}
    asked: list[tuple[str | None, str, dict[str, float]]] = []

    def answer_ok(level: FallbackLevel | None, qid: str, run) -> bool:
        name = None if level is None else level.name
        asked.append((name, qid, dict(run)))
        return (name, qid) in faithful

    judged = Acceptance(threshold=None, judge=True)
    chain = FallbackChain(judged, [FallbackLevel("second", None, judged)])  # type: ignore[arg-type]
    assert chain.judged
    out = chain.resolve(first, lambda lv: second, ["q1", "q2", "q3"], answer_ok)
    assert dict(out.level) == {"q1": 0, "q2": 1, "q3": 2}
    assert out.final == {"q1": {"a": 5.0}, "q2": {"s": 4.0}, "q3": {}}
    # each level's own run was handed to the check; q1, kept at level 0, never reached level 1
    assert (None, "q2", {"a": 5.0}) in asked and ("second", "q2", {"s": 4.0}) in asked
    assert not any(name == "second" and qid == "q1" for name, qid, _ in asked)
    # a retrieval threshold that refuses the run is checked first: no answer is written
    asked.clear()
    strict = FallbackChain(Acceptance(threshold=6.0, score="raw", judge=True), [])
    strict.resolve(first, lambda lv: second, ["q1"], answer_ok)
    assert asked == []
    # without a check to call, a judged acceptance is a one-line config error
    with pytest.raises(ConfigError, match=r"accept\.judge=true needs a generator and a judge"):
        chain.resolve(first, lambda lv: second, ["q1"])
    with pytest.raises(
        ConfigError, match=r"fallback\.accept\.judge='often': must be true or false"
    ):
        acceptance({"judge": "often"}, "fallback.accept")


RCD = "A residual current device RCD for socket outlets trips at 30 mA within 300 ms."


E102 = "The unit stops when the oil temperature exceeds 70 °C."


class OneClaim:
    """A stand-in model behind the project's LLM server, replying in JSON: asked about E102 it
    states a fact of the main corpus' d1; otherwise it claims the RCD sentence (true only of the
    standards corpus); for the nonsense query it never returns JSON. Records the prompts."""

    def __init__(self) -> None:
        self.prompts: list[str] = []

    def chat(self, messages, max_new_tokens=None, temperature=None, stop=()):
        from rag_lab.generator.transformers import ChatOutput

        prompt = messages[-1]["content"]
        self.prompts.append(prompt)
        answer = E102 if "What does E102 mean" in prompt else RCD
        text = "I am not sure." if "zebra" in prompt else json.dumps({"answer": answer})
        return ChatOutput(text, "stop", 5, 5, 0.01)


@pytest.fixture()
def one_claim_server():
    import threading

    from rag_lab.llm.server import serve

    model = OneClaim()
    srv = serve(model, "one-claim", port=0)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{srv.server_address[1]}/v1", model
    srv.shutdown()
    srv.server_close()


def test_judged_chain_in_evaluate_keeps_the_level_whose_answer_is_faithful(
    toy_with_standards, tmp_path, one_claim_server
):
    url, model = one_claim_server
    root = toy_with_standards
    cfg = compose_evaluate(
        [
            "dataset=beir",
            f"dataset.path={root}",
            "embedder=hashing",
            "tokenizer=jieba",
            "retrievers=[bm25,dense]",
            "tracking=none",
            f"cache.dir={tmp_path / 'cache'}",
            "fallback=judged",
            f"fallback.levels.standards.corpus={root}/standards",
            "generator=structured",
            f"generator.generator.base_url={url}",
            "generator.generator.model=one-claim",
            "generator.generator.api_key_env=null",
            "generator.generator.retries=0",
            "judge=lexical",
            "judge.paraphrase_model=null",
        ],
        tmp_path / "a",
    )
    metrics = evaluate(cfg)
    table = pd.read_parquet(Path(cfg.paths.output_dir) / "per_query.parquet").set_index("query_id")
    levels = table["fallback_level"].to_dict()
    # every level retrieves something for every query (no retrieval threshold): only the judge
    # moves a query on. q1's answer is faithful to the main corpus: kept at level 0. The RCD claim
    # is unfaithful to the main corpus and faithful to the standards corpus (two documents: both
    # in every query's context there): level 1. The nonsense query's replies are never JSON
    # (invalid at the two levels that retrieve for it, retried once each): refused
    assert levels == {q: 0 if q == "q1" else 3 if q == "qz" else 1 for q in table.index}
    n = len(table)
    assert metrics["fallback/answers/main/judged"] == n
    assert metrics["fallback/answers/main/rejected"] == n - 2  # q1 kept, qz invalid
    assert metrics["fallback/answers/main/invalid"] == 1
    assert metrics["fallback/answers/standards/judged"] == n - 1
    assert metrics["fallback/answers/standards/invalid"] == 1  # qz
    assert "fallback/answers/standards/rejected" not in metrics
    # BM25 alone finds no term of qz: its empty run falls through before any answer is written
    assert not any(k.startswith("fallback/answers/bm25_unfiltered/") for k in metrics)
    zebra = [p for p in model.prompts if "zebra" in p]
    assert len(zebra) == 4 and sum("not valid" in p for p in zebra) == 2
    # the answer stage reads each kept level's answer back from the cache (no new model call)
    # and gives the refused query the refusal without a model call (no chunks: no request to
    # cache, counted as a call; the prompts above are all the model saw)
    assert metrics["answer/generator_cache_hits"] == n - 1
    assert metrics["answer/generator_calls"] == 1.0 and metrics["answer/n_invalid_outputs"] == 0
    log = Path(cfg.paths.output_dir) / "answers.jsonl"
    answers = {r["id"]: r for r in map(json.loads, log.read_text(encoding="utf-8").splitlines())}
    assert is_refusal(answers["qz"]["response"])
    assert answers["q1"]["response"] == E102 and answers["qs"]["response"] == RCD
    assert answers["qs"]["faithfulness"] == 1.0 and answers["q1"]["faithfulness"] == 1.0


def test_without_a_judged_chain_an_invalid_reply_becomes_the_refusal(
    toy_with_standards, tmp_path, one_claim_server
):
    url, model = one_claim_server
    cfg = compose_evaluate(
        [
            "dataset=beir",
            f"dataset.path={toy_with_standards}",
            "embedder=hashing",
            "tokenizer=jieba",
            "retrievers=[bm25,dense]",
            "tracking=none",
            "generator=structured",
            f"generator.generator.base_url={url}",
            "generator.generator.model=one-claim",
            "generator.generator.api_key_env=null",
            "judge=lexical",
            "judge.paraphrase_model=null",
        ],
        tmp_path / "b",
    )
    metrics = evaluate(cfg)
    table = pd.read_parquet(Path(cfg.paths.output_dir) / "per_query.parquet").set_index("query_id")
    assert metrics["answer/n_invalid_outputs"] == 1.0
    assert table["answer_invalid_output"].fillna(False).to_dict() == {
        q: q == "qz" for q in table.index
    }
    assert len([p for p in model.prompts if "zebra" in p]) == 2  # asked, then retried once
