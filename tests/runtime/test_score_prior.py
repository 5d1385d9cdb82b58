"""The hybrid's adapter (score_prior, once gate_prior): plain global-topk at zero prior, exactly
c·L·H kept for any prior, and a layer's share growing with its prior."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from evolalloc.runtime.adaptive import Adapted, get_adapter
from evolalloc.runtime.compress import compress
from evolalloc.runtime.gates import GatesConfig, RetentionGates, save_gates
from evolalloc.runtime.model import geometry_of
from evolalloc.runtime.policy import model_identity
from evolalloc.runtime.prefill import prefill
from evolalloc.runtime.scorers import get_scorer
from searchspaces.score_prior import prior_of
from tests.runtime.conftest import random_prompt

LAYERS, HEADS, LENGTH = 3, 2, 120


@pytest.fixture(scope="module")
def gates(llama, tmp_path_factory):
    torch.manual_seed(3)
    net = RetentionGates(GatesConfig(num_layers=LAYERS, num_kv_heads=HEADS, head_dim=16, hidden=8))
    with torch.no_grad():  # a spread of retentions, so the global ranking is not flat
        net.shared.weight.normal_(0, 3.0)
    path = save_gates(tmp_path_factory.mktemp("gates") / "g.pt", net, model=model_identity("tiny", llama),
                      geometry=geometry_of(llama.config).to_dict(), training={})
    return get_scorer("gates", checkpoint=str(path))


@pytest.fixture(scope="module")
def record(llama, gates):
    return prefill(llama, random_prompt(LENGTH, seed=9), [gates])


def kept_positions(cache) -> list[list[set]]:
    """Per (layer, head): the cached key vectors as a set of byte strings (what attention sees)."""
    out = []
    for layer, keys in enumerate(cache.keys):
        n = cache.used[layer]
        valid = cache.valid[layer]
        heads = []
        for h in range(keys.shape[1]):
            rows = keys[0, h, :n] if valid is None else keys[0, h, :n][valid[0, h]]
            heads.append({row.numpy().tobytes() for row in rows})
        out.append(heads)
    return out


def test_at_zero_prior_the_hybrid_keeps_exactly_what_the_global_gates_keep(record, gates):
    uniform = np.full((LAYERS, HEADS), 40)
    plain, hybrid = Adapted(gates, get_adapter("global")), Adapted(gates, get_adapter("score_prior"))
    assert (prior_of(uniform) == 0.0).all()
    assert hybrid.adapt(record, uniform).tolist() == plain.adapt(record, uniform).tolist()
    assert kept_positions(compress(record, uniform, hybrid)) == kept_positions(compress(record, uniform, plain))


@pytest.mark.parametrize("weights", [
    [[40, 40], [40, 40], [40, 40]],
    [[30, 30], [90, 90], [30, 30]],
    [[20, 20], [20, 20], [20, 600]],      # one head wants (nearly) everything it can get
    [[20, 20], [230, 230], [110, 20]],    # per head, both ways; others at the always-kept floor
])
def test_exactly_c_times_layers_times_heads_entries_are_kept_in_the_cache_for_any_prior(record, gates, weights):
    budgets = np.asarray(weights, dtype=np.int64)
    total = int(budgets.sum())
    hybrid = Adapted(gates, get_adapter("score_prior"))
    counts = hybrid.adapt(record, budgets)
    assert counts.sum() == total and (counts >= gates.always_kept).all() and (counts <= LENGTH).all()
    cache = compress(record, budgets, hybrid)
    kept = sum(int(v[0].sum()) if v is not None else cache.used[layer] * HEADS for layer, v in enumerate(cache.valid))
    assert kept == total


@pytest.mark.parametrize("scale", [1e-6, 1e6])
def test_an_overwhelming_or_a_negligible_prior_still_keeps_exactly_the_total(gates, scale):
    """Scores squeezed to nothing (any prior dominates) or blown up (the prior is dust): the count holds."""
    generator = torch.Generator().manual_seed(4)
    scores = (torch.randn(LAYERS, HEADS, 300, generator=generator) * scale).sort(dim=-1, descending=True).values
    scores[..., : gates.always_kept] = float("inf")
    record = SimpleNamespace(uid="fake", length=300, scores={gates.key: scores})
    budgets = np.array([[20, 20], [20, 20], [20, 400]])
    counts = get_adapter("score_prior").adapt(record, budgets, gates)
    assert counts.sum() == budgets.sum() and (counts >= gates.always_kept).all()
    if scale < 1:  # the prior decides: the favoured head keeps every token it has, the rest goes by score
        assert counts[2, 1] == 300


def test_a_larger_prior_on_a_layer_at_a_fixed_total_keeps_more_of_it(record, gates):
    hybrid = Adapted(gates, get_adapter("score_prior"))
    kept = []
    for high in [40, 60, 80, 100, 120, 160]:
        low = (240 - high) // 2  # layers 0 and 2 give what layer 1 gets: total 240 every time
        budgets = np.array([[low, low], [high, high], [low, low]])
        assert budgets.sum() == 480
        counts = hybrid.adapt(record, budgets)
        assert counts.sum() == 480
        kept.append(int(counts[1].sum()))
    assert kept == sorted(kept) and kept[-1] > kept[0]


def test_the_hybrid_refuses_a_scorer_whose_scores_are_not_calibrated_across_layers():
    with pytest.raises(ValueError, match="gates"):
        Adapted(get_scorer("snapkv"), get_adapter("score_prior"))
