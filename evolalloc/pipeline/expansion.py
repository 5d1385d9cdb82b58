"""Carry the searched profile to the expansion budgets (``budget.expansion_rule``).

A profile searched at ``c`` says where the first ``c`` tokens per unit matter most; how the
extra memory of a larger ``c'`` should be spread was never searched. Three rules answer it
(``Allocation.expand``): ``proportional`` (EvolKV) keeps the profile's *ratios*, so a layer the
search starved at 128 stays at a quarter of the others at 512; ``additive`` keeps its
*differences* and spreads the new tokens evenly; ``topup`` (the ``retention-gates`` scorer only,
``core/topup.py``) keeps the searched budgets as per-head *floors* and lets one global top-k of
the gates' scores place the extra ``(c' - c) * L * H`` entries per input (adapter
``floors_under_global_topk``, floor fraction ``c / c'``), so the memory the search never saw goes
where each input needs it. None is right on every task, so rule ``search`` scores every rule the
profile admits at ``c'`` on the search split, with the search's own fitness, and ships the best
one. The held-out split is never looked at: the choice is made before ``compare``.

Rule ``search`` also scores the search's start methods at ``c'`` (``optimizer.start``: uniform,
PyramidKV, LU-KV at ``c'``, as the search space holds them), as the search itself did at ``c``: a
converged profile carried by a rule can fall behind a method that was profiled at ``c'`` (issue 50:
LU-KV at 2c and 4c at 4096 tokens), and the run should never ship, at any budget, a profile below
one it could compute. Such a pick is shipped as ``expansion_rule: start`` with ``start_method``.
"""

from __future__ import annotations

from evolalloc.core.allocation import EXPANSION_RULES, Allocation
from evolalloc.core.topup import TOPUP, TOPUP_HALF, topup_problem

#: What rule ``search`` chooses from. ``topup-half`` (added later, chosen for one task on its search
#: split) is not among them, so a ``search`` run picks what it picked before the rule existed.
SEARCHED_RULES = tuple(r for r in EXPANSION_RULES if r != TOPUP_HALF)


def candidate_rules(evolved: Allocation) -> tuple[str, ...]:
    """The rules rule ``search`` tries for ``evolved``: ``topup`` only where it applies (retention-gates)."""
    admits_topup = topup_problem(evolved.scorer, evolved.provenance.get("adapter")) is None
    return tuple(r for r in SEARCHED_RULES if r != TOPUP or admits_topup)


START = "start"


def expand_profile(evolved: Allocation, budgets, rule: str, min_budget: int, search_evaluator=None,
                   echo=print, evaluator_for=None, starts_at=None) -> dict[float, Allocation]:
    """``{budget: allocation}`` for each expansion budget, by ``rule`` (see the module docstring).

    ``search_evaluator`` (an ``Evaluator`` of the search split in the fitness mode) is needed for
    rule ``search``; the scores it gave each rule are kept in the shipped profile's provenance
    (``expansion_search_scores``), and a failed evaluation is an error, never a silent pick.
    A ``topup`` candidate selects tokens with another adapter than the profile's, so it is scored
    by ``evaluator_for(candidate)`` (the same split and fitness, that candidate's scorer); without
    ``evaluator_for`` it is not a candidate. ``starts_at(c')``: ``{method: budgets [L, H]}`` of the
    search's start methods at ``c'`` as its space holds them, candidates of rule ``search`` too.
    """
    if rule != "search":
        return {float(b): evolved.expand(b, min_budget=min_budget, rule=rule) for b in budgets}
    if search_evaluator is None:
        raise ValueError("expansion rule 'search' needs the search split's evaluator")
    rules = candidate_rules(evolved) if evaluator_for is not None else tuple(r for r in SEARCHED_RULES if r != TOPUP)
    out = {}
    for budget in map(float, budgets):
        candidates = {r: evolved.expand(budget, min_budget=min_budget, rule=r) for r in rules}
        names = list(rules)
        for method, held in (starts_at(budget) if starts_at is not None else {}).items():
            name = f"{START}:{method}"
            candidates[name] = _as_start(candidates[rules[0]], held, method, min_budget)
            names.append(name)
        static = [r for r in names if r != TOPUP]  # the profile's own scorer: one batch
        results = dict(zip(static, search_evaluator.evaluate([candidates[r].budgets for r in static])))
        if TOPUP in rules:
            (results[TOPUP],) = evaluator_for(candidates[TOPUP]).evaluate([candidates[TOPUP].budgets])
        scores = {}
        for candidate_rule in names:
            result = results[candidate_rule]
            if not result.ok:
                raise RuntimeError(f"scoring the {candidate_rule} expansion to c={budget:g} failed: {result.error}")
            scores[candidate_rule] = float(result.task_score)
        # Ties go to the first rule (EvolKV's proportional): the paper's choice unless the data disagree.
        best = max(names, key=lambda r: (scores[r], -names.index(r)))
        chosen = candidates[best]
        chosen.provenance.update(expansion_search_scores=scores)
        echo(f"expansion to c={budget:g}: " + ", ".join(f"{r} {s:.4f}" for r, s in scores.items())
             + f" on the search split -> {best}")
        out[budget] = chosen
    return out


# The searched profile's provenance that describes its search, not a start method's budgets.
_SEARCH_ONLY = ("fitness", "task_score", "evaluations", "completed_from_total")


def _as_start(expanded: Allocation, budgets, method: str, min_budget: int) -> Allocation:
    """The start ``method``'s ``budgets`` at an expansion budget, shipped in the searched profile's terms
    (its scorer and granularity; ``expansion_rule: start``, ``start_method``), completed to exactly
    ``c'`` per unit like every carried candidate (a per-layer space's rounded layer means may miss it by
    a few tokens) before it is scored."""
    import dataclasses

    import numpy as np

    provenance = {k: v for k, v in expanded.provenance.items() if k not in _SEARCH_ONLY}
    provenance.update(expansion_rule=START, start_method=method)
    shipped = dataclasses.replace(expanded, budgets=np.asarray(budgets, dtype=np.int64), provenance=provenance)
    return shipped if shipped.total == shipped.target_total else shipped.complete(min_budget=min_budget)
