"""Which finished searches a later "no gain" rule would have changed, before anyone runs it.

    python benchmarks/stop_rule_whatif.py results/search-budget [--wait 8] [--tolerance 0.001]

The converging search stops a group once ``F_best`` rose by at most the tolerance over ``patience``
generations (``search/stopping.py``). The rule checked here: a group that has not yet gained above the
tolerance since it started is given up to ``--wait`` generations before it stops on "no gain" (patience
counts only after its first gain). Every group that gained above the tolerance stops exactly where it
did; a search changes only from the first group that stopped on "no gain" with a gain at most the
tolerance in fewer than ``--wait`` generations. So each page's per-group summaries (``runs.*.groups`` of
its ``scores/*.json``) say which runs it would change, and the page's test tables (``data.json``) what
those runs' held-out verdicts were: a run the rule leaves alone keeps its verdict.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from evolalloc.core.errors import UserError

sys.path.insert(0, str(Path(__file__).parent))
from json_input import read_json_object  # noqa: E402 - a sibling script, not a package

NO_GAIN = "no gain"
SCORES_ORIGIN = "benchmarks/search_versus.py"


def first_changed_group(groups: list[dict], wait: int, tolerance: float) -> dict | None:
    """The first group the rule would have run longer (``None``: the search replays unchanged).

    A group's ``gain`` is ``None`` when it started from nothing evaluated (a uniform start's first group):
    its first generation is a gain from minus infinity, so the rule never holds it longer."""
    for group in groups:
        gain = group.get("gain")
        if (group["reason"] == NO_GAIN and gain is not None and gain <= tolerance
                and group["generations"] < wait):
            return group
    return None


def verdicts(page: Path) -> dict[tuple[str, str], list[str]]:
    """``(setting, run) -> the row of its test table`` from the page's ``data.json`` (empty when absent)."""
    data_file = page / "data.json"
    if not data_file.exists():
        return {}
    tables = read_json_object(data_file, "tables", SCORES_ORIGIN)["tables"]
    out = {}
    for name, table in tables.items():
        if name.endswith("-test"):
            for row in table["rows"]:
                out[(name[:-len("-test")], row[0])] = row
    return out


def whatif(page: Path, wait: int, tolerance: float) -> list[dict]:
    """One row per searched run of the page: the group the rule would change first, and its verdict."""
    files = sorted((page / "scores").glob("*.json"))
    if not files:
        raise UserError("no scores/*.json in it", source=str(page))
    tests, rows = verdicts(page), []
    for path in files:
        setting = path.stem
        for name, run in read_json_object(path, "runs", SCORES_ORIGIN)["runs"].items():
            short = name[len(setting) + 1:] if name.startswith(setting + "-") else name
            changed = first_changed_group(run.get("groups", []), wait, tolerance)
            test = tests.get((setting, short))
            rows.append({"setting": setting, "run": short,
                         "changed_group": None if changed is None else changed["group"] + 1,
                         "generations": None if changed is None else changed["generations"],
                         "gain": None if changed is None else changed["gain"],
                         "verdict": None if test is None else test[-1].strip("*"),
                         "failed": None if test is None else
                         ", ".join(part for part, bad in (("(1)", test[4] != "yes"), ("(2)", test[5] != "none"))
                                   if bad)})
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("page", type=Path, help="a results page with scores/*.json (benchmarks/search_versus.py)")
    parser.add_argument("--wait", type=int, default=8, help="generations a group that never gained may run")
    parser.add_argument("--tolerance", type=float, default=1e-3, help="the least rise of F_best that is a gain")
    args = parser.parse_args(argv)
    try:
        rows = whatif(args.page, args.wait, args.tolerance)
    except UserError as err:  # bad input: one line naming the file, exit 2
        print(f"error: {err}", file=sys.stderr)
        return 2
    for row in rows:
        change = ("unchanged" if row["changed_group"] is None else
                  f"changes from group {row['changed_group']} ({row['generations']} generations, "
                  f"gain {row['gain']:+.4f})")
        verdict = "" if row["verdict"] is None else f"; held-out verdict {row['verdict']}" + (
            f" (failed {row['failed']})" if row["failed"] else "")
        print(f"{row['setting']} {row['run']}: {change}{verdict}")
    changed = [r for r in rows if r["changed_group"] is not None]
    failing = [r for r in rows if r["verdict"] == "not met"]
    print(f"{len(changed)} of {len(rows)} searches would change; "
          f"{sum(r['changed_group'] is not None for r in failing)} of the {len(failing)} that failed their test")
    return 0


if __name__ == "__main__":
    sys.exit(main())
