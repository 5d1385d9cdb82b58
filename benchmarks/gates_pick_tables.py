"""results/search-budget-gates-pick: the picks, their test and the tables, from the comparing call's scores.

    python benchmarks/gates_pick_tables.py             # writes results/search-budget-gates-pick/data.json
    python benchmarks/results_tables.py                 # then renders its tables into the page

Reads ``scores/sgp_multikey2048_gates.json`` (nine gates searches, optimizer seeds 3-11, and every unsearched
row on the same held-out prompts). Each pick of three seeds ships the run with the highest search-split
fitness (``search_pick_tables.shipped``, by the product's rule ``evolalloc.pipeline.seeds.highest_fitness``;
held-out scores take no part), and gets search-budget-gates-multikey's test (``gates_search_tables.test_run``:
above uniform gates and above the gates' global top-k at c, paired p < 0.05 each). The study is met when all
three picks pass.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from gates_search_tables import AGAINST, study_tables, test_run, write  # noqa: E402 - sibling scripts, not a package
from search_budget_tables import fmt_p  # noqa: E402
from search_pick_tables import shipped  # noqa: E402 - picks P1 = seeds 3-5, P2 = 6-8, P3 = 9-11

PAGE = Path(__file__).resolve().parents[1] / "results" / "search-budget-gates-pick"
STUDY = "sgp_multikey2048_gates"  # the RUNBOOK's --prefix: runs are <STUDY>-best-s<seed>


def pick_tables(name: str, data: dict) -> tuple[dict, bool]:
    """The study's tables (its picks, each pick's test, every run's test, means, searches) and its verdict."""
    every, _ = study_tables(name, data)
    c = data["budgets"][0]
    pick_rows, test_rows, met = [], [], True
    for row, run in shipped(name, data):
        pick_rows.append(row)
        pick = row[0]
        if run is None:
            met = False
            test_rows.append([pick, "–", "–", "–", "–", "–", "not met"])
            continue
        t = test_run(data, run)
        met = met and t["met"]
        against = t["against"]
        test_rows.append([pick, run.removeprefix(f"{name}-"),
                          *(f"{against[r]['diff']:+.3f} (p {fmt_p(against[r]['p'])})" for r in AGAINST),
                          *("yes" if against[r]["beats"] else "no" for r in AGAINST),
                          "**met**" if t["met"] else "not met"])
    tables = {
        "picks": {"columns": ["pick", "search-split fitness of its runs", "shipped"], "rows": pick_rows,
                  "data_kept": True},
        "test": {"columns": ["pick", "shipped run", f"− uniform gates at c = {c:g}", f"− global gates at c = {c:g}",
                             "(1) beats uniform gates", "(2) beats global gates", "verdict"],
                 "rows": test_rows, "data_kept": True,
                 "note": f"Paired difference (shipped − row) and two-sided Wilcoxon p. Study: "
                         f"{'**met**' if met else 'not met'} (every pick must pass both)."},
        "every-run": {**every["test"], "note": "Every searched run, picked or not (exploratory: no verdict reads it)."},
        "means": every["means"],
        "search": every["search"],
    }
    return tables, met


def main(page: Path = PAGE) -> None:
    write(page, STUDY, pick_tables)


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else PAGE)
