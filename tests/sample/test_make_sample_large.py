"""The large sample's generator (scripts/make_sample_large.py): deterministic by seed, and its
labels hold (every qrels document exists, every gold answer is in a document judged 2, the
splits are disjoint). Small scales here; the committed edition is checked by reading it."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LARGE = ROOT / "datasets" / "maintenance_kb_large"
FONTS = [
    Path("/usr/share/fonts/truetype/wqy/wqy-microhei.ttc"),
    Path("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"),
]


def _generator():
    spec = importlib.util.spec_from_file_location(
        "make_sample_large", ROOT / "scripts" / "make_sample_large.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def _hashes(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def _texts(root: Path) -> dict[str, str]:
    """Document id → its text: Markdown files as written, JSONL records' title + text, and the
    PDFs' drawn lines and table cells (parsing_truth.json)."""
    out: dict[str, str] = {}
    for path in (root / "docs").rglob("*.md"):
        out[path.stem] = path.read_text(encoding="utf-8")
    for path in [*(root / "docs").rglob("*.jsonl"), *(root / "standards").rglob("*.jsonl")]:
        for line in path.read_text(encoding="utf-8").splitlines():
            rec = json.loads(line)
            out[rec["_id"]] = rec["title"] + " " + rec["text"]
    for path in (root / "standards").glob("*.md"):
        out[path.stem] = path.read_text(encoding="utf-8")
    truth = json.loads((root / "parsing_truth.json").read_text(encoding="utf-8"))["documents"]
    for rel, rec in truth.items():
        lines = [ln for page in rec["pages"] for ln in page["lines"]]
        cells = [c for t in rec["tables"] for row in t["rows"] for c in row]
        out[Path(rel).stem] = " ".join(lines + cells)
    return out


def check_labels(root: Path) -> dict[str, int]:
    texts = _texts(root)
    queries = {
        q["_id"]: q
        for q in map(json.loads, (root / "queries.jsonl").read_text("utf-8").splitlines())
    }
    seen: dict[str, str] = {}
    for split in ("test", "dev"):
        rows = (root / "qrels" / f"{split}.tsv").read_text(encoding="utf-8").splitlines()[1:]
        rel: dict[str, dict[str, int]] = {}
        for row in rows:
            qid, doc, score = row.split("\t")
            assert doc in texts, f"{qid}: {doc} is no document"
            rel.setdefault(qid, {})[doc] = int(score)
        for qid, docs in rel.items():
            assert seen.setdefault(qid, split) == split, f"{qid} in two splits"
            for answer in queries[qid]["metadata"].get("answers", []):
                best = [d for d, s in docs.items() if s == 2]
                assert any(answer in texts[d] for d in best), f"{qid}: {answer!r} not in {best}"
    assert set(seen) == set(queries)
    return {"documents": len(texts), "queries": len(queries)}


def test_same_seed_same_bytes_and_labels_hold(tmp_path):
    gen = _generator()
    pdf = 1 if all(f.exists() for f in FONTS) else 0
    a, b, c = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    gen.generate(a, 7, 60, 30, pdf)
    gen.generate(b, 7, 60, 30, pdf)
    gen.generate(c, 8, 60, 30, pdf)
    assert _hashes(a) == _hashes(b)
    assert _hashes(a) != _hashes(c)
    counts = check_labels(a)
    assert counts["queries"] > 100
    assert len((a / "docs" / "tickets.jsonl").read_text().splitlines()) == 60


def test_the_committed_edition_is_the_generators_with_seed_35(tmp_path):
    """What datasets/maintenance_kb_large holds is what the script writes with its defaults
    (the PDFs need the sample's fonts; byte equality assumes the same reportlab/zlib)."""
    if not all(f.exists() for f in FONTS):
        pytest.skip("the sample's fonts are missing (fonts-wqy-microhei, fonts-dejavu-core)")
    gen = _generator()
    out = tmp_path / "large"
    gen.main(["--out", str(out)])
    assert _hashes(out) == _hashes(LARGE)
    counts = check_labels(LARGE)
    assert counts["documents"] >= 2000
