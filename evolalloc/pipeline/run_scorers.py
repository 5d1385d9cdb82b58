"""The run's scorers: the recipe's (built, trained when the run trains it, checked), the ones the
baselines and ``evaluate``'s files rank with, and the scorer each allocation selects tokens with.

One ``RunScorers`` per run, shared by every task of a multi-task run (the scorer section is shared).
"""

from __future__ import annotations

from functools import cached_property
from typing import Callable

from evolalloc.core.allocation import Allocation
from evolalloc.core.errors import UserError
from evolalloc.pipeline.run_methods import baseline_method
from evolalloc.runtime.scorers import Scorer, get_scorer


class RunScorers:
    """The pieces of the recipe it reads, not the recipe (issue 37: a piece handed on is that piece's
    business; the experiment hands them on, ``pipeline/experiment.py``).

    Args:
        scorer: the recipe's ``scorer`` section (``name``, ``params``, ``train``).
        baselines: the methods compared (``baselines``), each of which may rank with its own scorer.
        search_space: the ``search_space`` section (a hybrid space's budget adapter).
        checkpoints: ``checkpoints``: a baseline scorer's trained weights, by scorer name.
        model_spec: the model the checkpoints must have been trained for.
        source: the recipe's file, named in errors.
        trainer: makes the run's ``TrainedScorer`` (``pipeline/scorer_training.py``) when
            ``scorer.train`` asks for one; called once, on first need.
        progress: show the training's progress.
    """

    def __init__(self, scorer, baselines, search_space, checkpoints: dict, model_spec: str, source: str | None,
                 trainer: Callable[[], object], *, progress: bool = True):
        self.section, self.baselines, self.search_space = scorer, list(baselines), search_space
        self.checkpoints, self.model_spec, self.source = dict(checkpoints or {}), model_spec, source
        self._trainer = trainer
        self.progress = progress
        #: Scorers ranked at prefill besides the recipe's and the baselines' (``pipeline/headroom.py``;
        #: ``evaluate``: an allocation file's own scorer); set before the first records are made.
        self.extra: list[Scorer] = []

    def _build(self, params: dict) -> Scorer:
        try:
            return get_scorer(self.section.name, **params)
        except ValueError as err:
            raise UserError(str(err), source=self.source, field="scorer") from None

    @cached_property
    def declared(self) -> Scorer:
        """The scorer as the recipe's section declares it, built without the model: the same settings
        (and ``min_budget``) as ``scorer``, whose checkpoint path a run that trains its scorer only
        knows once the weights are loaded. The cheap checks of a start use this one."""
        return self._build(dict(self.section.params))

    @cached_property
    def trained(self):
        """The in-run training ``scorer.train`` asks for (``pipeline.scorer_training``), or None."""
        return self._trainer() if self.section.train is not None else None

    @cached_property
    def scorer(self) -> Scorer:
        """The run's scorer; a trained one reads the checkpoint keyed by content (which needs the weights)."""
        if self.section.train is None:
            return self.declared
        return self._build({**self.section.params, "checkpoint": str(self.trained.checkpoint)})

    def check_without_weights(self) -> None:
        """Build (and so check) what needs no model weights: the declared scorer, and every scorer the
        baselines rank with too, unless the run trains its scorer (its checkpoint path is keyed by
        the weights: those are built once the model is loaded)."""
        self.declared  # noqa: B018
        if self.section.train is None:
            self.all  # noqa: B018

    @cached_property
    def min_budget(self) -> int:
        """The least budget a (layer, KV head) may get in this run: the scorer's always-kept tokens
        (one at least). The checkpoint does not change it: no weights needed."""
        return self.declared.min_budget

    def ensure_trained(self) -> None:
        """Train the run's scorer now if the recipe asks for it and it is not trained yet (cached)."""
        if self.trained is not None and not self.trained.checkpoint.is_file():
            self.trained.ensure(progress=self.progress)
            from evolalloc.runtime.heap import give_back

            give_back()  # the training's traces (~24 MB per prompt at 1k tokens), freed but still resident

    def rank_also(self, allocations: list[Allocation]) -> None:
        """Rank every record with these allocations' own scorers too (``evaluate FILE``). Call it
        before the first records are made."""
        for allocation in allocations:
            try:
                self.extra.append(get_scorer(allocation.scorer, **allocation.scorer_params))
            except ValueError as err:
                raise UserError(str(err), field="scorer_params") from None

    @cached_property
    def all(self) -> list[Scorer]:
        """Every scorer the run needs rankings for: the recipe's, the extra ones, and each one a
        baseline declares (streaming ranks with StreamingLLM's), once per distinct ``key``."""
        scorers = {self.scorer.key: self.scorer}
        for extra in self.extra:
            scorers.setdefault(extra.key, extra)
        for name in self.baselines:
            declared = baseline_method(name, self.scorer, self.checkpoints).scorer
            if declared is not None:
                extra = get_scorer(declared[0], **declared[1])
                scorers.setdefault(extra.key, extra)
        return list(scorers.values())

    def check_checkpoints(self, model, geometry) -> None:
        """Refuse (``UserError`` naming the recipe field) a scorer checkpoint that is missing, unreadable
        or trained for another ``model`` (the loaded torch module); one the run trains itself is not checked."""
        from evolalloc.runtime.policy import model_identity

        identity = model_identity(self.model_spec, model)
        trained = str(self.trained.checkpoint) if self.trained is not None else None
        for scorer in self.all:
            if trained is not None and scorer.params().get("checkpoint") == trained:
                continue  # made by this run's training step (the global-topk method reads it too)
            try:
                scorer.check_checkpoint(geometry.to_dict(), identity)
            except ValueError as err:
                field = "scorer.params.checkpoint" if scorer is self.scorer else self._named_in(scorer)
                raise UserError(str(err), source=self.source, field=field) from None

    def _named_in(self, scorer: Scorer) -> str:
        """The recipe field that gave a baseline's ``scorer`` its checkpoint: ``checkpoints.KEY``, else
        ``baselines``."""
        from evolalloc.core.scorer_names import canonical_scorer

        for key in self.checkpoints:
            if canonical_scorer(str(key)) == canonical_scorer(scorer.name):
                return f"checkpoints.{key}"
        return "baselines"

    @cached_property
    def search_scorer(self) -> Scorer:
        """The recipe's scorer, wrapped in the budget adapter the search space's budgets are meant
        for (the hybrid's ``score_prior``), if it declares one."""
        from evolalloc.search.config import space_params_of
        from searchspaces import SEARCH_SPACES

        adapter = SEARCH_SPACES.get(self.search_space.name).adapter
        if adapter is None:
            return self.scorer
        from evolalloc.runtime.adaptive import Adapted, get_adapter

        try:  # the space's own settings are its adapter's (floors_under_global_topk's floor_fraction)
            return Adapted(self.scorer, get_adapter(adapter, **space_params_of(self.search_space)))
        except ValueError as err:
            raise UserError(str(err), source=self.source, field="search_space.name") from None


