"""Who may read what: a document's ``readers`` (the metadata contract's field) against a query's
``principal`` (its user and groups), checked at retrieval so that no path returns a chunk its
principal cannot read (``rag_lab.access.readers.ReadersPolicy``)."""

from rag_lab.access.base import AccessPolicy
from rag_lab.access.leaks import leaks_per_query
from rag_lab.access.principal import (
    EVERYONE,
    PRINCIPAL_FIELD,
    READERS_FIELD,
    Principal,
    normalise_name,
    principal_of,
    readers_of,
)
from rag_lab.access.readers import ReadersPolicy

__all__ = [
    "EVERYONE",
    "PRINCIPAL_FIELD",
    "READERS_FIELD",
    "AccessPolicy",
    "Principal",
    "ReadersPolicy",
    "leaks_per_query",
    "normalise_name",
    "principal_of",
    "readers_of",
]
