"""When a group's search stops: EvolKV's fixed ``M`` generations, or until it has converged.

EvolKV (Algorithm 1) runs every group for a fixed ``M`` generations. Too few and the profile it
ships is worse than one it could have started from (a starved search); too many and the search
spends evaluations on a group that stopped improving long ago. ``StopRule`` decides after each
generation of a group, from data alone (so a replayed search makes the same decisions):

* ``fixed``: exactly ``M`` generations (the paper as published).
* ``converged`` (the default): the group stops at the first of
  - **no gain**: the best fitness ``F_best`` rose by at most ``tolerance`` over the last
    ``patience`` generations;
  - **the optimizer's own criteria on its distribution**: pycma's ``tolx``, ``noeffectaxis``,
    ``tolconditioncov``, ... (``PycmaOptimizer.REASONS``; its criteria on the fitness values are
    the no-gain rule's business), for back-ends that have them;
  - **the cap**: ``max_generations``, so the search's cost has an upper bound (``--plan`` counts it).

``F_best`` is the global best of Algorithm 1 (the start's fitness when the search started from an
evaluated profile): a group "gains" only when it improves the profile the search would ship.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

# Why a group stopped (``GroupSummary.reason``).
FIXED, NO_GAIN, OPTIMIZER, CAP = "fixed", "no gain", "optimizer", "cap"


@dataclass(frozen=True)
class StopRule:
    """Args:
        generations: EvolKV's fixed ``M`` (every group runs exactly ``M`` generations), or ``None``:
            run each group until it converges (the rest of the settings).
        max_generations: the cap per group when converging.
        patience: generations in a row without a gain above ``tolerance`` that stop a group.
        tolerance: the least rise of ``F_best`` (in fitness units) that counts as a gain.
    """

    generations: int | None = None
    # Chosen on the main job's search split: results/search-budget/README.md, "How the defaults were chosen".
    max_generations: int = 20
    patience: int = 4
    tolerance: float = 1e-3

    @property
    def fixed(self) -> bool:
        return self.generations is not None

    @property
    def cap(self) -> int:
        """The most generations a group can run (``M`` when fixed)."""
        return self.generations if self.fixed else self.max_generations

    def reason(self, best_history: list[float], optimizer_reasons: list[str]) -> str | None:
        """Why the group stops after the generation just told, or ``None`` to go on.

        ``best_history``: ``F_best`` when the group started, then after each of its generations
        (``-inf`` while nothing has finished), so ``len(best_history) - 1`` generations have run.
        ``optimizer_reasons``: the optimizer's own termination criteria that fired (may be empty).
        """
        ran = len(best_history) - 1
        if self.fixed:
            return FIXED if ran >= self.generations else None
        if optimizer_reasons:
            return f"{OPTIMIZER}: {', '.join(optimizer_reasons)}"
        if ran >= self.patience:
            before, now = best_history[-1 - self.patience], best_history[-1]
            if math.isfinite(now) and (math.isfinite(before) and now - before <= self.tolerance):
                return NO_GAIN
        # Checked last, so ``cap`` means the group was still gaining (or had found nothing) when it was
        # stopped: a search that did not converge, which the report and ``show`` say.
        if ran >= self.max_generations:
            return CAP
        return None

    def words(self) -> str:
        """The rule in a few words, for reports and ``show``."""
        if self.fixed:
            return f"{self.generations} generations per group (fixed, EvolKV's M)"
        return (f"until converged: no gain above {self.tolerance:g} in {self.patience} generations, "
                f"or the optimizer's own criteria, at most {self.max_generations} generations per group")


@dataclass(frozen=True)
class GroupSummary:
    """How one group's search ended (kept in the checkpoint; read by the report and ``show``).

    ``start_fitness``: ``F_best`` when the group started (``None``: nothing evaluated yet);
    ``best_fitness``: ``F_best`` when it stopped; ``gain``: their difference (``None`` when either
    is missing); ``reason``: one of ``fixed``, ``no gain``, ``optimizer: <criteria>``, ``cap``.
    ``pass_number`` / ``space_group``: in a search of several passes (``SearchConfig.passes``), which pass
    this group belongs to and which of the space's groups (0-based) it searches; ``space_group`` is
    ``None`` in a one-pass search, where the two numberings are the same.
    """

    group: int
    generations: int
    evaluations: int
    reason: str
    start_fitness: float | None
    best_fitness: float | None
    pass_number: int = 1
    space_group: int | None = None

    @property
    def gain(self) -> float | None:
        if self.start_fitness is None or self.best_fitness is None:
            return None
        return self.best_fitness - self.start_fitness

    def to_dict(self) -> dict:
        data = {**asdict(self), "gain": self.gain}
        if self.space_group is None:  # a one-pass search: the checkpoint's keys as before passes existed
            del data["pass_number"], data["space_group"]
        return data

    @classmethod
    def from_dict(cls, data: dict) -> "GroupSummary":
        optional = {k: data[k] for k in ("pass_number", "space_group") if k in data}  # absent before passes
        return cls(**{k: data[k] for k in ("group", "generations", "evaluations", "reason", "start_fitness",
                                           "best_fitness")}, **optional)

    @property
    def converged(self) -> bool:
        """False when the cap stopped a group still gaining (``StopRule.reason``): more generations may find more."""
        return self.reason != CAP

    def line(self) -> str:
        """``group 2: 7 generations (63 evaluations), stopped: no gain; +0.0123`` (in a search of several
        passes: ``group 6 (pass 2, group 2 again): ...``)."""
        gain = "" if self.gain is None else f"; gained {self.gain:+.4g}"
        reason = self.reason if self.converged else f"the cap of {self.generations} generations, before it converged"
        return (f"group {self.group + 1}{self.pass_words()}: {self.generations} generations "
                f"({self.evaluations} evaluations), stopped: {reason}{gain}")

    def pass_words(self) -> str:
        """`` (pass 2, group 1 again)`` for a later pass's group, `` (pass 1)`` in a search of several passes,
        empty in a one-pass search."""
        if self.space_group is None:
            return ""
        if self.pass_number == 1:
            return " (pass 1)"
        return f" (pass {self.pass_number}, group {self.space_group + 1} again)"


#: The converging rule's defaults, the one home of them (the recipe schema and the search config read them here).
DEFAULT_RULE = StopRule()


def finite_or_none(value: float) -> float | None:
    return float(value) if math.isfinite(value) else None


def passes_words(passes: int) -> str:
    """``"; 2 passes over the groups"`` after a search's stop rule in words, for a search of several passes
    (``optimizer.passes``), else ``""``: the settings line of the CLI, the report and the service."""
    return f"; {passes} passes over the groups" if passes > 1 else ""


def groups_in_passes(groups: int, passes: int) -> str:
    """``" = 2 passes over 4"`` after a count of ``groups`` searched groups (every pass's), for a search of
    several passes, else ``""``: ``--plan`` and the service's evaluation limit count them alike."""
    return f" = {passes} passes over {groups // passes}" if passes > 1 else ""
