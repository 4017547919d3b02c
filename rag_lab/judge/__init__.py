"""Faithfulness judges: score a (query, contexts, response[, reference]) triple.

Variants are configured in ``conf/judge/<name>.yaml`` (``_target_`` is the registry);
``rag-lab judge --judge NAME`` instantiates that file."""

from rag_lab.judge.base import Judge, JudgeResult
from rag_lab.judge.lexical import LexicalJudge

__all__ = ["Judge", "JudgeResult", "LexicalJudge"]
