"""results/search-budget: its data.json tables, computed from every setting's per-instance scores.

    python benchmarks/search_budget_tables.py          # writes results/search-budget/data.json
    python benchmarks/results_tables.py                 # then renders its tables into the page

Reads ``results/search-budget/scores/<setting>.json`` (``benchmarks/compare_once.py``: every row's
per-instance held-out scores, how each search went) and applies the page's pre-registered test to each
searched run: (1) at ``c`` it beats the same-scorer row with the highest held-out mean there by >= 0.10,
paired p < 0.05; (2) at no budget does a same-scorer row beat it with p < 0.05. A setting is met for a
start when every seed passes both. The paired tests are ``evolalloc.report.stats.paired_test`` (Wilcoxon
signed-rank, the paired bootstrap's p when every difference is zero), as on every page here.
"""

from __future__ import annotations

import json
from pathlib import Path

from evolalloc.report.stats import align, bootstrap_mean, paired_test

PAGE = Path(__file__).resolve().parents[1] / "results" / "search-budget"
SAME_SCORER = ("uniform", "pyramid", "uniform+adakv", "pyramid+adakv", "cake", "lukv")
OTHER_ROWS = ("streaming", "full")
MARGIN, ALPHA = 0.10, 0.05
STARTS = ("uniform", "best")
# The page's six settings (its "settings" table): one not scored yet is a row "not run", and counts as not met.
SETTINGS = {"sb_main2048": "A", "sb_number4k": "B", "sb_multikey4k": "C", "sb_number8k": "D", "sb_gemma2048": "E",
            "sb_gemma_long": "F"}


def searched_runs(data: dict) -> list[str]:
    return [name for name in data["scores"] if name in data["runs"]]


def fmt_p(p: float) -> str:
    return "<0.001" if p < 0.001 else f"{p:.3f}"


def test_run(data: dict, run: str) -> dict:
    """The pre-registered test of one searched run against every same-scorer row."""
    scores, budgets = data["scores"], [str(float(b)) for b in data["budgets"]]
    c = budgets[0]
    rows = [r for r in SAME_SCORER if r in scores]
    strongest = max(rows, key=lambda r: sum(scores[r][c].values()) / len(scores[r][c]))
    ours, theirs = align(scores[run][c], scores[strongest][c], (run, strongest))
    beat = paired_test(ours, theirs)
    worse = []
    for budget in budgets:
        for row in rows:
            a, b = align(scores[run][budget], scores[row][budget], (run, row))
            t = paired_test(a, b)
            if t.diff < 0 and t.significant(ALPHA):
                worse.append(f"{row} at {float(budget):g} ({t.diff:+.3f}, p {fmt_p(t.p_value)})")
    first = beat.diff >= MARGIN and beat.significant(ALPHA)
    return {"strongest": strongest, "diff": beat.diff, "p": beat.p_value, "beats": first, "worse": worse,
            "met": first and not worse}


def setting_tables(name: str, data: dict) -> dict:
    scores, budgets = data["scores"], data["budgets"]
    runs = searched_runs(data)
    means_rows = []
    for row in runs + [r for r in SAME_SCORER + OTHER_ROWS if r in scores]:
        cells = []
        for budget in budgets:
            per = scores[row][str(float(budget))]
            interval = bootstrap_mean(list(per.values()))
            cells.append(f"{interval.mean:.3f} [{interval.low:.2f}, {interval.high:.2f}]")
        means_rows.append([row.removeprefix(f"{name}-"), *cells])
    tests = {run: test_run(data, run) for run in runs}
    test_rows = [[run.removeprefix(f"{name}-"), f"{t['strongest']}", f"{t['diff']:+.3f}", fmt_p(t["p"]),
                  "yes" if t["beats"] else "no", "; ".join(t["worse"]) or "none", "**met**" if t["met"] else "not met"]
                 for run, t in tests.items()]
    search_rows = []
    for run in runs:
        info = data["runs"][run]
        groups = "/".join(str(g["generations"]) for g in info["groups"])
        reasons = ", ".join(sorted({g["reason"].split(":")[0] for g in info["groups"]}))
        start = ", ".join(f"{k} {v:.4f}" for k, v in info["start_scores"].items()) or "uniform, not evaluated"
        expanded = "; ".join(f"{float(b):g}: {e['start_method'] or e['expansion_rule']}"
                             for b, e in info["expansions"].items())
        search_rows.append([run.removeprefix(f"{name}-"), str(info["evaluations"]), groups, reasons, start,
                            info["shipped_start"] or "no (a searched candidate beat it)", expanded,
                            f"{info['search_seconds'] / 60:.1f}"])
    instances = data["meta"]["instances"]
    def variant(run: str) -> str:  # <setting>-<variant>-s<seed>
        return run.removeprefix(f"{name}-").rsplit("-s", 1)[0]

    verdict = {start: bool(tests) and all(t["met"] for run, t in tests.items() if variant(run) == start)
               for start in STARTS}
    return {
        f"{name}-means": {"columns": ["row", *[f"c = {b:g}" for b in budgets]], "rows": means_rows,
                          "data_kept": True, "note": f"Held-out mean [95% bootstrap CI], {instances} prompts, "
                                                     f"from scores/{name}.json."},
        f"{name}-test": {"columns": ["searched run", "strongest same-scorer row at c", "run − row", "p",
                                     "(1) >= +0.10, p < 0.05", "(2) significantly worse than", "verdict"],
                         "rows": test_rows, "data_kept": True},
        f"{name}-search": {"columns": ["searched run", "evaluations", "generations per group", "why groups stopped",
                                       "start (search-split fitness)", "shipped the start itself",
                                       "expansions shipped", "search (min)"],
                           "rows": search_rows, "data_kept": True},
    }, verdict


def main(page: Path = PAGE) -> None:
    tables, verdicts = {}, {}
    for path in sorted((page / "scores").glob("*.json")):
        data = json.loads(path.read_text())
        made, verdicts[path.stem] = setting_tables(path.stem, data)
        tables.update(made)
    rows = [[f"{SETTINGS.get(name, '?')}: {name}", *("**met**" if v[s] else "not met" for s in STARTS)]
            for name, v in verdicts.items()]
    rows += [[f"{label}: {name}", "not run (counts as not met)", "not run (counts as not met)"]
             for name, label in SETTINGS.items() if name not in verdicts]
    met = {s: sum(v[s] for v in verdicts.values()) for s in STARTS}
    tables["verdicts"] = {
        "columns": ["setting", "start uniform: every seed met", "start best: every seed met"],
        "rows": sorted(rows), "data_kept": True,
        "note": f"Settings met: uniform start {met['uniform']} of 6, best start {met['best']} of 6 "
                f"(the goal: the best start meets 4 of 6)."}
    path = page / "data.json"
    out = json.loads(path.read_text()) if path.exists() else {"study": page.name, "tables": {}}
    out["tables"].update(tables)  # the design's tables typed on the page (settings, defaults) are kept
    path.write_text(json.dumps(out, indent=1) + "\n")
    print(f"{page / 'data.json'}: {len(tables)} tables from {len(verdicts)} settings")


if __name__ == "__main__":
    import sys

    main(Path(sys.argv[1]) if len(sys.argv) > 1 else PAGE)
