"""Serve an export through MLflow: a pyfunc model whose one artifact is the export folder.

``log_export`` logs it (optionally registering it); ``mlflow models serve -m <uri> --env-manager
local`` then answers ``POST /invocations`` with
``{"dataframe_records": [{"query": "...", "k": 5}]}``.

Contract of ``predict``: input a DataFrame with a string column ``query`` and optional columns
``k`` (integer; default ``DEFAULT_K``; a missing/NaN ``k`` takes the default) and ``as_of`` (an
ISO date); output one row per retrieved chunk, ordered by (``query_index``, ``rank``), with
columns ``OUTPUT_COLUMNS``: the chunk, its contract fields, and its query's flags (the reply of
``rag-lab serve``'s ``/v1/retrieve``, ``rag_lab.export.search``, as a table; lists and the
conflicting pairs as JSON text). ``query_index`` is the input row's position (0-based). Rankings
are ``load_pipeline``'s.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import mlflow.pyfunc
import pandas as pd

from rag_lab.errors import ConfigError
from rag_lab.export.search import Flags, Hit

DEFAULT_K = 10
# (column, MLflow type): the hit, its contract fields, then its query's flags
COLUMNS = [
    ("query_index", "long"),
    ("rank", "long"),
    ("chunk_id", "string"),
    ("doc_id", "string"),
    ("score", "double"),
    ("text", "string"),
    ("source", "string"),
    ("page", "long"),
    ("version", "string"),
    ("valid_from", "string"),
    ("valid_to", "string"),
    ("section_type", "string"),
    ("source_type", "string"),
    ("entity_tags", "string"),
    ("credibility", "double"),
    ("stale", "boolean"),
    ("conflicts", "string"),
    ("fallback_level", "string"),
    ("no_trustworthy_result", "boolean"),
]
OUTPUT_COLUMNS = [name for name, _ in COLUMNS]
DEFAULT_MODEL_NAME = "rag_lab_pipeline"
DEFAULT_EXPERIMENT = "rag_lab_exports"


class RagLabPipelineModel(mlflow.pyfunc.PythonModel):  # type: ignore[name-defined]
    """pyfunc wrapper around :class:`rag_lab.export.ExportedPipeline` (artifact ``export``).
    ``verify`` and ``trust_remote_code`` are ``load_pipeline``'s, fixed when the model is logged
    (class defaults: a model pickled before these existed verifies and trusts nothing)."""

    verify: bool = True
    trust_remote_code: bool = False

    def __init__(self, verify: bool = True, trust_remote_code: bool = False) -> None:
        self.verify, self.trust_remote_code = verify, trust_remote_code

    def load_context(self, context: Any) -> None:
        from rag_lab.export import load_pipeline

        self.pipeline = load_pipeline(
            context.artifacts["export"],
            verify=self.verify,
            trust_remote_code=self.trust_remote_code,
        )

    # model_input is left unannotated: MLflow 3 reads predict's type hints as a schema (and warns
    # on a DataFrame); the signature logged by ``log_export`` describes input and output instead.
    def predict(self, context, model_input, params=None):  # type: ignore[no-untyped-def]
        """``model_input``: DataFrame (or records) with ``query`` and optional ``k``; returns the
        rankings DataFrame described in the module docstring."""
        frame = model_input if isinstance(model_input, pd.DataFrame) else pd.DataFrame(model_input)
        if "query" not in frame.columns:
            raise ValueError(f"input needs a 'query' column; got {list(frame.columns)}")
        default_k = int((params or {}).get("k", DEFAULT_K))
        ks: list[int] = []
        for value in frame["k"] if "k" in frame.columns else [None] * len(frame):
            missing = value is None or bool(pd.isna(value))  # None, NaN, pd.NA: the default
            ks.append(default_k if missing else int(value))
        dates = list(frame["as_of"]) if "as_of" in frame.columns else [None] * len(frame)
        rows: list[dict[str, Any]] = []
        for i, (query, k, as_of) in enumerate(zip(frame["query"], ks, dates)):
            day = None if as_of is None or bool(pd.isna(as_of)) else str(as_of)
            found = self.pipeline.search(str(query), k, as_of=day)
            rows += [_row(i, hit, found.flags) for hit in found.hits]
        return pd.DataFrame(rows, columns=OUTPUT_COLUMNS)


def _row(i: int, hit: Hit, flags: Flags) -> dict[str, Any]:
    meta = hit.metadata
    tags = meta.get("entity_tags")
    level = flags.fallback_name if flags.fallback_name is not None else None
    return {
        "query_index": i,
        "rank": hit.rank,
        "chunk_id": hit.chunk_id,
        "doc_id": hit.doc_id,
        "score": hit.score,
        "text": hit.text,
        "source": hit.source,
        "page": hit.page,
        **{f: None if meta.get(f) is None else str(meta[f]) for f in _TEXT_FIELDS},
        "entity_tags": None if tags is None else json.dumps(tags, ensure_ascii=False),
        "credibility": hit.assessments.get("credibility"),
        "stale": hit.stale,
        "conflicts": json.dumps(flags.conflicts, ensure_ascii=False),
        "fallback_level": level,
        "no_trustworthy_result": flags.no_trustworthy_result,
    }


_TEXT_FIELDS = ("version", "valid_from", "valid_to", "section_type", "source_type")


def _signature() -> Any:
    from mlflow.models import ModelSignature
    from mlflow.types.schema import ColSpec, ParamSchema, ParamSpec, Schema

    inputs = Schema(
        [
            ColSpec("string", "query"),
            ColSpec("long", "k", required=False),
            ColSpec("string", "as_of", required=False),
        ]
    )
    outputs = Schema([ColSpec(kind, name, required=False) for name, kind in COLUMNS])
    return ModelSignature(inputs, outputs, ParamSchema([ParamSpec("k", "long", DEFAULT_K)]))


def log_export(
    export_dir: str | Path,
    tracking_uri: str,
    registered_name: str | None = None,
    *,
    name: str = DEFAULT_MODEL_NAME,
    experiment: str = DEFAULT_EXPERIMENT,
    artifact_location: str | None = None,
    verify: bool = True,
    trust_remote_code: bool = False,
) -> str:
    """Log ``export_dir`` as a pyfunc model in a new run of ``experiment`` at ``tracking_uri``;
    register it as ``registered_name`` when given. Returns the model URI
    (``models:/<name>/<version>`` when registered, else the logged model's URI). The export is
    validated by loading it first.
    A new experiment at a ``sqlite:///`` store keeps artifacts in ``mlartifacts/`` beside the file
    unless ``artifact_location`` says otherwise.
    ``pip_requirements`` names only rag_lab: the model is meant for ``--env-manager local`` in an
    environment where rag_lab is installed (no environment is resolved or built).
    ``verify`` / ``trust_remote_code`` are ``load_pipeline``'s, for this check and for the served
    model's own load."""
    from rag_lab._version import __version__
    from rag_lab.export import load_pipeline
    from rag_lab.tracking.mlflow import MlflowTracker

    export_dir = Path(export_dir).resolve()
    if artifact_location is None and tracking_uri.startswith("sqlite:///"):
        # as conf/tracking/mlflow.yaml: artifacts beside the store, not in the working directory
        artifact_location = str(Path(tracking_uri[len("sqlite:///") :]).parent / "mlartifacts")
    # refuse a broken or tampered export before logging it
    exported = load_pipeline(export_dir, verify=verify, trust_remote_code=trust_remote_code)
    mlflow, exp_id = MlflowTracker(tracking_uri, experiment, artifact_location).connect()
    with mlflow.start_run(experiment_id=exp_id, run_name=f"export {export_dir.name}"):
        export = exported.config.get("export") or {}
        mlflow.set_tags(
            {
                "rag_lab.export": str(export_dir),
                "dataset": str(export.get("dataset", "")),
                "dataset_fingerprint": str(export.get("dataset_fingerprint", "")),
            }
        )
        info = mlflow.pyfunc.log_model(
            name=name,
            python_model=RagLabPipelineModel(verify, trust_remote_code),
            artifacts={"export": str(export_dir)},
            pip_requirements=[f"rag_lab=={__version__}"],
            signature=_signature(),
            registered_model_name=registered_name,
        )
    if registered_name:
        version = getattr(info, "registered_model_version", None)
        if version is None:
            raise ConfigError(
                f"registering {registered_name!r} at {tracking_uri} did not return a version"
            )
        return f"models:/{registered_name}/{version}"
    return str(info.model_uri)
