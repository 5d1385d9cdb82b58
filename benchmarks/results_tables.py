"""Rebuild every table under ``results/`` from the JSON beside it, or check that they agree.

A study's page, ``results/<study>/README.md``, holds each table between marker comments::

    <!-- table: held-out -->            (the table ``held-out`` of data.json in the same folder)
    <!-- table: scores.json#held-out --> (or of another JSON file in that folder)
    ...generated markdown...
    <!-- /table -->

and the JSON holds what the table shows::

    {"data_note": "...", "tables": {"held-out": {"columns": [...], "rows": [[...], ...],
                                                  "data_kept": false, "note": "..."}}}

Cells are strings, as they were typed from the run's printout: most of these runs' per-instance
scores lived in git-ignored ``comparison.json`` files that are gone, and the JSON says so
(``"data_kept": false``), which the table repeats under itself. A table may carry a ``note``
rendered under it too. Other keys may sit beside them — numbers per method, the per-instance
scores a paired test needs (``"per_instance": {method: {budget: {uid: score}}}``) — and are kept,
not rendered. Usage::

    python benchmarks/results_tables.py            # rewrite every table from its JSON
    python benchmarks/results_tables.py --check    # exit 1, naming each table that differs

``--check`` also fails on a markdown table line outside any marker (a table typed by hand),
so every table in ``results/`` has a JSON behind it. Bad JSON or a marker naming a missing
table: a one-line error naming the file, exit 2.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OPEN = re.compile(r"^<!-- table: (?P<ref>[\w.#-]+) -->$")
CLOSE = "<!-- /table -->"
NOT_KEPT = ("**Data not kept**: typed from the run's printout; the per-instance scores behind it "
            "(a git-ignored `comparison.json`) are gone.")


class TableError(Exception):
    """A results page or its JSON that cannot be read as the format above (file and reason)."""


def render(table: dict, where: str) -> list[str]:
    """The markdown lines of one table: header, rule, rows, then its data and free notes."""
    columns, rows = table.get("columns"), table.get("rows")
    if not isinstance(columns, list) or not isinstance(rows, list):
        raise TableError(f"{where}: a table needs 'columns' and 'rows' lists")
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for i, row in enumerate(rows):
        if not isinstance(row, list) or len(row) != len(columns) or not all(isinstance(c, str) for c in row):
            raise TableError(f"{where}: row {i} must be {len(columns)} strings, like 'columns'")
        lines.append("| " + " | ".join(row) + " |")
    notes = [] if table.get("data_kept", False) else [NOT_KEPT]
    if table.get("note"):
        notes.append(table["note"])
    for note in notes:
        lines += ["", note]
    return lines


def load_table(folder: Path, ref: str, cache: dict) -> dict:
    """The table ``ref`` ('name' of data.json, or 'file.json#name') of a page in ``folder``."""
    file_name, _, name = ref.rpartition("#") if "#" in ref else ("data.json", "", ref)
    path = folder / file_name
    if path not in cache:
        try:
            cache[path] = json.loads(path.read_text())
        except (OSError, ValueError) as error:
            raise TableError(f"{path}: cannot read ({error})") from None
    tables = cache[path].get("tables", {})
    if name not in tables:
        raise TableError(f"{path}: no table '{name}' (has: {', '.join(sorted(tables)) or 'none'})")
    return tables[name]


def rebuild(page: Path, cache: dict) -> tuple[str, list[str]]:
    """The page's text with every marked table rendered from its JSON, and the problems found:
    tables whose markdown differed from the JSON, and table lines outside any marker."""
    out, problems, lines = [], [], page.read_text().split("\n")
    i = 0
    while i < len(lines):
        match = OPEN.match(lines[i])
        if not match:
            if lines[i].startswith("|"):
                problems.append(f"{page}:{i + 1}: a table line outside <!-- table: ... --> markers")
            out.append(lines[i])
            i += 1
            continue
        end = next((j for j in range(i + 1, len(lines)) if lines[j] == CLOSE), None)
        if end is None:
            raise TableError(f"{page}:{i + 1}: '{lines[i]}' has no {CLOSE}")
        ref = match["ref"]
        wanted = render(load_table(page.parent, ref, cache), f"{page.parent}/{ref}")
        if lines[i + 1:end] != wanted:
            problems.append(f"{page}:{i + 1}: table '{ref}' differs from its JSON")
        out += [lines[i], *wanted, CLOSE]
        i = end + 1
    return "\n".join(out), problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if a table differs")
    parser.add_argument("--results", type=Path, default=ROOT / "results", help="the folder of study pages")
    args = parser.parse_args(argv)
    pages = sorted(args.results.rglob("*.md"))
    if not pages:
        print(f"error: no markdown pages under {args.results}", file=sys.stderr)
        return 2
    cache: dict = {}
    all_problems, tables = [], 0
    try:
        for page in pages:
            text, problems = rebuild(page, cache)
            tables += text.count(CLOSE)
            all_problems += problems
            if not args.check and text != page.read_text():
                page.write_text(text)
    except TableError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if args.check:
        for problem in all_problems:
            print(problem)
        print(f"{tables} tables in {len(pages)} pages: {len(all_problems)} problems")
        return 1 if all_problems else 0
    hand_typed = [p for p in all_problems if "outside" in p]
    for problem in hand_typed:
        print(problem)
    print(f"{tables} tables in {len(pages)} pages rebuilt from their JSON")
    return 1 if hand_typed else 0


if __name__ == "__main__":
    sys.exit(main())
