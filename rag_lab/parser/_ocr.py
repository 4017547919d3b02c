"""Tesseract helpers for PDF pages without a text layer (``rag_lab.parser.pdf``).

``ocr_image(image, languages, dpi, ...)`` turns a rendered page into lines (grouped in Tesseract's
paragraphs) and ruled tables, with positions in PDF points so the PDF parser treats them like
text-layer lines (header/footer removal, reading order). It runs Tesseract a few times per
page, not once per table cell or line (each run is a process start and a model load): three
runs for a page with tables in ``eng+chi_sim`` (more only for strips over 16000 pixels tall):

1. ruled tables are found in the image with numpy (long thin dark runs = rules; the grid of rules
   gives the cells, merged cells included); every cell is cropped and the crops are stacked into
   one strip image read in block mode (``--psm 6``), at the full resolution;
2. the page, with the table regions whitened, is read in page-layout mode (``--psm 3``), shrunk
   to ``layout_dpi`` (less CPU, the same body text on the sample); passes 1 and 2 run at once,
   in two Tesseract processes;
3. with several languages (``eng+chi_sim``), weak lines and cells (a mean word confidence below
   0.80, or one word below 0.70: "清零" read as "aS" hides in a cell's mean of 0.89) are read
   again, shrunk to ``reread_dpi`` and stacked in one strip, in each secondary language alone,
   and the more confident reading is kept: Tesseract given ``eng+chi_sim`` reads a Chinese line
   as English garbage (mean word confidence ~30) that ``chi_sim`` alone reads correctly (~85).
   ``chi_sim`` reads 10 pt table text better at 150-240 dpi than at 300 (on the sample's scanned
   table: 30-31 of 33 cells against 29; ``benchmarks/results/parsing.json``).

The spaces Tesseract puts between CJK characters are removed. Confidences are Tesseract's word
confidences (0-100; ``-1`` = not a word) scaled to 0-1.

Heavy imports (numpy, PIL, pytesseract) happen inside the functions: importing this module is
cheap.
"""

from __future__ import annotations

import bisect
import os
import re
import shutil
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
    from PIL import Image

__all__ = [
    "LanguageMissing",
    "OcrLine",
    "OcrPage",
    "OcrTable",
    "TesseractMissing",
    "check_tesseract",
    "debian_package",
    "join_lines",
    "join_words",
    "no_space_char",
    "ocr_image",
]

# Scripts written without spaces between words: CJK ideographs (with extension A and
# compatibility forms), kana, CJK punctuation and full-width forms (，：（）). Hangul is not here:
# Korean puts spaces between words.
_NOSPACE = "\u3000-\u303f\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff00-\uffef"
_NOSPACE_CHAR = re.compile(f"[{_NOSPACE}]")
# a space Tesseract (or a PDF generator) put between two such characters
_SPACE_IN_CJK = re.compile(f"(?<=[{_NOSPACE}]) +(?=[{_NOSPACE}])")

# a line or cell read with a mean confidence below _WEAK, or holding a word below _WEAK_WORD, is
# read again in the other languages: one garbled word ("清零" read "aS", 0.54) hides in a mean
_WEAK = 0.80
_WEAK_WORD = 0.70
# punctuation that never starts a word: a line starting with it continues the previous word
_CLOSING = frozenset(",.;:!?)]}%")
_PAD = 24  # white pixels around each crop in a strip image (Tesseract needs a margin)
_GAP = 40  # white pixels between crops: wide enough that Tesseract never joins two crops' lines
_MAX_STRIP = 16000  # pixels: Leptonica refuses images much taller than 32767


def no_space_char(ch: str) -> bool:
    """Whether ``ch`` belongs to a script written without spaces (CJK, kana, CJK punctuation)."""
    return bool(ch) and _NOSPACE_CHAR.match(ch) is not None


