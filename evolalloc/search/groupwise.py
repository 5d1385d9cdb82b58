"""EvolKV's Algorithm 1 as a pure ask/tell state machine, shared by every driver.

``GroupwiseAlgorithm`` holds the bookkeeping of Algorithm 1 and nothing else: which group and
generation come next, the optimizer of the current group, the best-so-far ratios ``G*`` and the
global ``F_best``. It never evaluates, stores or waits. Two drivers use it:

* the in-process loop (``loop.py``): ask a generation, evaluate it with an ``Evaluator``, store
  the trials, tell, checkpoint;
* the ask/tell service (``evolalloc.service.studies``): ask a generation, lease its candidates
  to remote clients, wait for their results, tell.

So the two give the same candidates, fitness and profile for the same seed and the same task
scores: there is one implementation of the algorithm, not two.

Before the first group a search may start from evaluated profiles (``SearchConfig.start``: the
run's unsearched methods at ``c``, handed in by the driver with ``set_start``): they are one
generation of group ``START_GROUP`` (-1), stored like any trial; the best of them becomes ``G*``
and ``F_best``, and every group's optimizer starts at ``G*``'s ratios — so the shipped profile,
the best evaluated candidate, is never below the start on the search split. Without a start
(EvolKV as published) ``G*`` starts at uniform and ``F_best`` at ``-inf``. Each group runs until
the stopping rule (``search/stopping.py``) says so: EvolKV's fixed ``M``, or until it converged.
With ``SearchConfig.passes`` > 1 the groups are visited again, bottom-up, after the last: pass 2's
group ``j`` is the search's group ``n_groups + j``, a fresh optimizer (seeded by that number) at ``G*``,
so a group revisited is searched against every other group's best, not against the start's ratios.

One generation is ``cands = alg.ask()`` (the same list again until ``tell``), one
``alg.score(cand, result)`` per candidate (a ``TrialRecord``: CacheScore and fitness computed
here from the candidate's budgets, FAIL for a failed or non-finite result — never a made-up
score), then ``alg.tell(records)`` with the generation's records in candidate order (the
generation barrier). A driver resumes by replaying: a fresh algorithm asked and told the stored
records again reaches exactly the same state (``matches`` checks each replayed candidate).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from evolalloc.engine.base import EvalResult
from evolalloc.search.config import SearchConfig
from evolalloc.search.optimizers import AskTellOptimizer, get_optimizer
from evolalloc.search.stopping import GroupSummary, finite_or_none
from evolalloc.search.store import TrialRecord

#: The group number of the start's candidates (evaluated before group 0).
START_GROUP = -1
#: How a start's label says the search space changed its budgets (a per-head profile's layer means in a
#: per-layer space, a unit clipped to the ratio bounds): what was evaluated is not the method as published.
HELD = " (as the search space holds it)"


def group_seed(seed: int, group: int) -> int:
    """Independent, reproducible seed for group ``group``'s optimizer."""
    return int(np.random.SeedSequence([seed, group]).generate_state(1)[0])


@dataclass(frozen=True)
class Candidate:
    """One candidate of a generation.

    Attributes:
        x: ``[len(units)]`` the optimizer's ratios for the group's units.
        ratios: ``[n_units]`` G~ = G* with the group's units set to ``x``.
        budgets: ``[num_layers, num_kv_heads]`` int64, ``ratios`` decoded by the search space.
    """

    group: int
    generation: int
    index: int
    units: np.ndarray
    x: np.ndarray
    ratios: np.ndarray
    budgets: np.ndarray

    @property
    def key(self) -> tuple[int, int, int]:
        return (self.group, self.generation, self.index)


