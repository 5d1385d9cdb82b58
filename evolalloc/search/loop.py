"""EvolKV's Algorithm 1: group-wise CMA-ES over KV-cache budget ratios, bottom-up.

For each group ``g_j`` of units (bottom-up), a fresh optimizer starts at G*'s ratios (uniform 1.0,
or the best of the start's evaluated profiles: ``groupwise.py``) with step ``sigma0`` and runs until
the stopping rule says so (``stopping.py``: EvolKV's fixed ``M``, or until converged). A candidate
``x`` (ratios of the group's units) is placed into the best-so-far ratios ``G*`` (later groups
still at the start's ratios, 1.0 = ``c`` without one), decoded to integer budgets by the search
space and evaluated; its fitness is
``f(G~) * (1 + lam * CacheScore(k̄, c))`` (``k̄`` per ``SearchConfig.cache_scope``). ``F_best``
is global, as in the paper: ``G*`` becomes ``G~`` only when ``r > F_best`` (first wins a tie).

A whole generation goes to the evaluator in one call (the generation barrier: Ray actors can
split it), then its trials are stored, the optimizer is told, and a checkpoint is written —
in that order, so ``resume`` never loses or repeats an evaluation (see ``store.py``).

Resume is a replay: the loop always starts at group 0 with freshly seeded optimizers, and a
generation whose candidates are all stored is told their stored fitness instead of being
evaluated. Each replayed ``ask()`` must equal the stored parameters (else the study belongs to
another search, or the optimizer library changed), so the optimizer state, the best-so-far
``G*`` and ``F_best`` come back exactly as an uninterrupted run had them, from data alone.

The algorithm's bookkeeping (G*, F_best, the optimizer per group, the advance) lives in
``groupwise.GroupwiseAlgorithm``, which the ask/tell service drives as well; this module is
the in-process driver: evaluate, store, tell, checkpoint.

Nothing here knows about models: the evaluator is anything with
``evaluate(list of int budgets [L, H]) -> list[EvalResult]``.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np
from tqdm import tqdm

from evolalloc.core.errors import RunStopped, UserError
from evolalloc.core.fileio import follow_umask
from evolalloc.core.phases import announce
from evolalloc.engine.base import Evaluator
from evolalloc.search.checkpoint import (
    STUDY_FILE,
    Checkpoint,
    checkpoint_path,
    has_checkpoint,
    legacy_checkpoint_path,
    load_checkpoint,
    refuse_legacy,
    save_checkpoint,
)
from evolalloc.search.config import SearchConfig
from evolalloc.search.groupwise import START_GROUP, GroupwiseAlgorithm, group_seed  # noqa: F401 - re-exported
from evolalloc.search.stopping import GroupSummary, passes_words
from evolalloc.search.store import TrialRecord, TrialStore, display_url


@dataclass
class SearchResult:
    """What a finished search found.

    Attributes:
        best_ratios: ``[n_units]`` ratios of the best allocation (G*).
        best_budgets: ``[num_layers, num_kv_heads]`` int64, G* decoded. Not yet *completed* to
            the exact total ``c * L`` (paper §3.2); that is the allocation layer's job.
        best_fitness / best_task_score: of G*; ``None`` if no candidate ever finished.
        history: every stored evaluation, in search order, with Optuna trial numbers.
        implementation: ``(package, version)`` of the optimizer that produced the candidates.
        evaluated: candidates evaluated by *this* call (re-used stored trials not counted).
        groups: how each group's search ended (generations, why it stopped, what it gained).
        start_scores: the start's candidates by label (the method, marked when the search space could
            not hold its budgets as they are: ``groupwise.HELD``), with their fitness (``None``:
            failed); empty when the search started at uniform without evaluating it (EvolKV).
        stop_rule: the stopping rule in words.
        seconds: the search's wall time, every session added up (a search split prefilled on the
            first evaluation, not before, is inside it).
        shipped_start: the start's method when no searched candidate beat it (G* is the start itself).
    """

    best_ratios: np.ndarray
    best_budgets: np.ndarray
    best_fitness: float | None
    best_task_score: float | None
    history: list[TrialRecord]
    implementation: tuple[str, str]
    evaluated: int
    storage: str
    study_name: str
    groups: list[GroupSummary] = field(default_factory=list)
    start_scores: dict[str, float | None] = field(default_factory=dict)
    stop_rule: str = ""
    seconds: float = 0.0
    shipped_start: str | None = None


#: Gives the start's budgets ``[num_layers, num_kv_heads]``, one per ``SearchConfig.start`` method, in order.
StartBudgets = Callable[[], list[np.ndarray]]


def storage_url(run_dir: str | os.PathLike, config: SearchConfig) -> str:
    """The configured database URL, else SQLite inside the run folder."""
    if config.storage:
        return config.storage
    return f"sqlite:///{(Path(run_dir).resolve() / STUDY_FILE).as_posix()}"


def start_search(run_dir: str | os.PathLike, config: SearchConfig) -> TrialStore:
    """Create the study and the first checkpoint of a new search in ``run_dir`` (one search per folder).

    The study is created first: if it clashes with an existing one, nothing has been written.
    """
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    if has_checkpoint(run_dir):
        raise UserError(f"{run_dir} already holds a search; resume it or choose a new run folder")
    space = config.build_space()
    store = TrialStore.create(
        storage_url(run_dir, config), config.study_name, space.ratio_bounds, attrs={"config": config.to_dict()}
    )
    try:
        # SQLite makes its file 0644 whatever the umask; a shared runs dir needs the umask's mode
        if not config.storage:
            follow_umask(run_dir / STUDY_FILE)
        save_checkpoint(run_dir, Checkpoint(config=config))  # at the start's position when there is one
    except BaseException:
        store.delete()
        raise
    return store


def run_search(
    run_dir: str | os.PathLike, evaluator: Evaluator, config: SearchConfig, *, progress: bool = True,
    starts: StartBudgets | None = None,
) -> SearchResult:
    """Start a new search in ``run_dir`` (created if needed; one search per folder). ``starts`` gives the
    start's budgets when ``config.start`` names methods (asked only if they must be evaluated)."""
    store = start_search(run_dir, config)
    return GroupwiseSearch(Path(run_dir), evaluator, Checkpoint(config=config), store, progress=progress,
                           starts=starts).run()