def join_words(words: Sequence[str]) -> str:
    """Words of one line joined by single spaces, except between two CJK characters."""
    return _SPACE_IN_CJK.sub("", " ".join(w for w in words if w))


def join_lines(lines: Sequence[str]) -> str:
    """The lines of one paragraph (or table cell) as one string: no separator where a CJK line
    wraps onto a CJK line, after a trailing hyphen (``HX-`` + ``200``; a soft hyphen is dropped)
    or before closing punctuation (``℃`` + ``; the coil``: CJK line breaking moves it to the next
    line); a space otherwise."""
    out = ""
    for line in lines:
        line = line.strip()
        if not line:
            continue
        if out.endswith("\xad"):  # a soft hyphen: the word goes on
            out = out[:-1]
        elif out and not (
            (no_space_char(out[-1]) and no_space_char(line[0]))
            or (out[-1] == "-" and len(out) > 1 and out[-2].isalnum())
            or line[0] in _CLOSING
        ):
            out += " "
        out += line
    return out.removesuffix("\xad")


class TesseractMissing(Exception):
    """The ``tesseract`` binary cannot be run."""


class LanguageMissing(Exception):
    """Tesseract runs but lacks language data: ``missing`` (``chi_sim``), ``installed``."""

    def __init__(self, missing: Sequence[str], installed: Sequence[str]) -> None:
        self.missing, self.installed = tuple(missing), tuple(installed)
        super().__init__(", ".join(self.missing))


def debian_package(language: str) -> str:
    """The Debian/Ubuntu package with Tesseract's data for ``language``: ``chi_sim`` →
    ``tesseract-ocr-chi-sim``."""
    return "tesseract-ocr-" + language.lower().replace("_", "-")


def check_tesseract(languages: str) -> None:
    """Raise ``TesseractMissing`` when Tesseract cannot be run and ``LanguageMissing`` when any of
    ``languages`` (``eng+chi_sim``) has no data installed; return quietly otherwise."""
    import pytesseract

    cmd = pytesseract.pytesseract.tesseract_cmd
    if shutil.which(cmd) is None:
        raise TesseractMissing(cmd)
    try:
        installed = pytesseract.get_languages(config="")
    except (pytesseract.TesseractNotFoundError, FileNotFoundError, PermissionError):
        raise TesseractMissing(cmd) from None
    missing = [lang for lang in languages.split("+") if lang not in installed]
    if missing:
        raise LanguageMissing(missing, sorted(installed))


_ENV_LOCK = threading.Lock()
_ENV_USERS = 0  # Tesseract calls running now (pages are read in parallel threads)
_ENV_SET = False  # whether OMP_THREAD_LIMIT is ours to remove


@contextmanager
def _single_threaded() -> Iterator[None]:
    """``OMP_THREAD_LIMIT=1`` for the Tesseract processes started inside (unless the user set
    the variable). Tesseract's OpenMP threads mostly spin: a dense page took 2.9 s with one
    thread and 18 s with the default on 2 shared cores. It is set only while some call runs (the
    variable would also cap the OpenMP runtime of torch or faiss if it started meanwhile),
    counted across threads so a parallel call never sees it removed."""
    global _ENV_USERS, _ENV_SET
    with _ENV_LOCK:
        if _ENV_USERS == 0 and "OMP_THREAD_LIMIT" not in os.environ:
            os.environ["OMP_THREAD_LIMIT"] = "1"
            _ENV_SET = True
        _ENV_USERS += 1
    try:
        yield
    finally:
        with _ENV_LOCK:
            _ENV_USERS -= 1
            if _ENV_USERS == 0 and _ENV_SET:
                os.environ.pop("OMP_THREAD_LIMIT", None)
                _ENV_SET = False


def _tesseract_data(image: Image.Image, lang: str, psm: int) -> dict[str, list[Any]]:
    import pytesseract

    try:
        with _single_threaded():
            data: dict[str, list[Any]] = pytesseract.image_to_data(
                image, lang=lang, config=f"--psm {psm}", output_type=pytesseract.Output.DICT
            )
    except (pytesseract.TesseractNotFoundError, FileNotFoundError):
        raise TesseractMissing(pytesseract.pytesseract.tesseract_cmd) from None
    return data


