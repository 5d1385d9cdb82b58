"""Shared ask/tell plumbing for the Optuna back-ends ("optuna-cma", "optuna-tpe").

Each optimizer drives a *private* in-memory Optuna study (``study.ask`` / ``study.tell`` with
one ``FloatDistribution`` per dimension). It is private because the run's trial store holds one
study for all groups, whose parameters change from group to group; Optuna's samplers infer
their search space from the trials of a study and would fall back to random sampling there.

Failed candidates (told as ``None``) are told to Optuna as ``TrialState.FAIL``, Optuna's own
notion of a failure. Both samplers only learn from COMPLETE trials, so a failure carries no
value at all: for TPE it is simply absent from the model; Optuna's CMA-ES sampler completes
its internal generation with later COMPLETE trials instead (in effect a re-sample of the
failed point). So our generations and the sampler's internal ones can drift apart after a
failure; that is Optuna's behaviour and is recorded, not hidden.

State: the in-memory study and the seeded sampler; ``resume`` rebuilds both by replaying the
stored generations (see ``optimizers/base.py``).
"""

from __future__ import annotations

import inspect
from abc import abstractmethod
from typing import Sequence

import numpy as np
import optuna
from optuna.distributions import FloatDistribution
from optuna.storages import InMemoryStorage
from optuna.trial import TrialState

from evolalloc.search.optimizers.base import AskTellOptimizer, option_kind, typed_option

_STUDY_NAME = "evolalloc-optimizer"


class OptunaOptimizer(AskTellOptimizer):
    """Base of the Optuna back-ends; subclasses only choose the sampler."""

    #: the Optuna sampler class whose keyword arguments ``optimizer.options`` may set
    sampler_class: type = optuna.samplers.BaseSampler
    #: sampler arguments this wrapper sets itself
    reserved: tuple[str, ...] = ("seed",)
    #: the sampler arguments a recipe may set, each with its type (``base.typed_option``); the
    #: others are functions or objects (``gamma``, ``constraints_func``, ...), which a recipe cannot
    #: hold, or are deprecated. Like pycma's allow-list: a wrong type is refused at the recipe, not
    #: inside Optuna mid-search (issue 20).
    allowed: dict[str, type] = {}
    #: counts (``n_ei_candidates`` is drawn every trial) stay small enough to run
    MAX_COUNT = 100_000

    @classmethod
    def check_options(cls, options: dict) -> None:
        takes = [p for p in inspect.signature(cls.sampler_class).parameters if p in cls.allowed]
        for key, value in options.items():
            if key not in takes:
                why = " (set by evolalloc)" if key in cls.reserved else ""
                raise ValueError(f"optimizer {cls.name!r}: {cls.sampler_class.__name__} has no option {key!r}{why} "
                                 f"evolalloc passes on; valid: {', '.join(takes)}")
            if not typed_option(value, cls.allowed[key], cls.MAX_COUNT):
                raise ValueError(f"optimizer {cls.name!r}: {key} must be "
                                 f"{option_kind(cls.allowed[key], cls.MAX_COUNT)}, got {value!r}")

    def __init__(self, x0, sigma0, bounds, popsize, seed, **sampler_options):
        super().__init__(x0, sigma0, bounds, popsize, seed)
        self.check_options(sampler_options)
        self.sampler_options = sampler_options
        self.param_names = [f"x{i}" for i in range(self.dim)]
        self.distributions = {
            name: FloatDistribution(float(lo), float(hi))
            for name, lo, hi in zip(self.param_names, self.lower, self.upper)
        }
        self._storage = InMemoryStorage()
        self._sampler = self._make_sampler()
        # This study is an implementation detail: keep its "new study created" line out of the log.
        verbosity = optuna.logging.get_verbosity()
        optuna.logging.set_verbosity(max(verbosity, optuna.logging.WARNING))
        try:
            self._study = optuna.create_study(
                storage=self._storage, sampler=self._sampler, direction="minimize", study_name=_STUDY_NAME
            )
        finally:
            optuna.logging.set_verbosity(verbosity)
        self._pending: list[optuna.Trial] = []

    @abstractmethod
    def _make_sampler(self) -> optuna.samplers.BaseSampler:
        """The seeded sampler that proposes the candidates."""

    def x0_params(self) -> dict[str, float]:
        return {name: float(np.clip(v, lo, hi))
                for name, v, lo, hi in zip(self.param_names, self.x0, self.lower, self.upper)}

    def ask(self) -> list[np.ndarray]:
        if self._pending:
            raise RuntimeError("ask() called twice without tell()")
        self._pending = [self._study.ask(self.distributions) for _ in range(self.popsize)]
        return [np.array([trial.params[n] for n in self.param_names], dtype=float) for trial in self._pending]

    def tell(self, xs: Sequence[np.ndarray], losses: Sequence[float | None]) -> None:
        self._check_tell(xs, losses)
        if len(xs) != len(self._pending):
            raise ValueError("tell() must receive the generation returned by the last ask()")
        for trial, loss in zip(self._pending, losses):
            if loss is None:
                self._study.tell(trial, state=TrialState.FAIL)
            else:
                self._study.tell(trial, float(loss))
        self._pending = []
