"""Benchmarks that print their figures, measured side by side in one run.

``bench_eval``: what the prefill-once design buys. On the same prompts and random allocations it
times, per candidate allocation,
  (a) evaluation from cached prefill records (the real path: compress + batched decode + metric),
  (b) the same with the prefill re-run for every candidate (what a naive harness does),
and the floor: the bare decode loop of the stock model (sdpa attention, transformers'
``DynamicCache``) producing the same number of tokens for the same rows, with nothing else;
and (c) the likelihood fitness mode on the same records and allocations (compress + one
teacher-forced chunk of the reference, no decode loop), with its speed-up over (a).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import torch

from evolalloc.core.allocation import complete_budgets


@dataclass
class EvalBenchResult:
    prompts: int
    prompt_tokens: float
    candidates: int
    cached_per_candidate: float
    reprefill_per_candidate: float
    reprefill_candidates: int
    floor_per_candidate: float
    tokens_per_candidate: float
    likelihood_per_candidate: float

    @property
    def speedup(self) -> float:
        return self.reprefill_per_candidate / self.cached_per_candidate

    @property
    def likelihood_speedup(self) -> float:
        return self.cached_per_candidate / self.likelihood_per_candidate

    @property
    def over_floor(self) -> float:
        return self.cached_per_candidate / self.floor_per_candidate

    def lines(self) -> list[str]:
        return [
            f"prompts: {self.prompts} passkey prompts, mean {self.prompt_tokens:.0f} tokens; "
            f"{self.candidates} random allocations at c = 128 "
            f"({self.tokens_per_candidate:.0f} generated tokens per candidate)",
            f"(a) cached prefill records : {self.cached_per_candidate:8.3f} s per candidate",
            f"(b) re-prefill every time  : {self.reprefill_per_candidate:8.3f} "
            f"s per candidate (measured on {self.reprefill_candidates})",
            f"    floor: bare decode loop: {self.floor_per_candidate:8.3f} s per candidate",
            f"speed-up (b)/(a)           : {self.speedup:8.1f}x",
            f"overhead (a)/floor         : {self.over_floor:8.2f}x",
            f"(c) likelihood mode        : {self.likelihood_per_candidate:8.3f} "
            "s per candidate (same records and allocations)",
            f"speed-up (a)/(c)           : {self.likelihood_speedup:8.1f}x (generate mode / likelihood mode)",
        ]


def random_allocations(n: int, num_layers: int, num_kv_heads: int, target: int, floor: int,
                       seed: int) -> list[np.ndarray]:
    """``n`` random per-layer budget profiles ``[L, H]`` with mean exactly ``target``."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        shape = np.maximum(np.round(rng.lognormal(0.0, 0.5, size=num_layers) * target), floor).astype(np.int64)
        layer = complete_budgets(shape, target * num_layers, floor=floor)
        out.append(np.repeat(layer[:, None], num_kv_heads, axis=1))
    return out


def synchronize(device: torch.device) -> None:
    """Wait for the device's queued work (CUDA kernels run asynchronously; a CPU has none)."""
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)


