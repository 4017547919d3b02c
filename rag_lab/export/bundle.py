"""Export a finished pipeline as a self-contained folder (loaded back by ``rag_lab.export.load``).

An *export* is what a run (or a sweep's winner) selected, frozen so it can answer queries without
the corpus files, the stage cache or Hydra::

    <export>/
      pipeline.yaml          resolved stage configs (no dataset/tracking/paths/hydra/sweep/cache;
                             plain data, no interpolation; endpoints blanked) and an ``export``
                             section (provenance, bundled paths, fallback levels, the endpoints
                             the run used, corpus fingerprint)
      chunks.json.gz         every chunk (``rag_lab.types.chunk_to_dict``)
      indexes/<retriever>/   each retriever's persisted index (``save_index``)
      levels/<level>/        a fallback level's own corpus (``chunks.json.gz``) and its indexes
                             (``indexes/<retriever>/``; a retriever shared with the main
                             pipeline over the main corpus reuses ``indexes/<retriever>``)
      sources/<source>/      a routed source's corpus (``chunks.json.gz``) and its indexes
                             (``indexes/<retriever>/``), for a run over several sources
                             (``sources=rules``: then ``chunks.json.gz`` holds every source's
                             chunks and there is no ``indexes/``: the main corpus is never
                             searched)
      files/                 files stage settings name (a synonyms dictionary, a GGUF model)
      model/                 the dense embedder's weights, only when they were a local folder that
                             is not one of the offline model ids (``model/<retriever>/`` when
                             several retrievers bundle one)
      adapter/               a LoRA embedder's adapter folder (``embedder=lora``), when local
      reranker/              a cross-encoder reranker's weights (``reranker=cross_encoder``),
                             when local
      metrics.json           the run's (dev/selection) metrics, ``per_query.parquet`` and
      per_query.parquet      ``dataset_fingerprint`` beside them: ``rag-lab gate`` reads the
      dataset_fingerprint    folder as a side
      metrics_test.json      the report-split metrics, when a test run was given
      card.md                human-readable summary
      sources.json           every document: its source, type, last update and fallback level
      manifest.json          sha256 of every other file (``rag_lab.export.manifest``)

Contracts:

- ``export_pipeline`` never re-embeds what the run's stage cache holds (it builds the pipeline
  from the run's resolved config, cache included) and refuses when the dataset on disk no longer
  has the fingerprint the run recorded (the export's chunks would not be what was scored).
- Every name that becomes a path (retrievers, post-processors) is one plain path component
  (``rag_lab.io.safe_paths.plain_name``): nothing is written outside ``out_dir``. ``overwrite``
  replaces only an export (a folder with ``pipeline.yaml``).
- Every stage ``evaluate`` runs is carried: query transforms (their files bundled), retrievers,
  fusion (routed too), post-processors, the fallback chain with every level's corpus and indexes,
  the routed sources (the router, every source's corpus and indexes), context stages, the
  generator and the judge. A stage that cannot be carried is refused by name
  with the reason (a retriever that cannot save its index).
- What an export can make its loader do is in ``rag_lab.export.portable``: nothing is resolved,
  no endpoint is reached that the user did not name.
- ``rag_lab.export.load`` says what loading checks and how an export ranks.
"""

from __future__ import annotations

import gzip
import json
import logging
import os
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from importlib import metadata as importlib_metadata
from pathlib import Path
from typing import Any

import yaml
from omegaconf import OmegaConf

from rag_lab._deprecated import upgrade_targets
from rag_lab.errors import ConfigError, DataError
from rag_lab.export.manifest import write_manifest
from rag_lab.export.portable import (
    STAGE_SECTIONS,
    bundle_files,
    escape_interpolations,
    strip_endpoints,
)
from rag_lab.export.search import sources
from rag_lab.io.run_folder import (
    FINGERPRINT_FILE,
    METRICS_FILE,
    PER_QUERY_FILE,
    read_metrics,
)
from rag_lab.io.safe_paths import plain_name
from rag_lab.metrics.names import HEADLINE
from rag_lab.pipeline.build import (
    build_dataset,
    build_pipeline,
    resolve_tokenizers,
)
from rag_lab.pipeline.fallback import FallbackPipeline
from rag_lab.pipeline.sources import SourcesPipeline
from rag_lab.retrievers.base import PersistentRetriever
from rag_lab.types import Chunk, chunk_to_dict

