"""An experiment: the model, scorer and task of a recipe, with the instances of each split.

It is what ``search``, ``evaluate`` and ``compare`` share: the model is loaded once, each split's
instances are generated once, and the prefill records of a split are made once and re-used by
every allocation and baseline evaluated on it.

It owns the recipe's engine (``ENGINES``) and closes it: use it as a context manager,
``with Experiment(recipe) as experiment: ...``, or call ``close()``.
"""

from __future__ import annotations

from functools import cached_property

from evolalloc.core.allocation import Allocation
from evolalloc.core.baselines import make_baseline
from evolalloc.engine.base import ENGINES, Engine, Evaluator
from evolalloc.engine.local import prefill_instances
from evolalloc.core.errors import UserError
from evolalloc.runtime.scorers import Scorer, get_scorer


class Experiment:
    def __init__(self, recipe, *, progress: bool = True):
        self.recipe = recipe
        self.progress = progress
        self._records: dict[str, list] = {}
        self._instances: dict[str, list] = {}
        self._engine: Engine | None = None

    def __enter__(self) -> "Experiment":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        """Close the engine (stops Ray workers) and drop the prefill records; harmless twice."""
        if self._engine is not None:
            self._engine.close()
            self._engine = None
        self._records.clear()

    @property
    def engine(self) -> Engine:
        """The recipe's engine, built on first use with ``engine.options``."""
        if self._engine is None:
            section = self.recipe.engine
            try:
                self._engine = ENGINES.create(section.kind, self, **section.options)
            except ValueError as err:  # an unknown engine or option (the registry's message)
                raise UserError(str(err), source=self.recipe.source, field="engine") from None
        return self._engine

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
        """Every scorer the run needs rankings for: the recipe's, and each one a baseline declares
        (streaming ranks with StreamingLLM's), once per distinct ``key``."""
        scorers = {self.scorer.key: self.scorer}
        for name in self.recipe.baselines:
            declared = make_baseline(name).scorer
            if declared is not None:
                extra = get_scorer(declared[0], **declared[1])
                scorers.setdefault(extra.key, extra)
        return list(scorers.values())

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
            self._check_fits(self._instances[split])
        return self._instances[split]

    def _check_fits(self, instances) -> None:
        """Refuse (``UserError`` on ``task.context_tokens``) an instance beyond the model's positions."""
        from evolalloc.engine.local import tokenize_instance

        limit = self.geometry.max_positions
        if not limit:
            return
        for instance in instances:
            ids, question = tokenize_instance(self.loaded.tokenizer, instance, self.recipe.task.question_after_compression)
            needed = len(ids) + len(question or []) + instance.max_new_tokens
            if needed > limit:
                raise UserError(f"instance {instance.uid} needs {needed} positions (prompt and answer), beyond the "
                                f"model's {limit}; choose a shorter context", source=self.recipe.source,
                                field="task.context_tokens")

    def records(self, split: str) -> list:
        """Prefill records of a split, made once, holding every scorer's ranking."""
        if split not in self._records:
            self._records[split] = prefill_instances(
                self.loaded, self.instances(split), self.scorers,
                question_after_compression=self.recipe.task.question_after_compression, progress=self.progress,
            )
        return self._records[split]

    def evaluator(self, split: str, scorer: Scorer | None = None) -> Evaluator:
        """An evaluator of ``split`` for ``scorer`` (default: the recipe's) on the recipe's engine."""
        return self.engine.evaluator(split, scorer or self.scorer)

    def scorer_for(self, allocation: Allocation) -> Scorer:
        try:
            return get_scorer(allocation.scorer, **allocation.scorer_params)
        except ValueError as err:
            raise UserError(str(err), field="scorer") from None

    def baseline(self, method: str, target: float) -> Allocation:
        """Baseline ``method`` at ``target`` for this model, ranking with the run's scorer unless
        the baseline declares its own; ``reserved`` is the run scorer's always-kept tokens."""
        try:
            baseline = make_baseline(method)
            return baseline.allocation(self.geometry, target, model=self.recipe.model.spec, scorer=self.scorer.name,
                                       scorer_params=self.scorer.params(), reserved=self.scorer.always_kept)
        except ValueError as err:  # an unknown name (with did-you-mean) or a target it cannot hold
            raise UserError(str(err), field="baselines") from None

    def min_budget(self) -> int:
        return max(1, self.scorer.always_kept)

