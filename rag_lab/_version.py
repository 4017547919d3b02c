"""The release (the one place it is written; pyproject and ``rag_lab.__version__`` read it)."""

__version__ = "0.5.0"
