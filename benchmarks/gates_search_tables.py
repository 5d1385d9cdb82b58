"""results/search-budget-gates-multikey: its verdict and tables, from the comparing call's per-prompt scores.

    python benchmarks/gates_search_tables.py           # writes the page's data.json tables
    python benchmarks/results_tables.py                 # then renders them into the page

Reads ``scores/sgm_multikey2048_gates.json`` (``benchmarks/compare_once.py``: every row's per-instance
held-out scores, how each search went) and applies the page's pre-registered test to each searched run,
at ``c`` (the first budget): (1) its mean is above uniform gates' (row ``uniform``) with paired p < 0.05,
and (2) above global gates' (row ``global-topk``) likewise. The study is met when every searched run
passes both. The paired tests are ``evolalloc.report.stats.paired_test`` (Wilcoxon signed-rank; the paired
bootstrap's p when every difference is zero), as on every page here. The search table is search-budget's.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from search_budget_tables import fmt_p, setting_tables  # noqa: E402 - a sibling script, not a package

from evolalloc.report.stats import align, bootstrap_mean, paired_test  # noqa: E402

PAGE = Path(__file__).resolve().parents[1] / "results" / "search-budget-gates-multikey"
AGAINST = ("uniform", "global-topk")  # the test's rows: the same gates at uniform budgets, and one top-k
OTHER_ROWS = ("full",)
ALPHA = 0.05
STUDY = "sgm_multikey2048_gates"  # scores/<STUDY>.json, the RUNBOOK's comparing call


def test_run(data: dict, run: str) -> dict:
    """The pre-registered test of one searched run at c: ``{row: {diff, p, beats}}`` and ``met``."""
    c = str(float(data["budgets"][0]))
    out = {}
    for row in AGAINST:
        ours, theirs = align(data["scores"][run][c], data["scores"][row][c], (run, row))
        t = paired_test(ours, theirs)
        out[row] = {"diff": t.diff, "p": t.p_value, "beats": t.diff > 0 and t.significant(ALPHA)}
    return {"against": out, "met": all(r["beats"] for r in out.values())}


def study_tables(name: str, data: dict) -> tuple[dict, bool]:
    """The page's tables for one comparing call's JSON, and whether every searched run passed."""
    scores, budgets = data["scores"], data["budgets"]
    runs = [r for r in scores if r in data["runs"]]
    missing = [r for r in AGAINST if r not in scores]
    if missing:
        raise SystemExit(f"{name}: the test's rows {', '.join(missing)} are not in its scores")
    means = []
    for row in runs + [r for r in AGAINST + OTHER_ROWS if r in scores]:
        cells = []
        for budget in budgets:
            interval = bootstrap_mean(list(scores[row][str(float(budget))].values()))
            cells.append(f"{interval.mean:.3f} [{interval.low:.2f}, {interval.high:.2f}]")
        means.append([row.removeprefix(f"{name}-"), *cells])
    tests = {run: test_run(data, run) for run in runs}
    test_rows = [[run.removeprefix(f"{name}-"),
                  *(f"{t['against'][r]['diff']:+.3f} (p {fmt_p(t['against'][r]['p'])})" for r in AGAINST),
                  *("yes" if t["against"][r]["beats"] else "no" for r in AGAINST),
                  "**met**" if t["met"] else "not met"] for run, t in tests.items()]
    search = setting_tables(name, data)[0][f"{name}-search"]  # how each search went, as search-budget shows it
    met = bool(tests) and all(t["met"] for t in tests.values())
    c = budgets[0]
    return {
        "means": {"columns": ["row", *[f"c = {b:g}" for b in budgets]], "rows": means, "data_kept": True,
                  "note": f"Held-out exact match, mean [95% bootstrap CI], {data['meta']['instances']} prompts, "
                          f"from scores/{name}.json. uniform: the gates at uniform budgets; global-topk: one "
                          f"top-k by the same gates over every layer, head and token."},
        "test": {"columns": ["searched run", f"− uniform gates at c = {c:g}", f"− global gates at c = {c:g}",
                             "(1) beats uniform gates", "(2) beats global gates", "verdict"],
                 "rows": test_rows, "data_kept": True,
                 "note": f"Paired difference (searched − row) and two-sided Wilcoxon p. Study: "
                         f"{'**met**' if met else 'not met'} (every seed must pass both)."},
        "search": search,
    }, met


def write(page: Path, study: str, build) -> None:
    """``build(study, data)`` -> (tables, met) on ``page/scores/<study>.json``, merged into ``page/data.json``
    (tables other scripts wrote there, such as the grid's, are kept)."""
    path = page / "scores" / f"{study}.json"
    if not path.exists():
        raise SystemExit(f"{path}: no comparing call's JSON yet (the RUNBOOK's comparing command)")
    tables, met = build(study, json.loads(path.read_text()))
    data_path = page / "data.json"
    out = json.loads(data_path.read_text()) if data_path.exists() else {"study": page.name, "tables": {}}
    out["tables"].update(tables)
    data_path.write_text(json.dumps(out, indent=1) + "\n")
    print(f"{data_path}: {len(tables)} tables; the study is {'met' if met else 'not met'}")


def main(page: Path = PAGE) -> None:
    write(page, STUDY, study_tables)


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else PAGE)
