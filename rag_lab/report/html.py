"""The building blocks of the one-file HTML pages (run, sweep, compare): escaping, tables, the
drill-down of one query, the page frame with its inline CSS and script.

Every text that reaches a page goes through :func:`esc` unless it is :class:`Html` built here:
corpus text is untrusted (a chunk may contain ``<script>``), so cells, ids, queries and chunk
texts are escaped, and the page's Content-Security-Policy forbids every network load and any
script but the page's own inline one. Images are ``data:`` URIs; nothing is fetched.
"""

from __future__ import annotations

import functools
import html
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from rag_lab.text.normalise import normalise_text
from rag_lab.types import Chunk, Query


class Html(str):
    """Markup built by this module (already escaped): inserted as it is."""


def esc(value: Any) -> str:
    return html.escape(str(value), quote=True)


def fmt(value: Any, digits: int = 4) -> str:
    """Numbers as a reader wants them: NaN/None as "–", integers plain, floats at ``digits``
    decimals; anything else as text."""
    if value is None:
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float) or hasattr(value, "dtype"):
        try:
            f = float(value)
        except (TypeError, ValueError):
            return str(value)
        if math.isnan(f):
            return "–"
        if f.is_integer() and abs(f) >= 1000:
            return f"{int(f):,}"
        return f"{f:.{digits}f}"
    return str(value)


def count_or_value(key: str, value: Any) -> Any:
    """A count (``rag_lab.metrics.names.is_count``: ``n_queries``, ``cache_hits``) as an int."""
    from rag_lab.metrics.names import is_count

    if is_count(key) and isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def rounded(key: str, value: Any) -> Any:
    """:func:`count_or_value`, with timings rounded for reading: seconds to 2 decimals,
    milliseconds to 1, rates to whole units (``rag_lab.metrics.names.is_timing``)."""
    from rag_lab.metrics.names import is_timing

    value = count_or_value(key, value)
    if isinstance(value, float) and is_timing(key) and value == value:
        if key.endswith("_ms"):
            return f"{value:.1f}"
        return f"{value:.2f}" if key.endswith("_seconds") else f"{value:.0f}"
    return value


def scroll(body: str) -> Html:
    """A wide table in a horizontally scrolling box."""
    return Html(f'<div class="scroll">{body}</div>')


def cell(value: Any) -> str:
    return value if isinstance(value, Html) else esc(fmt(value))


def table(
    headers: Sequence[Any],
    rows: Iterable[Sequence[Any]],
    *,
    numeric: Iterable[int] = (),
    cls: str = "",
    row_classes: Sequence[str] | None = None,
) -> Html:
    """A ``<table>``: ``numeric`` column indices are right-aligned; cells are escaped unless
    :class:`Html`."""
    num = set(numeric)
    head = "".join(
        f'<th class="{"num" if i in num else ""}">{cell(h)}</th>' for i, h in enumerate(headers)
    )
    body = []
    for r, row in enumerate(rows):
        rc = f' class="{esc(row_classes[r])}"' if row_classes and row_classes[r] else ""
        tds = "".join(
            f'<td class="{"num" if i in num else ""}">{cell(v)}</td>' for i, v in enumerate(row)
        )
        body.append(f"<tr{rc}>{tds}</tr>")
    return Html(
        f'<table class="{esc(cls)}"><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(body)}</tbody></table>"
    )


def section(title: str, body: str, anchor: str, note: str = "") -> Html:
    extra = f'<p class="note">{esc(note)}</p>' if note else ""
    return Html(f'<section id="{esc(anchor)}"><h2>{esc(title)}</h2>{extra}{body}</section>')


def figure(data_uri: str, caption: str, wide: bool = False) -> Html:
    """An image with its caption; ``wide``: the page's width (a plot with many labels), else at
    most 620 px beside the others."""
    cls = ' class="wide"' if wide else ""
    return Html(
        f'<figure{cls}><img src="{esc(data_uri)}" alt="{esc(caption)}">'
        f"<figcaption>{esc(caption)}</figcaption></figure>"
    )


def definition_list(items: Iterable[tuple[str, Any]]) -> Html:
    rows = "".join(f"<dt>{esc(k)}</dt><dd>{cell(v)}</dd>" for k, v in items)
    return Html(f"<dl>{rows}</dl>")


def ci_text(low: float, high: float) -> str:
    if math.isnan(low) or math.isnan(high):
        return "–"
    return f"[{low:.4f}, {high:.4f}]"


# ---------------------------------------------------------------------------------------------
# one query: retrieved chunks and the gold


def has_evidence(chunk: Chunk, query: Query | None) -> bool:
    """The chunk's text contains one of the query's gold strings (the evidence-level rule of
    ``rag_lab.metrics.relevance``, without its relevant-document condition)."""
    if query is None or not query.evidence:
        return False
    text = _normalised(chunk.text)
    return any(_normalised(g) in text for g in query.evidence)


# a run page asks for every query's retrieved and gold chunks: the same chunk texts many times
_normalised = functools.lru_cache(maxsize=16_384)(normalise_text)


