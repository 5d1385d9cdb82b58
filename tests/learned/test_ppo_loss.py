"""The PPO pieces on hand-made batches: the clipped objective, the release probabilities, returns and the
per-step baseline, and the Gumbel draw being the softmax over the negated scores."""

from __future__ import annotations

import math

import pytest
import torch

from evolalloc.core.errors import UserError
from evolalloc.learned.ppo_loss import (
    clipped_surrogate,
    discounted_returns,
    first_draw_entropy,
    group_advantages,
    release_log_probs,
)
from evolalloc.learned.ppo_sampler import gumbel
from evolalloc.learned.ppo_settings import PPOSettings


def test_the_clipped_objective_is_the_formula_on_a_hand_made_batch():
    old = torch.log(torch.tensor([0.5, 0.5, 0.5, 0.5, 0.2]))
    new = torch.log(torch.tensor([0.7, 0.3, 0.7, 0.3, 0.2]))  # ratios 1.4, 0.6, 1.4, 0.6, 1
    advantages = torch.tensor([2.0, 2.0, -1.0, -1.0, 3.0])
    expected = torch.tensor([
        1.2 * 2.0,  # A > 0, ratio above 1 + eps: clipped, no reward for moving further
        0.6 * 2.0,  # A > 0, ratio below 1 - eps: the unclipped (smaller) term
        1.4 * -1.0,  # A < 0, ratio above 1 + eps: the unclipped (smaller) term
        0.8 * -1.0,  # A < 0, ratio below 1 - eps: clipped
        1.0 * 3.0,
    ])
    torch.testing.assert_close(clipped_surrogate(new, old, advantages, clip=0.2), expected)


def test_release_probabilities_are_the_sequential_softmax_over_the_negated_scores():
    scores = torch.tensor([[0.5, -1.0, 2.0, 0.0, 1.0]])
    candidates = torch.tensor([[True, True, True, False, True]])  # slot 3 is always kept
    order = torch.tensor([[1, 0, 4, 2, 3]])  # released: slot 1, then slot 0; the rest not
    log_probs, drawn = release_log_probs(scores, order, candidates, torch.tensor([2]))
    first = math.exp(1.0) / sum(math.exp(-s) for s in (0.5, -1.0, 2.0, 1.0))
    second = math.exp(-0.5) / sum(math.exp(-s) for s in (0.5, 2.0, 1.0))
    assert drawn.tolist() == [[True, True, False, False, False]]
    torch.testing.assert_close(log_probs, torch.tensor([[math.log(first), math.log(second), 0.0, 0.0, 0.0]]))
    entropy = first_draw_entropy(scores, candidates)
    p = torch.softmax(-scores[0, [0, 1, 2, 4]], dim=0)
    torch.testing.assert_close(entropy, -(p * p.log()).sum()[None])


def test_the_gumbel_draw_releases_tokens_as_often_as_the_softmax_over_negated_scores_says():
    scores = torch.tensor([1.0, 0.0, -1.0, 0.5])
    generator = torch.Generator().manual_seed(0)
    first = torch.stack([(scores - gumbel(scores.shape, generator)).argmin() for _ in range(20000)])
    frequency = torch.bincount(first, minlength=4).float() / 20000
    torch.testing.assert_close(frequency, torch.softmax(-scores, dim=0), atol=0.015, rtol=0)
    assert torch.equal(gumbel((3,), None), torch.zeros(3))  # no generator: the greedy policy


def test_returns_are_discounted_and_the_baseline_is_the_other_episodes_of_the_group_at_that_step():
    rewards = torch.tensor([[1.0, 0.0, 2.0], [0.0, 0.0, 0.0], [3.0, 1.0, 0.0], [1.0, 1.0, 1.0]])
    returns = discounted_returns(rewards, gamma=0.5)
    torch.testing.assert_close(returns[0], torch.tensor([1.0 + 0.0 + 0.25 * 2.0, 0.0 + 0.5 * 2.0, 2.0]))
    advantages = group_advantages(returns, groups=2)  # rows 0-1 and 2-3
    raw = torch.cat([returns[0:1] - returns[1:2], returns[1:2] - returns[0:1],
                     returns[2:3] - returns[3:4], returns[3:4] - returns[2:3]])
    torch.testing.assert_close(advantages, raw / raw.std())


@pytest.mark.parametrize("field, value, message", [
    ("rollouts", 1, "ppo rollouts: 1 must be >= 2"),
    ("clip", 1.5, "ppo clip: 1.5 must be in \\(0, 1\\)"),
    ("interval", 0, "ppo interval: 0 must be >= 1"),
    ("prompts", 1, "ppo prompts: 1 must be at least prompts_per_update"),
])
def test_bad_settings_are_one_line_naming_the_field(field, value, message):
    with pytest.raises(UserError, match=message):
        PPOSettings(**{field: value})