class GroupwiseAlgorithm:
    """Algorithm 1's state for one ``SearchConfig``; see the module docstring for the protocol."""

    def __init__(self, config: SearchConfig):
        self.config = config
        self.space = config.build_space()
        self.groups = config.schedule(self.space)  # the space's groups, once per pass
        self.groups_per_pass = len(self.groups) // config.passes
        self.objective = config.objective()
        self.rule = config.stop_rule
        self.group = START_GROUP if config.start else 0
        self.generation = 0
        self.implementation: tuple[str, str] | None = None
        initial = self.space.initial_ratios()
        self.best_ratios = initial
        self.best_budgets = self.space.decode(initial)
        self.best_fitness = -math.inf
        self.best_task_score: float | None = None
        self.best_key: tuple[int, int, int] | None = None
        #: How each finished group ended, in order; and the start's candidates by name with their fitness.
        self.summaries: list[GroupSummary] = []
        self.start_scores: dict[str, float | None] = {}
        self.evaluations_done = 0
        self._start: list[np.ndarray] | None = None  # the start's budgets, as the space holds them
        self._start_changed: list[bool] = []
        self._history: list[float] = [self.best_fitness]  # F_best when the group started, then per generation
        self._group_evaluations = 0
        self._optimizer: AskTellOptimizer | None = None
        self._asked: list[Candidate] | None = None

    # -- progress -----------------------------------------------------------------------------
    @property
    def done(self) -> bool:
        return self.group >= len(self.groups)

    @property
    def starting(self) -> bool:
        """Whether the next generation is the start's (``set_start`` must have given its budgets)."""
        return self.group == START_GROUP

    @property
    def position(self) -> tuple[int, int]:
        """The generation ``ask`` gives next (``(len(groups), 0)`` when done, every pass's groups counted;
        ``(-1, 0)``: the start)."""
        return (self.group, self.generation)

    def total_evaluations(self) -> int:
        """The evaluations done so far plus the most the rest can take (each group to its cap): exact
        under a fixed ``M``, an upper bound that falls as groups converge early."""
        cap = self.rule.cap
        popsizes = [self.config.popsize_for(len(units)) for units in self.groups]
        rest = len(self.config.start) if self.starting else 0
        for group, popsize in enumerate(popsizes):
            if group > self.group:
                rest += cap * popsize
            elif group == self.group:
                rest += (cap - self.generation) * popsize
        return self.evaluations_done + rest

    @property
    def found(self) -> bool:
        return self.best_key is not None

    # -- the start ------------------------------------------------------------------------------
    def start_budgets(self, budgets: list[np.ndarray]) -> list[np.ndarray]:
        """The start's budgets ``[num_layers, num_kv_heads]`` (one per ``config.start`` name) as this
        space holds them: a per-head profile in a per-layer space becomes its layer means, caps and
        bounds apply, the exact rule completes the total (``decode(encode(b))``)."""
        return [self.space.held(np.asarray(b)) for b in budgets]

    def set_start(self, budgets: list[np.ndarray], changed: list[bool] | None = None) -> None:
        """The budgets of the start's candidates, already as the space holds them (``start_budgets``;
        on a replay: as stored), one per ``config.start`` name, in order. ``changed[i]``: the space
        changed method ``i``'s budgets (its label says so: ``HELD``)."""
        if len(budgets) != len(self.config.start):
            raise ValueError(f"{len(budgets)} start profiles for {len(self.config.start)} start methods")
        self._start = [np.asarray(b, dtype=np.int64) for b in budgets]
        self._start_changed = list(changed) if changed is not None else [False] * len(budgets)

    # -- ask / score / tell -------------------------------------------------------------------
    def ask(self) -> list[Candidate]:
        """The current generation's candidates (the same list until ``tell``)."""
        if self.done:
            raise RuntimeError("the search is finished; there is nothing to ask")
        if self._asked is None:
            self._asked = self._ask_start() if self.starting else self._ask_group()
        return list(self._asked)

    def _ask_start(self) -> list[Candidate]:
        if self._start is None:
            raise RuntimeError("the search starts from evaluated profiles: set_start() before ask()")
        units = np.arange(self.space.n_units, dtype=np.int64)
        asked = []
        for i, budgets in enumerate(self._start):
            ratios = self.space.encode(budgets)
            asked.append(Candidate(START_GROUP, 0, i, units, ratios, ratios, budgets))
        return asked

    def _ask_group(self) -> list[Candidate]:
        units = self.groups[self.group]
        if self._optimizer is None:  # a fresh optimizer at G*'s ratios (uniform without a start) for every group
            self._optimizer = get_optimizer(
                self.config.optimizer,
                x0=np.clip(self.best_ratios[units], *self.space.ratio_bounds),
                sigma0=self.config.sigma0,
                bounds=self.space.ratio_bounds,
                popsize=self.config.popsize_for(len(units)),
                seed=group_seed(self.config.seed, self.group),
                options=self.config.optimizer_options,
            )
            if self.implementation is None:
                self.implementation = self._optimizer.implementation
        asked = []
        for i, x in enumerate(self._optimizer.ask()):
            ratios = self.best_ratios.copy()
            ratios[units] = x  # G~ = G* with g_j := S_g
            asked.append(Candidate(self.group, self.generation, i, units, x, ratios, self.space.decode(ratios)))
        return asked

    @staticmethod
    def matches(candidate: Candidate, stored_ratios, stored_budgets=None) -> bool:
        """Whether a stored trial is this replayed candidate: its ratios (float dust allowed); a start's by
        its budgets (``stored_budgets``), since the store clips ratios to the bounds and a start's may lie beyond."""
        if candidate.group == START_GROUP:
            return stored_budgets is not None and np.array_equal(np.asarray(stored_budgets), candidate.budgets)
        return np.allclose(np.asarray(stored_ratios, dtype=float), candidate.x, rtol=0, atol=1e-9)

    def score(self, candidate: Candidate, result: EvalResult) -> TrialRecord:
        """The stored form of ``candidate`` evaluated as ``result``: fitness, or FAIL with the error."""
        budgets = candidate.budgets
        units = candidate.units
        mean_budget = float(budgets.mean())
        group_mean = float(self.space.encode(budgets)[units].mean() * self.space.target)
        record = TrialRecord(
            group=candidate.group,
            generation=candidate.generation,
            candidate=candidate.index,
            units=[int(u) for u in units],
            ratios=[float(v) for v in candidate.x],
            budgets=budgets.tolist(),
            mean_budget=mean_budget,
            group_mean_budget=group_mean,
            state="FAIL",
            seconds=float(result.seconds),
            label=self._start_label(candidate.index) if candidate.group == START_GROUP else None,
        )
        if not result.ok:
            record.error = result.error or f"non-finite task score {result.task_score!r}"
            return record
        # Under the exact rule the total is already c * units; a group may then spend above c
        # only by taking from the others, which is the point, so CacheScore sees the whole mean.
        # (A space may complete every candidate whatever the rule: the hybrid's score_prior does.)
        by_group = self.config.cache_scope == "group" and not self.space.exact_total
        scored_mean = group_mean if by_group else mean_budget
        record.state = "COMPLETE"
        record.task_score = float(result.task_score)
        record.cache_score = self.objective.cache_score(scored_mean, self.space.target)
        record.fitness = self.objective.fitness(record.task_score, scored_mean, self.space.target)
        return record

    def _start_label(self, index: int) -> str:
        changed = self._start_changed[index] if index < len(self._start_changed) else False
        return self.config.start[index] + (HELD if changed else "")

    def tell(self, records: list[TrialRecord]) -> None:
        """Close the current generation with its records, in candidate order; then advance.

        G* becomes a candidate's G~ only when its fitness beats the global F_best (the first
        wins a tie). A group ends when the stopping rule says so; the next starts a fresh optimizer.
        """
        asked = self._asked
        if asked is None:
            raise RuntimeError("tell() without ask()")
        if [r.key for r in records] != [c.key for c in asked]:
            raise ValueError("tell() needs one record per asked candidate, in candidate order")
        if not self.starting:
            self._optimizer.tell([c.x for c in asked], [-r.fitness if r.ok else None for r in records])
        for candidate, record in zip(asked, records):
            if record.ok and record.fitness > self.best_fitness:
                self.best_fitness = record.fitness
                self.best_task_score = record.task_score
                # The start's ratios may lie outside the bounds (they are not clipped: its budgets are kept).
                self.best_ratios, self.best_budgets = candidate.ratios, candidate.budgets
                self.best_key = record.key
        self._asked = None
        self.evaluations_done += len(records)
        if self.starting:
            self.start_scores = {r.label: r.fitness for r in records}
            self._next_group()
            return
        self.generation += 1
        self._group_evaluations += len(records)
        self._history.append(self.best_fitness)
        reason = self.rule.reason(self._history, [] if self.rule.fixed else self._optimizer.stop_reasons())
        if reason is not None:
            passes = {} if self.config.passes == 1 else {"pass_number": self.group // self.groups_per_pass + 1,
                                                          "space_group": self.group % self.groups_per_pass}
            self.summaries.append(GroupSummary(
                group=self.group, generations=self.generation, evaluations=self._group_evaluations, reason=reason,
                start_fitness=finite_or_none(self._history[0]), best_fitness=finite_or_none(self.best_fitness),
                **passes))
            self._next_group()

    def _next_group(self) -> None:
        self.group += 1
        self.generation = 0
        self._group_evaluations = 0
        self._history = [self.best_fitness]
        self._optimizer = None