@dataclass
class OpenedSearch:
    """A search whose checkpoint and trial store were read and checked, ready to continue."""

    run_dir: Path
    checkpoint: Checkpoint
    store: TrialStore

    def run(self, evaluator: Evaluator, *, progress: bool = True, starts: StartBudgets | None = None) -> SearchResult:
        return GroupwiseSearch(self.run_dir, evaluator, self.checkpoint, self.store, progress=progress,
                               starts=starts).run()


def open_search(run_dir: str | os.PathLike, config: SearchConfig | None = None) -> OpenedSearch:
    """Read and check ``run_dir``'s checkpoint and open its trial store (``UserError`` on any problem).

    ``config`` (the run's recipe says it) lets a search be rebuilt from the trial store alone when
    the checkpoint is missing (a kill between creating the study and writing it, or a damaged
    checkpoint the user deleted); if the checkpoint is there, it must hold the same settings.
    Without ``config`` the checkpoint must be there.
    """
    run_dir = Path(run_dir)
    if checkpoint_path(run_dir).exists():
        checkpoint = load_checkpoint(run_dir)
        if config is not None and checkpoint.config != config:
            raise UserError(
                "the checkpoint's search settings differ from the run's recipe.yaml "
                f"({_differences(checkpoint.config, config)}); restore the recipe or start a new run",
                source=str(checkpoint_path(run_dir)), field="config",
            )
    elif legacy_checkpoint_path(run_dir).exists():
        refuse_legacy(run_dir)
    elif config is None:
        raise UserError(f"{run_dir} holds no search checkpoint ({checkpoint_path(run_dir).name}); nothing to resume")
    else:
        checkpoint = Checkpoint(config=config)
    config = checkpoint.config
    store = TrialStore.open(storage_url(run_dir, config), config.study_name, config.build_space().ratio_bounds)
    return OpenedSearch(run_dir, checkpoint, store)


