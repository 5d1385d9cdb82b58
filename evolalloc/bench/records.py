"""``bench_records``: what bounding and a narrower record dtype cost in memory and in scores.

On the same passkey prompts, prefilled once, it derives the records a run would keep — bounded
at ``b_max`` (the largest budget measured) and stored in float32, bfloat16 or float16 — and
prints, per record dtype: the mean megabytes per record (full and bounded), and at each uniform
budget the mean exact-match and likelihood scores, the largest change of an instance's
likelihood score against float32 records, and how many greedy answers changed. float32 bounded
records must match the full ones exactly (the first row's changes are 0 by construction).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from evolalloc.core.record_settings import RECORD_DTYPES


@dataclass
class RecordsRow:
    dtype: str
    budget: int
    exact: float
    likelihood: float
    max_likelihood_change: float
    answers_changed: int


@dataclass
class RecordsBenchResult:
    prompts: int
    prompt_tokens: float
    b_max: int
    full_mb: float
    bounded_mb: dict[str, float]
    rows: list[RecordsRow]

    def lines(self) -> list[str]:
        out = [f"prompts: {self.prompts} passkey prompts, mean "
               f"{self.prompt_tokens:.0f} tokens; snapkv; b_max = {self.b_max}",
               f"record size: full float32 {self.full_mb:.1f} MB; bounded at b_max: "
               + ", ".join(f"{d} {mb:.1f} MB" for d, mb in self.bounded_mb.items()),
               f"{'dtype':>9}  {'budget':>6}  {'exact':>6}  {'likelihood':>10} "
               f" {'max |d lik|':>11}  {'answers changed':>15}"]
        for r in self.rows:
            out.append(f"{r.dtype:>9}  {r.budget:>6}  {r.exact:6.3f}  "
                       f"{r.likelihood:10.4f}  {r.max_likelihood_change:11.2e}  "
                       f"{r.answers_changed:>9} of {self.prompts}")
        return out


def bench_records(loaded, *, prompts: int = 8, context_tokens: int = 1000, budgets=(64, 128, 256), dtypes=RECORD_DTYPES,
                  batch_size: int = 16, seed: int = 0, progress: bool = True) -> RecordsBenchResult:
    from evolalloc.engine.local import LocalEvaluator, prefill_instances
    from evolalloc.runtime.bounded import bound_record
    from evolalloc.runtime.record_store import to_record_dtype
    from evolalloc.runtime.scorers import get_scorer
    from fitness import get_task

    dtypes = ["float32", *(d for d in dtypes if d != "float32")]  # the reference comes first
    scorer = get_scorer("snapkv")
    task = get_task("passkey")
    instances = task.instances("search", prompts, seed, context_tokens, loaded.tokenizer)
    full = prefill_instances(loaded, instances, [scorer], progress=progress)
    g = loaded.geometry
    b_max = int(max(budgets))
    allocations = [np.full((g.num_layers, g.num_kv_heads), b) for b in budgets]
    mb = lambda records: float(np.mean([r.nbytes() for r in records])) / 1e6  # noqa: E731
    rows, bounded_mb, reference = [], {}, {}
    for dtype in dtypes:
        records = [to_record_dtype(bound_record(r, b_max), dtype) for r in full]
        bounded_mb[dtype] = mb(records)
        answers = LocalEvaluator(loaded, task, instances, scorer, batch_size=batch_size,
                                 records=records).evaluate(allocations)
        likelihoods = LocalEvaluator(loaded, task, instances, scorer, batch_size=batch_size, records=records,
                                     mode="likelihood").evaluate(allocations)
        for budget, answer, likelihood in zip(budgets, answers, likelihoods):
            for result in (answer, likelihood):
                if not result.ok:
                    raise RuntimeError(f"{dtype} records at budget {budget}: {result.error}")
            texts = [o.prediction for o in answer.instances]
            values = np.array([o.score for o in likelihood.instances])
            base_texts, base_values = reference.setdefault(budget, (texts, values))
            rows.append(RecordsRow(dtype, int(budget), float(answer.task_score), float(likelihood.task_score),
                                   float(np.abs(values - base_values).max()),
                                   sum(a != b for a, b in zip(texts, base_texts))))
    return RecordsBenchResult(prompts, float(np.mean([r.length for r in full])), b_max, mb(full), bounded_mb, rows)
