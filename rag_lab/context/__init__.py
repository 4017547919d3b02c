"""Context stages: what happens to a query's top chunks between retrieval and the generator,
composed as the ``context`` list (default empty): ``order`` (safety warnings first),
``dedupe`` (near-duplicates across versions, newer kept), ``budget`` (the token budget),
``distill`` (extractive: the sentences carrying the query's terms), ``llm_distill`` (the
generator's model condenses the chunks into cited facts) and ``age`` (a warning on chunks whose
source is older than its type's age limit)."""

from rag_lab.context.age import AgeWarning
from rag_lab.context.base import ContextStage
from rag_lab.context.budget import TokenBudget
from rag_lab.context.dedupe import NearDuplicateFilter
from rag_lab.context.distill import ExtractiveDistiller
from rag_lab.context.llm_distill import LLMDistiller
from rag_lab.context.order import SectionOrder

__all__ = [
    "AgeWarning",
    "ContextStage",
    "SectionOrder",
    "NearDuplicateFilter",
    "TokenBudget",
    "ExtractiveDistiller",
    "LLMDistiller",
]
