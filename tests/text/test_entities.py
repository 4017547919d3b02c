"""The entity dictionary and recogniser shared by the entity path: aliases count as their
canonical name, pattern matches are canonicalised, relations are read both ways, bad files are one
line naming file and key."""

from __future__ import annotations

import pytest

from rag_lab.errors import ConfigError
from rag_lab.text.entities import EntityRecogniser, key, read_entity_dictionary

PATTERNS = {"fault_code": r"\b[A-Z]{1,2}\d{3,4}\b", "model": r"\b[A-Z]{2}-\d{2,3}\b"}

DICTIONARY = """
HX-200:
  kind: model
  aliases: [液压站, hydraulic power unit]
  related: [HX-RF10]
回油滤芯:
  kind: component
  aliases: [return filter]
  related: [E108]
"""


@pytest.fixture
def recogniser(tmp_path) -> EntityRecogniser:
    path = tmp_path / "entities.yaml"
    path.write_text(DICTIONARY, encoding="utf-8")
    return EntityRecogniser(read_entity_dictionary(path), PATTERNS)


def test_aliases_and_patterns_give_canonical_names(recogniser):
    assert recogniser.find("液压站报 e108，回油滤芯要换吗") == {"HX-200", "E108", "回油滤芯"}
    assert recogniser.find("The Hydraulic Power Unit return filter") == {"HX-200", "回油滤芯"}
    # an alias with Latin edges is anchored: "return filters" is not matched inside "xreturn filter"
    assert recogniser.find("xreturn filterx") == set()


def test_relations_are_read_both_ways(recogniser):
    assert recogniser.related("hx200") == {"HX-RF10"}
    assert recogniser.related("HX-RF10") == {"HX-200"}
    assert recogniser.related("E108") == {"回油滤芯"}
    assert recogniser.related("E102") == set()


def test_keys_ignore_case_and_separators():
    assert key("SP45") == key("sp-45") == key("SP 45") == "sp45"
    assert key("AL.912") == "al912"


def test_json_is_read_too(tmp_path):
    path = tmp_path / "entities.json"
    path.write_text('{"CH-30": {"kind": "model", "aliases": ["冷水机"]}}', encoding="utf-8")
    (entry,) = read_entity_dictionary(path)
    assert entry.name == "CH-30" and entry.aliases == ("冷水机",) and entry.kind == "model"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("HX-200: [a, b]\n", "HX-200: expected a mapping"),
        ("HX-200: {colour: red}\n", "HX-200: unknown key(s) colour"),
        ("HX-200: {aliases: [1]}\n", "HX-200.aliases: expected a string or a list"),
        ("A-1: {aliases: [x]}\nB-2: {aliases: [X]}\n", "B-2: 'X' also names entity 'A-1'"),
        ("HX-200: {aliases: [a\n", "line 2: not valid YAML"),
        ("- a\n- b\n", "expected a mapping of entity"),
    ],
)
def test_a_bad_dictionary_is_one_line_naming_file_and_key(tmp_path, text, message):
    path = tmp_path / "entities.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as err:
        read_entity_dictionary(path)
    assert str(err.value).startswith(str(path)) and message in str(err.value)
    assert "\n" not in str(err.value)


def test_a_missing_dictionary_is_named(tmp_path):
    with pytest.raises(ConfigError, match="no such entity dictionary"):
        read_entity_dictionary(tmp_path / "nope.yaml")
