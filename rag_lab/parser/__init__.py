"""Parsers: corpus files → :class:`~rag_lab.types.Document` under the metadata contract."""

from rag_lab.parser.auto import AutoParser
from rag_lab.parser.base import Parser, parse_corpus
from rag_lab.parser.beir_corpus import BeirCorpusParser
from rag_lab.parser.jsonl_records import JsonlRecordsParser
from rag_lab.parser.markdown import MarkdownParser
from rag_lab.parser.plain_text import PlainTextParser

__all__ = [
    "Parser",
    "parse_corpus",
    "AutoParser",
    "BeirCorpusParser",
    "JsonlRecordsParser",
    "MarkdownParser",
    "PlainTextParser",
]
