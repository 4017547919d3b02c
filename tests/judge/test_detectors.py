"""``judge=nli`` with each detector family, on tiny local models built here with transformers (no
download): MiniCheck-style and HHEM-style sequence classifiers, a one-output cross-encoder, and a
LettuceDetect-style token classifier whose embeddings are set by hand so that one word is
"hallucinated". Checks loading, the family's input format, its label mapping and the
aggregation; no model's quality."""

from __future__ import annotations

import json

import pytest

from rag_lab.errors import ConfigError
from rag_lab.judge import NLIJudge
from rag_lab.judge._detectors import (
    HHEM_PROMPT,
    JUDGE_META,
    PairScorer,
    TokenScorer,
    chunk_document,
)

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

WORDS = (
    "fault e102 means low oil pressure keep the below 8 mpa pump was made in germany italy . , "
    "passage question premise hypothesis"
).split()
CTX = ["Fault E102 means low oil pressure.", "Keep the pressure below 8 MPa."]


def _tokenizer(folder):
    from transformers import BertTokenizerFast

    vocab = folder / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS]) + "\n")
    return BertTokenizerFast(vocab=str(vocab), do_lower_case=True)  # transformers 5: vocab=


def _config(num_labels, layers=1, **kw):
    from transformers import BertConfig

    return BertConfig(
        vocab_size=len(WORDS) + 5,
        hidden_size=16,
        num_hidden_layers=layers,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=512,
        num_labels=num_labels,
        **kw,
    )


def sequence_model(folder, bias, meta=None):
    """A sequence classifier whose logits are ``bias`` whatever it reads."""
    from transformers import BertForSequenceClassification

    folder.mkdir()
    torch.manual_seed(0)
    model = BertForSequenceClassification(_config(len(bias)))
    with torch.no_grad():
        model.classifier.weight.zero_()
        model.classifier.bias.copy_(torch.tensor(bias))
    model.save_pretrained(folder)
    _tokenizer(folder).save_pretrained(folder)
    if meta:
        (folder / JUDGE_META).write_text(json.dumps(meta))
    return str(folder)


def token_model(folder, hallucinated="germany"):
    """A token classifier with no transformer layer: a token's logits depend on its own word
    embedding only; ``hallucinated``'s embedding points along dimension 0, which the head
    reads as class 1 (hallucinated); every other token is class 0."""
    from transformers import BertForTokenClassification

    folder.mkdir()
    tok = _tokenizer(folder)
    cfg = _config(2, layers=0, id2label={0: "supported", 1: "hallucinated"})
    cfg.label2id = {"supported": 0, "hallucinated": 1}
    model = BertForTokenClassification(cfg)
    with torch.no_grad():
        emb = model.bert.embeddings
        emb.word_embeddings.weight.zero_()
        emb.position_embeddings.weight.zero_()
        emb.token_type_embeddings.weight.zero_()
        emb.word_embeddings.weight[tok.convert_tokens_to_ids(hallucinated), 0] = 5.0
        model.classifier.weight.zero_()
        model.classifier.weight[1, 0] = 4.0
        model.classifier.bias.copy_(torch.tensor([0.0, -2.0]))
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    return str(folder)


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    root = tmp_path_factory.mktemp("detectors")
    return {
        "yes2": sequence_model(root / "yes2", [-3.0, 3.0]),
        "no2": sequence_model(root / "no2", [3.0, -3.0]),
        "trained": sequence_model(root / "trained", [2.0], meta={"family": "minicheck"}),
        "token": token_model(root / "token"),
    }


def test_minicheck_maps_label_one_and_needs_its_family(models):
    with pytest.raises(ConfigError, match="judge.family=auto cannot tell"):
        NLIJudge(models["yes2"]).judge("q", CTX, "Oil.")
    yes = NLIJudge(models["yes2"], family="minicheck")
    assert yes.label_index == 1
    res = yes.judge("q", CTX, "Fault E102 means low oil pressure. The pump was made in Italy.")
    assert res.faithfulness == 1.0 and res.details["family"] == "minicheck"
    assert NLIJudge(models["no2"], family="minicheck").judge("q", CTX, "Oil.").faithfulness == 0.0
    # the other class, by index: the same model reads as unsupported
    flipped = NLIJudge(models["yes2"], family="minicheck", entailment_label=0)
    assert flipped.judge("q", CTX, "Oil.").faithfulness == 0.0


