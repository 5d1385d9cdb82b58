"""Decode-time eviction's two kernels against the plain formulas they replaced, side by side on a recipe's
search split: the seconds a candidate's evaluation takes each way, and whether every score is the same to the bit.

    OMP_NUM_THREADS=1 python benchmarks/eviction_kernels_check.py RECIPE [--candidates 3]

The recipe must hold its budgets while decoding (``budget.decode``). The search split is drawn, curated and
prefilled as the run would (not timed); then the same random candidates around the recipe's target are
evaluated in the search's fitness mode with the plain formulas (an element-wise gather of each head's slots,
the keys repeated per query head) and with the kernels as landed (``runtime.compress.gather_slots``,
``runtime.online_capture.attention_probabilities``).
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np
import torch

from evolalloc.config.recipe import load_recipe
from evolalloc.pipeline.experiment import Experiment
from evolalloc.runtime import decode_eviction, online_capture


def plain_gather_slots(stored: torch.Tensor, slots: torch.Tensor) -> torch.Tensor:
    """``[B, Hkv, W, D]``: each head's ``slots`` of ``stored`` ``[B, Hkv, S, D]`` by an element-wise gather."""
    return stored.gather(2, slots[..., None].expand(-1, -1, -1, stored.shape[-1]))


def plain_attention_probabilities(query, key, visible, scaling, softcap=None) -> torch.Tensor:
    """``[B, Hq, q, S]``: softmax attention over the keys repeated per query head, the mask too."""
    n_rep = query.shape[1] // key.shape[1]
    keys = key.repeat_interleave(n_rep, dim=1)
    logits = query.float() @ keys.float().transpose(2, 3) * scaling
    if softcap:
        logits = torch.tanh(logits / softcap) * softcap
    if visible is not None:
        mask = visible.repeat_interleave(n_rep, dim=1) if visible.dim() == 4 and visible.shape[1] > 1 else visible
        logits = logits.masked_fill(~mask, float("-inf"))
    return torch.softmax(logits, dim=-1).nan_to_num(0.0)


def _timed(evaluator, candidates) -> tuple[float, list]:
    started = time.perf_counter()
    results = evaluator.evaluate(candidates)
    return (time.perf_counter() - started) / len(candidates), results


def _scores(results) -> list[float]:
    return [outcome.score for result in results for outcome in result.instances]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("recipe", help="a recipe that holds its budgets while decoding (budget.decode)")
    parser.add_argument("--candidates", type=int, default=3, help="random candidates, each evaluated both ways")
    args = parser.parse_args(argv)
    recipe = load_recipe(args.recipe)
    with Experiment(recipe, progress=False) as experiment:
        if experiment.resolved.decode is None:
            print(f"{args.recipe}: budget.decode is not set: nothing is evicted while decoding", file=sys.stderr)
            return 2
        evaluator = experiment.search_evaluator()  # the split prefilled: not timed
        geometry, target = experiment.geometry, experiment.resolved.target
        rng = np.random.default_rng(0)
        shape = (geometry.num_layers, geometry.num_kv_heads)
        candidates = []
        for _ in range(args.candidates):
            spread = rng.uniform(0.3, 1.7, shape)
            candidates.append(np.round(spread * target * spread.size / spread.sum()).astype(np.int64))
        landed = decode_eviction.gather_slots, online_capture.attention_probabilities
        decode_eviction.gather_slots = plain_gather_slots
        online_capture.attention_probabilities = plain_attention_probabilities
        try:
            plain_seconds, plain = _timed(evaluator, candidates)
        finally:
            decode_eviction.gather_slots, online_capture.attention_probabilities = landed
        kernel_seconds, kernels = _timed(evaluator, candidates)
    same = _scores(plain) == _scores(kernels)
    print(f"{len(candidates)} candidates x {len(evaluator.instances)} prompts, {experiment.resolved.fitness_mode}, "
          f"c = {target:g}, interval {recipe.budget.decode.interval}")
    print(f"plain formulas: {plain_seconds:.2f} s a candidate; kernels: {kernel_seconds:.2f} s a candidate; "
          f"{plain_seconds / kernel_seconds:.2f}x; every score the same to the bit: {'yes' if same else 'NO'}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