def resume_search(
    run_dir: str | os.PathLike, evaluator: Evaluator, *, config: SearchConfig | None = None, progress: bool = True,
    starts: StartBudgets | None = None,
) -> SearchResult:
    """Continue the search in ``run_dir``: replay the stored trials, then evaluate what is missing
    (see ``open_search`` for ``config``, ``run_search`` for ``starts``)."""
    return open_search(run_dir, config).run(evaluator, progress=progress, starts=starts)


def _differences(a: SearchConfig, b: SearchConfig) -> str:
    da, db = a.to_dict(), b.to_dict()
    return ", ".join(f"{k}: {da[k]!r} vs {db[k]!r}" for k in da if da[k] != db[k])


def _short(values) -> str:
    return "[" + ", ".join(f"{float(v):.6g}" for v in values) + "]"


class EveryEvaluationFailed(RunStopped):
    """The first generation of the search's groups failed whole, and nothing had scored before it: the
    evaluator cannot score this run at all (a broken environment, a device error), so the search stops
    there instead of filling its trial store with hundreds of failures. Those it made stay stored as
    failures; the message names the first error's first line."""

    def __init__(self, records: list):
        first = next((r.error for r in records if r.error), "no error given").strip().splitlines()[0]
        super().__init__(f"the first generation of the search's groups failed whole ({len(records)} of "
                         f"{len(records)} evaluations; the first: {first}) and nothing had scored before it: "
                         "the search stopped rather than record the whole search as failures. Once the cause is "
                         "fixed, search again under another --name (this run's trial store keeps the failures, and "
                         "a resume would replay them)")


