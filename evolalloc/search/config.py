"""The settings of one group-wise search, validated in one place.

Defaults are EvolKV's (§4.1): sigma0 = 0.3 on the ratio ``k_i / c``, lambda = 0.3, gamma = 0.2,
group size 8, population ``4 + floor(3 ln n_g)``. A run builds it from its recipe's sections
(``SearchConfig.from_sections``: the one place where recipe keys meet search settings); the
checkpoint stores it, so ``resume`` needs nothing but the run folder.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

from evolalloc.core.errors import UserError
from evolalloc.core.objective import ObjectiveSettings
from evolalloc.core.ranges import range_problem
from evolalloc.search.optimizers import check_optimizer_options
from evolalloc.search.optimizers.base import POPSIZE_RANGE
from evolalloc.search.stopping import DEFAULT_RULE, StopRule
from searchspaces import SearchSpace, get_search_space

# The enumerations and ranges of the search's own settings: checked here, and taken from here by
# the recipe schema (lam/gamma belong to core.objective, group_size to the search space).
CACHE_SCOPES = ("group", "allocation")
# cachescore: EvolKV as published; exact: every candidate completed to c * units before evaluation.
BUDGET_RULES = ("cachescore", "exact")
# A setting here <- the recipe's ``optimizer`` field it is read from (the names differ in two places).
OPTIMIZER_FIELDS = {"optimizer": "name", "generations": "generations_per_group",
                    "max_generations": "max_generations_per_group", "patience": "patience", "tolerance": "tolerance",
                    "popsize": "popsize", "sigma0": "sigma0",
                    "lam": "lam", "gamma": "gamma", "cache_scope": "cache_scope", "budget_rule": "budget_rule",
                    "seed": "seed", "passes": "passes"}
RANGES = {"generations": {"min": 1}, "max_generations": {"min": 1}, "patience": {"min": 1}, "tolerance": {"min": 0.0},
          "popsize": POPSIZE_RANGE, "sigma0": {"min_exclusive": 0.0}, "seed": {"min": 0},
          "passes": {"min": 1, "max": 10}}


def default_popsize(n_units: int) -> int:
    """EvolKV's population size for a group of ``n_units``: ``4 + floor(3 ln n_g)``."""
    return 4 + math.floor(3 * math.log(n_units))


def space_params_of(search_space) -> dict:
    """The settings of a recipe's ``search_space`` section that its space takes (``SearchSpace.params``,
    e.g. ``floors_under_global_topk``' ``floor_fraction``), those the recipe sets (``None``: the space's default)."""
    from searchspaces import SEARCH_SPACES

    names = SEARCH_SPACES.get(search_space.name).params
    return {k: getattr(search_space, k) for k in names if getattr(search_space, k, None) is not None}


