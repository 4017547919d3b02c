"""Load an export folder back (``load_pipeline``) behind the allow-list, and re-score it on a
labelled split (``evaluate_exported``). The folder's layout and the contracts are in
``rag_lab.export.bundle``.

- ``load_pipeline`` refuses, before instantiating anything: any ``_target_`` outside
  ``rag_lab.pipeline.build.ALLOWED_TARGET_PREFIXES`` anywhere in ``pipeline.yaml``; files that
  differ from ``manifest.json`` (``verify=False`` skips the check; an export without one, written
  by rag_lab 0.1, loads with a warning); code-loading arguments (``trust_remote_code: true`` ...,
  ``rag_lab.pipeline.build.check_code_loading``) unless ``trust_remote_code=True``; bundled-model
  and index paths outside the export; a stage whose class is not of its slot's protocol. It builds
  the stages with ``build_pipeline`` and restores chunks and indexes from disk
  (``Pipeline.restore``: no encoding of documents).
- ``ExportedPipeline.retrieve*`` runs the same ``Pipeline.run`` as evaluation at ``retrieve_k``,
  then cuts to ``k``: for ``k <= retrieve_k`` the ranking is the evaluation's ranking (ties by
  ascending chunk id, rag_lab's one rule).
"""

from __future__ import annotations

import datetime as dt
import gzip
import json
import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from omegaconf import DictConfig, OmegaConf

from rag_lab._deprecated import upgrade_targets
from rag_lab.access import PRINCIPAL_FIELD
from rag_lab.contract.age import AgeRule
from rag_lab.errors import ConfigError
from rag_lab.export.bundle import CHUNKS_FILE, INDEXES_DIR, PIPELINE_FILE, check_names
from rag_lab.export.manifest import MANIFEST_FILE, verify_manifest
from rag_lab.export.portable import apply_endpoints, refuse_interpolations
from rag_lab.export.search import SearchResult, chunk_record, readable_chunk, search, sources
from rag_lab.io.run_folder import write_scores
from rag_lab.io.safe_paths import inside
from rag_lab.metrics.names import is_timing
from rag_lab.metrics.score import check_labels
from rag_lab.pipeline.build import build_pipeline, check_code_loading, check_targets, instantiate
from rag_lab.pipeline.fallback import FallbackPipeline
from rag_lab.pipeline.pipeline import Pipeline
from rag_lab.pipeline.scoring import answer_result, score_result
from rag_lab.pipeline.sources import SourcesPipeline
from rag_lab.ranking import ranked
from rag_lab.types import Chunk, chunk_from_dict

log = logging.getLogger(__name__)