log = logging.getLogger(__name__)

FORMAT_VERSION = 1
PIPELINE_FILE = "pipeline.yaml"
CHUNKS_FILE = "chunks.json.gz"
INDEXES_DIR = "indexes"
LEVELS_DIR = "levels"
SOURCES_DIR = "sources"  # each routed source's corpus and indexes (sources=rules)
SOURCES_FILE = "sources.json"  # every document with its type, last update and fallback level
# sections of an evaluate config that describe where a run read and wrote, not the pipeline
DROPPED_SECTIONS = ("dataset", "tracking", "paths", "hydra", "sweep", "cache")
# what defines the rankings, compared between the exported run and its test run: every stage
# section but the judge (it scores answers, never orders them)
PIPELINE_SECTIONS = tuple(s for s in STAGE_SECTIONS if s != "judge")
# distribution names tried in order for each package the card reports
VERSIONED_PACKAGES: dict[str, tuple[str, ...]] = {
    "rag_lab": ("rag_lab", "rag-lab"),
    "sentence-transformers": ("sentence-transformers",),
    "transformers": ("transformers",),
    "torch": ("torch",),
    "faiss": ("faiss-cpu", "faiss-gpu", "faiss"),
    "bm25s": ("bm25s",),
    "mlflow": ("mlflow", "mlflow-skinny"),
    # the adapters' frameworks (a foreign component is rebuilt from its recipe, never unpickled)
    "langchain-core": ("langchain-core",),
    "langchain-text-splitters": ("langchain-text-splitters",),
    "llama-index-core": ("llama-index-core",),
}


# ---------------------------------------------------------------- export


def _read_resolved(run_dir: Path) -> dict[str, Any]:
    path = run_dir / "config_resolved.yaml"
    if not path.is_file():
        raise ConfigError(
            f"{run_dir}: no config_resolved.yaml (not a finished `rag-lab evaluate` run folder)"
        )
    for name in (METRICS_FILE, PER_QUERY_FILE, FINGERPRINT_FILE):
        if not (run_dir / name).is_file():
            raise ConfigError(
                f"{run_dir}: no {name} (not a finished `rag-lab evaluate` run folder)"
            )
    resolved = yaml.safe_load(path.read_text())
    if not isinstance(resolved, dict):
        raise ConfigError(f"{path}: expected a mapping")
    return upgrade_targets(resolved)  # a run of an earlier release may name moved classes


def _check_same_pipeline(resolved: Mapping[str, Any], test_run_dir: Path) -> None:
    """Refuse a test run whose stages differ from the exported run's (its metrics would describe
    another pipeline). A test run folder without ``config_resolved.yaml`` is taken on trust."""
    path = test_run_dir / "config_resolved.yaml"
    if not path.is_file():
        return
    a, b = _pipeline_config(resolved), _pipeline_config(yaml.safe_load(path.read_text()))
    differ = [k for k in PIPELINE_SECTIONS if a.get(k) != b.get(k)]
    if _depth(a) != _depth(b):
        differ.append("evaluation.retrieve_k")
    if differ:
        raise ConfigError(
            f"{test_run_dir} ran a different pipeline than the exported run ({', '.join(differ)} "
            f"differ): its metrics cannot be the export's test metrics"
        )


def _depth(config: Mapping[str, Any]) -> Any:
    return (config.get("evaluation") or {}).get("retrieve_k")


def _run_split(run_dir: Path) -> str | None:
    """The dataset split a run folder scored (from its ``config_resolved.yaml``), if known."""
    path = run_dir / "config_resolved.yaml"
    if not path.is_file():
        return None
    split = ((yaml.safe_load(path.read_text()) or {}).get("dataset") or {}).get("split")
    return None if split is None else str(split)


def package_versions() -> dict[str, str]:
    """Installed versions of the packages an export depends on (``"not installed"`` when absent)."""
    out: dict[str, str] = {}
    for label, dists in VERSIONED_PACKAGES.items():
        out[label] = "not installed"
        for dist in dists:
            try:
                out[label] = importlib_metadata.version(dist)
                break
            except importlib_metadata.PackageNotFoundError:
                continue
    return out


