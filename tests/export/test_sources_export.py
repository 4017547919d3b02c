"""A run over several routed sources (``sources=rules``) exports and serves (issue 35, item 4):
every source's corpus and indexes travel in the export, the loaded export ranks exactly like the
run (ids and scores, the sample's test split), a served reply says which route and sources each
query used, permissions hold on every source's path, and a tampered or missing source part is
refused in one line."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml

from rag_lab.errors import ConfigError, DataError
from rag_lab.evaluate import evaluate
from rag_lab.export import evaluate_exported, export_pipeline, load_pipeline
from rag_lab.pipeline.build import build_dataset, build_pipeline
from rag_lab.ranking import ranked
from tests.cli.helpers import error_line
from tests.cli.helpers import rag_lab as cli
from tests.compose import compose_evaluate
from tests.export.roundtrip import assert_same_outputs

SAMPLE = Path(__file__).resolve().parents[2] / "datasets" / "maintenance_kb"


@pytest.fixture(scope="module")
def sources_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, dict[str, float], Path]:
    """``dataset=sample sources=rules`` on the test split (hashing embedder), and its export."""
    tmp = tmp_path_factory.mktemp("sources_export")
    cfg = compose_evaluate(
        [
            "dataset=sample",
            "dataset.split=test",
            "sources=rules",
            "embedder=hashing",
            "tracking=none",
            f"cache.dir={tmp / 'cache'}",
        ],
        tmp,
    )
    metrics = evaluate(cfg)
    return cfg, metrics, export_pipeline(Path(cfg.paths.output_dir), tmp / "export")


def test_a_sources_export_ranks_exactly_like_its_run(sources_run):
    cfg, metrics, export = sources_run
    # every source's corpus and indexes are in the export; the main corpus is never searched
    for name in ("manuals", "tickets", "standards"):
        for part in ("chunks.json.gz", "indexes/bm25", "indexes/dense"):
            assert (export / "sources" / name / part).exists(), (name, part)
    assert not (export / "indexes").exists()
    docs = json.loads((export / "sources.json").read_text())
    assert {d["knowledge_source"] for d in docs} == {"manuals", "tickets", "standards"}
    # the re-score gives every output metric of the run (routing and per-source hit rates too)
    again = evaluate_exported(export)
    assert_same_outputs(metrics, again)
    assert again["routing/recall"] == metrics["routing/recall"] == 1.0
    # ids and scores: the run's pipeline (rebuilt from its config, through its stage cache)
    # against the loaded export, query by query
    data = build_dataset(cfg).load()
    pipe = build_pipeline(cfg, data)
    pipe.load_corpus(data.corpus_sources, data.corpus_root, data.corpus_fingerprint)
    queries = {q: x.text for q, x in data.queries.items()}
    meta = {q: x.metadata for q, x in data.queries.items()}
    want = pipe.run(queries, None, 0, meta)
    got = load_pipeline(export).pipeline.run(queries, None, 0, meta)
    assert dict(got.routes) == dict(want.routes)
    assert len({r.route for r in got.routes.values()}) >= 3  # several routes were exercised
    for qid in queries:
        assert ranked(got.final[qid]) == ranked(want.final[qid]), qid
        assert got.final[qid] == pytest.approx(want.final[qid], abs=1e-9), qid
    table = pd.read_parquet(Path(cfg.paths.output_dir) / "per_query.parquet")
    assert dict(zip(table["query_id"], table["route"], strict=True)) == {
        q: r.route for q, r in got.routes.items()
    }


def test_sources_with_the_fallback_chain_export_and_rank_like_the_run(sources_run, tmp_path):
    """``sources=rules fallback=chain``: the levels' corpora and indexes travel too (a level over
    every source's chunks has its own indexes), and the loaded export answers each query at the
    same level with the same ids and scores."""
    cfg, _, _ = sources_run
    chained = compose_evaluate(
        [
            "dataset=sample",
            "dataset.split=test",
            "sources=rules",
            "fallback=chain",
            "embedder=hashing",
            "tracking=none",
            f"cache.dir={cfg.cache.dir}",
        ],
        tmp_path,
    )
    metrics = evaluate(chained)
    assert 0 < metrics["fallback/level_0"] < metrics["n_queries"]
    export = export_pipeline(Path(chained.paths.output_dir), tmp_path / "export")
    assert (export / "levels" / "bm25_unfiltered" / "indexes" / "bm25").is_dir()
    assert_same_outputs(metrics, evaluate_exported(export))
    data = build_dataset(chained).load()
    pipe = build_pipeline(chained, data)
    pipe.load_corpus(data.corpus_sources, data.corpus_root, data.corpus_fingerprint)
    queries = {q: x.text for q, x in data.queries.items()}
    meta = {q: x.metadata for q, x in data.queries.items()}
    want = pipe.run(queries, None, 0, meta)
    got = load_pipeline(export).pipeline.run(queries, None, 0, meta)
    assert dict(got.fallback_level) == dict(want.fallback_level)
    assert dict(got.routes) == dict(want.routes)
    for qid in queries:
        assert ranked(got.final[qid]) == ranked(want.final[qid]), qid
        assert got.final[qid] == pytest.approx(want.final[qid], abs=1e-9), qid


def test_a_served_sources_export_says_which_sources_each_query_used(sources_run):
    from starlette.testclient import TestClient

    from rag_lab.server.http import create_app
    from rag_lab.server.mcp import create_mcp
    from rag_lab.server.service import KnowledgeService, ServeSettings

    _, _, export = sources_run
    owner = {
        d["doc_id"]: d["knowledge_source"]
        for d in json.loads((export / "sources.json").read_text())
    }
    service = KnowledgeService(ServeSettings(export=str(export), warm=False))
    with TestClient(create_app(service)) as client:
        std = client.post("/v1/retrieve", json={"query": "绝缘电阻 最低要求是多少", "k": 5}).json()
        assert std["flags"]["route"] == "standards"
        assert std["flags"]["sources"] == ["standards"]
        assert std["hits"] and {owner[h["doc_id"]] for h in std["hits"]} == {"standards"}
        code = client.post("/v1/retrieve", json={"query": "HX-200 报 E102 怎么处理", "k": 8}).json()
        assert code["flags"]["route"] == "equipment"
        assert code["flags"]["sources"] == ["manuals", "tickets"]
        assert code["hits"] and {owner[h["doc_id"]] for h in code["hits"]} <= {"manuals", "tickets"}
        # a hit of any source can be fetched by id
        first = std["hits"][0]["chunk_id"]
        assert client.get(f"/v1/chunks/{first.replace('#', '%23')}").status_code == 200
        info = client.get("/v1/info").json()
        assert set(info["sources"]) == {"manuals", "tickets", "standards"}
        assert info["sources"]["standards"]["n_chunks"] > 0
        assert info["n_chunks"] == sum(s["n_chunks"] for s in info["sources"].values())
    # the MCP tool answers with the same reply
    assert create_mcp(service) is not None
    assert service.search("绝缘电阻 最低要求是多少", 5)["flags"] == std["flags"]


def _copy(export: Path, tmp: Path) -> Path:
    out = tmp / "copy"
    shutil.copytree(export, out)
    return out


def _edit_yaml(export: Path, change) -> None:
    path = export / "pipeline.yaml"
    doc = yaml.safe_load(path.read_text())
    change(doc)
    path.write_text(yaml.safe_dump(doc, sort_keys=False, allow_unicode=True))


def _one_line(exc: pytest.ExceptionInfo[Exception]) -> str:
    text = str(exc.value)
    assert "\n" not in text
    return text


def test_a_missing_or_tampered_source_part_is_refused_in_one_line(sources_run, tmp_path):
    _, _, export = sources_run
    # a source's chunks gone: the manifest names it; without the check, the loader does
    gone = _copy(export, tmp_path / "a")
    (gone / "sources" / "tickets" / "chunks.json.gz").unlink()
    with pytest.raises(DataError) as err:
        load_pipeline(gone)
    assert "sources/tickets/chunks.json.gz is missing" in _one_line(err)
    with pytest.raises(ConfigError) as err:
        load_pipeline(gone, verify=False)
    assert "sources/tickets/chunks.json.gz is not a saved chunk list" in _one_line(err)
    # a source's index gone
    no_index = _copy(export, tmp_path / "b")
    shutil.rmtree(no_index / "sources" / "standards" / "indexes" / "bm25")
    with pytest.raises(ConfigError) as err:
        load_pipeline(no_index, verify=False)
    assert "sources.corpora.standards: no saved index for retriever 'bm25'" in _one_line(err)
    # a source's saved part dropped from pipeline.yaml, or pointing out of the export
    dropped = _copy(export, tmp_path / "c")
    _edit_yaml(dropped, lambda d: d["export"]["sources"].pop("standards"))
    with pytest.raises(ConfigError) as err:
        load_pipeline(dropped, verify=False)
    assert "sources.corpora.standards: no saved corpus or indexes" in _one_line(err)
    outside = _copy(export, tmp_path / "d")
    _edit_yaml(outside, lambda d: d["export"]["sources"]["tickets"].update(corpus="../../.."))
    with pytest.raises(ConfigError) as err:
        load_pipeline(outside, verify=False)
    assert "export.sources.tickets.corpus" in _one_line(err)
    # a source's chunks swapped for another's: its index names chunks it does not hold
    swapped = _copy(export, tmp_path / "e")
    shutil.copy(
        swapped / "sources" / "manuals" / "chunks.json.gz",
        swapped / "sources" / "tickets" / "chunks.json.gz",
    )
    with pytest.raises(ConfigError) as err:
        load_pipeline(swapped, verify=False)
    assert "sources.corpora.tickets" in _one_line(err)
    # the CLI: exit 2 and one line, for serve as for every command that loads an export
    proc = cli("serve", str(gone), "--no-verify")
    assert proc.returncode == 2
    assert "is not a saved chunk list" in error_line(proc)


# -- permissions on every source's path ----------------------------------------------------------

# who may read what, written into a copy of the sample's Markdown, JSONL and standards files:
# tickets alternate between a group, everyone, no field (nobody: fail-closed), an empty list, the
# group in full width and mixed case, and a group that only resembles it; a manual for alice; a
# standards note for the safety group and one without the field
TICKET_READERS: list[list[str] | None] = [
    ["group:maintenance"],
    ["*"],
    None,
    [],
    ["group:ＭａｉｎｔｅｎａｎｃＥ"],
    ["group:maintenance-team"],
]
MANUAL_READERS = {"ac75-compressor-manual.md": ["user:alice"], "lu10-lubrication-manual.md": None}
STANDARD_READERS: dict[str, list[str] | None] = {
    "std-arc-flash-ppe-en.md": ["group:safety"],
    "std-conductor-colours-zh.md": None,
}
PRINCIPALS: dict[str, Any] = {
    "anonymous": None,
    "bob": {"user": "bob", "groups": ["Maintenance"]},
    "alice": "alice",
    "carol": {"user": "carol", "groups": []},
    "dave": {"user": "dave", "groups": ["maintenance-team ", "safety"]},
}


def _front_matter(path: Path, readers: list[str] | None) -> None:
    text = path.read_text(encoding="utf-8")
    if readers is not None:
        text = text.replace("\n---\n", f"\nreaders: {json.dumps(readers)}\n---\n", 1)
    path.write_text(text, encoding="utf-8")


@pytest.fixture(scope="module")
def acl_sources(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """The sample's Markdown, JSONL and standards files with ``readers`` (every Markdown file not
    named above: everyone); returns the folder and doc id → readers (``None``: no field)."""
    root = tmp_path_factory.mktemp("acl_sources") / "kb"
    root.mkdir()
    for name in ("queries.jsonl", "qrels"):
        src = SAMPLE / name
        (shutil.copytree if src.is_dir() else shutil.copy)(src, root / name)
    readers: dict[str, Any] = {}
    folders = {"standards": root / "standards"}
    for sub in ("manuals", "release_notes"):
        folders[sub] = root / "docs" / sub
    for sub, target in folders.items():
        target.mkdir(parents=True)
        src = SAMPLE / sub if sub == "standards" else SAMPLE / "docs" / sub
        table = STANDARD_READERS if sub == "standards" else MANUAL_READERS
        for f in sorted(src.glob("*.md")):
            shutil.copy(f, target / f.name)
            who = table[f.name] if f.name in table else ["*"]
            _front_matter(target / f.name, who)
            doc_id = re.search(r"^doc_id: (\S+)$", f.read_text(encoding="utf-8"), re.M)
            assert doc_id is not None
            readers[doc_id.group(1)] = who
    lines = []
    for i, line in enumerate((SAMPLE / "docs" / "tickets.jsonl").read_text().splitlines()):
        doc = json.loads(line)
        who = TICKET_READERS[i % len(TICKET_READERS)]
        if who is not None:
            doc["metadata"]["readers"] = who
        readers[doc["_id"]] = who
        lines.append(json.dumps(doc, ensure_ascii=False))
    (root / "docs" / "tickets.jsonl").write_text("\n".join(lines) + "\n")
    return root, readers


def _may_read(readers: list[str] | None, principal: Any) -> bool:
    """The oracle, written out by hand for this fixture's names."""
    if readers is None:
        return False  # unlabelled: nobody (unlabelled=deny)
    if "*" in readers:
        return True
    if principal is None:
        return False
    if isinstance(principal, str):
        principal = {"user": principal, "groups": []}
    tokens = {f"user:{principal['user']}"} | {
        f"group:{g.strip().lower()}" for g in principal.get("groups", [])
    }
    wanted = {
        r.replace("ＭａｉｎｔｅｎａｎｃＥ", "maintenance").lower() for r in readers
    }  # full width and case fold to the plain name
    return bool(tokens & wanted)


