"""Several knowledge sources routed per query, in an evaluation over the sample's own files
(Markdown manuals and release notes, the JSONL tickets, the standards notes: no PDF to OCR)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from rag_lab.errors import ConfigError
from rag_lab.evaluate import evaluate
from rag_lab.export import export_pipeline
from rag_lab.pipeline.build import build_pipeline
from rag_lab.pipeline.sources import Merge, RoutedFallbackPipeline, SourcesPipeline
from rag_lab.ranking import ranked
from rag_lab.sources import Routing
from tests.compose import compose_evaluate
from tests.fake_openai import FakeOpenAI, last_user_text

SAMPLE = Path(__file__).resolve().parents[2] / "datasets" / "maintenance_kb"


@pytest.fixture(scope="module")
def small_sample(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sample with its Markdown and JSONL files only (qrels naming the left-out PDF, HTML,
    DOCX and CSV documents stay: those queries miss, as they would without those files); its
    stage cache (``cache``) is shared by this module's tests."""
    root = tmp_path_factory.mktemp("sources") / "kb"
    root.mkdir()
    for name in ("queries.jsonl", "qrels"):
        src = SAMPLE / name
        (shutil.copytree if src.is_dir() else shutil.copy)(src, root / name)
    shutil.copytree(SAMPLE / "standards", root / "standards")
    for sub in ("manuals", "release_notes"):
        (root / "docs" / sub).mkdir(parents=True)
        for f in (SAMPLE / "docs" / sub).glob("*.md"):
            shutil.copy(f, root / "docs" / sub / f.name)
    shutil.copy(SAMPLE / "docs" / "tickets.jsonl", root / "docs" / "tickets.jsonl")
    return root


def overrides(root: Path, *extra: str) -> list[str]:
    cache = root.parent / "cache"
    return [
        "dataset=sample",
        f"dataset.path={root}",
        "embedder=hashing",
        "tracking=none",
        f"cache.dir={cache}",
        "sources=rules",
        *extra,
    ]


def test_sources_in_evaluate_route_merge_and_score(small_sample, tmp_path):
    cfg = compose_evaluate(overrides(small_sample), tmp_path / "a")
    pipe = build_pipeline(cfg)
    assert isinstance(pipe, SourcesPipeline)
    assert [s.name for s in pipe.sources] == ["manuals", "tickets", "standards"]
    # each source its own chunker: tickets whole (none), the others the main recursive one
    chunkers = {s.name: type(s.pipeline.chunker).__name__ for s in pipe.sources}
    assert chunkers == {
        "manuals": "RecursiveChunker",
        "tickets": "NoneChunker",
        "standards": "RecursiveChunker",
    }
    metrics = evaluate(cfg)
    run = Path(cfg.paths.output_dir)
    table = pd.read_parquet(run / "per_query.parquet").set_index("query_id")
    # every returned chunk belongs to a source the query was routed to
    loaded = build_pipeline(cfg)
    loaded.load_corpus(*_corpus(cfg))
    assert isinstance(loaded, SourcesPipeline)
    source_of = loaded.doc_sources()
    lines = (run / "run.trec").read_text().splitlines()
    assert lines
    for line in lines:  # document ids
        qid, _, doc = line.split()[:3]
        assert source_of[doc] in table.loc[qid, "sources"].split(",")
    # the standards queries are searched in the standards (IP54 looks like a model number: that
    # one also in the manuals and tickets) and find their note there
    std = table[table["category"] == "standards"]
    assert std["sources"].str.split(",").map(lambda s: "standards" in s).all()
    assert (std["expected_sources"] == "standards").all()
    assert table.loc["q133", "route"] == "equipment+standards"
    assert metrics["by_category/standards/hit_rate_at_5"] == 1.0
    assert table.loc["q003", "route"] == "equipment"
    assert table.loc["q003", "expected_sources"] == "manuals,tickets"
    assert metrics["routing/recall"] == 1.0
    assert 0 < metrics["routing/accuracy"] < 1  # manual-only queries also search the tickets
    assert metrics["sources/standards/hit_rate_at_5"] == 1.0
    assert metrics["sources/tickets/n_documents"] == 39  # the JSONL tickets, one chunk each
    assert metrics["sources/tickets/n_chunks"] == 39
    assert metrics["n_documents"] == sum(
        metrics[f"sources/{s}/n_documents"] for s in ("manuals", "tickets", "standards")
    )
    assert sum(v for k, v in metrics.items() if k.startswith("routing/share/")) == pytest.approx(1)
    # a sources run exports (tests/export/test_sources_export.py: it ranks like the run)
    export = export_pipeline(run, tmp_path / "export")
    assert sorted(p.name for p in (export / "sources").iterdir()) == [
        "manuals",
        "standards",
        "tickets",
    ]