def floor_decode_seconds(model, rows, steps: list[int], batch_size: int, scorer) -> float:
    """Stock decode: sdpa attention on a ``DynamicCache`` of the same kept tokens, same steps."""
    from transformers import DynamicCache

    from evolalloc.runtime.compress import compress_batch

    total = 0.0
    model.set_attn_implementation("sdpa")
    try:
        for start in range(0, len(rows), batch_size):
            chunk = rows[start : start + batch_size]
            # Uniform budgets of the same mean: the stock cache needs one length per layer.
            records = [r for r, _ in chunk]
            uniform = [(r, np.full_like(b, int(round(b.mean())))) for r, b in chunk]
            evicted = compress_batch(uniform, scorer, room=0)
            cache = DynamicCache()
            for layer, (k, v) in enumerate(zip(evicted.keys, evicted.values)):
                cache.update(k.clone(), v.clone(), layer)
            tokens = torch.stack([r.first_logits.argmax() for r in records])[:, None]
            positions = torch.tensor([r.length for r in records], device=tokens.device)[:, None]
            remaining = torch.tensor(steps[start : start + batch_size]) - 1  # forwards each row needs
            started = time.perf_counter()
            with torch.no_grad():
                while True:
                    # Like the real decoder, finished rows leave the batch.
                    alive = (remaining > 0).nonzero()[:, 0]
                    if len(alive) == 0:
                        break
                    if len(alive) < len(remaining):
                        cache.batch_select_indices(alive.to(tokens.device))
                        tokens, positions, remaining = (
                            tokens[alive.to(tokens.device)],
                            positions[alive.to(tokens.device)],
                            remaining[alive],
                        )
                    out = model(input_ids=tokens, position_ids=positions, past_key_values=cache, use_cache=True)
                    tokens = out.logits[:, -1].argmax(dim=-1, keepdim=True)
                    positions, remaining = positions + 1, remaining - 1
            synchronize(tokens.device)  # a GPU runs ahead of Python: wait for the last forward
            total += time.perf_counter() - started
    finally:
        from evolalloc.runtime.attention import use_evolalloc_attention

        use_evolalloc_attention(model)
    return total


def bench_eval(loaded, *, prompts: int = 8, context_tokens: int = 2000, candidates: int = 8,
               reprefill_candidates: int = 2, batch_size: int = 16, seed: int = 0, progress=True) -> EvalBenchResult:
    """Run the side-by-side measurement on ``loaded`` (a ``LoadedModel``)."""
    from evolalloc.engine.local import LocalEvaluator, prefill_instances
    from evolalloc.runtime.scorers import get_scorer
    from fitness import get_task

    scorer = get_scorer("snapkv")
    task = get_task("passkey")
    instances = task.instances("search", prompts, seed, context_tokens, loaded.tokenizer)
    geometry = loaded.geometry
    allocations = random_allocations(candidates, geometry.num_layers, geometry.num_kv_heads, 128, scorer.always_kept,
                                     seed)

    records = prefill_instances(loaded, instances, [scorer], progress=progress)
    evaluator = LocalEvaluator(loaded, task, instances, scorer, batch_size=batch_size, records=records)
    evaluator.evaluate(allocations[:1])  # warm-up: first-call allocations and kernel choice
    started = time.perf_counter()
    results = evaluator.evaluate(allocations)
    cached = (time.perf_counter() - started) / candidates

    teacher_forced = LocalEvaluator(loaded, task, instances, scorer, batch_size=batch_size, records=records,
                                    mode="likelihood")
    teacher_forced.evaluate(allocations[:1])  # warm-up, as for (a)
    started = time.perf_counter()
    teacher_forced.evaluate(allocations)
    likelihood = (time.perf_counter() - started) / candidates

    started = time.perf_counter()
    for budgets in allocations[:reprefill_candidates]:
        fresh = prefill_instances(loaded, instances, [scorer])
        LocalEvaluator(loaded, task, instances, scorer, batch_size=batch_size, records=fresh).evaluate([budgets])
    reprefill = (time.perf_counter() - started) / reprefill_candidates

    # The floor decodes exactly as many tokens per row as the cached path produced.
    rows, steps = [], []
    for budgets, result in zip(allocations, results):
        for record, outcome in zip(records, result.instances):
            rows.append((record, budgets))
            steps.append(outcome.generated_tokens)
    floor = floor_decode_seconds(loaded.model, rows, steps, batch_size, scorer) / candidates
    return EvalBenchResult(
        prompts=prompts,
        prompt_tokens=float(np.mean([r.length for r in records])),
        candidates=candidates,
        cached_per_candidate=cached,
        reprefill_per_candidate=reprefill,
        reprefill_candidates=reprefill_candidates,
        floor_per_candidate=floor,
        tokens_per_candidate=float(sum(steps)) / candidates,
        likelihood_per_candidate=likelihood,
    )
