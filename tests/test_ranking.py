"""rag_lab.ranking: the one tie rule and the one min-max normalisation, and the stages that must
follow them (fusion, training's mining)."""

from __future__ import annotations

import numpy as np
import pytest

from rag_lab.ranking import minmax, ranked, top_k


def test_ranked_is_score_descending_ties_by_ascending_id():
    scores = {"c": 0.5, "a": 0.5, "b": 0.9, "d": 0.1, "aa": 0.5}
    assert ranked(scores) == ["b", "a", "aa", "c", "d"]
    # insertion order does not matter, only score then id
    assert ranked(dict(reversed(list(scores.items())))) == ranked(scores)
    assert ranked({}) == []


def test_top_k_keeps_the_ranked_head():
    assert list(top_k({"z": 1.0, "y": 1.0, "x": 0.0}, 2)) == ["y", "z"]
    assert top_k({"z": 1.0, "y": 1.0}, 5) == {"y": 1.0, "z": 1.0}


def test_minmax_maps_to_unit_interval():
    out = minmax([2.0, 4.0, 3.0])
    assert out.tolist() == [0.0, 1.0, 0.5]
    assert out.dtype == np.float64
    assert minmax(np.array([])).size == 0


@pytest.mark.parametrize("values", [[0.3], [7.0, 7.0, 7.0], [-2.0, -2.0]])
def test_minmax_of_constant_scores_is_ones(values):
    """No spread: every candidate is the best one (see the module docstring)."""
    assert minmax(values).tolist() == [1.0] * len(values)


def test_metrics_and_fusion_use_the_same_rule():
    import rag_lab.fusion.base as fusion_base
    import rag_lab.metrics as metrics
    import rag_lab.metrics.relevance as relevance
    from rag_lab.fusion.weighted import normalise

    assert metrics.ranked is ranked and relevance.ranked is ranked
    assert fusion_base.top_k is top_k
    assert normalise({"a": 5.0, "b": 5.0}, "minmax") == {"a": 1.0, "b": 1.0}


def test_mined_negatives_follow_the_tie_rule(toy_path, toy_chunks):
    """Hard negatives come from the mined run in ``ranked`` order: with every mined score tied,
    ``sampling=top`` takes the smallest ids (not the run's insertion order)."""
    from rag_lab.dataset import BeirDataset
    from rag_lab.train.data import build_examples

    data = BeirDataset(path=str(toy_path), split="test").load()
    chunks = {c.chunk_id: c for c in toy_chunks}
    qid = next(q for q, g in data.qrels.items() if any(v > 0 for v in g.values()))
    relevant = {d for d, g in data.qrels[qid].items() if g > 0}
    others = [c for c in chunks if chunks[c].doc_id not in relevant]
    mined = {qid: {c: 1.0 for c in reversed(others)}}  # all tied, inserted in reverse id order
    (example, *_) = build_examples(
        data, [qid], chunks, mined, num_negatives=2, depth=10, sampling="top"
    )
    assert list(example.negative_ids) == sorted(others)[:2]


def test_ranked_equals_the_tuple_key_order_on_random_ties():
    """``ranked`` sorts twice in C (by id, then stably by score); it must give exactly the order
    of the one-key definition, ties and signed zeros included."""
    import random

    rng = random.Random(7)
    for _ in range(500):
        scores = {
            f"d{rng.randint(0, 40)}#{rng.randint(0, 3)}": rng.choice(
                [0.0, -0.0, 1.0, 0.5, rng.random(), -rng.random()]
            )
            for _ in range(rng.randint(0, 40))
        }
        assert ranked(scores) == [
            i for i, _ in sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))
        ]
