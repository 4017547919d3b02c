"""Answer generators. The ``generator`` config group defaults to none (retrieval-only runs).

``extractive`` is the model-free baseline; ``openai`` calls any OpenAI-compatible endpoint;
``transformers`` runs a local causal LM (folder, HF id or GGUF file); ``structured`` asks any of
them for JSON matching a schema (validated, retried once, then ``InvalidOutputError``).
``context`` renders retrieved chunks as the structured context a model reads; ``prompts`` holds
the templates all generators share (the refusal strings are ``rag_lab.text.refusals``).
``foreign_pipeline`` hands on the answers of a foreign pipeline evaluated end to end
(``retrievers=[foreign_pipeline]``).
"""

from rag_lab.generator.base import Cacheable, Generator
from rag_lab.generator.context import build_context
from rag_lab.generator.extractive import ExtractiveGenerator
from rag_lab.generator.foreign_pipeline import ForeignPipelineGenerator
from rag_lab.generator.openai import OpenAIGenerator
from rag_lab.generator.prompts import PROMPTS, PromptTemplate
from rag_lab.generator.structured import InvalidOutputError, StructuredGenerator
from rag_lab.generator.transformers import TransformersGenerator

__all__ = [
    "Generator",
    "Cacheable",
    "ExtractiveGenerator",
    "OpenAIGenerator",
    "TransformersGenerator",
    "ForeignPipelineGenerator",
    "StructuredGenerator",
    "InvalidOutputError",
    "build_context",
    "PROMPTS",
    "PromptTemplate",
]
