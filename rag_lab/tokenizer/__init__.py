"""Term analysis for lexical retrieval: ``english`` (stem + stopwords), ``jieba`` (Chinese and
mixed text), ``whitespace`` (baseline), ``auto`` (jieba or english by the corpus' script)."""

from rag_lab.tokenizer.auto import AutoTokenizer
from rag_lab.tokenizer.base import Tokenizer
from rag_lab.tokenizer.english import EnglishTokenizer
from rag_lab.tokenizer.jieba import JiebaTokenizer
from rag_lab.tokenizer.whitespace import WhitespaceTokenizer

__all__ = [
    "Tokenizer",
    "AutoTokenizer",
    "EnglishTokenizer",
    "JiebaTokenizer",
    "WhitespaceTokenizer",
]
