"""An experiment: the model, scorers and task(s) of a recipe, with the instances of each split.

It is what ``search``, ``evaluate`` and ``compare`` share: the model is loaded once, each split's
instances are generated once, and the prefill records of a split are made once and re-used by
every allocation and baseline evaluated on it. Each job lives in its own module; the experiment
puts them together and owns the recipe's engine (``ENGINES``), which it closes: use it as a
context manager, ``with Experiment(recipe) as experiment: ...``, or call ``close()``.

- ``pipeline/loaded_model.py``  ``ModelHandle``: weights once, geometry and tokenizer without them;
- ``pipeline/run_scorers.py``   ``RunScorers``: build, train, check the scorers; ``scorer_for``;
- ``pipeline/task_splits.py``   ``TaskSplits``: instances, curation, prefill records of one task;
- ``pipeline/run_records.py``   ``RunRecords``: the record policy (``b_max``, spill) and its keeper;
- ``pipeline/run_methods.py``   ``RunMethods``: baselines, scorer provenance, LU-KV's curves.

Those pieces are ``experiment.run.model``, ``.scorers``, ``.records`` and ``.methods``: code that
needs one takes it from there once (``run = experiment.run; run.scorers.min_budget``) rather than
through a forwarding method of the experiment, so a step does not go back and forth through this
module for every value (issue 37: ``benchmarks/recipe_path.py`` counts the trips). What stays here is
what needs the experiment itself: its parts, splits, search settings, engine and evaluators, and the
few forwards older callers (benchmarks, tests, the engine's workload) still read. The pieces, and the
modules it calls (curation, the record bound), are handed what they read, not the experiment.

A recipe with several ``tasks`` makes a ``MultiTaskExperiment``: one ``Experiment`` per task
(each a single-task recipe, ``Recipe.for_task``) sharing the run's model, scorers, record keeping
and methods; its evaluators are the parts' evaluators combined by ``WeightedEvaluator``.
"""

from __future__ import annotations

import copy
from functools import cached_property
from pathlib import Path

from evolalloc.config.resolved import ResolvedRun, resolve_run
from evolalloc.config.run_folder import RECORDS_FOLDER
from evolalloc.core.allocation import Allocation
from evolalloc.core.errors import UserError
from evolalloc.engine.base import ENGINES, Engine, Evaluator
from evolalloc.engine.workload import Workload
from evolalloc.pipeline import search_settings
from evolalloc.pipeline.curation import DRAWN, drawn_slice, is_drawn  # noqa: F401 - DRAWN, drawn_slice: the names callers use
from evolalloc.pipeline.loaded_model import ModelHandle
from evolalloc.pipeline.run_methods import RunMethods
from evolalloc.pipeline.run_records import RunRecords
from evolalloc.pipeline.run_scorers import RunScorers, scorer_for
from evolalloc.pipeline.task_splits import TaskSplits
from evolalloc.runtime.scorers import Scorer
from evolalloc.search.config import SearchConfig


class _Run:
    """What every task of a run shares: the model, scorers, record keeping, methods, and the files."""

    def __init__(self, experiment: "Experiment", curation_file: Path | None, run_dir: Path | None, bounded: bool):
        recipe = experiment.recipe
        self.curation_file, self.run_dir = curation_file, run_dir
        self.model = ModelHandle(recipe.model.spec, recipe.model.dtype, recipe.engine.threads)
        self.scorers = RunScorers(scorer=recipe.scorer, baselines=recipe.baselines, search_space=recipe.search_space,
                                  checkpoints=recipe.checkpoints, model_spec=recipe.model.spec, source=recipe.source,
                                  trainer=lambda: _trainer(experiment), progress=experiment.progress)
        self.records = RunRecords(
            recipe.engine, f"{recipe.model.spec}|{recipe.model.dtype}",
            bound=lambda: _run_bound(experiment) if bounded else None,  # False: whole records (`evaluate`)
            spill_dir=lambda: str(self.curation_file.parent / RECORDS_FOLDER) if self.curation_file else None)
        self.methods = RunMethods(lambda: self.scorers.scorer, lambda: self.model.geometry, recipe.model.spec,
                                  recipe.source, lambda: _profile_lukv(experiment), recipe.checkpoints)


def _trainer(experiment):
    from evolalloc.pipeline.scorer_training import TrainedScorer

    return TrainedScorer(experiment)


