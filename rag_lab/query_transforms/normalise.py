"""Unicode and whitespace normalisation of query text."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping

from rag_lab.validate import boolean

_SPACE = re.compile(r"\s+")


class NormaliseQueries:
    """Args:
    form: Unicode normal form (``NFKC`` folds full-width Latin letters and digits, common in
        Chinese input methods, to the ASCII that documents and BM25 tokens use); ``null``: none.
    collapse_whitespace: runs of white space become one space; ends are trimmed.
    lowercase: case-fold (only useful for case-sensitive retrievers; BM25 tokenizers fold).
    """

    def __init__(
        self, form: str | None = "NFKC", collapse_whitespace: bool = True, lowercase: bool = False
    ) -> None:
        if form is not None and form not in ("NFC", "NFD", "NFKC", "NFKD"):
            raise ValueError(f"form must be NFC, NFD, NFKC, NFKD or null, got {form!r}")
        self.form = form
        self.collapse_whitespace = boolean(collapse_whitespace, "collapse_whitespace")
        self.lowercase = boolean(lowercase, "lowercase")

    def _one(self, text: str) -> str:
        if self.form:
            text = unicodedata.normalize(self.form, text)  # type: ignore[arg-type]
        if self.collapse_whitespace:
            text = _SPACE.sub(" ", text).strip()
        return text.casefold() if self.lowercase else text

    def transform(self, queries: Mapping[str, str]) -> dict[str, str]:
        return {qid: self._one(text) for qid, text in queries.items()}
