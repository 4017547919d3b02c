"""MLflow's own UI, looked at in headless Chromium: screenshots of where a rag_lab user looks.

    python scripts/mlflow_ui_check.py --uri http://127.0.0.1:5000 --experiment rag_lab --out DIR

For the experiment's newest run it writes, at 1400 px wide, ``DIR/<page>.png`` and the page's
visible text ``DIR/<page>.txt`` for three pages, each waited for until the text a user would read
there is on screen (a page that never shows it fails with the text it did show):

- ``runs``: the experiment's runs table (the run's name, the headline metric columns);
- ``trace_documents``: one evaluated query's trace with its RETRIEVER span selected (the document
  ids it returned);
- ``trace_assessments``: the same trace's assessments (retrieval outcomes, judge verdicts).

Chromium is driven through the DevTools protocol (``--remote-debugging-port``, over a websocket:
the ``websocket-client`` package), so each page is loaded once and read when MLflow's single-page
app has rendered it, not after a fixed delay. tests/tracking/test_mlflow_ui.py runs this against
a real ``mlflow server`` on PostgreSQL and checks what it saw; docs/tracking.md shows the result.
"""

from __future__ import annotations

import argparse
import base64
import json
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

WIDTH, HEIGHT = 1400, 1000
BROWSERS = ("chromium", "chromium-browser", "google-chrome")
PAGE_TIMEOUT_S = 120.0  # a page's text on screen; the machine may be loaded
ASSISTANT_WAIT_S = 15.0  # how long MLflow's assistant panel may take to open on a first visit
# MLflow 3.17's UI picks its navigation from a "workflow type" (GenAI or model training) kept in
# the browser, GenAI by default, which lands an experiment on a traces overview. Links rag_lab
# prints carry the URL parameter that selects model training (rag_lab/tracking/evaluation.py).
ML_WORKFLOW = "workflowType=machine_learning"


def browser() -> str | None:
    return next((b for b in BROWSERS if shutil.which(b)), None)


class PageTimeout(AssertionError):
    """A page did not show the expected text in time (the message has what it did show)."""


