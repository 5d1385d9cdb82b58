"""An experiment: the model, scorer and task of a recipe, with the instances of each split.

It is what ``search``, ``evaluate`` and ``compare`` share: the model is loaded once, each split's
instances are generated once, and the prefill records of a split are made once and re-used by
every allocation and baseline evaluated on it.
"""

from __future__ import annotations

from functools import cached_property

from evolalloc.core.allocation import Allocation
from evolalloc.engine.base import Evaluator
from evolalloc.engine.factory import make_evaluator
from evolalloc.engine.local import prefill_instances
from evolalloc.core.errors import UserError
from evolalloc.runtime.scorers import Scorer, get_scorer


class Experiment:
    def __init__(self, recipe, *, progress: bool = True):
        self.recipe = recipe
        self.progress = progress
        self._records: dict[str, list] = {}
        self._instances: dict[str, list] = {}

    @cached_property
    def loaded(self):
        import torch

        from evolalloc.runtime.model import load_model

        if self.recipe.engine.threads:
            torch.set_num_threads(self.recipe.engine.threads)
        return load_model(self.recipe.model.spec, dtype=self.recipe.model.dtype)

    @property
    def geometry(self):
        return self.loaded.geometry

    @cached_property
    def scorer(self) -> Scorer:
        try:
            return get_scorer(self.recipe.scorer.name, **self.recipe.scorer.params)
        except ValueError as err:
            raise UserError(str(err), source=self.recipe.source, field="scorer") from None

    @cached_property
    def task(self):
        from fitness import FitnessError, get_task

        try:
            return get_task(self.recipe.task.name, **self.recipe.task.params)
        except FitnessError as err:
            raise UserError(str(err), source=self.recipe.source, field="task") from None

    @cached_property
    def scorers(self) -> list[Scorer]:
        """Every scorer the run needs rankings for: the recipe's, and streaming for its baseline."""
        scorers = [self.scorer]
        if "streaming" in self.recipe.baselines and self.scorer.name != "streaming":
            scorers.append(get_scorer("streaming"))
        return scorers

    def instances(self, split: str):
        """A split's instances, generated once (generation tokenizes to hit the context length)."""
        from fitness import FitnessError

        if split not in self._instances:
            section = self.recipe.task.search if split == "search" else self.recipe.task.heldout
            try:
                self._instances[split] = self.task.instances(
                    split, section.n, section.seed, self.recipe.task.context_tokens, self.loaded.tokenizer
                )
            except FitnessError as err:
                raise UserError(str(err), source=self.recipe.source, field=f"task.{split}") from None
        return self._instances[split]

    def records(self, split: str) -> list:
        """Prefill records of a split, made once, holding every scorer's ranking."""
        if split not in self._records:
            self._records[split] = prefill_instances(
                self.loaded, self.instances(split), self.scorers,
                question_after_compression=self.recipe.task.question_after_compression, progress=self.progress,
            )
        return self._records[split]

    def evaluator(self, split: str, scorer: Scorer | None = None, mode: str = "generate") -> Evaluator:
        """An evaluator of ``split`` for ``scorer`` (default: the recipe's) on the recipe's engine,
        scoring in fitness ``mode``: generate (the task's metric), graded or likelihood."""
        return make_evaluator(self, split, scorer, mode)

    def scorer_for(self, allocation: Allocation) -> Scorer:
        try:
            return get_scorer(allocation.scorer, **allocation.scorer_params)
        except ValueError as err:
            raise UserError(str(err), field="scorer") from None

    def baseline(self, method: str, target: float) -> Allocation:
        """A baseline allocation at ``target`` for this model."""
        common = dict(model=self.recipe.model.spec)
        if method == "uniform":
            return Allocation.uniform(self.geometry, target, scorer=self.scorer.name, scorer_params=self.scorer.params(), **common)
        if method == "pyramid":
            # PyramidKV's observation window sits on top of its pyramid: reserve the always-kept tokens.
            return Allocation.pyramid(self.geometry, target, reserved=self.scorer.always_kept, scorer=self.scorer.name,
                                      scorer_params=self.scorer.params(), **common)
        if method == "streaming":
            return Allocation.streaming(self.geometry, target, **common)
        raise UserError(f"unknown baseline {method!r}; baselines: uniform, pyramid, streaming", field="baselines")

    def min_budget(self) -> int:
        return max(1, self.scorer.always_kept)

