"""``bench_fitness``: does a fitness mode have slope? Mean scores against the budget, side by side.

On the same passkey prompts, for uniform allocations at each budget (and the full cache), it
prints the mean exact-match score (the task's metric, generate mode), the mean graded score
(characters of the key right in order, from the same greedy answers) and the mean likelihood
score (mean token probability of the reference, teacher-forced). A search can only climb a
fitness whose value moves when the allocation does: exact match on a few instances is a
staircase; the other two should rise smoothly with the budget.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class FitnessRow:
    budget: int | None  # None: the full cache
    exact: float
    graded: float
    likelihood: float


@dataclass
class FitnessBenchResult:
    prompts: int
    prompt_tokens: float
    scorer: str
    rows: list[FitnessRow]

    def lines(self) -> list[str]:
        out = [
            f"prompts: {self.prompts} passkey prompts, mean "
            f"{self.prompt_tokens:.0f} tokens; uniform {self.scorer} allocations",
            f"{'budget':>8}  {'exact match':>11}  {'graded':>8}  {'likelihood':>10}",
        ]
        for row in self.rows:
            label = "full" if row.budget is None else str(row.budget)
            out.append(f"{label:>8}  {row.exact:11.3f}  {row.graded:8.3f}  {row.likelihood:10.3f}")
        return out


def bench_fitness(loaded, *, prompts: int = 16, context_tokens: int = 1000, budgets=(64, 128, 512),
                  scorer_name: str = "snapkv",
                  batch_size: int = 16, seed: int = 0, progress: bool = True) -> FitnessBenchResult:
    """Mean exact-match, graded and likelihood scores of uniform allocations at each budget."""
    from evolalloc.engine.local import LocalEvaluator, prefill_instances
    from evolalloc.runtime.scorers import get_scorer
    from fitness import get_task

    scorer = get_scorer(scorer_name)
    task = get_task("passkey")
    instances = task.instances("search", prompts, seed, context_tokens, loaded.tokenizer)
    records = prefill_instances(loaded, instances, [scorer], progress=progress)
    geometry = loaded.geometry
    full = max(r.length for r in records)
    allocations = [np.full((geometry.num_layers, geometry.num_kv_heads), b) for b in [*budgets, full]]

    # Graded mode decodes once and reports both: outcome.metric is the task's exact-match metric,
    # outcome.score the graded score.
    graded = LocalEvaluator(loaded, task, instances, scorer, batch_size=batch_size, records=records,
                            mode="graded").evaluate(allocations)
    likely = LocalEvaluator(loaded, task, instances, scorer, batch_size=batch_size, records=records,
                            mode="likelihood").evaluate(allocations)
    rows = []
    for budget, g, lk in zip([*budgets, None], graded, likely):
        for result in (g, lk):
            if not result.ok:
                raise RuntimeError(f"budget {budget}: {result.error}")
        rows.append(FitnessRow(budget, float(np.mean([o.metric for o in g.instances])), g.task_score, lk.task_score))
    return FitnessBenchResult(prompts, float(np.mean([r.length for r in records])), scorer.name, rows)
