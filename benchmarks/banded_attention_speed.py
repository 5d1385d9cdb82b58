"""Sliding-window layers on the CPU, side by side: each call over only the key blocks the window leaves
visible (``runtime/banded.py``, as landed) against one call over every key (the route before).

    python benchmarks/banded_attention_speed.py [--model bundled:gemma3-270m] [--tokens 8192] [--prompts 2]

Prompts: the gemma3 recipe's task (a 7-digit needle in the bundled prose). Each route prefills every
prompt (chunks of 512 beyond 2048 tokens, SnapKV's capture) and greedily answers it with the full
cache (the comparison's ``full`` row: every key kept, so the sliding layers' decode steps see all of
them through the window's mask); the routes alternate so both see the same machine. Prints the seconds
per prefill and per decode step, the ratios, and whether the records (keys, values, rankings, first
logits) and the answers are the same to the bit.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

import evolalloc.runtime.masked_sdpa as masked_sdpa
from evolalloc.runtime.decode import DecodeSettings, eos_ids_of, generate
from evolalloc.runtime.instances import tokenize_instance
from evolalloc.runtime.model import load_model
from evolalloc.runtime.prefill import prefill
from evolalloc.runtime.scorers import get_scorer
from fitness import get_task

ROUTES = {"whole": lambda *args: None, "banded": masked_sdpa.banded_attention}


def same_record(a, b) -> bool:
    tensors = zip(a.keys + a.values + [a.first_logits], b.keys + b.values + [b.first_logits])
    return all(torch.equal(x, y) for x, y in tensors) and all(torch.equal(a.rankings[k], b.rankings[k])
                                                              for k in a.rankings)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="bundled:gemma3-270m")
    parser.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float32"])
    parser.add_argument("--tokens", type=int, default=8192, help="prompt length")
    parser.add_argument("--prompts", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    loaded = load_model(args.model, dtype=args.dtype)
    scorer = get_scorer("snapkv", window=32, kernel=7, pooling="avg", pool_window=False)  # the recipes'
    task = get_task("niah_single", needle_type="number", haystack="prose")
    instances = task.instances("search", args.prompts, seed=0, context_tokens=args.tokens,
                               tokenizer=loaded.tokenizer)
    prompts = [tokenize_instance(loaded.tokenizer, inst, False)[0] for inst in instances]
    settings = DecodeSettings(max_new_tokens=instances[0].max_new_tokens, stop=instances[0].stop,
                              eos_ids=eos_ids_of(loaded.model, loaded.tokenizer))
    print(f"{args.model}, {args.prompts} prompts of {len(prompts[0])} tokens, {args.dtype}, "
          f"{args.threads} thread(s)", flush=True)
    seconds = {route: {"prefill": 0.0, "decode": 0.0, "steps": 0} for route in ROUTES}
    records, answers = {}, {}
    try:
        for i, ids in enumerate(prompts):
            for route, call in ROUTES.items() if i % 2 == 0 else reversed(ROUTES.items()):
                masked_sdpa.banded_attention = call
                started = time.perf_counter()
                record = prefill(loaded.model, ids, [scorer])
                seconds[route]["prefill"] += time.perf_counter() - started
                full = np.full((loaded.geometry.num_layers, loaded.geometry.num_kv_heads), record.length)
                started = time.perf_counter()
                out = generate(loaded.model, [(record, full)], scorer, settings, loaded.tokenizer, batch_size=1)
                seconds[route]["decode"] += time.perf_counter() - started
                seconds[route]["steps"] += len(out[0].token_ids)
                records.setdefault(route, []).append(record)
                answers.setdefault(route, []).append(out[0].token_ids)
                print(f"prompt {i}, {route}: prefill {seconds[route]['prefill']:.1f} s so far", flush=True)
    finally:
        masked_sdpa.banded_attention = ROUTES["banded"]
    same = sum(same_record(a, b) for a, b in zip(records["whole"], records["banded"]))
    same_answers = sum(a == b for a, b in zip(answers["whole"], answers["banded"]))
    whole, banded = seconds["whole"], seconds["banded"]
    print(f"prefill: one call {whole['prefill'] / args.prompts:.1f} s a prompt, banded "
          f"{banded['prefill'] / args.prompts:.1f} s: {whole['prefill'] / banded['prefill']:.2f}x; "
          f"the same record to the bit for {same} of {args.prompts}")
    step_whole, step_banded = (s["decode"] / max(s["steps"], 1) * 1000 for s in (whole, banded))
    print(f"full-cache decode: one call {step_whole:.0f} ms a step, banded {step_banded:.0f} ms: "
          f"{step_whole / step_banded:.2f}x; the same answer tokens for {same_answers} of {args.prompts}")


if __name__ == "__main__":
    main()