def test_without_sources_the_standards_are_not_searched(small_sample, tmp_path):
    """Also: the fusion router's class of each query is a column (``fusion_route``)."""
    plain = [o for o in overrides(small_sample) if o != "sources=rules"]
    cfg = compose_evaluate([*plain, "fusion=routed"], tmp_path / "b")
    metrics = evaluate(cfg)
    assert metrics["by_category/standards/hit_rate_at_5"] == 0.0
    assert not any(k.startswith("routing/") for k in metrics)
    table = pd.read_parquet(Path(cfg.paths.output_dir) / "per_query.parquet")
    route = dict(zip(table["query_id"], table["fusion_route"], strict=True))
    assert route["q001"] == "code" and route["q012"] == "colloquial"
    assert "sources" not in table.columns


def _corpus(cfg):
    from rag_lab.pipeline.build import build_dataset

    data = build_dataset(cfg).load()
    return data.corpus_sources, data.corpus_root, data.corpus_fingerprint


def test_merge_rrf_keeps_a_single_sources_order_and_raw_keeps_scores():
    routes = {"q": Routing("r", ("a",)), "p": Routing("r", ("a", "b"))}
    runs = {
        "a": {"q": {"x": 5.0, "y": 9.0}, "p": {"x": 1.0}},
        "b": {"q": {"z": 99.0}, "p": {"z": 3.0}},
    }
    merged = Merge().merge(runs, routes, 10)
    assert list(sorted(merged["q"], key=merged["q"].get, reverse=True)) == ["y", "x"]
    assert "z" not in merged["q"]  # b was not searched for q
    assert merged["p"]["x"] == merged["p"]["z"] == pytest.approx(1 / 61)
    weighted = Merge(weights={"b": 2.0}).merge(runs, routes, 10)
    assert weighted["p"]["z"] == pytest.approx(2 / 61)
    raw = Merge(method="raw").merge(runs, routes, 1)
    assert raw == {"q": {"y": 9.0}, "p": {"z": 3.0}}


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["sources.corpora.tickets.include=[nothing/*]"], r"sources\.corpora\.tickets: no files"),
        (["sources.corpora.tickets.include=[*]"], r"sources\.corpora\.tickets: chunk id"),
        (["sources.corpora.standards=null"], "the router names standards"),
        (["+sources.corpora.manuals.chunk=1"], r"sources\.corpora\.manuals: unknown key"),
        (["sources.corpora.tickets.chunker=nope"], r"sources\.corpora\.tickets\.chunker=nope"),
        (["sources.merge.method=max"], r"sources\.merge\.method=.max."),
        (["+sources.merge.weights.other=1"], r"sources\.merge: weights of other"),
        (
            ["+sources.merge.route_weights.histroy.tickets=1"],
            r"route_weights\.histroy: not a route",
        ),
        (["sources.merge.route_weights.history.tickets=-1"], r"route_weights\.history\.tickets"),
        # the chain after the sources: level 0 judged on a retriever the sources lack
        (["fallback=chain", "retrievers=[dense]"], r"fallback\.accept\.stage: bm25 is not"),
    ],
)
def test_bad_source_configs_are_one_line_errors(small_sample, tmp_path, extra, message):
    cfg = compose_evaluate(overrides(small_sample, *extra), tmp_path / "x")
    with pytest.raises(ConfigError, match=message) as err:
        pipe = build_pipeline(cfg)
        pipe.load_corpus(*_corpus(cfg))
    assert "\n" not in str(err.value)


