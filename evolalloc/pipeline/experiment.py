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

from evolalloc.config.resolved import ResolvedRun, resolve_run
from evolalloc.config.run_folder import RECORDS_FOLDER
from evolalloc.core.allocation import Allocation
from evolalloc.core.baselines import make_baseline
from evolalloc.engine.base import ENGINES, Engine, Evaluator
from evolalloc.engine.workload import Workload
from evolalloc.pipeline.curation import DRAWN, drawn_slice, is_drawn  # noqa: F401 - DRAWN, drawn_slice: the names callers use
from evolalloc.runtime.instances import prefill_instances
from evolalloc.core.errors import UserError
from evolalloc.runtime.scorers import Scorer, get_scorer



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

    def __init__(self, recipe, *, progress: bool = True, curation_file: str | Path | None = None, bounded: bool = True,
                 _parent=None, _label: str | None = None, run_dir: str | Path | None = None):
        self.recipe = recipe
        self.progress = progress
        self.bounded = bounded  # False: whole records (a one-off evaluation of any budgets, e.g. `evaluate`)
        self.curation_file = Path(curation_file) if curation_file is not None else None
        self.curations: dict[str, object] = {}  # split -> Curation, for this (single-task) experiment
        self._parent = _parent
        self.label = _label or recipe.task_names
        self._records: dict[str, list] = {}
        self._instances: dict[str, list] = {}
        self._engine: Engine | None = None
        #: Scorers ranked at prefill besides the recipe's and the baselines' (``pipeline/headroom.py``;
        #: ``evaluate``: an allocation file's own scorer); set before the first ``records`` call.
        self.extra_scorers: list[Scorer] = []
        self.run_dir = Path(run_dir) if run_dir is not None else None
        self._curves = None
        self._split_bounds: dict[str, int] = {}  # a split's b_max, tighter than the run's (``bound_split``)

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
        if self._parent is None and "keeper" in self.__dict__:
            self.keeper.close()  # removes a temporary spill folder

    @cached_property
    def parts(self) -> list[tuple[str, float, "Experiment"]]:
        """``(label, weight, experiment)`` per task; a single-task experiment is its own one part."""
        if not self.recipe.multi_task:
            return [(self.label, 1.0, self)]
        return [(entry.label, entry.weight,
                 Experiment(self.recipe.for_task(entry), progress=self.progress, curation_file=self.curation_file,
                            _parent=self, _label=entry.label))
                for entry in self.recipe.task_entries]

    @cached_property
    def resolved(self) -> ResolvedRun:
        """What the recipe resolved to (``config/resolved.py``), once: the budgets, the fitness
        modes and the methods every later step takes from here."""
        return resolve_run(self.recipe)

    @property
    def fitness_mode(self) -> str:
        """What the search climbs on this (single-task) experiment: the recipe's mode, else the task's."""
        return self.resolved.fitness_mode

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
        are this experiment's own, provided on the engine's first use of each."""
        recipe = self.recipe
        return Workload(
            model_spec=recipe.model.spec, dtype=recipe.model.dtype, task_name=recipe.task.name,
            task_params=dict(recipe.task.params), question_after_compression=recipe.task.question_after_compression,
            batch_size=recipe.engine.batch_size, workers=recipe.engine.workers, threads=recipe.engine.threads,
            address=recipe.engine.address, load_model=lambda: self.loaded, load_task=lambda: self.task,
            scorers=lambda: self.scorers, instances=self.instances, records=self.records,
            record_policy_for=self.record_policy_for,
        )

    @cached_property
    def loaded(self):
        if self._parent is not None:
            return self._parent.loaded  # the parts of a multi-task experiment share one model
        import torch

        from evolalloc.runtime.model import load_model

        if self.recipe.engine.threads:
            torch.set_num_threads(self.recipe.engine.threads)
        return load_model(self.recipe.model.spec, dtype=self.recipe.model.dtype)

    @cached_property
    def geometry(self):
        """The model's geometry; read from its config alone until the weights are loaded (the same
        values), so the cheap checks of a start (search settings, positions) need no model."""
        if self._parent is not None:
            return self._parent.geometry
        if "loaded" in self.__dict__:
            return self.loaded.geometry
        from evolalloc.runtime.model import model_geometry

        return model_geometry(self.recipe.model.spec, self.recipe.model.dtype)

    @cached_property
    def tokenizer(self):
        """The model's tokenizer, without its weights: instances are generated (and datasets read)
        before the model is loaded."""
        if self._parent is not None:
            return self._parent.tokenizer
        if "loaded" in self.__dict__:
            return self.loaded.tokenizer
        from evolalloc.runtime.model import load_tokenizer

        return load_tokenizer(self.recipe.model.spec)

    @cached_property
    def scorer(self) -> Scorer:  # the same for every part: the scorer section is shared
        if self._parent is not None:
            return self._parent.scorer
        if self.recipe.scorer.train is None:
            return self.declared_scorer
        # The run trains it: its checkpoint is the one keyed by content (which needs the model's weights).
        return self._build_scorer({**self.recipe.scorer.params, "checkpoint": str(self.trained_scorer.checkpoint)})

    @cached_property
    def declared_scorer(self) -> Scorer:
        """The scorer as the recipe's section declares it, built without the model: the same settings
        (and ``min_budget``) as ``scorer``, whose checkpoint path a run that trains its scorer only
        knows once the weights are loaded. The cheap checks of a start use this one."""
        if self._parent is not None:
            return self._parent.declared_scorer
        return self._build_scorer(dict(self.recipe.scorer.params))

    def _build_scorer(self, params: dict) -> Scorer:
        try:
            return get_scorer(self.recipe.scorer.name, **params)
        except ValueError as err:
            raise UserError(str(err), source=self.recipe.source, field="scorer") from None

    @cached_property
    def trained_scorer(self):
        """The in-run training ``scorer.train`` asks for (``pipeline.scorer_training``), or None."""
        if self._parent is not None:
            return self._parent.trained_scorer
        if self.recipe.scorer.train is None:
            return None
        from evolalloc.pipeline.scorer_training import TrainedScorer

        return TrainedScorer(self)

    def ensure_scorer_trained(self) -> None:
        """Train the run's scorer now if the recipe asks for it and it is not trained yet (cached)."""
        if self.trained_scorer is not None and not self.trained_scorer.checkpoint.is_file():
            self.trained_scorer.ensure(progress=self.progress)
            from evolalloc.runtime.heap import give_back

            give_back()  # the training's traces (~24 MB per prompt at 1k tokens), freed but still resident

    def check_checkpoints(self) -> None:
        """Refuse (``UserError`` naming the recipe field) a scorer checkpoint that is missing, unreadable
        or trained for another model; one the run will train itself is not checked."""
        from evolalloc.runtime.policy import model_identity

        identity = model_identity(self.recipe.model.spec, self.loaded.model)
        trained = str(self.trained_scorer.checkpoint) if self.trained_scorer is not None else None
        for scorer in self.scorers:
            if trained is not None and scorer.params().get("checkpoint") == trained:
                continue  # made by this run's training step (the gates method reads it too)
            try:
                scorer.check_checkpoint(self.geometry.to_dict(), identity)
            except ValueError as err:
                field = "scorer.params.checkpoint" if scorer is self.scorer else "baselines"
                raise UserError(str(err), source=self.recipe.source, field=field) from None

    def rank_also(self, allocations: list[Allocation]) -> None:
        """Rank every record with these allocations' own scorers too (``evaluate FILE``: a file's
        scorer and checkpoint rank its tokens, whatever the recipe's scorer is). Call it before the
        first ``records``/``scorers``."""
        for allocation in allocations:
            try:
                self.extra_scorers.append(get_scorer(allocation.scorer, **allocation.scorer_params))
            except ValueError as err:
                raise UserError(str(err), field="scorer_params") from None

    def make_baseline(self, name: str):
        """Baseline ``name``; one that ranks with a trained scorer of the run's kind (``gates`` in a run
        whose scorer is gates) reads the run's checkpoint, so both rows use the same weights."""
        baseline = make_baseline(name)
        declared = baseline.scorer
        if declared is not None and declared[0] == self.scorer.name and "checkpoint" in declared[1]:
            params = self.scorer.params()
            # The run's always-kept tokens too, for a method that has them (gates: sinks, window).
            kept = {k: params[k] for k in ("sinks", "window") if k in params and hasattr(baseline, k)}
            baseline = make_baseline(name, checkpoint=params["checkpoint"], **kept)
        return baseline

    def with_scorer_provenance(self, allocation: Allocation) -> Allocation:
        """``allocation`` with its scorer's checkpoint fingerprint and training record in its provenance
        (``scorer_checkpoint``), when that scorer reads a checkpoint."""
        try:
            record = get_scorer(allocation.scorer, **allocation.scorer_params).checkpoint_provenance()
        except ValueError as err:
            raise UserError(str(err), source=self.recipe.source, field="scorer.params.checkpoint") from None
        if record:
            allocation.provenance["scorer_checkpoint"] = record
        return allocation

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
        if self._parent is not None:
            return self._parent.scorers
        scorers = {self.scorer.key: self.scorer}
        for extra in self.extra_scorers:
            scorers.setdefault(extra.key, extra)
        for name in self.recipe.baselines:
            declared = self.make_baseline(name).scorer
            if declared is not None:
                extra = get_scorer(declared[0], **declared[1])
                scorers.setdefault(extra.key, extra)
        return list(scorers.values())

    @cached_property
    def record_policy(self):
        """How this run keeps its prefill records (``runtime.record_store.RecordPolicy``): bounded at
        ``b_max`` (``pipeline/record_bound.py``, computed here once), in ``engine.record_dtype``,
        spilled beyond ``engine.record_memory`` into the run folder's ``records/`` (a temporary
        folder when there is no run folder yet)."""
        if self._parent is not None:
            return self._parent.record_policy
        from evolalloc.core.record_settings import parse_size
        from evolalloc.pipeline.record_bound import run_record_bound
        from evolalloc.runtime.record_store import RecordPolicy

        engine = self.recipe.engine
        recipes = [part.recipe for _, _, part in self.parts] if self.recipe.multi_task else [self.recipe]
        parts = [part for _, _, part in self.parts] if self.recipe.multi_task else [self]
        bound = max(run_record_bound(recipe, part) for recipe, part in zip(recipes, parts)) if self.bounded else None
        spill = str(self.curation_file.parent / RECORDS_FOLDER) if self.curation_file is not None else None
        return RecordPolicy(bound=bound, dtype=engine.record_dtype, memory=parse_size(engine.record_memory),
                            spill_dir=spill, model_id=f"{self.recipe.model.spec}|{self.recipe.model.dtype}")

    def record_policy_for(self, split: str):
        """The policy for ``split``'s records: drawn candidates stay whole (curation judges the full cache);
        a split ``bound_split`` tightened is bounded at its own ``b_max``."""
        if is_drawn(split):
            return self.record_policy.unbounded()
        root = self._parent or self
        if split in root._split_bounds:
            from dataclasses import replace

            return replace(self.record_policy, bound=root._split_bounds[split])
        return self.record_policy

    def bound_split(self, split: str, allocations) -> int | None:
        """Bound ``split``'s records (not made yet) by the most these allocations give one unit, when
        that is below the run's ``b_max`` and none of them adapts per instance (an adaptive method
        could move more to one head; it keeps the run's ``b_max`` cap). ``compare`` calls it with
        every profile and baseline it scores on the held-out split, so those records keep only what
        is read: every kept token, logit and score is what a record bounded at the run's ``b_max``
        gives (``runtime/bounded.py``). Returns the bound set, or ``None`` (nothing changed)."""
        from evolalloc.runtime.adaptive import Adapted

        root = self._parent or self
        run_bound = self.record_policy.bound
        if run_bound is None or any(split in part._records for _, _, part in root.parts):
            return None  # whole records asked for, or already made (and maybe spilled) at the run's bound
        allocations = list(allocations)
        if not allocations or any(isinstance(self.scorer_for(a), Adapted) for a in allocations):
            return None
        largest = max(int(a.budgets.max()) for a in allocations)
        if largest >= run_bound:
            return None
        root._split_bounds[split] = largest
        return largest

    @cached_property
    def keeper(self):
        """Applies ``record_policy`` to every record this run prefills (shared by a multi-task run's parts)."""
        if self._parent is not None:
            return self._parent.keeper
        from evolalloc.runtime.record_store import RecordKeeper

        return RecordKeeper(self.record_policy)

    def split_section(self, split: str):
        """The recipe section (``n``, ``seed``, ``curate``) of ``split`` ("search" or "heldout")."""
        base = split.partition(DRAWN)[0]
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
            base, _, piece = split.partition(DRAWN)
            if piece:  # a slice "[start:stop]" of the drawn candidates, judged by curation
                start, stop = (int(i) for i in piece.strip("[]").split(":"))
                self._instances[split] = self.instances(base + DRAWN)[start:stop]
            elif is_drawn(split):
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
            instances = self.task.instances(split, n, section.seed, self.recipe.task.context_tokens, self.tokenizer)
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
            self._discard_unkept(split, set(record.kept_uids))
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

    def _discard_unkept(self, split: str, kept: set[str]) -> None:
        """Drop the judged candidates of ``split`` that curation did not keep, now (their spilled
        files too, ``RecordKeeper.discard``); the kept ones' records stay for the split."""
        for name in [name for name in self._records if is_drawn(name) and name.partition(DRAWN)[0] == split]:
            records = self._records[name]
            self.keeper.discard([r for r in records if r.uid not in kept])
            self._records[name] = [r for r in records if r.uid in kept]

    def record_curations(self, path: str | Path) -> None:
        """Write every curation made so far into ``path`` (the run folder's ``curation.json``, once it
        exists) and record later ones there too."""
        from evolalloc.pipeline.curation import save_curation

        self.curation_file = Path(path)
        if "record_policy" in self.__dict__:  # records spill into the run folder from now on (resume finds them)
            import dataclasses

            self.record_policy = dataclasses.replace(self.record_policy, spill_dir=str(self.curation_file.parent / RECORDS_FOLDER))
            self.keeper.policy = self.record_policy
        for _, _, part in self.parts:
            part.curation_file = self.curation_file
            for split, record in part.curations.items():
                save_curation(self.curation_file, record, part.split_section(split))

    def _check_fits(self, instances) -> None:
        """Refuse (``UserError`` on ``task.context_tokens``) an instance beyond the model's positions."""
        from evolalloc.runtime.instances import tokenize_instance
        from evolalloc.runtime.positions import positions_beyond

        limit = self.geometry.max_positions
        if not limit:
            return
        for instance in instances:
            ids, question = tokenize_instance(self.tokenizer, instance, self.recipe.task.question_after_compression)
            needed = positions_beyond(limit, len(ids), len(question or []), instance.max_new_tokens)
            if needed:
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
            # Curation may have judged them a slice at a time: every slice of this split's drawn ones.
            slices = [name for name in self._records if name.partition(DRAWN)[0] == split and is_drawn(name)]
            drawn = [record for name in slices for record in self._records.pop(name)] if slices else None
            if drawn is not None:
                # The drawn records are whole (curation judged the full cache on them): bound the kept ones now.
                self.keeper.forget(drawn)
                by_uid = {record.uid: record for record in drawn}
                keys = [s.key for s in self.scorers]
                bound = self.record_policy_for(split).bound
                self._records[split] = [self.keeper.keep(by_uid[inst.uid], keys, bound) for inst in instances]
                # A whole drawn file bounded into a new record is read no more: out of the temporary folder now.
                self.keeper.delete_temporary([by_uid[r.uid] for r in self._records[split] if r is not by_uid[r.uid]])
                del drawn, by_uid
                from evolalloc.runtime.heap import give_back

                give_back()  # the drawn records not kept, and the whole ones that were bounded
            else:
                self.ensure_scorer_trained()  # its ranking is in every record
                self._records[split] = prefill_instances(
                    self.loaded, instances, self.scorers,
                    question_after_compression=self.recipe.task.question_after_compression, progress=self.progress,
                    keeper=self.keeper, bound=self.record_policy_for(split).bound,  # None for drawn ones: whole
                    # Drawn candidates are whole and judged once: spilled, so the memory held is
                    # left to the bounded records of the search (issue 22: curation was the peak).
                    hold=not is_drawn(split),
                )
        return self._records[split]

    def release(self, split: str) -> None:
        """Forget a split's prefill records (the search split's, once the search is over)."""
        for _, _, part in self.parts:
            self.keeper.forget(part._records.pop(split, None) or [])
        from evolalloc.runtime.heap import give_back

        give_back()

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
        self.ensure_scorer_trained()  # before any worker (a Ray actor too) reads the checkpoint
        return self.engine.evaluator(split, scorer or self.scorer, mode=mode)

    def search_evaluator(self) -> Evaluator:
        """What the search scores candidates with: the search split, in the fitness mode."""
        return self.evaluator("search", self.search_scorer, mode=None)

    @cached_property
    def search_scorer(self) -> Scorer:
        """The recipe's scorer, wrapped in the budget adapter the search space's budgets are meant
        for (the hybrid's ``gate_prior``), if it declares one."""
        from searchspaces import SEARCH_SPACES

        from evolalloc.search.config import space_params_of

        adapter = SEARCH_SPACES.get(self.recipe.search_space.name).adapter
        if adapter is None:
            return self.scorer
        from evolalloc.runtime.adaptive import Adapted, get_adapter

        try:  # the space's own settings are its adapter's (gate_floors' floor_fraction)
            return Adapted(self.scorer, get_adapter(adapter, **space_params_of(self.recipe.search_space)))
        except ValueError as err:
            raise UserError(str(err), source=self.recipe.source, field="search_space.name") from None

    def scorer_for(self, allocation: Allocation) -> Scorer:
        """The scorer ``allocation`` ranks with; for an input-adaptive method (its ``method`` a
        baseline with an ``adapter``: AdaKV, CAKE, gates; or a hybrid profile naming one) wrapped so
        that each instance's budgets are adapted when its record is compressed (``runtime.adaptive``)."""
        from evolalloc.runtime.adaptive.selection import scorer_for_allocation

        try:
            scorer = scorer_for_allocation(allocation)
            _check_same_checkpoint(allocation, scorer)
            return scorer
        except ValueError as err:
            raise UserError(str(err), field="scorer") from None

    def baseline(self, method: str, target: float, *, base: Allocation | None = None) -> Allocation:
        """Baseline ``method`` at ``target`` for this model, ranking with the run's scorer unless
        the baseline declares its own; ``reserved`` is the run scorer's always-kept tokens.
        ``base``: the allocation a method that adapts another one starts from (evolved+adakv)."""
        try:
            baseline = self.make_baseline(method)
            if baseline.profiled:  # lukv: its curves, profiled on the search split once per run
                baseline = make_baseline(method, curves=self.lukv_curves())
            allocation = baseline.allocation(self.geometry, target, model=self.recipe.model.spec, scorer=self.scorer.name,
                                             scorer_params=self.scorer.params(), reserved=self.scorer.always_kept, base=base)
            return self.with_scorer_provenance(allocation)
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
        return self.declared_scorer.min_budget  # the checkpoint does not change it: no weights needed


def _check_same_checkpoint(allocation: Allocation, scorer: Scorer) -> None:
    """A profile searched over a trained scorer is only reproduced by that scorer's weights: refuse
    (``ValueError``) when the checkpoint at its path is no longer the file it recorded."""
    recorded = (allocation.provenance.get("scorer_checkpoint") or {}).get("sha256")
    if recorded:
        now = scorer.checkpoint_provenance()
        if now is None or now["sha256"] != recorded:
            raise ValueError(f"the profile was made with the {allocation.scorer} checkpoint sha256 {recorded[:12]}..., but "
                             f"{now['path'] if now else 'its scorer'} now holds sha256 {now['sha256'][:12] if now else '-'}...; "
                             "restore that checkpoint to reproduce it")