def scorer_for(allocation: Allocation) -> Scorer:
    """The scorer ``allocation`` ranks with; for an input-adaptive method (its ``method`` a
    baseline with an ``adapter``: AdaKV, CAKE, global-topk; or a hybrid profile naming one) wrapped so
    that each instance's budgets are adapted when its record is compressed (``runtime.adaptive``)."""
    from evolalloc.runtime.adaptive.selection import scorer_for_allocation

    try:
        scorer = scorer_for_allocation(allocation)
        _check_same_checkpoint(allocation, scorer)
        return scorer
    except ValueError as err:
        raise UserError(str(err), field="scorer") from None


def _check_same_checkpoint(allocation: Allocation, scorer: Scorer) -> None:
    """A profile searched over a trained scorer is only reproduced by that scorer's weights: refuse
    (``ValueError``) when the checkpoint at its path is no longer the file it recorded."""
    recorded = (allocation.provenance.get("scorer_checkpoint") or {}).get("sha256")
    if recorded:
        now = scorer.checkpoint_provenance()
        if now is None or now["sha256"] != recorded:
            where, holds = (now["path"], now["sha256"][:12]) if now else ("its scorer", "-")
            raise ValueError(f"the profile was made with the {allocation.scorer} checkpoint sha256 {recorded[:12]}..., "
                             f"but {where} now holds sha256 {holds}...; restore that checkpoint to reproduce it")
