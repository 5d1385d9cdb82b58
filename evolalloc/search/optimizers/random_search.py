"""Random-search control ("random"): CMA-ES's first generation, drawn again every generation.

Each ``ask()`` draws ``popsize`` independent points from the isotropic normal ``N(x0, sigma0^2 I)``
— the very distribution CMA-ES samples its first generation from — truncated to the bounds (a
coordinate outside them is drawn again). ``tell`` learns nothing. Run through the same group-wise
loop with the same population, generations, start point, step and bounds, it spends exactly the
evaluations CMA-ES spends; what CMA-ES adds over it is precisely its adaptation (mean, step size,
covariance). That makes it the control for "does CMA-ES help".

Why not uniform in the box: the automatic ratio bounds reach 4c, so a uniform draw has a mean
ratio near 2 and almost every candidate would blow the budget (CacheScore 0) — a strawman.

Failures (``None`` losses) are simply ignored: nothing is learned from any candidate anyway.
The generator is a ``numpy.random.Generator`` owned by the optimizer and seeded, so a fresh one
asked the same generations again (how ``resume`` rebuilds it) asks the same next generation.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from evolalloc.search.optimizers.base import AskTellOptimizer, register_optimizer

_REDRAWS = 100  # after this many redraws a coordinate still outside the box is clipped


@register_optimizer("random")
class RandomSearchOptimizer(AskTellOptimizer):
    """Independent draws from ``N(x0, sigma0^2 I)`` truncated to ``[lower, upper]``; seeded."""

    name = "random"

    def __init__(self, x0, sigma0, bounds, popsize, seed):
        super().__init__(x0, sigma0, bounds, popsize, seed)
        self._rng = np.random.default_rng(self.seed)
        self._asked: int | None = None

    def _draw(self) -> np.ndarray:
        x = self.x0 + self.sigma0 * self._rng.standard_normal(self.dim)
        for _ in range(_REDRAWS):
            outside = (x < self.lower) | (x > self.upper)
            if not outside.any():
                break
            x[outside] = self.x0[outside] + self.sigma0 * self._rng.standard_normal(int(outside.sum()))
        return np.clip(x, self.lower, self.upper)

    def ask(self) -> list[np.ndarray]:
        xs = [self._draw() for _ in range(self.popsize)]
        self._asked = len(xs)
        return xs

    def tell(self, xs: Sequence[np.ndarray], losses: Sequence[float | None]) -> None:
        self._check_tell(xs, losses)
        if self._asked is None or len(xs) != self._asked:
            raise ValueError("tell() must receive the generation returned by the last ask()")
        self._asked = None  # nothing to learn: every generation is drawn from the start distribution

    @property
    def implementation(self) -> tuple[str, str]:
        return ("numpy", np.__version__)
