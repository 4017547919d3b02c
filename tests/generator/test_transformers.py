"""TransformersGenerator with a tiny, randomly initialised GPT-2 built in a temporary folder: the
prompt (chat template when the tokenizer has one, plain text otherwise), greedy determinism, the
max_new_tokens cap, stop strings, GGUF path handling and the cache identity. The real GGUF model
(SmolLM2) runs in the slow end-to-end test."""

from __future__ import annotations

import pytest

from rag_lab.errors import ConfigError
from rag_lab.generator import Generator, TransformersGenerator
from rag_lab.generator.transformers import resolve_model
from rag_lab.text.refusals import REFUSALS
from rag_lab.types import Chunk

torch = pytest.importorskip("torch")

WORDS = (
    "fault e102 means low oil pressure context question answer system user assistant the a"
).split()
TEMPLATE = (
    "{% for m in messages %}<{{ m['role'] }}> {{ m['content'] }} </s> {% endfor %}"
    "{% if add_generation_prompt %}<assistant>{% endif %}"
)
EN = Chunk("hx#0", "hx", "Fault E102 means low oil pressure.", 0, 34)


def build(folder, chat_template: str | None):
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast

    specials = ["<unk>", "</s>", "<system>", "<user>", "<assistant>"]
    vocab = {w: i for i, w in enumerate([*specials, *WORDS])}
    raw = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    raw.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok = PreTrainedTokenizerFast(tokenizer_object=raw, unk_token="<unk>", eos_token="</s>")
    if chat_template:
        tok.chat_template = chat_template
    torch.manual_seed(0)
    model = GPT2LMHeadModel(
        GPT2Config(
            vocab_size=len(vocab),
            n_positions=256,
            n_embd=16,
            n_layer=1,
            n_head=2,
            eos_token_id=1,
            bos_token_id=1,
        )
    )
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    return str(folder)


@pytest.fixture(scope="module")
def model_dirs(tmp_path_factory):
    root = tmp_path_factory.mktemp("lm")
    (root / "chat").mkdir(), (root / "plain").mkdir()
    return {"chat": build(root / "chat", TEMPLATE), "plain": build(root / "plain", None)}


def test_generates_greedily_within_the_cap(model_dirs):
    g = TransformersGenerator(model_dirs["chat"], max_new_tokens=5)
    assert isinstance(g, Generator)
    out = g.chat(g.messages("What does E102 mean?", [EN]))
    assert out.completion_tokens <= 5 and out.finish_reason in ("stop", "length")
    answer = g.generate("What does E102 mean?", [EN])
    assert answer == g.generate("What does E102 mean?", [EN]) == out.text.strip()
    assert g.generate("What does E102 mean?", []) == REFUSALS["en"]


def test_chat_template_when_present_plain_text_otherwise(model_dirs):
    msgs = [
        {"role": "system", "content": "the system"},
        {"role": "user", "content": "the question"},
    ]
    chat = TransformersGenerator(model_dirs["chat"], max_new_tokens=1).chat(msgs)
    plain = TransformersGenerator(model_dirs["plain"], max_new_tokens=1).chat(msgs)
    # template: <system> the system </s> <user> the question </s> <assistant>  (9 tokens);
    # plain: 4 words
    assert (chat.prompt_tokens, plain.prompt_tokens) == (9, 4)


def test_stop_strings_cut_the_text(model_dirs):
    g = TransformersGenerator(model_dirs["plain"], max_new_tokens=8)
    full = g.chat([{"role": "user", "content": "fault"}]).text
    words = full.split()
    if len(words) < 2:
        pytest.skip("the random model stopped at once")
    cut = g.chat([{"role": "user", "content": "fault"}], stop=[words[1]])
    assert cut.text == full[: full.find(words[1])] and cut.finish_reason == "stop"


def test_request_identifies_model_files_and_prompt(model_dirs):
    a = TransformersGenerator(model_dirs["chat"]).request("q?", [EN])
    b = TransformersGenerator(model_dirs["plain"]).request("q?", [EN])
    assert a is not None and b is not None
    assert a["weights"] != b["weights"]  # same weights (same seed), another chat template
    assert a["messages"][1]["content"].endswith("Question: q?\nAnswer:") and a["temperature"] == 0.0


def test_gguf_paths(tmp_path):
    f = tmp_path / "m.Q4.gguf"
    f.write_bytes(b"GGUF")
    assert resolve_model(str(f), None) == (str(tmp_path), "m.Q4.gguf")
    assert resolve_model(str(tmp_path), "m.Q4.gguf") == (str(tmp_path), "m.Q4.gguf")
    assert resolve_model("org/model", "x.gguf") == ("org/model", "x.gguf")
    with pytest.raises(ConfigError, match="GGUF file not found"):
        resolve_model(str(tmp_path / "absent.gguf"), None)
    with pytest.raises(ConfigError, match="not found in"):
        resolve_model(str(tmp_path), "other.gguf")


def test_unloadable_model_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="cannot load causal LM"):
        TransformersGenerator(str(tmp_path)).generate("q?", [EN])


def test_conf_option_instantiates(model_dirs, tmp_path):
    from rag_lab.pipeline.build import instantiate
    from tests.compose import TOY, compose_evaluate

    cfg = compose_evaluate(
        [
            "generator=transformers",
            f"generator.model={model_dirs['chat']}",
            "generator.max_new_tokens=3",
            "dataset=beir",
            f"dataset.path={TOY}",
        ],
        tmp_path,
    )
    g = instantiate(cfg.generator, "generator")
    assert isinstance(g, TransformersGenerator) and g.max_new_tokens == 3 and g.gguf_file is None
