"""A method is a composition: allocation rule x scorer x per-input adapter.

``Composition(allocation, scorer, adapter)``: ``allocation`` is a registered rule
(``core/baselines``: uniform, pyramid, streaming, lukv, global-topk...) or ``evolved`` (the searched
profile's budgets); ``scorer`` ranks the tokens inside each budget (``None``: the rule's own if it
declares one, else the run's); ``adapter`` moves the budgets per input when a row is compressed
(``runtime/adaptive``: adakv, cake...; ``None``: static budgets). A recipe writes one as a mapping
``{allocation: uniform, scorer: snapkv, adapter: adakv}`` or by its label.

Every method has one label, its name in tables, comparison.json and ``provenance.method``: the
alias's when the composition is one of ``ALIASES`` (the names recipes and files used before
methods were composed), else the rule's name alone, else ``rule[-scorer][+adapter]``
(``pyramid+cake``). ``parse_label`` reads any label back, so a label is enough to rebuild its method
(it also reads ``uniform+cake``, whose one label is the alias ``cake``: a recipe says it either way).
Pieces are named at their default settings. A rule's old name (``gates``, now ``global-topk``:
``core/methods.py``) is read too and kept as written, so an old recipe's rows keep their label.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from evolalloc.core.methods import BASELINES, EVOLVED
from evolalloc.core.paths import CHECKPOINT_ALWAYS_KEPT
from evolalloc.core.scorer_names import LEARNED, PPO_POLICY, RETENTION_GATES

_CHECKPOINT_KEPT = CHECKPOINT_ALWAYS_KEPT["sinks"] + CHECKPOINT_ALWAYS_KEPT["window"]
#: Scorers a composition may name, at their default settings, with the tokens each always keeps
#: (the rule shapes its budgets above them: pyramid's observation window). A constant here, not a
#: lookup: core sits below the runtime (``tests/core/test_composition.py`` checks it against the scorers).
#: The trained ones read the checkpoint the recipe's ``checkpoints`` names (else their default file).
SCORER_ALWAYS_KEPT = {"snapkv": 32, RETENTION_GATES: _CHECKPOINT_KEPT, LEARNED: _CHECKPOINT_KEPT,
                      PPO_POLICY: _CHECKPOINT_KEPT}

FIELDS = ("allocation", "scorer", "adapter")


@dataclass(frozen=True)
class Composition:
    """One method's pieces, by name (see the module docstring)."""

    allocation: str
    scorer: str | None = None
    adapter: str | None = None

    def as_dict(self) -> dict:
        return {"allocation": self.allocation, "scorer": self.scorer, "adapter": self.adapter}


#: The short names of compositions, as recipes, comparison.json and allocation files name them.
ALIASES: dict[str, Composition] = {
    "uniform-snapkv": Composition("uniform", scorer="snapkv"),  # SnapKV as published, whatever the run's scorer
    "pyramid-snapkv": Composition("pyramid", scorer="snapkv"),  # PyramidKV as published
    "evolved+adakv": Composition(EVOLVED, adapter="adakv"),
    "uniform+adakv": Composition("uniform", adapter="adakv"),
    "pyramid+adakv": Composition("pyramid", adapter="adakv"),
    "cake": Composition("uniform", adapter="cake"),  # CAKE's layer preference over uniform budgets
}


class CompositionProblem(ValueError):
    """A bad composition; ``field`` names the piece (``allocation``, ``scorer``, ``adapter``) or ``""``."""

    def __init__(self, field: str, message: str):
        super().__init__(message)
        self.field = field


def rule_names() -> list[str]:
    """The registered allocation rules, by name."""
    return sorted(BASELINES.load_all())


def is_rule(name: str) -> bool:
    """Whether ``name`` is a registered allocation rule (by its current or an old name)."""
    BASELINES.load_all()  # a rule's file is found by importing the package
    return name in BASELINES


def label_of(composition: Composition) -> str:
    """The composition's one label (see the module docstring)."""
    for alias, known in ALIASES.items():
        if known == composition:
            return alias
    label = composition.allocation
    if composition.scorer:
        label += f"-{composition.scorer}"
    if composition.adapter:
        label += f"+{composition.adapter}"
    return label


def parse_label(name: str) -> Composition:
    """The composition ``name`` labels; ``CompositionProblem`` (field ``""``) if none does."""
    if name in ALIASES:
        return ALIASES[name]
    if is_rule(name):
        return Composition(name)
    base, _, adapter = name.partition("+")
    rule, _, scorer = (base, "", "") if is_rule(base) else base.partition("-")  # a rule's name may hold "-"
    composition = Composition(rule, scorer or None, adapter or None)
    if not (scorer or adapter):
        raise CompositionProblem("", unknown_method(name))
    check(composition)
    return composition


