"""Abbreviation / synonym expansion: the YAML dictionary and the definitions mined from a corpus."""

from __future__ import annotations

from pathlib import Path

import pytest

from rag_lab.errors import ConfigError
from rag_lab.protocols import CorpusFitted, Measured
from rag_lab.query_transforms import AbbreviationExpansion, QueryTransform, SynonymExpansion
from rag_lab.query_transforms.abbreviations import english_long_form, is_abbreviation
from rag_lab.types import Chunk

SAMPLE_DICTIONARY = (
    Path(__file__).resolve().parents[2] / "rag_lab/sample/maintenance_kb/synonyms.yaml"
)


def chunk(cid: str, text: str) -> Chunk:
    return Chunk(cid, cid.split("#")[0], text, 0, len(text))


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "terms.yaml"
    path.write_text(text, encoding="utf-8")
    return path


# -- the YAML dictionary ------------------------------------------------------------------------
def test_dictionary_expands_both_ways_and_skips_what_the_query_has(tmp_path: Path) -> None:
    t = SynonymExpansion(str(write(tmp_path, "PLC: [可编程逻辑控制器]\nIO: 输入输出\n")))
    out = t.transform(
        {"a": "PLC-IO 模块故障", "b": "可编程逻辑控制器坏了", "c": "PLC 可编程逻辑控制器"}
    )
    assert out == {
        "a": "PLC-IO 模块故障 可编程逻辑控制器 输入输出",
        "b": "可编程逻辑控制器坏了 PLC",
        "c": "PLC 可编程逻辑控制器",  # has both: nothing to add
    }
    assert list(out) == ["a", "b", "c"]
    assert t.stats["expanded_share"] == pytest.approx(2 / 3)
    assert t.stats["added_per_query"] == pytest.approx(3 / 3)
    assert t.stats["ms_per_query"] >= 0 and t.stats["n_terms"] == 4


def test_dictionary_one_way_and_term_boundaries(tmp_path: Path) -> None:
    t = SynonymExpansion(
        str(write(tmp_path, "PLC: [可编程逻辑控制器]\n")), bidirectional=False, max_added=1
    )
    out = t.transform({"a": "PLCX error", "b": "可编程逻辑控制器", "c": "the PLC."})
    assert out == {"a": "PLCX error", "b": "可编程逻辑控制器", "c": "the PLC. 可编程逻辑控制器"}


def test_acronyms_match_in_capitals_only_words_in_any_case(tmp_path: Path) -> None:
    t = SynonymExpansion(str(write(tmp_path, "DB: [背对背]\nair machine: [compressor]\n")))
    out = t.transform({"a": "noise in dB(A)", "b": "DB 安装", "c": "The Air  Machine quits"})
    assert out == {
        "a": "noise in dB(A)",
        "b": "DB 安装 背对背",
        "c": "The Air  Machine quits compressor",
    }


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("- a\n- b\n", r"terms\.yaml: expected a mapping of term -> \[equivalents\], got list"),
        ("PLC: 3\n", r"terms\.yaml: key 'PLC': expected a string or a list of non-empty strings"),
        ("PLC: []\n", r"key 'PLC': expected a string or a list"),
        ("PLC: [ok, '']\n", r"key 'PLC': expected a string or a list"),
        ("1: [x]\n", r"key 1: a term must be a non-empty string"),
        ("PLC: [a\n", r"terms\.yaml: line \d+: not valid YAML"),
    ],
)
def test_bad_dictionaries_name_the_file_and_key(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        SynonymExpansion(str(write(tmp_path, text)))


def test_missing_dictionary_names_the_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"nope\.yaml: no such synonym dictionary"):
        SynonymExpansion(str(tmp_path / "nope.yaml"))


def test_the_sample_dictionary_loads_and_is_a_measured_transform() -> None:
    t = SynonymExpansion(str(SAMPLE_DICTIONARY))
    assert isinstance(t, QueryTransform) and isinstance(t, Measured)
    assert not isinstance(t, CorpusFitted)
    assert "可编程逻辑控制器" in t.transform({"q": "PLC-IO 模块故障"})["q"]


# -- mined from the corpus ----------------------------------------------------------------------
CORPUS = [
    chunk("zh#0", "产线的控制核心是可编程逻辑控制器（PLC）。信号通过输入输出（I/O）模块接入。"),
    chunk("zh#1", "操作员在 HMI（人机界面）上确认报警；电机由变频器(VFD)驱动。"),
    chunk("en#0", "The PM-3000 is a modular Programmable Logic Controller (PLC) family."),
    chunk("en#1", "Keep the UPS (uninterruptible power supply) charged. Alarm SV0432 (E102)."),
    chunk("en#2", "Noise 62 dB(A), measured (see Table 2) at HX-200 (rated)."),
]


def test_mines_every_definition_form_and_nothing_else() -> None:
    t = AbbreviationExpansion()
    assert isinstance(t, CorpusFitted) and isinstance(t, QueryTransform)
    t.fit(CORPUS)
    assert {(a, b) for a, b, _ in t.pairs} == {
        ("PLC", "可编程逻辑控制器"),  # full-width, long form outside (cut after 是)
        ("I/O", "输入输出"),  # cut after 通过
        ("HMI", "人机界面"),  # abbreviation outside
        ("VFD", "变频器"),  # ASCII parentheses, cut after 由
        ("PLC", "Programmable Logic Controller"),  # initials spell the letters
        ("UPS", "uninterruptible power supply"),  # abbreviation outside, English
    }


def test_mined_expansion_reaches_both_ways() -> None:
    t = AbbreviationExpansion()
    t.fit(CORPUS)
    out = t.transform({"a": "PLC-IO 模块故障", "b": "可编程逻辑控制器输入输出模块灯灭"})
    assert out["a"] == "PLC-IO 模块故障 Programmable Logic Controller 可编程逻辑控制器 输入输出"
    assert out["b"] == "可编程逻辑控制器输入输出模块灯灭 PLC I/O IO"
    assert t.stats["n_pairs"] == 6


def test_min_count_and_refit_replace_the_dictionary() -> None:
    t = AbbreviationExpansion(min_count=2)
    t.fit(CORPUS)
    assert t.pairs == ()
    t.fit([*CORPUS[:1], chunk("again#0", "采用可编程逻辑控制器（PLC）控制")])
    assert t.pairs == (("PLC", "可编程逻辑控制器", 2),)
    assert t.transform({"q": "UPS 报警"}) == {"q": "UPS 报警"}  # the earlier corpus is gone


def test_a_chinese_long_form_is_cut_to_max_long_chars() -> None:
    t = AbbreviationExpansion(max_long_chars=4)
    t.fit([chunk("d#0", "本装置的高精度绝对值编码器（ABS）")])
    assert [(a, b) for a, b, _ in t.pairs] == [("ABS", "编码器")]


@pytest.mark.parametrize(
    ("text", "expected"),
    [("PLC", True), ("I/O", True), ("SV7", True), ("E102", False), ("SV0432", False),
     ("Pump", False), ("dB", False)],
)  # fmt: skip
def test_what_counts_as_an_abbreviation(text: str, expected: bool) -> None:
    assert is_abbreviation(text) is expected


def test_english_long_form_needs_the_initials() -> None:
    assert english_long_form("a modular programmable logic controller", "PLC") == (
        "programmable logic controller"
    )
    assert english_long_form("Department of Energy", "DE") == "Department of Energy"
    assert english_long_form("the pump", "PLC") is None
