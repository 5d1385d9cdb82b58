"""Where (b) re-prefill's extra time goes, and what the batch size does to (a) — issue 36's last open questions.

The GPU check (results/gpu-check/) found re-prefill (b) spending 14-20 s per candidate beyond its
prefills, on a GPU only (on a CPU (b) is its prefills). This probe, on one model:

1. prefills ``--prompts`` random prompts, keeping each whole record and its bounded copy;
2. times ``generate`` on the whole records twice (two allocations) and on the bounded ones,
   so a one-time cost and a per-call cost tell apart; with ``--side-by-side`` instead, the decode
   step without a mask routed as landed and as before (SDPA's own choice), on fresh allocations;
3. times (b) exactly as ``bench gpu`` does (prefill + generate) once, then profiles it once
   (operators by CPU time and by device time);
4. times the cached path at several ``--batch-sizes`` (rows per forward) on the same rows.

Prints one JSON line per measurement; with ``--out FOLDER`` also writes them to probe.jsonl as they come,
and the profile to profile.txt.
Usage:
    python benchmarks/gpu_reprefill_probe.py --shape llama-3.1-8b --context 8192 --out $OUT
    python benchmarks/gpu_reprefill_probe.py --shape tiny-llama --device cpu --context 512 --budget 40
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import replace
from pathlib import Path

import torch

from evolalloc.bench.gpu import SCORER, GpuBenchSettings, candidate_allocations, random_prompts, timed
from evolalloc.bench.gpu_shape import load_shape, random_model
from evolalloc.runtime.bounded import bound_record
from evolalloc.runtime.decode import DecodeSettings, generate
from evolalloc.runtime.prefill import prefill
from evolalloc.runtime.scorers import get_scorer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shape", default="llama-3.1-8b")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--context", type=int, default=8192)
    parser.add_argument("--budget", type=int, default=512)
    parser.add_argument("--prompts", type=int, default=2)
    parser.add_argument("--new-tokens", type=int, default=16)
    parser.add_argument("--batch-sizes", type=int, nargs="*", default=[16, 32, 64])
    parser.add_argument("--side-by-side", action="store_true",
                        help="Time the unmasked decode step's route as landed ('fix') and as before ('old': SDPA's "
                             "own choice) on fresh allocations, instead of step 2; then (b) with the fix.")
    parser.add_argument("--no-profile", action="store_true")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "probe.jsonl").write_text("")

    def emit(**fields) -> None:  # each line written as it is measured: a call cut short keeps what it had
        print(json.dumps(fields), flush=True)
        if args.out is not None:
            with open(args.out / "probe.jsonl", "a") as sink:
                sink.write(json.dumps(fields) + "\n")

    started = time.perf_counter()
    loaded = random_model(load_shape(args.shape), device=args.device, dtype=args.dtype)
    model, device = loaded.model, loaded.device
    emit(step="model", seconds=round(time.perf_counter() - started, 2), shape=args.shape, device=str(device),
         name=torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu")
    scorer = get_scorer(SCORER)
    decode = DecodeSettings(max_new_tokens=args.new_tokens)
    widest = max(args.batch_sizes, default=1)
    settings = GpuBenchSettings(context=args.context, budget=args.budget, prompts=args.prompts,
                                candidates=max(10, -(-widest // args.prompts)), new_tokens=args.new_tokens)
    prompts = random_prompts(args.prompts, args.context, model.config.vocab_size, 0)
    timed(device, lambda: prefill(model, prompts[0][:256], [scorer]))  # warm-up
    whole, bounded = [], []
    for ids in prompts:
        seconds, record = timed(device, lambda: prefill(model, ids, [scorer]))
        emit(step="prefill", seconds=round(seconds, 3), tokens=len(ids))
        whole.append(record)
        bounded.append(bound_record(record, settings.b_max))
    allocations = candidate_allocations(settings, loaded.geometry, scorer.always_kept)
    others = candidate_allocations(replace(settings, seed=1), loaded.geometry, scorer.always_kept)

    def rows(records, budgets):
        return [(r, budgets) for r in records]

    timed(device, lambda: generate(model, rows(bounded, others[0]), scorer, decode, None, 16))  # warm-up
    if args.side_by_side:
        side_by_side(model, whole, allocations[5:9], scorer, decode, device, emit)
    else:
        for i in range(2):
            seconds, _ = timed(device, lambda: generate(model, rows(whole, allocations[i]), scorer, decode, None, 16))
            emit(step="generate-whole", call=i + 1, seconds=round(seconds, 3))
            seconds, _ = timed(device, lambda: generate(model, rows(bounded, allocations[i]), scorer, decode, None,
                                                         16))
            emit(step="generate-bounded", call=i + 1, seconds=round(seconds, 3))

    def reprefill(budgets):  # exactly bench gpu's (b): fresh whole records, then generate
        return generate(model, rows([prefill(model, ids, [scorer]) for ids in prompts], budgets), scorer, decode,
                        None, 16)

    seconds, _ = timed(device, lambda: reprefill(allocations[3]))
    emit(step="reprefill-as-bench", seconds=round(seconds, 3))

    if not args.no_profile:
        write_profile(lambda: reprefill(allocations[4]), device, args.out)
        emit(step="profiled")
    batch_sizes(model, [row for budgets in allocations for row in rows(bounded, budgets)][:widest],
                [row for budgets in others for row in rows(bounded, budgets)], args.batch_sizes, scorer, decode,
                device, emit)


def side_by_side(model, whole, fresh, scorer, decode, device, emit) -> None:
    """The unmasked decode step's route, as landed and as before, each on allocations it has not met: all
    prompts' whole records in one batch, then one prompt alone (what ``evolalloc.generate`` does)."""
    import evolalloc.runtime.attention as attention

    landed = attention.folded_decode_step
    for route, (both, alone) in (("fix", fresh[0:2]), ("old", fresh[2:4])):
        attention.folded_decode_step = landed if route == "fix" else (lambda query: False)
        try:
            seconds, _ = timed(device, lambda: generate(model, [(r, both) for r in whole], scorer, decode, None, 16))
            emit(step="generate-whole", route=route, rows=len(whole), seconds=round(seconds, 3))
            seconds, _ = timed(device, lambda: generate(model, [(whole[0], alone)], scorer, decode, None, 16))
            emit(step="generate-one-row", route=route, rows=1, seconds=round(seconds, 3))
        finally:
            attention.folded_decode_step = landed


def write_profile(work, device, out) -> None:
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    with profile(activities=activities) as prof:
        work()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
    averages = prof.key_averages()
    text = ["## (b) as bench gpu runs it: prefill the prompts, generate on the whole records; by CPU total",
            averages.table(sort_by="cpu_time_total", row_limit=30)]
    if device.type == "cuda":
        text += ["## by device time", averages.table(sort_by="self_cuda_time_total", row_limit=20)]
    if out is not None:
        (out / "profile.txt").write_text("\n\n".join(text) + "\n")


def batch_sizes(model, all_rows, warm_rows, sizes, scorer, decode, device, emit) -> None:
    """The cached path on the same rows at several rows per forward (each warmed up on other rows first)."""
    for size in sizes:
        timed(device, lambda: generate(model, warm_rows[:size], scorer, decode, None, size))
        seconds, _ = timed(device, lambda: generate(model, all_rows, scorer, decode, None, size))
        emit(step="batch-size", rows_per_forward=size, rows=len(all_rows), seconds=round(seconds, 3),
             seconds_per_row=round(seconds / len(all_rows), 4))


if __name__ == "__main__":
    main()