@dataclass
class ExportedPipeline:
    """A loaded export: the built ``pipeline`` (chunks set, every retriever's index restored) and
    the ``config`` it was built from. ``chunks`` maps chunk id → chunk (what ``score`` needs)."""

    path: Path
    config: DictConfig
    pipeline: Pipeline
    age_rule: AgeRule = field(default_factory=AgeRule)

    @property
    def chunks(self) -> dict[str, Chunk]:
        return self.pipeline.chunks

    @property
    def retrieve_k(self) -> int:
        return self.pipeline.retrieve_k

    def run(
        self, queries: Mapping[str, str], k: int | None = None, principal: Any = None
    ) -> dict[str, dict[str, float]]:
        """The fused run over ``queries`` at depth ``max(k, retrieve_k)`` (scores as
        evaluation's); ``principal``: who asks (``rag_lab.access``; with a ``permissions``
        policy, ``None`` is anonymous)."""
        depth = max(int(k or 0), self.pipeline.retrieve_k)
        meta = {q: {PRINCIPAL_FIELD: principal} for q in queries}
        return self.pipeline.run(dict(queries), depth, query_metadata=meta).final

    def _rows(self, scores: Mapping[str, float], k: int) -> list[dict[str, Any]]:
        out = []
        chunks = self.pipeline.all_chunks  # a fallback level's or a source's chunks too
        for rank, cid in enumerate(ranked(scores)[:k], 1):
            c = chunks[cid]
            out.append(
                {
                    "chunk_id": cid,
                    "doc_id": c.doc_id,
                    "text": c.text,
                    "metadata": dict(c.metadata),
                    "score": float(scores[cid]),
                    "rank": rank,
                }
            )
        return out

    def retrieve_batch(
        self, queries: Mapping[str, str] | Sequence[str], k: int = 10, principal: Any = None
    ) -> dict[str, list[dict[str, Any]]]:
        """Top ``k`` chunks per query, best first: ``{qid: [{chunk_id, doc_id, text, metadata,
        score, rank}, ...]}`` (rank is 1-based). A sequence of strings gets ids ``"0"``, ``"1"``,
        ... A query matching nothing gets an empty list."""
        if k < 1:
            raise ValueError(f"k must be >= 1, got {k}")
        if isinstance(queries, str):
            raise TypeError("retrieve_batch takes several queries; use retrieve(query) for one")
        qmap = (
            dict(queries)
            if isinstance(queries, Mapping)
            else {str(i): q for i, q in enumerate(queries)}
        )
        for qid, text in qmap.items():
            if not isinstance(text, str):
                raise TypeError(f"query {qid!r} is {type(text).__name__}, expected str")
        if not qmap:
            return {}
        final = self.run(qmap, k, principal)
        return {qid: self._rows(final.get(qid, {}), k) for qid in qmap}

    def retrieve(self, query: str, k: int = 10, principal: Any = None) -> list[dict[str, Any]]:
        """Top ``k`` chunks for one query (same dicts as ``retrieve_batch``)."""
        return self.retrieve_batch({"q": query}, k, principal)["q"]

    def search(
        self,
        query: str,
        k: int = 10,
        *,
        as_of: str | dt.date | None = None,
        filters: Mapping[str, Any] | None = None,
        metadata: Mapping[str, Any] | None = None,
        today: dt.date | None = None,
        principal: Any = None,
    ) -> SearchResult:
        """One query with every chunk's contract fields, the query's flags and each stage's time
        (``rag_lab.export.search``; the server's and the MCP tool's reply)."""
        return search(
            self.pipeline,
            query,
            k,
            as_of=as_of,
            filters=filters,
            metadata=metadata,
            age_rule=self.age_rule,
            today=today,
            principal=principal,
        )

    def get_chunk(self, chunk_id: str, principal: Any = None) -> dict[str, Any] | None:
        """One chunk by id; ``None`` when there is none or ``principal`` may not read it."""
        chunk = readable_chunk(self.pipeline, chunk_id, principal)
        return None if chunk is None else chunk_record(chunk)

    def sources(self) -> list[dict[str, Any]]:
        """Every document the export can return, once: ``doc_id``, ``source``, ``source_type``,
        ``last_updated`` (``rag_lab.contract.age.source_date``) and the fallback ``level`` whose
        corpus holds it (``main`` for the main corpus)."""
        return sources(self.pipeline)

    def knowledge_sources(self) -> dict[str, dict[str, Any]]:
        """Over several routed sources: each source's retrievers and chunk count
        (``{}`` for a pipeline over one corpus)."""
        pipe = self.pipeline
        if not isinstance(pipe, SourcesPipeline):
            return {}
        return {
            s.name: {"retrievers": list(s.pipeline.retrievers), "n_chunks": len(s.pipeline.chunks)}
            for s in pipe.sources
        }

    def health(self, today: dt.date | None = None) -> dict[str, Any]:
        """Source health: the stale sources (older than ``age_rule`` allows for their type) and
        the undated ones, with the rule and the day it was judged on."""
        day = today or dt.date.today()
        stale, undated = [], []
        for src in self.sources():
            meta = {"source_type": src["source_type"], "updated": src["last_updated"]}
            age = self.age_rule.age(meta, day)
            if age is None:
                undated.append(src["doc_id"])
            elif self.age_rule.stale(meta, day):
                stale.append(
                    {
                        **src,
                        "age_days": age,
                        "max_age_days": self.age_rule.limit(src["source_type"]),
                    }
                )
        return {
            "today": day.isoformat(),
            "max_age_days": dict(self.age_rule.max_age_days),
            "n_sources": len(self.sources()),
            "stale": stale,
            "undated": undated,
        }


