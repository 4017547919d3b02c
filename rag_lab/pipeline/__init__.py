"""The pipeline: the stages in order, the corpus they index, and the one place that builds them.

    parse → contract → chunk → query transforms → retrievers → fusion → post-processors
          (``corpus``)           (``query``, over indexes from ``index``)
    → fallback chain (``fallback``) → answer stage (``answers``: context → generator → judge)

``build`` instantiates every stage named by a config (the ``_target_`` allow-list);
``Pipeline`` composes them; ``ingest`` and ``runtime`` turn what a run did into report rows.
"""

from rag_lab.pipeline.build import build_pipeline
from rag_lab.pipeline.pipeline import Pipeline
from rag_lab.pipeline.result import RetrievalResult

__all__ = ["Pipeline", "RetrievalResult", "build_pipeline"]
