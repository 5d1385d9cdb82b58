"""An experiment: the model, scorer and task of a recipe, with the instances of each split.

It is what ``search``, ``evaluate`` and ``compare`` share: the model is loaded once, each split's
instances are generated once, and the prefill records of a split are made once and re-used by
every allocation and baseline evaluated on it.

It owns the recipe's engine (``ENGINES``) and closes it: use it as a context manager,
``with Experiment(recipe) as experiment: ...``, or call ``close()``.

Curated splits (``task.<split>.curate``, see ``pipeline/curation.py``) are drawn as the pseudo-split
``"<split>:drawn"``, judged, and the kept instances become the split (their prefill records are
re-used). A recipe with several ``tasks`` is one part-experiment per task (each a single-task
recipe, ``Recipe.for_task``), sharing the model; its evaluators are the parts' evaluators
combined by ``WeightedEvaluator``.
"""

from __future__ import annotations

from functools import cached_property
from pathlib import Path

from evolalloc.core.allocation import Allocation
from evolalloc.core.baselines import BASELINES, make_baseline
from evolalloc.engine.base import ENGINES, Engine, Evaluator
from evolalloc.engine.local import prefill_instances
from evolalloc.core.errors import UserError
from evolalloc.runtime.scorers import Scorer, get_scorer


DRAWN = ":drawn"


