"""Metadata contracts: the fields documents must carry, checked and completed at ingest."""

from rag_lab.contract.base import Checked, ChunkTagging, Contract, Problem
from rag_lab.contract.schema import SchemaContract

__all__ = ["Checked", "ChunkTagging", "Contract", "Problem", "SchemaContract"]
