"""rag_lab.tokenizer.auto and .script: the corpus' script decides ``tokenizer=auto`` (jieba for the
sample's Chinese documents, the English analyser for an English toy set), the choice keys the
cache, and a Chinese corpus given the English analyser is warned about."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from rag_lab.evaluate import evaluate
from rag_lab.paths import SAMPLE_DIR
from rag_lab.pipeline import build
from rag_lab.tokenizer import AutoTokenizer, EnglishTokenizer, JiebaTokenizer
from rag_lab.tokenizer.auto import choose
from rag_lab.tokenizer.script import cjk_share, corpus_sample, segments_chinese
from tests.compose import TOY, compose_evaluate

ZH_DOCS = sorted((SAMPLE_DIR / "maintenance_kb" / "docs" / "manuals").glob("*-zh.md"))


def beir_folder(root: Path, docs: list[tuple[str, str]], question: str) -> Path:
    """A BEIR folder: ``docs`` as ``(id, text)``, one query judged relevant to the first."""
    root.mkdir(parents=True)
    with open(root / "corpus.jsonl", "w", encoding="utf-8") as fh:
        for did, text in docs:  # ensure_ascii: the file holds \\u escapes, not characters
            fh.write(json.dumps({"_id": did, "title": "", "text": text}) + "\n")
    (root / "queries.jsonl").write_text(json.dumps({"_id": "q1", "text": question}) + "\n")
    (root / "qrels").mkdir()
    (root / "qrels" / "test.tsv").write_text(f"query-id\tcorpus-id\tscore\nq1\t{docs[0][0]}\t1\n")
    return root


@pytest.fixture
def chinese_set(tmp_path) -> Path:
    assert len(ZH_DOCS) >= 3  # the sample ships Chinese manuals (*-zh.md)
    docs = [(p.stem, p.read_text(encoding="utf-8")) for p in ZH_DOCS]
    docs.sort(key=lambda d: "bearing" not in d[0])  # the relevant one first
    assert docs[0][0] == "sp45-bearing-replacement-zh"
    return beir_folder(tmp_path / "zh", docs, "主轴轴承更换步骤")


@pytest.fixture
def english_set(tmp_path) -> Path:
    toy = [json.loads(line) for line in open(TOY / "corpus.jsonl", encoding="utf-8")]
    docs = [(d["_id"], d["text"]) for d in toy if cjk_share([d["text"]]) == 0]
    assert len(docs) == 6  # the toy's English documents
    return beir_folder(tmp_path / "en", docs, "hydraulic oil too hot")


def test_cjk_share_is_han_over_letters():
    assert cjk_share(["油温ab"]) == 2 / 4
    assert cjk_share(["E102 70 °C", "HX-200"]) == 0.0  # letters E, C, H, X: no Han
    assert cjk_share(["12 34", ""]) is None  # no letter at all
    assert cjk_share(["ab", "油温油温"], max_chars=2) == 0.0  # the sample stops at max_chars


def test_cjk_share_counts_as_the_per_character_definition():
    from rag_lab.tokenizer.script import _is_cjk

    def by_character(texts, max_chars):
        han = letters = seen = 0
        for text in texts:
            for ch in text[: max(0, max_chars - seen)]:
                letters += ch.isalpha()
                han += ch.isalpha() and _is_cjk(ch)
            seen += len(text)
            if seen >= max_chars:
                break
        return han / letters if letters else None

    # the edges of each Han block, unassigned code points in them (not letters), kana, digits
    edges = [0x3400, 0x4DBF, 0x4DC0, 0x4DFF, 0x4E00, 0x9FFF, 0x9FFE, 0xA000, 0xF900, 0xFAFF]
    alphabet = [chr(c) for c in edges] + list("aZé5 。カ\n") + [chr(0x4DB6), chr(0xFA6E)]
    rng = np.random.default_rng(0)
    for _ in range(50):
        texts = ["".join(rng.choice(alphabet, rng.integers(0, 40))) for _ in range(5)]
        max_chars = int(rng.choice([0, 7, 30, 10_000]))
        assert cjk_share(texts, max_chars) == by_character(texts, max_chars)


def test_corpus_sample_reads_jsonl_values_and_text_files(chinese_set, english_set):
    zh = corpus_sample([chinese_set / "corpus.jsonl"])
    assert cjk_share(zh) > 0.5  # escapes decoded: the characters count
    assert cjk_share(corpus_sample([english_set / "corpus.jsonl"])) == 0.0
    assert cjk_share(corpus_sample(ZH_DOCS)) > 0.5  # Markdown read as text
    assert corpus_sample([SAMPLE_DIR / "maintenance_kb" / "docs" / "manuals" / "x.pdf"]) == []


def test_choose_and_the_declared_capability():
    assert choose(0.2) == "chinese" and choose(0.19) == "other" and choose(None) == "other"
    assert choose(0.5, min_cjk_share=0.6) == "other"
    assert segments_chinese(JiebaTokenizer) and not segments_chinese(EnglishTokenizer)


def test_auto_instance_decides_on_its_first_call():
    tok = AutoTokenizer({"chinese": JiebaTokenizer(), "other": EnglishTokenizer()})
    assert tok(["主轴温度过高报警"]) == JiebaTokenizer()(["主轴温度过高报警"])
    assert tok.chosen == "chinese"
    assert tok(["The pumps"]) == [["the", "pumps"]]  # jieba from then on: no stemming
    en = AutoTokenizer({"chinese": JiebaTokenizer(), "other": EnglishTokenizer()})
    assert en(["The pumps are running"]) == [["pump", "run"]] and en.chosen == "other"


def built_tokenizer(cfg) -> tuple[dict, object]:
    pipe = build.build_pipeline(cfg)
    return pipe.stage_configs["retrievers"]["bm25"]["tokenizer"], pipe.retrievers["bm25"]


@pytest.mark.parametrize(
    ("which", "expected"), [("chinese_set", "Jieba"), ("english_set", "English")]
)
def test_build_resolves_auto_to_the_options_config(request, tmp_path, caplog, which, expected):
    folder = request.getfixturevalue(which)
    base = ["dataset=beir", f"dataset.path={folder}", "retrievers=[bm25]", "tracking=none"]
    with caplog.at_level(logging.INFO, logger="rag_lab.pipeline.build"):
        auto_cfg, auto_bm25 = built_tokenizer(compose_evaluate([*base, "tokenizer=auto"], tmp_path))
    option = "jieba" if expected == "Jieba" else "english"
    plain_cfg, _ = built_tokenizer(compose_evaluate([*base, f"tokenizer={option}"], tmp_path))
    # the resolved config is the option's own: the stage cache keys (and shares) the choice
    assert auto_cfg == plain_cfg
    assert type(auto_bm25.tokenizer).__name__ == f"{expected}Tokenizer"
    line = next(r.getMessage() for r in caplog.records if "=auto:" in r.getMessage())
    assert line.startswith(
        f"retrievers.bm25.tokenizer=auto: {'chinese' if option == 'jieba' else 'other'}"
    )
    assert f"({expected}Tokenizer)" in line


def test_english_analyser_on_a_chinese_corpus_is_warned(chinese_set, english_set, tmp_path, caplog):
    def warnings(folder: Path, tokenizer: str) -> list[str]:
        caplog.clear()
        cfg = compose_evaluate(
            [
                "dataset=beir",
                f"dataset.path={folder}",
                "retrievers=[bm25]",
                f"tokenizer={tokenizer}",
            ],
            tmp_path,
        )
        data = build.build_dataset(cfg).load()
        with caplog.at_level(logging.WARNING, logger="rag_lab.pipeline.build"):
            build.build_pipeline(cfg, data)
        return [r.getMessage() for r in caplog.records if "segment Chinese" in r.getMessage()]

    (msg,) = warnings(chinese_set, "english")
    assert msg.startswith("retrievers.bm25.tokenizer=EnglishTokenizer does not segment Chinese")
    assert "use tokenizer=jieba or tokenizer=auto" in msg
    assert len(warnings(chinese_set, "whitespace")) == 1
    assert warnings(chinese_set, "jieba") == []
    assert warnings(english_set, "english") == []


def test_auto_scores_as_jieba_on_a_chinese_corpus(chinese_set, tmp_path):
    def run(tokenizer: str) -> dict:
        over = ["dataset=beir", f"dataset.path={chinese_set}", "retrievers=[bm25]"]
        cfg = compose_evaluate(
            [*over, f"tokenizer={tokenizer}", "tracking=none"], tmp_path / tokenizer
        )
        return evaluate(cfg)

    auto, jieba, english = run("auto"), run("jieba"), run("english")
    assert auto["ndcg_at_10"] == jieba["ndcg_at_10"] == 1.0
    # the English analyser finds no term in a Chinese query (\w\w+ over a run of Han is one
    # "word" no document shares)
    assert english["ndcg_at_10"] == 0.0 and english["empty_result_rate"] == 1.0


def test_build_without_data_leaves_no_dataset_unresolved():
    """An export-style config with no dataset: the auto stage stays, deciding on first use."""
    nodes = {"bm25": {"tokenizer": {"_target_": build.AUTO_TOKENIZER, "tokenizers": {}}}}
    build.resolve_tokenizers(nodes, "retrievers", None)
    assert nodes["bm25"]["tokenizer"]["_target_"] == build.AUTO_TOKENIZER
    data = SimpleNamespace(corpus_sources=ZH_DOCS, name="zh")
    nodes["bm25"]["tokenizer"]["tokenizers"] = {"chinese": {"_target_": "x.Jieba"}, "other": {}}
    build.resolve_tokenizers(nodes, "retrievers", data)
    assert nodes["bm25"]["tokenizer"] == {"_target_": "x.Jieba"}


def test_an_export_records_the_choice(chinese_set, tmp_path):
    """A loaded export has no corpus to decide from: its pipeline.yaml names the chosen analyser,
    and the loaded pipeline retrieves as the run did."""
    import yaml

    from rag_lab.export import export_pipeline, load_pipeline

    over = ["dataset=beir", f"dataset.path={chinese_set}", "retrievers=[bm25]", "tokenizer=auto"]
    evaluate(compose_evaluate([*over, "tracking=none"], tmp_path))
    export_dir = export_pipeline(tmp_path / "run", tmp_path / "export")
    config = yaml.safe_load((export_dir / "pipeline.yaml").read_text(encoding="utf-8"))
    assert (
        config["retrievers"]["bm25"]["tokenizer"]["_target_"] == "rag_lab.tokenizer.JiebaTokenizer"
    )
    hits = load_pipeline(export_dir).retrieve("主轴轴承更换步骤")
    assert hits[0]["doc_id"] == "sp45-bearing-replacement-zh"