def _bundle_models(config: dict[str, Any], staging: Path) -> dict[str, str]:
    """Copy every dense embedder whose ``model`` is a local folder (and not an offline id), every
    LoRA ``adapter`` and a cross-encoder reranker's ``model`` folder into ``staging``; rewrite the
    config to the export-relative path. Returns ``{config key: relative path}``
    (``load_pipeline`` makes those absolute again)."""
    from rag_lab.models.resolve import OFFLINE_MODELS

    local: dict[str, Path] = {}
    for name, rcfg in (config.get("retrievers") or {}).items():
        emb = rcfg.get("embedder") if isinstance(rcfg, Mapping) else None
        model = emb.get("model") if isinstance(emb, Mapping) else None
        if (
            isinstance(model, str)
            and model not in OFFLINE_MODELS
            and Path(model).expanduser().is_dir()
        ):
            local[name] = Path(model).expanduser().resolve()
    bundled: dict[str, str] = {}
    by_source: dict[Path, str] = {}
    for name, src in local.items():
        if src not in by_source:
            rel = "model" if len(set(local.values())) == 1 else f"model/{name}"
            shutil.copytree(
                src, staging / rel, symlinks=False
            )  # follow HF-cache symlinks: self-contained
            by_source[src] = rel
        original = config["retrievers"][name]["embedder"]["model"]
        config["retrievers"][name]["embedder"]["model"] = by_source[src]
        bundled[f"retrievers.{name}.embedder.model"] = by_source[src]
        top = config.get("embedder")
        if (
            isinstance(top, dict) and top.get("model") == original
        ):  # the group the retriever interpolated
            top["model"] = by_source[src]
            bundled["embedder.model"] = by_source[src]
    # LoRA adapters (embedder=lora) and a cross-encoder's weights travel too
    extra: list[tuple[str, dict[str, Any], str, str]] = []
    for name, rcfg in (config.get("retrievers") or {}).items():
        emb = rcfg.get("embedder") if isinstance(rcfg, dict) else None
        if isinstance(emb, dict) and isinstance(emb.get("adapter"), str):
            extra.append((f"retrievers.{name}.embedder.adapter", emb, "adapter", f"adapter/{name}"))
    reranker = config.get("reranker")
    if isinstance(reranker, dict) and isinstance(reranker.get("model"), str):
        extra.append(("reranker.model", reranker, "model", "reranker"))
    for name, node in (config.get("postprocess") or {}).items():  # e.g. a cross-encoder in the list
        if isinstance(node, dict) and isinstance(node.get("model"), str):
            extra.append((f"postprocess.{name}.model", node, "model", f"postprocess/{name}"))
    adapters = {
        str(Path(e[1]["adapter"]).expanduser().resolve()) for e in extra if e[2] == "adapter"
    }
    for dotted, node, key, rel in extra:
        src = Path(node[key]).expanduser()
        if node[key] in OFFLINE_MODELS or not src.is_dir():
            continue
        if key == "adapter" and len(adapters) == 1:
            rel = "adapter"
        if not (staging / rel).exists():
            shutil.copytree(src.resolve(), staging / rel, symlinks=False)
        original = node[key]
        node[key] = rel
        bundled[dotted] = rel
        top = config.get("embedder")
        if key == "adapter" and isinstance(top, dict) and top.get("adapter") == original:
            top["adapter"] = rel
            bundled["embedder.adapter"] = rel
    return bundled


def check_names(config: Mapping[str, Any], source: Path) -> None:
    """Every retriever and post-processor name becomes a folder name in the export
    (``indexes/<name>``, ``model/<name>``, ``postprocess/<name>``): refuse any that is not one
    plain path component, naming ``source`` (the file the names came from)."""
    for group, what in (("retrievers", "retriever"), ("postprocess", "post-processor")):
        for name in config.get(group) or {}:
            plain_name(name, f"{source}: {what} name")


def _check_out_dir(out_dir: Path, overwrite: bool) -> None:
    if not out_dir.exists():
        return
    if not out_dir.is_dir():
        raise ConfigError(f"{out_dir} exists and is not a folder")
    if not any(out_dir.iterdir()):
        return
    if not overwrite:
        raise ConfigError(f"{out_dir} exists and is not empty (pass overwrite=True / --overwrite)")
    if not (out_dir / PIPELINE_FILE).is_file():
        raise ConfigError(
            f"{out_dir} is not empty and not an export (no {PIPELINE_FILE}): --overwrite "
            "replaces only an export folder; choose an empty or new --out"
        )


