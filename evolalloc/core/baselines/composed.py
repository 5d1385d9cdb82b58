"""A method built from its composition (``core/composition.py``): a registered allocation rule (or
the evolved profile's budgets), a scorer and a per-input adapter, put together here, once.

``make_baseline(label)`` is how every caller gets a method: a rule alone (``uniform``), an alias
(``uniform+adakv``, ``pyramid-snapkv``, ``cake``) or any other label (``pyramid+cake``). The
allocation it builds records its composition in ``provenance["composition"]``. A method that ranks
with a trained scorer (``uniform-retention-gates``, ``global-topk``) reads the checkpoint a run gives
it through ``reading_checkpoints``.
"""

from __future__ import annotations

from evolalloc.core.allocation import Allocation
from evolalloc.core.composition import (
           SCORER_ALWAYS_KEPT,
           Composition,
           CompositionProblem,
           check,
           label_of,
           parse_label,
)
from evolalloc.core.methods import BASELINES, EVOLVED
from evolalloc.core.paths import CHECKPOINT_ALWAYS_KEPT, resolve_checkpoint
from evolalloc.core.scorer_names import CHECKPOINT_KINDS, SCORER_ALIASES, canonical_scorer, reads_checkpoint

#: A scorer's current name -> its old one.
OLD_SCORER_NAME = {new: old for old, new in SCORER_ALIASES.items()}


class Composed:
    """One method: ``rule`` (a ``Baseline``; ``None`` for the evolved profile's budgets) with the
    composition's scorer and adapter. Reads like a ``Baseline`` (``scorer``, ``adapter``,
    ``min_target``, ``problem``, ``allocation``); the rule's parameters read through (``beta``, ``sinks``)."""

    def __init__(self, composition: Composition, rule=None, name: str | None = None,
                 scorer_params: dict | None = None, scorer_spelling: str | None = None):
        self.composition, self.rule = composition, rule
        self.name = name or label_of(composition)
        #: the composition's scorer's parameters: ``{}`` (its defaults) or what a run gives a trained one
        #: (``reading_checkpoints``: its checkpoint; the run's scorer's settings when it is the run's scorer)
        self.scorer_params = dict(scorer_params or {})
        #: the composition's scorer as the run spells it, when it is the run's (``gates``): one ranking, one key
        self.scorer_spelling = scorer_spelling

    def __getattr__(self, attribute: str):
        rule = self.__dict__.get("rule")
        if rule is None or attribute.startswith("__"):
            raise AttributeError(attribute)
        return getattr(rule, attribute)  # the rule's parameters and declarations

    def __repr__(self) -> str:
        return f"Composed({self.name!r}, {self.composition}, {self.rule!r})"

    @property
    def adapts(self) -> str | None:
        """``"evolved"`` when the budgets are the searched profile's (``allocation`` then needs ``base=``)."""
        return EVOLVED if self.rule is None else None

    @property
    def profiled(self) -> bool:
        return self.rule is not None and self.rule.profiled

    @property
    def granularity(self) -> str:
        return self.rule.granularity if self.rule is not None else "layer"

    @property
    def scorer(self) -> tuple[str, dict] | None:
        """``(name, params)`` of the scorer the method ranks with, or ``None`` for the run's. A rule
        asked for by its old name (``gates``) names its own scorer the old way too, as it always did."""
        if self.composition.scorer is not None:
            return (self.scorer_spelling or self.composition.scorer, dict(self.scorer_params))
        if self.rule is None or self.rule.scorer is None:
            return None
        name, params = self.rule.scorer
        if self.composition.allocation != BASELINES.canonical(self.composition.allocation):
            name = OLD_SCORER_NAME.get(name, name)
        return (name, params)

    @property
    def adapter(self) -> tuple[str, dict] | None:
        if self.composition.adapter is not None:
            return (self.composition.adapter, {})  # at the adapter's defaults (the runtime's)
        return self.rule.adapter if self.rule is not None else None

    def reserved(self, run_reserved: int) -> int:
        """The always-kept tokens the rule shapes its budgets above: the composition's scorer's, else the run's."""
        if not self.composition.scorer:
            return run_reserved
        params = self.scorer_params  # a trained scorer's sinks and window, when the run gives others
        if reads_checkpoint(self.composition.scorer) and ({"sinks", "window"} & set(params)):
            return params.get("sinks", CHECKPOINT_ALWAYS_KEPT["sinks"]) + params.get("window",
                                                                                  CHECKPOINT_ALWAYS_KEPT["window"])
        return SCORER_ALWAYS_KEPT[self.composition.scorer]

    @property
    def min_target(self) -> float:
        if self.rule is None:
            return 1
        if self.composition.scorer is not None:
            return self.rule.least_target(self.reserved(0))
        return self.rule.min_target

    def problem(self) -> str | None:
        """Why the method cannot run here (a trained scorer's missing checkpoint...), or ``None``."""
        scorer = self.composition.scorer and canonical_scorer(self.composition.scorer)
        if scorer in CHECKPOINT_KINDS:
            path = resolve_checkpoint(CHECKPOINT_KINDS[scorer], self.scorer_params.get("checkpoint"))
            if not path.is_file():
                return (f"method {self.name!r} ranks with {scorer}, whose checkpoint is not at {path}: name one "
                        f"under the recipe's checkpoints ({scorer}: PATH)")
        return self.rule.problem() if self.rule is not None else None

    def params(self) -> dict:
        return self.rule.params() if self.rule is not None else {}

    def recorded(self) -> dict:
        """The composition as ``provenance["composition"]`` records it: every piece that decides the row
        (a rule's own scorer and adapter too; ``scorer: null`` = the run's)."""
        return {"allocation": self.composition.allocation,
                "scorer": self.scorer[0] if self.scorer is not None else None,
                "adapter": self.adapter[0] if self.adapter is not None else None}

    def allocation(self, geometry, target: float, *, model: str = "unknown", scorer: str = "snapkv",
                   scorer_params: dict | None = None, reserved: int = 0, granularity: str | None = None,
                   provenance: dict | None = None, base: Allocation | None = None) -> Allocation:
        """This method at ``target`` as an ``Allocation`` (its scorer wins over ``scorer``; ``reserved``:
        the run scorer's always-kept tokens). ``base``: the evolved profile a method on the evolved
        budgets starts from (its budgets, granularity and scorer are kept; the method changes)."""
        extra = {"base": self.composition.allocation} if self.composition.adapter else {}
        if self.rule is None:
            if base is None:
                raise ValueError(f"{self.name!r} adapts a {EVOLVED} allocation at each budget; there is none here")
            return Allocation(
                model=base.model, geometry=base.geometry, scorer=base.scorer, scorer_params=dict(base.scorer_params),
                target=base.target, granularity=base.granularity, budgets=base.budgets.copy(),
                provenance={**base.provenance, **(provenance or {}), "method": self.name, **extra,
                            "composition": self.recorded()},
            )
        own = self.rule.scorer is not None and self.composition.scorer is None
        if own and canonical_scorer(scorer) != canonical_scorer(self.scorer[0]):
            scorer = self.scorer[0]  # not the run's scorer: the rule's own, spelled as the method's name is
        if self.composition.scorer is not None:
            scorer, scorer_params = self.scorer
            if target < self.min_target:
                raise ValueError(f"method {self.name!r} needs a target >= {self.min_target:g}, got {target:g}")
        allocation = self.rule.allocation(geometry, target, model=model, scorer=scorer, scorer_params=scorer_params,
                                          reserved=self.reserved(reserved), granularity=granularity,
                                          provenance=provenance, method=self.name)
        recorded = self.recorded()
        if own:  # the rule's own scorer, spelled as the allocation spells it (the run's spelling, if it is the run's)
            recorded["scorer"] = allocation.scorer
        allocation.provenance.update({**extra, "composition": recorded})
        return allocation


