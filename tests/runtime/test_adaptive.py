"""Input-adaptive budgets (AdaKV, CAKE, global top-k): exact totals, floors, and what they reduce to."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from evolalloc.runtime.adaptive import Adapted, get_adapter, top_with_floor
from evolalloc.runtime.adaptive.cake import share_out
from evolalloc.runtime.compress import compress
from evolalloc.runtime.prefill import prefill
from evolalloc.runtime.scorers import get_scorer
from tests.runtime.conftest import random_prompt


def fake_record(scores: torch.Tensor, dispersion=None, key: str = "snapkv(window=4)"):
    """A record holding only what adapters read: ranked scores ``[L, H, T]`` and dispersion."""
    return SimpleNamespace(uid="fake", length=scores.shape[-1], scores={key: scores}, dispersion=dispersion)


def ranked(scores: torch.Tensor) -> torch.Tensor:
    return scores.sort(dim=-1, descending=True).values


@pytest.fixture(scope="module")
def snapkv():
    return get_scorer("snapkv", window=4)


@pytest.fixture(scope="module")
def record(llama, snapkv):
    return prefill(llama, random_prompt(96, seed=5), [snapkv])


def test_adakv_keeps_exactly_each_layer_budget_and_respects_the_floor(snapkv):
    generator = torch.Generator().manual_seed(0)
    scores = ranked(torch.rand(3, 4, 200, generator=generator) * torch.tensor([1.0, 10.0, 0.1, 3.0])[None, :, None])
    budgets = np.array([[40] * 4, [16] * 4, [100] * 4])
    out = get_adapter("adakv", alpha=0.2).adapt(fake_record(scores), budgets, snapkv)
    assert out.sum(axis=1).tolist() == budgets.sum(axis=1).tolist()
    floors = np.maximum(snapkv.always_kept, (0.2 * budgets.sum(axis=1) / 4).astype(int))
    assert (out >= floors[:, None]).all()
    assert not (out == budgets).all()  # the heads' scores differ, so the budget moved


def test_adakv_gives_the_floor_to_a_head_whose_scores_all_lose(snapkv):
    scores = ranked(torch.cat([torch.full((1, 1, 100), 5.0), torch.zeros(1, 1, 100)], dim=1))
    out = get_adapter("adakv", alpha=0.25).adapt(fake_record(scores), np.array([[40, 40]]), snapkv)
    assert out.tolist() == [[70, 10]]  # floor: 0.25 x the per-head average of 40


def test_adakv_equals_uniform_when_every_head_has_the_same_scores(snapkv):
    generator = torch.Generator().manual_seed(1)
    one = ranked(torch.rand(3, 1, 150, generator=generator))
    one[..., 5:9] = one[..., 5:6]  # ties inside a head too
    scores = one.expand(3, 4, 150).clone()
    budgets = np.array([[33] * 4, [7] * 4, [64] * 4])
    out = get_adapter("adakv", alpha=0.0).adapt(fake_record(scores), budgets, snapkv)
    assert (out == budgets).all()


def test_adakv_on_a_real_record_keeps_the_layer_budget_in_the_cache(llama, record, snapkv):
    adapted = Adapted(snapkv, get_adapter("adakv"))
    cache = compress(record, np.full(3, 24), adapted)
    for layer in range(3):
        valid = cache.valid[layer]
        kept = valid[0].sum().item() if valid is not None else cache.used[layer] * 2
        assert kept == 24 * 2


def test_cake_budgets_sum_to_c_times_layers_and_hold_the_always_kept_tokens(snapkv, record):
    budgets = np.full((3, 2), 16)
    out = get_adapter("cake").adapt(record, budgets, snapkv)
    assert out[:, 0].sum() == 16 * 3 and out.sum() == 16 * 3 * 2
    assert (out >= snapkv.always_kept).all()
    assert (out[:, 0] == out[:, 1]).all()  # a layer rule: its heads alike


def test_cake_follows_the_preference_and_a_skewed_preference_still_sums_exactly(snapkv):
    dispersion = torch.tensor([[1.0, 1.0], [1.0, 9.0], [0.0, 0.0], [2.0, 1.0]])
    record = fake_record(torch.zeros(4, 2, 300), dispersion=dispersion)
    out = get_adapter("cake").adapt(record, np.full((4, 2), 50), snapkv)
    per_layer = out[:, 0]
    assert per_layer.sum() == 200 and (per_layer >= snapkv.always_kept).all()
    assert per_layer[2] == snapkv.always_kept  # preference 0: the floor only
    assert per_layer[1] == per_layer.max()


def test_share_out_caps_a_layer_at_the_prompt_and_gives_the_surplus_to_the_others():
    out = share_out(np.array([100.0, 1.0, 1.0]), total=300, floor=5, cap=120)
    assert out.tolist()[0] == 120 and out.sum() == 300 and (out <= 120).all()


def test_cake_refuses_a_record_without_window_attention(snapkv):
    with pytest.raises(ValueError, match="observation window"):
        get_adapter("cake").adapt(fake_record(torch.zeros(2, 2, 50)), np.full((2, 2), 10), snapkv)


def test_global_topk_keeps_exactly_the_total_over_all_layers_and_heads(snapkv):
    generator = torch.Generator().manual_seed(2)
    scores = ranked(torch.randn(3, 2, 120, generator=generator) + torch.arange(3.0)[:, None, None])
    budgets = np.full((3, 2), 32)
    out = get_adapter("global").adapt(fake_record(scores), budgets, snapkv)
    assert out.sum() == 32 * 3 * 2
    assert (out >= snapkv.always_kept).all()
    assert out[2].sum() > out[0].sum()  # the layer with higher scores takes more


def test_top_with_floor_never_exceeds_a_group_and_splits_ties_evenly():
    counts = top_with_floor(torch.zeros(3, 10), floor=2, total=24)
    assert counts.tolist() == [8, 8, 8]
    assert top_with_floor(torch.zeros(2, 10), floor=2, total=500).tolist() == [10, 10]


def test_an_adapted_scorer_survives_pickling_for_ray_workers(snapkv):
    import pickle

    adapted = pickle.loads(pickle.dumps(Adapted(snapkv, get_adapter("adakv", alpha=0.1))))
    assert adapted.key == snapkv.key and adapted.adapter.alpha == 0.1
    assert adapted.selection_key == "snapkv(window=4)+adakv(alpha=0.1)"  # Ray workers cache evaluators by it
    scores = ranked(torch.rand(1, 2, 50, generator=torch.Generator().manual_seed(4)))
    assert adapted.adapt(fake_record(scores), np.array([[10, 10]])).sum() == 20


def test_cake_keeps_the_whole_prompt_when_the_budget_exceeds_it(snapkv):
    record = fake_record(torch.zeros(3, 2, 50), dispersion=torch.rand(3, 2))
    assert (get_adapter("cake").adapt(record, np.full((3, 2), 64), snapkv) == 50).all()