def _pipeline_config(resolved: Mapping[str, Any]) -> dict[str, Any]:
    """The resolved config minus the run's I/O sections; retrievers no longer point at a cache."""
    config = {k: v for k, v in resolved.items() if k not in DROPPED_SECTIONS}
    config = json.loads(json.dumps(config))  # a deep, plain copy
    stages = [
        *(config.get("retrievers") or {}).values(),
        config.get("reranker"),
        *(config.get("postprocess") or {}).values(),
    ]
    for node in stages:  # runs before 0.2 named the cache in stages; an export has none
        if isinstance(node, dict):
            node.pop("cache_dir", None)
    return config


def _fmt(value: Any) -> str:
    return f"{value:.4f}" if isinstance(value, float) else str(value)


def _card(
    config: Mapping[str, Any],
    export: Mapping[str, Any],
    dev: Mapping[str, Any],
    test: Mapping[str, Any] | None,
) -> str:
    retrievers = config.get("retrievers") or {}
    lines = [
        "# rag_lab pipeline export",
        "",
        f"Created {export['created']} from `{export['source_run']}`.",
        "",
        "## Pipeline",
        "",
        f"- parser: `{(config.get('parser') or {}).get('_target_')}`",
        f"- chunker: `{(config.get('chunker') or {}).get('_target_')}`",
    ]
    for name, rcfg in retrievers.items():
        emb = rcfg.get("embedder") if isinstance(rcfg, Mapping) else None
        extra = (
            f" (embedder `{emb.get('_target_')}`, model `{emb.get('model', '-')}`)"
            if isinstance(emb, Mapping)
            else ""
        )
        lines.append(f"- retriever `{name}`: `{rcfg.get('_target_')}`{extra}")
    fusion = config.get("fusion") if len(retrievers) > 1 else None
    lines.append(
        f"- fusion: `{fusion.get('_target_')}`" if isinstance(fusion, Mapping) else "- fusion: none"
    )
    reranker = config.get("reranker")
    lines.append(
        f"- reranker: `{reranker.get('_target_')}`"
        if isinstance(reranker, Mapping)
        else "- reranker: none"
    )
    lines += [
        f"- retrieve_k: {_depth(config)} (per retriever, before fusion)",
        f"- chunks: {export['n_chunks']}",
        "",
        "## Data",
        "",
        f"- dataset: `{export['dataset']}` (selection split `{export['split']}`)",
        f"- dataset fingerprint: `{export['dataset_fingerprint']}`",
        f"- corpus fingerprint: `{export['corpus_fingerprint']}`",
        "",
    ]
    dev_label = f"{export['split']} (selection)"
    test_label = f"{export.get('test_split') or 'test'} (report)"
    lines += [
        "## Metrics",
        "",
        f"| metric | {dev_label} |" + (f" {test_label} |" if test else ""),
        "|---|---:|" + ("---:|" if test else ""),
    ]
    for m in HEADLINE:
        if m in dev or (test and m in test):
            row = f"| {m} | {_fmt(dev.get(m, '-'))} |"
            lines.append(row + (f" {_fmt(test.get(m, '-'))} |" if test else ""))
    lines += ["", "## Versions", ""]
    lines += [f"- {k}: {v}" for k, v in export["versions"].items()]
    lines += ["", "Load with `rag_lab.load_pipeline(path)`; see docs/export.md.", ""]
    return "\n".join(lines)


