"""Matplotlib for reports: headless, with a CJK fallback font, figures as inline images, and
figures kept in the stage cache.

The one place plots get their backend and fonts. DejaVu Sans (matplotlib's own) draws Latin text;
the first CJK font found is its per-glyph fallback, so Chinese category names and queries render
instead of tofu boxes. The fonts are Debian packages that ``scripts/install_system_deps.sh``
installs (``fonts-wqy-microhei``, ``fonts-noto-cjk``); a matplotlib font cache built before they
were installed does not list them, so the files are registered by path.

Inside :func:`cached_in` (a sweep's end, a run's ``report.html``), a figure is drawn once per
content: :func:`cached_files` keys what a plot function writes by the data it draws (its caller
passes that data as the key), rag_lab's version, matplotlib's, the plotting modules' source and
the fonts found, and keeps the files in ``<cache.dir>/figures/``. A warm rerun whose per-query
scores did not change copies the same PNGs instead of importing matplotlib and drawing them
again (~0.6 CPU-s of a warm 3-job sweep). ``rag-lab cache clear`` removes them with the rest.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import io
import json
import logging
import os
import pickle
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

NAMESPACE = "figures"  # <cache.dir>/figures/<key[:2]>/<key>/: the files one plot call wrote
_MANIFEST = "files.json"  # in an entry: the names of the files, in the order they were returned
# the modules whose drawing code a cached figure depends on (their source is part of the key)
_DRAWING_MODULES = ("figures.py", "leaderboard.py", "run_page.py")
_CACHES: list[Any] = []  # the StageCache of the innermost cached_in (None: caching off)
_CODE: list[bytes] = []

# (family name, file) in order of preference: the first family matplotlib knows, or whose file
# exists, is the fallback
CJK_FONTS = (
    ("WenQuanYi Micro Hei", "/usr/share/fonts/truetype/wqy/wqy-microhei.ttc"),
    ("Noto Sans CJK SC", "/usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc"),
    ("Noto Sans CJK JP", "/usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc"),
)
_configured: list[str] = []


def cjk_family() -> str | None:
    """The CJK fallback family in use (None: no CJK font installed; Chinese text draws as boxes
    and matplotlib warns "Glyph ... missing")."""
    configure()
    return _configured[0] or None


def pyplot() -> Any:
    """``matplotlib.pyplot`` on the Agg backend with ``font.family = [DejaVu Sans, <CJK>]``
    (configured once per process)."""
    configure()
    import matplotlib.pyplot as plt

    return plt


def subplots(figsize: tuple[float, float], nrows: int = 1) -> tuple[Any, Any]:
    """A figure and its axes (one, or ``nrows`` stacked: an array), configured as :func:`pyplot`
    configures them, on an Agg canvas of its own: outside pyplot, so nothing global to close, and
    no pyplot import (~0.15 s)."""
    configure()
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=figsize)
    FigureCanvasAgg(fig)
    return fig, fig.subplots(nrows=nrows) if nrows > 1 else fig.subplots()


def configure() -> Any:
    """``matplotlib`` on the Agg backend with ``font.family = [DejaVu Sans, <CJK>]``
    (configured once per process)."""
    import matplotlib

    matplotlib.use("Agg")  # headless: reports are written on servers and in CI
    if not _configured:
        from matplotlib import font_manager

        known = {f.name for f in font_manager.fontManager.ttflist}
        family = ""
        for name, file in CJK_FONTS:
            if name not in known and Path(file).is_file():
                font_manager.fontManager.addfont(file)
                known = {f.name for f in font_manager.fontManager.ttflist}
            if name in known:
                family = name
                break
        if not family:
            log.warning(
                "no CJK font found (%s): Chinese labels will not render; "
                "run scripts/install_system_deps.sh",
                ", ".join(n for n, _ in CJK_FONTS),
            )
        matplotlib.rcParams["font.family"] = ["DejaVu Sans", family] if family else ["DejaVu Sans"]
        _configured.append(family)
    return matplotlib


def png_data_uri(path_or_fig: Path | Any, dpi: int = 100, **savefig: Any) -> str:
    """``data:image/png;base64,...`` of a PNG file or a matplotlib figure (for a one-file page);
    ``savefig``: more options of ``Figure.savefig`` (``bbox_inches="tight"``)."""
    if isinstance(path_or_fig, Path):
        data = path_or_fig.read_bytes()
    else:
        buf = io.BytesIO()
        path_or_fig.savefig(buf, format="png", dpi=dpi, **savefig)
        data = buf.getvalue()
    return "data:image/png;base64," + base64.b64encode(data).decode("ascii")


@contextlib.contextmanager
def cached_in(cache_dir: str | os.PathLike | None) -> Iterator[None]:
    """Within: :func:`cached_files` keeps figures in ``<cache_dir>/figures`` (the process-wide
    stage cache of ``cache_dir``, with its fault policy). ``None``: figures are drawn every time."""
    cache = None
    if cache_dir:
        from rag_lab.cache import open_cache

        cache = open_cache(cache_dir)
    _CACHES.append(cache)
    try:
        yield
    finally:
        _CACHES.pop()


def _code_version() -> bytes:
    """What a cached figure's pixels depend on besides its data: the versions of rag_lab and
    matplotlib (from its metadata: no import), the drawing modules' source and the CJK fonts
    present."""
    if not _CODE:
        from importlib import metadata

        from rag_lab import __version__

        h = hashlib.blake2b(digest_size=16)
        h.update(f"{__version__}|{metadata.version('matplotlib')}|".encode())
        here = Path(__file__).parent
        for name in _DRAWING_MODULES:
            h.update((here / name).read_bytes())
        h.update(repr([Path(f).is_file() for _, f in CJK_FONTS]).encode())
        _CODE.append(h.digest())
    return _CODE[0]


def figure_key(kind: str, data: Any) -> str:
    """The cache key of plot ``kind`` drawn from ``data`` (plain values and numpy arrays: two
    keys are equal only when their pickles are, so equal keys mean equal data)."""
    blob = pickle.dumps((kind, data), protocol=4)
    return hashlib.blake2b(blob + _code_version(), digest_size=20).hexdigest()


def cached_files(
    kind: str, data: Any, out_dir: Path, render: Callable[[Path], list[Path]]
) -> list[Path]:
    """``render(folder)`` writes figure files into ``folder`` and returns them (possibly none).
    Inside :func:`cached_in`, the files a call with the same ``kind`` and ``data`` rendered
    before are copied into ``out_dir`` instead (``data``: everything the plot reads); outside
    it, or with the cache off, ``render(out_dir)``."""
    cache = _CACHES[-1] if _CACHES else None
    if cache is None:
        return render(out_dir)
    key = figure_key(kind, data)

    def fill(folder: Path) -> None:
        names = [p.name for p in render(folder)]
        (folder / _MANIFEST).write_text(json.dumps(names))

    entry = cache.get_dir(NAMESPACE, key)
    if entry is None:
        entry = cache.put_dir(NAMESPACE, key, fill)
    try:
        names = json.loads((entry / _MANIFEST).read_text()) if entry is not None else None
    except (OSError, ValueError):  # damaged entry: drawn again, here
        names = None
    if names is None:
        return render(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    out = []
    for name in names:
        shutil.copyfile(entry / name, out_dir / name)  # type: ignore[operator]
        out.append(out_dir / name)
    return out


def cached_png(kind: str, data: Any, draw: Callable[[], Any], **savefig: Any) -> str | None:
    """The ``data:`` URI of the figure ``draw()`` returns (``None``: nothing to draw), kept as
    :func:`cached_files` keeps files; ``savefig`` as :func:`png_data_uri`'s."""

    def render(folder: Path) -> list[Path]:
        fig = draw()
        if fig is None:
            return []
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / "figure.png"
        fig.savefig(path, format="png", dpi=savefig.pop("dpi", 100), **savefig)
        return [path]

    with _scratch() as tmp:
        files = cached_files(kind, data, tmp, render)
        return png_data_uri(files[0]) if files else None


@contextlib.contextmanager
def _scratch() -> Iterator[Path]:
    import tempfile

    with tempfile.TemporaryDirectory(prefix="rag_lab_figure_") as tmp:
        yield Path(tmp)
