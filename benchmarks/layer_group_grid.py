"""Where does the cache matter? A grid of per-layer profiles at one exact total, no search.

Each profile gives a block of layers ``factor`` times the budget of the others, and is then
completed to exactly ``c * layers`` tokens (EvolKV's completion rule), so every row costs the
same memory as uniform. It prints the task's exact-match score of each row on the search split:
the evidence for where a searched profile can win, and for whether a search rule that holds
each layer group's mean near ``c`` can get there.

    python benchmarks/layer_group_grid.py --prompts 40                 # passkey, c = 128, SnapKV
    python benchmarks/layer_group_grid.py --blocks 16-19 18-21 --factors 4

Runs on the bundled SmolLM2-135M with 1 torch thread by default; ~5 min on a quiet machine
for 40 prompts (the prefill dominates).
"""

from __future__ import annotations

import argparse

import numpy as np
import torch

import fitness
from evolalloc.engine.local import LocalEvaluator
from evolalloc.runtime.model import load_model
from evolalloc.runtime.scorers import get_scorer
from searchspaces.completion import complete_budgets

DEFAULT_BLOCKS = ["0-7", "8-15", "16-23", "24-29", "14-17", "16-19", "18-21", "20-23", "22-25"]


def block_profile(layers: int, heads: int, target: int, floor: int, block: tuple[int, int],
                  factor: float) -> np.ndarray:
    """Budgets ``[layers, heads]``: ``block`` (inclusive) at ``factor`` x the others, total exactly
    ``target * layers``."""
    shares = np.full(layers, 100, dtype=np.int64)
    lo, hi = block
    shares[lo : hi + 1] = round(100 * factor)
    per_layer = complete_budgets(shares, target * layers, floor)
    return np.repeat(per_layer[:, None], heads, axis=1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="bundled:smollm2-135m-instruct")
    parser.add_argument("--task", default="passkey")
    parser.add_argument("--prompts", type=int, default=40)
    parser.add_argument("--context-tokens", type=int, default=1000)
    parser.add_argument("--target", type=int, default=128)
    parser.add_argument("--scorer", default="snapkv")
    parser.add_argument("--blocks", nargs="+", default=DEFAULT_BLOCKS, help="layer blocks LO-HI (inclusive)")
    parser.add_argument("--factors", nargs="+", type=float, default=[4.0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    torch.set_num_threads(args.threads)
    loaded = load_model(args.model)
    layers, heads = loaded.geometry.num_layers, loaded.geometry.num_kv_heads
    task = fitness.get_task(args.task)
    instances = task.instances("search", args.prompts, args.seed, args.context_tokens, loaded.tokenizer)
    scorer = get_scorer(args.scorer)
    evaluator = LocalEvaluator(loaded, task, instances, scorer, progress=True)
    floor = max(1, scorer.always_kept)

    rows = {"uniform": np.full((layers, heads), args.target, dtype=np.int64)}
    for text in args.blocks:
        lo, hi = (int(v) for v in text.split("-"))
        for factor in args.factors:
            rows[f"layers {lo}-{hi} x{factor:g}"] = block_profile(layers, heads, args.target, floor, (lo, hi), factor)
    results = evaluator.evaluate(list(rows.values()))
    print(f"{args.task}, {args.prompts} search-split prompts of ~{args.context_tokens} tokens, {args.scorer}, "
          f"every row at exactly c = {args.target} per layer on average")
    for (name, budgets), result in zip(rows.items(), results):
        per_layer = budgets[:, 0]
        score = f"{result.task_score:.3f}" if result.ok else f"failed: {result.error}"
        print(f"{name:22s} exact match {score}   per-layer budgets {per_layer.min()}..{per_layer.max()}")


if __name__ == "__main__":
    main()
