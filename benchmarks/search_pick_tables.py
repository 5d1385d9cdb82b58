"""results/search-budget-pick: its data.json tables, from every setting's per-instance scores.

    python benchmarks/search_pick_tables.py            # writes results/search-budget-pick/data.json
    python benchmarks/results_tables.py                 # then renders its tables into the page

Reads ``scores/<setting>.json`` (``benchmarks/compare_once.py``: nine best-start searches, seeds 3-11, and
every unsearched row on the same held-out prompts). Each pick of three seeds ships the run with the
highest search-split fitness, chosen by the product's own rule (``evolalloc.pipeline.seeds.highest_fitness``:
ties to the first seed); the held-out scores take no part. Each picked run gets search-budget's
pre-registered test (``search_budget_tables.test_run``); a setting is met when all three picks pass. The
unpicked runs are tested too, in a table no verdict reads (did the pick choose the better run?).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from search_budget_tables import fmt_p, setting_tables, test_run  # noqa: E402 - a sibling script, not a package

from evolalloc.pipeline.seeds import highest_fitness  # noqa: E402

PAGE = Path(__file__).resolve().parents[1] / "results" / "search-budget-pick"
PICKS = {"P1": (3, 4, 5), "P2": (6, 7, 8), "P3": (9, 10, 11)}
VARIANT = "best"
SETTINGS = {"sbp_number4k": "B", "sbp_number8k": "D"}


def run_name(setting: str, seed: int) -> str:
    return f"{setting}-{VARIANT}-s{seed}"


def search_fitness(setting: str, data: dict, seeds) -> dict[str, float | None]:
    """``{run: its search-split fitness}`` for ``seeds`` (``None``: the run shipped no profile)."""
    return {run_name(setting, s): data["runs"].get(run_name(setting, s), {}).get("search_fitness") for s in seeds}


def picks(setting: str, data: dict) -> dict[str, str | None]:
    """``{pick: the run it ships}`` (``None``: no run of the pick shipped a profile), by search-split fitness."""
    return {pick: highest_fitness(search_fitness(setting, data, seeds)) for pick, seeds in PICKS.items()}


def shipped(setting: str, data: dict) -> list[tuple[list[str], str | None]]:
    """Per pick: its row of the ``picks`` table (pick, its runs' search-split fitness, the run shipped) and the
    run it ships (``None``: no run of the pick shipped a profile)."""
    out = []
    for pick, seeds in PICKS.items():
        fitness = search_fitness(setting, data, seeds)
        cells = ", ".join(f"s{s} {'–' if f is None else f'{f:.4f}'}" for s, f in zip(seeds, fitness.values()))
        run = highest_fitness(fitness)
        out.append(([pick, cells, run.removeprefix(f"{setting}-") if run else "none (every run failed)"], run))
    return out


def pick_tables(setting: str, data: dict) -> tuple[dict, bool]:
    """The setting's tables (its picks, each pick's test, every run's test, means, searches) and its verdict."""
    every, _ = setting_tables(setting, data)
    pick_rows, test_rows, met = [], [], True
    for row, run in shipped(setting, data):
        pick_rows.append(row)
        pick = row[0]
        if run is None:
            met = False
            test_rows.append([pick, "–", "–", "–", "–", "–", "–", "not met"])
            continue
        t = test_run(data, run)
        met = met and t["met"]
        test_rows.append([pick, run.removeprefix(f"{setting}-"), t["strongest"], f"{t['diff']:+.3f}",
                          fmt_p(t["p"]), "yes" if t["beats"] else "no",
                          "; ".join(t["worse"]) or "none", "**met**" if t["met"] else "not met"])
    tables = {
        f"{setting}-picks": {"columns": ["pick", "search-split fitness of its runs", "shipped"], "rows": pick_rows,
                             "data_kept": True},
        f"{setting}-test": {"columns": ["pick", "shipped run", "strongest same-scorer row at c", "run − row", "p",
                                        "(1) >= +0.10, p < 0.05", "(2) significantly worse than", "verdict"],
                            "rows": test_rows, "data_kept": True},
        f"{setting}-every-run": {**every[f"{setting}-test"],
                                 "note": "Every searched run, picked or not (exploratory: no verdict reads it)."},
        f"{setting}-means": every[f"{setting}-means"],
        f"{setting}-search": every[f"{setting}-search"],
    }
    return tables, met


def main(page: Path = PAGE) -> None:
    tables, verdicts = {}, {}
    for path in sorted((page / "scores").glob("*.json")):
        made, verdicts[path.stem] = pick_tables(path.stem, json.loads(path.read_text()))
        tables.update(made)
    rows = [[f"{label}: {name}", ("**met**" if verdicts[name] else "not met") if name in verdicts else "not run"]
            for name, label in SETTINGS.items()]
    tables["verdicts"] = {"columns": ["setting", "every pick met"], "rows": rows, "data_kept": True,
                          "note": f"Settings met under the pick: {sum(verdicts.values())} of {len(SETTINGS)}."}
    path = page / "data.json"
    out = json.loads(path.read_text()) if path.exists() else {"study": page.name, "tables": {}}
    out["tables"].update(tables)
    path.write_text(json.dumps(out, indent=1) + "\n")
    print(f"{path}: {len(tables)} tables from {len(verdicts)} settings")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else PAGE)
