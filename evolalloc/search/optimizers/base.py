"""The ask/tell optimizer interface the search loop drives, and its registry of back-ends.

One generation is ``xs = opt.ask()`` followed by exactly one ``opt.tell(xs, losses)``. Losses are
*minimised*; the loop passes ``-fitness``. A candidate whose evaluation failed is told as
``None`` — never as a made-up number — and each back-end documents, in its module docstring,
what it does with ``None`` (see ``pycma.py`` and ``optuna_study.py``).

An optimizer owns all of its randomness (it is seeded), so its state is a pure function of the
seed and of what it was told: a fresh optimizer asked and told the same generations again
asks the very same next generation. That is how ``resume`` rebuilds it from the trial store
(``search/loop.py``); no optimizer state is ever saved to a file.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Callable, Sequence

import numpy as np

from evolalloc.core.errors import UserError
from evolalloc.core.ranges import range_problem
from evolalloc.registry import Registry, UnknownNameError

# CMA-ES needs a population of 3 at least; every back-end shares the interface, so the rule is here
# (the recipe schema takes it from here).
POPSIZE_RANGE = {"min": 3}


def typed_option(value, kind: type, max_count: int) -> bool:
    """``value`` is exactly a ``kind``: a bool for bool, a count in ``[0, max_count]`` for int, a finite
    number for float. Back-ends pass ``optimizer.options`` on to libraries that may evaluate strings
    (pycma) or fail late on a wrong type (Optuna): only these typed values get through."""
    import math

    if kind is bool:
        return isinstance(value, bool)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    if kind is int:
        return isinstance(value, int) and 0 <= value <= max_count
    try:
        return math.isfinite(float(value))  # a 400-digit int overflows the float a library makes of it
    except OverflowError:
        return False


def option_kind(kind: type, max_count: int) -> str:
    """How a refusal says what ``typed_option`` wanted."""
    return {bool: "true or false", int: f"an integer in [0, {max_count}]", float: "a finite number"}[kind]


class AskTellOptimizer(ABC):
    """A seeded, deterministic ask/tell minimiser over a box ``[lower, upper]^dim``.

    Args (shared by every back-end's constructor):
        x0: start point, shape ``[dim]``.
        sigma0: initial step size, in the units of ``x0`` (not normalised by the bounds).
        bounds: ``(lower, upper)``, each a scalar or an array of shape ``[dim]``.
        popsize: candidates per ``ask()``.
        seed: makes the whole sequence of ``ask()`` results reproducible.
    """

    #: registry name, e.g. "cma" (set by ``register_optimizer``)
    name: str = ""

    def __init__(self, x0: np.ndarray, sigma0: float, bounds: tuple, popsize: int, seed: int):
        self.x0 = np.asarray(x0, dtype=float).copy()
        self.dim = int(self.x0.size)
        self.lower = np.broadcast_to(np.asarray(bounds[0], dtype=float), (self.dim,)).copy()
        self.upper = np.broadcast_to(np.asarray(bounds[1], dtype=float), (self.dim,)).copy()
        if self.dim < 1:
            raise ValueError("an optimizer needs at least one dimension")
        if np.any(self.lower >= self.upper):
            raise ValueError(f"bounds must satisfy lower < upper, got {bounds}")
        problem = range_problem(popsize, POPSIZE_RANGE)
        if problem:
            raise ValueError(f"popsize {problem}")
        self.sigma0 = float(sigma0)
        self.popsize = int(popsize)
        self.seed = int(seed)

    @classmethod
    def check_options(cls, options: dict) -> None:
        """``ValueError`` naming the bad key unless ``options`` (the recipe's ``optimizer.options``,
        passed to the back-end's library as they are) are valid for this back-end. Default: none."""
        if options:
            raise ValueError(f"optimizer {cls.name!r} takes no options, got {', '.join(map(repr, options))}")

    @abstractmethod
    def ask(self) -> list[np.ndarray]:
        """One generation: ``popsize`` candidates, each of shape ``[dim]`` and inside the bounds."""

    @abstractmethod
    def tell(self, xs: Sequence[np.ndarray], losses: Sequence[float | None]) -> None:
        """Report the generation just asked. ``xs`` must be exactly what ``ask()`` returned.

        ``losses[i]`` is a finite float to minimise, or ``None`` when candidate ``i`` failed.
        A non-finite float is a caller bug (failures are ``None``) and raises ``ValueError``.
        """

    def stop_reasons(self) -> list[str]:
        """The back-end's own termination criteria that have fired since the last ``tell`` (pycma's
        ``stop()``: flat fitness, ``tolfun``, ``tolx`` ...), for the search's stopping rule
        (``search/stopping.py``). Default: none (the rule then stops on gain or its cap alone)."""
        return []

    @property
    @abstractmethod
    def implementation(self) -> tuple[str, str]:
        """``(package, version)`` that actually produced the candidates, e.g. ``("cma", "4.5.0")``."""

    def _check_tell(self, xs: Sequence[np.ndarray], losses: Sequence[float | None]) -> None:
        if len(xs) != len(losses):
            raise ValueError(f"{len(xs)} candidates but {len(losses)} losses")
        for i, loss in enumerate(losses):
            if loss is not None and not np.isfinite(loss):
                raise ValueError(f"loss {i} is {loss}; a failed candidate must be told as None")


OPTIMIZERS: Registry[type[AskTellOptimizer]] = Registry(
    "optimizer",
    base=AskTellOptimizer,
    # Listed lazily so that naming or checking a back-end never imports optuna; a back-end file
    # missing here is still found by name (the registry imports the package's files on a miss).
    lazy={
        "cma": "evolalloc.search.optimizers.pycma",
        "optuna-cma": "evolalloc.search.optimizers.optuna_cma",
        "optuna-tpe": "evolalloc.search.optimizers.optuna_tpe",
        "random": "evolalloc.search.optimizers.random_search",
    },
    package="evolalloc.search.optimizers",
)


def register_optimizer(name: str) -> Callable[[type[AskTellOptimizer]], type[AskTellOptimizer]]:
    """Class decorator: make a back-end available to ``get_optimizer(name, ...)`` (sets its ``name``)."""
    return OPTIMIZERS.register(name)


def optimizer_names() -> list[str]:
    """Every back-end name (imports nothing for the listed ones)."""
    return OPTIMIZERS.names()


def check_optimizer_name(name: str) -> None:
    """Raise ``UserError`` naming the valid back-ends (and the closest one) for an unknown name."""
    try:
        OPTIMIZERS.check_name(name)
    except UnknownNameError as err:
        raise UserError(str(err), field="optimizer") from None


def check_optimizer_options(name: str, options: dict) -> None:
    """Raise ``UserError`` (field ``optimizer.options``) unless back-end ``name`` takes ``options``."""
    check_optimizer_name(name)
    try:
        OPTIMIZERS.get(name).check_options(dict(options))
    except ValueError as err:
        raise UserError(str(err), field="optimizer.options") from None


def get_optimizer(
    name: str, *, x0: np.ndarray, sigma0: float, bounds: tuple, popsize: int, seed: int, options: dict | None = None
) -> AskTellOptimizer:
    """Build back-end ``name`` ("cma" = pycma, the default; "optuna-cma"; "optuna-tpe"; "random").

    ``options`` go to the back-end's library as they are (pycma's ``CMAOptions``, the Optuna
    sampler's keyword arguments); see each back-end's ``check_options``.
    """
    check_optimizer_options(name, options or {})
    return OPTIMIZERS.get(name)(x0=x0, sigma0=sigma0, bounds=bounds, popsize=popsize, seed=seed, **(options or {}))
