"""Matplotlib for reports: headless, with a CJK fallback font, and figures as inline images.

The one place plots get their backend and fonts. DejaVu Sans (matplotlib's own) draws Latin text;
the first CJK font found is its per-glyph fallback, so Chinese category names and queries render
instead of tofu boxes. The fonts are Debian packages that ``scripts/install_system_deps.sh``
installs (``fonts-wqy-microhei``, ``fonts-noto-cjk``); a matplotlib font cache built before they
were installed does not list them, so the files are registered by path.
"""

from __future__ import annotations

import base64
import io
import logging
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

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
