"""A run's held-out table (its ``comparison.json``) as a table of a results page's ``data.json``.

    python benchmarks/run_table.py results/gemma3/run/comparison.json results/gemma3/data.json held-out
    python benchmarks/results_tables.py          # then renders it into the page

One row per budget: the searched profile's mean [95 % CI], then each other method's mean [CI] with the
searched profile's difference and the paired test's p (the run's own figures, as its report prints them).
The run's per-instance scores stay in the ``comparison.json`` copied beside the page. Other tables of
``data.json`` are kept.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

NAMES = {"evolved": "evolved", "uniform": "uniform SnapKV", "pyramid": "PyramidKV", "lukv": "LU-KV",
         "full": "full cache"}


def fmt_p(p: float) -> str:
    return "p < 0.001" if p < 0.001 else f"p {p:.3f}" if p < 0.05 else f"p {p:.2f}"


def cell(row: dict) -> str:
    score = row["score"]
    text = f"{score['mean']:.3f} [{score['low']:.2f}, {score['high']:.2f}]"
    versus = row.get("versus")
    if versus is None:
        return f"**{text}**"
    return f"{text}; {versus['diff']:+.3f}, {fmt_p(versus['p_value'])}"


def held_out_table(comparison: dict, source: str) -> dict:
    rows = [r for r in comparison["rows"] if r.get("task") is None]
    methods = list(dict.fromkeys(r["method"] for r in rows))
    budgets = sorted({r["budget"] for r in rows})
    by = {(r["method"], r["budget"]): r for r in rows}
    table_rows = [[f"{b:g}", *(cell(by[m, b]) if (m, b) in by else "–" for m in methods)] for b in budgets]
    n = rows[0]["score"]["n"]
    return {"columns": ["c", *(NAMES.get(m, m) for m in methods)], "rows": table_rows, "data_kept": True,
            "note": f"Held-out, {n} prompts, exact match: mean [95 % bootstrap CI]; evolved − method and the "
                    f"paired Wilcoxon p. From {source} (its per-instance scores)."}


def main(argv: list[str]) -> None:
    if len(argv) != 3:  # a usage line and exit 2, not an IndexError
        print("usage: python benchmarks/run_table.py COMPARISON.json DATA.json TABLE_NAME", file=sys.stderr)
        sys.exit(2)
    comparison_path, data_path, name = Path(argv[0]), Path(argv[1]), argv[2]
    table = held_out_table(json.loads(comparison_path.read_text()),
                           os.path.relpath(comparison_path, data_path.parent))
    data = json.loads(data_path.read_text()) if data_path.exists() else {"tables": {}}
    data.setdefault("tables", {})[name] = table
    data_path.write_text(json.dumps(data, indent=1) + "\n")
    print(f"{data_path}: table '{name}' from {comparison_path}")


if __name__ == "__main__":
    main(sys.argv[1:])