@dataclass(frozen=True)
class SearchConfig:
    """One search. Geometry and target first, then EvolKV's knobs.

    Attributes:
        generations: EvolKV's fixed ``M``, CMA-ES iterations per group; ``None`` (the default):
            each group runs until it converges (``max_generations``, ``patience``, ``tolerance``:
            ``search/stopping.py``).
        max_generations / patience / tolerance: the converging rule's cap, and the generations
            without a gain above ``tolerance`` that stop a group.
        start: the methods whose budgets at ``c`` are evaluated first, the best of them starting
            every group's optimizer (``search/groupwise.py``; the recipe's ``optimizer.start`` is
            resolved to them by ``config/search_start.py``); empty: EvolKV's uniform start, nothing
            evaluated before the first group.
        passes: how many times the search visits every group, bottom-up (1: EvolKV's Algorithm 1, each group
            once). Pass ``p`` searches group ``j`` as the search's group ``p * n_groups + j``: a fresh optimizer
            (its own seed, ``group_seed``) at G*'s ratios, which by then hold every other group's best — so a
            later pass can move a group toward what the groups above it settled on. ``F_best`` stays global:
            a later pass ships only what beats every earlier candidate.
        popsize: candidates per generation; ``None`` = ``default_popsize(len(group))``, so a
            smaller last group gets a smaller population, as the formula says.
        cache_scope: whose mean budget ``k̄`` enters CacheScore. ``"group"`` (default) follows
            Algorithm 1 literally, ``CacheScore(S_g, c)``: the mean over the units of the
            group being searched, so every group is held near ``c`` on its own.
            ``"allocation"`` uses the mean of the whole candidate allocation (Eq. 2 read
            globally); a group's overspend is then diluted by the other groups.
        budget_rule: how a candidate's total is held to the target. ``"cachescore"`` (EvolKV as
            published): a candidate may spend more or less than ``c`` per unit; the objective's
            CacheScore rewards staying at or under ``c`` and only the best profile is completed
            to the exact total at the end (§3.2). ``"exact"``: every candidate is completed to
            exactly ``c * units`` before it is evaluated, so candidates are compared at the
            memory the shipped profile will have (CacheScore is then 1 for all of them).
        storage: Optuna database URL for the trial store (or ``journal:<path>`` for a journal
            file); ``None`` = SQLite in the run folder, ``sqlite:///<run>/study.db``.
        study_name: name of the Optuna study in that database.
        optimizer_options: passed to the back-end's library as they are (recipe
            ``optimizer.options``; e.g. pycma's ``CMA_active``, TPE's ``n_startup_trials``).
        space_params: the search space's own settings (``floors_under_global_topk``' ``floor_fraction``).
    """

    num_layers: int
    num_kv_heads: int
    target: float
    search_space: str = "layer_groups"
    group_size: int = 8
    ratio_bounds: tuple[float, float] | None = None
    min_budget: int = 1
    max_budget: int | None = None
    optimizer: str = "cma"
    generations: int | None = None
    max_generations: int = DEFAULT_RULE.max_generations
    patience: int = DEFAULT_RULE.patience
    tolerance: float = DEFAULT_RULE.tolerance
    start: tuple[str, ...] = ()
    passes: int = 1
    popsize: int | None = None
    sigma0: float = 0.3
    lam: float = 0.3
    gamma: float = 0.2
    cache_scope: str = "group"
    budget_rule: str = "cachescore"
    seed: int = 0
    storage: str | None = None
    study_name: str = "evolalloc"
    optimizer_options: dict = field(default_factory=dict)
    space_params: dict = field(default_factory=dict)
    layer_caps: tuple[int | None, ...] | None = None

    @classmethod
    def from_sections(cls, *, target: float, search_space, optimizer, num_layers: int, num_kv_heads: int,
                      min_budget: int = 1, max_budget: int | None = None, storage: str | None = None,
                      study_name: str = "evolalloc", layer_caps=None, start=()) -> "SearchConfig":
        """The search at budget ``target`` (a run's resolved ``c``) that a recipe's ``search_space``
        and ``optimizer`` sections describe (any objects with those fields; ``evolalloc.config.schema``
        defines the recipe's), for a model of ``num_layers`` x ``num_kv_heads``. ``min_budget`` /
        ``max_budget`` depend on the scorer and the prompts, so the caller gives them; so does ``start``
        (the methods the run resolved ``optimizer.start`` to)."""
        return cls(
            num_layers=num_layers, num_kv_heads=num_kv_heads, target=float(target),
            search_space=search_space.name, group_size=search_space.group_size,
            ratio_bounds=tuple(search_space.ratio_bounds) if search_space.ratio_bounds else None,
            min_budget=min_budget, max_budget=max_budget, storage=storage, study_name=study_name,
            optimizer_options=dict(optimizer.options), space_params=space_params_of(search_space), start=tuple(start),
            layer_caps=tuple(layer_caps) if layer_caps is not None and any(c is not None for c in layer_caps) else None,
            **{mine: getattr(optimizer, theirs) for mine, theirs in OPTIMIZER_FIELDS.items()},
        )

    def __post_init__(self):
        if self.layer_caps is not None:  # a list when read back from a checkpoint's JSON
            object.__setattr__(self, "layer_caps", tuple(None if c is None else int(c) for c in self.layer_caps))
        object.__setattr__(self, "start", tuple(self.start))
        check_optimizer_options(self.optimizer, self.optimizer_options)
        for name, rule in RANGES.items():
            value = getattr(self, name)
            problem = None if value is None else range_problem(value, rule)  # popsize None: EvolKV's formula
            if problem:
                raise UserError(problem, field=name)
        if self.cache_scope not in CACHE_SCOPES:
            raise UserError(f"must be one of {', '.join(CACHE_SCOPES)}, got {self.cache_scope!r}", field="cache_scope")
        if self.budget_rule not in BUDGET_RULES:
            raise UserError(f"must be one of {', '.join(BUDGET_RULES)}, got {self.budget_rule!r}", field="budget_rule")
        if not self.study_name:
            raise UserError("must not be empty", field="study_name")
        try:
            self.objective()
        except ValueError as err:
            raise UserError(str(err), field="lam/gamma") from err
        self.build_space()  # validates geometry, target, bounds

    @property
    def stop_rule(self) -> StopRule:
        """When each group stops: fixed ``M`` or converged (``search/stopping.py``)."""
        return StopRule(generations=self.generations, max_generations=self.max_generations, patience=self.patience,
                        tolerance=self.tolerance)

    def planned_evaluations(self) -> int:
        """The most evaluations this search can run: the start's candidates, then every group of every pass
        at its generation cap (exactly what runs under a fixed ``M``; an upper bound when converging)."""
        cap = self.stop_rule.cap
        return len(self.start) + sum(cap * self.popsize_for(len(units)) for units in self.schedule())

    def schedule(self, space: SearchSpace | None = None) -> list:
        """The groups in the order the search visits them: the space's groups (``[n_g]`` unit indices each),
        ``passes`` times over (``space``: this config's, when already built)."""
        return list((space or self.build_space()).groups()) * self.passes

    def objective(self) -> ObjectiveSettings:
        return ObjectiveSettings(lam=self.lam, gamma=self.gamma)

    def build_space(self) -> SearchSpace:
        try:
            return get_search_space(
                self.search_space,
                num_layers=self.num_layers,
                num_kv_heads=self.num_kv_heads,
                target=self.target,
                group_size=self.group_size,
                ratio_bounds=self.ratio_bounds,
                min_budget=self.min_budget,
                max_budget=self.max_budget,
                exact_total=self.budget_rule == "exact",
                layer_caps=self.layer_caps,
                **self.space_params,
            )
        except ValueError as err:
            raise UserError(str(err), field="search_space") from err

    def popsize_for(self, n_units: int) -> int:
        return self.popsize if self.popsize is not None else default_popsize(n_units)

    def to_dict(self) -> dict:
        return asdict(self)