def test_sample_queries_file_is_unchanged_by_the_stage():
    """The expected sources come from the qrels: queries.jsonl carries no source labels."""
    for line in (SAMPLE / "queries.jsonl").read_text(encoding="utf-8").splitlines():
        assert "sources" not in json.loads(line)["metadata"]


def test_llm_router_rules_first_then_the_model_cached(small_sample, tmp_path):
    """sources=llm: a query a rule takes costs no call; the model routes the others (its reply's
    source names), an unusable reply searches the default; replies are cached."""
    asked: list[str] = []

    def reply(body):
        text = last_user_text(body)
        asked.append(text)
        return "Standards, tickets" if "gloves" in text else "no idea"

    queries = {"a": "SV0432 是什么报警", "b": "which gloves for welding work", "c": "hmm"}
    with FakeOpenAI(reply) as fake:
        args = ["sources=llm", "generator=openai", f"generator.base_url={fake.url}"]
        cfg = compose_evaluate(overrides(small_sample, *args, "generator.model=fake"), tmp_path)
        pipe = build_pipeline(cfg)
        pipe.load_corpus(*_corpus(cfg))
        result = pipe.run(queries, 10)
        routes = {q: (r.route, r.sources) for q, r in result.routes.items()}
        assert routes == {
            "a": ("equipment", ("manuals", "tickets")),  # a rule: no call
            "b": ("llm", ("tickets", "standards")),
            "c": ("llm_unparsed", ("manuals", "tickets")),  # the rules' default
        }
        assert len(fake.requests) == 2 and "standards:" in asked[0]
        assert result.stats["routing/llm_calls"] == 2
        again = build_pipeline(cfg)
        again.load_corpus(*_corpus(cfg))
        assert again.run(queries, 10).routes == result.routes
        assert len(fake.requests) == 2  # read back from the stage cache


# -- sources with the fallback chain ---------------------------------------------------------------


def test_the_fallback_chain_runs_after_the_routed_merge(small_sample, tmp_path):
    """Level 0 is the routed run, judged per query on BM25 in its sources' own scores (a raw
    threshold keeps its units whatever the merge); a refused query goes to the levels, which
    search without routing (``bm25_unfiltered``: every source's chunks)."""
    cfg = compose_evaluate(overrides(small_sample, "fallback=chain"), tmp_path / "fb")
    pipe = build_pipeline(cfg)
    assert isinstance(pipe, RoutedFallbackPipeline)
    assert isinstance(pipe, SourcesPipeline)
    metrics = evaluate(cfg)
    n = metrics["n_queries"]
    levels = [metrics[f"fallback/level_{i}"] for i in range(4)]
    assert sum(levels) == n
    # RRF-merged BM25 scores are below 1: judged on them, no query would reach 4.5 at level 0
    assert 0 < levels[0] < n and levels[2] > 0
    assert metrics["routing/recall"] == 1.0  # the routing metrics are still there
    table = pd.read_parquet(Path(cfg.paths.output_dir) / "per_query.parquet").set_index("query_id")
    # level 0 by hand: the best raw BM25 score among the query's routed sources reaches 4.5
    loaded = build_pipeline(cfg)
    loaded.load_corpus(*_corpus(cfg))
    assert isinstance(loaded, RoutedFallbackPipeline)
    data = _data(cfg)
    queries = {q: x.text for q, x in data.queries.items()}
    result = loaded.run(queries, None, 0, {q: x.metadata for q, x in data.queries.items()})
    bm25 = {s.name: s.pipeline.run(queries).runs["bm25"] for s in loaded.sources}
    for qid, routing in result.routes.items():
        best = max(
            (max(bm25[s].get(qid, {}).values(), default=0.0) for s in routing.sources),
            default=0.0,
        )
        assert (table.loc[qid, "fallback_level"] == 0) == (best >= 4.5 and bool(result.final[qid]))
    # a query answered at level 0 returns only its routed sources' chunks; the unfiltered level
    # searched every source
    owner = loaded.doc_sources()
    chunks = loaded.all_chunks
    for qid, level in result.fallback_level.items():
        docs = {chunks[c].doc_id for c in result.final[qid]}
        if level == 0:
            assert {owner[d] for d in docs} <= set(result.routes[qid].sources), qid
    assert set(loaded.levels[1].pipeline.chunks) == set(loaded.searched_corpus()[0])
    # per_query's `sources` column names what the answering level searched; `route` stays the
    # router's choice (what the routing metrics score)
    every = ",".join(s.name for s in loaded.sources)
    names = [lv.name for lv in loaded.levels]
    assert names == ["standards", "bm25_unfiltered"]
    seen = set()
    for qid, row in table.iterrows():
        level = int(row["fallback_level"])
        seen.add(level)
        assert row["route"] == result.routes[qid].route
        want = {
            0: ",".join(result.routes[qid].sources),
            1: "fallback:standards",
            2: every,
            3: "",
        }[level]
        assert row["sources"] == want, qid
    assert {0, 2} <= seen