def test_minicheck_reads_long_contexts_in_chunks(models):
    judge = NLIJudge(models["yes2"], family="minicheck", chunk_words=5, max_length=16)
    long_ctx = " ".join(CTX * 4)
    rows = judge._pairs.inputs(long_ctx, ["Oil is low.", "Keep it below 8 MPa."])
    chunks = chunk_document(long_ctx, 5)
    assert len(chunks) == 10 and rows[: len(chunks)] == [(c, "Oil is low.") for c in chunks]
    assert judge.judge("q", [long_ctx], "Oil is low. Keep it below 8 MPa.").faithfulness == 1.0
    zh = chunk_document("故障码E102表示油压过低。" * 20, 10)
    assert all(len(c) <= 15 for c in zh) and "".join(zh) == "故障码E102表示油压过低。" * 20


def test_a_trained_one_output_cross_encoder_loads_by_its_own_metadata(models):
    judge = NLIJudge(models["trained"])  # family from rag_lab_judge.json, sigmoid of one logit
    res = judge.judge("q", CTX, "Fault E102 means low oil pressure.")
    assert judge.label_index == -1 and res.details["family"] == "minicheck"
    assert res.details["entailment"] == [round(float(torch.tensor(2.0).sigmoid()), 4)]
    assert NLIJudge(models["trained"], threshold=0.9).judge("q", CTX, "Oil.").faithfulness == 0.0


def test_hhem_reads_one_prompted_sequence(models):
    judge = NLIJudge(models["yes2"], family="hhem")
    assert judge._pairs.inputs("The pump is red.", ["It is red."]) == [
        (HHEM_PROMPT.format(premise="The pump is red.", hypothesis="It is red."),)
    ]
    custom = NLIJudge(models["yes2"], family="hhem", prompt="{premise} || {hypothesis}")
    assert custom._pairs.inputs("a", ["b"]) == [("a || b",)]
    assert judge.judge("q", CTX, "Oil. Pressure.").faithfulness == 1.0
    assert NLIJudge(models["no2"], family="hhem").judge("q", CTX, "Oil.").faithfulness == 0.0
    assert isinstance(judge._pairs, PairScorer)


def test_token_detector_marks_the_hallucinated_sentence(models):
    judge = NLIJudge(models["token"])  # ForTokenClassification: family auto -> token
    response = "Fault E102 means low oil pressure. The pump was made in Germany."
    # "germany" in the question and the passages is prompt: never judged
    res = judge.judge("Was it made in Germany?", CTX + ["Made in Germany."], response)
    assert judge.resolved_family == "token" and judge.label_index == 1
    assert res.faithfulness == 0.5 and res.details["faithful"] is False
    assert res.details["unsupported"][0]["sentence"] == "The pump was made in Germany."
    assert [s["text"] for s in res.details["spans"]] == ["Germany"]
    assert response[res.details["spans"][0]["start"] :].startswith("Germany")
    ok = judge.judge("q", CTX, "The pump was made in Italy.")
    assert ok.faithfulness == 1.0 and ok.details["spans"] == []


def test_token_prompt_holds_the_question_and_numbered_passages(models):
    scorer = NLIJudge(models["token"])._tokens
    assert isinstance(scorer, TokenScorer)
    text = scorer.format("Why?", ["A.", "B."])
    assert "Why?" in text and "passage 1: A.\npassage 2: B." in text and "2 passages" in text


def test_family_and_threshold_are_checked():
    with pytest.raises(Exception, match="family"):
        NLIJudge("x", family="entailment")
    with pytest.raises(ValueError):
        NLIJudge("x", threshold=1.5)
