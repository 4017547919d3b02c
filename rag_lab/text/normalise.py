"""The one text normalisation for comparing strings: Unicode NFKC, case folding, whitespace
collapsed to single spaces, stripped (``"  ７０\\u3000°C"`` → ``"70 °c"``)."""

from __future__ import annotations

import re
import unicodedata

_WS = re.compile(r"\s+")


def normalise_text(text: str) -> str:
    return _WS.sub(" ", unicodedata.normalize("NFKC", text).casefold()).strip()
