"""A results page's grid tables from the ``evolalloc bench headroom --json`` files beside it.

    python benchmarks/grid_tables.py results/gemma3      # writes results/gemma3/data.json's grid tables
    python benchmarks/results_tables.py                  # then renders them into the page

Each ``headroom-*.json`` becomes a table of its own (``headroom-<name>``: each scorer's score at every
budget next to the full cache's), and every ``grid-<task>-<tokens>.json`` one row of the table ``grid``
(task, prompt length, prompts drawn, the full cache's score, each scorer at each budget). Tables other
pages built by hand in the same ``data.json`` are kept.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

GRID = re.compile(r"^grid-(?P<task>[\w-]+?)-(?P<tokens>\d+)\.json$")


def fmt(value) -> str:
    return "–" if value is None else f"{value:.3f}"


def headroom_table(data: dict, source: str) -> dict:
    budgets = data["budgets"]
    rows = [[name, *(fmt(row.get(str(c))) for c in budgets), fmt(data["full"])] for name, row in data["scores"].items()]
    return {"columns": ["scorer (uniform budgets)", *[f"c = {c}" for c in budgets], "full cache"], "rows": rows,
            "data_kept": True, "note": f"{data['task']}, {data['context_tokens']} tokens, search split "
                                       f"(n = {data['n']}), from {source}."}


def grid_table(files: list[tuple[str, int, dict, str]]) -> dict:
    budgets = sorted({int(c) for _, _, data, _ in files for c in data["budgets"]})
    scorers = sorted({name for _, _, data, _ in files for name in data["scores"]})
    rows = []
    for task, tokens, data, _ in sorted(files, key=lambda f: (f[0], f[1])):
        cells = [fmt(data["scores"].get(s, {}).get(str(c))) for s in scorers for c in budgets]
        rows.append([task, str(tokens), str(data["n"]), fmt(data["full"]), *cells])
    return {"columns": ["task", "tokens", "prompts", "full cache",
                        *[f"uniform {s} c = {c}" for s in scorers for c in budgets]],
            "rows": rows, "data_kept": True,
            "note": "Search split, drawn uncurated: the full cache's column is its accuracy on what was drawn. "
                    "From " + ", ".join(source for *_, source in sorted(files, key=lambda f: (f[0], f[1]))) + "."}


def main(folder: Path) -> None:
    path = folder / "data.json"
    out = json.loads(path.read_text()) if path.exists() else {"study": folder.name, "tables": {}}
    grids = []
    for source in sorted(folder.glob("*.json")):
        if source.name == "data.json":
            continue
        data = json.loads(source.read_text())
        match = GRID.match(source.name)
        if match:
            grids.append((match["task"], int(match["tokens"]), data, source.name))
        elif source.name.startswith("headroom-"):
            out["tables"][source.stem] = headroom_table(data, source.name)
    if grids:
        out["tables"]["grid"] = grid_table(grids)
    path.write_text(json.dumps(out, indent=1) + "\n")
    print(f"{path}: {len(out['tables'])} tables")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
