"""The HTTP API of ``rag-lab serve`` (in process, through Starlette's test client): what a reply
carries, every bad request answered in one JSON line without a traceback or a server path, the
body limit, the token."""

from __future__ import annotations

import json
import subprocess
import sys
from urllib.parse import quote

import pytest
from starlette.testclient import TestClient

from rag_lab.errors import ConfigError
from rag_lab.export import load_pipeline
from rag_lab.server.http import create_app
from rag_lab.server.run import check_exposure
from rag_lab.server.service import KnowledgeService, ServeSettings

CONTRACT = ("version", "valid_from", "valid_to", "section_type", "source_type", "entity_tags")


@pytest.fixture(scope="module")
def service(production_export) -> KnowledgeService:
    return KnowledgeService(ServeSettings(export=str(production_export)))


@pytest.fixture(scope="module")
def client(service) -> TestClient:
    with TestClient(create_app(service)) as c:
        yield c


def test_a_reply_carries_every_contract_field_flags_and_timings(client, production_export):
    r = client.post("/v1/retrieve", json={"query": "HX-200 换油周期", "k": 5})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["k"] == 5 and 0 < len(body["hits"]) <= 5
    for hit in body["hits"]:
        assert set(CONTRACT) <= set(hit["metadata"])
        assert hit["source"] and "page" in hit  # None where the parser knows no page
        assert hit["text"] and hit["doc_id"] and isinstance(hit["stale"], bool)
    assert [h["rank"] for h in body["hits"]] == list(range(1, len(body["hits"]) + 1))
    pdf = [h for h in body["hits"] if h["source"].endswith(".pdf")]
    assert pdf and any(isinstance(h["page"], int) for h in pdf)
    flags = body["flags"]
    assert set(flags) >= {"conflicts", "fallback_level", "no_trustworthy_result", "stale_sources"}
    assert flags["fallback_name"] in ("main", "standards", "bm25_only", "refused")
    assert {"query_transforms", "bm25", "dense", "after_retrieval"} <= set(body["timings_ms"])
    # the same ranking the library gives
    expected = load_pipeline(production_export).retrieve("HX-200 换油周期", k=5)
    assert [h["chunk_id"] for h in body["hits"]] == [e["chunk_id"] for e in expected]
    assert [h["score"] for h in body["hits"]] == pytest.approx([e["score"] for e in expected])


def test_as_of_picks_the_edition_valid_that_day(client):
    """The HX-200 manual changed its oil change interval in edition 2 (valid from 2023-07-01):
    the metadata filter keeps the edition valid on the query's date."""

    def versions(as_of: str) -> set[str]:
        r = client.post(
            "/v1/retrieve",
            json={
                "query": "HX-200 液压油 更换周期",
                "k": 5,
                "as_of": as_of,
                "filters": {"doc_id": ["hx200-manual-v1", "hx200-manual-v2"]},
            },
        )
        assert r.status_code == 200, r.text
        return {h["metadata"]["version"] for h in r.json()["hits"]}

    assert versions("2022-05-01") == {"1.0"} and versions("2024-05-01") == {"2.0"}


def test_filters_keep_matching_chunks_and_one_matching_nothing_returns_nothing(client):
    r = client.post(
        "/v1/retrieve", json={"query": "E102", "k": 5, "filters": {"source_type": "ticket"}}
    )
    assert r.status_code == 200 and r.json()["hits"]
    assert {h["metadata"]["source_type"] for h in r.json()["hits"]} == {"ticket"}
    r = client.post("/v1/retrieve", json={"query": "E102", "filters": {"source_type": "nope"}})
    body = r.json()
    assert body["hits"] == [] and body["flags"]["no_trustworthy_result"]
    assert body["flags"]["filtered_out"] > 0


@pytest.mark.parametrize(
    "body, where",
    [
        ({"query": None}, "query"),
        ({"query": "x", "k": 2.7}, "k"),
        ({"query": "x", "k": -3}, "k"),
        ({"query": "x", "k": 0}, "k"),
        ({"query": "x", "k": 1e30}, "k"),
        ({"query": "x", "k": 101}, "k"),
        ({"query": "x", "k": True}, "k"),
        ({"query": "x", "k": "3"}, "k"),
        ({"query": ""}, "query"),
        ({"query": "   "}, "query"),
        ({"query": "x" * 5000}, "query"),
        ({"query": "x", "extra": 1}, "extra"),
        ({"query": "x", "as_of": "yesterday"}, "as_of"),
        ({"query": "x", "filters": "source_type"}, "filters"),
        ({}, "query"),
    ],
)
def test_a_bad_request_is_one_json_line_naming_the_field(client, body, where):
    r = client.post("/v1/retrieve", json=body)
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert error["type"] == "invalid_request" and where in error["message"]
    assert "Traceback" not in r.text and "/work/" not in r.text and "site-packages" not in r.text


def test_malformed_json_unknown_routes_and_methods(client):
    r = client.post(
        "/v1/retrieve", content=b"{not json", headers={"content-type": "application/json"}
    )
    assert r.status_code == 400 and r.json()["error"]["message"] == "body: not valid JSON"
    assert client.get("/v1/nope").json()["error"]["type"] == "not_found"
    assert client.get("/v1/retrieve").status_code == 405
    assert client.get("/v1/chunks/no-such-chunk").status_code == 404