def _set_key(config: DictConfig, dotted: str, value: str) -> None:
    if OmegaConf.select(config, dotted, default=None) is not None:
        OmegaConf.update(config, dotted, value, merge=False)


_warned_unverified: set[Path] = set()


def _verify(root: Path) -> None:
    if not verify_manifest(root) and root not in _warned_unverified:
        _warned_unverified.add(root)
        log.warning(
            "%s has no %s (written by rag_lab 0.1): its files cannot be verified; "
            "load only exports you trust",
            root,
            MANIFEST_FILE,
        )


def load_pipeline(
    path: str | os.PathLike[str],
    *,
    verify: bool = True,
    trust_remote_code: bool = False,
    endpoints: Mapping[str, Mapping[str, Any]] | None = None,
) -> ExportedPipeline:
    """Load an export folder written by ``export_pipeline``.

    Raises ``ConfigError`` (or ``DataError`` for a changed file), before anything is
    instantiated, when ``pipeline.yaml`` is missing or malformed; holds an interpolation
    (``${...}``: the file is plain data, ``rag_lab.export.portable``); names a ``_target_``
    outside the allow-list or not resolving to an allowed class (``check_targets``, on the whole
    file); with ``verify``, when a file differs from ``manifest.json``, is missing from the
    folder or is not in the manifest (an export without a manifest loads with one warning);
    unless ``trust_remote_code``, when the file sets a code-loading argument
    (``check_code_loading``: ``trust_remote_code: true`` anywhere, also inside
    ``model_kwargs``); when a retriever name is not a plain name or a bundled path leads outside
    the folder; when a stage calls an endpoint that ``endpoints`` does not name
    (``{stage: {"base_url": URL, "api_key_env": NAME}}``; the file's own are never used); when a
    stage's class does not satisfy its slot's protocol (``build_pipeline``); or when an index is
    missing. Document embeddings and BM25 statistics are read from ``indexes/``; only queries are
    encoded (the dense model loads on the first query)."""
    root = Path(path).expanduser().resolve()
    cfg_path = root / PIPELINE_FILE
    if not cfg_path.is_file():
        raise ConfigError(f"{root}: no {PIPELINE_FILE} (not a rag_lab export folder)")
    try:
        raw = yaml.safe_load(cfg_path.read_text())
    except yaml.YAMLError as exc:
        raise ConfigError(f"{cfg_path}: not valid YAML ({exc})") from None
    if not isinstance(raw, dict) or not isinstance(raw.get("retrievers"), dict):
        raise ConfigError(f"{cfg_path}: expected a mapping with `retrievers`")
    refuse_interpolations(raw, str(cfg_path))
    raw = _upgrade(raw, cfg_path)
    try:
        check_targets(raw)
        if not trust_remote_code:
            check_code_loading(raw)
    except ConfigError as exc:
        raise ConfigError(f"{cfg_path}: refusing to load: {exc}") from None
    check_names(raw, cfg_path)
    if verify:
        _verify(root)
    export = raw.get("export") or {}
    for section in ("bundled_models", "bundled_files", "levels", "sources", "endpoints"):
        if not isinstance(export.get(section) or {}, Mapping):
            raise ConfigError(f"{cfg_path}: export.{section} must be a mapping")
    apply_endpoints(raw, dict(endpoints or {}), str(cfg_path))
    config = OmegaConf.create(raw)
    for section in ("bundled_models", "bundled_files"):
        for dotted, rel in (export.get(section) or {}).items():
            where = f"{cfg_path}: refusing to load: export.{section}.{dotted}"
            _set_key(config, str(dotted), str(inside(root, str(rel), where)))
    levels = export.get("levels") or {}
    for name, level in levels.items():
        if isinstance(level, Mapping) and level.get("corpus"):
            where = f"{cfg_path}: refusing to load: export.levels.{name}.corpus"
            folder = inside(root, str(level["corpus"]), where)
            _set_key(config, f"fallback.levels.{name}.corpus", str(folder))
    parts = export.get("sources") or {}
    if parts and not raw.get("sources"):
        raise ConfigError(f"{cfg_path}: refusing to load: export.sources without a sources config")
    for name, part in parts.items():
        if isinstance(part, Mapping) and part.get("corpus"):
            where = f"{cfg_path}: refusing to load: export.sources.{name}.corpus"
            folder = inside(root, str(part["corpus"]), where)
            _set_key(config, f"sources.corpora.{name}.corpus", str(folder))
    pipe = build_pipeline(config)  # cache.dir absent: no stage cache
    chunks = _read_chunks(root / CHUNKS_FILE, cfg_path)
    indexes = {
        name: inside(root, f"{INDEXES_DIR}/{name}", f"{cfg_path}: index of retriever {name!r}")
        for name in pipe.retrievers
    }
    try:
        saved_levels = _levels(root, cfg_path, levels, "levels")
        own: dict[str, Any] = {}  # routed sources: restore(..., sources=...)
        if isinstance(pipe, SourcesPipeline):
            saved = _levels(root, cfg_path, parts, "sources")
            by_source = {n: (c, d) for n, (c, d) in saved.items() if c is not None}
            if len(by_source) != len(saved):
                raise ConfigError(f"{cfg_path}: export.sources: every source needs its corpus")
            own["sources"] = by_source
        if isinstance(pipe, FallbackPipeline):  # RoutedFallbackPipeline too
            pipe.restore(chunks, indexes, saved_levels, **own)
        else:
            pipe.restore(chunks, indexes, **own)
    except ConfigError as exc:
        raise ConfigError(f"{root}: {exc}") from None
    return ExportedPipeline(root, config, pipe)


