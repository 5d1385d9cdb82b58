"""The sections of a run recipe: dataclass defaults plus the per-field rules that check them.

Each section is a dataclass; each field's ``metadata`` holds its rule (``choices``, ``min``,
``max``, ``length``, ``required``) and a one-line ``help``. ``build_section``
(``section_builder.py``) turns a mapping (YAML after overrides) into a section, checking key names,
types and rules; cross-field checks live in ``recipe_checks.py``. Every problem becomes one
``UserError`` naming the dotted field.

Nothing here imports torch, optuna or the runtime: checking a recipe must be instant.
"""

from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass, field
from typing import Any, Callable

from evolalloc import DEFAULT_MODEL

# FieldProblem, build_section, describe, registry and unknown_key are re-exported (noqa): code and
# plugins written against the schema import the checking machinery from here.
from evolalloc.config.section_builder import (  # noqa: F401
    FieldProblem,
    build_section,
    describe,
    join_path,
    registry,
    type_options,
    unknown_key,
)
from evolalloc.core.allocation import EXPANSION_RULES
from evolalloc.core.baselines import default_baselines
from evolalloc.core.decode_eviction import INTERVAL_RANGE
from evolalloc.core.objective import GAMMA_RANGE, LAM_RANGE
from evolalloc.core.record_settings import DEFAULT_RECORD_MEMORY, RECORD_DTYPES
from evolalloc.search.config import BUDGET_RULES, CACHE_SCOPES
from evolalloc.search.config import RANGES as SEARCH_RANGES
from evolalloc.search.stopping import DEFAULT_RULE
from fitness.task import FITNESS_MODES
from searchspaces.base import GROUP_SIZE_RANGE

# Enumerations and ranges come from the code that owns them (fitness modes from fitness, the
# search's settings from search.config, lam/gamma from core.objective, group_size from the search
# space); none of those imports torch or optuna.
DTYPES = ("float32", "bfloat16")
# Open vocabularies are checked against their registries (``registry`` rule: "module:NAME"), whose
# names are listed without importing a plugin, so checking a recipe imports neither optuna nor Ray.
OPTIMIZER_REGISTRY = "evolalloc.search.optimizers:OPTIMIZERS"
ENGINE_REGISTRY = "evolalloc.engine.base:ENGINES"
# Baselines a search split may be curated against (EvolKV's NIAH protocol): drop what they solve.
CURATION_REFERENCES = ("uniform",)
# How the profile is carried to the expansion budgets: one of Allocation.expand's rules, or "search":
# each scored on the search split at that budget, the better one shipped (pipeline.expansion).
EXPANSION_CHOICES = (*EXPANSION_RULES, "search")


def _rule(default: Any = dataclasses.MISSING, *, help: str, factory: Callable | None = None, **rules) -> Any:
    """A dataclass field carrying its validation rule and help text in ``metadata``."""
    metadata = {"help": help, **rules}
    if factory is not None:
        return field(default_factory=factory, metadata=metadata)
    if default is dataclasses.MISSING:
        metadata["required"] = True
        return field(default=None, metadata=metadata)
    return field(default=default, metadata=metadata)


@dataclass
class ModelSection:
    spec: str = _rule(DEFAULT_MODEL, help="bundled:<name>, a local HF model folder or a local .gguf file")
    dtype: str = _rule("float32", choices=DTYPES, help="weights and cache dtype")


@dataclass
class CurateSection:
    """Which drawn instances a split keeps. Off by default: the first ``n`` drawn are used."""

    full_cache_solves: bool = _rule(False,
                                    help="keep only instances the full cache answers right (greedy, task metric)")
    reference_unsolved: str | None = _rule(
        None, choices=CURATION_REFERENCES,
        help="search split only: also drop instances this baseline at c already answers right; null = keep them")
    draw: int | None = _rule(None, min=1, help="candidates drawn to find n kept ones; null = 2n when curating")

    @property
    def active(self) -> bool:
        return self.full_cache_solves or self.reference_unsolved is not None


