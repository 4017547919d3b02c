"""Answer generators. The ``generator`` config group defaults to none (retrieval-only runs).

``extractive`` is the model-free baseline; ``context`` renders retrieved chunks as the structured
context a model reads; ``prompts`` holds the templates and refusal strings all generators share.
"""

from rag_lab.generator.base import Generator
from rag_lab.generator.context import build_context
from rag_lab.generator.extractive import ExtractiveGenerator
from rag_lab.generator.prompts import PROMPTS, REFUSALS, PromptTemplate, detect_language

__all__ = ["Generator", "ExtractiveGenerator", "build_context", "PROMPTS", "REFUSALS", "PromptTemplate",
           "detect_language"]