def chunk_card(
    rank: int | None,
    chunk_id: str,
    chunk: Chunk | None,
    grade: float | None,
    evidence: bool,
) -> Html:
    """One retrieved (or gold) chunk: rank, ids, marks (document grade, evidence string found),
    section, then the text in a scrolling box."""
    marks = []
    if grade is not None and grade > 0:
        marks.append(f'<span class="tag rel">relevant doc (grade {fmt(grade, 0)})</span>')
    if evidence:
        marks.append('<span class="tag ev">contains gold evidence</span>')
    doc = chunk.doc_id if chunk else chunk_id.split("#", 1)[0]
    where = f" · {esc(chunk.section)}" if chunk and chunk.section else ""
    text = (
        f'<div class="text">{esc(chunk.text)}</div>'
        if chunk
        else '<div class="text missing">(chunk text not available)</div>'
    )
    cls = "chunk" + (" good" if evidence or (grade or 0) > 0 else "")
    place = f"#{rank}" if rank is not None else "not retrieved"
    return Html(
        f'<div class="{cls}"><div class="head"><b>{esc(place)}</b> <code>{esc(chunk_id)}</code>'
        f' <span class="doc">{esc(doc)}</span>{where} {"".join(marks)}</div>{text}</div>'
    )


def ranking(
    chunk_ids: Sequence[str],
    chunks: Mapping[str, Chunk] | None,
    query: Query | None,
    grades: Mapping[str, float],
    depth: int,
) -> Html:
    """The top ``depth`` retrieved chunks of one query as cards."""
    cards = []
    for rank, cid in enumerate(chunk_ids[:depth], start=1):
        chunk = chunks.get(cid) if chunks else None
        doc = chunk.doc_id if chunk else cid.split("#", 1)[0]
        evidence = chunk is not None and has_evidence(chunk, query)
        cards.append(chunk_card(rank, cid, chunk, grades.get(doc), evidence))
    return Html("".join(cards) or '<p class="note">nothing retrieved</p>')


def gold(
    query: Query | None,
    grades: Mapping[str, float],
    doc_ranks: Mapping[str, int],
    chunks: Mapping[str, Chunk] | None,
    chunk_ranks: Mapping[str, int],
    max_passages: int = 3,
) -> Html:
    """The gold of one query: its evidence strings, its judged documents (grade, rank of the
    document in the run or "not retrieved"), and up to ``max_passages`` chunks of relevant
    documents that contain a gold string (with their rank if retrieved)."""
    parts = []
    if query is not None and query.evidence:
        items = "".join(f"<li>{esc(s)}</li>" for s in query.evidence)
        parts.append(
            f'<div class="gold-strings"><b>gold answer / evidence</b><ul>{items}</ul></div>'
        )
    judged = sorted(grades.items(), key=lambda kv: (-kv[1], kv[0]))
    if judged:
        rows = [
            (d, fmt(g, 0), doc_ranks.get(d, Html('<span class="bad">not retrieved</span>')))
            for d, g in judged
        ]
        parts.append(table(["judged document", "grade", "rank"], rows, numeric=[1, 2], cls="small"))
    else:
        parts.append('<p class="note">no judged document (unanswerable)</p>')
    if chunks and query is not None and query.evidence:
        relevant = {d for d, g in grades.items() if g > 0}
        passages = [c for c in chunks.values() if c.doc_id in relevant and has_evidence(c, query)][
            :max_passages
        ]
        for c in passages:
            rank = chunk_ranks.get(c.chunk_id)
            parts.append(
                chunk_card(
                    rank,
                    c.chunk_id,
                    c,
                    grades.get(c.doc_id),
                    True,
                )
            )
    return Html("".join(parts))


# ---------------------------------------------------------------------------------------------
# the page

