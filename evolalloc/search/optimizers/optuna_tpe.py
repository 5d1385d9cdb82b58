"""Optuna TPE back-end ("optuna-tpe"): ``optuna.samplers.TPESampler``, asked a whole
generation at a time (its default ``constant_liar`` keeps the pending ones apart).

TPE has no step size, so ``sigma0`` is unused. ``x0`` (the uniform allocation) is enqueued as
the very first trial so the model always knows the starting point; the rest of the first
``n_startup_trials`` (Optuna's default, 10) are uniform random in the box.

Failures: see ``optuna_study.py``.
"""

from __future__ import annotations

import optuna

from evolalloc.search.optimizers.base import register_optimizer
from evolalloc.search.optimizers.optuna_study import OptunaOptimizer


@register_optimizer("optuna-tpe")
class OptunaTpeOptimizer(OptunaOptimizer):
    sampler_class = optuna.samplers.TPESampler
    # consider_prior / prior_weight: deprecated since Optuna 4.3 / 4.9; gamma, weights, constraints_func: functions.
    allowed = {"consider_magic_clip": bool, "consider_endpoints": bool,
               "n_startup_trials": int, "n_ei_candidates": int, "multivariate": bool, "group": bool,
               "warn_independent_sampling": bool, "constant_liar": bool}

    def __init__(self, x0, sigma0, bounds, popsize, seed, **sampler_options):
        super().__init__(x0, sigma0, bounds, popsize, seed, **sampler_options)
        self._study.enqueue_trial(self.x0_params())

    def _make_sampler(self) -> optuna.samplers.BaseSampler:
        return optuna.samplers.TPESampler(seed=self.seed, **self.sampler_options)

    @property
    def implementation(self) -> tuple[str, str]:
        return ("optuna", optuna.__version__)
