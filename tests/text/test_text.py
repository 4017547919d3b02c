"""rag_lab.text: the shared text leaf (patterns, normalisation, sentences, content terms) and the
old places its names are still importable from."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

from rag_lab.text import (
    CJK_CHAR,
    SENTENCE_BOUNDARY,
    TOKEN,
    ContentTerms,
    TermSupport,
    has_cjk,
    normalise_text,
    split_sentences,
)


def test_pre_tokens_are_cjk_characters_words_and_punctuation():
    assert TOKEN.findall("油温E102 hot.") == ["油", "温", "E102", "hot", "."]
    assert TOKEN.findall("ポンプ 펌프") == ["ポ", "ン", "プ", "펌", "프"]
    assert has_cjk("HX-200 油压") and not has_cjk("HX-200 oil")
    assert CJK_CHAR.fullmatch("油") and not CJK_CHAR.fullmatch("o")


def test_normalise_text_nfkc_case_whitespace():
    assert normalise_text("  ７０\u3000°C\n\tOIL ") == "70 °c oil"


def test_sentences_split_on_the_named_boundary_and_on_lines():
    text = "Check the pump. Reset it!\n油压过低。请停机；然后检查\nno end"
    assert split_sentences(text) == [
        "Check the pump.",
        "Reset it!",
        "油压过低。",
        "请停机；",
        "然后检查",
        "no end",
    ]
    # a full stop inside a number or a code is not a boundary (no space follows)
    assert split_sentences("Set 2.5 bar on HX.200 now.") == ["Set 2.5 bar on HX.200 now."]
    assert SENTENCE_BOUNDARY.split("a. b") == ["a.", "b"]
    # an initial ends no sentence, a unit after a degree sign does
    assert split_sentences("See J. K. Rowling. It reaches 200 °C. Open it at 5 °F. Done.") == [
        "See J. K. Rowling.",
        "It reaches 200 °C.",
        "Open it at 5 °F.",
        "Done.",
    ]


def test_the_recursive_chunker_splits_sentences_with_the_same_rule():
    from rag_lab.chunker.recursive import BOUNDARIES

    assert SENTENCE_BOUNDARY in BOUNDARIES  # one rule object, not a copy that could drift


def test_content_terms_drop_stopwords_and_stem():
    terms = ContentTerms()
    assert terms("The pumps are running") == ["pump", "run"]
    assert "不" in terms("油泵不工作")  # negations are content: they change a claim


def test_term_support_counts_chinese_substrings():
    support = TermSupport("液压油温度过高时停机", ContentTerms())
    assert support.supported("温度") and support.supported("液压油")
    assert support.share([]) is None
    assert support.share(["温度", "pump"]) == 0.5


OLD_NAMES = [
    ("rag_lab.chunker.fixed_size", "TOKEN", "TOKEN"),
    ("rag_lab.chunker.fixed_size", "_CJK", "CJK"),
    ("rag_lab.metrics", "normalise_text", "normalise_text"),
    ("rag_lab.metrics.relevance", "normalise_text", "normalise_text"),
]


@pytest.mark.parametrize("module, old, new", OLD_NAMES)
def test_old_import_paths_give_the_same_objects(module: str, old: str, new: str):
    import rag_lab.text as text

    assert getattr(importlib.import_module(module), old) is getattr(text, new)


def test_text_is_a_leaf():
    """Importing rag_lab.text loads no stage package (every stage may import it)."""
    probe = (
        "import sys, rag_lab.text; "
        "bad = [m for m in sys.modules if m.startswith(('rag_lab.chunker', "
        "'rag_lab.metrics', 'rag_lab.tokenizer', 'rag_lab.generator', 'rag_lab.judge'))]; "
        "assert not bad, bad"
    )
    proc = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
