"""results/decode-time: the held-out tables and the verdict, computed from the study's per-instance scores.

    python benchmarks/decode_time_tables.py            # writes the tables into results/decode-time/data.json
    python benchmarks/results_tables.py                # then renders them into the page

    python benchmarks/decode_time_tables.py results/decode-repeat --study repeat_heads

Reads ``scores/<study>.json`` (``search_versus.py --compare-once ... --compare-modes generate,fidelity``:
greedy agreement per row under ``scores``, the likelihood kept under ``metrics_by_mode.fidelity``) and, when
it is there, ``scores/scorers.json`` (``benchmarks/scorer_table.py``: every scorer at uniform budgets). A task
with answers of its own (``repeat_passage``) is compared with ``--compare-modes agreement,fidelity``: its
``scores`` are then the greedy agreement with the full cache's continuation too, and the task's own score of
the same answers (``metrics_by_mode.agreement``) is shown beside them. It applies the page's pre-registered
test to each searched run at ``c`` (the smallest budget):

1. the mean over the held-out prompts of the likelihood kept, ``exp(lc - lf)`` uncapped, is >= 0.95;
2. its greedy agreement minus uniform SnapKV's (held alike) is >= 0.10, two-sided Wilcoxon p < 0.05
   (``evolalloc.report.stats.paired_test``, as on every page here).

The goal is met when both hold for every searched run (3 seeds). Other tables' entries in ``data.json``
are kept.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from evolalloc.report.markdown import fmt_p
from evolalloc.report.stats import align, bootstrap_mean, paired_test

PAGE = Path(__file__).resolve().parents[1] / "results" / "decode-time"
STUDY = "decode_prose"
KEPT, MARGIN, ALPHA = 0.95, 0.10, 0.05
UNSEARCHED = ("uniform", "pyramid", "streaming", "full")
REFERENCE_SCORER = "snapkv"
OWN_METRIC_NOTE = "; task metric: the greedy answer scored by the task's own metric against its own answer"


def mean(per_instance: dict[str, float]) -> float:
    return sum(per_instance.values()) / len(per_instance)


def cell(data: dict, path: tuple[str, ...], source: str) -> dict[str, float]:
    """``data[path[0]][path[1]]...``; a missing key is a ``ValueError`` naming the file and the field."""
    node = data
    for depth, key in enumerate(path):
        if not isinstance(node, dict) or key not in node:
            raise ValueError(f"{source}: no field {'.'.join(path[:depth + 1])}")
        node = node[key]
    return node


def test_run(data: dict, run: str, source: str) -> dict:
    """The pre-registered test of one searched run at ``c`` (the smallest budget): ``{"met", "cells"}``, the
    cells of its ``dt-test`` row after the run's name (likelihood kept, (1), agreement − uniform, p, (2),
    verdict)."""
    c = str(float(cell(data, ("budgets",), source)[0]))
    likelihood = mean(cell(data, ("metrics_by_mode", "fidelity", run, c), source))
    ours, theirs = align(cell(data, ("scores", run, c), source), cell(data, ("scores", "uniform", c), source),
                         (run, "uniform"))
    t = paired_test(ours, theirs)
    first, second = likelihood >= KEPT, t.diff >= MARGIN and t.significant(ALPHA)
    return {"met": first and second,
            "cells": [f"{likelihood:.3f}", "yes" if first else "no", f"{t.diff:+.3f}", fmt_p(t.p_value),
                      "yes" if second else "no", "**met**" if first and second else "not met"]}


def study_tables(data: dict, source: str, study: str = STUDY) -> tuple[dict, bool]:
    """The ``dt-test`` and ``dt-means`` tables from ``compare_once``'s data, and whether the goal is met."""
    budgets = [str(float(b)) for b in cell(data, ("budgets",), source)]
    c = budgets[0]
    runs = [name for name in cell(data, ("scores",), source) if name in cell(data, ("runs",), source)]
    if not runs:
        raise ValueError(f"{source}: no searched run in field scores (the names under runs)")
    # ``scores``: greedy agreement with the full cache's continuation (a task judged against it, in generate;
    # any task in the agreement mode, whose metric is then the task's own score of the answer, shown beside).
    table_mode = data.get("modes", ["generate"])[0]
    agreement = data["scores"]
    answers = cell(data, ("metrics_by_mode", "agreement"), source) if table_mode == "agreement" else None
    kept = cell(data, ("metrics_by_mode", "fidelity"), source)
    uniform = cell(data, ("scores", "uniform", c), source)
    test_rows, met = [], []
    for run in runs:
        t = test_run(data, run, source)
        met.append(t["met"])
        test_rows.append([run, *t["cells"]])
    # reported beside, not tested
    prefix = data.get("greedy_prefix_by_mode", {}).get(table_mode, {})
    means_rows = []
    for row in runs + [r for r in UNSEARCHED if r in agreement]:
        cells = []
        for budget in budgets:
            interval = bootstrap_mean(list(cell(data, ("scores", row, budget), source).values()))
            cells.append(f"{interval.mean:.3f} [{interval.low:.2f}, {interval.high:.2f}]")
        likelihoods = [f"{mean(kept[row][b]):.3f}" if b in kept.get(row, {}) else "–" for b in budgets]
        prefixes = [f"{mean(prefix[row][b]):.3f}" if b in prefix.get(row, {}) else "–" for b in budgets]
        own = [f"{mean(answers[row][b]):.3f}" if b in answers.get(row, {}) else "–" for b in budgets] if answers else []
        means_rows.append([row, *cells, *likelihoods, *(prefixes if prefix else []), *own])
    n = len(uniform)
    goal = bool(met) and all(met)
    tables = {
        "dt-test": {"columns": ["searched run", "likelihood kept at c", "(1) >= 0.95", "agreement − uniform SnapKV",
                                "p", "(2) >= +0.10, p < 0.05", "verdict"],
                    "rows": test_rows, "data_kept": True,
                    "note": f"c = {float(c):g}, {n} held-out prompts, from scores/{study}.json. The goal "
                            f"(both, every seed): {'**met**' if goal else 'not met'}."},
        "dt-means": {"columns": ["row", *(f"agreement, c = {float(b):g}" for b in budgets),
                                 *(f"likelihood kept, c = {float(b):g}" for b in budgets),
                                 *(f"greedy prefix, c = {float(b):g}" for b in (budgets if prefix else [])),
                                 *(f"task metric, c = {float(b):g}" for b in (budgets if answers else []))],
                     "rows": means_rows, "data_kept": True,
                     "note": f"Greedy agreement with the full cache's continuation: held-out mean [95% bootstrap "
                             f"CI]; likelihood kept: mean exp(lc − lf), uncapped; greedy prefix: the share of the "
                             f"full cache's continuation matched before the first divergence"
                             f"{OWN_METRIC_NOTE if answers else ''}"
                             f". {n} prompts, from scores/{study}.json."},
    }
    return tables, goal