def _data(cfg):
    from rag_lab.pipeline.build import build_dataset

    return build_dataset(cfg).load()


def test_route_weights_replace_the_source_weights_for_their_route():
    merge = Merge(weights={"b": 0.5}, route_weights={"history": {"b": 2.0, "a": 0.25}})
    assert merge.weights_for(Routing("equipment", ("a", "b"))) == {"a": 1.0, "b": 0.5}
    assert merge.weights_for(Routing("history", ("a", "b"))) == {"a": 0.25, "b": 2.0}
    # a route of several rules: its own entry, else per source the first of its rules weighing it
    assert merge.weights_for(Routing("equipment+history", ("a", "b"))) == {"a": 0.25, "b": 2.0}
    both = Merge(route_weights={"equipment": {"a": 3.0}, "history": {"a": 0.1, "b": 2.0}})
    assert both.weights_for(Routing("equipment+history", ("a", "b"))) == {"a": 3.0, "b": 2.0}
    routes = {"q": Routing("equipment", ("a", "b")), "p": Routing("history", ("a", "b"))}
    runs = {"a": {"q": {"x": 1.0}, "p": {"x": 1.0}}, "b": {"q": {"z": 1.0}, "p": {"z": 1.0}}}
    merged = merge.merge(runs, routes, 10)
    assert merged["q"] == pytest.approx({"x": 1 / 61, "z": 0.5 / 61})  # the source weights
    assert merged["p"] == pytest.approx({"x": 0.25 / 61, "z": 2 / 61})  # the route's
    raw = Merge(method="raw", route_weights={"history": {"b": 3.0}}).merge(runs, routes, 10)
    assert raw["p"] == {"x": 1.0, "z": 3.0} and raw["q"] == {"x": 1.0, "z": 1.0}


def test_the_shipped_history_route_ranks_the_tickets_first(small_sample, tmp_path):
    cfg = compose_evaluate(overrides(small_sample), tmp_path / "h")
    pipe = build_pipeline(cfg)
    pipe.load_corpus(*_corpus(cfg))
    assert isinstance(pipe, SourcesPipeline)
    assert pipe.merging.route_weights == {"history": {"tickets": 1.0, "manuals": 0.5}}
    query = {"h": "三号线输送带变频器过电流跳闸的维修记录"}  # q117: "the repair record of ..."
    shipped = pipe.run(query)
    assert shipped.routes["h"].route == "history"
    pipe.merging = Merge(weights=dict(pipe.merging.weights))  # one weight per source
    flat = pipe.run(query)
    owner, chunks = pipe.doc_sources(), pipe.all_chunks

    def first(result) -> str:
        return owner[chunks[ranked(result.final["h"])[0]].doc_id]

    assert (first(shipped), first(flat)) == ("tickets", "manuals")