@dataclass
class _Word:
    text: str
    left: int
    top: int
    width: int
    height: int
    conf: float  # 0-100; -1: no confidence


def _words(data: dict[str, list[Any]]) -> Iterator[tuple[tuple[int, int, int], _Word]]:
    """``((block, paragraph, line), word)`` for every non-blank word Tesseract reported."""
    for i, text in enumerate(data["text"]):
        text = str(text).strip()
        if not text:
            continue
        key = (int(data["block_num"][i]), int(data["par_num"][i]), int(data["line_num"][i]))
        word = _Word(
            text,
            int(data["left"][i]),
            int(data["top"][i]),
            int(data["width"][i]),
            int(data["height"][i]),
            float(data["conf"][i]),
        )
        yield key, word


def _mean_conf(words: Sequence[_Word]) -> float | None:
    confs = [w.conf for w in words if w.conf >= 0]
    return sum(confs) / len(confs) / 100 if confs else None


@dataclass
class _Reading:
    """What Tesseract read in one crop or line: its lines of words."""

    lines: list[list[_Word]] = field(default_factory=list)

    @property
    def words(self) -> list[_Word]:
        return [w for line in self.lines for w in line]

    @property
    def text(self) -> str:
        return join_lines([join_words([w.text for w in line]) for line in self.lines])

    @property
    def conf(self) -> float | None:
        return _mean_conf(self.words)


def _read_strip(crops: Sequence[Image.Image], lang: str, scale: float = 1.0) -> list[_Reading]:
    """Read many crops with one Tesseract call: they are stacked, white gaps between them, into
    one image read in block mode; words are given back to the crop whose band holds them. A
    strip is at most ``_MAX_STRIP`` pixels tall (more crops take more calls). With ``scale``
    below 1 the crops are shrunk first (Lanczos); word boxes are then in the shrunk pixels."""
    from PIL import Image

    if scale != 1.0:
        crops = [
            c.resize(
                (max(1, round(c.width * scale)), max(1, round(c.height * scale))),
                Image.Resampling.LANCZOS,
            )
            for c in crops
        ]
    readings: list[_Reading] = []
    batch: list[Image.Image] = []
    height = 0
    for crop in crops:
        if batch and height + crop.height + _GAP > _MAX_STRIP:
            readings += _read_one_strip(batch, lang)
            batch, height = [], 0
        batch.append(crop)
        height += crop.height + _GAP
    if batch:
        readings += _read_one_strip(batch, lang)
    return readings


