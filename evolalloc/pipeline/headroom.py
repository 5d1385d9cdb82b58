"""Headroom: how far uniform budgets with a given scorer fall below the full cache, over a grid
of budgets, on a recipe's task — the measurement that says where a search has room to win.

Only the *search* split is read (its instances, curated as the recipe says): the held-out split
stays unseen, so choosing the search budget from this table never tunes on held-out text. The
split is prefilled once with every scorer's ranking; each (scorer, budget) is one allocation of
the same evaluator pass. With the ``retention-gates`` scorer the table also has
``retention-gates-global``: the ``global-topk`` method over the same gates, at the same total
budget, and, when asked, the floors blend (``floors_under_global_topk``) over uniform budgets at
given floor fractions. (Asked for by its old name, ``gates``, the rows say ``gates-global``.)
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from evolalloc.core.baselines import make_baseline
from evolalloc.core.errors import UserError
from evolalloc.core.scorer_names import RETENTION_GATES, canonical_scorer
from evolalloc.pipeline.experiment import Experiment
from evolalloc.runtime.scorers import Scorer, get_scorer
from searchspaces.floors_under_global_topk import ADAPTER as FLOORS  # uniform floors, the rest by the global top-k

SPLIT = "search"  # never "heldout": see the module docstring
GLOBAL_TOPK = "global-topk"  # a retention-gates row brings this method's row (GLOBAL suffix) with it
GLOBAL = "-global"
ROOM = 0.05  # a gap to the full cache wider than this is room for a search to win


@dataclass
class Headroom:
    """Scores on the search split: ``full`` (the uncompressed cache) and ``scores[scorer][c]``
    (uniform budgets at ``c``; ``None`` where ``c`` is below what the scorer always keeps)."""

    task: str
    n: int
    budgets: list[int]
    full: float
    scores: dict[str, dict[int, float | None]] = field(default_factory=dict)
    always_kept: dict[str, int] = field(default_factory=dict)

    def lines(self) -> list[str]:
        width = max([len("scorer")] + [len(s) for s in self.scores])
        head = f"{'scorer':<{width}}  " + "  ".join(f"{'c=' + str(c):>6}" for c in self.budgets) + "    full"
        out = [f"headroom of {self.task} on the search split (n = {self.n}; the held-out split is never read), "
               f"uniform budgets, greedy answers scored by the task's metric", head]
        for name, row in self.scores.items():
            cells = "  ".join(f"{'-' if row[c] is None else format(row[c], '.3f'):>6}" for c in self.budgets)
            out.append(f"{name:<{width}}  {cells}  {self.full:6.3f}")
        for name, row in self.scores.items():
            room = [c for c in self.budgets if row[c] is not None and self.full - row[c] > ROOM + 1e-9]
            close = [c for c in self.budgets if row[c] is not None and self.full - row[c] <= ROOM + 1e-9]
            note = (
                f"room (more than {ROOM} below the full cache) at c = {', '.join(map(str, room))}"
                if room
                else "no room at any c"
            )
            if close:
                note += f"; within {ROOM} of it at c = {', '.join(map(str, close))}"
            if any(row[c] is None for c in self.budgets):
                note += f"; '-': c below the {self.always_kept[name]} tokens it always keeps"
            out.append(f"{name}: {note}")
        return out


def _scorer(experiment: Experiment, name: str) -> Scorer:
    """The recipe's scorer (with its params) when ``name`` is it, else ``name`` with defaults."""
    if canonical_scorer(name) == canonical_scorer(experiment.recipe.scorer.name):
        return experiment.scorer
    try:
        return get_scorer(name)
    except ValueError as err:  # unknown name (did-you-mean) or a scorer that cannot be built
        raise UserError(str(err), field="--scorers") from None


