"""The decode step's attention route on the CPU, side by side: greedy generation on the bundled model
with one query token folded into its KV group (``runtime/masked_sdpa.folded_decode_step``, as landed)
against SDPA's own call with ``enable_gqa`` (the route before), on the same prefill records.

    python benchmarks/decode_step_speed.py [--dtype bfloat16] [--tokens 2048] [--budgets 512,1024] [--rows 16]

Prompts: real prose from the bundled books with a 7-digit needle (the main job's kind of prompt). Each
route decodes every budget's batch (compression + the decode loop, ``runtime.decode.generate``), best
of ``--repeats``; the routes alternate so both see the same machine. Prints the time per decode step, the
ratio, and whether the two routes produced the same tokens and the same scores (the task's metric).
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

import evolalloc.runtime.attention as attention
import evolalloc.runtime.masked_sdpa as masked_sdpa
from evolalloc.runtime.decode import DecodeSettings, eos_ids_of, generate
from evolalloc.runtime.instances import tokenize_instance
from evolalloc.runtime.model import load_model
from evolalloc.runtime.prefill import prefill
from evolalloc.runtime.scorers import get_scorer
from fitness import get_task


def before(query: torch.Tensor) -> bool:
    """The route before: folded only on CUDA."""
    return query.shape[2] == 1 and query.device.type == "cuda"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float32"])
    parser.add_argument("--tokens", type=int, default=2048, help="prompt length")
    parser.add_argument("--budgets", default="512,1024", help="uniform budgets per (layer, KV head)")
    parser.add_argument("--rows", type=int, default=16, help="prompts, decoded as one batch")
    parser.add_argument("--new-tokens", type=int, default=None, help="default: the task's own (20)")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    loaded = load_model("bundled:smollm2-135m-instruct", dtype=args.dtype)
    scorer = get_scorer("snapkv", window=32, kernel=7, pooling="avg", pool_window=False)  # the main job's
    task = get_task("niah_single", needle_type="number", haystack="prose")
    instances = task.instances("search", args.rows, seed=0, context_tokens=args.tokens, tokenizer=loaded.tokenizer)
    prompts = [tokenize_instance(loaded.tokenizer, inst, False)[0] for inst in instances]
    records = [prefill(loaded.model, ids, [scorer]) for ids in prompts]
    geometry = loaded.geometry
    # As the evaluator decodes them (its stop strings and end tokens), but every row runs --new-tokens
    # steps at most, so both routes decode the same number of steps unless a row stops.
    args.new_tokens = args.new_tokens or instances[0].max_new_tokens
    settings = DecodeSettings(max_new_tokens=args.new_tokens, stop=instances[0].stop,
                              eos_ids=eos_ids_of(loaded.model, loaded.tokenizer))
    print(f"{args.rows} prompts of {records[0].length} tokens, {args.dtype}, {args.threads} thread(s), "
          f"up to {args.new_tokens} new tokens each (one batch; a batch decodes until its longest answer)")
    original = masked_sdpa.folded_decode_step
    try:
        for budget in (int(b) for b in args.budgets.split(",")):
            budgets = np.full((geometry.num_layers, geometry.num_kv_heads), budget)
            rows = [(r, budgets) for r in records]
            best, tokens, scores = {}, {}, {}
            for _ in range(args.repeats):
                for route in ("before", "folded"):
                    pick = original if route == "folded" else before
                    attention.folded_decode_step = pick
                    masked_sdpa.folded_decode_step = pick
                    started = time.perf_counter()
                    out = generate(loaded.model, rows, scorer, settings, loaded.tokenizer, batch_size=args.rows)
                    best[route] = min(best.get(route, float("inf")), time.perf_counter() - started)
                    tokens[route] = [g.token_ids for g in out]
                    scores[route] = [task.score(inst, g.text)[0] for inst, g in zip(instances, out)]
            same = sum(a == b for a, b in zip(tokens["before"], tokens["folded"]))
            same_score = sum(a == b for a, b in zip(scores["before"], scores["folded"]))
            # a batch decodes until its longest answer: that many steps
            per_step = {k: v / max(len(t) for t in tokens[k]) * 1000 for k, v in best.items()}
            print(f"c = {budget}: SDPA's own call {per_step['before']:.0f} ms a step, "
                  f"folded {per_step['folded']:.0f} ms a step: {best['before'] / best['folded']:.2f}x; "
                  f"the same tokens in {same} of {args.rows} rows, the same score in {same_score} "
                  f"(mean {np.mean(scores['before']):.3f} before, {np.mean(scores['folded']):.3f} folded)")
    finally:
        attention.folded_decode_step = original
        masked_sdpa.folded_decode_step = original


if __name__ == "__main__":
    main()
