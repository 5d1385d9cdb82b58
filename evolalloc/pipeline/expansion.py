"""Carry the searched profile to the expansion budgets (``budget.expansion_rule``).

A profile searched at ``c`` says where the first ``c`` tokens per unit matter most; how the
extra memory of a larger ``c'`` should be spread was never searched. Two rules answer it
(``Allocation.expand``): ``proportional`` (EvolKV) keeps the profile's *ratios*, so a layer the
search starved at 128 stays at a quarter of the others at 512; ``additive`` keeps its
*differences* and spreads the new tokens evenly. Neither is right on every task, so rule
``search`` scores both at ``c'`` on the search split, with the search's own fitness, and ships
the better one. The held-out split is never looked at: the choice is made before ``compare``.
"""

from __future__ import annotations

from evolalloc.core.allocation import EXPANSION_RULES, Allocation


def expand_profile(evolved: Allocation, budgets, rule: str, min_budget: int, search_evaluator=None,
                   echo=print) -> dict[float, Allocation]:
    """``{budget: allocation}`` for each expansion budget, by ``rule`` (see the module docstring).

    ``search_evaluator`` (an ``Evaluator`` of the search split in the fitness mode) is needed for
    rule ``search``; the scores it gave each rule are kept in the shipped profile's provenance
    (``expansion_search_scores``), and a failed evaluation is an error, never a silent pick.
    """
    if rule != "search":
        return {float(b): evolved.expand(b, min_budget=min_budget, rule=rule) for b in budgets}
    if search_evaluator is None:
        raise ValueError("expansion rule 'search' needs the search split's evaluator")
    out = {}
    for budget in map(float, budgets):
        candidates = [evolved.expand(budget, min_budget=min_budget, rule=r) for r in EXPANSION_RULES]
        results = search_evaluator.evaluate([c.budgets for c in candidates])
        scores = {}
        for candidate_rule, result in zip(EXPANSION_RULES, results):
            if not result.ok:
                raise RuntimeError(f"scoring the {candidate_rule} expansion to c={budget:g} failed: {result.error}")
            scores[candidate_rule] = float(result.task_score)
        # Ties go to the first rule (EvolKV's proportional): the paper's choice unless the data disagree.
        best = max(EXPANSION_RULES, key=lambda r: (scores[r], -EXPANSION_RULES.index(r)))
        chosen = candidates[EXPANSION_RULES.index(best)]
        chosen.provenance.update(expansion_search_scores=scores)
        echo(f"expansion to c={budget:g}: " + ", ".join(f"{r} {s:.4f}" for r, s in scores.items())
             + f" on the search split -> {best}")
        out[budget] = chosen
    return out
