"""Parser quality, speed and what a naive parser costs retrieval, on the shipped sample documents.

    python benchmarks/bench_parsing.py --out benchmarks/results/parsing.json
    python benchmarks/bench_parsing.py --repeat 5 --no-retrieval \
        --ocr-baseline old_ocr.py --ocr-baseline-options '{"ocr_languages": "eng+chi_sim"}'

Measured in one run, against ``parsing_truth.json`` (what scripts/make_sample_documents.py drew):
1. quality per parser and page kind: cell-level table accuracy (every table of the truth against
   the best-matching Markdown table the parser wrote) and character error rate of the body text
   (per page: the truth's lines vs the text of that page's non-table sections); the same for a
   denser scanned page built here (``tests/parser/pdf_fixtures.dense_scanned_pdf``: 38 lines
   and a 3 x 7 table, 9.5 pt, from the generator's fonts and scan look);
2. speed: seconds per text-layer page (``pdf`` with ``ocr=off`` on text pages; ``pdf_plain``) and
   per OCR'd page (the sample's scanned page: ``ocr=auto`` minus ``ocr=off`` on its manual; the
   dense page: its one-page PDF parsed), best and median of ``--repeat``, with Tesseract's CPU
   seconds (children of this process: what the load average does not change much) and the load
   average before and after (other processes share the cores); peak memory. With
   ``--ocr-baseline`` (a copy of an earlier ``rag_lab/parser/_ocr.py``, e.g. ``git show
   v0.4:rag_lab/parser/_ocr.py > old_ocr.py``) the OCR pages are also read by that version, with
   the ``pdf`` options in ``--ocr-baseline-options``, runs interleaved with the current ones so
   that both see the same load: quality and speed, side by side;
3. retrieval: the default pipeline on the sample (test + dev splits) with ``parser.parsers.pdf``
   = ``pdf`` vs ``pdf_plain`` (plain text extraction: tables flattened, headers on every page, no
   OCR): hit rate and evidence hit rate @5 on the table-cell, scanned-page and page-header
   queries, with paired bootstrap 95% CIs of the difference (``--no-retrieval`` skips it).
"""

from __future__ import annotations

import argparse
import hashlib
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


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _timed_parse(parser: Any, path: Path, root: Path) -> tuple[float, float, Any]:
    """(wall seconds, CPU seconds of the processes it started, the document)."""
    cpu, t0 = _children_cpu(), time.perf_counter()
    (doc,) = list(parser.parse(path, root))
    return time.perf_counter() - t0, _children_cpu() - cpu, doc


def speed(repeat: int, root: Path, truth: dict[str, Any]) -> dict[str, Any]:
    """Seconds per text-layer page, best of ``repeat`` (OCR pages: ``ocr_speed``)."""
    from rag_lab.parser.pdf import PdfParser
    from rag_lab.parser.pdf_plain import PlainPdfParser

    def best(parser: Any, path: Path) -> float:
        return min(_timed_parse(parser, path, root)[0] for _ in range(repeat))

    pdfs = {rel: spec for rel, spec in truth["documents"].items() if rel.endswith(".pdf")}
    text_pages = 0
    t_text = {"pdf": 0.0, "pdf_plain": 0.0}
    for rel, spec in pdfs.items():
        t_text["pdf"] += best(PdfParser(ocr="off"), root / rel)  # the text-layer pages only
        t_text["pdf_plain"] += best(PlainPdfParser(), root / rel)
        text_pages += [p["kind"] for p in spec["pages"]].count("text")
    return {
        "text_layer_pages": text_pages,
        "seconds_per_text_page": {k: v / text_pages for k, v in t_text.items()},
    }


class _OcrVersion:
    """A ``pdf`` parser whose scanned pages are read by one version of ``_ocr.ocr_image``."""

    def __init__(self, options: dict[str, Any], module: Path | None = None) -> None:
        import importlib.util
        import inspect

        from rag_lab.parser import _ocr
        from rag_lab.parser.pdf import PdfParser

        self.on, self.off = PdfParser(**options), PdfParser(**{**options, "ocr": "off"})
        self.fn = _ocr.ocr_image
        if module is not None:
            spec = importlib.util.spec_from_file_location("_ocr_baseline", module)
            assert spec and spec.loader, module
            mod = importlib.util.module_from_spec(spec)
            sys.modules[spec.name] = mod  # its dataclasses look the module up
            spec.loader.exec_module(mod)
            accepted = set(inspect.signature(mod.ocr_image).parameters)
            old = mod.ocr_image

            def fn(image: Any, languages: str, dpi: int, **kwargs: Any) -> Any:
                # options an older version did not have are left out
                return old(
                    image, languages, dpi, **{k: v for k, v in kwargs.items() if k in accepted}
                )

            self.fn = fn

    def parse(self, parser: Any, path: Path, root: Path) -> tuple[float, float, Any]:
        from rag_lab.parser import _ocr

        current = _ocr.ocr_image
        _ocr.ocr_image = self.fn
        try:
            return _timed_parse(parser, path, root)
        finally:
            _ocr.ocr_image = current


