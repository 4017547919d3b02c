"""Embedders: ``sentence_transformer`` (any HF id / local path; MiniLM and multilingual e5 offline),
``lora`` (a base model plus a peft LoRA adapter), ``openai`` (any OpenAI-compatible embeddings
endpoint) and ``hashing`` (no model)."""

from rag_lab.embedder.base import Embedder
from rag_lab.embedder.hashing import HashingEmbedder
from rag_lab.embedder.lora import LoraEmbedder
from rag_lab.embedder.openai import OpenAIEmbedder
from rag_lab.embedder.sentence_transformer import SentenceTransformerEmbedder
from rag_lab.models.resolve import resolve_model

__all__ = [
    "Embedder",
    "HashingEmbedder",
    "LoraEmbedder",
    "OpenAIEmbedder",
    "SentenceTransformerEmbedder",
    "resolve_model",
]