def _run_bound(experiment) -> int:
    from evolalloc.pipeline.record_bound import run_record_bound

    return max(run_record_bound(part.resolved.budgets, part.search_config, part.resolved.baselines, part.run.methods)
               for _, _, part in experiment.parts)


def _profile_lukv(experiment):
    """LU-KV's curves, profiled with (or checked against) the pieces the experiment hands ``pipeline/lukv.py``."""
    from evolalloc.pipeline.lukv import run_curves

    return run_curves(lambda: _profiled_run(experiment), experiment.run.run_dir)


def _profiled_run(experiment):
    from evolalloc.pipeline.lukv import ProfiledRun, ProfiledTask

    run = experiment.run
    tasks = tuple(ProfiledTask(label, weight, part.splits.task, part.splits.instances, part.splits.records,
                               part.recipe.task.question_after_compression, part.recipe.source)
                  for label, weight, part in experiment.parts)
    return ProfiledRun(loaded=run.model.loaded, scorer=run.scorers.scorer, min_budget=run.scorers.min_budget,
                       geometry=run.model.geometry, model_spec=experiment.resolved.model,
                       task_names=experiment.resolved.task_names, tasks=tasks)


class Experiment:
    """Args:
        recipe: the resolved recipe (several ``tasks``: a ``MultiTaskExperiment`` is made instead).
        progress: show progress bars (and print curation lines).
        curation_file: the run folder's ``curation.json``: curations are recorded there and, when
            it already holds one, re-used (so resume and compare see the same instances). None: kept
            in memory only (``record_curations`` writes them once the run folder exists).
        bounded: False: whole records (a one-off evaluation of any budgets, e.g. ``evaluate``).
        run_dir: the run folder, where a profiled baseline's curves are read from or saved to
            (``lukv-curves.npz``); None: profiled in memory.
        resolved: what ``recipe`` resolved to (``Recipe.resolved``), when the caller has it already
            (``pipeline/start.py``); None: resolved here.
    """

    def __new__(cls, recipe=None, **kwargs):  # recipe None: ``copy.copy`` making a ``variant``
        if cls is Experiment and recipe is not None and recipe.multi_task:
            return super().__new__(MultiTaskExperiment)
        return super().__new__(cls)

    def __init__(self, recipe, *, progress: bool = True, curation_file: str | Path | None = None, bounded: bool = True,
                 run_dir: str | Path | None = None, resolved: ResolvedRun | None = None, _run: _Run | None = None,
                 _label: str | None = None):
        self.recipe = recipe
        #: What the recipe resolved to (``config/resolved.py``), once: the budgets, the fitness modes
        #: and the methods every later step takes from here.
        self.resolved: ResolvedRun = resolved if resolved is not None else resolve_run(recipe)
        self.progress = progress
        self.label = _label or self.resolved.task_names
        self._owns_run = _run is None  # the parts of a multi-task run share their whole's
        self.run = _run or _Run(self, Path(curation_file) if curation_file is not None else None,
                                Path(run_dir) if run_dir is not None else None, bounded)
        self.splits = TaskSplits(recipe.task, self.run, self._curate, label=self.label, source=recipe.source,
                                 progress=progress)
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
        self.splits.records_of.clear()
        if self._owns_run:
            self.run.records.close()  # removes a temporary spill folder

    @property
    def parts(self) -> list[tuple[str, float, "Experiment"]]:
        """``(label, weight, experiment)`` per task; a single-task experiment is its own one part."""
        return [(self.label, 1.0, self)]

    def variant(self, recipe) -> "Experiment":
        """This experiment under ``recipe``, another recipe of the same model and task (variants of one
        search that share one prefill: ``benchmarks/search_versus.py``). The model, scorers, records,
        splits and engine stay this experiment's (closed with it); the recipe, and so the search
        settings, the run's name and what it resolved to, are the variant's."""
        self.engine  # noqa: B018 - made now, so the variant shares it rather than starting its own
        twin = copy.copy(self)
        twin.recipe = recipe
        twin.resolved = resolve_run(recipe)
        twin.__dict__.pop("search_config", None)  # the variant's own settings, made on first use
        twin._owns_run = False
        return twin

    @cached_property
    def search_config(self) -> SearchConfig:
        """The search's settings on this model (``pipeline/search_settings.py``), made once: the start
        checks them, the search runs them and the record bound reads their ratio bound."""
        recipe = self.recipe
        return search_settings.search_config(recipe.search_space, recipe.optimizer, target=self.resolved.target,
                                             geometry=self.run.model.geometry, min_budget=self.run.scorers.min_budget,
                                             storage=recipe.storage, study_name=recipe.name, start=self.resolved.start)

    def _curate(self, split: str, drawn: list):
        """Judge ``split``'s ``drawn`` candidates with the model (its splits ask, on first need)."""
        from evolalloc.pipeline.curation import curate

        return curate(self.splits.section(split), split, drawn, self.label, geometry=self.run.model.geometry,
                      target=self.resolved.target, engine=self.recipe.engine, baseline=self.run.methods.baseline,
                      evaluator=lambda name: self.evaluator(name, mode="generate"))

    def record_curations(self, path: str | Path) -> None:
        """Write every curation made so far into ``path`` (the run folder's ``curation.json``, once it
        exists) and record later ones there too; records spill into the run folder from now on."""
        from evolalloc.pipeline.curation import save_curation

        self.run.curation_file = Path(path)
        self.run.records.spill_into(str(self.run.curation_file.parent / RECORDS_FOLDER))
        for _, _, part in self.parts:
            for split, record in part.curations.items():
                save_curation(self.run.curation_file, record, part.splits.section(split))

    # Forwards to the pieces, for the callers that still read them here (benchmarks, tests, the
    # service's remote worker, the workload's providers); the pipeline takes ``self.run.<piece>``.
    # The model (pipeline/loaded_model.py).
    @property
    def loaded(self):
        return self.run.model.loaded

    @property
    def geometry(self):
        return self.run.model.geometry

    @property
    def tokenizer(self):
        return self.run.model.tokenizer

    # The scorers (pipeline/run_scorers.py).
    @property
    def scorer(self) -> Scorer:
        return self.run.scorers.scorer

    @property
    def scorers(self) -> list[Scorer]:
        return self.run.scorers.all

    @property
    def search_scorer(self) -> Scorer:
        return self.run.scorers.search_scorer

    def ensure_scorer_trained(self) -> None:
        self.run.scorers.ensure_trained()

    def rank_also(self, allocations: list[Allocation]) -> None:
        self.run.scorers.rank_also(allocations)

    def scorer_for(self, allocation: Allocation) -> Scorer:
        return scorer_for(allocation)

    # The methods besides the searched one (pipeline/run_methods.py).
    def make_baseline(self, name: str):
        return self.run.methods.make_baseline(name)

    def baseline(self, method: str, target: float, *, base: Allocation | None = None) -> Allocation:
        return self.run.methods.baseline(method, target, base=base)

    # The task's splits (pipeline/task_splits.py) and the records kept of them (pipeline/run_records.py).
    @property
    def task(self):
        return self.splits.task

    @property
    def curations(self) -> dict[str, object]:
        return self.splits.curations

    def draw_instances(self, splits) -> list[tuple["Experiment", str]]:
        """Every part's instances of ``splits`` that need no model: a plain split's, and a curated one's
        drawn candidates (the dataset read with the tokenizer only, each instance checked to fit).
        Returns the curated ``(part, split)``s, whose candidates are judged with the model later
        (``part.instances(split)``)."""
        return [(part, split) for _, _, part in self.parts for split in part.splits.draw(splits)]

    def instances(self, split: str) -> list:
        return self.splits.instances(split)

    def records(self, split: str) -> list:
        return self.splits.records(split)

    @property
    def record_policy(self):
        return self.run.records.policy

    @property
    def keeper(self):
        return self.run.records.keeper

    def bound_split(self, split: str, allocations) -> int | None:
        """Bound ``split``'s records (not made yet) by the most these allocations give one unit, when
        that is below the run's ``b_max`` and none of them adapts per instance (an adaptive method
        could move more to one head; it keeps the run's ``b_max`` cap). ``compare`` calls it with
        every profile and baseline it scores on the held-out split, so those records keep only what
        is read: every kept token, logit and score is what a record bounded at the run's ``b_max``
        gives (``runtime/bounded.py``). Returns the bound set, or ``None`` (nothing changed)."""
        from evolalloc.runtime.adaptive import Adapted

        if self.record_policy.bound is None or any(split in part.splits.records_of for _, _, part in self.parts):
            return None  # whole records asked for, or already made (and maybe spilled) at the run's bound
        allocations = list(allocations)
        if not allocations or any(isinstance(scorer_for(a), Adapted) for a in allocations):
            return None
        return self.run.records.bound_split(split, max(int(a.budgets.max()) for a in allocations))

    def release(self, split: str) -> None:
        """Forget a split's prefill records (the search split's, once the search is over)."""
        for _, _, part in self.parts:
            self.keeper.forget(part.splits.records_of.pop(split, None) or [])
        from evolalloc.runtime.heap import give_back

        give_back()

    # Evaluation on the recipe's engine.
    @property
    def engine(self) -> Engine:
        """The recipe's engine, built on first use with ``engine.options``."""
        if self._engine is None:
            section = self.recipe.engine
            try:
                self._engine = ENGINES.create(section.kind, self.workload, **section.options)
            except ValueError as err:  # an unknown engine or option (the registry's message)
                raise UserError(str(err), source=self.recipe.source, field="engine") from None
        return self._engine

    @cached_property
    def workload(self) -> Workload:
        """What the engine evaluates (``engine/workload.py``); the model, task, instances and records
        are this experiment's own, provided on the engine's first use of each (its splits' own, so
        that an engine asking for them does not come back through the experiment)."""
        recipe = self.recipe
        return Workload(
            model_spec=recipe.model.spec, dtype=recipe.model.dtype, task_name=recipe.task.name,
            task_params=dict(recipe.task.params), question_after_compression=recipe.task.question_after_compression,
            batch_size=recipe.engine.batch_size, workers=recipe.engine.workers, threads=recipe.engine.threads,
            address=recipe.engine.address, decode=self.resolved.decode,
            load_model=lambda: self.run.model.loaded, load_task=lambda: self.task,
            scorers=lambda: self.run.scorers.all, instances=self.splits.instances, records=self.splits.records,
            record_policy_for=self.run.records.policy_for,
        )

    def evaluator(self, split: str, scorer: Scorer | None = None, mode: str | None = "generate") -> Evaluator:
        """An evaluator of ``split`` for ``scorer`` (default: the recipe's) on the recipe's engine.

        ``mode``: what a candidate is scored by: "generate" (the task's metric), "graded",
        "likelihood" or "fidelity" (``fitness.FITNESS_MODES``; anything else is a ``ValueError`` naming them);
        ``None`` = the task's fitness mode (the recipe's ``fitness.mode``, else the task's default).
        """
        from fitness.task import check_fitness_mode

        mode = mode or self.resolved.fitness_mode  # the recipe's mode, else the task's
        check_fitness_mode(mode)  # before an engine starts any worker
        self.ensure_scorer_trained()  # before any worker (a Ray actor too) reads the checkpoint
        return self.engine.evaluator(split, scorer or self.scorer, mode=mode)

    def search_evaluator(self) -> Evaluator:
        """What the search scores candidates with: the search split, in the fitness mode."""
        return self.evaluator("search", self.search_scorer, mode=None)


class MultiTaskExperiment(Experiment):
    """A recipe with several ``tasks``: one part-experiment per task, sharing the run's model, scorers,
    record keeping and methods; instances are every part's in order, evaluators weighted."""

    @cached_property
    def parts(self) -> list[tuple[str, float, Experiment]]:
        return [(entry.label, entry.weight,
                 Experiment(self.recipe.for_task(entry), progress=self.progress, _run=self.run, _label=entry.label))
                for entry in self.recipe.task_entries]

    def close(self) -> None:
        if "parts" in self.__dict__:
            for _, _, part in self.parts:
                part.close()
        super().close()

    @property
    def task(self):
        raise TypeError("an experiment on several tasks has one task per part (Experiment.parts)")

    def instances(self, split: str) -> list:
        return [inst for _, _, part in self.parts for inst in part.instances(split)]

    def evaluator(self, split: str, scorer: Scorer | None = None, mode: str | None = "generate") -> Evaluator:
        """The weighted mean of the parts' scores (``WeightedEvaluator``)."""
        from evolalloc.engine.weighted import WeightedEvaluator

        return WeightedEvaluator([(label, weight, part.evaluator(split, scorer, mode))
                                  for label, weight, part in self.parts])