def _dense_page(work: Path) -> tuple[Path, list[str], list[list[list[str]]]]:
    root = str(HERE.parent)
    if root not in sys.path:
        sys.path.insert(0, root)
    from tests.parser.pdf_fixtures import dense_scanned_pdf

    return dense_scanned_pdf(work / "dense-scan.pdf")


def ocr_speed(
    versions: dict[str, _OcrVersion],
    repeat: int,
    root: Path,
    truth: dict[str, Any],
    dense: tuple[Path, list[str], list[list[list[str]]]],
) -> dict[str, Any]:
    """Per version: the sample's scanned page (its manual with ``ocr=auto`` minus ``ocr=off``)
    and the dense page, timed ``repeat`` times, versions interleaved; with the quality of the
    pages read (the same every run: Tesseract is deterministic)."""
    from rag_lab.metrics.parsing import best_cell_accuracy, character_error_rate
    from rag_lab.parser._builder import markdown_tables

    rel = next(
        r
        for r, spec in truth["documents"].items()
        if r.endswith(".pdf") and any(p["kind"] == "scanned" for p in spec["pages"])
    )
    spec = truth["documents"][rel]
    page = next(p for p in spec["pages"] if p["kind"] == "scanned")
    table = next(t for t in spec["tables"] if page["page"] in (t.get("pages") or []))
    dense_pdf, dense_lines, dense_tables = dense
    runs: dict[str, dict[str, list[tuple[float, float]]]] = {
        v: {"sample_scanned_page": [], "dense_page": []} for v in versions
    }
    docs: dict[str, dict[str, Any]] = {v: {} for v in versions}
    load_before = os.getloadavg()[0]
    for _ in range(repeat):
        for name, version in versions.items():
            off = version.parse(version.off, root / rel, root)
            on = version.parse(version.on, root / rel, root)
            runs[name]["sample_scanned_page"].append((on[0] - off[0], on[1] - off[1]))
            d = version.parse(version.on, dense_pdf, dense_pdf.parent)
            runs[name]["dense_page"].append((d[0], d[1]))
            docs[name] = {"sample_scanned_page": on[2], "dense_page": d[2]}
    load_after = os.getloadavg()[0]
    out: dict[str, Any] = {}
    for name in versions:
        sample_doc, dense_doc = docs[name]["sample_scanned_page"], docs[name]["dense_page"]
        quality = {
            "sample_scanned_page": {
                "cell_accuracy": best_cell_accuracy(
                    table["rows"], markdown_tables(sample_doc.text)
                ),
                "n_cells": sum(len(r) for r in table["rows"]),
                "cer": character_error_rate(
                    "\n".join(page["lines"]), _page_text(sample_doc, page["page"])
                ),
                "ocr_confidence": sample_doc.stats.get("ocr_confidence"),
            },
            "dense_page": {
                "cell_accuracy": best_cell_accuracy(
                    dense_tables[0], markdown_tables(dense_doc.text)
                ),
                "n_cells": sum(len(r) for r in dense_tables[0]),
                "cer": character_error_rate("\n".join(dense_lines), _page_text(dense_doc, 1)),
                "n_lines": len(dense_lines) + len(dense_tables[0]),
                "ocr_confidence": dense_doc.stats.get("ocr_confidence"),
            },
        }
        timing = {}
        for kind, values in runs[name].items():
            walls = sorted(w for w, _ in values)
            cpus = sorted(c for _, c in values)
            timing[kind] = {
                "seconds_best": walls[0],
                "seconds_median": walls[len(walls) // 2],
                "tesseract_cpu_seconds_median": cpus[len(cpus) // 2],
                **quality[kind],
            }
        out[name] = timing
    # other processes share the cores: the 1-minute load average around the timing
    out["load_average_1min"] = {"before": round(load_before, 2), "after": round(load_after, 2)}
    out["repeat"] = repeat
    return out


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

    from rag_lab.analysis.stats import paired_bootstrap_diff_ci

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
    ap.add_argument("--repeat", type=int, default=3, help="timing repeats (best and median)")
    ap.add_argument("--no-retrieval", action="store_true", help="skip the two evaluate runs")
    ap.add_argument(
        "--ocr-baseline",
        type=Path,
        default=None,
        help="an earlier rag_lab/parser/_ocr.py: its OCR timed and scored beside the current one",
    )
    ap.add_argument(
        "--ocr-baseline-options",
        type=json.loads,
        default={},
        help="pdf parser options (JSON) for the baseline, e.g. its ocr_languages and DPIs",
    )
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
    versions = {"current": _OcrVersion({})}
    if args.ocr_baseline:
        versions["baseline"] = _OcrVersion(args.ocr_baseline_options, args.ocr_baseline)
        result["ocr_baseline"] = {
            "module": str(args.ocr_baseline),
            "sha256": hashlib.sha256(args.ocr_baseline.read_bytes()).hexdigest(),
            "options": args.ocr_baseline_options,
        }
    with tempfile.TemporaryDirectory() as tmp:
        dense = _dense_page(Path(tmp))
        result["ocr"] = ocr_speed(versions, args.repeat, root, truth, dense)
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