@dataclass
class SplitSection:
    n: int = _rule(8, min=1, help="number of task instances")
    seed: int | None = _rule(None, min=0, help="instance seed; null = the recipe's seed")
    curate: CurateSection = _rule(help="keep only instances that carry signal (see runs/quickstart.yaml)",
                                  factory=CurateSection)


@dataclass
class TaskSection:
    name: str = _rule(help="registered task (see `evolalloc tasks`)")
    params: dict = _rule(help="keyword parameters of the task", factory=dict)
    context_tokens: int | None = _rule(1024, min=16, help="prompt length in tokens; null = the task's own")
    search: SplitSection = _rule(help="instances the search scores candidates on", factory=SplitSection)
    heldout: SplitSection = _rule(help="instances `compare` reports on", factory=lambda: SplitSection(n=20))
    question_after_compression: bool = _rule(False, help="compress the context, then feed the question")


@dataclass
class TaskEntrySection(TaskSection):
    """One of several tasks (``tasks:``): a task section with its weight in the fitness."""

    weight: float = _rule(1.0, min_exclusive=0.0,
                          help="weight of this task in the fitness (weighted mean of task scores)")
    label: str | None = _rule(None, help="name of this task in tables and plots; null = the task's name")


@dataclass
class FitnessSection:
    mode: str | None = _rule(
        None, choices=FITNESS_MODES,
        help="what the search climbs: generate (greedy answer, task metric), graded (greedy answer, graded score), "
             "likelihood (teacher-forced probability of the reference) or a fidelity mode (no labels: the full "
             "cache's own continuation, teacher-forced: fidelity = likelihood kept, capped on the mean; "
             "fidelity-tokens = capped per token; fidelity-abs = any change costs; fidelity-top1 = share of its "
             "tokens greedy would write), or agreement (no labels, any task: the greedy answer's token "
             "agreement with the full cache's own greedy continuation); docs/fitness.md; null = each task's "
             "default. compare and every reported result always use generate")


# Scorers the run itself can train (``scorer.train``), by their current names (``gates`` is still read:
# compare through ``core.scorer_names.canonical_scorer``).
TRAINABLE_SCORERS = ("retention-gates", "learned")
# What anchored gates are trained on (``scorer.train.objective``): the future attention of the traces
# (learned.gates_train) or the answer's likelihood through the frozen model (learned.answer_train).
GATES_OBJECTIVES = ("attention", "answer")


@dataclass
class TrainTaskSection:
    """One task of the training mixture (``scorer.train.tasks``): drawn from its *search* split only,
    independent of the task the run searches on."""

    name: str = _rule(help="registered task (see `evolalloc tasks`)")
    params: dict = _rule(help="keyword parameters of the task (e.g. needle_type: word, haystack: prose)", factory=dict)
    weight: float = _rule(1.0, min_exclusive=0.0, help="share of scorer.train.traces drawn from this task")
    label: str | None = _rule(None,
                              help="name of this part of the mixture in the training record; null = the task's name")
    context_tokens: int | None = _rule(None, min=16, help="prompt length in tokens; null = the run's (first) task's")
    seed: int | None = _rule(None, min=0, help="instance seed; null = scorer.train.seed")


