"""Parsers: corpus files → :class:`~rag_lab.types.Document` under the metadata contract."""

from rag_lab.parser.auto import AutoParser
from rag_lab.parser.base import Parser
from rag_lab.parser.beir_corpus import BeirCorpusParser
from rag_lab.parser.csv_records import CsvRecordsParser
from rag_lab.parser.docx import DocxParser
from rag_lab.parser.html import HtmlParser
from rag_lab.parser.jsonl_records import JsonlRecordsParser
from rag_lab.parser.markdown import MarkdownParser
from rag_lab.parser.pdf import PdfParser
from rag_lab.parser.pdf_plain import PlainPdfParser
from rag_lab.parser.plain_text import PlainTextParser
from rag_lab.parser.sql_records import SqlRecordsParser

__all__ = [
    "Parser",
    "AutoParser",
    "BeirCorpusParser",
    "CsvRecordsParser",
    "DocxParser",
    "HtmlParser",
    "JsonlRecordsParser",
    "MarkdownParser",
    "PdfParser",
    "PlainPdfParser",
    "PlainTextParser",
    "SqlRecordsParser",
]
