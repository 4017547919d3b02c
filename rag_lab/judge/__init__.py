"""Faithfulness judges: score a (query, contexts, response[, reference]) triple.

Variants are configured in ``conf/judge/<name>.yaml`` (``_target_`` is the registry);
``rag-lab judge --judge NAME`` instantiates that file. Callers go through ``JudgeRunner``
(cache, retries, failures counted as missing)."""

from rag_lab.judge.base import Judge, JudgeResult
from rag_lab.judge.lexical import LexicalJudge
from rag_lab.judge.runner import JudgeRunner

__all__ = ["Judge", "JudgeResult", "JudgeRunner", "LexicalJudge"]
