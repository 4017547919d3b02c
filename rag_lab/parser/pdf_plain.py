"""Plain text extraction from a PDF's text layer (pypdfium2): what a pipeline gets from the usual
``pdftotext``-style loader.

No layout analysis: table cells come out as runs of words on their lines (tables flattened), the
running header and footer stay on every page, a heading is a line like any other, and a scanned
page (no text layer) gives nothing. It is the fast baseline that ``pdf`` (tables, headers,
headings, OCR) is measured against: ``benchmarks/bench_parsing.py`` reports what it costs in
table-cell accuracy and in hit rate on the sample's table, scanned-page and header queries.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from rag_lab.errors import DataError
from rag_lab.parser.base import relative_id
from rag_lab.types import Document, Section


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


# custom document-info keys read as metadata (as ``pdf`` reads them): the id and the contract's
INFO_KEYS = ("doc_id", "version", "valid_from", "valid_to", "source_type", "doc_type", "language")


class PlainPdfParser:
    """One document per PDF: each page's text layer in page order, pages separated by a blank
    line, one section per page (``page`` metadata). The PDF's Title is the title; the custom info
    keys ``INFO_KEYS`` (``doc_id`` sets the id, else the path relative to the corpus folder) are
    metadata, so its documents line up with ``pdf``'s and with the qrels."""

    suffixes = (".pdf",)

    def parse(self, path: Path, root: Path) -> Iterator[Document]:
        import pypdfium2 as pdfium

        try:
            pdf = pdfium.PdfDocument(str(path))
        except pdfium.PdfiumError as exc:
            reason = _one_line(exc)
            if "password" in reason.lower():
                raise DataError(f"{path}: encrypted PDF (needs a password)") from None
            raise DataError(f"{path}: not a readable PDF ({reason})") from None
        try:
            if len(pdf) == 0:
                raise DataError(f"{path}: PDF has no pages")
            parts: list[str] = []
            sections: list[Section] = []
            pos = 0
            text_pages = 0
            for i in range(len(pdf)):
                try:
                    page_text = pdf[i].get_textpage().get_text_range()
                except pdfium.PdfiumError as exc:
                    raise DataError(f"{path} page {i + 1}: {_one_line(exc)}") from None
                page_text = page_text.replace("\r\n", "\n").replace("\r", "\n").strip()
                if not page_text:
                    continue
                text_pages += 1
                if parts:
                    parts.append("\n\n")
                    pos += 2
                parts.append(page_text)
                sections.append(Section(pos, pos + len(page_text), (), {"page": i + 1}))
                pos += len(page_text)
            title = str(pdf.get_metadata_dict().get("Title") or "") or path.stem
            info = {k: str(pdf.get_metadata_value(k) or "").strip() for k in INFO_KEYS}
            stats = {
                "pages": len(pdf),
                "text_layer_pages": text_pages,
                "ocr_pages": 0,
                "ocr_skipped_pages": len(pdf) - text_pages,
                "tables": 0,
            }
        finally:
            pdf.close()
        meta: dict[str, str] = {k: v for k, v in info.items() if v and v.lower() != "null"}
        doc_id = meta.pop("doc_id", "") or relative_id(path, root)
        meta["source"] = relative_id(path, root) + path.suffix
        yield Document(doc_id, "".join(parts), title, meta, tuple(sections), stats)
