"""Global retention gates: one shared readout, calibrated scores, and a global top-k of exactly c·L·H."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from evolalloc.runtime.adaptive import Adapted, get_adapter
from evolalloc.runtime.compress import compress
from evolalloc.runtime.gates import GatesConfig, RetentionGates, horizon_score, load_gates, save_gates
from evolalloc.runtime.model import geometry_of
from evolalloc.runtime.policy import model_identity
from evolalloc.runtime.prefill import prefill
from evolalloc.runtime.scorers import get_scorer
from tests.runtime.conftest import random_prompt


@pytest.fixture(scope="module")
def checkpoint(llama, tmp_path_factory):
    torch.manual_seed(3)
    gates = RetentionGates(GatesConfig(num_layers=3, num_kv_heads=2, head_dim=16, hidden=8))
    with torch.no_grad():  # a spread of retentions, so the global ranking is not flat
        gates.shared.weight.normal_(0, 3.0)
    return save_gates(tmp_path_factory.mktemp("gates") / "g.pt", gates, model=model_identity("tiny", llama),
                      geometry=geometry_of(llama.config).to_dict(), training={})


def test_the_shared_projection_is_one_parameter_set_that_moves_every_heads_scores():
    gates = RetentionGates(GatesConfig(num_layers=3, num_kv_heads=2, head_dim=4, hidden=8))
    shared = [name for name, _ in gates.named_parameters() if name.startswith("shared.")]
    assert shared == ["shared.weight", "shared.bias"] and gates.shared.weight.shape == (1, 8)
    features = torch.randn(6, 10, 8)
    before = gates.log_retention(features)
    with torch.no_grad():
        gates.shared.weight.add_(0.5)
    after = gates.log_retention(features)
    assert (after != before).any(dim=-1).all()  # every one of the 6 heads moved


def test_the_global_topk_keeps_exactly_c_times_layers_times_heads_entries(llama, checkpoint):
    scorer = get_scorer("gates", checkpoint=str(checkpoint))
    record = prefill(llama, random_prompt(120, seed=9), [scorer])
    adapted = Adapted(scorer, get_adapter("global"))
    budgets = adapted.adapt(record, np.full((3, 2), 40))
    assert budgets.sum() == 40 * 3 * 2 and (budgets >= scorer.always_kept).all()
    assert len(set(budgets.ravel().tolist())) > 1  # it really moved budget between heads
    cache = compress(record, np.full(3, 40), adapted)
    kept = sum(int(v[0].sum()) if v is not None else cache.used[layer] * 2 for layer, v in enumerate(cache.valid))
    assert kept == 40 * 3 * 2


def test_horizon_score_is_the_log_of_the_summed_future_retention():
    log_beta = torch.log(torch.tensor([[0.9, 0.5]]))
    age = torch.tensor([3, 1])
    expected = torch.log(torch.tensor([sum(0.9 ** (3 + k) for k in range(1, 5)),
                                       sum(0.5 ** (1 + k) for k in range(1, 5))]))
    assert torch.allclose(horizon_score(log_beta, age, 4)[0], expected, atol=1e-5)


def test_a_checkpoint_for_another_geometry_is_refused_naming_both(checkpoint):
    with pytest.raises(ValueError, match="num_kv_heads: checkpoint 2 vs model 4"):
        load_gates(checkpoint, geometry={"num_layers": 3, "num_query_heads": 4, "num_kv_heads": 4, "head_dim": 16})
    assert load_gates(checkpoint).network.config.hidden == 8
