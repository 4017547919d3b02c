"""Parser quality, speed and what a naive parser costs retrieval, on the shipped sample documents.

    python benchmarks/bench_parsing.py --out benchmarks/results/parsing.json

Measured in one run, against ``parsing_truth.json`` (what scripts/make_sample_documents.py drew):
1. quality per parser and page kind: cell-level table accuracy (every table of the truth against
   the best-matching Markdown table the parser wrote) and character error rate of the body text
   (per page: the truth's lines vs the text of that page's non-table sections);
2. speed: seconds per text-layer page (``pdf`` with ``ocr=off`` on text pages; ``pdf_plain``) and
   per OCR'd page (``ocr=auto`` minus ``ocr=off`` on the manual with a scanned page), best and
   median of ``--repeat``, with the load average (other processes share the cores); peak memory;
3. retrieval: the default pipeline on the sample (test + dev splits) with ``parser.parsers.pdf``
   = ``pdf`` vs ``pdf_plain`` (plain text extraction: tables flattened, headers on every page, no
   OCR): hit rate and evidence hit rate @5 on the table-cell, scanned-page and page-header
   queries, with paired bootstrap 95% CIs of the difference (``--no-retrieval`` skips it).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
CATEGORIES = ("table_cell", "scanned_page", "page_header")


def _sample() -> Path:
    from rag_lab.paths import PACKAGE_DIR

    return Path(PACKAGE_DIR) / "sample" / "maintenance_kb"


def _page_text(doc: Any, page: int) -> str:
    """A page's body as the truth's ``lines`` hold it: Markdown heading marks dropped, a table
    section contributing its caption only (cells are scored as cells), the running header out."""
    parts = []
    for s in doc.sections:
        if s.metadata.get("page") != page or s.metadata.get("kind") == "page_header":
            continue
        if s.metadata.get("kind") == "table":
            parts.append(str(s.metadata.get("caption") or ""))
        else:
            parts.append(re.sub(r"(?m)^#{1,6}[ \t]+", "", doc.text[s.start : s.end]))
    return "\n".join(parts)


def _drawn_text(spec: dict[str, Any], page: dict[str, Any]) -> str:
    """Everything drawn on a page in drawing order: header, lines with each table's rows (cells
    joined by spaces; a continued table's header repeated) where it sits, footer. The reference of
    a parser that does not separate tables or headers (``pdf_plain``)."""
    lines = list(page["lines"])
    out = [page.get("header", "")]
    at = {t["after_line"]: t["table"] for t in page.get("tables", [])}
    for i in range(len(lines) + 1):
        if i in at:
            table = spec["tables"][at[i]]
            rows = table["rows"]
            pages = table.get("row_pages") or [page["page"]] * len(rows)
            mine = [r for r, p in zip(rows, pages) if p == page["page"]]
            if mine and mine[0] is not rows[0]:
                mine = [rows[0], *mine]  # the repeated header row of a continuation page
            out.extend(" ".join(r) for r in mine)
        if i < len(lines):
            out.append(lines[i])
    out.append(page.get("footer", "").replace("{page}", str(page["page"])))
    return "\n".join(out)


def _plain_page_text(doc: Any, page: int) -> str:
    return "\n".join(
        doc.text[s.start : s.end] for s in doc.sections if s.metadata.get("page") == page
    )


def quality(parsers: dict[str, Any], truth: dict[str, Any], root: Path) -> dict[str, Any]:
    from rag_lab.metrics.parsing import best_cell_accuracy, character_error_rate
    from rag_lab.parser._builder import markdown_tables

    out: dict[str, Any] = {}
    for name, parser in parsers.items():
        cells: dict[str, list[float]] = {"text": [], "scanned": []}
        cer: dict[str, list[float]] = {"text": [], "scanned": []}
        per_doc: dict[str, Any] = {}
        for rel, spec in truth["documents"].items():
            path = root / rel
            if path.suffix.lower() not in parser.suffixes:
                continue
            (doc,) = list(parser.parse(path, root))
            parsed_tables = markdown_tables(doc.text)
            kinds = {p["page"]: p["kind"] for p in spec.get("pages", [])}
            tables = []
            for t in spec.get("tables", []):
                acc = best_cell_accuracy(t["rows"], parsed_tables)
                kind = (
                    "scanned"
                    if any(kinds.get(p) == "scanned" for p in t.get("pages") or [])
                    else "text"
                )
                cells[kind].append(acc)
                tables.append(
                    {"caption": t.get("caption"), "pages": t.get("pages"), "cell_accuracy": acc}
                )
            for page in spec.get("pages", []):
                if name == "pdf_plain":  # everything on the page, in drawing order
                    ref, hyp = _drawn_text(spec, page), _plain_page_text(doc, page["page"])
                else:
                    ref, hyp = "\n".join(page["lines"]), _page_text(doc, page["page"])
                cer[page["kind"]].append(character_error_rate(ref, hyp))
            per_doc[rel] = {"tables": tables, "stats": dict(doc.stats)}
        out[name] = {
            "table_cell_accuracy": {k: (sum(v) / len(v) if v else None) for k, v in cells.items()},
            "n_tables": {k: len(v) for k, v in cells.items()},
            "cer": {k: (sum(v) / len(v) if v else None) for k, v in cer.items()},
            "documents": per_doc,
        }
    return out


def speed(repeat: int, root: Path, truth: dict[str, Any]) -> dict[str, Any]:
    from rag_lab.parser.pdf import PdfParser
    from rag_lab.parser.pdf_plain import PlainPdfParser

    def runs(parser: Any, path: Path, n: int) -> list[float]:
        times = []
        for _ in range(n):
            t0 = time.perf_counter()
            list(parser.parse(path, root))
            times.append(time.perf_counter() - t0)
        return sorted(times)

    def best(parser: Any, path: Path, n: int) -> float:
        return runs(parser, path, n)[0]

    pdfs = {rel: spec for rel, spec in truth["documents"].items() if rel.endswith(".pdf")}
    text_pages = 0
    t_text = {"pdf": 0.0, "pdf_plain": 0.0}
    ocr_pages, t_ocr, t_ocr_median = 0, 0.0, 0.0
    for rel, spec in pdfs.items():
        path = root / rel
        kinds = [p["kind"] for p in spec["pages"]]
        n_text, n_scan = kinds.count("text"), kinds.count("scanned")
        offs = runs(PdfParser(ocr="off"), path, repeat)  # the text-layer pages only
        off = offs[0]
        t_text["pdf"] += off
        t_text["pdf_plain"] += best(PlainPdfParser(), path, repeat)
        text_pages += n_text
        if n_scan:
            ons = runs(PdfParser(ocr="auto"), path, repeat)
            t_ocr += ons[0] - off
            t_ocr_median += ons[len(ons) // 2] - offs[len(offs) // 2]
            ocr_pages += n_scan
    return {
        "text_layer_pages": text_pages,
        "seconds_per_text_page": {k: v / text_pages for k, v in t_text.items()},
        "ocr_pages": ocr_pages,
        "seconds_per_ocr_page": t_ocr / ocr_pages if ocr_pages else None,
        "seconds_per_ocr_page_median": t_ocr_median / ocr_pages if ocr_pages else None,
        # other processes share the cores: the 1-minute load average when timing ended
        "load_average_1min": round(os.getloadavg()[0], 2),
    }


def _evaluate(overrides: list[str], work: Path) -> Any:
    import pandas as pd
    from hydra import compose, initialize_config_dir
    from omegaconf import open_dict

    from rag_lab.evaluate import evaluate
    from rag_lab.paths import CONFIG_DIR

    tables = []
    for split in ("test", "dev"):
        with initialize_config_dir(config_dir=CONFIG_DIR, version_base="1.3"):
            cfg = compose("evaluate", overrides=[*overrides, f"dataset.split={split}"])
        with open_dict(cfg):
            cfg.paths.output_dir = str(work / f"{split}-{len(tables)}")
            cfg.paths.experiments = str(work)
        evaluate(cfg)
        tables.append(pd.read_parquet(Path(cfg.paths.output_dir) / "per_query.parquet"))
    return pd.concat(tables, ignore_index=True)


def retrieval(work: Path) -> dict[str, Any]:
    import numpy as np

    from rag_lab.stats import paired_bootstrap_diff_ci

    base = ["tracking=none", f"cache.dir={work / 'cache'}"]
    runs = {
        "pdf": _evaluate(base, work / "pdf"),
        "pdf_plain": _evaluate([*base, "parser.parsers.pdf=pdf_plain"], work / "plain"),
    }
    out: dict[str, Any] = {}
    a, b = (runs[k].set_index("query_id") for k in ("pdf", "pdf_plain"))
    for cat in (*CATEGORIES, "all"):
        ids = a.index if cat == "all" else a.index[a["category"] == cat]
        row: dict[str, Any] = {"n_queries": int(len(ids))}
        for metric in ("hit_rate_at_5", "evidence_hit_rate_at_5"):
            if metric not in a.columns:
                continue
            x, y = a.loc[ids, metric].to_numpy(float), b.loc[ids, metric].to_numpy(float)
            diff, low, high = paired_bootstrap_diff_ci(x, y)
            row[metric] = {  # NaN: unanswerable queries, left out as metrics.json does
                "pdf": float(np.nanmean(x)),
                "pdf_plain": float(np.nanmean(y)),
                "diff": diff,
                "ci95": [low, high],
            }
        out[cat] = row
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--out", type=Path, default=None, help="write the results as JSON here")
    ap.add_argument("--repeat", type=int, default=3, help="timing repeats (best of)")
    ap.add_argument("--no-retrieval", action="store_true", help="skip the two evaluate runs")
    args = ap.parse_args()

    from rag_lab.parser.docx import DocxParser
    from rag_lab.parser.html import HtmlParser
    from rag_lab.parser.pdf import PdfParser
    from rag_lab.parser.pdf_plain import PlainPdfParser

    sample = _sample()
    root = sample / "docs"
    truth = json.loads((sample / "parsing_truth.json").read_text(encoding="utf-8"))
    result: dict[str, Any] = {"command": " ".join(["python", *sys.argv])}
    result["quality"] = quality(
        {
            "pdf": PdfParser(),
            "pdf_plain": PlainPdfParser(),
            "html": HtmlParser(),
            "docx": DocxParser(),
        },
        truth,
        root,
    )
    result["speed"] = speed(args.repeat, root, truth)
    if not args.no_retrieval:
        with tempfile.TemporaryDirectory() as tmp:
            result["retrieval"] = retrieval(Path(tmp))
    result["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    text = json.dumps(result, indent=2, ensure_ascii=False)
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
