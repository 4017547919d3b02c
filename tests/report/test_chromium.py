"""The run and sweep pages in headless Chromium: the screenshot is not blank, the DOM after the
page's script ran has the leaderboard rows, and the script finished without an error (it sets
``data-ready="1"`` on the body as its last statement; Chromium logs no uncaught exception)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from rag_lab.report import write_run_report, write_sweep_report

BROWSER = next(
    (b for b in ("chromium", "chromium-browser", "google-chrome") if shutil.which(b)), None
)
pytestmark = pytest.mark.skipif(
    BROWSER is None,
    reason="no Chromium on PATH (scripts/install_system_deps.sh installs the `chromium` package)",
)
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars"]


def chromium(*args: str) -> subprocess.CompletedProcess[str]:
    assert BROWSER is not None
    return subprocess.run(
        [BROWSER, *FLAGS, "--enable-logging=stderr", "--v=0", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


def check_page(path: Path, tmp_path: Path, expected_rows: list[str]) -> None:
    url = path.resolve().as_uri()
    shot = tmp_path / f"{path.parent.name}.png"
    proc = chromium(f"--screenshot={shot}", "--window-size=1280,1600", url)
    assert shot.is_file(), proc.stderr[-2000:]
    from PIL import Image

    pixels = np.asarray(Image.open(shot).convert("L"), dtype=np.float64)
    assert pixels.shape == (1600, 1280)
    # a blank (or error) page is one flat colour: the report has text, tables and plots
    assert pixels.std() > 20
    assert (pixels < 128).mean() > 0.01

    dom = chromium("--dump-dom", url)
    assert dom.returncode == 0, dom.stderr[-2000:]
    html = dom.stdout
    assert 'data-ready="1"' in html, "the page script did not run to its end"
    assert "Uncaught" not in dom.stderr, dom.stderr[-2000:]
    for row in expected_rows:
        assert row in html
    # filled in by the script: "<shown> / <all> queries"
    assert re.search(r'id="q-count" class="note">(\d+) / \1 queries</span>', html)


def test_run_report_renders(runs, tmp_path: Path) -> None:
    page = write_run_report(runs.a)
    check_page(page, tmp_path, ['<td class="">ndcg_at_10</td>', '<td class="">hit_rate_at_5</td>'])


def test_sweep_report_renders(sweep: Path, tmp_path: Path) -> None:
    page = write_sweep_report(sweep)
    check_page(page, tmp_path, ['<td class="num">1</td><td class="">', "p (Holm)"])


def test_run_report_is_legible_at_1400_px(runs, tmp_path: Path) -> None:
    """issue 31: the per-category plot was a wide figure squeezed into a ~620 px box (~5 px
    labels); now a panel per metric at the page's width, shown unscaled at 1400 px; the wide
    by-category table scrolls inside its box; timings are rounded."""
    import base64
    import io

    from PIL import Image

    page = write_run_report(runs.a)
    url = page.resolve().as_uri()
    shot = tmp_path / "wide.png"
    proc = chromium(f"--screenshot={shot}", "--window-size=1400,2400", url)
    assert shot.is_file(), proc.stderr[-2000:]
    html = chromium("--dump-dom", url).stdout
    wide = re.search(r'<figure class="wide"><img src="data:image/png;base64,([^"]+)"', html)
    assert wide, "the per-category plot is not a wide figure"
    plot = Image.open(io.BytesIO(base64.b64decode(wide.group(1))))
    content = 1280 - 2 * 32  # body max-width less its padding (html.CSS)
    # shown at its own pixels (no downscale): matplotlib's 10 pt labels at 100 dpi are ~14 px
    assert 600 <= plot.width <= content
    panels = plot.height / plot.width
    assert panels > 0.4  # stacked panels, not one flat strip
    assert re.search(r'<div class="scroll"><table[^>]*>\s*<thead><tr><th[^>]*>category', html)
    timing = re.search(r"<dt>total_seconds</dt><dd>([^<]+)</dd>", html)
    assert timing and re.fullmatch(r"\d+\.\d{2}", timing.group(1)), timing
