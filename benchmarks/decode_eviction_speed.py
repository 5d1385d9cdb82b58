"""What holding the budgets while decoding costs: greedy decode speed on the bundled model, prompt-only
eviction against decode-time eviction (``budget.decode``) for a few scorers and intervals.

    OMP_NUM_THREADS=1 python benchmarks/decode_eviction_speed.py [--rows 4] [--new-tokens 128] [--budget 64]

Each setting decodes the same ``--rows`` prompts (one batch) from the same prefill records; the time is the
compression plus the decode loop (``runtime.decode.generate``), best of ``--repeats``.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from evolalloc.core.decode_eviction import DecodeEviction
from evolalloc.runtime.decode import DecodeSettings, generate
from evolalloc.runtime.model import load_model
from evolalloc.runtime.prefill import prefill
from evolalloc.runtime.scorers import get_scorer

PROSE = ("The lighthouse keeper climbed the stairs each evening, counting the steps as his father had taught him. "
         "Below, the harbour emptied as the boats came in, and the gulls settled on the breakwater. ")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=4)
    parser.add_argument("--new-tokens", type=int, default=128)
    parser.add_argument("--budget", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(1)
    loaded = load_model("bundled:smollm2-135m-instruct")
    geometry = loaded.geometry
    budgets = np.full((geometry.num_layers, geometry.num_kv_heads), args.budget)
    settings = DecodeSettings(max_new_tokens=args.new_tokens)
    cases = [("snapkv", None), ("snapkv", 16), ("snapkv", 1), ("h2o", 16), ("streaming", 16)]
    scorers = {name: get_scorer(name) for name, _ in cases}
    records = [prefill(loaded.model, loaded.tokenizer.encode(PROSE * (6 + i)), list(scorers.values()))
               for i in range(args.rows)]
    print(f"{args.rows} rows of {[r.length for r in records]} prompt tokens, {args.new_tokens} new tokens each, "
          f"budget {args.budget} per (layer, KV head)")
    for name, interval in cases:
        decode = DecodeEviction(interval) if interval else None
        best = float("inf")
        for _ in range(args.repeats):
            started = time.perf_counter()
            generate(loaded.model, [(r, budgets) for r in records], scorers[name], settings, batch_size=args.rows,
                     decode=decode)
            best = min(best, time.perf_counter() - started)
        what = f"held, interval {interval}" if interval else "prompt only"
        print(f"{name:10s} {what:20s} {args.rows * args.new_tokens / best:6.1f} tokens/s ({best:.1f} s)")


if __name__ == "__main__":
    main()
