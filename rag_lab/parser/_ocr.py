"""Tesseract helpers for PDF pages without a text layer (``rag_lab.parser.pdf``).

``ocr_image(image, languages, dpi, ...)`` turns a rendered page into lines (grouped in Tesseract's
paragraphs) and ruled tables, with positions in PDF points so the PDF parser treats them like
text-layer lines (header/footer removal, reading order). The first of ``languages``
(``chi_sim+eng``: ``chi_sim``) is the *primary* language; every line and cell is read in it
alone: one model costs 0.6-0.7x the CPU of Tesseract's combined ``eng+chi_sim`` and reads the
sample's scanned page and a denser one better (the combined model reads some Chinese lines and
cells as English garbage; ``benchmarks/bench_parsing.py`` compares them). A page takes a few
Tesseract runs (each is a process start and a model load), two at a time (``processes``: one
single-threaded Tesseract per core):

1. ruled tables are found in the image with numpy (long thin dark runs = rules; the grid of rules
   gives the cells, merged cells included); every cell is cropped and the crops are stacked into
   one strip image read in block mode (``--psm 6``), shrunk to ``cell_dpi``;
2. the page, with the table regions whitened, is read as one column of text (``--psm 4``),
   shrunk to ``layout_dpi``. Passes 1 and 2 run at once; when the page holds much more text than its
   tables (ink counted in the image), it is cut at a blank band into two parts read at once, so
   that both processes get about half the work;
3. weak readings (a mean word confidence below 0.80, or one word below 0.70: "清零" read as
   "aS" hides in a cell's mean of 0.89) are read again at ``reread_dpi``: weak cells in the
   primary language (a second resolution: on the benchmark's dense page it turns "上 13" back
   into "E113"), and then, where still weak, lines and cells in each other language that can write
   them (a reading holding CJK characters is never re-read in ``eng``; an English line that
   ``chi_sim`` read weakly is). The most confident reading of each crop is kept. Body lines are
   not re-read in the primary language: no gain on the sample's pages, at ~0.9 s of CPU on a
   dense one.

The spaces Tesseract puts between CJK characters are removed, and a degree sign that ``chi_sim``
reads as ``*``, ``"``, ``“``, ``”`` or ``。`` between a digit and ``C``/``F`` is put back
(``70*C`` → ``70°C``; its model reads most °C of the benchmark's scanned pages that way).
Confidences are Tesseract's word confidences (0-100; ``-1`` = not a word) scaled to 0-1. Images
reach Tesseract as uncompressed PGM files (a PNG of a 300 dpi page costs ~0.1 s to write and
again to read), with their resolution (``--dpi``: Tesseract's own guess garbled lines of a part
of a dense page).

Heavy imports (numpy, PIL, pytesseract) happen inside the functions: importing this module is
cheap.
"""

from __future__ import annotations

import bisect
import os
import re
import shutil
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Executor, Future
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
    "has_osd",
    "join_lines",
    "join_words",
    "no_space_char",
    "ocr_image",
    "orientation",
    "upright",
]

# Scripts written without spaces between words: CJK ideographs (with extension A and
# compatibility forms), kana, CJK punctuation and full-width forms (，：（）). Hangul is not here:
# Korean puts spaces between words.
_NOSPACE = "\u3000-\u303f\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff00-\uffef"
_NOSPACE_CHAR = re.compile(f"[{_NOSPACE}]")
# a space Tesseract (or a PDF generator) put between two such characters
_SPACE_IN_CJK = re.compile(f"(?<=[{_NOSPACE}]) +(?=[{_NOSPACE}])")
# Tesseract languages that write CJK characters (``chi_sim_vert`` etc. too)
_CJK_LANGUAGES = ("chi_sim", "chi_tra", "jpn", "kor")
# the degree sign of "65 °C" as chi_sim's fast model reads it: after a digit, before C or F
_DEGREE = re.compile(r"(?<=\d)( ?)[*\"“”。](?= ?[CF](?![A-Za-z]))")

