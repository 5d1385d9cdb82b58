"""The all-budgets reward: O(n) cost equals the per-budget definition; sorting by importance is optimal."""

from __future__ import annotations

import itertools

import torch

from evolalloc.learned.reward import cost_per_budget, normalised_reward, optimal_cost, ranking_cost


def naive_cost(importance: torch.Tensor, order: list[int]) -> float:
    """Eq. 4-5 literally: for every budget b = 1..n-1, the importance of the evicted tokens."""
    n = len(order)
    return sum((float(importance[order[i]]) for b in range(1, n) for i in range(b, n)), 0.0)


def test_the_linear_time_cost_equals_the_naive_per_budget_sum():
    generator = torch.Generator().manual_seed(0)
    for n in (1, 2, 7, 40):
        importance = torch.rand(n, generator=generator) ** 3
        for _ in range(5):
            order = torch.randperm(n, generator=generator)
            assert torch.isclose(ranking_cost(importance, order), torch.tensor(naive_cost(importance, order.tolist())),
                                 rtol=1e-5)


def test_the_cost_per_budget_sums_to_the_total_and_ends_at_zero():
    importance = torch.tensor([0.5, 0.0, 2.0, 1.0, 0.25])
    order = torch.tensor([3, 0, 4, 2, 1])
    per_budget = cost_per_budget(importance, order)
    assert per_budget.shape == (6,)
    assert per_budget[0] == importance.sum() and per_budget[-1] == 0
    assert torch.isclose(per_budget[1:-1].sum(), ranking_cost(importance, order))
    assert torch.isclose(per_budget[2], torch.tensor(2.0 + 0.25 + 0.0))  # keep 3 and 0, evict the rest


def test_the_optimal_ranking_is_the_best_of_all_rankings_by_brute_force():
    generator = torch.Generator().manual_seed(1)
    for n in (3, 5, 6):
        importance = torch.rand(n, generator=generator)
        costs = [naive_cost(importance, list(p)) for p in itertools.permutations(range(n))]
        assert abs(float(optimal_cost(importance)) - min(costs)) < 1e-5
        rewards = normalised_reward(importance, torch.tensor(list(itertools.permutations(range(n)))))
        assert torch.isclose(rewards.max(), torch.tensor(-1.0)) and (rewards <= -1.0 + 1e-6).all()


def test_a_worse_ranking_gets_a_lower_reward():
    importance = torch.tensor([4.0, 3.0, 2.0, 1.0])
    good, bad = torch.tensor([0, 1, 2, 3]), torch.tensor([3, 2, 1, 0])
    assert normalised_reward(importance, good) == -1.0
    assert normalised_reward(importance, bad) < -1.5


def test_a_split_without_importance_outside_the_top_token_scores_minus_one():
    importance = torch.tensor([[0.0, 0.0, 0.0], [0.0, 5.0, 0.0]])
    rewards = normalised_reward(importance, torch.tensor([[[2, 1, 0]], [[1, 0, 2]]]))
    assert torch.equal(rewards, -torch.ones(2, 1))
