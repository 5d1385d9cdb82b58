"""results/decode-repeat-pick: the picks, their test and the tables, from the comparing call's scores.

    python benchmarks/decode_pick_tables.py            # writes results/decode-repeat-pick/data.json
    python benchmarks/results_tables.py                 # then renders its tables into the page

Reads ``scores/repeat_pick.json`` (``search_versus.py --compare-once ... --compare-modes agreement,fidelity``:
nine decode-time searches, optimizer seeds 3-11, and every unsearched row on the same held-out prompts). Each
pick of three seeds ships the run with the highest search-split fitness (``search_pick_tables.shipped``, by
the product's rule ``evolalloc.pipeline.seeds.highest_fitness``; held-out scores take no part) and gets
decode-repeat's pre-registered test (``decode_time_tables.test_run``: likelihood kept >= 0.95, and greedy
agreement with the full cache's continuation >= 0.10 above uniform SnapKV, paired p < 0.05). Issue 52's goal
is met when all three picks pass. The unpicked runs get the same test in a table no verdict reads.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from decode_time_tables import load, merge_tables, study_tables, test_run  # noqa: E402 - sibling scripts, not a package
from search_pick_tables import shipped  # noqa: E402 - picks P1 = seeds 3-5, P2 = 6-8, P3 = 9-11

PAGE = Path(__file__).resolve().parents[1] / "results" / "decode-repeat-pick"
STUDY = "repeat_pick"  # the scores file: scores/<STUDY>.json
PREFIX = "rpk"  # the RUNBOOK's --prefix: runs are rpk-best-s<seed>


def pick_tables(data: dict, source: str) -> tuple[dict, bool]:
    """The study's tables (its picks, each pick's test, every run's test, the means) and its verdict."""
    every, _ = study_tables(data, source, STUDY)
    pick_rows, test_rows, met = [], [], True
    for row, run in shipped(PREFIX, data):
        pick_rows.append(row)
        if run is None:  # every search of the pick failed: nothing to ship, the pick fails
            met = False
            test_rows.append([row[0], "–", "–", "–", "–", "–", "–", "not met"])
            continue
        t = test_run(data, run, source)
        met = met and t["met"]
        test_rows.append([row[0], run.removeprefix(f"{PREFIX}-"), *t["cells"]])
    c = float(data["budgets"][0])
    tables = {
        "picks": {"columns": ["pick", "search-split fitness of its runs", "shipped"], "rows": pick_rows,
                  "data_kept": True},
        "test": {"columns": ["pick", "shipped run", f"likelihood kept at c = {c:g}", "(1) >= 0.95",
                             "agreement − uniform SnapKV", "p", "(2) >= +0.10, p < 0.05", "verdict"],
                 "rows": test_rows, "data_kept": True,
                 "note": f"Paired difference (shipped − uniform SnapKV) and two-sided Wilcoxon p. Issue 52's goal: "
                         f"{'**met**' if met else 'not met'} (every pick must pass both)."},
        "every-run": {**every["dt-test"], "note": every["dt-test"]["note"].split(" The goal")[0]
                      + " Every searched run, picked or not (exploratory: no verdict reads it)."},
        "means": every["dt-means"],
    }
    return tables, met


def main(argv: list[str]) -> int:
    page = Path(argv[0]) if argv else PAGE
    path = page / "scores" / f"{STUDY}.json"
    if not path.exists():
        print(f"{path}: no such file (the comparing call's --compare-once output)", file=sys.stderr)
        return 2
    try:
        tables, met = pick_tables(load(path), str(path))
    except ValueError as error:  # one line naming the file and the field, exit 2 (bad input)
        print(error, file=sys.stderr)
        return 2
    print(f"{merge_tables(page, tables)}: {', '.join(tables)}; issue 52's goal {'met' if met else 'not met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
