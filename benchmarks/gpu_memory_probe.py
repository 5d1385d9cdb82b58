"""Where a GPU's memory goes after prefilling and bounding records (issue 36's GPU check found
``memory_allocated`` 2 whole records above the bounded records it held, at 8k and at 32k).

For each setting (cuDNN's SDPA on, then off): prefill ``--prompts`` random prompts at ``--shape``,
bound each record at ``--b-max``, drop the whole one, then compare ``torch.cuda.memory_allocated``
with the bytes of the CUDA tensors Python can still reach (``gc``), and name the largest of those.
Prints one JSON line per setting.  Usage:
    python benchmarks/gpu_memory_probe.py --shape llama-3.1-8b --context 8192 --prompts 2
"""

from __future__ import annotations

import argparse
import gc
import json

import torch

from evolalloc.bench.gpu import SCORER, random_prompts
from evolalloc.bench.gpu_shape import load_shape, random_model
from evolalloc.runtime.bounded import bound_record
from evolalloc.runtime.prefill import prefill
from evolalloc.runtime.scorers import get_scorer


def reachable_cuda_bytes() -> tuple[int, list[str]]:
    seen, total, big = set(), 0, []
    for obj in gc.get_objects():
        if not isinstance(obj, torch.Tensor) or obj.device.type != "cuda" or isinstance(obj, torch.nn.Parameter):
            continue
        storage = obj.untyped_storage()
        if storage.data_ptr() in seen:
            continue
        seen.add(storage.data_ptr())
        total += storage.nbytes()
        if storage.nbytes() > 64 * 2**20:
            big.append(f"{tuple(obj.shape)} {obj.dtype} {storage.nbytes() / 2**20:.0f} MiB")
    return total, big


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--shape", default="llama-3.1-8b")
    parser.add_argument("--context", type=int, default=8192)
    parser.add_argument("--prompts", type=int, default=2)
    parser.add_argument("--b-max", type=int, default=2048)
    args = parser.parse_args()
    loaded = random_model(load_shape(args.shape), device="cuda", dtype="bfloat16")
    scorer = get_scorer(SCORER)
    prompts = random_prompts(args.prompts, args.context, loaded.model.config.vocab_size, 0)
    for cudnn in (True, False):
        torch.backends.cuda.enable_cudnn_sdp(cudnn)
        gc.collect()
        torch.cuda.synchronize()
        before = torch.cuda.memory_allocated()
        reachable_before, _ = reachable_cuda_bytes()
        records = []
        for ids in prompts:
            record = prefill(loaded.model, ids, [scorer])
            records.append(bound_record(record, args.b_max))
            del record
        gc.collect()
        torch.cuda.synchronize()
        reachable, big = reachable_cuda_bytes()
        print(json.dumps({"cudnn_sdp": cudnn, "context": args.context, "prompts": args.prompts,
                          "records_bytes": sum(r.nbytes() for r in records),
                          "allocated_growth": torch.cuda.memory_allocated() - before,
                          "reachable_growth": reachable - reachable_before, "largest_reachable": big[:8]}), flush=True)
        del records


if __name__ == "__main__":
    main()