def measure_headroom(recipe, scorer_names: list[str], budgets: list[int], *, progress: bool = False,
                     floors: list[float] = ()) -> Headroom:
    """Uniform budgets at each of ``budgets`` with each scorer, and the full cache, on the search split.

    ``floors``: with the ``retention-gates`` scorer, also the floors blend (``floors_under_global_topk``)
    over uniform budgets at each of these floor fractions (rows ``retention-gates-floors<fraction>``)."""
    if recipe.multi_task:
        raise UserError("headroom measures one task at a time; give a recipe with a single task", source=recipe.source,
                        field="tasks")
    if not scorer_names or not budgets or min(budgets) < 1:
        raise UserError("needs at least one scorer and budgets of at least 1", field="--budgets")
    recipe.baselines = []  # only the scorers asked for are ranked at prefill
    # Whole records: the full cache and the budgets asked for are not the recipe's (its b_max would
    # have every instance prefilled again in full for each of them).
    with Experiment(recipe, progress=progress, bounded=False) as experiment:
        scorers = {name: _scorer(experiment, name) for name in dict.fromkeys(scorer_names)}
        experiment.run.scorers.extra = list(scorers.values())  # before the first records are made
        uniform = make_baseline("uniform")
        geometry = experiment.geometry

        def allocation(scorer: Scorer, c: float):
            return uniform.allocation(geometry, c, model=recipe.model.spec, scorer=scorer.name,
                                      scorer_params=scorer.params(), reserved=scorer.always_kept)

        first = next(iter(scorers.values()))
        full_alloc = allocation(first, geometry.max_positions)  # every unit keeps every position
        (full,) = _run(experiment, first, [full_alloc])
        params = ", ".join(f"{k}: {v}" for k, v in recipe.task.params.items())
        result = Headroom(task=recipe.task_names + (f" ({params})" if params else ""),
                          n=len(experiment.instances(SPLIT)), budgets=list(budgets), full=full)
        for name, scorer in scorers.items():
            usable = [c for c in budgets if c >= scorer.min_budget]
            values = _run(experiment, scorer, [allocation(scorer, c) for c in usable])
            result.scores[name] = {c: dict(zip(usable, values)).get(c) for c in budgets}
            result.always_kept[name] = scorer.always_kept
            if canonical_scorer(name) == RETENTION_GATES:
                _global_topk(experiment, name, scorer, budgets, result)
                for fraction in floors:
                    _global_topk(experiment, name, scorer, budgets, result, floor_fraction=fraction)
        return result


def _global_topk(experiment: Experiment, name: str, scorer: Scorer, budgets: list[int], result: Headroom,
                 floor_fraction: float | None = None) -> None:
    """The ``global-topk`` method next to uniform retention gates (row ``name``): the same gates' scores,
    one global top-k of c·L·H entries per input (``runtime.adaptive.global_topk``) instead of c per
    head. With ``floor_fraction``: the floors blend instead (adapter ``floors_under_global_topk``:
    every head first keeps that share of its uniform budget ``c``, the rest goes by the same global top-k)."""
    # The scorer is the retention gates: the method reads its checkpoint (a trained one too).
    checkpoint = scorer.params()["checkpoint"]
    method = make_baseline(GLOBAL_TOPK, checkpoint=checkpoint, sinks=scorer.sinks, window=scorer.window)
    usable = [c for c in budgets if c >= method.min_target]
    allocations = [method.allocation(experiment.geometry, c, model=experiment.recipe.model.spec, scorer=scorer.name,
                                     scorer_params=scorer.params(), reserved=scorer.always_kept) for c in usable]
    row = name + GLOBAL
    if floor_fraction is not None:  # the uniform budgets read as floors + a total (core.composition.allocation_adapter)
        blend = {"method": "uniform", "adapter": FLOORS, "adapter_params": {"floor_fraction": floor_fraction}}
        allocations = [replace(a, provenance={**a.provenance, **blend}) for a in allocations]
        row = f"{name}-floors{floor_fraction:g}"
    if allocations:
        values = _run(experiment, experiment.scorer_for(allocations[0]), allocations)
    else:
        values = []
    result.scores[row] = {c: dict(zip(usable, values)).get(c) for c in budgets}
    result.always_kept[row] = int(method.min_target)


def _run(experiment: Experiment, scorer: Scorer, allocations) -> list[float]:
    if not allocations:
        return []
    results = experiment.evaluator(SPLIT, scorer).evaluate([a.budgets for a in allocations])
    for result in results:
        if not result.ok:
            raise UserError(f"evaluation with scorer {scorer.name!r} failed: {result.error}", field="--scorers")
    return [float(r.task_score) for r in results]
