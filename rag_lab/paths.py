"""Where rag_lab finds its own files and where it writes, independent of a checkout.

The configs (``rag_lab/conf``) and the sample dataset (``rag_lab/sample``) ship inside the
package, so a wheel or a non-editable install works from any directory. Runs, the MLflow store
and the stage cache go under ``experiments/`` in the working directory, or under
``$RAG_LAB_EXPERIMENTS`` when set (the config key ``paths.experiments`` overrides both).
"""

from __future__ import annotations

import os
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
CONFIG_DIR = str(PACKAGE_DIR / "conf")
SAMPLE_DIR = PACKAGE_DIR / "sample"


def experiments_dir() -> Path:
    """Default folder for runs, caches and the MLflow store (absolute)."""
    env = os.environ.get("RAG_LAB_EXPERIMENTS")
    return Path(env).expanduser().resolve() if env else Path.cwd().resolve() / "experiments"


def home_dir() -> Path:
    """Where rag_lab keeps what it derives once per machine (rebuilt models, ONNX exports, an
    empty MLflow store): ``$RAG_LAB_HOME``, else ``~/.cache/rag_lab``."""
    return Path(os.environ.get("RAG_LAB_HOME", Path.home() / ".cache" / "rag_lab")).expanduser()


def default_tracking_uri() -> str:
    return f"sqlite:///{experiments_dir() / 'mlflow.db'}"


def register_resolvers() -> None:
    """``${rag_lab_package:}`` (the installed package folder) and ``${rag_lab_experiments:}``."""
    from omegaconf import OmegaConf

    if not OmegaConf.has_resolver("rag_lab_package"):
        OmegaConf.register_new_resolver("rag_lab_package", lambda: str(PACKAGE_DIR))
    if not OmegaConf.has_resolver("rag_lab_experiments"):
        OmegaConf.register_new_resolver("rag_lab_experiments", lambda: str(experiments_dir()))
