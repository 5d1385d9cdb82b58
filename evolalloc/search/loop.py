"""EvolKV's Algorithm 1: group-wise CMA-ES over KV-cache budget ratios, bottom-up.

For each group ``g_j`` of units (bottom-up), a fresh optimizer starts at the uniform ratio
1.0 with step ``sigma0`` and runs ``M`` generations. A candidate ``x`` (ratios of the group's
units) is placed into the best-so-far ratios ``G*`` (later groups still at 1.0, i.e. at ``c``),
decoded to integer budgets by the search space and evaluated; its fitness is
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

Nothing here knows about models: the evaluator is anything with
``evaluate(list of int budgets [L, H]) -> list[EvalResult]``.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from tqdm import tqdm

from evolalloc.engine.base import EvalResult, Evaluator
from evolalloc.core.errors import UserError
from evolalloc.core.fileio import follow_umask
from evolalloc.search.checkpoint import (
    Checkpoint, checkpoint_path, has_checkpoint, legacy_checkpoint_path, load_checkpoint, refuse_legacy, save_checkpoint,
)
from evolalloc.search.config import SearchConfig
from evolalloc.search.optimizers import AskTellOptimizer, get_optimizer
from evolalloc.search.store import TrialRecord, TrialStore, display_url

STUDY_FILE = "study.db"


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


def storage_url(run_dir: str | os.PathLike, config: SearchConfig) -> str:
    """The configured database URL, else SQLite inside the run folder."""
    if config.storage:
        return config.storage
    return f"sqlite:///{(Path(run_dir).resolve() / STUDY_FILE).as_posix()}"


def group_seed(seed: int, group: int) -> int:
    """Independent, reproducible seed for group ``group``'s optimizer."""
    return int(np.random.SeedSequence([seed, group]).generate_state(1)[0])


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
        if not config.storage:  # SQLite makes its file 0644 whatever the umask; a shared runs dir needs the umask's mode
            follow_umask(run_dir / STUDY_FILE)
        save_checkpoint(run_dir, Checkpoint(config=config))
    except BaseException:
        store.delete()
        raise
    return store


def run_search(
    run_dir: str | os.PathLike, evaluator: Evaluator, config: SearchConfig, *, progress: bool = True
) -> SearchResult:
    """Start a new search in ``run_dir`` (created if needed; one search per folder)."""
    store = start_search(run_dir, config)
    return GroupwiseSearch(Path(run_dir), evaluator, Checkpoint(config=config), store, progress=progress).run()


@dataclass
class OpenedSearch:
    """A search whose checkpoint and trial store were read and checked, ready to continue."""

    run_dir: Path
    checkpoint: Checkpoint
    store: TrialStore

    def run(self, evaluator: Evaluator, *, progress: bool = True) -> SearchResult:
        return GroupwiseSearch(self.run_dir, evaluator, self.checkpoint, self.store, progress=progress).run()


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
    run_dir: str | os.PathLike, evaluator: Evaluator, *, config: SearchConfig | None = None, progress: bool = True
) -> SearchResult:
    """Continue the search in ``run_dir``: replay the stored trials, then evaluate what is missing
    (see ``open_search`` for ``config``)."""
    return open_search(run_dir, config).run(evaluator, progress=progress)


def _differences(a: SearchConfig, b: SearchConfig) -> str:
    da, db = a.to_dict(), b.to_dict()
    return ", ".join(f"{k}: {da[k]!r} vs {db[k]!r}" for k in da if da[k] != db[k])


def _short(values) -> str:
    return "[" + ", ".join(f"{float(v):.6g}" for v in values) + "]"


