"""The ask/tell optimizer interface the search loop drives, and its registry of back-ends.

One generation is ``xs = opt.ask()`` followed by exactly one ``opt.tell(xs, losses)``. Losses are
*minimised*; the loop passes ``-fitness``. A candidate whose evaluation failed is told as
``None`` — never as a made-up number — and each back-end documents, in its module docstring,
what it does with ``None`` (see ``pycma.py`` and ``optuna_study.py``).

An optimizer owns all of its randomness, so pickling it (``state_bytes``) and restoring it
(``from_state``) reproduces the very same next ``ask()``; that is what makes ``resume``
re-ask the generation it was killed in and re-use the stored trials.
"""

from __future__ import annotations

import difflib
import pickle
from abc import ABC, abstractmethod
from typing import Callable, Sequence

import numpy as np

from evolalloc.core.errors import UserError


class AskTellOptimizer(ABC):
    """A seeded, picklable ask/tell minimiser over a box ``[lower, upper]^dim``.

    Args (shared by every back-end's constructor):
        x0: start point, shape ``[dim]``.
        sigma0: initial step size, in the units of ``x0`` (not normalised by the bounds).
        bounds: ``(lower, upper)``, each a scalar or an array of shape ``[dim]``.
        popsize: candidates per ``ask()``.
        seed: makes the whole sequence of ``ask()`` results reproducible.
    """

    #: registry name, e.g. "cma"
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
        if popsize < 3:
            raise ValueError(f"popsize must be >= 3, got {popsize}")
        self.sigma0 = float(sigma0)
        self.popsize = int(popsize)
        self.seed = int(seed)

    @abstractmethod
    def ask(self) -> list[np.ndarray]:
        """One generation: ``popsize`` candidates, each of shape ``[dim]`` and inside the bounds."""

    @abstractmethod
    def tell(self, xs: Sequence[np.ndarray], losses: Sequence[float | None]) -> None:
        """Report the generation just asked. ``xs`` must be exactly what ``ask()`` returned.

        ``losses[i]`` is a finite float to minimise, or ``None`` when candidate ``i`` failed.
        A non-finite float is a caller bug (failures are ``None``) and raises ``ValueError``.
        """

    @property
    @abstractmethod
    def implementation(self) -> tuple[str, str]:
        """``(package, version)`` that actually produced the candidates, e.g. ``("cma", "4.5.0")``."""

    def state_bytes(self) -> bytes:
        """Everything needed to continue exactly here, RNG included."""
        return pickle.dumps(self, protocol=pickle.HIGHEST_PROTOCOL)

    @staticmethod
    def from_state(data: bytes) -> "AskTellOptimizer":
        """Inverse of ``state_bytes``. Only load states written by this program (pickle)."""
        opt = pickle.loads(data)
        if not isinstance(opt, AskTellOptimizer):
            raise TypeError(f"not an optimizer state: {type(opt).__name__}")
        return opt

    def _check_tell(self, xs: Sequence[np.ndarray], losses: Sequence[float | None]) -> None:
        if len(xs) != len(losses):
            raise ValueError(f"{len(xs)} candidates but {len(losses)} losses")
        for i, loss in enumerate(losses):
            if loss is not None and not np.isfinite(loss):
                raise ValueError(f"loss {i} is {loss}; a failed candidate must be told as None")


OptimizerFactory = Callable[..., AskTellOptimizer]
_REGISTRY: dict[str, OptimizerFactory] = {}


def register_optimizer(name: str) -> Callable[[OptimizerFactory], OptimizerFactory]:
    """Class decorator: make a back-end available to ``get_optimizer(name, ...)``."""

    def add(factory: OptimizerFactory) -> OptimizerFactory:
        if name in _REGISTRY:
            raise ValueError(f"optimizer {name!r} is registered twice")
        _REGISTRY[name] = factory
        return factory

    return add


def optimizer_names() -> list[str]:
    _load_backends()
    return sorted(_REGISTRY)


def check_optimizer_name(name: str) -> None:
    """Raise ``UserError`` naming the valid back-ends (and the closest one) for an unknown name."""
    names = optimizer_names()
    if name not in names:
        close = difflib.get_close_matches(name, names, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise UserError(f"unknown optimizer {name!r}{hint}; valid: {', '.join(names)}", field="optimizer")


def get_optimizer(
    name: str, *, x0: np.ndarray, sigma0: float, bounds: tuple, popsize: int, seed: int
) -> AskTellOptimizer:
    """Build back-end ``name`` ("cma" = pycma, the default; "optuna-cma"; "optuna-tpe"; "random")."""
    check_optimizer_name(name)
    return _REGISTRY[name](x0=x0, sigma0=sigma0, bounds=bounds, popsize=popsize, seed=seed)


def _load_backends() -> None:
    # Imported lazily so that importing the interface does not import optuna.
    from evolalloc.search.optimizers import optuna_cma, optuna_tpe, pycma, random_search  # noqa: F401
