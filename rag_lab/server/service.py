"""What a server knows and does, whatever the protocol: the loaded export, its limits, and the
replies (``search``, ``answer``, ``get_chunk``, ``info``, ``health``), each a JSON-able dict.

``ServeSettings`` are the server's limits and knobs; they travel to uvicorn's worker processes as
JSON in ``$RAG_LAB_SERVE_SETTINGS`` (each worker loads the export itself: its index files are
memory-mapped, so workers share their pages).
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from rag_lab._version import __version__
from rag_lab.access import PRINCIPAL_FIELD
from rag_lab.contract.age import AgeRule
from rag_lab.errors import ConfigError
from rag_lab.export.load import ExportedPipeline, load_pipeline
from rag_lab.export.search import check_request
from rag_lab.io.run_folder import read_metrics
from rag_lab.metrics.names import HEADLINE

log = logging.getLogger(__name__)

SETTINGS_ENV = "RAG_LAB_SERVE_SETTINGS"


@dataclass(frozen=True)
class ServeSettings:
    """``export``: the folder; ``k_max``: the largest ``k`` a request may ask; ``max_query_chars``:
    the longest query; ``max_body_bytes``: a larger request body is answered 413 unread;
    ``token_env``: the NAME of the environment variable holding the bearer token (``None``: no
    token); ``max_age_days``: source type → age after which a source is stale (``default`` for
    the rest); ``endpoints``, ``verify``, ``trust_remote_code``: ``load_pipeline``'s; ``warm``: run
    one query before serving, so the first request does not pay for loading models, jieba's
    dictionary and the index files (about 2 s on the sample)."""

    export: str
    k_max: int = 100
    max_query_chars: int = 4096
    max_body_bytes: int = 1_000_000
    token_env: str | None = None
    max_age_days: Mapping[str, int] = field(default_factory=lambda: {"default": 180})
    endpoints: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    verify: bool = True
    trust_remote_code: bool = False
    warm: bool = True

    def to_env(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_env(cls) -> ServeSettings:
        raw = os.environ.get(SETTINGS_ENV)
        if not raw:
            raise ConfigError(f"${SETTINGS_ENV} is not set (start the server with rag-lab serve)")
        return cls(**json.loads(raw))

    def token(self) -> str | None:
        """The bearer token, read from ``token_env`` now (never stored in the settings)."""
        if self.token_env is None:
            return None
        value = os.environ.get(self.token_env, "")
        if not value:
            raise ConfigError(f"--token-env {self.token_env}: the variable is unset or empty")
        return value


class KnowledgeService:
    """One loaded export and what it answers."""

    def __init__(self, settings: ServeSettings) -> None:
        self.settings = settings
        self.exported: ExportedPipeline = load_pipeline(
            settings.export,
            verify=settings.verify,
            trust_remote_code=settings.trust_remote_code,
            endpoints=settings.endpoints,
        )
        self.exported.age_rule = AgeRule(dict(settings.max_age_days))
        self._answerer: Any = None
        self.has_generator = bool(self.exported.config.get("generator"))
        if settings.warm:
            self._warm_up()

    def _warm_up(self) -> None:
        """One English-and-Chinese query through every retrieval stage; a failure is a warning
        (the same failure answers the first request, as an error reply)."""
        try:
            self.exported.search("warm-up 预热", 1)
        except Exception as err:  # noqa: BLE001 - reported, and met again by a real request
            log.warning("warm-up query failed (%s): %s", type(err).__name__, err)

    def search(
        self,
        query: str,
        k: int = 10,
        as_of: str | None = None,
        filters: Mapping[str, Any] | None = None,
        metadata: Mapping[str, Any] | None = None,
        principal: Any = None,
    ) -> dict[str, Any]:
        check_request(query, k, self.settings.k_max, filters)
        return self.exported.search(
            query, k, as_of=as_of, filters=filters, metadata=metadata, principal=principal
        ).to_dict()

    def answer(
        self,
        query: str,
        as_of: str | None = None,
        filters: Mapping[str, Any] | None = None,
        metadata: Mapping[str, Any] | None = None,
        principal: Any = None,
    ) -> dict[str, Any]:
        check_request(query, 1, self.settings.k_max, filters)
        if principal is not None:
            metadata = {**dict(metadata or {}), PRINCIPAL_FIELD: principal}
        if self._answerer is None:
            from rag_lab.export.answer import Answerer

            self._answerer = Answerer(self.exported.pipeline, self.exported.config)
        result = self._answerer.answer(
            query, as_of=as_of, filters=filters, metadata=metadata, age_rule=self.exported.age_rule
        )
        return result.to_dict()

    def get_chunk(self, chunk_id: str, principal: Any = None) -> dict[str, Any] | None:
        return self.exported.get_chunk(chunk_id, principal)

    def health(self) -> dict[str, Any]:
        return self.exported.health(dt.date.today())

    def info(self) -> dict[str, Any]:
        """The pipeline card, the data it was built from and the metrics it won on."""
        root = Path(self.exported.path)
        export = dict(self.exported.config.get("export") or {})
        metrics: dict[str, Any] = {}
        for label, name in (("selection", "metrics.json"), ("report", "metrics_test.json")):
            if (root / name).is_file():
                values = read_metrics(root / name)
                metrics[label] = {m: values[m] for m in HEADLINE if m in values}
        card_file = root / "card.md"
        card = card_file.read_text(encoding="utf-8") if card_file.is_file() else ""
        pipe = self.exported.pipeline
        return {
            "rag_lab": __version__,
            "export": str(root),
            "dataset": export.get("dataset"),
            "split": export.get("split"),
            "dataset_fingerprint": export.get("dataset_fingerprint"),
            "corpus_fingerprint": export.get("corpus_fingerprint"),
            "n_chunks": len(pipe.all_chunks),
            "retrievers": list(pipe.retrievers),
            "sources": self.exported.knowledge_sources(),
            "postprocess": list(pipe.postprocessors),
            "retrieve_k": pipe.retrieve_k,
            "k_max": self.settings.k_max,
            "answers": self.has_generator,
            "endpoints": sorted(self.settings.endpoints),
            "metrics": metrics,
            "health": self.health(),
            "card": card,
        }