# a line or cell read with a mean confidence below _WEAK, or holding a word below _WEAK_WORD, is
# read again: one garbled word ("清零" read "aS", 0.54) hides in a mean of 0.89
_WEAK = 0.80
_WEAK_WORD = 0.70
# punctuation that never starts a word: a line starting with it continues the previous word
_CLOSING = frozenset(",.;:!?)]}%")
_PAD = 24  # white pixels around each crop in a strip image (Tesseract needs a margin)
_GAP = 40  # white pixels between crops: wide enough that Tesseract never joins two crops' lines
_MAX_STRIP = 16000  # pixels: Leptonica refuses images much taller than 32767
_INK = 160  # a pixel darker than this is ink (rules, glyphs)
# the page text is read as one column of text of variable sizes: --psm 3 (a full layout analysis)
# cut a line of a one-column page into two blocks and put its end after the next line (a dense
# page's CER 0.17 against 0.013), and the PDF parser assumes one text column anyway
_LAYOUT_PSM = 4
# a page's text is cut in two parts read at once when it holds at least twice the ink of its
# table cells and ink covers at least this share of the page (~10 lines of 10 pt text on A4;
# below that the second process's start and model load cost more than it saves)
_MIN_SPLIT_INK = 0.015


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


def has_osd() -> bool:
    """Whether Tesseract's orientation and script data (``osd``, Debian's
    ``tesseract-ocr-osd``) is installed."""
    import pytesseract

    try:
        return "osd" in pytesseract.get_languages(config="")
    except (pytesseract.TesseractNotFoundError, FileNotFoundError, PermissionError):
        return False


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


# orientation detection: the image shrunk to this resolution (OSD reads 150 dpi as well as 300,
# in half the time), and the least orientation confidence that turns an image (Tesseract's
# scale: an upright or turned page of text scores 3-20; below 1.5 it is a guess)
_OSD_DPI = 150
_OSD_MIN_CONFIDENCE = 1.5


def orientation(image: Image.Image, dpi: int) -> tuple[int, float]:
    """``(degrees, confidence)``: how far ``image`` (rendered at ``dpi``) must be turned
    clockwise to be upright (0, 90, 180 or 270), by Tesseract's orientation and script detection
    (``--psm 0``, the ``osd`` data); ``(0, 0.0)`` when it cannot tell (too little text, or a
    confidence under 1.5)."""
    import pytesseract

    scale = min(1.0, _OSD_DPI / dpi)
    small = _shrink(image.convert("L"), scale)
    small.format = "PPM"
    try:
        with _single_threaded():
            osd = pytesseract.image_to_osd(
                small,
                config=f"--psm 0 --dpi {round(dpi * scale)}",
                output_type=pytesseract.Output.DICT,
            )
    except (pytesseract.TesseractNotFoundError, FileNotFoundError):
        raise TesseractMissing(pytesseract.pytesseract.tesseract_cmd) from None
    except pytesseract.TesseractError:  # "Too few characters. Skipping this page"
        return 0, 0.0
    degrees, conf = int(osd.get("rotate", 0)) % 360, float(osd.get("orientation_conf", 0.0))
    if degrees not in (90, 180, 270) or conf < _OSD_MIN_CONFIDENCE:
        return 0, conf
    return degrees, conf


def upright(image: Image.Image, degrees: int) -> Image.Image:
    """``image`` turned ``degrees`` clockwise (``orientation``'s answer); itself for 0."""
    if degrees % 360 == 0:
        return image
    return image.rotate(-degrees, expand=True)  # a multiple of 90: exact (a transpose)


