"""The ``evaluate`` and ``compare`` workflows: the CLI parses options and prints what these give.

``evaluate_allocations`` scores allocation files, registered methods at a budget, or the full
cache on one split of a recipe's task (the split prefilled once for all of them), yielding each
result as soon as it is known. ``compare_run`` re-runs a finished run's held-out comparison and
rewrites its ``comparison.json``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Sequence

from evolalloc.core.allocation import Allocation
from evolalloc.engine.base import EvalResult

#: The allocation name ``evaluate`` takes for the uncompressed cache.
FULL_CACHE = "full"


class WorkflowError(RuntimeError):
    """A workflow that cannot go on (an evaluation failed, a run has nothing to compare yet)."""


@dataclass
class Evaluated:
    """One allocation scored on a split: what was evaluated, its result, and its mean with a 95%
    bootstrap interval (``report.stats.Interval``)."""

    name: str
    allocation: Allocation
    result: EvalResult
    interval: object

    def summary(self, task: str, split: str) -> str:
        what = "the full cache" if self.name == FULL_CACHE else f"c = {self.allocation.target:g}"
        i = self.interval
        return (f"{self.name} ({what}, scorer {self.allocation.scorer}) on {task}/{split}: "
                f"mean {i.mean:.3f}, 95% CI [{i.low:.3f}, {i.high:.3f}], n = {i.n}")


def evaluate_allocations(recipe, names: Sequence[str], *, split: str = "heldout", budget: float | None = None,
                         run_dir: Path | None = None, progress: bool = True) -> Iterator[Evaluated]:
    """Score each of ``names`` (an allocation file, a registered method at ``budget`` — default the
    recipe's target — or ``FULL_CACHE``) on ``split``; yields each as soon as it is scored.

    Every file is read (and a bad one refused) before anything is evaluated; a failed evaluation
    is a ``WorkflowError``. ``run_dir``: a run's curated splits are used as it used them.
    """
    from evolalloc.config.run_folder import CURATION_FILE
    from evolalloc.core.allocation_file import load_allocation
    from evolalloc.core.composition import is_method
    from evolalloc.pipeline.experiment import Experiment
    from evolalloc.pipeline.run_scorers import scorer_for
    from evolalloc.report.stats import bootstrap_mean

    methods = [name for name in names if name != "evolved" and is_method(name)]  # the rest are files
    # The split is prefilled once with every ranking the named methods need (gates, streaming...).
    recipe.baselines = list(dict.fromkeys([*recipe.baselines, *(name for name in names if name in methods)]))
    curation = run_dir / CURATION_FILE if run_dir else None
    held = recipe.resolved.decode  # every evaluation of the run holds the budgets this way while decoding
    for name in names:
        if name != FULL_CACHE and name not in methods:
            _check_decode(load_allocation(name), held, name)  # refused here, before any prefill
    # Whole records: the allocations named here may give a unit more than the run's b_max.
    with Experiment(recipe, progress=progress, curation_file=curation, bounded=False, run_dir=run_dir) as experiment:
        run = experiment.run  # the pieces this evaluation reads: the scorers, the methods, the model
        # A file's own scorer (and its checkpoint) ranks its tokens, whatever the recipe's scorer is.
        run.scorers.rank_also([load_allocation(name) for name in names if name != FULL_CACHE and name not in methods])
        for name in names:
            if name == FULL_CACHE:  # every unit may keep every position: nothing is evicted
                chosen = run.methods.baseline("uniform", run.model.geometry.max_positions)
            elif name in methods:
                chosen = run.methods.baseline(name, budget or experiment.resolved.target)
            else:
                chosen = load_allocation(name, expect_geometry=run.model.geometry)
            (result,) = experiment.evaluator(split, scorer_for(chosen)).evaluate([chosen.budgets])
            if not result.ok:
                raise WorkflowError(f"evaluation of {name} failed: {result.error}")
            yield Evaluated(name, chosen, result, bootstrap_mean([o.score for o in result.instances], seed=recipe.seed))


def _check_decode(allocation: Allocation, held, source: str) -> None:
    """A file searched with its budgets held while decoding is scored that way, or not at all: the
    evaluators hold the recipe's setting (``budget.decode``), so the two must agree."""
    if allocation.decode != held:
        from evolalloc.core.errors import UserError

        def words(setting):
            return "prompt-only" if setting is None else f"held while decoding every {setting.interval} tokens"

        raise UserError(f"the profile is {words(allocation.decode)}, the recipe's evaluations are {words(held)}; "
                        "make budget.decode match the file's decode section", source=source, field="$.decode")


def compare_run(run_dir: Path, *, baselines: list[str] | None = None, progress: bool = True) -> None:
    """Re-run the held-out comparison of ``run_dir``'s shipped profiles against ``baselines``
    (default: its recipe's) and rewrite its ``comparison.json``.

    The profiles: every ``allocation-c*.json`` in the folder (the run's own and any a user added
    with ``expand --to``), each at the budget its file records (``target``), not its file name."""
    from evolalloc.config.run_folder import CURATION_FILE, load_run_recipe, profile_files
    from evolalloc.core.allocation_file import load_allocation
    from evolalloc.pipeline.experiment import Experiment
    from evolalloc.pipeline.run import compare

    files = profile_files(run_dir)
    if not files:
        raise WorkflowError(f"{run_dir} has no allocation-c*.json yet: finish "
                            f"the search first (evolalloc resume {run_dir})")
    recipe = load_run_recipe(run_dir)
    if baselines is not None:
        from evolalloc.config.recipe_checks import baseline_problem
        from evolalloc.core.errors import UserError

        for name in baselines:  # with the run's checkpoints (a method ranking with a trained scorer)
            problem = baseline_problem(recipe, name)
            if problem:
                raise UserError(problem, field="--baselines")
        recipe.baselines = baselines
    with Experiment(recipe, progress=progress, curation_file=run_dir / CURATION_FILE, run_dir=run_dir) as experiment:
        loaded = [load_allocation(path, expect_geometry=experiment.run.model.geometry) for path in files]
        profiles = {float(a.target): a for a in sorted(loaded, key=lambda a: a.target)}
        compare(run_dir, experiment, profiles)
