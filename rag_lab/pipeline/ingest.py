"""The ingest report: per document what parsing found (pages, text-layer and OCR pages, tables,
sections, seconds) and what the metadata contract said; plus the files refused under
``parser.on_error=skip``, the files no parser read and the symbolic links left out. Written to
the run folder as ``ingest_report.json``; its totals join ``metrics.json`` (``ingest/...``) and
MLflow."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rag_lab.contract.base import Problem
from rag_lab.parser.base import ParsedCorpus
from rag_lab.types import Document

# document stats summed into the totals (absent stats count 0)
COUNTED = (
    "pages",
    "text_layer_pages",
    "ocr_pages",
    "ocr_skipped_pages",
    "tables",
    # hostile scans (rag_lab.parser.pdf): unreadable text layers, images OCR'd on text pages,
    # pages and images turned upright, OCR tables too weak to be tables
    "garbled_layer_pages",
    "ocr_images",
    "rotated_ocr",
    "weak_ocr_tables",
)


def ingest_report(
    corpus: ParsedCorpus, documents: Sequence[Document], problems: Sequence[Problem]
) -> dict[str, Any]:
    """JSON-ready report of one corpus read (``documents``: after the contract)."""
    source: dict[str, str] = {}
    seconds: dict[str, float] = {}
    for parsed in corpus.files:
        for where, doc in parsed.documents:
            source[doc.doc_id] = where
            seconds[doc.doc_id] = parsed.seconds / max(len(parsed.documents), 1)
    by_doc: dict[str, list[str]] = {}
    for p in problems:
        by_doc.setdefault(p.doc_id, []).append(f"{p.field}: {p.message}")
    rows = []
    for doc in documents:
        # the file relative to the corpus folder (as parsers record it), else where it was read
        src = doc.metadata.get("source") or source.get(doc.doc_id, "")
        row: dict[str, Any] = {"doc_id": doc.doc_id, "source": str(src)}
        row.update({k: doc.stats[k] for k in COUNTED if k in doc.stats})
        row["sections"] = int(doc.stats.get("sections", len(doc.sections)))
        for key in (
            "ocr_confidence",
            "ocr_page_numbers",
            "skipped_page_numbers",
            "garbled_layer_page_numbers",
        ):
            if doc.stats.get(key) not in (None, []):
                row[key] = doc.stats[key]
        row["contract_problems"] = by_doc.get(doc.doc_id, [])
        row["seconds"] = round(seconds.get(doc.doc_id, 0.0), 6)
        rows.append(row)
    totals: dict[str, float] = {
        "n_files": len(corpus.files) + len(corpus.skipped_files),
        "n_skipped_files": len(corpus.skipped_files),
        "n_unread_files": len(corpus.unread_files),
        "n_skipped_links": len(corpus.skipped_links),
        "n_empty_documents": corpus.n_empty,
        "n_contract_problems": len(problems),
        "parse_seconds": round(sum(f.seconds for f in corpus.files), 6),
    }
    for key in COUNTED:
        totals[f"n_{key}"] = sum(int(r.get(key, 0)) for r in rows)
    return {
        "totals": totals,
        "documents": rows,
        "skipped_files": [{"source": s, "error": e} for s, e in corpus.skipped_files],
        "unread_files": [{"source": s, "reason": r} for s, r in corpus.unread_files],
        "skipped_links": [{"source": s, "reason": r} for s, r in corpus.skipped_links],
        "contract_problems": [str(p) for p in problems],
    }


def ingest_metrics(report: Mapping[str, Any]) -> dict[str, float]:
    """The report's totals as run metrics (``ingest/n_ocr_pages``, ...); ``{}`` without one."""
    return {f"ingest/{k}": float(v) for k, v in (report.get("totals") or {}).items()}
