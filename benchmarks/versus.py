"""Two runs' profiles, paired on the same held-out instances: did search A beat search B?

A run's ``compare`` keeps every held-out instance's score (``comparison.json``, ``"instances"``).
Two runs of one recipe that differ only in the search (CMA-ES vs the random control, layer vs
head groups, another budget rule or seed) scored the same instances, so their evolved profiles
can be tested against each other without a new evaluation::

    python benchmarks/versus.py runs/quickstart-s0 runs/quickstart-random
    python benchmarks/versus.py runs/quickstart-s0 runs/quickstart-s1 runs/quickstart-s2 --versus runs/quickstart-random

Prints, per task and budget: each side's mean [95% bootstrap CI] and the paired difference
A − B with its interval and Wilcoxon p. With several A runs (seeds), every instance's score is
the mean over those runs, so the test is over instances, not over seeds.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from evolalloc.config.run_folder import COMPARISON_FILE
from evolalloc.core.errors import UserError
from evolalloc.report.comparison import load_instance_scores
from evolalloc.report.stats import align, bootstrap_mean, paired_test


def averaged(runs: list[Path], method: str) -> dict[str, dict[float, dict[str, float]]]:
    """``{task: {budget: {uid: score}}}`` of ``method``, each instance averaged over ``runs``."""
    tables = [load_instance_scores(run / COMPARISON_FILE) for run in runs]
    out: dict[str, dict[float, dict[str, float]]] = {}
    for task in tables[0]:
        for budget, first in tables[0][task][method].items():
            per_run = [table[task][method][budget] for table in tables]
            if any(set(scores) != set(first) for scores in per_run):
                raise UserError(f"the runs scored different held-out instances at c = {budget:g}", source=str(runs[0]))
            out.setdefault(task, {})[budget] = {uid: float(np.mean([s[uid] for s in per_run])) for uid in first}
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", type=Path, help="run A (several: their mean per instance), then B unless --versus")
    parser.add_argument("--versus", nargs="+", type=Path, default=None, help="run(s) B (default: the last positional run)")
    parser.add_argument("--method", default="evolved", help="the method compared in both (default: evolved)")
    parser.add_argument("--seed", type=int, default=0, help="bootstrap seed")
    args = parser.parse_args(argv)
    first, second = (args.runs, args.versus) if args.versus else (args.runs[:-1], args.runs[-1:])
    if not first or not second:
        parser.error("give at least one run on each side")
    try:
        a, b = averaged(first, args.method), averaged(second, args.method)
    except UserError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    name_a, name_b = " + ".join(p.name for p in first), " + ".join(p.name for p in second)
    print(f"A = {name_a}\nB = {name_b}\nmethod {args.method}, held-out instances paired by uid")
    for task in a:
        print(f"task {task}")
        for budget in sorted(a[task]):
            try:
                xs, ys = align(a[task][budget], b[task].get(budget, {}), ("A", "B"))
            except (ValueError, KeyError) as err:
                print(f"error: c = {budget:g}: {err}", file=sys.stderr)
                return 2
            ma, mb = bootstrap_mean(xs, seed=args.seed), bootstrap_mean(ys, seed=args.seed)
            test = paired_test(xs, ys, seed=args.seed)
            print(f"  c = {budget:>5g}: A {ma.mean:.3f} [{ma.low:.2f}, {ma.high:.2f}]  B {mb.mean:.3f} [{mb.low:.2f}, {mb.high:.2f}]"
                  f"  A - B {test.diff:+.3f} [{test.low:+.3f}, {test.high:+.3f}], p {test.p_value:.3g} (n = {test.n})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