@dataclass
class ScorerTrainSection:
    """Train the scorer's checkpoint inside ``evolalloc search``, before the search, from the run's
    search-split instances only (a curated split: its drawn candidates). Cached by content under the
    cache directory, so a second run with the same settings, model and instances re-uses it."""

    steps: int = _rule(600, min=1, help="optimizer steps (600 take ~30 s on 2 cores for SmolLM2's gates)")
    seed: int = _rule(0, min=0,
                      help="training seed; not the recipe's seed, so runs of `--seeds` share one trained scorer")
    traces: int | None = _rule(None, min=1, help="search instances traced, shared among the tasks by their weights; "
                                                 "null = every search instance (required with tasks)")
    future: int = _rule(32, min=1, help="future queries whose attention defines a token's importance")
    splits_per_trace: int = _rule(3, min=1, help="compression points per traced prompt (the prompt end is one)")
    min_split: int = _rule(128, min=1, help="earliest random compression point, in tokens")
    hidden: int | None = _rule(None, min=1, help="units per hidden layer of each head's network; null = the "
                                                 "scorer's default (gates 32, learned 256)")
    horizon: int = _rule(32, min=1, help="gates: steps of future utility a gate score sums")
    votes: int = _rule(0, min=0, help="gates: also read SnapKV's votes of the prompt's last N queries (query-aware "
                                      "gates, docs/hybrid.md); 0 = key/value only")
    anchored: bool = _rule(False,
                           help="gates: score = learned per-head scale and offset of log(SnapKV's smoothed vote) "
                                       "plus a residual, starting at SnapKV's ranking (needs votes; docs/hybrid.md)")
    residual: bool = _rule(True,
                           help="anchored gates: false trains only the per-head scale and offset (each head ranks "
                                      "exactly as SnapKV; what is learned is how heads compare in a global top-k)")
    objective: str = _rule("attention", choices=GATES_OBJECTIVES,
                           help="anchored gates: attention (keep what the next queries attend to) or answer (keep what "
                                "makes the model still give the full cache's answer: its likelihood under a soft "
                                "global top-k; needs splits_per_trace 1; docs/hybrid.md)")
    temperature: float = _rule(1.0, min_exclusive=0.0, help="answer objective: temperature of the soft top-k")
    uniform_too: bool = _rule(False, help="answer objective: also train under a per-head (uniform) soft top-k")
    answer_tokens: int = _rule(24, min=2, help="answer objective: longest full-cache answer taken as the target")
    capacities: list[int] | None = _rule(None, help="gates: per-head budgets trained for, one drawn per step; "
                                                    "null = the recipe's budgets (target and expansions)")
    depth: int = _rule(2, min=1, help="learned: hidden layers of each head's MLP")
    permutations: int = _rule(16, min=2, help="learned: sampled rankings per step (the RLOO group)")
    max_tokens: int | None = _rule(None, min=2, help="learned: rank a random subset of this many tokens per step; "
                                                     "null = all (slower, exact)")
    checkpoint_every: int = _rule(50, min=1,
                                  help="steps between atomic training checkpoints (a killed run resumes there)")
    tasks: list[TrainTaskSection] | None = _rule(None,
                                                 help="the training mixture: tasks (search split only) with weights, "
                                                            "independent of the searched task; "
                                                            "null = the recipe's own tasks")


@dataclass
class ScorerSection:
    name: str = _rule("snapkv", help="per-token scorer that ranks tokens inside each budget")
    params: dict = _rule(help="keyword parameters of the scorer (retention-gates, learned: checkpoint, default the "
                              "one under the cache directory)", factory=dict)
    train: ScorerTrainSection | None = _rule(None,
                                             help="train the scorer's checkpoint in the run from the search split "
                                                        f"({', '.join(TRAINABLE_SCORERS)}); null = use its checkpoint")


@dataclass
class CurveSection:
    """``budget.curve``: a profile for every budget of a grid around ``c`` (``pipeline/curve.py``)."""

    low: float = _rule(0.25, min_exclusive=0.0, help="smallest grid budget, as a multiple of c")
    high: float = _rule(4.0, min=1.0, help="largest grid budget, as a multiple of c")
    points: int = _rule(5, min=3, help="grid budgets, geometric from low*c to high*c (c is always on it)")
    anchors: list[int] | None = _rule(None,
                                      help="grid budgets searched (each its own search, nested in its neighbour); "
                                                 "null = the two ends and c; the others are interpolated per unit")

    def grid(self, target: int) -> list[int]:
        from evolalloc.core.curve import curve_grid

        return curve_grid(target, self.low, self.high, self.points)

    def anchor_budgets(self, target: int) -> list[int]:
        grid = self.grid(target)
        return sorted(set(self.anchors) | {target}) if self.anchors is not None else sorted({grid[0], target, grid[-1]})


@dataclass
class DecodeSection:
    """``budget.decode``: the budgets held while decoding too (``core/decode_eviction.py``)."""

    interval: int = _rule(**INTERVAL_RANGE, help="generated tokens between two evictions: each (layer, KV head) is "
                                                 "then cut back to its budget (between two steps it stores at most "
                                                 "budget + interval - 1 tokens)")


