"""Faithfulness judges: score a (query, contexts, response[, reference]) triple.

Variants are configured in ``conf/judge/<name>.yaml`` (``_target_`` is the registry);
``rag-lab judge --judge NAME`` instantiates that file. ``lexical`` is offline and deterministic;
``nli`` runs a local NLI cross-encoder; ``ragas`` asks an LLM behind an OpenAI-compatible
endpoint. Callers go through ``JudgeRunner`` (cache, retries, failures counted as missing)."""

from rag_lab.judge.base import Judge, JudgeResult
from rag_lab.judge.lexical import LexicalJudge
from rag_lab.judge.nli import NLIJudge
from rag_lab.judge.ragas import RagasJudge
from rag_lab.judge.runner import JudgeRunner

__all__ = ["Judge", "JudgeResult", "JudgeRunner", "LexicalJudge", "NLIJudge", "RagasJudge"]