def _tesseract_data(
    image: Image.Image, lang: str, psm: int, dpi: int | None = None
) -> dict[str, list[Any]]:
    """Tesseract's words in ``image`` (``image_to_data``), told the image's resolution ``dpi``:
    without it Tesseract guesses one from the text, and a guess that is off garbles lines (part
    of a dense page at 180 dpi: "4. 核对油位计读数。" read "4. Ne")."""
    import pytesseract

    # pytesseract writes the image to a temporary file in its ``format``: PGM, not PNG (no
    # compression to spend 0.05-0.13 s on per page image, nor decompression in Tesseract)
    image.format = "PPM"
    try:
        with _single_threaded():
            data: dict[str, list[Any]] = pytesseract.image_to_data(
                image,
                lang=lang,
                config=f"--psm {psm}" + (f" --dpi {dpi}" if dpi else ""),
                output_type=pytesseract.Output.DICT,
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


def _fix_degree(text: str) -> str:
    """``70*C`` → ``70°C``, ``65 "C`` → ``65 °C``: see ``_DEGREE``."""
    return _DEGREE.sub(r"\1°", text)


@dataclass
class _Reading:
    """What Tesseract read in one crop or line: its lines of words."""

    lines: list[list[_Word]] = field(default_factory=list)

    @property
    def words(self) -> list[_Word]:
        return [w for line in self.lines for w in line]

    @property
    def text(self) -> str:
        return _fix_degree(join_lines([join_words([w.text for w in line]) for line in self.lines]))

    @property
    def conf(self) -> float | None:
        return _mean_conf(self.words)


def _shrink(image: Image.Image, scale: float) -> Image.Image:
    """``image`` resized by ``scale`` (Lanczos); itself when ``scale`` is 1."""
    from PIL import Image

    if scale == 1.0:
        return image
    size = (max(1, round(image.width * scale)), max(1, round(image.height * scale)))
    return image.resize(size, Image.Resampling.LANCZOS)


def _read_strip(
    crops: Sequence[Image.Image], lang: str, scale: float = 1.0, dpi: int | None = None
) -> list[_Reading]:
    """Read many crops with one Tesseract call: they are stacked, white gaps between them, into
    one image read in block mode; words are given back to the crop whose band holds them. A
    strip is at most ``_MAX_STRIP`` pixels tall (more crops take more calls). With ``scale``
    below 1 the crops are shrunk first (Lanczos); word boxes are then in the shrunk pixels.
    ``dpi``: the crops' resolution before shrinking (Tesseract is told ``dpi * scale``)."""
    crops = [_shrink(c, scale) for c in crops]
    read_dpi = round(dpi * scale) if dpi else None
    readings: list[_Reading] = []
    batch: list[Image.Image] = []
    height = 0
    for crop in crops:
        if batch and height + crop.height + _GAP > _MAX_STRIP:
            readings += _read_one_strip(batch, lang, read_dpi)
            batch, height = [], 0
        batch.append(crop)
        height += crop.height + _GAP
    if batch:
        readings += _read_one_strip(batch, lang, read_dpi)
    return readings


def _read_one_strip(
    crops: Sequence[Image.Image], lang: str, dpi: int | None = None
) -> list[_Reading]:
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
    for key, word in _words(_tesseract_data(strip, lang, 6, dpi)):
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


def _writes_cjk(lang: str) -> bool:
    return lang.startswith(_CJK_LANGUAGES)


def _better(new: _Reading, old: _Reading) -> bool:
    return bool(new.words) and (new.conf or 0.0) > (old.conf or 0.0)


def _reread_weak(
    readings: list[_Reading],
    crops: Sequence[Image.Image],
    languages: str,
    scale: float = 1.0,
    in_primary: Sequence[bool] | None = None,
    pool: Executor | None = None,
    dpi: int | None = None,
) -> list[_Reading]:
    """The weak readings read again, their crops shrunk by ``scale``: first in the primary
    (first) language where ``in_primary[i]`` (a second resolution), then, where the better of
    those is still weak, in each other language that can write the reading (one holding CJK
    characters is never re-read in a language without them, like ``eng``). The most confident
    reading of each crop wins. The strips are read at once in ``pool`` (in turn without one);
    ``dpi``: the crops' resolution."""
    primary, *others = languages.split("+")
    weak = [i for i, r in enumerate(readings) if _weak(r)]
    again = [i for i in weak if in_primary and in_primary[i]]
    jobs = [(primary, again)] if again else []
    for lang in others:
        ids = [i for i in weak if _writes_cjk(lang) or not _NOSPACE_CHAR.search(readings[i].text)]
        if ids:
            jobs.append((lang, ids))
    if not jobs:
        return readings
    run: Callable[..., Future[list[_Reading]]] = pool.submit if pool else _now
    futures = [run(_read_strip, [crops[i] for i in ids], lang, scale, dpi) for lang, ids in jobs]
    out = list(readings)
    if again:
        for i, r in zip(again, futures[0].result()):
            if _better(r, out[i]):
                out[i] = r
        jobs, futures = jobs[1:], futures[1:]
    still = {i for i in weak if _weak(out[i])}
    for (_, ids), future in zip(jobs, futures):
        for i, r in zip(ids, future.result()):
            if i in still and _better(r, out[i]):
                out[i] = r
    return out


def _now(fn: Callable[..., list[_Reading]], *args: Any) -> Future[list[_Reading]]:
    """``fn(*args)`` run here, as a finished future."""
    done: Future[list[_Reading]] = Future()
    done.set_result(fn(*args))
    return done


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
    cover; ``top`` / ``bottom`` in PDF points; ``confidence``: the mean word confidence (0-1)
    over its cells (``None``: no word)."""

    rows: list[list[str]]
    top: float
    bottom: float
    x_edges: tuple[float, ...]
    confidence: float | None = None


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


def _cut_row(ink_rows: np.ndarray, share: float, window: int) -> int | None:
    """Where to cut a page image in two so that about ``share`` of its ink lies above: the middle
    of the widest run of blank rows within ``window`` rows of that point (a paragraph gap rather
    than a line gap); ``None`` when there is no blank row there."""
    import numpy as np

    total = int(ink_rows.sum())
    if total == 0:
        return None
    target = int(np.searchsorted(np.cumsum(ink_rows), share * total))
    lo, hi = max(target - window, 0), min(target + window, len(ink_rows))
    blank = ink_rows[lo:hi] <= max(2, ink_rows.shape[0] // 1000)
    best: tuple[int, int] | None = None  # (length, middle)
    start = None
    for y, b in enumerate([*blank.tolist(), False]):
        if b and start is None:
            start = y
        elif not b and start is not None:
            if best is None or y - start > best[0]:
                best = (y - start, lo + (start + y) // 2)
            start = None
    return best[1] if best else None


def _parts(page: np.ndarray, cell_ink: int, dpi: int, processes: int) -> list[tuple[int, int]]:
    """Row ranges of the page image (tables whitened) to read as separate Tesseract jobs: the
    whole page, or two parts when its text is heavy enough (``_MIN_SPLIT_INK``) and outweighs
    the table cells (read by another process meanwhile) twice: the first part then holds about
    half of all the ink, the second one follows the cells in the other process."""
    height = page.shape[0]
    ink_rows = (page < _INK).sum(axis=1)
    ink = int(ink_rows.sum())
    if processes < 2 or ink < 2 * cell_ink or ink < _MIN_SPLIT_INK * page.size:
        return [(0, height)]
    cut = _cut_row(ink_rows, (ink + cell_ink) / 2 / ink, dpi // 2)
    if cut is None or cut <= 0 or cut >= height:
        return [(0, height)]
    return [(0, cut), (cut, height)]


def ocr_image(
    image: Image.Image,
    languages: str,
    dpi: int,
    reread_dpi: int | None = None,
    layout_dpi: int | None = None,
    cell_dpi: int | None = None,
    processes: int = 2,
) -> OcrPage:
    """Read a page image (rendered at ``dpi``): see the module docstring for the passes.
    ``layout_dpi``, ``cell_dpi``, ``reread_dpi``: the resolutions the page text, the table cells
    and the re-read crops are shrunk to (``None`` or a value >= ``dpi``: not shrunk);
    ``processes``: Tesseract processes run at once for this page.

    Raises ``TesseractMissing`` when the binary cannot be run; Tesseract's own failures
    (``pytesseract.TesseractError``) propagate.
    """
    from concurrent.futures import ThreadPoolExecutor

    import numpy as np
    from PIL import ImageDraw

    def scale(target: int | None) -> float:
        return min(1.0, target / dpi) if target else 1.0

    primary = languages.split("+")[0]
    gray_img = image.convert("L")
    gray = np.asarray(gray_img)
    to_pt = 72.0 / dpi
    grids = find_ruled_tables(gray, dpi)

    # pass 1: every table cell, one strip
    cell_boxes: list[tuple[int, int, int, int]] = []
    cell_crops: list[Image.Image] = []
    cell_ink = 0
    for g in grids:
        for row in g.units:
            for box in row:
                if box in cell_boxes:
                    continue  # a merged cell: read once
                crop = _crop_cell(gray_img, box, g.thickness + 4)
                ink = int((np.asarray(crop) < _INK).sum()) if crop is not None else 0
                if ink:  # a blank cell (no ink) needs no reading
                    cell_boxes.append(box)
                    cell_crops.append(crop)
                    cell_ink += ink

    # pass 2: the page without its tables, in one or two parts
    page_img = gray_img
    if grids:
        page_img = gray_img.copy()
        draw = ImageDraw.Draw(page_img)
        for g in grids:
            x0, y0, x1, y1 = g.bbox
            m = g.thickness + 2
            draw.rectangle((x0 - m, y0 - m, x1 + m, y1 + m), fill=255)
    parts = _parts(np.asarray(page_img), cell_ink, dpi, processes)
    f = scale(layout_dpi)

    def read_part(top: int, bottom: int) -> dict[str, list[Any]]:
        part = (
            page_img
            if (top, bottom) == (0, page_img.height)
            else page_img.crop((0, top, page_img.width, bottom))
        )
        data = _tesseract_data(_shrink(part, f), primary, _LAYOUT_PSM, round(dpi * f))
        # word boxes back in the page image's pixels
        data["left"] = [round(int(v) / f) for v in data["left"]]
        data["width"] = [round(int(v) / f) for v in data["width"]]
        data["height"] = [round(int(v) / f) for v in data["height"]]
        data["top"] = [top + round(int(v) / f) for v in data["top"]]
        return data

    with ThreadPoolExecutor(max(1, processes), thread_name_prefix="rag-lab-ocr-page") as pool:
        # submitted in this order so that the cells (usually the shorter job) run beside the
        # first part and the second part follows them
        part_jobs = [pool.submit(read_part, *parts[0])]
        cells_job = (
            pool.submit(_read_strip, cell_crops, primary, scale(cell_dpi), dpi)
            if cell_crops
            else None
        )
        part_jobs += [pool.submit(read_part, *p) for p in parts[1:]]
        grouped: dict[tuple[int, int, int], dict[int, list[_Word]]] = {}
        for k, job in enumerate(part_jobs):
            for (block, par, line), word in _words(job.result()):
                grouped.setdefault((k, block, par), {}).setdefault(line, []).append(word)
        cell_readings = cells_job.result() if cells_job else []
        line_words = [words for lines_of in grouped.values() for words in lines_of.values()]
        line_crops: list[Image.Image] = []
        for words in line_words:
            x0 = min(w.left for w in words) - 6
            y0 = min(w.top for w in words) - 6
            x1 = max(w.left + w.width for w in words) + 6
            y1 = max(w.top + w.height for w in words) + 6
            line_crops.append(page_img.crop((max(x0, 0), max(y0, 0), x1, y1)))

        # pass 3: weak readings again (cells in the primary language too)
        readings = [_Reading([ws]) for ws in line_words] + cell_readings
        in_primary = [False] * len(line_words) + [scale(cell_dpi) != scale(reread_dpi)] * len(
            cell_readings
        )
        readings = _reread_weak(
            readings,
            [*line_crops, *cell_crops],
            languages,
            scale(reread_dpi),
            in_primary,
            pool,
            dpi,
        )
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
    words_of = {box: r.words for box, r in zip(cell_boxes, cell_readings)}
    tables = []
    for g in grids:
        rows = [[text_of.get(box, "") for box in row] for row in g.units]
        if any(any(c for c in row) for row in rows):
            xs = sorted({b[0] for row in g.units for b in row} | {g.bbox[2]})
            cells = {box for row in g.units for box in row}
            conf = _mean_conf([w for box in cells for w in words_of.get(box, [])])
            tables.append(
                OcrTable(
                    rows,
                    g.bbox[1] * to_pt,
                    g.bbox[3] * to_pt,
                    tuple(x * to_pt for x in xs),
                    conf,
                )
            )
    all_words = [w for r in readings for w in r.words]
    return OcrPage(paragraphs, tables, _mean_conf(all_words), len(all_words))
