"""Optuna CMA-ES back-end ("optuna-cma"): ``optuna.samplers.CmaEsSampler``.

It runs on the ``cmaes`` package, not pycma, so ``implementation`` reports ``cmaes`` and its
version. Two adaptations, both because of how the sampler works (optuna 5.0):

* It normalises every dimension to [0, 1] before CMA-ES sees it, so ``sigma0`` is passed
  divided by the widest bound range (``sigma0 / max(upper - lower)``).
* It learns its search space from finished trials, so its first generation comes from the
  *independent* sampler. Optuna's default there is uniform random sampling over the box; we
  plug in ``GaussianStartSampler`` instead, which draws N(x0, sigma0²) per dimension (clipped),
  i.e. what CMA-ES's own first generation would be. The CMA update starts from generation 2
  (the sampler does not tell CMA-ES about independently sampled trials).

``x0`` and ``sigma0`` are deprecated in optuna 4.9 (removal planned for 6.0); the FutureWarning
is silenced here, and this module is the one place to change when they go.

Failures: see ``optuna_study.py``.
"""

from __future__ import annotations

import importlib.metadata
import warnings

import numpy as np
import optuna
from optuna.samplers import BaseSampler

from evolalloc.search.optimizers.base import register_optimizer
from evolalloc.search.optimizers.optuna_study import OptunaOptimizer


class GaussianStartSampler(BaseSampler):
    """Independent sampler: each parameter ~ N(x0[name], sigma0²), clipped to its bounds."""

    def __init__(self, x0: dict[str, float], sigma0: float, seed: int):
        self._x0 = dict(x0)
        self._sigma0 = float(sigma0)
        self._rng = np.random.RandomState(seed % 2**32)

    def infer_relative_search_space(self, study, trial):
        return {}

    def sample_relative(self, study, trial, search_space):
        return {}

    def sample_independent(self, study, trial, param_name, param_distribution):
        value = self._x0[param_name] + self._sigma0 * self._rng.randn()
        return float(np.clip(value, param_distribution.low, param_distribution.high))


@register_optimizer("optuna-cma")
class OptunaCmaOptimizer(OptunaOptimizer):
    sampler_class = optuna.samplers.CmaEsSampler
    reserved = ("x0", "sigma0", "popsize", "seed", "independent_sampler", "warn_independent_sampling")
    # restart_strategy / inc_popsize are deprecated in Optuna 4+ (and a restart would change the
    # population the loop asks for); source_trials are objects.
    allowed = {"n_startup_trials": int, "consider_pruned_trials": bool, "use_separable_cma": bool,
               "with_margin": bool, "lr_adapt": bool}

    def _make_sampler(self) -> optuna.samplers.BaseSampler:
        x0 = self.x0_params()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)  # x0 / sigma0 deprecation, see above
            return optuna.samplers.CmaEsSampler(
                x0=x0,
                sigma0=self.sigma0 / float(np.max(self.upper - self.lower)),
                popsize=self.popsize,
                seed=self.seed,
                independent_sampler=GaussianStartSampler(x0, self.sigma0, self.seed),
                warn_independent_sampling=False,
                **self.sampler_options,
            )

    @property
    def implementation(self) -> tuple[str, str]:
        return ("cmaes", importlib.metadata.version("cmaes"))
