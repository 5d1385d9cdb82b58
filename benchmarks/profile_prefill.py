"""The prefill with evolalloc's capture (SnapKV window scores, rankings) against the stock forward.

    PYTHONPATH=. OMP_NUM_THREADS=1 python benchmarks/profile_prefill.py [--shape PATH] [--context N]

One random-token prompt through the stock model (SDPA, ``DynamicCache``, chunks of 512 tokens as
evolalloc's chunked prefill feeds a long prompt) and through ``runtime.prefill.prefill`` under
``torch.profiler``; prints both times and the top operators of the latter by self CPU time.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile
from transformers import DynamicCache

from evolalloc.bench.gpu import random_prompts
from evolalloc.bench.gpu_shape import load_shape, random_model
from evolalloc.runtime.attention import use_evolalloc_attention
from evolalloc.runtime.chunked import DEFAULT_CHUNK_SIZE
from evolalloc.runtime.prefill import prefill
from evolalloc.runtime.scorers import get_scorer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", default=str(Path(__file__).parent / "shapes" / "moderate.json"))
    parser.add_argument("--context", type=int, default=4096)
    parser.add_argument("--rows", type=int, default=15)
    args = parser.parse_args()
    loaded = random_model(load_shape(args.shape), device="cpu", dtype="float32")
    model = loaded.model
    ids = random_prompts(1, args.context, model.config.vocab_size, 0)[0]
    scorer = get_scorer("snapkv")
    prefill(model, ids[:256], [scorer])  # warm-up
    model.set_attn_implementation("sdpa")
    started = time.perf_counter()
    with torch.no_grad():
        cache = DynamicCache()
        for start in range(0, args.context, DEFAULT_CHUNK_SIZE):
            model(input_ids=ids[None, start : start + DEFAULT_CHUNK_SIZE], past_key_values=cache, use_cache=True,
                  logits_to_keep=1)
    stock = time.perf_counter() - started
    use_evolalloc_attention(model)
    started = time.perf_counter()
    prefill(model, ids, [scorer])
    ours = time.perf_counter() - started
    print(f"{args.context} tokens, torch threads {torch.get_num_threads()}: "
          f"stock SDPA forward in chunks of {DEFAULT_CHUNK_SIZE}: "
          f"{stock:.1f} s; evolalloc prefill (capture + SnapKV ranking): {ours:.1f} s; ratio {ours / stock:.2f}x")
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        prefill(model, ids, [scorer])
    print("evolalloc prefill, profiled again:")
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=args.rows, max_name_column_width=55))


if __name__ == "__main__":
    main()
