"""What the foreign-splitter chunkers share: a splitter built from an import path (behind the
adapters' allow-list, ``rag_lab.adapters.imports``), its pieces located in the document text so
every chunk keeps the chunker contract (``chunk.text == doc.text[start:end]``), and an identity
(the package versions) that keys the cached chunks."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from rag_lab.adapters.imports import package_versions, resolve
from rag_lab.chunker.base import SpanChunker
from rag_lab.errors import ConfigError
from rag_lab.types import Document
from rag_lab.validate import OptionError


def locate(doc: Document, pieces: Iterable[str]) -> list[tuple[int, int]]:
    """The span of each piece in ``doc.text``, searched from just after the previous piece's start
    (pieces may overlap) and, failing that, from the start. ``ConfigError`` for a piece that is
    not in the text at all (a splitter that rewrites text: drop headers, join lines...)."""
    spans: list[tuple[int, int]] = []
    cursor = 0
    for piece in pieces:
        if not piece.strip():
            continue
        at = doc.text.find(piece, cursor)
        if at < 0:
            at = doc.text.find(piece)
        if at < 0:
            raise ConfigError(
                f"chunker: a piece of document {doc.doc_id!r} is not in its text "
                f"({piece[:60]!r}...): the splitter rewrites text, which breaks chunk provenance"
            )
        spans.append((at, at + len(piece)))
        cursor = at + 1
    return spans


class AdapterChunker(SpanChunker):
    """A foreign splitter ``factory(**kwargs)``; subclasses say how it splits one document."""

    framework = "langchain"
    method = "split_text"

    def __init__(
        self,
        splitter: str,
        kwargs: Mapping[str, Any] | None = None,
        allow_imports: Sequence[str] = (),
    ) -> None:
        self.splitter_path = str(splitter)
        self.kwargs = dict(kwargs or {})
        self.allow_imports = [str(p) for p in allow_imports or ()]
        factory = resolve(self.splitter_path, "splitter", self.allow_imports)
        try:
            self.splitter = factory(**self.kwargs)
        except Exception as exc:
            raise OptionError(
                "kwargs", self.kwargs, f"{self.splitter_path} refused them: {exc}"
            ) from None
        if not callable(getattr(self.splitter, self.method, None)):
            raise OptionError(
                "splitter",
                self.splitter_path,
                f"built a {type(self.splitter).__name__}, which has no {self.method}",
            )

    @property
    def identity(self) -> dict[str, Any]:
        """The package versions: part of the chunk cache key."""
        return {"packages": package_versions(self.framework)}
