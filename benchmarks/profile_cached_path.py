"""Where the cached path's time goes: compress (the gather), the decode loop, the attention function.

    PYTHONPATH=. OMP_NUM_THREADS=1 python benchmarks/profile_cached_path.py [--shape PATH] [--device cpu]

Builds a model of a shape with random weights (``bench/gpu_shape.py``; default: the moderate
``benchmarks/shapes/moderate.json``), prefills random-token prompts once, then evaluates random
allocations at ``c`` from the cached records (``runtime.decode.generate``: compress + greedy decode)
under ``torch.profiler``, with evolalloc's pieces labelled by ``record_function`` (wrapped here, the
runtime untouched). Prints the labelled pieces' inclusive times and the top operators by self time,
and the same rows decoded by the stock model (SDPA + ``DynamicCache``) for scale.
"""

from __future__ import annotations

import argparse
import functools
import time
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile, record_function

from evolalloc.bench.eval import floor_decode_seconds, synchronize
from evolalloc.bench.gpu import GpuBenchSettings, _allocations, random_prompts
from evolalloc.bench.gpu_shape import load_shape, random_model
from evolalloc.runtime import attention, cache, compress, decode
from evolalloc.runtime.bounded import bound_record
from evolalloc.runtime.decode import DecodeSettings
from evolalloc.runtime.prefill import prefill
from evolalloc.runtime.scorers import get_scorer

MODERATE = Path(__file__).parent / "shapes" / "moderate.json"


def labelled(owner, name: str, label: str) -> None:
    """Wrap ``owner.name`` so that its calls show in the profile as ``label``."""
    original = getattr(owner, name)

    @functools.wraps(original)
    def wrapper(*args, **kwargs):
        with record_function(label):
            return original(*args, **kwargs)

    setattr(owner, name, wrapper)


def label_the_runtime() -> None:
    labelled(decode, "compress_batch", "evolalloc: compress_batch (gather of the kept K/V)")
    labelled(compress, "_kept_slots", "evolalloc: _kept_slots (top-b prefix, sort)")
    labelled(cache.EvictedCache, "update", "evolalloc: EvictedCache.update (append + valid mask cat)")
    labelled(decode, "decode_batch", "evolalloc: decode_batch (the decode loop)")
    # The attention function is looked up in transformers' registry at each call: register the wrapper.
    labelled(attention, "evolalloc_attention", "evolalloc: attention function (mask + SDPA)")
    from transformers import AttentionInterface

    AttentionInterface.register(attention.ATTENTION_NAME, attention.evolalloc_attention)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", default=str(MODERATE))
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--context", type=int, default=4096)
    parser.add_argument("--budget", type=int, default=256)
    parser.add_argument("--prompts", type=int, default=2)
    parser.add_argument("--candidates", type=int, default=8)
    parser.add_argument("--new-tokens", type=int, default=16)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--rows", type=int, default=25, help="operator rows printed")
    args = parser.parse_args()

    shape = load_shape(args.shape)
    settings = GpuBenchSettings(context=args.context, budget=args.budget, prompts=args.prompts,
                                candidates=args.candidates,
                                new_tokens=args.new_tokens, batch_size=args.batch_size)
    loaded = random_model(shape, device=args.device, dtype=args.dtype)
    model, device = loaded.model, loaded.device
    scorer = get_scorer("snapkv")
    started = time.perf_counter()
    records = [bound_record(prefill(model, ids, [scorer]), settings.b_max)
               for ids in random_prompts(settings.prompts, settings.context, model.config.vocab_size, settings.seed)]
    print(f"shape {shape.name}: {shape.layers} layers x {loaded.geometry.num_kv_heads} "
          f"KV heads, head size {loaded.geometry.head_dim}; "
          f"{args.dtype} on {device}, torch threads {torch.get_num_threads()}; "
          f"prefill of {settings.prompts} x {settings.context} "
          f"tokens: {time.perf_counter() - started:.1f} s")
    rows = [(r, b) for b in _allocations(settings, loaded.geometry, scorer.always_kept) for r in records]
    run = functools.partial(decode.generate, model, rows, scorer, DecodeSettings(max_new_tokens=settings.new_tokens),
                            None, settings.batch_size)
    run()  # warm-up
    synchronize(device)
    started = time.perf_counter()
    run()
    synchronize(device)
    plain = time.perf_counter() - started
    floor = floor_decode_seconds(model, rows, [settings.new_tokens] * len(rows), settings.batch_size, scorer)
    print(f"{len(rows)} rows ({settings.candidates} allocations at "
          f"c = {settings.budget} x {settings.prompts} prompts), "
          f"{settings.new_tokens} tokens each, {settings.batch_size} rows per forward")
    print(f"cached path (unprofiled): {plain:.3f} s; stock decode floor "
          f"on the same rows: {floor:.3f} s; ratio {plain / floor:.2f}x")

    label_the_runtime()
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    with profile(activities=activities) as prof:
        run()
        synchronize(device)
    events = prof.key_averages()
    total = sum(e.self_cpu_time_total for e in events) / 1e6
    print(f"\nprofiled run: {total:.3f} s of CPU self time in all operators")
    print("labelled pieces (inclusive CPU time; nested: the attention and update run inside the decode loop):")
    for e in sorted((e for e in events if e.key.startswith("evolalloc:")), key=lambda e: -e.cpu_time_total):
        print(f"  {e.cpu_time_total / 1e6:8.3f} s  {e.count:6d} calls  {e.key}")
    print(f"\ntop {args.rows} operators by self CPU time:")
    print(events.table(sort_by="self_cpu_time_total", row_limit=args.rows, max_name_column_width=60))


if __name__ == "__main__":
    main()