def _upgrade(raw: dict[str, Any], cfg_path: Path) -> dict[str, Any]:
    """An export of an earlier release read as this release writes one: moved classes by their
    new path; the top-level ``retrieve_k`` of 0.1-0.4 as ``evaluation.retrieve_k``."""
    raw = upgrade_targets(raw)
    if "retrieve_k" in raw:
        evaluation = dict(raw.get("evaluation") or {})
        evaluation.setdefault("retrieve_k", raw.pop("retrieve_k"))
        raw["evaluation"] = evaluation
    if "retrieve_k" not in (raw.get("evaluation") or {}):
        raise ConfigError(f"{cfg_path}: no evaluation.retrieve_k (the retrieval depth)")
    return raw


def _read_chunks(path: Path, where: Path | str) -> list[Chunk]:
    """The chunks saved at ``path``; ``ConfigError`` naming it (and ``where``, the file that
    pointed at it) when it is missing or not a gzipped JSON list of chunks (an export loaded
    with ``verify=False`` may have lost or changed it)."""
    try:
        with gzip.open(path, "rt", encoding="utf-8") as fh:
            rows = json.load(fh)
        if not isinstance(rows, list):
            raise ValueError("not a list")
        return [chunk_from_dict(d) for d in rows]
    except (OSError, EOFError, ValueError, TypeError, KeyError, AttributeError) as exc:
        raise ConfigError(
            f"{where}: refusing to load: {path} is not a saved chunk list "
            f"({type(exc).__name__}: {' '.join(str(exc).split())[:80]})"
        ) from None