@dataclass
class BudgetSection:
    target: int = _rule(min=1, help="c: the target average budget per (layer, KV head), in tokens")
    expansions: list[int] | None = _rule(None, help="larger budgets the profile is carried to; null = [2c, 4c]")
    expansion_rule: str = _rule(
        "proportional", choices=EXPANSION_CHOICES,
        help="proportional (EvolKV: every budget times c'/c), additive (every unit gains c'-c tokens), topup "
             "(retention-gates only: the profile as per-head floors, the extra tokens "
             "to the global top-k per input), topup-half (the "
             "same with floors at half the profile) or search "
             "(each applicable rule scored on the search split at "
             "c', the best one shipped; held-out data is never used)")
    curve: CurveSection | None = _rule(None, help="a profile for every budget of a grid from low*c to high*c, searched "
                                                  "at anchors and monotone per unit (replaces expansions); null = off")
    decode: DecodeSection | None = _rule(None, help="hold the budgets while decoding, e.g. {interval: 16}: the search, "
                                                    "the comparison and the shipped profile; null = prompt-only (the "
                                                    "cache grows with the answer)")


@dataclass
class SearchSpaceSection:
    name: str = _rule("layer_groups", help="layer_groups (one budget per layer), head_groups (per KV head), or the "
                                           "hybrids over the global top-k: score_prior / score_prior_heads (a searched "
                                           "prior on the retention gates' scores), floors_under_global_topk")
    group_size: int = _rule(8, **GROUP_SIZE_RANGE, help="n_g: units optimised together, bottom-up")
    ratio_bounds: list[float] | None = _rule(None, length=2, help="[lo, hi] bounds on k_i / c; null = automatic")
    floor_fraction: float | None = _rule(None, min=0.0, max=1.0,
                                         help="floors_under_global_topk only: the share of each head's budget "
                                                                     "it keeps before the global top-k; null = 0.5")


@dataclass
class OptimizerSection:
    name: str = _rule("cma", registry=OPTIMIZER_REGISTRY,
                      help="cma (pycma), optuna-cma, optuna-tpe or random (the control: no adaptation)")
    sigma0: float = _rule(0.3, **SEARCH_RANGES["sigma0"], help="initial CMA-ES step on the ratio k_i / c")
    popsize: int | None = _rule(None, **SEARCH_RANGES["popsize"],
                                help="candidates per generation; null = 4 + floor(3 ln n_g)")
    generations_per_group: int | None = _rule(
        None, **SEARCH_RANGES["generations"],
        help="EvolKV's fixed M: generations per group; null = each group runs until it converges (below)")
    max_generations_per_group: int = _rule(DEFAULT_RULE.max_generations, **SEARCH_RANGES["max_generations"],
                                           help="converging: the cap on a group's generations")
    patience: int = _rule(DEFAULT_RULE.patience, **SEARCH_RANGES["patience"],
                          help="converging: a group stops after this many generations without a gain above tolerance")
    tolerance: float = _rule(DEFAULT_RULE.tolerance, **SEARCH_RANGES["tolerance"],
                             help="converging: the least rise of the best fitness that counts as a gain")
    start: str = _rule("best", help="where the search starts: best (uniform, PyramidKV and LU-KV at c each evaluated "
                                    "on the search split, the best one starts every group), uniform (EvolKV as "
                                    "published: nothing evaluated first), or methods and allocation files joined "
                                    "by commas (pyramid,lukv; best,runs/x/allocation-c512.json: a profile from an "
                                    "earlier run, carried to c)")
    passes: int = _rule(1, **SEARCH_RANGES["passes"],
                        help="how many times the search visits every group, bottom-up: 1 = EvolKV (each group "
                             "once); 2 = the groups again from the profile the first pass found")
    lam: float = _rule(0.3, **LAM_RANGE, help="weight of CacheScore in the fitness")
    gamma: float = _rule(0.2, **GAMMA_RANGE, help="discount for staying under the budget")
    cache_scope: str = _rule("group", choices=CACHE_SCOPES, help="whose mean budget CacheScore sees")
    budget_rule: str = _rule("cachescore", choices=BUDGET_RULES,
                             help="cachescore: candidates may over/underspend, judged by CacheScore (EvolKV); "
                                  "exact: every candidate completed to c x units before it is evaluated")
    seed: int | None = _rule(None, **SEARCH_RANGES["seed"], help="optimizer seed; null = the recipe's seed")
    options: dict = _rule(help="passed to the back-end as they are (pycma's CMAOptions, the Optuna sampler's "
                               "arguments)", factory=dict)