def _read_one_strip(crops: Sequence[Image.Image], lang: str) -> list[_Reading]:
    from PIL import Image

    width = max(c.width for c in crops) + 2 * _PAD
    height = sum(c.height for c in crops) + _GAP * (len(crops) - 1) + 2 * _PAD
    strip = Image.new("L", (width, height), 255)
    starts: list[int] = []  # top of each crop's band, the gap above it included
    y = _PAD
    for crop in crops:
        strip.paste(crop, (_PAD, y))
        starts.append(y - _GAP // 2)
        y += crop.height + _GAP
    readings = [_Reading() for _ in crops]
    lines: dict[tuple[int, int, int], list[_Word]] = {}
    for key, word in _words(_tesseract_data(strip, lang, 6)):
        lines.setdefault(key, []).append(word)
    for words in lines.values():
        # a strip line holds one crop's words (the gaps are wide); split defensively
        by_band: dict[int, list[_Word]] = {}
        for w in words:
            k = bisect.bisect_right(starts, w.top + w.height / 2) - 1
            by_band.setdefault(max(k, 0), []).append(w)
        for k, ws in by_band.items():
            readings[k].lines.append(ws)
    return readings


def _weak(reading: _Reading) -> bool:
    """A reading worth a second try: a low mean confidence, or one word read with a low one."""
    confs = [w.conf for w in reading.words if w.conf >= 0]
    return bool(reading.words) and (
        (reading.conf or 0.0) < _WEAK or not confs or min(confs) / 100 < _WEAK_WORD
    )


def _reread_weak(
    readings: list[_Reading], crops: Sequence[Image.Image], languages: str, scale: float = 1.0
) -> list[_Reading]:
    """With several languages, the weak readings read again in each secondary language alone,
    the crops shrunk by ``scale``; the more confident reading of each crop wins."""
    langs = languages.split("+")
    weak = [i for i, r in enumerate(readings) if _weak(r)]
    if len(langs) < 2 or not weak:
        return readings
    out = list(readings)
    for lang in langs[1:]:
        again = _read_strip([crops[i] for i in weak], lang, scale)
        for i, r in zip(weak, again):
            if r.words and (r.conf or 0.0) > (out[i].conf or 0.0):
                out[i] = r
    return out


# ---------------------------------------------------------------- ruled tables in the image


@dataclass(frozen=True)
class _Rule:
    pos: int  # y of a horizontal rule, x of a vertical one (centre of its thickness)
    start: int
    end: int
    thickness: int


def _long_runs(dark: np.ndarray, length: int) -> np.ndarray:
    """The pixels of ``dark`` that lie in a horizontal run of at least ``length`` dark pixels."""
    import numpy as np

    h, w = dark.shape
    if w < length:
        return np.zeros_like(dark)
    csum = np.zeros((h, w + 1), dtype=np.int32)
    np.cumsum(dark, axis=1, dtype=np.int32, out=csum[:, 1:])
    full = (csum[:, length:] - csum[:, :-length]) == length  # [s, s + length) all dark
    n = full.shape[1]  # window starts 0 .. w - length
    starts = np.zeros((h, n + 1), dtype=np.int32)
    np.cumsum(full, axis=1, dtype=np.int32, out=starts[:, 1:])
    # pixel x is covered when a full window starts in [x - length + 1, x]
    x = np.arange(w)
    hi = np.minimum(x, n - 1) + 1
    lo = np.maximum(x - length + 1, 0)
    covered: np.ndarray = (starts[:, hi] - starts[:, lo]) > 0
    return covered


def _rules(mask: np.ndarray, max_thickness: int) -> list[_Rule]:
    """Horizontal rules in a run mask: runs in consecutive rows that overlap are one rule."""
    import numpy as np

    open_: list[list[int]] = []  # [first_row, last_row, start, end]
    done: list[list[int]] = []
    for y in np.flatnonzero(mask.any(axis=1)).tolist():
        row = np.concatenate(([0], mask[y].view(np.int8), [0]))
        edges = np.flatnonzero(np.diff(row))
        segs = list(zip(edges[::2].tolist(), edges[1::2].tolist()))
        still: list[list[int]] = []
        for band in open_:
            if band[1] < y - 1:
                done.append(band)
            else:
                still.append(band)
        open_ = still
        for a, b in segs:
            for band in open_:
                if band[1] == y - 1 and a < band[3] and b > band[2]:
                    band[1], band[2], band[3] = y, min(a, band[2]), max(b, band[3])
                    break
            else:
                open_.append([int(y), int(y), a, b])
    done.extend(open_)
    return [
        _Rule((b[0] + b[1]) // 2, b[2], b[3], b[1] - b[0] + 1)
        for b in done
        if b[1] - b[0] + 1 <= max_thickness
    ]


@dataclass(frozen=True)
class _Grid:
    """A ruled table: cell boxes in pixels, one per grid unit (a merged cell repeats its box)."""

    units: list[list[tuple[int, int, int, int]]]  # [row][col] → (x0, y0, x1, y1)
    bbox: tuple[int, int, int, int]
    thickness: int


def _merge_positions(values: Sequence[int], tol: int) -> list[int]:
    out: list[list[int]] = []
    for v in sorted(values):
        if out and v - out[-1][-1] <= tol:
            out[-1].append(v)
        else:
            out.append([v])
    return [sum(g) // len(g) for g in out]


def find_ruled_tables(gray: np.ndarray, dpi: int) -> list[_Grid]:
    """Ruled tables in a page image (``gray``: 2-D uint8, 0 = black).

    A rule is a run of dark pixels at least 0.35 in (horizontal) or 0.2 in (vertical) long and
    at most 0.05 in thick: longer than any glyph stroke of body or heading text. A table is a
    connected set of at least two horizontal and two vertical rules; its cells are the grid units,
    joined where the rule between two units is missing (merged cells). Detection runs at half
    resolution (a 2x2 block is dark when any pixel is) so a hair-line rule survives.
    """
    import numpy as np

    dark_full = gray < 160
    h2, w2 = dark_full.shape[0] // 2 * 2, dark_full.shape[1] // 2 * 2
    dark = np.asarray(dark_full[:h2, :w2].reshape(h2 // 2, 2, w2 // 2, 2).any(axis=(1, 3)))
    scale = 2
    px = dpi / scale  # pixels per inch at detection resolution
    tol = max(2, round(px * 0.02))
    max_thick = max(2, round(px * 0.05))
    hrules = [r for r in _rules(_long_runs(dark, max(8, round(px * 0.35))), max_thick)]
    vrules = [r for r in _rules(_long_runs(dark.T, max(8, round(px * 0.2))), max_thick)]
    if len(hrules) < 2 or len(vrules) < 2:
        return []

    # union-find over rules that touch (an h rule and a v rule crossing or meeting)
    parent = list(range(len(hrules) + len(vrules)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i, hr in enumerate(hrules):
        for j, vr in enumerate(vrules):
            if (
                hr.start - tol <= vr.pos <= hr.end + tol
                and vr.start - tol <= hr.pos <= vr.end + tol
            ):
                parent[find(i)] = find(len(hrules) + j)
    clusters: dict[int, tuple[list[_Rule], list[_Rule]]] = {}
    for i, hr in enumerate(hrules):
        clusters.setdefault(find(i), ([], []))[0].append(hr)
    for j, vr in enumerate(vrules):
        clusters.setdefault(find(len(hrules) + j), ([], []))[1].append(vr)

    grids: list[_Grid] = []
    for hs, vs in clusters.values():
        ys = _merge_positions([r.pos for r in hs], tol)
        xs = _merge_positions([r.pos for r in vs], tol)
        if len(ys) < 2 or len(xs) < 2:
            continue
        grid = _grid(ys, xs, hs, vs, tol)
        if grid is None:
            continue
        thick = max(r.thickness for r in [*hs, *vs])
        units = [
            [(x0 * scale, y0 * scale, x1 * scale, y1 * scale) for x0, y0, x1, y1 in row]
            for row in grid
        ]
        bbox = (xs[0] * scale, ys[0] * scale, xs[-1] * scale, ys[-1] * scale)
        grids.append(_Grid(units, bbox, thick * scale))
    grids.sort(key=lambda g: g.bbox[1])
    return grids


def _grid(
    ys: list[int], xs: list[int], hs: list[_Rule], vs: list[_Rule], tol: int
) -> list[list[tuple[int, int, int, int]]] | None:
    """Cell box of every grid unit; ``None`` when the rules do not make a table (fewer than two
    cells)."""
    n_rows, n_cols = len(ys) - 1, len(xs) - 1

    def v_at(x: int, y: int) -> bool:  # a vertical rule at x passing through y
        return any(abs(r.pos - x) <= tol and r.start - tol <= y <= r.end + tol for r in vs)

    def h_at(y: int, x: int) -> bool:
        return any(abs(r.pos - y) <= tol and r.start - tol <= x <= r.end + tol for r in hs)

    parent = list(range(n_rows * n_cols))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i in range(n_rows):
        ymid = (ys[i] + ys[i + 1]) // 2
        for j in range(n_cols):
            xmid = (xs[j] + xs[j + 1]) // 2
            if j + 1 < n_cols and not v_at(xs[j + 1], ymid):
                parent[find(i * n_cols + j)] = find(i * n_cols + j + 1)
            if i + 1 < n_rows and not h_at(ys[i + 1], xmid):
                parent[find(i * n_cols + j)] = find((i + 1) * n_cols + j)
    boxes: dict[int, list[int]] = {}
    for i in range(n_rows):
        for j in range(n_cols):
            b = boxes.setdefault(find(i * n_cols + j), [xs[j], ys[i], xs[j + 1], ys[i + 1]])
            b[0], b[1] = min(b[0], xs[j]), min(b[1], ys[i])
            b[2], b[3] = max(b[2], xs[j + 1]), max(b[3], ys[i + 1])
    if len(boxes) < 2:
        return None
    return [
        [tuple(boxes[find(i * n_cols + j)]) for j in range(n_cols)]  # type: ignore[misc]
        for i in range(n_rows)
    ]


# ---------------------------------------------------------------- the page


@dataclass(frozen=True)
class OcrLine:
    """One line of recognised text; positions in PDF points from the page's top-left corner.
    ``size`` is the median word-box height (a proxy for the font size)."""

    text: str
    top: float
    bottom: float
    x0: float
    x1: float
    size: float
    conf: float | None


@dataclass(frozen=True)
class OcrTable:
    """A ruled table read cell by cell: ``rows`` with merged cells repeated in every unit they
    cover; ``top`` / ``bottom`` in PDF points."""

    rows: list[list[str]]
    top: float
    bottom: float
    x_edges: tuple[float, ...]


@dataclass(frozen=True)
class OcrPage:
    """A page read by Tesseract: ``paragraphs`` (lists of lines, Tesseract's reading order),
    ``tables``, and ``confidence``: the mean word confidence (0-1) over the page's text and cells,
    ``None`` when Tesseract found no word."""

    paragraphs: list[list[OcrLine]]
    tables: list[OcrTable]
    confidence: float | None
    n_words: int


def _crop_cell(gray_img: Image.Image, box: tuple[int, int, int, int], inset: int) -> Any:
    x0, y0, x1, y1 = box
    if x1 - x0 <= 2 * inset + 2 or y1 - y0 <= 2 * inset + 2:
        return None
    return gray_img.crop((x0 + inset, y0 + inset, x1 - inset, y1 - inset))


def ocr_image(
    image: Image.Image,
    languages: str,
    dpi: int,
    reread_dpi: int | None = None,
    layout_dpi: int | None = None,
) -> OcrPage:
    """Read a page image (rendered at ``dpi``): see the module docstring for the passes.
    ``reread_dpi``: the resolution weak lines and cells are shrunk to for pass 3;
    ``layout_dpi``: the resolution the page is shrunk to for pass 2 (``None`` or a value >=
    ``dpi``: not shrunk).

    Raises ``TesseractMissing`` when the binary cannot be run; Tesseract's own failures
    (``pytesseract.TesseractError``) propagate.
    """
    from concurrent.futures import ThreadPoolExecutor

    import numpy as np
    from PIL import Image, ImageDraw

    gray_img = image.convert("L")
    gray = np.asarray(gray_img)
    to_pt = 72.0 / dpi
    grids = find_ruled_tables(gray, dpi)

    # pass 1: every table cell, one strip
    cell_boxes: list[tuple[int, int, int, int]] = []
    cell_crops: list[Image.Image] = []
    for g in grids:
        for row in g.units:
            for box in row:
                if box in cell_boxes:
                    continue  # a merged cell: read once
                crop = _crop_cell(gray_img, box, g.thickness + 4)
                # a blank cell (no ink) needs no reading
                if crop is not None and (np.asarray(crop) < 160).any():
                    cell_boxes.append(box)
                    cell_crops.append(crop)
    # pass 1 runs in a second thread (its own Tesseract process) while pass 2 runs here
    pool = ThreadPoolExecutor(1, thread_name_prefix="rag-lab-ocr-cells") if cell_crops else None
    cells_job = pool.submit(_read_strip, cell_crops, languages) if pool else None

    # pass 2: the page without its tables
    page_img = gray_img
    if grids:
        page_img = gray_img.copy()
        draw = ImageDraw.Draw(page_img)
        for g in grids:
            x0, y0, x1, y1 = g.bbox
            m = g.thickness + 2
            draw.rectangle((x0 - m, y0 - m, x1 + m, y1 + m), fill=255)
    grouped: dict[tuple[int, int], dict[int, list[_Word]]] = {}
    try:
        f = min(1.0, layout_dpi / dpi) if layout_dpi else 1.0
        small = (
            page_img
            if f == 1.0
            else page_img.resize(
                (round(page_img.width * f), round(page_img.height * f)), Image.Resampling.LANCZOS
            )
        )
        page_data = _tesseract_data(small, languages, 3)
        if f != 1.0:  # word boxes back in the page image's pixels
            for key in ("left", "top", "width", "height"):
                page_data[key] = [round(int(v) / f) for v in page_data[key]]
        cell_readings = cells_job.result() if cells_job else []
    finally:
        if pool:
            pool.shutdown(wait=True, cancel_futures=True)
    for (block, par, line), word in _words(page_data):
        grouped.setdefault((block, par), {}).setdefault(line, []).append(word)
    line_words = [words for lines_of in grouped.values() for words in lines_of.values()]
    line_crops: list[Image.Image] = []
    for words in line_words:
        x0 = min(w.left for w in words) - 6
        y0 = min(w.top for w in words) - 6
        x1 = max(w.left + w.width for w in words) + 6
        y1 = max(w.top + w.height for w in words) + 6
        line_crops.append(page_img.crop((max(x0, 0), max(y0, 0), x1, y1)))

    # pass 3: weak lines and cells again, in the secondary languages
    readings = [_Reading([ws]) for ws in line_words] + cell_readings
    scale = min(1.0, reread_dpi / dpi) if reread_dpi else 1.0
    readings = _reread_weak(readings, [*line_crops, *cell_crops], languages, scale)
    line_readings, cell_readings = readings[: len(line_words)], readings[len(line_words) :]

    paragraphs: list[list[OcrLine]] = []
    k = 0
    for par_lines in grouped.values():
        lines: list[OcrLine] = []
        for words in par_lines.values():
            text = line_readings[k].text
            conf = line_readings[k].conf
            k += 1
            if not text:
                continue
            heights = sorted(w.height for w in words)
            lines.append(
                OcrLine(
                    text,
                    min(w.top for w in words) * to_pt,
                    max(w.top + w.height for w in words) * to_pt,
                    min(w.left for w in words) * to_pt,
                    max(w.left + w.width for w in words) * to_pt,
                    heights[len(heights) // 2] * to_pt,
                    conf,
                )
            )
        if lines:
            paragraphs.append(lines)

    text_of = {box: r.text for box, r in zip(cell_boxes, cell_readings)}
    tables = []
    for g in grids:
        rows = [[text_of.get(box, "") for box in row] for row in g.units]
        if any(any(c for c in row) for row in rows):
            xs = sorted({b[0] for row in g.units for b in row} | {g.bbox[2]})
            tables.append(
                OcrTable(rows, g.bbox[1] * to_pt, g.bbox[3] * to_pt, tuple(x * to_pt for x in xs))
            )
    all_words = [w for r in readings for w in r.words]
    return OcrPage(paragraphs, tables, _mean_conf(all_words), len(all_words))
