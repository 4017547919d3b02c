"""Map what a foreign component returned (LangChain ``Document``s, LlamaIndex nodes) onto the
corpus' chunk ids, so that it is scored exactly as a native run.

A source is tried, in order (the first that succeeds names ``how``):

1. ``metadata`` — its metadata names a chunk id of the corpus (``chunk_id``), or a document id
   (``doc_id``): then the chunk of that document that holds its text (located as in 3), else the
   document's first chunk. The adapters put both keys on every ``Document`` / node they build
   from rag_lab's chunks, so a component built over them maps this way.
2. ``exact`` — its text (stripped) is a chunk's text.
3. ``contained`` — after normalisation (Unicode NFKC, case folded, whitespace runs as one space):
   its text lies inside one chunk, or inside one document (rebuilt from its chunks' spans; the
   chunk covering where it starts), or it holds a whole chunk (a foreign chunker's larger piece:
   the first such chunk, in corpus order).
4. ``unmapped`` — none of these: the source is *counted* (``MappingCounts``, the adapter's
   ``unmapped_sources`` stat and per-query annotation), never silently dropped from the counts.

Sources mapping to a chunk already taken by an earlier source of the same answer are kept once
(the run holds a chunk once) and counted as ``duplicate``.
"""

from __future__ import annotations

import unicodedata
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from rag_lab.types import Chunk

HOW = ("metadata", "exact", "contained", "unmapped")


def normalise(text: str) -> str:
    """NFKC, case folded, every whitespace run one space, stripped."""
    return normalise_with_offsets(text)[0]


def normalise_with_offsets(text: str) -> tuple[str, list[int]]:
    """``normalise(text)`` and, per character of it, the offset in ``text`` it came from."""
    out: list[str] = []
    where: list[int] = []
    for i, c in enumerate(text):
        if c.isspace():
            if out and out[-1] != " ":
                out.append(" ")
                where.append(i)
            continue
        for n in unicodedata.normalize("NFKC", c).casefold():
            if n.isspace():
                if out and out[-1] != " ":
                    out.append(" ")
                    where.append(i)
            else:
                out.append(n)
                where.append(i)
    while out and out[-1] == " ":
        out.pop()
        where.pop()
    return "".join(out), where


@dataclass(frozen=True)
class Source:
    """One source document a foreign component returned: its text and metadata, as it gave them."""

    text: str
    metadata: Mapping[str, Any] = field(default_factory=dict)


@dataclass
class MappingCounts:
    """Per ``how`` (``HOW`` plus ``duplicate``), how many sources were mapped that way."""

    counts: Counter[str] = field(default_factory=Counter)

    def add(self, how: str) -> None:
        self.counts[how] += 1

    def stats(self) -> dict[str, float]:
        """``sources``, ``unmapped_sources``, ``mapped_by_<how>``, ``duplicate_sources``."""
        out = {
            "sources": float(sum(self.counts.values())),
            "unmapped_sources": float(self.counts["unmapped"]),
            "duplicate_sources": float(self.counts["duplicate"]),
        }
        for how in HOW[:-1]:
            out[f"mapped_by_{how}"] = float(self.counts[how])
        return out


class SourceMapper:
    """Maps sources onto ``chunks`` (``{chunk_id: Chunk}``, the corpus the run is scored on).
    ``chunk_id_key`` / ``doc_id_key``: the metadata keys read in step 1."""

    def __init__(
        self,
        chunks: Mapping[str, Chunk],
        chunk_id_key: str = "chunk_id",
        doc_id_key: str = "doc_id",
    ) -> None:
        self.chunks = dict(chunks)
        self.chunk_id_key, self.doc_id_key = chunk_id_key, doc_id_key
        self._by_doc: dict[str, list[Chunk]] = {}
        for c in self.chunks.values():
            self._by_doc.setdefault(c.doc_id, []).append(c)
        for cs in self._by_doc.values():
            cs.sort(key=lambda c: (c.start, c.chunk_id))
        self._exact: dict[str, str] = {}
        for c in self.chunks.values():
            self._exact.setdefault(c.text.strip(), c.chunk_id)
        self._norm = {cid: normalise(c.text) for cid, c in self.chunks.items()}
        self._docs: dict[str, tuple[str, list[int]]] = {}  # built on first use

    def _doc_text(self, doc_id: str) -> tuple[str, list[int]]:
        """The document rebuilt from its chunks' spans (gaps as spaces), normalised, with the
        offsets."""
        if doc_id not in self._docs:
            cs = self._by_doc[doc_id]
            spans = [c for c in cs if c.start >= 0 and c.end - c.start == len(c.text)]
            size = max((c.end for c in spans), default=0)
            buf = [" "] * size
            for c in spans:
                buf[c.start : c.end] = list(c.text)
            self._docs[doc_id] = normalise_with_offsets("".join(buf))
        return self._docs[doc_id]

    def _in_doc(self, doc_id: str, needle: str) -> str | None:
        """The chunk of ``doc_id`` covering where ``needle`` (normalised) starts in it."""
        text, where = self._doc_text(doc_id)
        at = text.find(needle) if needle else -1
        if at < 0:
            return None
        offset = where[at]
        for c in self._by_doc[doc_id]:
            if c.start <= offset < c.end:
                return c.chunk_id
        return None

    def map(self, source: Source) -> tuple[str | None, str]:
        """``(chunk_id, how)``; ``(None, "unmapped")`` when no step succeeds."""
        meta = source.metadata or {}
        cid = meta.get(self.chunk_id_key)
        if cid is not None and str(cid) in self.chunks:
            return str(cid), "metadata"
        needle = normalise(source.text)
        did = meta.get(self.doc_id_key)
        if did is not None and str(did) in self._by_doc:
            found = self._in_doc(str(did), needle)
            return found or self._by_doc[str(did)][0].chunk_id, "metadata"
        exact = self._exact.get(source.text.strip())
        if exact is not None:
            return exact, "exact"
        if not needle:
            return None, "unmapped"
        for cid_, text in self._norm.items():
            if needle in text:
                return cid_, "contained"
        for doc_id in self._by_doc:
            found = self._in_doc(doc_id, needle)
            if found is not None:
                return found, "contained"
        for cid_, text in self._norm.items():
            if text and text in needle:
                return cid_, "contained"
        return None, "unmapped"

    def map_all(
        self, sources: Sequence[Source], counts: MappingCounts
    ) -> tuple[list[str], list[dict[str, Any]]]:
        """The chunk ids of ``sources`` in their order (each once), and one row per source
        (``chunk_id`` or None, ``how``, the first 200 characters of its text); ``counts`` is
        updated."""
        ids: list[str] = []
        rows: list[dict[str, Any]] = []
        for s in sources:
            cid, how = self.map(s)
            if cid is not None and cid in ids:
                how = "duplicate"
            counts.add(how)
            if cid is not None and how != "duplicate":
                ids.append(cid)
            rows.append({"chunk_id": cid, "how": how, "text": s.text[:200]})
        return ids, rows