def make_baseline(name: str | Composition, **params) -> Composed:
    """The method ``name`` labels (or the ``Composition`` itself), its rule built with ``params``;
    ``ValueError`` naming what is unknown (with did-you-mean)."""
    if isinstance(name, Composition):
        check(name)
        composition = name
    else:
        try:
            composition = parse_label(name)
        except CompositionProblem as problem:
            raise ValueError(str(problem)) from None
    rule = None if composition.allocation == EVOLVED else BASELINES.create(composition.allocation, **params)
    return Composed(composition, rule)


def reading_checkpoints(name: str, checkpoints: dict | None = None,
                        run_scorer: tuple[str, dict] | None = None) -> Composed:
    """Method ``name`` (``make_baseline``) reading, when it ranks with a trained scorer (its composition's,
    ``uniform-retention-gates``, or its rule's own, ``global-topk``), the checkpoint ``checkpoints`` (a
    recipe's, by scorer name) gives that scorer; else, when ``run_scorer`` (``(name, params)``) is that
    scorer with a checkpoint in its params, the run's, so that both rows use the same weights (with the
    run's always-kept tokens, where the method has them); else its default file (``core.paths``)."""
    method = make_baseline(name)
    declared = method.scorer
    scorer = canonical_scorer(declared[0]) if declared is not None else None
    if scorer not in CHECKPOINT_KINDS:
        return method
    given = {canonical_scorer(key): value for key, value in (checkpoints or {}).items()}
    if scorer in given:
        path, run_params, spelling = str(given[scorer]), {}, None
    elif run_scorer is not None and canonical_scorer(run_scorer[0]) == scorer and run_scorer[1].get("checkpoint"):
        path, run_params, spelling = str(run_scorer[1]["checkpoint"]), dict(run_scorer[1]), run_scorer[0]
    else:
        return method
    if method.composition.scorer is not None:  # the composition's scorer: the run's settings, when it is the run's
        return Composed(method.composition, method.rule, method.name, scorer_params={**run_params, "checkpoint": path},
                        scorer_spelling=spelling)
    # the rule's own scorer (global-topk): the rule's parameters (its always-kept tokens, the run's where it has them)
    kept = {k: run_params[k] for k in ("sinks", "window") if k in run_params and hasattr(method.rule, k)}
    return make_baseline(name, checkpoint=path, **kept)


__all__ = ["Composed", "make_baseline", "reading_checkpoints"]
