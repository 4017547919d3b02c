"""Generator running a local causal LM with transformers: a model folder, an HF id (from the local
HF cache when offline), or a GGUF file (dequantised by transformers; needs the ``gguf`` package).

The prompt is the same as the endpoint generator's (``PROMPTS`` + ``build_context``), rendered
with the tokenizer's chat template when it has one, else as ``system\\n\\nuser\\n``. Decoding is
greedy unless ``temperature > 0``. ``chat`` is also what ``python -m rag_lab.cli llm-server``
serves.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from rag_lab.errors import ConfigError
from rag_lab.generator._helper import PromptedGenerator, check_language

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ChatOutput:
    text: str
    finish_reason: str  # "stop" (end of sequence or a stop string) | "length" (max_new_tokens hit)
    prompt_tokens: int
    completion_tokens: int
    seconds: float


def resolve_model(model: str, gguf_file: str | None) -> tuple[str, str | None]:
    """``(folder or HF id, GGUF file name or None)``: a path to a ``.gguf`` file is split in two."""
    p = Path(model).expanduser()
    if gguf_file is None and p.suffix.lower() == ".gguf":
        if not p.is_file():
            raise ConfigError(f"GGUF file not found: {p}")
        return str(p.parent), p.name
    if gguf_file is not None and p.is_dir() and not (p / gguf_file).is_file():
        raise ConfigError(f"GGUF file {gguf_file!r} not found in {p}")
    return (str(p) if p.exists() else model), gguf_file


class TransformersGenerator(PromptedGenerator):
    """Args:
        model: model folder, HF id, or a ``.gguf`` file path.
        gguf_file: GGUF file name inside ``model`` (a folder or HF id); None = not GGUF unless
            ``model`` is a ``.gguf`` path.
        max_new_tokens: cap on the answer's length.
        temperature: 0 = greedy (default); > 0 samples.
        max_context_tokens: context budget in pre-tokens (``build_context``).
        language: ``"zh"`` | ``"en"`` forces the prompt language; None = the query's.
        device: ``"cpu"``, ``"cuda"``, ... ; num_threads: torch CPU threads (None = torch's
            default).

    The model loads on first use (thread-safe), so building a config costs nothing.
    """

    def __init__(
        self,
        model: str,
        gguf_file: str | None = None,
        max_new_tokens: int = 256,
        temperature: float = 0.0,
        max_context_tokens: int = 1500,
        language: str | None = None,
        device: str = "cpu",
        num_threads: int | None = None,
    ) -> None:
        if max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
        self.language = check_language(language)
        self.path, self.gguf_file = resolve_model(model, gguf_file)
        self.max_new_tokens, self.temperature = int(max_new_tokens), float(temperature)
        self.max_context_tokens = int(max_context_tokens)
        self.device, self.num_threads = device, num_threads
        self._lock = threading.Lock()
        self._loaded: tuple[Any, Any] | None = None

    @property
    def name(self) -> str:
        return f"{self.path}/{self.gguf_file}" if self.gguf_file else self.path

    def _load(self) -> tuple[Any, Any]:
        with self._lock:
            if self._loaded is None:
                import torch
                from transformers import AutoModelForCausalLM, AutoTokenizer

                if self.num_threads:
                    torch.set_num_threads(int(self.num_threads))
                t0 = time.perf_counter()
                kw = {"gguf_file": self.gguf_file} if self.gguf_file else {}
                try:
                    tok = AutoTokenizer.from_pretrained(self.path, **kw)
                    lm = AutoModelForCausalLM.from_pretrained(self.path, **kw)
                except (OSError, ValueError, ImportError) as exc:
                    raise ConfigError(
                        f"cannot load causal LM {self.name}: {type(exc).__name__}: "
                        f"{str(exc).splitlines()[0][:300]}"
                    ) from None
                lm = lm.to(self.device).eval()  # type: ignore[arg-type]
                if tok.pad_token_id is None:
                    tok.pad_token = tok.eos_token
                log.info(
                    "loaded %s in %.1f s (%s, chat template: %s)",
                    self.name,
                    time.perf_counter() - t0,
                    lm.dtype,
                    bool(getattr(tok, "chat_template", None)),
                )
                self._loaded = (tok, lm)
            return self._loaded

    @cached_property
    def weights(self) -> str:
        """Hash of what decides the output besides the messages: the GGUF file, or a folder's weight
        files plus its tokenizer / chat template / generation config; the id for a hub model."""
        from rag_lab.io.files import fingerprint_files
        from rag_lab.models.resolve import weights_hash

        root = Path(self.path)
        if self.gguf_file and (root / self.gguf_file).is_file():
            return fingerprint_files([root / self.gguf_file])
        names = (
            "tokenizer.json",
            "tokenizer_config.json",
            "chat_template.jinja",
            "generation_config.json",
        )
        extra = [root / n for n in names if (root / n).is_file()]
        return weights_hash(self.path) + (f"+{fingerprint_files(extra)}" if extra else "")

    def settings(self) -> dict[str, Any]:
        return {
            "kind": "transformers",
            "model": self.name,
            "weights": self.weights,
            "temperature": self.temperature,
            "max_new_tokens": self.max_new_tokens,
        }

    def complete(self, messages: list[dict[str, str]]) -> str:
        return self.chat(messages).text

    def chat(
        self,
        messages: Sequence[Mapping[str, str]],
        max_new_tokens: int | None = None,
        temperature: float | None = None,
        stop: Sequence[str] = (),
    ) -> ChatOutput:
        """One completion of a chat. ``stop`` strings cut the text after generation."""
        import torch

        tok, lm = self._load()
        msgs = [{"role": m["role"], "content": m["content"]} for m in messages]
        if getattr(tok, "chat_template", None):
            enc = tok.apply_chat_template(
                msgs, add_generation_prompt=True, return_tensors="pt", return_dict=True
            )
        else:
            enc = tok("\n\n".join(m["content"] for m in msgs) + "\n", return_tensors="pt")
        enc = {k: v.to(self.device) for k, v in enc.items()}
        n_prompt = int(enc["input_ids"].shape[1])
        limit = int(max_new_tokens or self.max_new_tokens)
        temp = self.temperature if temperature is None else float(temperature)
        sampling: dict[str, Any] = (
            {"do_sample": True, "temperature": temp}
            if temp > 0
            else {"do_sample": False, "temperature": None, "top_p": None, "top_k": None}
        )
        t0 = time.perf_counter()
        with self._lock, torch.inference_mode():
            out = lm.generate(
                **enc, max_new_tokens=limit, pad_token_id=tok.pad_token_id, **sampling
            )
        new = out[0, n_prompt:]
        text = tok.decode(new, skip_special_tokens=True)
        eos_id = tok.eos_token_id
        eos = {eos_id} if isinstance(eos_id, int) else set(eos_id or [])
        finish = "length" if len(new) >= limit and int(new[-1]) not in eos else "stop"
        cut = [i for i in (text.find(s) for s in stop if s) if i >= 0]
        if cut:
            text, finish = text[: min(cut)], "stop"
        return ChatOutput(text, finish, n_prompt, int(len(new)), time.perf_counter() - t0)