def scorer_tables(data: dict, source: str) -> dict:
    """The ``dt-scorers`` table from ``scorer_table.py``'s data: each scorer at each uniform budget, and
    its greedy agreement against SnapKV's (paired)."""
    budgets = [str(float(b)) for b in cell(data, ("budgets",), source)]
    agreement = cell(data, ("scores", "generate"), source)
    kept = data.get("metrics", {}).get("fidelity", {})
    rows = []
    for scorer, per_budget in agreement.items():
        cells, versus = [], []
        for budget in budgets:
            scores = cell(data, ("scores", "generate", scorer, budget), source)
            cells.append(f"{mean(scores):.3f}")
            cells.append(f"{mean(kept[scorer][budget]):.3f}" if budget in kept.get(scorer, {}) else "–")
            if scorer == REFERENCE_SCORER:
                versus.append("–")
                continue
            reference = cell(data, ("scores", "generate", REFERENCE_SCORER, budget), source)
            t = paired_test(*align(scores, reference, (scorer, REFERENCE_SCORER)))
            versus.append(f"{t.diff:+.3f} (p {fmt_p(t.p_value)})")
        rows.append([scorer, *cells, *versus])
    columns = ["scorer (uniform budgets)"]
    for budget in budgets:
        columns += [f"agreement, c = {float(budget):g}", f"likelihood kept, c = {float(budget):g}"]
    columns += [f"agreement − SnapKV, c = {float(b):g}" for b in budgets]
    n = len(next(iter(next(iter(agreement.values())).values())))
    return {"dt-scorers": {"columns": columns, "rows": rows, "data_kept": True,
                           "note": f"{n} held-out prompts, budgets held while decoding; paired two-sided Wilcoxon "
                                   f"against SnapKV; from scores/scorers.json."}}


def load(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as error:
        raise ValueError(f"{path}: not JSON ({error.msg}, line {error.lineno})")


def main(argv: list[str]) -> int:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("page", nargs="?", type=Path, default=PAGE, help="the results page's folder")
    parser.add_argument("--study", default=STUDY, help="the scores file's name, scores/<study>.json")
    args = parser.parse_args(argv)
    page = args.page
    study, scorers = page / "scores" / f"{args.study}.json", page / "scores" / "scorers.json"
    if not study.exists():
        print(f"{study}: no such file (the comparing call's --compare-once output)", file=sys.stderr)
        return 2
    try:
        tables, goal = study_tables(load(study), str(study), args.study)
        if scorers.exists():
            tables.update(scorer_tables(load(scorers), str(scorers)))
    except ValueError as error:  # one line naming the file and the field, exit 2 (bad input)
        print(error, file=sys.stderr)
        return 2
    print(f"{merge_tables(page, tables)}: {', '.join(tables)}; the goal {'met' if goal else 'not met'}")
    return 0


def merge_tables(page: Path, tables: dict) -> Path:
    """Write ``tables`` into the page's ``data.json``, keeping its other tables; returns the file."""
    data_path = page / "data.json"
    data = json.loads(data_path.read_text()) if data_path.exists() else {"tables": {}}
    data.setdefault("tables", {}).update(tables)
    data_path.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n")
    return data_path


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