def test_llm_router_does_not_take_an_echo_of_its_prompt_as_a_choice():
    """SmolLM2-135M on the sample's test split answered 10 of 19 routing prompts by copying the
    source list it was shown (cut at max_tokens): those names are the prompt's, not a choice,
    and were searched as if chosen. A copied line no longer counts; a name outside it does."""
    from rag_lab.generator.openai import OpenAIGenerator
    from rag_lab.sources import LLMRouter

    descriptions = {
        "manuals": "equipment manuals, procedures and firmware release notes (fault codes)",
        "tickets": "maintenance tickets and logs from the shop floor (how a fault was fixed)",
        "standards": "public safety and electrical standards (earthing, insulation, IP codes)",
    }
    replies = {
        # the whole list echoed, cut short inside the second line (SmolLM2's commonest reply)
        "echo": "- manuals: equipment manuals, procedures and firmware release notes (fault"
        " codes)\n- tickets: maintenance tickets and logs from the",
        # one line echoed after a preamble, cut inside its description
        "one": "The sources to search for are:\n- manuals: equipment manuals, procedures",
        # a copy cut right after the description's first words
        "cut": "standards: public safety",
        # a choice, then the list copied below it: the choice counts
        "choice": "standards\n- manuals: equipment manuals, procedures and firmware release",
        # names in the model's own words are a choice even when they mention a description's word
        "own": "1. VFDs: manuals, procedures, firmware release notes, and tickets",
    }
    with FakeOpenAI(
        lambda body: replies[last_user_text(body).rsplit("Question: ", 1)[1].split("\n")[0]]
    ) as fake:
        router = LLMRouter(
            OpenAIGenerator(base_url=fake.url, model="fake", api_key_env=None),
            descriptions,
            rules={"code": {"pattern": r"E\d{3}", "sources": ["manuals"]}},
            default=["manuals", "tickets"],
        )
        names = ["manuals", "tickets", "standards"]
        got = {q: router.route(q, {}, names) for q in replies}
    assert {q: (r.route, r.sources) for q, r in got.items()} == {
        "echo": ("llm_unparsed", ("manuals", "tickets")),  # the default, not the echoed names
        "one": ("llm_unparsed", ("manuals", "tickets")),
        "cut": ("llm_unparsed", ("manuals", "tickets")),
        "choice": ("llm", ("standards",)),
        "own": ("llm", ("manuals", "tickets")),
    }
    assert len(fake.requests) == 5
    # before the fix the echo's names were taken: the echo would have searched manuals + tickets
    # as the model's choice ("llm"), and a longer echo every source
    assert router.route("E101 on the HX-200", {}, names).sources == ("manuals",)  # rules first


def test_llm_router_with_a_model_of_its_own_generates_no_answers(small_sample, tmp_path):
    """``sources.generator={...}`` with the run's generator unset (how SmolLM2 was measured): the
    model is asked only about the queries no rule takes, and the run writes no answers."""
    asked: list[str] = []

    def reply(body):
        asked.append(last_user_text(body))
        return "tickets"

    with FakeOpenAI(reply) as fake:
        own = f"{{_target_:rag_lab.generator.OpenAIGenerator,base_url:'{fake.url}',model:fake}}"
        cfg = compose_evaluate(
            overrides(small_sample, "sources=llm", f"sources.generator={own}"), tmp_path / "run"
        )
        assert cfg.get("generator") is None
        metrics = evaluate(cfg)
    table = pd.read_parquet(Path(cfg.paths.output_dir) / "per_query.parquet")
    llm = table[table.route == "llm"]
    assert len(llm) > 0 and set(llm.sources) == {"tickets"}
    assert metrics["routing/llm_calls"] == len(asked) == len(llm)  # one call per such query
    assert all(text.endswith("Sources to search:") for text in asked)  # routing prompts only
    assert not any(k.startswith("answer/") for k in metrics)
