"""LU-KV's profiling, the two ways side by side on a recipe's search split: the answer fed over each prompt's
prefill record (``pipeline.lukv.future_attention_after``, as landed) against a second forward over context +
answer (``future_attention``, the way before), with the seconds each took and whether the budgets they give
differ.

    OMP_NUM_THREADS=1 python benchmarks/lukv_profiling_check.py RECIPE BUDGET [BUDGET ...]

The search split is drawn, curated and prefilled as the run would (not timed); then the curves are profiled
both ways on the same records. Prints the largest difference of the utility curves, and at each budget ``c``
how many (layer, KV head) cells of LU-KV's allocation differ and by how many tokens in all.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from evolalloc.config.recipe import load_recipe
from evolalloc.pipeline import lukv
from evolalloc.pipeline.experiment import Experiment, _profiled_run


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("recipe")
    parser.add_argument("budgets", nargs="+", type=int, help="c: tokens per (layer, KV head) on average")
    args = parser.parse_args(argv)
    with Experiment(load_recipe(args.recipe), progress=False) as experiment:
        run = _profiled_run(experiment)
        for task in run.tasks:
            task.records("search")  # drawn, curated, prefilled: not part of either timing
        started = time.perf_counter()
        fed = lukv.profile_curves(run)
        fed_seconds = time.perf_counter() - started
        landed = lukv.future_attention_after
        lukv.future_attention_after = lambda model, record, future: lukv.future_attention(model, record.prompt_ids,
                                                                                           future)
        try:
            started = time.perf_counter()
            forward = lukv.profile_curves(run)
            forward_seconds = time.perf_counter() - started
        finally:
            lukv.future_attention_after = landed
    print(f"{run.tasks[0].label}: {fed.meta['instances']} search prompts; profiling took {fed_seconds:.1f} s with "
          f"the answer fed over the records, {forward_seconds:.1f} s with a second forward each")
    print(f"utility curves: largest difference {np.abs(fed.utility - forward.utility).max():.2e} "
          f"(values up to {forward.utility.max():.3f})")
    cells = fed.utility.shape[0] * fed.utility.shape[1]
    for c in args.budgets:
        a, b = fed.budgets(c * cells), forward.budgets(c * cells)
        print(f"c = {c}: LU-KV's budgets differ in {int((a != b).sum())} of {cells} (layer, KV head) cells, "
              f"{int(np.abs(a - b).sum()) // 2} tokens moved")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
