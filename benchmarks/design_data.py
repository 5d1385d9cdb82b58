"""The design table's numbers written into a study's ``data.json``, with the per-instance scores.

``benchmarks/design_table.py`` prints the paired verdict of searched rows against every
unsearched row; a results page needs the same numbers as tables rebuilt from JSON
(``benchmarks/results_tables.py``), and a reviewer needs the scores behind them. This reads the
same sources (never evaluates anything) and writes, under the table names ``held-out-NAME``,
``paired-NAME`` and ``verdict-NAME`` of ``--data``::

    python benchmarks/design_data.py --data results/long-context-4k/data.json --name number \\
        --fixed full=SCORES:full --fixed uniform=RUN-s0:uniform ... \\
        --searched evolved=RUN-s0,RUN-s1,RUN-s2 --margin 0.10 --alpha 0.05 --not-worse 512,1024,2048 \\
        --same uniform=RUN-s0:uniform,RUN-s1:uniform,RUN-s2:uniform,SCORES:uniform \\
        --made-by "search at fcabef0, comparisons at 22108cb"

- ``held-out-NAME``: each row's mean [95% bootstrap CI] per budget; searched rows per seed and
  pooled (each prompt's score averaged over the seeds). ``"per_instance"`` holds every row's
  ``{budget: {uid: score}}`` (a searched row's seeds as ``ROW-sK``), ``"sources"`` where each came
  from, so every cell and p-value can be recomputed with ``evolalloc.report.stats``.
- ``paired-NAME``: per budget and seed, the searched row minus each compressed unsearched row:
  ``"+0.120 [+0.040, +0.200], p 0.003"``, a ``*`` where it beats that row (``--margin``, ``--alpha``).
- ``verdict-NAME``: design_table's verdict lines per budget (and ``--not-worse`` ones).

``--same ROW=SRC,SRC,...`` first checks that sources which must agree (the same unsearched row in
each seed's run and in the scores file: the same prompts, the same greedy decoding) hold the same
score for every uid at every budget; a disagreement is an error naming both sources, not smoothed.
Other tables of ``--data`` are kept as they are.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from pathlib import Path

from evolalloc.core.budget_list import parse_budgets
from evolalloc.core.errors import UserError
from evolalloc.report.stats import PairedTest

_spec = importlib.util.spec_from_file_location("design_table", Path(__file__).with_name("design_table.py"))
design_table = importlib.util.module_from_spec(_spec)
sys.modules["design_table"] = design_table  # its dataclasses look their module up while being made
_spec.loader.exec_module(design_table)


def _budget_key(budget: float) -> str:
    return f"{budget:g}"


def check_same(specs: list[str]) -> list[str]:
    """One line per ``--same`` group that agrees; ``UserError`` at the first uid that does not."""
    lines = []
    for spec in specs:
        name, sep, sources = spec.partition("=")
        parts = sources.split(",") if sep else []
        if not name or len(parts) < 2:
            raise UserError(f"expected ROW=SRC,SRC[,...] (two sources at least), got {spec!r}", field="--same")
        loaded = [(part, design_table._method_scores(*design_table._source(part), "--same")) for part in parts]
        first_part, first = loaded[0]
        for part, other in loaded[1:]:
            for task, per_budget in first.items():
                theirs = other.get(task, {})
                for budget, scores in per_budget.items():
                    mine_b, theirs_b = scores, theirs.get(budget)
                    if theirs_b is None or set(theirs_b) != set(mine_b):
                        raise UserError(f"{name}: {part} and {first_part} hold different prompts at c = {budget:g}",
                                        field="--same")
                    differ = sorted(uid for uid in mine_b if mine_b[uid] != theirs_b[uid])
                    if differ:
                        raise UserError(f"{name}: {part} and {first_part} disagree on {len(differ)} prompt(s) at "
                                        f"c = {budget:g} (first: {differ[0]})", field="--same")
        count = len(next(iter(next(iter(first.values())).values())))
        lines.append(f"{name}: {len(parts)} sources agree uid by uid ({count} prompts per budget)")
    return lines


def _interval(i) -> str:
    return f"{i.mean:.3f} [{i.low:.2f}, {i.high:.2f}]"


def _paired(t: PairedTest, star: bool) -> str:
    return f"{t.diff:+.3f} [{t.low:+.3f}, {t.high:+.3f}], p {t.p_value:.3g}" + (" *" if star else "")


def tables_for(name: str, rows: list, *, margin: float, alpha: float, not_worse: list[float] | None,
               sources: dict[str, str], made_by: str | None) -> dict[str, dict]:
    """The three tables of one task's rows (``design_table.Row``) as ``data.json`` entries."""
    budgets = sorted({b for r in rows for s in r.seeds.values() for b in s})
    columns = [f"c = {_budget_key(b)}" for b in budgets]
    fixed = [r for r in rows if not r.searched]
    compressed = [r.name for r in fixed if r.name != design_table.FULL]
    labels = [r.name for r in fixed] + [f"{r.name} {key}" for r in rows if r.searched
                                         for key in [*r.seeds, "pooled"]]
    means, paired, verdicts = {}, [], []
    for budget in budgets:
        m, cells = design_table.budget_table(rows, budget)
        means[budget] = m
        for row in (r for r in rows if r.searched):
            for key in [*row.seeds, "pooled"]:
                mine = {c.versus: c for c in cells if c.searched == row.name and c.seed == key}
                if mine:
                    paired.append([_budget_key(budget), f"{row.name} {key}"]
                                  + [_paired(mine[o].test, mine[o].beats(margin, alpha)) if o in mine else "-"
                                     for o in compressed])
        verdicts.append([_budget_key(budget), design_table.verdict(m, cells, rows, margin=margin, alpha=alpha)])
        if not_worse and budget in not_worse:
            verdicts.append([_budget_key(budget) + " (not worse)",
                             design_table.not_worse_verdict(cells, rows, alpha=alpha)])
    per_instance = {}
    for row in rows:
        for key, per_budget in row.seeds.items():
            label = row.name if not row.searched else f"{row.name}-{key}"
            per_instance[label] = {_budget_key(b): dict(sorted(s.items())) for b, s in sorted(per_budget.items())}
    test = ("paired difference [95% bootstrap CI], two-sided Wilcoxon signed-rank p "
            "(`evolalloc.report.stats.paired_test`, bootstrap seed 0)")
    held_out = {
        "columns": ["row", *columns],
        "rows": [[label] + [_interval(means[b][label]) if label in means[b] else "-" for b in budgets]
                 for label in labels],
        "data_kept": True,
        "note": ("Mean [95% bootstrap CI] over the held-out prompts; searched rows per seed and pooled. "
                 "Per-instance scores in `per_instance` of this table (data.json); made by "
                 "`benchmarks/design_data.py`" + (f"; {made_by}" if made_by else "") + "."),
        "per_instance": per_instance,
        "sources": sources,
    }
    paired_table = {
        "columns": ["c", "searched", *compressed],
        "rows": paired,
        "data_kept": True,
        "note": (f"Searched minus unsearched row: {test}; `*`: at least {margin * 100:g} points with p < {alpha:g}. "
                 f"Recomputable from `per_instance` of table held-out-{name} (lists aligned by uid, "
                 f"`evolalloc.report.stats.align`)."),
    }
    verdict_table = {"columns": ["c", "verdict"], "rows": verdicts, "data_kept": True,
                     "note": "`benchmarks/design_table.py`'s verdict lines, from the same rows."}
    return {f"held-out-{name}": held_out, f"paired-{name}": paired_table, f"verdict-{name}": verdict_table}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, required=True, help="the study's data.json (other tables kept)")
    parser.add_argument("--name", required=True, help="table suffix: held-out-NAME, paired-NAME, verdict-NAME")
    parser.add_argument("--scores", type=Path, action="append", default=[], help="a comparison file of rows")
    parser.add_argument("--fixed", action="append", default=[], metavar="NAME=SRC", help="an unsearched row")
    parser.add_argument("--searched", action="append", default=[], metavar="NAME=SRC,SRC,...",
                        help="a searched row, one SRC per seed")
    parser.add_argument("--same", action="append", default=[], metavar="ROW=SRC,SRC,...",
                        help="sources that must agree uid by uid (checked first)")
    parser.add_argument("--margin", type=float, default=0.03)
    parser.add_argument("--alpha", type=float, default=0.05)
    parser.add_argument("--not-worse", default=None, metavar="C,C")
    parser.add_argument("--made-by", default=None, help="free text for the sources: the commits that made them")
    args = parser.parse_args(argv)
    try:
        for line in check_same(args.same):
            print(line)
        tables: dict[str, list] = {}
        for path in args.scores:
            for task, rows in design_table.rows_from_scores(path).items():
                tables.setdefault(task, []).extend(rows)
        for task, rows in design_table.rows_from_specs(args.fixed, args.searched).items():
            tables.setdefault(task, []).extend(rows)
        if len(tables) != 1:
            raise UserError(f"the sources hold {len(tables)} tasks ({', '.join(tables)}); one table set is one task",
                            field="--fixed/--searched")
        sources = {spec.partition("=")[0]: spec.partition("=")[2] for spec in args.fixed + args.searched}
        sources.update({str(p): "every method" for p in args.scores})
        not_worse = parse_budgets(args.not_worse, "--not-worse") if args.not_worse else None
        (rows,) = tables.values()
        made = tables_for(args.name, rows, margin=args.margin, alpha=args.alpha, not_worse=not_worse,
                          sources=sources, made_by=args.made_by)
        try:
            data = json.loads(args.data.read_text())
        except (OSError, json.JSONDecodeError) as err:
            raise UserError(f"cannot read it: {err}", source=str(args.data)) from None
        data.setdefault("tables", {}).update(made)
        args.data.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n")
    except UserError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    for key, table in made.items():
        print(f"wrote {key}: {len(table['rows'])} rows")
    return 0


if __name__ == "__main__":
    sys.exit(main())