def unknown_method(name: str) -> str:
    import difflib

    known = [*rule_names(), *ALIASES]
    close = difflib.get_close_matches(name, [*known, *BASELINES.aliases()], n=1)  # an old name's typo too
    hint = f" (did you mean {BASELINES.canonical(close[0])!r}?)" if close else ""
    return (f"unknown method {name!r}{hint}; known: {', '.join(known)}, or a composition "
            "{allocation: RULE, scorer: SCORER, adapter: ADAPTER}")


def check(composition: Composition) -> None:
    """``CompositionProblem`` naming the piece the pieces cannot be put together by (adapter names are
    the runtime's: the recipe checks them, ``config/recipe_checks.py``)."""
    rule = composition.allocation
    if rule != EVOLVED and not is_rule(rule):
        raise CompositionProblem("allocation", f"unknown allocation rule {rule!r}; known: "
                                               f"{', '.join([EVOLVED, *rule_names()])}")
    if composition.scorer is not None and composition.scorer not in SCORER_ALWAYS_KEPT:
        raise CompositionProblem("scorer", f"unknown scorer {composition.scorer!r}; known: "
                                           f"{', '.join(SCORER_ALWAYS_KEPT)} (or leave it out: the run's scorer)")
    if rule == EVOLVED:
        if composition.scorer is not None:
            raise CompositionProblem("scorer", "the evolved allocation ranks with the searched profile's scorer")
        return
    try:
        declared = BASELINES.get(rule)()  # its declared scorer and adapter are properties
    except TypeError:  # a rule that needs parameters to exist (none built in): checked when built
        return
    if composition.scorer is not None and declared.scorer is not None:
        raise CompositionProblem("scorer", f"rule {rule!r} ranks with its own scorer ({declared.scorer[0]})")
    if composition.scorer is not None and declared.profiled:
        raise CompositionProblem("scorer", f"rule {rule!r} allocates from curves profiled with the run's scorer")
    if composition.adapter is not None and declared.adapter is not None:
        raise CompositionProblem("adapter", f"rule {rule!r} has its own adapter ({declared.adapter[0]})")


def from_mapping(entry: Any) -> Composition:
    """A recipe's ``{allocation: ..., scorer: ..., adapter: ...}`` as a ``Composition``
    (``CompositionProblem`` naming the field)."""
    unknown = sorted(set(entry) - set(FIELDS))
    if unknown:
        raise CompositionProblem(str(unknown[0]), f"unknown field; a method has {', '.join(FIELDS)}")
    if "allocation" not in entry:
        raise CompositionProblem("allocation", "missing: a rule (uniform, pyramid, ...) or evolved")
    for key in FIELDS:
        value = entry.get(key)
        if not (isinstance(value, str) and value) and not (value is None and key != "allocation"):
            raise CompositionProblem(key, f"must be a name, got {value!r}")
    composition = Composition(entry["allocation"], entry.get("scorer"), entry.get("adapter"))
    check(composition)
    return composition


def allocation_adapter(allocation) -> tuple[str, dict] | None:
    """``(name, params)`` of the runtime budget adapter ``allocation``'s budgets are meant for, or
    ``None`` (static budgets): its method's (AdaKV, CAKE, global-topk: the composition's adapter
    or its rule's), or the one a searched profile names in ``provenance.adapter`` (the hybrids), with
    the parameters in ``provenance.adapter_params`` (``floors_under_global_topk``' ``floor_fraction``)."""
    method = allocation.provenance.get("method")
    if method and method != EVOLVED:
        try:
            composition = parse_label(method)
        except CompositionProblem:
            composition = None
        if composition is not None and composition.adapter is not None:
            return (composition.adapter, {})
        if composition is not None and is_rule(composition.allocation):
            declared = BASELINES.create(composition.allocation).adapter
            if declared is not None:
                return declared
    named = allocation.provenance.get("adapter")
    return (named, dict(allocation.provenance.get("adapter_params") or {})) if named else None


def methods() -> tuple[str, ...]:
    """The methods an allocation file names without composing: ``evolved``, the rules, the aliases (current
    names; a rule's old name, ``gates``, is still a method: ``is_method``)."""
    return (EVOLVED, *sorted([*BASELINES.load_all(), *ALIASES]))


def is_method(name: Any) -> bool:
    """Whether ``name`` may be an allocation's ``provenance.method``: evolved or any method's label."""
    if name == EVOLVED:
        return True
    try:
        parse_label(name)
    except (CompositionProblem, TypeError, AttributeError):
        return False
    return True


__all__ = ["ALIASES", "Composition", "CompositionProblem", "FIELDS", "SCORER_ALWAYS_KEPT", "allocation_adapter",
           "check", "from_mapping", "is_method", "is_rule", "label_of", "methods", "parse_label", "rule_names",
           "unknown_method"]