def export_pipeline(
    run_dir: Path, out_dir: Path, *, test_run_dir: Path | None = None, overwrite: bool = False
) -> Path:
    """Write the pipeline of the finished evaluate run ``run_dir`` into ``out_dir`` (layout in the
    module docstring) and return ``out_dir``.

    The run's dataset must still be on disk with the fingerprint the run recorded (else
    ``DataError``); its stage cache, when present, spares re-parsing and re-embedding. Every
    retriever must be persistable (``ConfigError`` otherwise, e.g. the ``rank_bm25`` backend).
    ``out_dir`` must not exist or be empty unless ``overwrite``; the folder appears atomically
    (written beside it, then renamed)."""
    run_dir, out_dir = Path(run_dir), Path(out_dir)
    resolved = _read_resolved(run_dir)
    if test_run_dir is not None and not (Path(test_run_dir) / "metrics.json").is_file():
        raise ConfigError(
            f"{test_run_dir}: no metrics.json (test_run_dir must be a finished run folder)"
        )
    check_names(resolved, run_dir / "config_resolved.yaml")
    _check_out_dir(out_dir, overwrite)
    if test_run_dir is not None:
        _check_same_pipeline(resolved, Path(test_run_dir))
    cfg = OmegaConf.create(resolved)
    data = build_dataset(cfg).load()
    recorded = (run_dir / FINGERPRINT_FILE).read_text().strip()
    if data.fingerprint != recorded:
        raise DataError(
            f"the dataset at {cfg.dataset.get('path')} has fingerprint {data.fingerprint}, "
            f"but the run {run_dir} scored {recorded}: the data changed since the run; "
            "re-run evaluate, then export"
        )
    pipe = build_pipeline(cfg, data)
    chunks = pipe.load_corpus(data.corpus_sources, data.corpus_root, data.corpus_fingerprint)
    pipe.index_all()

    out_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", dir=out_dir.parent))
    staging.chmod(0o755)  # mkdtemp makes it private; the export is an ordinary folder
    try:
        if not isinstance(pipe, SourcesPipeline):  # a sources run searches its sources only
            _save_indexes(pipe.retrievers, staging / INDEXES_DIR)
        _write_chunks(staging / CHUNKS_FILE, chunks)
        config = _pipeline_config(resolved)
        levels = _save_levels(pipe, config, staging) if isinstance(pipe, FallbackPipeline) else {}
        parts = _save_sources(pipe, config, staging) if isinstance(pipe, SourcesPipeline) else {}
        # tokenizer=auto: record the choice made for this corpus (a loaded export has no corpus)
        resolve_tokenizers(config.get("retrievers") or {}, "retrievers", data)
        bundled = _bundle_models(config, staging)
        files = bundle_files(config, staging)
        endpoints = strip_endpoints(config)  # the user names them when loading
        escape_interpolations(config)
        for name in (METRICS_FILE, PER_QUERY_FILE, FINGERPRINT_FILE):
            shutil.copy2(run_dir / name, staging / name)
        test_metrics = None
        if test_run_dir is not None:
            shutil.copy2(Path(test_run_dir) / "metrics.json", staging / "metrics_test.json")
            test_metrics = read_metrics(staging / "metrics_test.json")
        export = {
            "format_version": FORMAT_VERSION,
            "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "source_run": str(run_dir.resolve()),
            "test_run": str(Path(test_run_dir).resolve()) if test_run_dir is not None else None,
            "test_split": _run_split(Path(test_run_dir)) if test_run_dir is not None else None,
            "dataset": data.name,
            "split": data.split,
            "dataset_fingerprint": data.fingerprint,
            "corpus_fingerprint": data.corpus_fingerprint,
            "n_chunks": len(chunks),
            "bundled_models": bundled,
            "bundled_files": files,
            "levels": levels,
            "sources": parts,
            "endpoints": endpoints,
            "versions": package_versions(),
        }
        config["export"] = export
        (staging / PIPELINE_FILE).write_text(
            yaml.safe_dump(config, sort_keys=False, allow_unicode=True)
        )
        dev = read_metrics(run_dir / "metrics.json")
        (staging / "card.md").write_text(_card(config, export, dev, test_metrics))
        (staging / SOURCES_FILE).write_text(json.dumps(sources(pipe), indent=1, ensure_ascii=False))
        write_manifest(staging)  # last: it hashes every other file
        if out_dir.exists():
            shutil.rmtree(out_dir)
        os.replace(staging, out_dir)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    log.info(
        "exported %s (%d chunks, retrievers %s) to %s",
        run_dir,
        len(chunks),
        list(pipe.retrievers),
        out_dir,
    )
    return out_dir


def _save_indexes(retrievers: Mapping[str, Any], target: Path) -> None:
    """Each retriever's index into ``target/<name>/``; a retriever that cannot persist is
    refused by name with the reason."""
    for name, retriever in retrievers.items():
        folder = target / name
        folder.mkdir(parents=True)
        if not isinstance(retriever, PersistentRetriever):
            raise ConfigError(
                f"retriever {name!r} ({type(retriever).__name__}) cannot be exported: it cannot "
                "save its index"
            )
        try:
            retriever.save_index(folder)
        except NotImplementedError as exc:
            raise ConfigError(
                f"retriever {name!r} cannot be exported: {exc} "
                f"(e.g. retrievers.{name}.backend=bm25s)"
            ) from None