@dataclass
class Chromium:
    """One headless Chromium tab over the DevTools protocol."""

    ws: Any
    proc: subprocess.Popen[bytes]
    profile: Path
    _next_id: int = 0
    errors: list[str] = field(default_factory=list)  # uncaught exceptions of the page

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        self._next_id += 1
        ident = self._next_id
        self.ws.send(json.dumps({"id": ident, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("method") == "Runtime.exceptionThrown":
                details = msg["params"]["exceptionDetails"]
                exc = details.get("exception", {})
                self.errors.append(exc.get("description") or details.get("text", ""))
            if msg.get("id") == ident:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return dict(msg.get("result", {}))

    def evaluate(self, expression: str) -> Any:
        out = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        if "exceptionDetails" in out:
            raise RuntimeError(f"{expression[:80]}: {out['exceptionDetails']}")
        return out["result"].get("value")

    def open(self, url: str) -> None:
        self.call("Page.navigate", url=url)

    def text(self, within: str = "body") -> str:
        """The visible text of the first element matching the CSS selector ``within``."""
        js = f"(document.querySelector({json.dumps(within)}) || {{innerText: ''}}).innerText"
        return str(self.evaluate(js) or "")

    def wait_for(self, *needles: str, within: str = "body", timeout: float = PAGE_TIMEOUT_S) -> str:
        """The visible text of ``within`` once every one of ``needles`` is in it."""
        deadline = time.monotonic() + timeout
        text = ""
        while time.monotonic() < deadline:
            text = self.text(within)
            if all(n in text for n in needles):
                return text
            time.sleep(0.5)
        missing = [n for n in needles if n not in text]
        raise PageTimeout(
            f"after {timeout:.0f} s no {missing} in {within}; it shows: {self.text()[:3000]}"
        )

    def click_text(self, text: str, selector: str = "*") -> bool:
        """Click the innermost visible element matching ``selector`` whose text is ``text``."""
        script = f"""(() => {{
          const want = {json.dumps(text)};
          const els = [...document.querySelectorAll({json.dumps(selector)})].filter(e =>
            e.offsetParent !== null && e.innerText && e.innerText.trim() === want);
          const leaf = els.filter(e => !els.some(o => o !== e && e.contains(o)));
          if (!leaf.length) return false;
          leaf[0].scrollIntoView({{block: 'center'}});
          leaf[0].click();
          return true;
        }})()"""
        return bool(self.evaluate(script))

    def screenshot(self, path: Path) -> Path:
        shot = self.call("Page.captureScreenshot", format="png")
        path.write_bytes(base64.b64decode(shot["data"]))
        return path


@contextmanager
def chromium(width: int = WIDTH, height: int = HEIGHT, timeout: float = 60.0) -> Iterator[Chromium]:
    """A headless Chromium with one tab of ``width`` x ``height`` CSS pixels; closed on exit."""
    import websocket  # websocket-client

    exe = browser()
    if exe is None:
        raise RuntimeError(f"no Chromium on PATH (looked for {', '.join(BROWSERS)})")
    profile = Path(tempfile.mkdtemp(prefix="rag_lab_chromium_"))
    proc = subprocess.Popen(
        [
            exe,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            "--no-first-run",
            "--remote-debugging-address=127.0.0.1",
            "--remote-debugging-port=0",
            f"--user-data-dir={profile}",
            f"--window-size={width},{height}",
            "about:blank",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        port_file = profile / "DevToolsActivePort"
        deadline = time.monotonic() + timeout
        while not (port_file.is_file() and port_file.read_text().strip()):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"Chromium did not open its DevTools port (exit {proc.poll()})")
            time.sleep(0.2)
        port = int(port_file.read_text().split()[0])
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=timeout) as r:
            pages = [t for t in json.load(r) if t.get("type") == "page"]
        ws = websocket.create_connection(
            pages[0]["webSocketDebuggerUrl"], timeout=timeout, suppress_origin=True
        )
        tab = Chromium(ws=ws, proc=proc, profile=profile)
        try:
            tab.call("Page.enable")
            tab.call("Runtime.enable")
            tab.call(
                "Emulation.setDeviceMetricsOverride",
                width=width,
                height=height,
                deviceScaleFactor=1,
                mobile=False,
            )
            yield tab
        finally:
            ws.close()
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        shutil.rmtree(profile, ignore_errors=True)


# -- the three pages --------------------------------------------------------------------------

ASSISTANT_CLOSE = '[data-component-id="mlflow.assistant.chat_panel.close"]'
ASSESS_TOGGLE = '[data-component-id="shared.model-trace-explorer.assessments-pane-toggle"]'
# the selected span's inputs and outputs, and the assessments pane, in MLflow's trace view: the
# text checked is theirs (the traces table behind the trace lists the same document ids)
SPAN_VIEW = '[data-testid="model-trace-explorer-default-span-view"]'
ASSESSMENTS_PANE = '[data-testid="assessments-pane"]'


@dataclass(frozen=True)
class Seen:
    """One page as Chromium showed it: its screenshot, its visible text and its address."""

    name: str
    png: Path
    text: str
    url: str
    extra: dict[str, Any] = field(default_factory=dict)


def _close_assistant(tab: Chromium, wait: float = ASSISTANT_WAIT_S) -> None:
    """MLflow 3.17 opens its assistant panel on a first visit (a third of the width): closed, as a
    user closes it once (the browser then remembers). Done once it has been closed, or has not
    shown for :data:`ASSISTANT_WAIT_S` (a loaded machine mounts it late)."""
    deadline = time.monotonic() + wait
    while True:
        if tab.evaluate(f"!!document.querySelector('{ASSISTANT_CLOSE}')"):
            tab.evaluate(f"document.querySelector('{ASSISTANT_CLOSE}').click()")
            deadline = time.monotonic() + 2.0  # gone, and staying gone
        if time.monotonic() >= deadline:
            return
        time.sleep(0.5)


def _save(tab: Chromium, out: Path, name: str, text: str, **extra: Any) -> Seen:
    png = tab.screenshot(out / f"{name}.png")
    (out / f"{name}.txt").write_text(text, encoding="utf-8")
    return Seen(name, png, text, str(tab.evaluate("location.href")), extra)


def runs_page(tab: Chromium, url: str, run_name: str, columns: Sequence[str], out: Path) -> Seen:
    """The runs table at ``url``: waited for until the run and the metric ``columns`` show;
    ``extra``: the header cells left to right and the run's ``{column: cell text}``."""
    tab.open(url)
    tab.wait_for(run_name, *columns)
    _close_assistant(tab)
    tab.wait_for(run_name, *columns)
    time.sleep(1.0)  # the table re-lays out to the freed width
    headers = tab.evaluate(
        "[...document.querySelectorAll('.ag-header-cell[col-id]')]"
        ".sort((a, b) => a.getBoundingClientRect().left - b.getBoundingClientRect().left)"
        ".map(e => e.getAttribute('col-id'))"
    )
    cells = tab.evaluate(
        "Object.fromEntries([...document.querySelectorAll('.ag-center-cols-container .ag-cell')]"
        ".filter(e => (e.getAttribute('col-id') || '').startsWith('metrics.'))"
        ".map(e => [e.getAttribute('col-id').slice(9, -1), e.innerText.trim()]))"
    )
    return _save(tab, out, "runs", tab.text(), headers=headers, cells=cells)


def trace_pages(
    tab: Chromium,
    url: str,
    query: str,
    retriever: str,
    doc_ids: Sequence[str],
    assessments: Sequence[str],
    out: Path,
) -> tuple[Seen, Seen]:
    """One trace at ``url``: its ``retriever`` span selected until ``doc_ids`` show, then its
    assessments pane until the ``assessments`` (names) show."""
    tab.open(url)
    tab.wait_for("Spans", query)
    _close_assistant(tab, wait=0.0)  # closed on the runs page; the browser remembers
    if not tab.click_text(retriever):
        raise PageTimeout(f"no span {retriever!r} in the trace tree: {tab.text()[:3000]}")
    # a RETRIEVER span's documents are cards (text, the first metadata entry); the root span's
    # output is a plain list of ids, so "doc_uri" says the retriever's view is the one shown
    docs = _save(tab, out, "trace_documents", tab.wait_for("doc_uri", *doc_ids, within=SPAN_VIEW))
    tab.click_text(TRACE_ROOT)
    tab.wait_for(query)
    deadline = time.monotonic() + PAGE_TIMEOUT_S
    while not tab.evaluate(f"!!document.querySelector('{ASSESS_TOGGLE}')"):
        if time.monotonic() > deadline:
            raise PageTimeout(f"no assessments button on the trace: {tab.text()[:3000]}")
        time.sleep(0.5)
    tab.evaluate(f"document.querySelector('{ASSESS_TOGGLE}').click()")
    shown = _save(
        tab, out, "trace_assessments", tab.wait_for(*assessments, within=ASSESSMENTS_PANE)
    )
    return docs, shown


TRACE_ROOT = "rag_lab query"  # rag_lab.tracking.traces.TRACE_NAME


@dataclass(frozen=True)
class Check:
    """What :func:`check` looked at: the run, the trace and the three pages."""

    run_id: str
    trace_id: str
    query_id: str
    query: str
    retriever: str
    doc_ids: list[str]
    assessments: dict[str, Any]
    pages: dict[str, Seen]
    page_errors: list[str]


def check(uri: str, experiment: str, out: Path, width: int = WIDTH) -> Check:
    """The three pages of ``experiment``'s newest run at the MLflow server ``uri``, written to
    ``out`` (module docstring). The trace: the run's first trace with a RETRIEVER span and an
    assessment, in query order."""
    from mlflow import MlflowClient

    from rag_lab.metrics.names import HEADLINE
    from rag_lab.tracking.mlflow import runs_page_url, trace_page_url

    out.mkdir(parents=True, exist_ok=True)
    client = MlflowClient(uri)
    exp = client.get_experiment_by_name(experiment)
    if exp is None:
        raise SystemExit(f"no experiment {experiment!r} at {uri}")
    (run,) = client.search_runs([exp.experiment_id], order_by=["start_time DESC"], max_results=1)
    traces = client.search_traces(
        locations=[exp.experiment_id],
        run_id=run.info.run_id,
        max_results=50,
        order_by=["timestamp_ms ASC"],
    )
    for trace in sorted(traces, key=lambda t: t.info.tags.get("query_id", "")):
        retrievers = [s for s in trace.data.spans if s.span_type == "RETRIEVER" and s.outputs]
        if retrievers and trace.info.assessments:
            break
    else:
        raise SystemExit(f"no trace of run {run.info.run_id} has a retriever span and assessments")
    span = retrievers[0]
    doc_ids = [d["metadata"]["doc_uri"] for d in span.outputs[:3]]
    query = str(span.inputs.get("query") if isinstance(span.inputs, dict) else span.inputs)
    assessments = {a.name: a.value for a in trace.info.assessments}
    url = runs_page_url(uri, exp.experiment_id)
    assert url is not None, uri
    columns = [c for c in HEADLINE if c in run.data.metrics]
    with chromium(width=width) as tab:
        runs = runs_page(tab, url, run.info.run_name, columns[:2], out)
        docs, shown = trace_pages(
            tab,
            trace_page_url(uri, exp.experiment_id, trace.info.trace_id),
            query,
            span.name,
            doc_ids,
            list(assessments),
            out,
        )
        errors = list(tab.errors)
    return Check(
        run.info.run_id,
        trace.info.trace_id,
        trace.info.tags.get("query_id", ""),
        query,
        span.name,
        doc_ids,
        assessments,
        {p.name: p for p in (runs, docs, shown)},
        errors,
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--uri", required=True, help="the MLflow server (http://host:port)")
    parser.add_argument("--experiment", default="rag_lab")
    parser.add_argument("--out", type=Path, default=Path("mlflow_ui"))
    parser.add_argument("--width", type=int, default=WIDTH)
    args = parser.parse_args(argv)
    seen = check(args.uri, args.experiment, args.out, args.width)
    print(f"run {seen.run_id}, trace {seen.trace_id} ({seen.query})")
    for page in seen.pages.values():
        print(f"  {page.name:18} {page.png}  {page.url}")
    for error in seen.page_errors:
        print(f"  page error: {error}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
