"""EvolKV's objective (Eq. 1-2): task score times a bonus for staying at or below the target.

    fitness = f(S) * (1 + lam * CacheScore(S, c))

    CacheScore(S, c) = max(0, 1 - (k_mean - c) / c)   if k_mean > c   (over budget: falls to 0 at 2c)
                       1 - gamma * (1 - k_mean / c)    if k_mean <= c  (under budget: a mild discount)

With lam = 0.3, gamma = 0.2 a profile at the target earns a 30 % bonus; one that uses no cache
at all still earns 24 %, and one at twice the target earns none. The search compares fitness
values only, so the bonus is what keeps it honest about the budget.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from evolalloc.core.ranges import range_problem

# The objective's knobs (paper: lam > 0, gamma in (0, 1]); lam = 0 turns the bonus off (an ablation).
# The recipe schema takes these ranges from here.
LAM_RANGE = {"min": 0.0}
GAMMA_RANGE = {"min_exclusive": 0.0, "max": 1.0}


def _check(name: str, value: float) -> float:
    value = float(value)
    if not math.isfinite(value):
        # A NaN fitness would be told to CMA-ES as a real number; a failed evaluation must stay
        # a failure, so refuse rather than propagate it.
        raise ValueError(f"{name} must be finite, got {value!r}")
    return value


def cache_score(mean_budget: float, target: float, gamma: float = 0.2) -> float:
    """CacheScore(S, c) in [0, 1] for mean budget ``k_mean`` per unit and target ``c``."""
    mean_budget = _check("mean_budget", mean_budget)
    target = _check("target", target)
    if target <= 0:
        raise ValueError(f"target must be positive, got {target}")
    ratio = mean_budget / target
    if ratio > 1.0:
        return max(0.0, 1.0 - (ratio - 1.0))
    return 1.0 - gamma * (1.0 - ratio)


def fitness_value(
    task_score: float, mean_budget: float, target: float, lam: float = 0.3, gamma: float = 0.2
) -> float:
    """``f * (1 + lam * CacheScore(k_mean, c))`` for task score ``f``."""
    task_score = _check("task_score", task_score)
    return task_score * (1.0 + lam * cache_score(mean_budget, target, gamma))


@dataclass(frozen=True)
class ObjectiveSettings:
    """The two knobs of the objective, validated once (paper: lam > 0, gamma in (0, 1]).

    ``lam = 0`` is allowed: it turns the bonus off, an ablation worth being able to run.
    """

    lam: float = 0.3
    gamma: float = 0.2

    def __post_init__(self):
        for name, rule in (("lam", LAM_RANGE), ("gamma", GAMMA_RANGE)):
            problem = range_problem(getattr(self, name), rule)
            if problem:
                raise ValueError(f"{name} {problem}")

    def cache_score(self, mean_budget: float, target: float) -> float:
        return cache_score(mean_budget, target, self.gamma)

    def fitness(self, task_score: float, mean_budget: float, target: float) -> float:
        return fitness_value(task_score, mean_budget, target, self.lam, self.gamma)
