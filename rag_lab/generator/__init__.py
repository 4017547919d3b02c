"""Answer generators. The ``generator`` config group defaults to none (retrieval-only runs)."""

from rag_lab.generator.base import Generator

__all__ = ["Generator"]
