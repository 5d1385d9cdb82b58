"""Two searches' profiles, paired on the same held-out instances, seeds pooled on both sides.

A run's ``compare`` keeps every held-out instance's score (``comparison.json``, ``"instances"``).
Runs of one recipe that differ only in the search (CMA-ES vs the random control or TPE, another
search space, another seed) scored the same instances, so their evolved profiles can be tested
against each other without a new evaluation::

    python benchmarks/versus.py runs/quickstart-s0 runs/quickstart-random
    python benchmarks/versus.py runs/qs-cma-s0 runs/qs-cma-s1 runs/qs-cma-s2 \\
        --versus runs/qs-random-s0 runs/qs-random-s1 runs/qs-random-s2

Prints, per task and budget:

* pooled: each side's per-instance score is the mean over that side's runs (seeds); the test is
  the paired one over instances (mean A - B, 95% bootstrap interval, Wilcoxon p), so seed noise
  of *both* searches is averaged before the instances are paired;
* per seed pair: every A run against every B run, the same test, so one lucky seed shows;
* the verdict against the bar (default: A - B >= 0.03 and p < 0.05 pooled): ``A beats B``,
  ``B beats A`` or ``no clear winner``.
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

# The bar for "the search beats the control": 3 points pooled, paired p < 0.05.
MARGIN, ALPHA = 0.03, 0.05

Scores = dict[str, dict[float, dict[str, float]]]  # {task: {budget: {uid: score}}}


def run_scores(run: Path, method: str) -> Scores:
    """``{task: {budget: {uid: score}}}`` of ``method`` in one run's comparison."""
    table = load_instance_scores(run / COMPARISON_FILE)
    out: Scores = {}
    for task, per_method in table.items():
        if method not in per_method:
            raise UserError(f"no method {method!r} in this comparison (it has {', '.join(sorted(per_method))})",
                            source=str(run / COMPARISON_FILE), field=f"$.instances.{task}")
        out[task] = per_method[method]
    return out


def pooled(tables: list[Scores], runs: list[Path]) -> Scores:
    """Every instance's score averaged over ``tables`` (one per run); the runs must share instances."""
    out: Scores = {}
    for task, per_budget in tables[0].items():
        for budget, first in per_budget.items():
            for table, run in zip(tables, runs):
                scores = table.get(task, {}).get(budget)
                if scores is None or set(scores) != set(first):
                    raise UserError(f"the runs scored different instances at c = {budget:g} ({task})",
                                    source=str(run / COMPARISON_FILE))
            out.setdefault(task, {})[budget] = {uid: float(np.mean([t[task][budget][uid] for t in tables]))
                                                for uid in first}
    return out


def averaged(runs: list[Path], method: str) -> Scores:
    """``{task: {budget: {uid: score}}}`` of ``method``, each instance averaged over ``runs``."""
    return pooled([run_scores(run, method) for run in runs], runs)


def verdict(diff: float, p: float, margin: float = MARGIN, alpha: float = ALPHA) -> str:
    if p < alpha and diff >= margin:
        return "A beats B"
    if p < alpha and diff <= -margin:
        return "B beats A"
    return "no clear winner"


def _line(xs, ys, seed: int) -> tuple[str, float, float]:
    ma, mb = bootstrap_mean(xs, seed=seed), bootstrap_mean(ys, seed=seed)
    test = paired_test(xs, ys, seed=seed)
    text = (f"A {ma.mean:.3f} [{ma.low:.2f}, {ma.high:.2f}]  B {mb.mean:.3f} [{mb.low:.2f}, {mb.high:.2f}]"
            f"  A - B {test.diff:+.3f} [{test.low:+.3f}, {test.high:+.3f}], p {test.p_value:.3g} (n = {test.n})")
    return text, test.diff, test.p_value


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", type=Path, help="run(s) A (their mean per instance), then B unless --versus")
    parser.add_argument("--versus", nargs="+", type=Path, default=None,
                        help="run(s) B (default: the last positional run)")
    parser.add_argument("--method", default="evolved", help="the method compared in both (default: evolved)")
    parser.add_argument("--margin", type=float, default=MARGIN,
                        help=f"the verdict's least pooled gain (default {MARGIN})")
    parser.add_argument("--seed", type=int, default=0, help="bootstrap seed")
    args = parser.parse_args(argv)
    first, second = (args.runs, args.versus) if args.versus else (args.runs[:-1], args.runs[-1:])
    if not first or not second:
        parser.error("give at least one run on each side")
    try:
        tables_a = [run_scores(run, args.method) for run in first]
        tables_b = [run_scores(run, args.method) for run in second]
        a, b = pooled(tables_a, first), pooled(tables_b, second)
        pooled(tables_a + tables_b, first + second)  # both sides on the same instances
    except UserError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    name_a, name_b = " + ".join(p.name for p in first), " + ".join(p.name for p in second)
    print(f"A = {name_a}\nB = {name_b}\nmethod {args.method}, held-out instances paired by uid; "
          f"pooled = per-instance mean over each side's {len(first)} and {len(second)} runs")
    for task in a:
        print(f"task {task}")
        for budget in sorted(a[task]):
            xs, ys = align(a[task][budget], b[task][budget], ("A", "B"))
            text, diff, p = _line(xs, ys, args.seed)
            print(f"  c = {budget:>5g} pooled: {text}  -> {verdict(diff, p, args.margin)}")
            if len(first) * len(second) > 1:
                for run_a, table_a in zip(first, tables_a):
                    for run_b, table_b in zip(second, tables_b):
                        xs, ys = align(table_a[task][budget], table_b[task][budget], ("A", "B"))
                        print(f"    {run_a.name} vs {run_b.name}: {_line(xs, ys, args.seed)[0]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
