"""NLIJudge plumbing with a tiny, randomly initialised BERT classifier built in a temporary folder
(no NLI model ships offline): label lookup by name or index, one (contexts, sentence) pair per
claim, aggregation into the share of entailed sentences, and the rules shared with other judges.
The classifier head is set by hand so that P(entailment) is known; quality is not tested."""

from __future__ import annotations

import pytest

from rag_lab.errors import ConfigError
from rag_lab.judge import Judge, JudgeRunner, NLIJudge
from rag_lab.judge.nli import supported_share
from rag_lab.text.refusals import REFUSALS

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

CTX = ["fault e102 means low oil pressure .", "keep the pressure below 8 mpa ."]
WORDS = (
    "fault e102 means low oil pressure keep the below 8 mpa pump was made in germany . , 1990"
).split()


def build(folder, entail_logit: float, labels=("contradiction", "neutral", "entailment")):
    """A 3-class BertForSequenceClassification whose output ignores its input: logits =
    (0, 0, entail_logit), so P(label 2) = e^x / (2 + e^x)."""
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizerFast

    vocab = folder / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS]) + "\n")
    tok = BertTokenizerFast(vocab_file=str(vocab), do_lower_case=True)
    cfg = BertConfig(
        vocab_size=len(WORDS) + 5,
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=64,
        num_labels=3,
        id2label=dict(enumerate(labels)),
        label2id={n: i for i, n in enumerate(labels)},
    )
    torch.manual_seed(0)
    model = BertForSequenceClassification(cfg)
    with torch.no_grad():
        model.classifier.weight.zero_()
        model.classifier.bias.copy_(torch.tensor([0.0, 0.0, entail_logit]))
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    return str(folder)


def p_entail(x: float) -> float:
    return float(torch.tensor([0.0, 0.0, x]).softmax(-1)[2])


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    root = tmp_path_factory.mktemp("nli")
    (root / "yes").mkdir(), (root / "no").mkdir(), (root / "odd").mkdir()
    return {
        "yes": build(root / "yes", 6.0),
        "no": build(root / "no", -6.0),
        "odd": build(root / "odd", 0.0, labels=("ENTAILMENT", "NEUTRAL", "CONTRADICTION")),
    }


def test_entailed_sentences_are_supported(models):
    j = NLIJudge(models["yes"])
    assert isinstance(j, Judge) and j.label_index == 2
    res = j.judge("q", CTX, "Fault E102 means low oil pressure. Keep the pressure below 8 MPa.")
    assert res.faithfulness == 1.0 and res.details["n_claims"] == 2
    assert res.details["entailment"] == [round(p_entail(6.0), 4)] * 2
    assert res.details["supported_sentences"] == [
        "Fault E102 means low oil pressure.",
        "Keep the pressure below 8 MPa.",
    ]


def test_not_entailed_sentences_are_unsupported(models):
    res = NLIJudge(models["no"]).judge("q", CTX, "The pump was made in Germany in 1990.")
    assert res.faithfulness == 0.0 and res.details["unsupported"][0]["entailment"] < 0.01


def test_threshold_and_label_choice(models):
    # uniform logits: P = 1/3 for every label
    by_name = NLIJudge(models["odd"], entailment_label="entailment", threshold=0.3)
    assert by_name.judge("q", CTX, "Oil.").faithfulness == 1.0
    by_index = NLIJudge(models["odd"], entailment_label=0, threshold=0.4)
    assert by_index.judge("q", CTX, "Oil.").faithfulness == 0.0
    assert NLIJudge(models["odd"], entailment_label="Entailment").label_index == 0
    with pytest.raises(ConfigError, match="not a class"):
        _ = NLIJudge(models["odd"], entailment_label="entails").label_index
    with pytest.raises(ConfigError, match="not a class"):
        _ = NLIJudge(models["odd"], entailment_label=5).label_index


def test_aggregation_is_the_share_of_entailed_claims():
    assert supported_share([0.9, 0.2, 0.6, 0.5], 0.5) == 0.75
    assert supported_share([0.49], 0.5) == 0.0


def test_shared_rules(models):
    j = NLIJudge(models["no"])
    assert j.judge("q", CTX, REFUSALS["zh"]).faithfulness == 1.0
    assert j.judge("q", CTX, "  ").faithfulness is None
    res = NLIJudge(models["yes"]).judge("q", [], "Fault E102 means low oil pressure.")
    assert res.faithfulness == 0.0


def test_identity_names_model_weights_and_settings(models):
    a, b = NLIJudge(models["yes"]).identity, NLIJudge(models["no"]).identity
    assert a["weights"] != b["weights"] and a["label"] == 2 and a["threshold"] == 0.5
    assert JudgeRunner(NLIJudge(models["yes"])).identity == a


def test_unloadable_model_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="model path does not exist: .*absent"):
        NLIJudge(str(tmp_path / "absent")).judge("q", CTX, "Oil.")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ConfigError, match="cannot load NLI model"):
        NLIJudge(str(tmp_path / "empty")).judge("q", CTX, "Oil.")
    with pytest.raises(ValueError):
        NLIJudge("x", threshold=0)
