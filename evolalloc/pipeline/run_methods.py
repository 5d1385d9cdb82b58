"""The run's methods besides the searched one: its baselines at a budget, the provenance of a
profile's scorer, and LU-KV's utility curves (profiled once per run).

One ``RunMethods`` per run, shared by every task of a multi-task run.
"""

from __future__ import annotations

from typing import Callable

from evolalloc.config.search_start import is_profile_file
from evolalloc.core.allocation import Allocation
from evolalloc.core.baselines import EVOLVED, make_baseline, reading_checkpoints
from evolalloc.core.errors import UserError
from evolalloc.runtime.scorers import Scorer, get_scorer


def baseline_method(name: str, run_scorer: Scorer, checkpoints: dict | None = None):
    """Baseline ``name``; one that ranks with a trained scorer reads the checkpoint the recipe's
    ``checkpoints`` names for it, else the run's when the run's scorer is that one (both rows then use
    the same weights): ``core/baselines/composed.py: reading_checkpoints``."""
    return reading_checkpoints(name, checkpoints, (run_scorer.name, run_scorer.params()))


def with_scorer_provenance(allocation: Allocation, source: str | None = None) -> Allocation:
    """``allocation`` with its scorer's checkpoint fingerprint and training record in its provenance
    (``scorer_checkpoint``), when that scorer reads a checkpoint."""
    try:
        record = get_scorer(allocation.scorer, **allocation.scorer_params).checkpoint_provenance()
    except ValueError as err:
        raise UserError(str(err), source=source, field="scorer.params.checkpoint") from None
    if record:
        allocation.provenance["scorer_checkpoint"] = record
    return allocation


class RunMethods:
    """Args:
        scorer: the run's scorer, asked on first need (a trained one exists only after training).
        geometry: the model's geometry, asked on first need.
        model_spec: the recipe's ``model.spec`` (recorded in each allocation).
        source: the recipe's file, named in errors.
        profile_curves: LU-KV's curves for this run (``pipeline/lukv.py: run_curves``), called once.
        checkpoints: the recipe's ``checkpoints``: the file each trained scorer a method ranks with reads.
    """

    def __init__(self, scorer: Callable[[], Scorer], geometry: Callable[[], object], model_spec: str,
                 source: str | None, profile_curves: Callable[[], object], checkpoints: dict | None = None):
        self._scorer, self._geometry, self.model_spec, self.source = scorer, geometry, model_spec, source
        self.checkpoints = dict(checkpoints or {})
        self._profile_curves = profile_curves
        self._curves = None

    def make_baseline(self, name: str):
        return baseline_method(name, self._scorer(), self.checkpoints)

    def baseline(self, method: str, target: float, *, base: Allocation | None = None) -> Allocation:
        """Baseline ``method`` at ``target`` for this model, ranking with the run's scorer unless
        the baseline declares its own; ``reserved`` is the run scorer's always-kept tokens.
        ``base``: the allocation a method that adapts another one starts from (evolved+adakv)."""
        scorer = self._scorer()
        try:
            baseline = self.make_baseline(method)
            if baseline.profiled:  # lukv: its curves, profiled on the search split once per run
                baseline = make_baseline(method, curves=self.lukv_curves())
            allocation = baseline.allocation(self._geometry(), target, model=self.model_spec, scorer=scorer.name,
                                             scorer_params=scorer.params(), reserved=scorer.always_kept, base=base)
            return with_scorer_provenance(allocation, self.source)
        except ValueError as err:  # an unknown name (with did-you-mean) or a target it cannot hold
            raise UserError(str(err), field="baselines") from None

    def start_budgets(self, names, target: float) -> list:
        """The budgets ``[num_layers, num_kv_heads]`` of each method or allocation file of ``names`` at
        ``target``, for the run's scorer: the profiles a search starts from (``SearchConfig.start``; LU-KV's
        curves are profiled on the search split on first need, as for the comparison)."""
        return [self.file_budgets(name, target) if is_profile_file(name) else self.baseline(name, target).budgets
                for name in names]

    def file_budgets(self, path: str, target: float):
        """The budgets ``[num_layers, num_kv_heads]`` of the allocation file ``path`` carried to ``target``:
        proportionally, in either direction, completed to exactly ``target`` per unit with no unit below the
        run scorer's always-kept tokens. ``UserError`` naming the file: unreadable, another model's shape,
        or a profile that cannot be carried there."""
        from evolalloc.core.allocation_file import load_allocation

        allocation = load_allocation(path, expect_geometry=self._geometry())
        try:
            return allocation.rescale(target, min_budget=max(1, self._scorer().always_kept)).budgets
        except ValueError as err:
            raise UserError(f"cannot carry its budgets to c = {target:g}: {err}", source=path,
                            field="optimizer.start") from None

    def starts(self, config) -> Callable[[], list]:
        """What a search of ``config`` asks for its start's budgets (``search/loop.py``: only when they must
        be evaluated, a replay takes them from the trial store): ``start_budgets`` at its target."""
        import functools

        return functools.partial(self.start_budgets, config.start, config.target)

    def baselines_at(self, names, profiles: dict[float, Allocation]) -> dict[str, dict[float, Allocation]]:
        """Each baseline of ``names`` (in order) at every budget of ``profiles`` (the evolved ones, by
        budget): what ``compare`` scores beside them. A method that adapts the searched profile
        (evolved+adakv) starts from it at each budget."""
        methods = {}
        for name in names:
            base = profiles if make_baseline(name).adapts == EVOLVED else {}
            methods[name] = {budget: self.baseline(name, budget, base=base.get(budget)) for budget in profiles}
        return methods

    def with_scorer_provenance(self, allocation: Allocation) -> Allocation:
        return with_scorer_provenance(allocation, self.source)

    def profile_for(self, names) -> None:
        """LU-KV's curves now, if a method of ``names`` is profiled (lukv): they are profiled on the
        search split's records, so before those are released."""
        if any(make_baseline(name).profiled for name in names):
            self.lukv_curves()

    def lukv_curves(self):
        """LU-KV's utility curves for this run: the run folder's file, else profiled on the search
        split (its prefill records) and saved there. Profile before the search records are released."""
        if self._curves is None:
            from tqdm import tqdm

            self._curves = self._profile_curves()
            tqdm.write(f"lukv: utility curves of {self._curves.meta.get('instances')} {self._curves.meta.get('split')} "
                       f"instances, budgets {self._curves.floor}..{self._curves.max_budget}")
        return self._curves
