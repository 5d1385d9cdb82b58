"""Ship a profile for every budget of ``budget.curve``: searched anchors, nested, and the grid between.

The run's own search at ``c`` is the first anchor. Every other anchor gets a search of its own,
the same group-wise search with the same settings at that target, in ``<run>/curve/c{N}/`` (its
own trial store and checkpoint, so ``resume`` replays it). Anchors above ``c`` are searched in
ascending order, each candidate decoded with ``bounded_budgets`` to exactly ``a * units`` tokens
with no unit below the anchor under it; anchors below ``c`` in descending order, no unit above the
anchor over it (and none below the scorer's floor). So the anchors nest *by construction*, and
each shipped anchor is exactly the budgets its search evaluated for its best candidate. Grid
budgets between anchors are derived by ``core.curve.RULE`` (per-unit linear interpolation).

Only the search split is ever used; the held-out split is scored by ``compare`` afterwards.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import numpy as np
from tqdm import tqdm

from evolalloc.config.run_folder import profile_filenames
from evolalloc.core.allocation import Allocation
from evolalloc.core.allocation_file import save_allocation
from evolalloc.core.curve import ANCHOR, CURVE_FILE, RULE, ProfileCurve, bounded_budgets
from evolalloc.search.checkpoint import has_checkpoint
from evolalloc.search.config import SearchConfig
from evolalloc.search.loop import resume_search, run_search

CURVE_DIR = "curve"


class BoundedEvaluator:
    """An evaluator that scores each candidate ``[L, H]`` as ``bounded_budgets(candidate, target, ...)``:
    exactly ``target`` per unit on average, every unit in ``[lo, hi]`` (the neighbouring anchor)."""

    def __init__(self, inner, target: float, granularity: str, lo, hi):
        self.inner, self.target, self.granularity, self.lo, self.hi = inner, float(target), granularity, lo, hi

    def bound(self, budgets) -> np.ndarray:
        return bounded_budgets(np.asarray(budgets), self.target, self.granularity, self.lo, self.hi)

    def evaluate(self, budgets):
        return self.inner.evaluate([self.bound(b) for b in budgets])


def check_anchors(resolved, config: SearchConfig, min_budget: int) -> None:
    """``UserError`` (before any model weights) unless every anchor's search can be built
    (``resolved``: the run's ``ResolvedRun``)."""
    from evolalloc.core.errors import UserError

    for budget in resolved.curve_anchors:
        if budget < min_budget:
            raise UserError(f"the anchor at c={budget} is below the {min_budget} tokens the scorer always keeps; "
                            "raise budget.curve.low", field="budget.curve.low")
        dataclasses.replace(config, target=float(budget))  # SearchConfig checks its space at that target


def anchor_search_dir(run_dir: Path, budget: float) -> Path:
    label = int(budget) if float(budget).is_integer() else budget
    return Path(run_dir) / CURVE_DIR / f"c{label}"


def search_anchor(run_dir: Path, experiment, config: SearchConfig, budget: float, lo, hi, allocate, *,
                  progress: bool):
    """Search (or resume) the anchor at ``budget``; return its profile, the budgets its best candidate
    was scored with. ``allocate(result, config, target)`` makes the run's evolved ``Allocation``."""
    folder = anchor_search_dir(run_dir, budget)
    label = folder.name
    anchor_config = dataclasses.replace(config, target=float(budget), study_name=f"{config.study_name}-curve-{label}")
    evaluator = BoundedEvaluator(experiment.search_evaluator(), budget, experiment.resolved.granularity, lo, hi)
    starts = experiment.run.methods.starts(anchor_config)  # the start's methods at this anchor
    if has_checkpoint(folder):
        result = resume_search(folder, evaluator, config=anchor_config, progress=progress, starts=starts)
    else:
        result = run_search(folder, evaluator, anchor_config, progress=progress, starts=starts)
    found = allocate(result, anchor_config, float(budget))
    provenance = dict(found.provenance, curve={"role": ANCHOR, "search": f"{CURVE_DIR}/{label}",
                                               "study": anchor_config.study_name})
    provenance.pop("completed_from_total", None)  # not completed: bounded, exactly as evaluated
    return dataclasses.replace(found, budgets=evaluator.bound(result.best_budgets), provenance=provenance)


def ship_curve(run_dir: Path, experiment, pivot: Allocation, config: SearchConfig, allocate, *,
               progress: bool = True) -> dict[float, Allocation]:
    """Search the other anchors, derive the grid, save ``allocation-c{N}.json`` per grid budget and
    ``profile-curve.json``; return the profiles by budget (the target first). ``pivot`` is the run's
    own search's profile at ``c``; ``allocate`` as for ``search_anchor``."""
    run = experiment.resolved
    grid, anchors_at = list(run.curve_grid), list(run.curve_anchors)
    c = float(run.target)
    floor = experiment.run.scorers.min_budget
    shape = pivot.budgets.shape
    upper = config.build_space().ratio_bounds[1]
    anchors = {c: dataclasses.replace(pivot, provenance=dict(pivot.provenance, curve={"role": ANCHOR, "search": "."}))}
    for budget in sorted(b for b in anchors_at if b > c):
        below = anchors[max(anchors)].budgets
        hi = np.maximum(np.full(shape, math.ceil(upper * budget - 1e-9)), below)
        tqdm.write(f"curve: searching the anchor at c={budget:g} (no unit below the c={max(anchors):g} profile)")
        anchors[float(budget)] = search_anchor(run_dir, experiment, config, budget, below, hi, allocate,
                                               progress=progress)
    for budget in sorted((b for b in anchors_at if b < c), reverse=True):
        above = anchors[min(anchors)].budgets
        tqdm.write(f"curve: searching the anchor at c={budget:g} (no unit above the c={min(anchors):g} profile)")
        lo = np.minimum(floor, above)
        anchors[float(budget)] = search_anchor(run_dir, experiment, config, budget, lo, above, allocate,
                                               progress=progress)
    family = ProfileCurve.from_anchors(anchors, grid, min_budget=floor)
    family.save(Path(run_dir) / CURVE_FILE)
    profiles: dict[float, Allocation] = {}
    names = profile_filenames(family.budgets)
    for budget, row, role in sorted(zip(family.budgets, family.rows, family.roles), key=lambda item: item[0] != c):
        if role == ANCHOR:
            profile = anchors[budget]
        else:
            lower = max(a for a in anchors if a < budget)
            upper_anchor = min(a for a in anchors if a > budget)
            profile = dataclasses.replace(pivot, target=budget, budgets=row, provenance=dict(
                pivot.provenance, curve={"role": "derived", "between": [lower, upper_anchor], "rule": RULE}))
            # the pivot search's, not this row's
            for key in ("fitness", "task_score", "evaluations", "completed_from_total"):
                profile.provenance.pop(key, None)
        save_allocation(profile, Path(run_dir) / names[budget])
        profiles[budget] = profile
    return profiles
