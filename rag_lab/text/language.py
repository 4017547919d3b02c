"""Which language a text is in (Chinese or English), for prompts, answer metrics, datasets and the
context stages."""

from __future__ import annotations

from typing import Literal

from rag_lab.text.patterns import CJK_CHAR, TOKEN

Language = Literal["zh", "en"]

# Share of CJK characters among pre-tokens (CJK characters + words) from which a text is Chinese.
# Below one half on purpose: Chinese technical questions carry English terms and codes.
ZH_SHARE = 0.3


def detect_language(text: str) -> Language:
    """``"zh"`` when CJK characters make up at least ``ZH_SHARE`` of the pre-tokens (punctuation
    ignored), else ``"en"`` (also for empty text)."""
    toks = [t for t in TOKEN.findall(text) if t[0].isalnum() or t[0] == "_"]
    if not toks:
        return "en"
    cjk = sum(1 for t in toks if CJK_CHAR.fullmatch(t))
    return "zh" if cjk / len(toks) >= ZH_SHARE else "en"