class GroupwiseSearch:
    """Runs Algorithm 1 from the start, replaying stored generations and evaluating the rest.

    ``checkpoint`` names the config and how far a previous run got; the replay must get at least
    that far on stored trials alone.
    """

    def __init__(
        self, run_dir: Path, evaluator: Evaluator, checkpoint: Checkpoint, store: TrialStore, *, progress: bool = True
    ):
        self.run_dir = Path(run_dir)
        self.evaluator = evaluator
        self.config = checkpoint.config
        self.reached = (checkpoint.group, checkpoint.generation)
        self.store = store
        self.progress = progress
        self.space = self.config.build_space()
        self.groups = self.space.groups()
        self.objective = self.config.objective()
        self.evaluated = 0
        self.implementation: tuple[str, str] | None = None
        # The loop's position and G*, F_best: rebuilt by the replay, never read from a file.
        self.cp = Checkpoint(config=self.config)
        initial = self.space.initial_ratios()
        self.best_ratios = initial
        self.best_budgets = self.space.decode(initial)
        self.best_fitness = -math.inf
        self.best_task_score: float | None = None
        self.best_key: tuple[int, int, int] | None = None

    def run(self) -> SearchResult:
        total = sum(self.config.generations * self.config.popsize_for(len(units)) for units in self.groups)
        with tqdm(
            total=total, initial=min(len(self.store), total), disable=not self.progress, desc="search", unit="eval"
        ) as bar:
            while self.cp.group < len(self.groups):
                group = self.cp.group
                units = self.groups[group]
                optimizer = self._optimizer(units)
                while self.cp.group == group:  # _advance moves to the next group after M generations
                    self._generation(optimizer, units, bar)
                    self._advance()
        return self._result()

    def _optimizer(self, units: np.ndarray) -> AskTellOptimizer:
        optimizer = get_optimizer(
            self.config.optimizer,
            x0=self.space.initial_ratios()[units],
            sigma0=self.config.sigma0,
            bounds=self.space.ratio_bounds,
            popsize=self.config.popsize_for(len(units)),
            seed=group_seed(self.config.seed, self.cp.group),
            options=self.config.optimizer_options,
        )
        if self.implementation is None:
            self.implementation = optimizer.implementation
            self.store.study.set_user_attr("optimizer_implementation", list(self.implementation))
        return optimizer

    def _generation(self, optimizer: AskTellOptimizer, units: np.ndarray, bar) -> None:
        group, generation = self.cp.group, self.cp.generation
        xs = optimizer.ask()
        full = []
        for x in xs:
            ratios = self.best_ratios.copy()
            ratios[units] = x  # G~ = G* with g_j := S_g
            full.append((ratios, self.space.decode(ratios)))

        records: list[TrialRecord | None] = [self.store.get(group, generation, i) for i in range(len(xs))]
        for i, record in enumerate(records):
            if record is not None and not np.allclose(record.ratios, xs[i], rtol=0, atol=1e-9):
                raise UserError(
                    f"stored trial (group {group}, generation {generation}, candidate {i}) has ratios "
                    f"{_short(record.ratios)}, but the replayed optimizer asked {_short(xs[i])}: the search "
                    "settings and the study do not belong to the same run (or the optimizer library changed "
                    f"since: {'/'.join(self.implementation or ('?', '?'))} now)",
                    source=display_url(storage_url(self.run_dir, self.config)), field=f"study {self.config.study_name!r}",
                )
        missing = [i for i, record in enumerate(records) if record is None]
        if missing and (group, generation) < self.reached:
            raise UserError(
                f"the trial store lacks {len(missing)} evaluations of group {group}, generation {generation}, "
                f"but the checkpoint says the search got to group {self.reached[0]}, generation {self.reached[1]}: "
                "the checkpoint and the study do not belong to the same run",
                source=display_url(storage_url(self.run_dir, self.config)), field=f"study {self.config.study_name!r}",
            )
        if missing:
            results = self.evaluator.evaluate([full[i][1] for i in missing])
            if len(results) != len(missing):
                raise RuntimeError(f"evaluator returned {len(results)} results for {len(missing)} budgets")
            for i, result in zip(missing, results):
                record = self._record(group, generation, i, units, xs[i], full[i][1], result)
                records[i] = self.store.add(record)
            self.evaluated += len(missing)
            bar.update(len(missing))

        optimizer.tell(xs, [-r.fitness if r.ok else None for r in records])
        for i, record in enumerate(records):
            if record.ok and record.fitness > self.best_fitness:
                self.best_fitness = record.fitness
                self.best_task_score = record.task_score
                self.best_ratios, self.best_budgets = full[i]
                self.best_key = record.key
        if self.best_key is not None:
            bar.set_postfix(best=f"{self.best_fitness:.4f}", group=f"{group + 1}/{len(self.groups)}")

    def _record(
        self, group: int, generation: int, candidate: int, units: np.ndarray, x: np.ndarray,
        budgets: np.ndarray, result: EvalResult,
    ) -> TrialRecord:
        mean_budget = float(budgets.mean())
        group_mean = float(self.space.encode(budgets)[units].mean() * self.space.target)
        record = TrialRecord(
            group=group,
            generation=generation,
            candidate=candidate,
            units=[int(u) for u in units],
            ratios=[float(v) for v in x],
            budgets=budgets.tolist(),
            mean_budget=mean_budget,
            group_mean_budget=group_mean,
            state="FAIL",
            seconds=float(result.seconds),
        )
        if not result.ok:
            record.error = result.error or f"non-finite task score {result.task_score!r}"
            return record
        # Under the exact rule the total is already c * units; a group may then spend above c
        # only by taking from the others, which is the point, so CacheScore sees the whole mean.
        by_group = self.config.cache_scope == "group" and self.config.budget_rule != "exact"
        scored_mean = group_mean if by_group else mean_budget
        record.state = "COMPLETE"
        record.task_score = float(result.task_score)
        record.cache_score = self.objective.cache_score(scored_mean, self.space.target)
        record.fitness = self.objective.fitness(record.task_score, scored_mean, self.space.target)
        return record

    def _advance(self) -> None:
        """Move to the next generation (or group) and checkpoint — after the trials are stored.

        A replayed generation (not beyond where the checkpoint already is) writes nothing.
        """
        self.cp.generation += 1
        if self.cp.generation >= self.config.generations:
            self.cp.group += 1
            self.cp.generation = 0
        if (self.cp.group, self.cp.generation) > self.reached:
            save_checkpoint(self.run_dir, self.cp)

    def _result(self) -> SearchResult:
        found = self.best_key is not None
        return SearchResult(
            best_ratios=self.best_ratios.copy(),
            best_budgets=self.best_budgets.copy(),
            best_fitness=self.best_fitness if found else None,
            best_task_score=self.best_task_score if found else None,
            history=self.store.reload().records(),
            implementation=self.implementation or tuple(self.store.study.user_attrs.get("optimizer_implementation", ("", ""))),
            evaluated=self.evaluated,
            storage=storage_url(self.run_dir, self.config),
            study_name=self.config.study_name,
        )