QUERIES = [
    "HX-200 报 E102 怎么处理",  # equipment: manuals + tickets
    "上次液压站油温高是怎么修的",  # history: tickets first
    "AC-75 compressor E1020 fault",  # equipment, the manual alice reads
    "arc flash protective clothing rating",  # standards, the safety group's note
    "导线颜色 保护导体 黄绿",  # standards, the note without the field
    "lubrication interval grease",  # default: manuals + tickets
]


def test_permissions_hold_on_every_source_path_of_the_export_and_server(acl_sources, tmp_path):
    from starlette.testclient import TestClient

    from rag_lab.server.http import create_app
    from rag_lab.server.service import KnowledgeService, ServeSettings

    root, readers = acl_sources
    cfg = compose_evaluate(
        [
            "dataset=sample",
            f"dataset.path={root}",
            "embedder=hashing",
            "tracking=none",
            "sources=rules",
            "permissions=readers",
        ],
        tmp_path,
    )
    metrics = evaluate(cfg)
    assert metrics["permission_leaks"] == 0
    export = export_pipeline(Path(cfg.paths.output_dir), tmp_path / "export")
    loaded = load_pipeline(export)
    seen_sources: set[str] = set()
    returned = 0
    for name, principal in PRINCIPALS.items():
        for text in QUERIES:
            found = loaded.search(text, 20, principal=principal)
            seen_sources.update(found.flags.sources)
            for hit in found.hits:
                returned += 1
                assert _may_read(readers[hit.doc_id], principal), (name, text, hit.doc_id)
            for row in loaded.retrieve(text, 20, principal=principal):
                assert _may_read(readers[row["doc_id"]], principal), (name, text, row["doc_id"])
    assert seen_sources == {"manuals", "tickets", "standards"}
    assert returned > 0  # the principals do read something
    # every chunk of every source, fetched by id: only what the principal may read
    chunks = loaded.pipeline.all_chunks
    for name, principal in PRINCIPALS.items():
        for cid, chunk in chunks.items():
            got = loaded.get_chunk(cid, principal)
            assert (got is not None) == _may_read(readers[chunk.doc_id], principal), (name, cid)
    # the server: a maintenance-only ticket reaches bob and never the anonymous caller or dave
    service = KnowledgeService(ServeSettings(export=str(export), warm=False))
    with TestClient(create_app(service)) as c:
        for name, principal in PRINCIPALS.items():
            for text in QUERIES:
                body: dict[str, Any] = {"query": text, "k": 20}
                if principal is not None:
                    body["principal"] = principal
                reply = c.post("/v1/retrieve", json=body).json()
                for hit in reply["hits"]:
                    assert _may_read(readers[hit["doc_id"]], principal), (name, text, hit)
        maintenance = next(
            cid for cid, ch in chunks.items() if readers[ch.doc_id] == ["group:maintenance"]
        )
        url = f"/v1/chunks/{maintenance.replace('#', '%23')}"
        assert c.get(url).status_code == 404
        assert c.get(f"{url}?user=dave&group=maintenance-team").status_code == 404
        assert c.get(f"{url}?user=bob&group=MAINTENANCE").status_code == 200