class Experiment:
    """Args:
        recipe: the resolved recipe.
        progress: show progress bars (and print curation lines).
        curation_file: the run folder's ``curation.json``: curations are recorded there and, when
            it already holds one, re-used (so resume and compare see the same instances). None: kept
            in memory only (``record_curations`` writes them once the run folder exists).
        run_dir: the run folder, where a profiled baseline's curves are read from or saved to
            (``lukv-curves.npz``); None: profiled in memory.
    """

    def __init__(self, recipe, *, progress: bool = True, curation_file: str | Path | None = None, _parent=None,
                 _label: str | None = None, run_dir: str | Path | None = None):
        self.recipe = recipe
        self.progress = progress
        self.curation_file = Path(curation_file) if curation_file is not None else None
        self.curations: dict[str, object] = {}  # split -> Curation, for this (single-task) experiment
        self._parent = _parent
        self.label = _label or recipe.task_names
        self._records: dict[str, list] = {}
        self._instances: dict[str, list] = {}
        self._engine: Engine | None = None
        self.run_dir = Path(run_dir) if run_dir is not None else None
        self._curves = None

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
        if self.recipe.multi_task and "parts" in self.__dict__:
            for _, _, part in self.parts:
                part.close()

    @cached_property
    def parts(self) -> list[tuple[str, float, "Experiment"]]:
        """``(label, weight, experiment)`` per task; a single-task experiment is its own one part."""
        if not self.recipe.multi_task:
            return [(self.label, 1.0, self)]
        return [(entry.label, entry.weight,
                 Experiment(self.recipe.for_task(entry), progress=self.progress, curation_file=self.curation_file,
                            _parent=self, _label=entry.label))
                for entry in self.recipe.task_entries]

    @property
    def fitness_mode(self) -> str:
        """What the search climbs on this (single-task) experiment: the recipe's mode, else the task's."""
        return self.recipe.fitness.mode or getattr(self.task, "default_fitness_mode", "generate")

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
        if self._parent is not None:
            return self._parent.loaded  # the parts of a multi-task experiment share one model
        import torch

        from evolalloc.runtime.model import load_model

        if self.recipe.engine.threads:
            torch.set_num_threads(self.recipe.engine.threads)
        return load_model(self.recipe.model.spec, dtype=self.recipe.model.dtype)

    @property
    def geometry(self):
        return self.loaded.geometry

    @cached_property
    def scorer(self) -> Scorer:  # the same for every part: the scorer section is shared
        try:
            return get_scorer(self.recipe.scorer.name, **self.recipe.scorer.params)
        except ValueError as err:
            raise UserError(str(err), source=self.recipe.source, field="scorer") from None

    @cached_property
    def task(self):
        from fitness import FitnessError, get_task

        if self.recipe.multi_task:
            raise TypeError("an experiment on several tasks has one task per part (Experiment.parts)")
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

    def split_section(self, split: str):
        """The recipe section (``n``, ``seed``, ``curate``) of ``split`` ("search" or "heldout")."""
        base = split.removesuffix(DRAWN)
        return self.recipe.task.search if base == "search" else self.recipe.task.heldout

    def instances(self, split: str):
        """A split's instances, generated once (generation tokenizes to hit the context length).

        ``split`` is "search" or "heldout" — curated when the recipe says so — or ``"<split>:drawn"``,
        the candidates a curated split is chosen from. Several tasks: every part's, in order.
        """
        if self.recipe.multi_task:
            return [inst for _, _, part in self.parts for inst in part.instances(split)]
        if split not in self._instances:
            section = self.split_section(split)
            if split.endswith(DRAWN):
                self._instances[split] = self._generate(split.removesuffix(DRAWN), section.curate.draw or 2 * section.n)
            elif section.curate.active:
                self._instances[split] = self._curated(split)
            else:
                self._instances[split] = self._generate(split, section.n)
        return self._instances[split]

    def _generate(self, split: str, n: int) -> list:
        from fitness import FitnessError

        section = self.split_section(split)
        try:
            instances = self.task.instances(split, n, section.seed, self.recipe.task.context_tokens, self.loaded.tokenizer)
        except FitnessError as err:
            raise UserError(str(err), source=self.recipe.source, field=f"task.{split}") from None
        self._check_fits(instances)
        return instances

    def _curated(self, split: str) -> list:
        from tqdm import tqdm

        from evolalloc.pipeline.curation import curate, load_curation, save_curation

        section = self.split_section(split)
        drawn = self.instances(split + DRAWN)
        record = load_curation(self.curation_file, self.label, split, section)
        if record is None:
            record = curate(self, split, drawn, self.label)
            save_curation(self.curation_file, record, section)
        by_uid = {inst.uid: inst for inst in drawn}
        missing = [uid for uid in record.kept_uids if uid not in by_uid]
        if missing:
            raise UserError(f"the stored curation keeps instances this task no longer draws, e.g. {missing[0]!r}",
                            source=str(self.curation_file))
        self.curations[split] = record
        tqdm.write(record.line())
        if not record.kept_uids:
            raise UserError(f"curation kept no instance of the {split} split ({record.line()})",
                            source=self.recipe.source, field=f"task.{split}.curate")
        return [by_uid[uid] for uid in record.kept_uids]

    def record_curations(self, path: str | Path) -> None:
        """Write every curation made so far into ``path`` (the run folder's ``curation.json``, once it
        exists) and record later ones there too."""
        from evolalloc.pipeline.curation import save_curation

        self.curation_file = Path(path)
        for _, _, part in self.parts:
            part.curation_file = self.curation_file
            for split, record in part.curations.items():
                save_curation(self.curation_file, record, part.split_section(split))

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
        """Prefill records of a split, made once, holding every scorer's ranking.

        A curated split re-uses the records its drawn candidates already have.
        """
        if split not in self._records:
            instances = self.instances(split)
            # Drop the drawn candidates' records once the kept ones are picked: ~46 MB each at 1k tokens.
            drawn = self._records.pop(split + DRAWN, None)
            if drawn is not None:
                by_uid = {record.uid: record for record in drawn}
                self._records[split] = [by_uid[inst.uid] for inst in instances]
            else:
                self._records[split] = prefill_instances(
                    self.loaded, instances, self.scorers,
                    question_after_compression=self.recipe.task.question_after_compression, progress=self.progress,
                )
        return self._records[split]

    def release(self, split: str) -> None:
        """Forget a split's prefill records (the search split's, once the search is over)."""
        for _, _, part in self.parts:
            part._records.pop(split, None)

    def evaluator(self, split: str, scorer: Scorer | None = None, mode: str | None = "generate") -> Evaluator:
        """An evaluator of ``split`` for ``scorer`` (default: the recipe's) on the recipe's engine.

        ``mode``: what a candidate is scored by: "generate" (the task's metric), "graded" or
        "likelihood" (``fitness.FITNESS_MODES``; anything else is a ``ValueError`` naming them);
        ``None`` = each task's fitness mode (the recipe's ``fitness.mode``, else the task's default).
        Several tasks: the weighted mean of the parts' scores (``WeightedEvaluator``).
        """
        from fitness.task import check_fitness_mode

        if self.recipe.multi_task:
            from evolalloc.engine.weighted import WeightedEvaluator

            return WeightedEvaluator([(label, weight, part.evaluator(split, scorer, mode))
                                      for label, weight, part in self.parts])
        mode = mode or self.fitness_mode
        check_fitness_mode(mode)  # before an engine starts any worker
        return self.engine.evaluator(split, scorer or self.scorer, mode=mode)

    def search_evaluator(self) -> Evaluator:
        """What the search scores candidates with: the search split, in the fitness mode."""
        return self.evaluator("search", mode=None)

    def scorer_for(self, allocation: Allocation) -> Scorer:
        """The scorer ``allocation`` ranks with; for an input-adaptive method (its ``method`` a
        baseline with an ``adapter``: AdaKV, CAKE, gates) wrapped so that each instance's
        budgets are adapted when its record is compressed (``runtime.adaptive.Adapted``)."""
        try:
            scorer = get_scorer(allocation.scorer, **allocation.scorer_params)
            method = allocation.provenance.get("method")
            adapter = make_baseline(method).adapter if method in BASELINES.load_all() else None
            if adapter is not None:
                from evolalloc.runtime.adaptive import Adapted, get_adapter

                scorer = Adapted(scorer, get_adapter(adapter[0], **adapter[1]))
            return scorer
        except ValueError as err:
            raise UserError(str(err), field="scorer") from None

    def baseline(self, method: str, target: float, *, base: Allocation | None = None) -> Allocation:
        """Baseline ``method`` at ``target`` for this model, ranking with the run's scorer unless
        the baseline declares its own; ``reserved`` is the run scorer's always-kept tokens.
        ``base``: the allocation a method that adapts another one starts from (evolved+adakv)."""
        try:
            baseline = make_baseline(method)
            if baseline.profiled:  # lukv: its curves, profiled on the search split once per run
                baseline = make_baseline(method, curves=self.lukv_curves())
            return baseline.allocation(self.geometry, target, model=self.recipe.model.spec, scorer=self.scorer.name,
                                       scorer_params=self.scorer.params(), reserved=self.scorer.always_kept, base=base)
        except ValueError as err:  # an unknown name (with did-you-mean) or a target it cannot hold
            raise UserError(str(err), field="baselines") from None

    def lukv_curves(self):
        """LU-KV's utility curves for this run (``pipeline/lukv.py``): the run folder's file, else
        profiled on the search split (its prefill records) and saved there. Profile before
        ``release("search")`` to re-use the search's records."""
        if self._curves is None:
            from tqdm import tqdm

            from evolalloc.pipeline.lukv import run_curves

            self._curves = run_curves(self, self.run_dir)
            tqdm.write(f"lukv: utility curves of {self._curves.meta.get('instances')} {self._curves.meta.get('split')} "
                       f"instances, budgets {self._curves.floor}..{self._curves.max_budget}")
        return self._curves

    def min_budget(self) -> int:
        return max(1, self.scorer.always_kept)

