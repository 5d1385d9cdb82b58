"""A policy trained on toy traces learns an importance that is a known function of the key."""

from __future__ import annotations

import torch

from evolalloc.learned.reward import normalised_reward
from evolalloc.learned.train import TrainConfig, item_tensors, train
from tests.learned.conftest import toy_traces


def heldout_cost(policy, traces, *, random: bool = False) -> float:
    """Mean normalised cost (1 = optimal) of the policy's greedy ranking over every held-out item."""
    generator = torch.Generator().manual_seed(5)
    costs = []
    for item in traces.items:
        features, importance = item_tensors(traces, item, sinks=0, window=0)
        with torch.no_grad():
            scores = torch.rand(importance.shape, generator=generator) if random else policy(features)
        costs.append(float(-normalised_reward(importance, torch.argsort(scores, dim=-1, descending=True)).mean()))
    return sum(costs) / len(costs)


def test_a_policy_learns_importance_that_is_a_function_of_the_key(tmp_path):
    config = TrainConfig(steps=300, permutations=8, lr=3e-3, warmup=20, hidden=32, depth=1, sinks=0, window=0, seed=0)
    policy, summary = train(toy_traces(8, seed=0), config, log_path=tmp_path / "log.jsonl", progress=False)
    heldout = toy_traces(4, seed=1)
    learned, random = heldout_cost(policy, heldout), heldout_cost(policy, heldout, random=True)
    assert learned < 1.0 + 0.25 * (random - 1.0), (learned, random)  # closes >= 75 % of the gap to optimal
    rows = (tmp_path / "log.jsonl").read_text().splitlines()
    assert len(rows) >= 30 and summary["steps"] == 300


def test_training_is_reproducible_with_a_seed():
    config = TrainConfig(steps=5, permutations=4, hidden=8, depth=1, sinks=0, window=0, seed=3)
    a, _ = train(toy_traces(2, seed=0), config, progress=False)
    b, _ = train(toy_traces(2, seed=0), config, progress=False)
    assert all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values()))


def test_subsampled_tokens_keep_their_positions_in_the_whole_cache():
    traces = toy_traces(1, seed=0)
    features, importance = item_tensors(traces, (0, 1), sinks=4, window=8, max_tokens=10,
                                        generator=torch.Generator().manual_seed(0))
    assert features.shape == (2, 10, 17) and importance.shape == (2, 10)
    positions = features[0, :, -1] * 96
    assert (positions >= 4).all() and (positions < 96 - 8).all()
    keys = traces.traces[0]["keys"][0, 0, positions.round().long()].float()
    assert torch.allclose(features[0, :, :8], keys)
