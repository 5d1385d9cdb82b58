"""One cell of ``evolalloc bench scale``, measured in a process of its own.

``python -m evolalloc.bench.scale_cell '<settings JSON>'`` loads the model, prefills ``instances``
prompts of ``context_tokens`` tokens, evaluates random allocations at each budget from those
records, and prints one JSON line: the timings, the records' bytes, and this process's peak
resident memory (``ru_maxrss``), which therefore covers the model, the prefill's transient
tensors, the records and the evaluation — and nothing of any other cell.

The records are kept the way a run keeps them (``runtime.record_store.RecordKeeper``): bounded
at ``b_max``, here the most any of the cell's candidate allocations gives one (layer, KV head)
(a run's ``b_max`` is the same quantity, derived from its budgets), all held in memory (no
spill: the peak then includes every record). ``bounded: false`` keeps them whole, for contrast.
"""

from __future__ import annotations

import json
import os
import resource
import sys
import time
from dataclasses import asdict, dataclass, field


@dataclass(frozen=True)
class CellSettings:
    """What one cell measures (JSON-serialisable; the parent passes it on the command line)."""

    model: str
    task: str
    scorer: str
    context_tokens: int
    instances: int
    budgets: tuple[int, ...]
    candidates: int
    threads: int = 1
    batch_size: int = 16
    chunk_size: int | None = None  # None: the prefill's default (runtime/chunked.py)
    seed: int = 0
    bounded: bool = True  # False: whole records (every token's K/V), as before issue 22


@dataclass
class CellResult:
    """Measured (or, with ``extrapolated_from``, estimated) figures of one cell.

    ``peak_rss`` and ``loaded_rss`` (after loading the model) in bytes; ``record_bytes``: all the
    records' tensors as kept (bounded at ``bound`` unless that is ``None``); ``whole_bytes``: what
    the same records would take whole; ``prefill_seconds``: per instance;
    ``eval_seconds``/``generated_tokens``: per candidate allocation, keyed by the budget (as a
    string, for JSON).
    """

    context_tokens: int
    instances: int
    prompt_tokens: float = 0.0
    peak_rss: int = 0
    loaded_rss: int = 0
    record_bytes: int = 0
    whole_bytes: int = 0
    bound: int | None = None
    prefill_seconds: float = 0.0
    eval_seconds: dict[str, float] = field(default_factory=dict)
    generated_tokens: dict[str, float] = field(default_factory=dict)
    extrapolated_from: int | None = None  # the measured instance count this row was scaled from
    error: str | None = None


def _peak_rss_bytes() -> int:
    # Linux reports ru_maxrss in KiB.
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def cell_allocations(settings: CellSettings, num_layers: int, num_kv_heads: int, floor: int):
    """The cell's candidates, drawn before any prefill: ``(warm-up, {budget: [L, H] arrays})``."""
    from evolalloc.bench.eval import random_allocations

    warm = random_allocations(1, num_layers, num_kv_heads, settings.budgets[0], floor, settings.seed)
    per_budget = {b: random_allocations(settings.candidates, num_layers, num_kv_heads, b, floor, settings.seed + b)
                  for b in settings.budgets}
    return warm, per_budget


def cell_bound(warm, per_budget) -> int:
    """``b_max`` of a cell: the largest budget any of its candidates gives one (layer, KV head)."""
    return int(max(int(a.max()) for a in [*warm, *(a for group in per_budget.values() for a in group)]))


def measure(settings: CellSettings) -> CellResult:
    import torch

    from evolalloc.engine.local import LocalEvaluator, tokenize_instance
    from evolalloc.runtime.model import load_model
    from evolalloc.runtime.prefill import prefill
    from evolalloc.runtime.record_store import RecordKeeper, RecordPolicy
    from evolalloc.runtime.scorers import get_scorer
    from fitness import get_task

    torch.set_num_threads(settings.threads)
    loaded = load_model(settings.model)
    loaded_rss = _peak_rss_bytes()
    task = get_task(settings.task)
    scorer = get_scorer(settings.scorer)
    geometry = loaded.geometry
    warm, per_budget = cell_allocations(settings, geometry.num_layers, geometry.num_kv_heads, scorer.always_kept)
    bound = cell_bound(warm, per_budget) if settings.bounded else None
    keeper = RecordKeeper(RecordPolicy(bound=bound, model_id=settings.model))  # no memory limit: nothing spills
    instances = task.instances("search", settings.instances, settings.seed, settings.context_tokens, loaded.tokenizer)
    limit = loaded.geometry.max_positions
    started = time.perf_counter()
    records, whole_bytes = [], 0
    for instance in instances:
        ids, _ = tokenize_instance(loaded.tokenizer, instance, False)
        if limit and len(ids) + instance.max_new_tokens > limit:
            raise ValueError(f"{len(ids)} prompt tokens + {instance.max_new_tokens} "
                             f"answer tokens exceed the model's {limit} positions")
        record = prefill(loaded.model, ids, [scorer], uid=instance.uid, chunk_size=settings.chunk_size)
        whole_bytes += record.nbytes()
        records.append(keeper.keep(record, [scorer.key], bound))  # the whole record is dropped here
        del record
    prefill_seconds = (time.perf_counter() - started) / len(records)

    evaluator = LocalEvaluator(loaded, task, instances, scorer, batch_size=settings.batch_size, records=records)
    evaluator.evaluate(warm)  # warm-up, untimed
    eval_seconds, generated = {}, {}
    for budget, allocations in per_budget.items():
        started = time.perf_counter()
        results = evaluator.evaluate(allocations)
        eval_seconds[str(budget)] = (time.perf_counter() - started) / len(allocations)
        failed = [r.error for r in results if not r.ok]
        if failed:
            raise RuntimeError(f"evaluation at budget {budget} failed: {failed[0]}")
        generated[str(budget)] = sum(o.generated_tokens for r in results for o in r.instances) / len(results)
    return CellResult(
        context_tokens=settings.context_tokens,
        instances=len(records),
        prompt_tokens=sum(r.length for r in records) / len(records),
        peak_rss=_peak_rss_bytes(),
        loaded_rss=loaded_rss,
        record_bytes=sum(r.nbytes() for r in records),
        whole_bytes=whole_bytes,
        bound=bound,
        prefill_seconds=prefill_seconds,
        eval_seconds=eval_seconds,
        generated_tokens=generated,
    )


def main(argv: list[str]) -> None:
    raw = json.loads(argv[0])
    settings = CellSettings(**{**raw, "budgets": tuple(raw["budgets"])})
    print(json.dumps(asdict(measure(settings))), flush=True)


if __name__ == "__main__":
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    main(sys.argv[1:])
