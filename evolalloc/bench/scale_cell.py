"""One cell of ``evolalloc bench scale``, measured in a process of its own.

``python -m evolalloc.bench.scale_cell '<settings JSON>'`` loads the model, prefills ``instances``
prompts of ``context_tokens`` tokens, evaluates random allocations at each budget from those
records, and prints one JSON line: the timings, the records' bytes, and this process's peak
resident memory (``ru_maxrss``), which therefore covers the model, the prefill's transient
tensors, the records and the evaluation — and nothing of any other cell.
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


@dataclass
class CellResult:
    """Measured (or, with ``extrapolated_from``, estimated) figures of one cell.

    ``peak_rss`` and ``loaded_rss`` (after loading the model) in bytes; ``record_bytes``: all the
    records' tensors; ``prefill_seconds``: per instance; ``eval_seconds``/``generated_tokens``:
    per candidate allocation, keyed by the budget (as a string, for JSON).
    """

    context_tokens: int
    instances: int
    prompt_tokens: float = 0.0
    peak_rss: int = 0
    loaded_rss: int = 0
    record_bytes: int = 0
    prefill_seconds: float = 0.0
    eval_seconds: dict[str, float] = field(default_factory=dict)
    generated_tokens: dict[str, float] = field(default_factory=dict)
    extrapolated_from: int | None = None  # the measured instance count this row was scaled from
    error: str | None = None


def _peak_rss_bytes() -> int:
    # Linux reports ru_maxrss in KiB.
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def measure(settings: CellSettings) -> CellResult:
    import torch
    from fitness import get_task

    from evolalloc.bench.eval import random_allocations
    from evolalloc.engine.local import LocalEvaluator, tokenize_instance
    from evolalloc.runtime.model import load_model
    from evolalloc.runtime.prefill import prefill
    from evolalloc.runtime.scorers import get_scorer

    torch.set_num_threads(settings.threads)
    loaded = load_model(settings.model)
    loaded_rss = _peak_rss_bytes()
    task = get_task(settings.task)
    scorer = get_scorer(settings.scorer)
    instances = task.instances("search", settings.instances, settings.seed, settings.context_tokens, loaded.tokenizer)
    limit = loaded.geometry.max_positions
    started = time.perf_counter()
    records = []
    for instance in instances:
        ids, _ = tokenize_instance(loaded.tokenizer, instance, False)
        if limit and len(ids) + instance.max_new_tokens > limit:
            raise ValueError(f"{len(ids)} prompt tokens + {instance.max_new_tokens} answer tokens exceed the model's {limit} positions")
        records.append(prefill(loaded.model, ids, [scorer], uid=instance.uid, chunk_size=settings.chunk_size))
    prefill_seconds = (time.perf_counter() - started) / len(records)

    geometry = loaded.geometry
    evaluator = LocalEvaluator(loaded, task, instances, scorer, batch_size=settings.batch_size, records=records)
    evaluator.evaluate(random_allocations(1, geometry.num_layers, geometry.num_kv_heads, settings.budgets[0],
                                          scorer.always_kept, settings.seed))  # warm-up, untimed
    eval_seconds, generated = {}, {}
    for budget in settings.budgets:
        allocations = random_allocations(settings.candidates, geometry.num_layers, geometry.num_kv_heads, budget,
                                         scorer.always_kept, settings.seed + budget)
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