def _write_chunks(path: Path, chunks: Sequence[Chunk]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.GzipFile(path, "wb", mtime=0) as fh:
        fh.write(json.dumps([chunk_to_dict(c) for c in chunks], ensure_ascii=False).encode())


def _save_levels(
    pipe: FallbackPipeline, config: dict[str, Any], staging: Path
) -> dict[str, dict[str, Any]]:
    """Each fallback level's corpus (when it has its own: ``levels/<name>/chunks.json.gz``) and
    indexes (``levels/<name>/indexes/<retriever>/``; a retriever configured as the main
    pipeline's of the same name over the main corpus reuses ``indexes/<retriever>``; over routed
    sources a level without its own corpus searches every source's chunks: its own indexes). The
    level's ``corpus`` setting becomes its folder in the export. Returns what the loader reads:
    ``{level: {"corpus": relative folder or None, "indexes": {retriever: relative folder}}}``."""
    main_cfg = pipe.stage_configs.get("retrievers") or {}
    out: dict[str, dict[str, Any]] = {}
    for level in pipe.levels:
        plain_name(level.name, "fallback level name")
        sub = level.pipeline
        sub.index_all()
        rel = f"{LEVELS_DIR}/{level.name}"
        indexes: dict[str, str] = {}
        for name in sub.retrievers:
            same = (sub.stage_configs.get("retrievers") or {}).get(name) == main_cfg.get(name)
            searched = not isinstance(pipe, SourcesPipeline)  # the main corpus's indexes saved
            if level.corpus is None and same and searched and name in pipe.retrievers:
                indexes[name] = f"{INDEXES_DIR}/{name}"
        rest = [n for n in sub.retrievers if n not in indexes]
        if rest:
            _save_indexes({n: sub.retrievers[n] for n in rest}, staging / rel / INDEXES_DIR)
            indexes.update({n: f"{rel}/{INDEXES_DIR}/{n}" for n in rest})
        corpus = None
        if level.corpus is not None:
            _write_chunks(staging / rel / CHUNKS_FILE, list(sub.chunks.values()))
            corpus = rel
        config["fallback"]["levels"][level.name]["corpus"] = corpus
        out[level.name] = {"corpus": corpus, "indexes": indexes}
    return out


def _save_sources(
    pipe: SourcesPipeline, config: dict[str, Any], staging: Path
) -> dict[str, dict[str, Any]]:
    """Each source's corpus (``sources/<name>/chunks.json.gz``) and indexes
    (``sources/<name>/indexes/<retriever>/``); the source's ``corpus`` setting becomes its folder
    in the export (its ``include`` patterns then pick nothing: the chunks are restored, not
    parsed). Returns what the loader reads: ``{source: {"corpus": relative folder, "indexes":
    {retriever: relative folder}}}``."""
    out: dict[str, dict[str, Any]] = {}
    for source in pipe.sources:
        plain_name(source.name, "source name")
        sub = source.pipeline
        for name in sub.retrievers:
            plain_name(name, f"sources.corpora.{source.name}: retriever name")
        rel = f"{SOURCES_DIR}/{source.name}"
        _save_indexes(sub.retrievers, staging / rel / INDEXES_DIR)
        _write_chunks(staging / rel / CHUNKS_FILE, list(sub.chunks.values()))
        config["sources"]["corpora"][source.name]["corpus"] = rel
        out[source.name] = {
            "corpus": rel,
            "indexes": {n: f"{rel}/{INDEXES_DIR}/{n}" for n in sub.retrievers},
        }
    return out


def export_sweep(sweep_dir: Path, out_dir: Path, *, overwrite: bool = False) -> Path:
    """Export a sweep's winner: the job named by ``<sweep_dir>/winner.json``, with the winner's
    report-split run (``winner_<sweep.report_split>``, default ``winner_test``) as the test metrics
    when that folder holds a finished run."""
    from rag_lab.sweep.winner import read_winner  # its job must be a folder inside sweep_dir

    sweep_dir = Path(sweep_dir)
    _, run_dir = read_winner(sweep_dir)
    resolved = _read_resolved(run_dir)
    report_split = (resolved.get("sweep") or {}).get("report_split", "test")
    test_dir = sweep_dir / f"winner_{report_split}"
    return export_pipeline(
        run_dir,
        out_dir,
        overwrite=overwrite,
        test_run_dir=test_dir if (test_dir / "metrics.json").is_file() else None,
    )