def _levels(
    root: Path, cfg_path: Path, levels: Mapping[str, Any], section: str
) -> dict[str, tuple[list[Chunk] | None, dict[str, Path]]]:
    """Each fallback level's (``section`` ``levels``) or routed source's (``sources``) saved
    corpus (None: the main one) and index folders."""
    out: dict[str, tuple[list[Chunk] | None, dict[str, Path]]] = {}
    for name, level in levels.items():
        where = f"{cfg_path}: refusing to load: export.{section}.{name}"
        if not isinstance(level, Mapping) or not isinstance(level.get("indexes"), Mapping):
            raise ConfigError(f"{where}: expected corpus and indexes")
        corpus = level.get("corpus")
        chunks = (
            _read_chunks(inside(root, f"{corpus}/{CHUNKS_FILE}", where), cfg_path)
            if corpus
            else None
        )
        dirs = {
            str(r): inside(root, str(rel), f"{where}.indexes.{r}")
            for r, rel in level["indexes"].items()
        }
        out[str(name)] = (chunks, dirs)
    return out


# ---------------------------------------------------------------- re-evaluate


def evaluate_exported(
    path: str | os.PathLike[str],
    dataset: Mapping[str, Any] | DictConfig | None = None,
    *,
    out_dir: Path | None = None,
    verify: bool = True,
    trust_remote_code: bool = False,
    endpoints: Mapping[str, Mapping[str, Any]] | None = None,
    **dataset_overrides: Any,
) -> dict[str, float]:
    """Score an export on a labelled split and return its flat metrics: the quality metrics of
    ``evaluate`` (``rag_lab.pipeline.scoring``: ranking, evidence, miss reasons, conflict flags,
    refusals, fallback levels and, with a generator, the answer metrics), per category and
    counts, plus ``n_documents`` / ``n_chunks``; no timings. Each query's metadata (``as_of``)
    reaches the stages that read it, as in ``evaluate``. ``dataset`` is a dataset config node
    (``_target_`` + arguments, allow-listed); by default the export's own source run's dataset is
    re-read from ``<source_run>/config_resolved.yaml``.
    ``dataset_overrides`` replace its arguments (``split="test"``, ``path=...``). The run uses the
    export's ``evaluation`` settings. With ``out_dir``, writes ``metrics.json``,
    ``per_query.parquet`` and ``dataset_fingerprint`` there (a gate side). A corpus fingerprint
    different from the export's is logged as a warning: the labels may not match the chunks.
    ``verify``, ``trust_remote_code`` and ``endpoints`` are ``load_pipeline``'s."""
    exported = load_pipeline(
        path, verify=verify, trust_remote_code=trust_remote_code, endpoints=endpoints
    )
    export = OmegaConf.select(exported.config, "export", default=None) or {}
    if dataset is None:
        source = Path(str(export.get("source_run", ""))) / "config_resolved.yaml"
        if not source.is_file():
            raise ConfigError(
                f"{path}: give a dataset config (the source run {source.parent} is gone)"
            )
        dataset = yaml.safe_load(source.read_text())["dataset"]
    node: DictConfig = OmegaConf.create(
        OmegaConf.to_container(dataset, resolve=True)  # type: ignore[assignment]
        if isinstance(dataset, DictConfig)
        else dict(dataset)
    )
    for key, value in dataset_overrides.items():
        node[key] = value
    data = instantiate(node, "dataset").load()
    recorded = export.get("corpus_fingerprint")
    if recorded and data.corpus_fingerprint != recorded:
        log.warning(
            "corpus fingerprint %s differs from the export's %s: scoring the export's chunks "
            "against labels of another corpus",
            data.corpus_fingerprint,
            recorded,
        )
    pipe = exported.pipeline
    check_labels(data, {c.doc_id for c in pipe.all_chunks.values()})
    result = pipe.run(
        {q: x.text for q, x in data.queries.items()},
        None,  # the export's depth: evaluation.retrieve_k
        0,
        query_metadata={q: x.metadata for q, x in data.queries.items()},
    )
    metrics, table = score_result(result, pipe, data, exported.config.evaluation)
    # each stage's own counters (fallback levels, flagged shares): the run's, but timings
    metrics.update({k: v for k, v in result.stats.items() if not is_timing(k)})
    table, _ = answer_result(exported.config, data, pipe, result, metrics, table, out_dir)
    if out_dir is not None:
        write_scores(Path(out_dir), metrics, table, data.fingerprint)
    return metrics
