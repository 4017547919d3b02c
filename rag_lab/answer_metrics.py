"""Moved to :mod:`rag_lab.metrics.answers` (answer metrics live with the other metrics). This path
stays importable: it is the same module object."""

import sys

from rag_lab.metrics import answers as _answers
from rag_lab.metrics.answers import (  # noqa: F401  (the names type checkers see at the old path)
    aggregate_answers,
    answer_contained,
    answer_tokens,
    context_utilisation,
    exact_match,
    is_refusal,
    is_refusal_sentence,
    score_response,
    token_f1,
)

sys.modules[__name__] = _answers