def test_a_body_over_the_limit_is_refused_unread(service):
    small = KnowledgeService.__new__(KnowledgeService)
    small.__dict__.update(service.__dict__)
    small.settings = ServeSettings(export=service.settings.export, max_body_bytes=1000)
    with TestClient(create_app(small)) as c:
        r = c.post(
            "/v1/retrieve", content=b"x" * 5000, headers={"content-type": "application/json"}
        )
        assert r.status_code == 413 and r.json()["error"]["type"] == "too_large"

        def chunked():
            for _ in range(10):
                yield b"x" * 500

        r = c.post("/v1/retrieve", content=chunked(), headers={"content-type": "application/json"})
        assert r.status_code == 413
        assert c.post("/v1/retrieve", json={"query": "E102"}).status_code == 200


def test_a_token_guards_every_route_but_healthz(service, monkeypatch):
    monkeypatch.setenv("RAG_TOKEN", "t0ken")
    guarded = KnowledgeService.__new__(KnowledgeService)
    guarded.__dict__.update(service.__dict__)
    guarded.settings = ServeSettings(export=service.settings.export, token_env="RAG_TOKEN")
    with TestClient(create_app(guarded)) as c:
        assert c.post("/v1/retrieve", json={"query": "E102"}).status_code == 401
        bad = {"Authorization": "Bearer wrong"}
        assert c.post("/v1/retrieve", json={"query": "E102"}, headers=bad).status_code == 401
        good = {"Authorization": "Bearer t0ken"}
        assert c.post("/v1/retrieve", json={"query": "E102"}, headers=good).status_code == 200
        assert c.get("/v1/info").status_code == 401 and c.get("/healthz").status_code == 200


def test_an_exposed_address_needs_a_token_or_insecure(monkeypatch):
    s = ServeSettings(export="x")
    with pytest.raises(ConfigError, match="not a loopback address"):
        check_exposure("0.0.0.0", s, insecure=False)
    check_exposure("0.0.0.0", s, insecure=True)
    check_exposure("127.0.0.1", s, insecure=False)
    with pytest.raises(ConfigError, match="RAG_TOKEN: the variable is unset"):
        check_exposure("0.0.0.0", ServeSettings(export="x", token_env="RAG_TOKEN"), False)


def test_info_readyz_and_the_schema(client):
    info = client.get("/v1/info").json()
    assert info["metrics"]["selection"]["ndcg_at_10"] > 0 and info["dataset_fingerprint"]
    assert info["answers"] and "# rag_lab pipeline export" in info["card"]
    ready = client.get("/readyz").json()
    assert ready["status"] == "ready" and isinstance(ready["stale_sources"], list)
    schema = client.get("/openapi.json").json()
    props = schema["components"]["schemas"]["RetrieveRequest"]["properties"]
    assert {"query", "k", "as_of", "filters", "metadata", "principal"} == set(props)
    assert props["k"]["maximum"] == 100 and props["k"]["minimum"] == 1


def test_an_answer_with_its_context_citations_and_verdict(client):
    r = client.post("/v1/answer", json={"query": "HX-200 的液压油多久更换一次？"})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["answer"] and body["context_chunk_ids"]
    assert set(body["cited_chunk_ids"]) <= set(body["context_chunk_ids"])
    assert body["faithfulness"] is not None and isinstance(body["faithful"], bool)
    assert "generator" in body["timings_ms"] and "judge" in body["timings_ms"]


def test_get_chunk(client):
    hit = client.post("/v1/retrieve", json={"query": "E102", "k": 1}).json()["hits"][0]
    r = client.get(f"/v1/chunks/{quote(hit['chunk_id'], safe='')}")  # an id may hold '#'
    assert r.status_code == 200 and r.json()["text"] == hit["text"]
    assert json.loads(json.dumps(r.json()))["metadata"] == hit["metadata"]


def test_the_reply_is_every_field_of_the_result(service):
    """``to_dict`` is written out field by field for speed; it must stay the dataclass's fields."""
    from dataclasses import asdict

    result = service.exported.search("HX-200 换油周期", k=5)
    assert result.hits and result.to_dict() == asdict(result)


def test_the_first_request_finds_the_models_loaded(production_export):
    """The service runs a warm-up query: jieba's dictionary, the dense model and the indexes are
    loaded before the first request (it took ~2 s of the first request's BM25 time before).
    In a fresh interpreter: this one has jieba loaded already."""
    code = (
        "import json, sys\n"
        "from rag_lab.server.service import KnowledgeService, ServeSettings\n"
        "svc = KnowledgeService(ServeSettings(export=sys.argv[1], warm=sys.argv[2] == '1'))\n"
        "print(json.dumps(svc.search('HX-200 换油周期', 3)['timings_ms']))\n"
    )
    took = {}
    for warm in ("1", "0"):
        out = subprocess.run(
            [sys.executable, "-c", code, str(production_export), warm],
            capture_output=True,
            text=True,
            check=True,
            timeout=300,
        ).stdout
        took[warm] = sum(json.loads(out.splitlines()[-1]).values())
    assert took["1"] < 300 < took["0"], took
