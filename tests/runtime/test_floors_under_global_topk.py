"""Floors + global (``floors_under_global_topk``, once ``gate_floors``): exactly sum(b) kept, each
head at least its floor, and the two ends of ``floor_fraction``: 1.0 is the static budgets, 0.0 is
the ``global`` adapter."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from evolalloc.runtime.adaptive import Adapted, get_adapter, top_with_floor
from evolalloc.runtime.adaptive.floors_under_global_topk import floors_of
from evolalloc.runtime.compress import compress
from evolalloc.runtime.scorers import get_scorer
from tests.runtime.test_score_prior import HEADS, LAYERS, LENGTH, gates, record  # noqa: F401 (fixtures: gates with a spread of scores, their prefill)

BUDGETS = [
    [[40, 40], [40, 40], [40, 40]],
    [[30, 30], [90, 90], [30, 30]],
    [[20, 20], [20, 20], [20, 100]],
    [[21, 57], [33, 20], [99, 28]],
]


def kept_in_cache(cache) -> int:
    return sum(int(v[0].sum()) if v is not None else cache.used[layer] * HEADS for layer, v in enumerate(cache.valid))


@pytest.mark.parametrize("fraction", [0.0, 0.25, 0.5, 0.75, 1.0])
@pytest.mark.parametrize("weights", BUDGETS)
def test_exactly_the_total_is_kept_and_every_head_keeps_its_floor(record, gates, weights, fraction):
    budgets = np.asarray(weights, dtype=np.int64)
    floors = np.maximum(gates.min_budget, np.floor(fraction * budgets).astype(np.int64))
    adapted = Adapted(gates, get_adapter("floors_under_global_topk", floor_fraction=fraction))
    counts = adapted.adapt(record, budgets)
    assert counts.sum() == budgets.sum() and (counts >= floors).all() and (counts <= LENGTH).all()
    assert kept_in_cache(compress(record, budgets, adapted)) == budgets.sum()


@pytest.mark.parametrize("weights", BUDGETS)
def test_floor_fraction_one_is_the_static_budgets_and_zero_is_the_global_adapter(record, gates, weights):
    budgets = np.asarray(weights, dtype=np.int64)
    static = get_adapter("floors_under_global_topk", floor_fraction=1.0).adapt(record, budgets, gates)
    assert static.tolist() == budgets.tolist()
    blended = get_adapter("floors_under_global_topk", floor_fraction=0.0).adapt(record, budgets, gates)
    assert blended.tolist() == get_adapter("global").adapt(record, budgets, gates).tolist()


def test_the_blend_moves_budget_that_static_budgets_keep_in_place(record, gates):
    budgets = np.full((LAYERS, HEADS), 40)
    half = get_adapter("floors_under_global_topk", floor_fraction=0.5).adapt(record, budgets, gates)
    plain = get_adapter("global").adapt(record, budgets, gates)
    assert not (half == budgets).all()  # the global half moved some budget...
    assert (half >= 20).all() and np.abs(half - budgets).sum() <= np.abs(plain - budgets).sum()  # ...less than global


def test_the_whole_prompt_is_kept_when_the_total_exceeds_it(gates):
    scores = torch.randn(LAYERS, HEADS, 30).sort(dim=-1, descending=True).values
    record = SimpleNamespace(uid="fake", length=30, scores={gates.key: scores})
    blend = get_adapter("floors_under_global_topk", floor_fraction=0.5)
    counts = blend.adapt(record, np.full((LAYERS, HEADS), 40), gates)
    assert (counts == 30).all()


def test_top_with_floor_takes_a_floor_per_group_and_a_scalar_as_before():
    generator = torch.Generator().manual_seed(7)
    scores = torch.randn(4, 50, generator=generator).sort(dim=-1, descending=True).values
    assert top_with_floor(scores, 5, 60).tolist() == top_with_floor(scores, np.full(4, 5), 60).tolist()
    floors = np.array([0, 10, 3, 45])
    counts = top_with_floor(scores, floors, 80)
    assert counts.sum() == 80 and (counts >= floors).all()
    # the entries beyond the floors are the best remaining ones: no kept entry scores below a dropped one
    kept_min = min(scores[g, floors[g]:counts[g]].min().item() for g in range(4) if counts[g] > floors[g])
    dropped_max = max(scores[g, counts[g]:].max().item() for g in range(4) if counts[g] < 50)
    assert kept_min >= dropped_max
    with pytest.raises(ValueError, match="floors"):
        top_with_floor(scores, floors, 50)


def test_floors_of_is_exact_at_round_products():
    assert floors_of(np.array([[10, 7], [100, 3]]), 0.7, 2).tolist() == [[7, 4], [70, 2]]
    assert floors_of(np.array([[29, 100]]), 0.29, 0).tolist() == [[8, 29]]


@pytest.mark.parametrize("bad", [-0.1, 1.5, float("nan"), "half"])
def test_a_floor_fraction_outside_zero_to_one_is_refused(bad):
    with pytest.raises(ValueError, match="floor_fraction"):
        get_adapter("floors_under_global_topk", floor_fraction=bad)


def test_the_blend_refuses_a_scorer_whose_scores_are_not_calibrated_across_layers():
    with pytest.raises(ValueError, match="gates"):
        Adapted(get_scorer("snapkv"), get_adapter("floors_under_global_topk"))
