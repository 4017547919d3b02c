"""A sentence-transformers base model with a LoRA adapter (``peft``) on top.

``rag-lab train embedder`` writes the adapter with a ``rag_lab_adapter.json`` naming the base
model by a resolvable id (not the trainer's local path) and the prompts it was trained with; those
are the defaults here. The cache identity hashes the base weights *and* the adapter files, so a
retrained adapter never reuses stale embeddings.
"""

from __future__ import annotations

import json
import logging
from functools import cached_property
from pathlib import Path
from typing import Any

from rag_lab.embedder.sentence_transformer import SentenceTransformerEmbedder
from rag_lab.errors import ConfigError
from rag_lab.models.resolve import weights_hash

log = logging.getLogger(__name__)
ADAPTER_META = "rag_lab_adapter.json"
_UNSET: Any = "__from_adapter__"


def read_adapter_meta(adapter: Path) -> dict[str, Any]:
    if not (adapter / "adapter_config.json").is_file():
        raise ConfigError(
            f"embedder.adapter={adapter}: not a peft adapter folder (no adapter_config.json)"
        )
    meta_file = adapter / ADAPTER_META
    meta = json.loads(meta_file.read_text()) if meta_file.is_file() else {}
    if "base_model" not in meta:  # an adapter trained elsewhere: peft records its base
        meta["base_model"] = json.loads((adapter / "adapter_config.json").read_text()).get(
            "base_model_name_or_path"
        )
    return meta


class LoraEmbedder(SentenceTransformerEmbedder):
    """Args:
    adapter: folder of a peft LoRA adapter (``<train output>/adapter``).
    base_model: the model the adapter was trained on; ``None`` = as recorded in the adapter.
    merge: fold the adapter into the base weights after loading (faster encoding; same outputs).
    query_prompt / document_prompt / max_seq_length / normalize: ``"__from_adapter__"`` (the
        config default) = what the adapter was trained with.
    Other arguments as ``SentenceTransformerEmbedder``.
    """

    def __init__(
        self,
        adapter: str,
        base_model: str | None = None,
        merge: bool = True,
        query_prompt: str | None = _UNSET,
        document_prompt: str | None = _UNSET,
        batch_size: int = 64,
        normalize: bool | None = None,
        device: str | None = "cpu",
        max_seq_length: int | None = _UNSET,
    ) -> None:
        self.adapter = Path(adapter).expanduser()
        if not self.adapter.is_dir():
            raise ConfigError(f"embedder.adapter: folder not found: {self.adapter}")
        meta = read_adapter_meta(self.adapter)
        base = base_model or meta.get("base_model")
        if not base:
            raise ConfigError(
                f"embedder.base_model: the adapter {self.adapter} does not record its "
                "base model; set it"
            )

        def pick(value: Any, key: str) -> Any:
            return meta.get(key) if value == _UNSET else value

        super().__init__(
            str(base),
            query_prompt=pick(query_prompt, "query_prompt"),
            document_prompt=pick(document_prompt, "document_prompt"),
            batch_size=batch_size,
            normalize=meta.get("normalize", True) if normalize is None else normalize,
            device=device,
            max_seq_length=pick(max_seq_length, "max_seq_length"),
        )
        self.merge = merge

    @cached_property
    def model(self):
        from peft import PeftModel

        st = self.load()  # the base, a copy of its own: the adapter is put into it
        st[0].model = PeftModel.from_pretrained(st[0].model, str(self.adapter))
        if self.merge:
            st[0].model = st[0].model.merge_and_unload()
        st.eval()
        log.info(
            "loaded LoRA adapter %s on %s (merged: %s)", self.adapter, self.model_name, self.merge
        )
        return st

    @cached_property
    def identity(self) -> dict:
        return {
            **super().identity,
            "kind": "sentence_transformers+lora",
            "adapter": weights_hash(str(self.adapter)),
        }
