"""pycma back-end ("cma", the default): ``cma.CMAEvolutionStrategy`` with ask/tell.

Failed candidates (told as ``None``). pycma's own ``tell`` silently replaces None/NaN with the
*median* of the generation, which would tell CMA-ES that a crash is an average allocation. We
never hand it a None. The rule, applied per generation:

* If at least one candidate finished, every failed candidate is told
  ``worst + margin`` with ``worst`` the largest finite loss of the generation and
  ``margin = max(1.0, worst - best)``. CMA-ES only uses the *ranks* of the losses, so this
  means exactly "a failure ranks below every success" (it gets the most negative active
  weight and pushes the distribution away from where it failed); ties among failures keep
  the order in which they were asked.
* If every candidate failed, nothing is told: the distribution is left unchanged and the next
  ``ask()`` draws a fresh generation from it.

Randomness. By default pycma samples with ``np.random.randn``, a method of NumPy's *global*
RandomState: other code using ``np.random`` would shift the search, and a replay on resume would
not reproduce it. We hand pycma the ``randn`` of a RandomState owned by this wrapper instead
(pycma's ``randn`` option), so the search is isolated and a function of its seed alone.
"""

from __future__ import annotations

import difflib
from typing import Sequence

import cma
import numpy as np

from evolalloc.search.optimizers.base import AskTellOptimizer, option_kind, register_optimizer, typed_option


def failed_loss(losses: Sequence[float | None]) -> float | None:
    """The loss a failed candidate is told: below every finished one; ``None`` if none finished."""
    finite = [float(v) for v in losses if v is not None]
    if not finite:
        return None
    worst, best = max(finite), min(finite)
    return worst + max(1.0, worst - best)


@register_optimizer("cma")
class PycmaOptimizer(AskTellOptimizer):
    """``cma.CMAEvolutionStrategy`` in box bounds (pycma's ``BoundTransform``), quiet, seeded."""

    # pycma options this wrapper sets itself: bounds, population, RNG and silence are not the user's.
    RESERVED = ("bounds", "popsize", "randn", "seed", "verbose", "verb_log", "verb_disp")
    # The options passed on, each with its type. pycma *evaluates* a string option as a Python
    # expression (its defaults are strings such as "100 + 150 * (N+3)**2 // popsize**0.5"), so a
    # recipe's string would be code; only these typed values are accepted: booleans are booleans,
    # numbers are finite numbers (ints also pass as floats), counts are non-negative integers.
    ALLOWED = {
        "CMA_active": bool, "CMA_elitist": bool, "CMA_mirrormethod": int, "CMA_diagonal": int,
        "CMA_mirrors": float, "CMA_rankmu": float, "CMA_cmean": float, "CMA_on": float,
        "CSA_dampfac": float, "CSA_damp_mueff_exponent": float, "CSA_disregard_length": bool,
        "tolfun": float, "tolfunhist": float, "tolfunrel": float, "tolx": float, "tolupsigma": float,
        "tolconditioncov": float, "tolfacupx": float, "tolstagnation": int, "tolflatfitness": int,
        "maxiter": int, "maxfevals": int, "mindx": float, "minstd": float, "maxstd": float,
    }
    MAX_COUNT = 10**9

    @classmethod
    def check_options(cls, options: dict) -> None:
        valid = sorted(cls.ALLOWED)
        for key, value in options.items():
            if key not in cls.ALLOWED:
                close = difflib.get_close_matches(str(key), valid, n=1)
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                raise ValueError(f"optimizer 'cma': {key!r} is not a pycma option this back-end passes on{hint}; "
                                 f"allowed: {', '.join(valid)} (set by evolalloc: {', '.join(cls.RESERVED)})")
            kind = cls.ALLOWED[key]
            if not typed_option(value, kind, cls.MAX_COUNT):
                raise ValueError(f"optimizer 'cma': {key} must be {option_kind(kind, cls.MAX_COUNT)}, got {value!r}")

    def __init__(self, x0, sigma0, bounds, popsize, seed, **cma_options):
        super().__init__(x0, sigma0, bounds, popsize, seed)
        self.check_options(cma_options)
        # Seed 0 would mean "from the clock" to pycma; we seed our own generator anyway.
        self._rng = np.random.RandomState(self.seed % 2**32)
        options = {
            **cma_options,
            "bounds": [self.lower.tolist(), self.upper.tolist()],
            "popsize": self.popsize,
            "randn": self._rng.randn,
            "seed": np.nan,  # pycma's own seeding only applies to np.random.randn; skip it
            "verbose": -9,  # no console output
            "verb_log": 0,  # no outcmaes/ files in the working directory
            "verb_disp": 0,
        }
        self.es = cma.CMAEvolutionStrategy(self.x0.tolist(), self.sigma0, options)
        self._asked: list[np.ndarray] | None = None

    def ask(self) -> list[np.ndarray]:
        xs = self.es.ask()
        self._asked = list(xs)
        # BoundTransform already maps into the box; the clip only removes float dust at the edges.
        return [np.clip(np.asarray(x, dtype=float), self.lower, self.upper) for x in xs]

    def tell(self, xs: Sequence[np.ndarray], losses: Sequence[float | None]) -> None:
        self._check_tell(xs, losses)
        if self._asked is None or len(xs) != len(self._asked):
            raise ValueError("tell() must receive the generation returned by the last ask()")
        substitute = failed_loss(losses)
        asked = self._asked
        self._asked = None
        if substitute is None:
            return  # every candidate failed: leave the distribution as it was
        values = [substitute if v is None else float(v) for v in losses]
        # pycma needs the unclipped points it handed out to find their genotypes.
        self.es.tell(asked, values)

    # pycma's criteria on the *distribution* (it has collapsed, stalled or run away) stop a group. Those on
    # the *fitness values* (tolfun, tolfunhist, tolfunrel, tolflatfitness, tolstagnation) do not: the
    # search's own no-gain rule with its patience covers them, and on a discrete score (exact match over a
    # few prompts) a generation whose candidates all tie would otherwise end its group after one
    # generation. Its budget limits (maxiter, maxfevals) are the search's cap's business.
    REASONS = ("tolx", "tolxstagnation", "noeffectaxis", "noeffectcoord", "tolconditioncov", "tolupsigma",
               "tolfacupx")

    def stop_reasons(self) -> list[str]:
        """pycma's termination criteria on the distribution that fire on the state told so far (``es.stop()``)."""
        return sorted(str(k) for k in self.es.stop() if k in self.REASONS)

    @property
    def implementation(self) -> tuple[str, str]:
        return ("cma", cma.__version__)
