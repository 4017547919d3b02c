"""Query transforms: run in order on every query before retrieval."""

from rag_lab.query_transforms.abbreviations import AbbreviationExpansion
from rag_lab.query_transforms.base import QueryTransform, QueryVariants
from rag_lab.query_transforms.history import RuleHistoryRewrite
from rag_lab.query_transforms.hyde import HydeTransform
from rag_lab.query_transforms.llm_history import LLMHistoryRewrite
from rag_lab.query_transforms.multi_query import MultiQueryTransform
from rag_lab.query_transforms.normalise import NormaliseQueries
from rag_lab.query_transforms.synonyms import SynonymExpansion

__all__ = [
    "AbbreviationExpansion",
    "HydeTransform",
    "LLMHistoryRewrite",
    "MultiQueryTransform",
    "NormaliseQueries",
    "QueryTransform",
    "QueryVariants",
    "RuleHistoryRewrite",
    "SynonymExpansion",
]