CSS = """
:root { --fg:#1d2330; --muted:#5b6475; --line:#d9dde5; --bg:#fff; --soft:#f4f6f9;
        --good:#e5f5ea; --goodline:#2e8b57; --bad:#b42318; --accent:#2754c5; }
* { box-sizing: border-box; }
body { margin: 0 auto; max-width: 1280px; padding: 24px 32px 64px; color: var(--fg);
       background: var(--bg); font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto,
       "Noto Sans CJK SC", "WenQuanYi Micro Hei", "PingFang SC", "Microsoft YaHei", sans-serif; }
h1 { font-size: 22px; margin: 0 0 4px; } h2 { font-size: 18px; margin: 28px 0 8px;
     border-bottom: 1px solid var(--line); padding-bottom: 4px; }
nav a { margin-right: 14px; color: var(--accent); text-decoration: none; }
.note { color: var(--muted); margin: 4px 0 8px; }
table { border-collapse: collapse; margin: 8px 0; font-variant-numeric: tabular-nums; }
th, td { border-bottom: 1px solid var(--line); padding: 4px 10px; text-align: left;
         vertical-align: top; }
th { background: var(--soft); position: sticky; top: 0; }
td.num, th.num { text-align: right; white-space: nowrap; }
td.ci { white-space: nowrap; }
table.small td, table.small th { padding: 2px 8px; font-size: 13px; }
tr.best td { background: var(--good); font-weight: 600; }
tr.sig td { color: var(--muted); }
tr.worse td { color: var(--bad); }
.bad { color: var(--bad); } .better { color: var(--goodline); }
dl { display: grid; grid-template-columns: max-content 1fr; gap: 2px 16px; margin: 8px 0; }
dt { color: var(--muted); } dd { margin: 0; word-break: break-all; }
figure { display: inline-block; margin: 8px 16px 8px 0; vertical-align: top; }
figure img { max-width: min(100%, 620px); border: 1px solid var(--line); }
figure.wide { display: block; margin-right: 0; }
figure.wide img { max-width: 100%; }
figcaption { color: var(--muted); font-size: 12px; }
.controls { margin: 8px 0; display: flex; gap: 16px; align-items: center; }
.controls input[type=search] { width: 320px; padding: 4px 8px; }
details.q { border: 1px solid var(--line); border-radius: 4px; margin: 4px 0; }
details.q > summary { cursor: pointer; padding: 6px 10px; list-style: none; display: grid;
        grid-template-columns: 90px 120px 1fr auto; gap: 12px; align-items: baseline; }
details.q > summary::-webkit-details-marker { display: none; }
details.q[open] > summary { background: var(--soft); }
details.q .body { padding: 8px 12px; display: grid; grid-template-columns: 1fr 1fr; gap: 16px; }
details.q .body.wide { grid-template-columns: 1fr; }
.scores { font-variant-numeric: tabular-nums; white-space: nowrap; color: var(--muted); }
.chunk { border: 1px solid var(--line); border-radius: 4px; margin: 6px 0; }
.chunk.good { border-color: var(--goodline); }
.chunk .head { background: var(--soft); padding: 3px 8px; font-size: 12px; }
.chunk .text { padding: 4px 8px; white-space: pre-wrap; word-break: break-word;
               max-height: 12em; overflow: auto; font-size: 13px; }
.chunk .text.missing { color: var(--muted); }
.tag { display: inline-block; border-radius: 3px; padding: 0 5px; margin-left: 6px;
       font-size: 11px; }
.tag.rel { background: #dbe7ff; } .tag.ev { background: #c9efd6; }
.doc { color: var(--muted); }
.cols { display: grid; grid-template-columns: 1fr 1fr; gap: 16px; }
.hidden { display: none; }
.scroll { overflow-x: auto; max-width: 100%; }
h4 { margin: 4px 0; font-size: 13px; color: var(--muted); }
"""

SCRIPT = """
(function () {
  var box = document.getElementById('q-filter');
  var misses = document.getElementById('q-misses');
  var rows = Array.prototype.slice.call(document.querySelectorAll('details.q'));
  var count = document.getElementById('q-count');
  function apply() {
    var needle = box ? box.value.trim().toLowerCase() : '';
    var only = misses ? misses.checked : false;
    var shown = 0;
    rows.forEach(function (row) {
      var hit = !needle || row.getAttribute('data-search').indexOf(needle) >= 0;
      var keep = hit && (!only || row.getAttribute('data-miss') === '1');
      row.classList.toggle('hidden', !keep);
      if (keep) { shown += 1; }
    });
    if (count) { count.textContent = shown + ' / ' + rows.length + ' queries'; }
  }
  if (box) { box.addEventListener('input', apply); }
  if (misses) { misses.addEventListener('change', apply); }
  apply();
  document.body.setAttribute('data-ready', '1');
})();
"""

# no network, no foreign script: only this page's inline style, inline script and data: images
CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'; script-src 'unsafe-inline'"


def filter_controls(label: str = "misses only") -> Html:
    return Html(
        '<div class="controls"><input type="search" id="q-filter" '
        'placeholder="filter: query id, text, category, miss reason">'
        f'<label><input type="checkbox" id="q-misses"> {esc(label)}</label>'
        '<span id="q-count" class="note"></span></div>'
    )


def query_row(
    search: str,
    miss: bool,
    summary: Sequence[Any],
    body: str,
    wide: bool = False,
) -> Html:
    """One collapsible drill-down row: ``summary`` cells (escaped unless :class:`Html`) shown
    closed, ``body`` when opened; ``search`` is what the filter box matches (lower-cased)."""
    cells = "".join(f"<span>{cell(v)}</span>" for v in summary)
    return Html(
        f'<details class="q" data-search="{esc(search.lower())}" data-miss="{int(miss)}">'
        f'<summary>{cells}</summary><div class="body{" wide" if wide else ""}">{body}</div>'
        "</details>"
    )


def page(title: str, subtitle: str, nav: Sequence[tuple[str, str]], body: str) -> str:
    links = "".join(f'<a href="#{esc(a)}">{esc(t)}</a>' for a, t in nav)
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{esc(title)}</title><style>{CSS}</style></head>"
        f'<body data-ready="0"><header><h1>{esc(title)}</h1>'
        f'<p class="note">{esc(subtitle)}</p><nav>{links}</nav></header>'
        f"{body}<script>{SCRIPT}</script></body></html>\n"
    )
