"""Gumbel-sort samples the Plackett-Luce policy; RLOO advantages; the learning-rate schedule."""

from __future__ import annotations

import itertools

import torch

from evolalloc.learned.train import TrainConfig, gumbel_sort, lr_factor, plackett_luce_log_prob, rloo_advantages


def test_plackett_luce_probabilities_of_all_permutations_sum_to_one():
    scores = torch.tensor([[0.3, -1.2, 2.0, 0.0]])
    perms = torch.tensor(list(itertools.permutations(range(4))))[None]
    assert torch.isclose(plackett_luce_log_prob(scores, perms).exp().sum(), torch.tensor(1.0), atol=1e-5)


def test_gumbel_sort_matches_plackett_luce_on_three_tokens():
    scores = torch.tensor([[1.0, 0.0, -0.7]])
    samples = 60_000
    orders = gumbel_sort(scores, samples, torch.Generator().manual_seed(0))[0]  # [K, 3]
    perms = list(itertools.permutations(range(3)))
    expected = plackett_luce_log_prob(scores, torch.tensor(perms)[None])[0].exp()
    codes = orders[:, 0] * 9 + orders[:, 1] * 3 + orders[:, 2]
    observed = torch.tensor([float((codes == a * 9 + b * 3 + c).sum()) for a, b, c in perms])
    # Pearson chi-square with 5 degrees of freedom: 20.5 is the 0.999 quantile.
    chi2 = float(((observed - samples * expected) ** 2 / (samples * expected)).sum())
    assert chi2 < 20.5, (observed / samples, expected)
    # And the first pick alone follows the softmax of the scores.
    first = torch.bincount(orders[:, 0], minlength=3).float() / samples
    assert torch.allclose(first, torch.softmax(scores[0], 0), atol=0.01)


def test_rloo_advantages_are_centred_per_head_and_rank_rewards():
    rewards = torch.tensor([[-3.0, -1.0, -2.0, -2.0], [-5.0, -5.0, -5.0, -4.0]])
    adv = rloo_advantages(rewards)
    assert torch.allclose(adv.mean(-1), torch.zeros(2), atol=1e-6)
    assert adv[0, 1] > adv[0, 2] > adv[0, 0] and adv[1, 3] > 0 > adv[1, 0]


def test_equal_rewards_give_no_advantage():
    assert torch.equal(rloo_advantages(torch.full((2, 5), -1.0)), torch.zeros(2, 5))


def test_the_schedule_warms_up_then_decays_to_the_floor():
    config = TrainConfig(steps=1000, warmup=100, lr=1e-3, min_lr=1e-6)
    assert abs(lr_factor(0, config) - 0.01) < 1e-9
    assert abs(lr_factor(100, config) - 1.0) < 1e-9
    assert lr_factor(550, config) < lr_factor(200, config) < 1.0
    assert abs(lr_factor(1000, config) - 1e-3) < 1e-9