@dataclass
class EngineSection:
    kind: str = _rule("local", registry=ENGINE_REGISTRY, help="local (in-process) or ray (actors)")
    workers: int = _rule(1, min=1, help="evaluator processes (ray actors)")
    threads: int | None = _rule(None, min=1, help="torch threads per worker; null = torch's default")
    batch_size: int = _rule(16, min=1, help="decode rows per batch")
    address: str = _rule("local", help="ray address: local, auto or ray://host:port")
    record_dtype: str = _rule("float32", choices=RECORD_DTYPES,
                              help="precision prefill records keep K/V in (float32: "
                                   "results identical; 16-bit: half the memory)")
    record_memory: str = _rule(DEFAULT_RECORD_MEMORY,
                               help="records held in memory (a size such as 4GiB; 0B: none) before "
                                                           "the rest spill to the run folder "
                                                           "and are memory-mapped per batch")
    keep_records: bool = _rule(False, help="keep the spilled prefill records (records/) once the run has finished; "
                                           "false: removed then (a killed run still resumes from them)")
    options: dict = _rule(help="keyword options passed to the engine as they are (ray: max_retries)", factory=dict)


@dataclass
class RecipeData:
    """Every section with its defaults. ``recipe.Recipe`` adds behaviour on top."""

    name: str | None = _rule(None, help="run name (folder under runs/); null = the recipe file's stem")
    model: ModelSection = _rule(help="the model to compress", factory=ModelSection)
    task: TaskSection | None = _rule(None, help="the task that scores a candidate (or list several under tasks)")
    tasks: list[TaskEntrySection] | None = _rule(None, help="several tasks with weights, instead of task")
    fitness: FitnessSection = _rule(help="what the search climbs", factory=FitnessSection)
    scorer: ScorerSection = _rule(help="token selection inside a budget", factory=ScorerSection)
    budget: BudgetSection = _rule(help="target average budget and its expansions", factory=BudgetSection)
    search_space: SearchSpaceSection = _rule(help="how CMA-ES vectors map to budgets", factory=SearchSpaceSection)
    optimizer: OptimizerSection = _rule(help="the optimizer and EvolKV's objective", factory=OptimizerSection)
    engine: EngineSection = _rule(help="where candidates are evaluated", factory=EngineSection)
    storage: str | None = _rule(None, help="Optuna storage URL; null = sqlite:///<run>/study.db")
    baselines: list[str] = _rule(help="methods `compare` evaluates, each a name (uniform, pyramid+adakv...) or a "
                                      "composition {allocation: RULE, scorer: SCORER, adapter: ADAPTER}; "
                                      "default: uniform, pyramid, streaming",
                                 factory=lambda: default_baselines())
    checkpoints: dict = _rule(help="the checkpoint file each trained scorer a method of `baselines` ranks with "
                                   "reads, by scorer: {retention-gates: PATH} for {allocation: uniform, scorer: "
                                   "retention-gates} and global-topk; default: the run's scorer's when it is that "
                                   "scorer, else the scorer's default file", factory=dict)
    seed: int = _rule(0, min=0, help="default for every seed left null")


def field_help(cls: type = RecipeData, path: str = "") -> list[tuple[str, str]]:
    """``(dotted field, help)`` for every field, depth first — for docs and ``--set`` hints."""
    rows = []
    hints = typing.get_type_hints(cls)
    for spec in dataclasses.fields(cls):
        where = join_path(path, spec.name)
        rows.append((where, spec.metadata["help"]))
        kind = type_options(hints[spec.name])[0][0]
        if typing.get_origin(kind) is list and dataclasses.is_dataclass(typing.get_args(kind)[0]):
            rows.extend(field_help(typing.get_args(kind)[0], f"{where}[i]"))
        elif dataclasses.is_dataclass(kind):
            rows.extend(field_help(kind, where))
    return rows