class GroupwiseSearch:
    """Drives ``GroupwiseAlgorithm`` in-process: replays stored generations, evaluates the rest.

    ``checkpoint`` names the config and how far a previous run got; the replay must get at least
    that far on stored trials alone.
    """

    def __init__(
        self, run_dir: Path, evaluator: Evaluator, checkpoint: Checkpoint, store: TrialStore, *, progress: bool = True,
        starts: StartBudgets | None = None,
    ):
        self.run_dir = Path(run_dir)
        self.evaluator = evaluator
        self.starts = starts
        self.config = checkpoint.config
        self.reached = (checkpoint.group, checkpoint.generation)
        self._seconds_before, self._began = checkpoint.seconds, time.perf_counter()
        self.store = store
        self.progress = progress
        # The position, G* and F_best: rebuilt by the replay, never read from a file.
        self.algorithm = GroupwiseAlgorithm(self.config)
        self.evaluated = 0
        self._implementation_saved = False

    def run(self) -> SearchResult:
        total = self.algorithm.total_evaluations()
        with tqdm(
            total=total, initial=min(len(self.store), total), disable=not self.progress, desc="search", unit="eval"
        ) as bar:
            announce("searching", min(len(self.store), total), total)
            while not self.algorithm.done:
                self._generation(bar)
                self._checkpoint()
                bar.total = self.algorithm.total_evaluations()  # a group that converged early lowers the cap
                bar.refresh()
        return self._result()

    def _set_start(self) -> None:
        """The start's budgets: as stored when every start trial is (a replay needs no prefill, no
        baseline), else from ``starts``, as the space holds them (each replayed one is checked)."""
        alg, n = self.algorithm, len(self.config.start)
        stored = [self.store.get(START_GROUP, 0, i) for i in range(n)]
        if all(record is not None for record in stored):
            alg.set_start([np.asarray(record.budgets) for record in stored])
            return
        if self.starts is None:
            raise RuntimeError("this search starts from evaluated profiles (optimizer.start), but no start was given")
        raw = [np.asarray(b) for b in self.starts()]
        held = alg.start_budgets(raw)
        alg.set_start(held, changed=[not np.array_equal(r, h) for r, h in zip(raw, held)])

    def _generation(self, bar) -> None:
        alg = self.algorithm
        group, generation = alg.position
        if alg.starting:
            self._set_start()
        candidates = alg.ask()
        if not self._implementation_saved and alg.implementation is not None:
            self.store.study.set_user_attr("optimizer_implementation", list(alg.implementation))
            self._implementation_saved = True
        records: list[TrialRecord | None] = [self.store.get(*c.key) for c in candidates]
        for candidate, record in zip(candidates, records):
            if record is not None and not alg.matches(candidate, record.ratios, record.budgets):
                raise UserError(self._mismatch(candidate, record), source=display_url(storage_url(self.run_dir,
                                                                                                     self.config)),
                                field=f"study {self.config.study_name!r}")
        missing = [i for i, record in enumerate(records) if record is None]
        if missing and (group, generation) < self.reached:
            raise UserError(
                f"the trial store lacks {len(missing)} evaluations of group {group}, generation {generation}, "
                f"but the checkpoint says the search got to group {self.reached[0]}, generation {self.reached[1]}: "
                "the checkpoint and the study do not belong to the same run",
                source=display_url(storage_url(self.run_dir, self.config)), field=f"study {self.config.study_name!r}",
            )
        if missing:
            results = self.evaluator.evaluate([candidates[i].budgets for i in missing])
            if len(results) != len(missing):
                raise RuntimeError(f"evaluator returned {len(results)} results for {len(missing)} budgets")
            for i, result in zip(missing, results):
                records[i] = self.store.add(alg.score(candidates[i], result))
            self.evaluated += len(missing)
            bar.update(len(missing))
            announce("searching", len(self.store), alg.total_evaluations())  # again after a lazy prefill
        alg.tell(records)
        # Nothing has ever scored, and the first generation of the groups (after the start's few profiles,
        # which alone may fail for their own reasons) failed whole: the evaluator is broken for this run. A
        # replay of an older run that went on past such a generation is not stopped (it is behind `reached`).
        if (not alg.found and (group, generation) == (0, 0) and (group, generation) >= self.reached
                and not any(r.ok for r in records)):
            raise EveryEvaluationFailed(records)
        if alg.found:
            where = "start" if group == START_GROUP else f"{group + 1}/{len(alg.groups)}"
            bar.set_postfix(best=f"{alg.best_fitness:.4f}", group=where)

    def _mismatch(self, candidate, record) -> str:
        """Why a stored trial is not the candidate the replay asks (the start's are matched by budgets)."""
        where = (f"stored trial (group {candidate.group}, generation {candidate.generation}, "
                 f"candidate {candidate.index})")
        if candidate.group == START_GROUP:
            return (f"{where} is the start's {self.config.start[candidate.index]!r} with other budgets than this run "
                    "computes for it: the search settings, the model, the task or its search split changed since")
        return (f"{where} has ratios {_short(record.ratios)}, but the replayed optimizer asked {_short(candidate.x)}: "
                "the search settings and the study do not belong to the same run (or the optimizer library changed "
                f"since: {'/'.join(self.algorithm.implementation or ('?', '?'))} now)")

    def _checkpoint(self) -> None:
        """Checkpoint the next position — after the trials are stored.

        A replayed generation (not beyond where the checkpoint already is) writes nothing.
        """
        alg = self.algorithm
        group, generation = alg.position
        if (group, generation) > self.reached:
            save_checkpoint(self.run_dir, Checkpoint(config=self.config, group=group, generation=generation,
                                                     groups=[s.to_dict() for s in alg.summaries],
                                                     start_scores=dict(alg.start_scores), seconds=self._seconds()))

    def _seconds(self) -> float:
        return self._seconds_before + time.perf_counter() - self._began

    def _result(self) -> SearchResult:
        alg = self.algorithm
        return SearchResult(
            best_ratios=alg.best_ratios.copy(),
            best_budgets=alg.best_budgets.copy(),
            best_fitness=alg.best_fitness if alg.found else None,
            best_task_score=alg.best_task_score if alg.found else None,
            history=self.store.reload().records(),
            implementation=alg.implementation
                            or tuple(self.store.study.user_attrs.get("optimizer_implementation", ("", ""))),
            evaluated=self.evaluated,
            storage=storage_url(self.run_dir, self.config),
            study_name=self.config.study_name,
            groups=list(alg.summaries),
            start_scores=dict(alg.start_scores),
            stop_rule=alg.rule.words() + passes_words(self.config.passes),
            # a replay of a finished search adds no time: the checkpoint already holds the search's
            seconds=self._seconds_before if self.evaluated == 0 and self.reached >= alg.position else self._seconds(),
            shipped_start=(self.config.start[alg.best_key[2]] if alg.found and alg.best_key[0] == START_GROUP
                           else None),
        )
