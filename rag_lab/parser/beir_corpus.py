"""BEIR ``corpus.jsonl``: ``{"_id", "title", "text"[, "metadata"]}`` per line."""

from __future__ import annotations

from rag_lab.parser.jsonl_records import JsonlRecordsParser


class BeirCorpusParser(JsonlRecordsParser):
    """The BEIR record schema, strictly: ``_id`` and ``text`` required, ``title`` optional;
    only the ``metadata`` object becomes metadata (BEIR's extra keys are not contract fields)."""

    def __init__(self) -> None:
        super().__init__(
            id_field="_id",
            text_fields=("text",),
            title_field="title",
            metadata_field="metadata",
            extra_fields_as_metadata=False,
        )
