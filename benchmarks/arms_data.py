"""Searched arms against each other on the search split: pooled over seeds, paired, and a decision.

Issue 35 item 2 asks how a searched profile should reach larger budgets: expanding the one
searched at ``c`` (arm E), searching each budget (S) or a searched curve (K). Every arm is a
searched row, so ``design_data.py`` (searched against unsearched) does not pair them with each
other. This does, from ``benchmarks/search_split_scores.py``'s output (one file per task; its
methods are the ``--run`` labels, ``<run>-s<seed>``), and writes the tables into a study's
``data.json`` with every pooled per-instance score kept::

    python benchmarks/arms_data.py --data results/long-context-4k/data.json --name item2 \\
        --scores number=RUNS/lc4k-number-item2.json --scores multikey=RUNS/lc4k-multikey-item2.json \\
        --arm E=E@1024,E@2048 --arm S=S2@1024,S4@2048 --arm K=K@1024,K@2048 --reference E \\
        --seeds 0 1 2 --margin 0.03 --alpha 0.05 --cost-order E,K,S

``--arm NAME=RUN@BUDGET,...``: where the arm's profile at each budget comes from (arm S takes the
2c search's profile at 2c and the 4c search's at 4c). A cell is one (task, budget): each prompt's
score averaged over the seeds (the pre-registered pooling), each arm paired with the reference by
uid (``report.stats.paired_test``: Wilcoxon, two-sided; one-sided p = half of it on the side of the
difference). The decision (results/long-context-4k, item 2): the arm with the highest mean over all
cells wins if it beats the reference's mean by ``--margin`` and is significantly worse than the
reference (one-sided p < ``--alpha``) in no cell; otherwise the reference stays; arms within the
margin of the best count as tied, and the cheapest of them (``--cost-order``) is the one judged. Tables
``<name>-cells`` and ``<name>-decision``; the decision is also printed.
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import json
import sys
from pathlib import Path

import numpy as np

from evolalloc.core.errors import UserError
from evolalloc.report.comparison import load_instance_scores
from evolalloc.report.stats import align, paired_test


def parse_arm(text: str) -> tuple[str, list[tuple[str, float]]]:
    """``"S=S2@1024,S4@2048"`` -> ``("S", [("S2", 1024.0), ("S4", 2048.0)])``."""
    name, _, spec = text.partition("=")
    try:
        cells = [(run, float(budget)) for run, _, budget in (part.partition("@") for part in spec.split(","))]
    except ValueError:
        raise UserError(f"an arm is NAME=RUN@BUDGET,...; got {text!r}", field="--arm") from None
    if not name or not cells or any(not run for run, _ in cells):
        raise UserError(f"an arm is NAME=RUN@BUDGET,...; got {text!r}", field="--arm")
    return name, cells


@functools.cache
def _design_table():
    """``benchmarks/design_table.py``, for its ``Row`` (the folder is not a package; registered in
    ``sys.modules`` first, as its dataclasses need)."""
    spec = importlib.util.spec_from_file_location("design_table", Path(__file__).with_name("design_table.py"))
    module = sys.modules.setdefault(spec.name, importlib.util.module_from_spec(spec))
    spec.loader.exec_module(module)
    return module


def pooled(scores: dict, run: str, budget: float, seeds: list[int], source: str) -> dict[str, float]:
    """Each prompt's score at ``budget``, averaged over the seeds' runs ``<run>-s<seed>`` (``Row.pooled``)."""
    for seed in seeds:
        label = f"{run}-s{seed}"
        if label not in scores or budget not in scores[label]:
            raise UserError(f"no scores for {label} at {budget:g}", source=source)
    if len({frozenset(scores[f"{run}-s{seed}"][budget]) for seed in seeds}) > 1:  # Row's message says held-out
        raise UserError(f"the seeds of {run} were scored on different prompts at {budget:g}", source=source)
    row = _design_table().Row(run, searched=True, seeds={f"{run}-s{seed}": scores[f"{run}-s{seed}"] for seed in seeds})
    return dict(sorted(row.pooled(budget).items()))


def one_sided_worse(test) -> float:
    """One-sided p that the arm is worse than the reference (1 when it is not below it)."""
    return test.p_value / 2 if test.diff < 0 else 1.0


def build(tasks: dict[str, str], arms: dict[str, list[tuple[str, float]]], reference: str, seeds: list[int],
          margin: float, alpha: float, cost_order: list[str]) -> tuple[dict, dict, str]:
    """The cells table, the decision table and the winning arm's name."""
    cells, per_instance, means = [], {}, {arm: [] for arm in arms}
    worse = {arm: [] for arm in arms}
    for task, path in tasks.items():
        (scores,) = load_instance_scores(path).values()
        for position in range(len(arms[reference])):
            got = {arm: (spec[position][1], pooled(scores, *spec[position], seeds, path)) for arm, spec in arms.items()}
            budget, ref = got[reference]
            if any(b != budget for b, _ in got.values()):
                raise UserError(f"the arms' {position + 1}. budgets differ", field="--arm")
            for arm, (_, mine) in got.items():
                per_instance.setdefault(task, {}).setdefault(arm, {})[f"{budget:g}"] = mine
                mean = float(np.mean(list(mine.values())))
                means[arm].append(mean)
                if arm == reference:
                    cells.append([task, f"{budget:g}", arm, f"{mean:.3f}", "reference", "", str(len(mine))])
                    continue
                test = paired_test(*align(mine, ref, (arm, reference)))
                p_worse = one_sided_worse(test)
                worse[arm].append(p_worse < alpha)
                cells.append([task, f"{budget:g}", arm, f"{mean:.3f}",
                              f"{test.diff:+.3f} [{test.low:+.3f}, {test.high:+.3f}]",
                              f"{test.p_value:.3g} / {p_worse:.3g}", str(len(mine))])
    overall = {arm: float(np.mean(values)) for arm, values in means.items()}
    others = [arm for arm in arms if arm != reference]
    top = max(overall[arm] for arm in others)
    # Ties within the margin go to the cheaper arm (``cost_order``, cheapest first).
    best = min((arm for arm in others if top - overall[arm] < margin), key=cost_order.index)
    wins = overall[best] - overall[reference] >= margin and not any(worse[best])
    winner = best if wins else reference
    decision_rows = [[arm, f"{overall[arm]:.3f}",
                      "" if arm == reference else f"{overall[arm] - overall[reference]:+.3f}",
                      "" if arm == reference else str(sum(worse[arm])), "**default**" if arm == winner else ""]
                     for arm in arms]
    cells_table = {"columns": ["task", "budget", "arm", "mean (pooled over seeds)", f"vs {reference} [95% CI]",
                               "p two-sided / one-sided worse", "prompts"],
                   "rows": cells, "data_kept": True, "per_instance": per_instance}
    decision = {"columns": ["arm", "mean of the cells", f"vs {reference}",
                            f"cells significantly worse than {reference} (one-sided p < {alpha:g})", "decision"],
                "rows": decision_rows, "data_kept": True,
                "note": (f"Rule: the best arm ({best}; ties within {margin:g} go to the cheaper: "
                         f"{', '.join(cost_order)}) replaces {reference} only if it beats {reference}'s mean by "
                         f">= {margin:g} and is significantly worse in no cell; here it "
                         f"{'does' if wins else 'does not'}, so the default is {winner}.")}
    return cells_table, decision, winner


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, required=True, help="the study's data.json (tables added or replaced)")
    parser.add_argument("--name", required=True, help="tables <name>-cells and <name>-decision")
    parser.add_argument("--scores", action="append", required=True, metavar="TASK=FILE",
                        help="search_split_scores.py's output for one task (repeatable)")
    parser.add_argument("--arm", action="append", required=True, metavar="NAME=RUN@BUDGET,...")
    parser.add_argument("--reference", required=True, help="the arm the others must beat (the current default)")
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--margin", type=float, default=0.03)
    parser.add_argument("--alpha", type=float, default=0.05)
    parser.add_argument("--cost-order", default=None, help="the arms, cheapest first (default: --arm order)")
    args = parser.parse_args(argv)
    try:
        tasks = dict(text.split("=", 1) for text in args.scores)
        arms = dict(parse_arm(text) for text in args.arm)
        if args.reference not in arms or len(arms) < 2:
            raise UserError("--reference must name one of two or more --arm", field="--reference")
        if len({len(spec) for spec in arms.values()}) != 1:
            raise UserError("every arm needs the same number of budgets", field="--arm")
        cost_order = args.cost_order.split(",") if args.cost_order else list(arms)
        if sorted(cost_order) != sorted(arms):
            raise UserError("--cost-order must name every arm once", field="--cost-order")
        cells, decision, winner = build(tasks, arms, args.reference, args.seeds, args.margin, args.alpha,
                                        cost_order)
        data = json.loads(args.data.read_text()) if args.data.exists() else {"tables": {}}
    except (UserError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    data.setdefault("tables", {})
    data["tables"][f"{args.name}-cells"], data["tables"][f"{args.name}-decision"] = cells, decision
    args.data.write_text(json.dumps(data, indent=1) + "\n")
    for row in cells["rows"]:
        print("  ".join(row))
    print(decision["note"])
    print(f"default: {winner}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
