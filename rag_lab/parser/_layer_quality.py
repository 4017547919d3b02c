"""Is a PDF page's text layer text? A per-page check of what the layer holds, so that a layer of
garbage over a readable scan (a broken OCR step's invisible layer, a font without a usable
Unicode map) is read by OCR instead of being indexed.

``readable_share(text)`` is the share of the page's non-space characters that sit in readable
tokens, each whitespace-separated token judged on its own:

- unreadable: a token holding a control character, a private-use glyph, U+FFFD or ``(cid:N)``
  (an unmapped glyph); a token that mixes letters of two alphabets (``Spіndle`` with a Cyrillic
  ``і``: mojibake); a run of two or more symbols (``}%``, ``#@``); an alphabetic word of four
  letters or more whose case is neither lower, Title nor UPPER (``qWzk``), or a lower-case or
  Title word of four letters or more without a vowel (``tbrpk``);
- readable: words (any alphabet, an apostrophe inside; a mixed-case word of up to three letters
  is a unit: ``MPa``, ``kW``), numbers with units (``0.5MPa``, ``10:30``), codes (``E417``,
  ``HX-200``, ``SV7-04A``), their compounds joined by ``- / . _ + × ( ) =`` (``L/min``,
  ``dB(A)``), each judged after unit marks (``° Ω μ ″ ²``) are taken out; and any token holding
  CJK characters (a layer of random CJK glyphs is not told from text: that needs a dictionary);
- not counted: a lone symbol (``-``, ``•``, ``|``, ``=``).

Random printable ASCII scores ~0.2, the sample's and the tests' manual pages 0.97-1.0. A
word-list check would catch more (a layer of shifted letters, "Vslqgoh", reads as words here),
at the price of a dictionary per language.
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

# characters whose presence makes a token unreadable: controls, private use, replacement char
_BAD_CHAR = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\ue000-\uf8ff\ufffd]")
_CID = re.compile(r"\(cid:\d+\)")
# punctuation that wraps words: stripped from both ends before a token is judged
_WRAP = "\"'“”‘’«»()[]{}<>,.;:!?。，、；：！？（）【】《》「」『』…*"
# CJK ideographs, kana, hangul, CJK punctuation and full-width forms
_CJK = re.compile(
    r"[\u3000-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff00-\uffef]"
)
# unit marks: taken out before a token is judged (``40°C``, ``25μm``, ``5/8″``, ``m²``)
_UNIT_MARKS = re.compile(r"[°℃℉ΩΩμµ″′²³‰]")
_NUMBER = re.compile(r"[+\-−±~≤≥<>]?\d+(?:[.,:]\d+)*(?:[eE][+-]?\d+)?%?(?:[^\W\d_]{1,4})?")
_CODE = re.compile(r"[^\W\d_]{1,8}[-.]?\d[\w.]*")
_JOIN = re.compile(r"[-/._+×·–—()=]")
_VOWELS = frozenset("aeiouyAEIOUYàáâäæèéêëìíîïòóôöùúûüÿœ")
_MIN_CHARS = 20  # a page with fewer non-space characters is not judged


@lru_cache(maxsize=4096)
def _script(ch: str) -> str:
    """The alphabet of a letter: the first word of its Unicode name (LATIN, CYRILLIC, GREEK)."""
    name = unicodedata.name(ch, "")
    return name.split(" ", 1)[0] if name else "?"


def _word(part: str) -> bool:
    """One alphabetic word: one alphabet, a usual letter case, a vowel in a longer word."""
    letters = part.replace("'", "").replace("’", "")
    if not letters or not all(c.isalpha() for c in letters):
        return False
    if len({_script(c) for c in letters}) > 1:
        return False
    if not (letters.islower() or letters.isupper() or letters.istitle()):
        return len(letters) <= 3  # units: MPa, kW, mA, dB, kWh
    ascii_latin = letters.isascii()
    if ascii_latin and len(letters) >= 4 and not letters.isupper():
        return any(c in _VOWELS for c in letters)
    return True


def _part(part: str) -> bool:
    return bool(part) and bool(_word(part) or _NUMBER.fullmatch(part) or _CODE.fullmatch(part))


def _readable(token: str) -> bool | None:
    """Whether a whitespace-separated token reads as text; ``None``: not counted."""
    if _BAD_CHAR.search(token) or "(cid:" in token:
        return False
    core = token.strip(_WRAP)
    if core and _UNIT_MARKS.search(core):
        core = _UNIT_MARKS.sub("", core)
        if not core:
            return True
    if not core:
        return None if len(token) == 1 else token in ("...", "…", "**", "--")
    if _CJK.search(core):
        return True
    if not any(c.isalnum() for c in core):
        return None if len(core) == 1 else core in ("--", "->", "=>", "<=", ">=", "...")
    if _part(core):
        return True
    parts = _JOIN.split(core)
    return len(parts) > 1 and all(_part(p) for p in parts if p) and all(parts[1:-1])


def readable_share(text: str) -> float | None:
    """The share (0-1) of ``text``'s non-space characters in readable tokens (module
    docstring); ``None`` when there are too few characters to judge."""
    text = _CID.sub("\ufffd", text)
    counted = readable = 0
    for token in text.split():
        verdict = _readable(token)
        if verdict is None:
            continue
        counted += len(token)
        if verdict:
            readable += len(token)
    if counted < _MIN_CHARS:
        return None
    return readable / counted
