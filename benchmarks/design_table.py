"""The design table of issue 21: searched rows vs every unsearched row, paired on held-out prompts.

Reads finished comparisons (a run folder's ``comparison.json`` or the file
``benchmarks/design_scores.py`` writes), never evaluates anything::

    python benchmarks/design_table.py --scores RUNS/word-scores.json
    python benchmarks/design_table.py --fixed uniform=RUN_A:uniform --fixed gates=RUN_B:gates \\
        --searched hybrid=RUN_B-s0,RUN_B-s1,RUN_B-s2

``--scores FILE``: every method of FILE is a row; methods named ``NAME-sK`` are seed K of the
searched row NAME, the others unsearched rows. ``--fixed NAME=SRC`` / ``--searched NAME=SRC,SRC,..``
name rows explicitly; SRC is ``PATH[:METHOD]`` (PATH a run folder or comparison file, METHOD
default ``evolved``).

Per task and budget it prints each row's mean [95% bootstrap CI] (searched rows per seed and
pooled: each instance's score averaged over the seeds), then every searched row (each seed and
pooled) minus every unsearched row: paired difference [95% CI] and p (Wilcoxon, else bootstrap),
and a verdict line. A searched row *beats* an unsearched one when the paired difference is at
least ``--margin`` (0.03: issue 21's 3 points) with p < ``--alpha`` (0.05); it meets the goal at
a budget when every seed beats every compressed unsearched row (the full cache is a ceiling, not
a competitor, and is left out of the verdict). ``--not-worse 48,64`` adds, at those budgets (a
profile's expansions), the goal's other half: a searched row is *significantly worse* than an
unsearched one when the paired difference is negative with one-sided p < ``--alpha`` (the
two-sided p halved), and the expansions hold when no seed is significantly worse than any of them.
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from evolalloc.config.run_folder import COMPARISON_FILE
from evolalloc.core.budget_list import parse_budgets
from evolalloc.core.errors import UserError
from evolalloc.report.comparison import load_instance_scores
from evolalloc.report.stats import Interval, PairedTest, align, bootstrap_mean, paired_test

FULL = "full"
SEED = re.compile(r"^(?P<name>.+)-s(?P<seed>\d+)$")
PER_SEED = re.compile(r" s\d+$")  # a searched row's one-seed key in the means (pooled is the row's own)
Scores = dict[float, dict[str, float]]  # budget -> instance uid -> score


@dataclass
class Row:
    """One table row of one task: ``seeds`` holds one score map per search seed (one entry for an
    unsearched row); ``pooled`` is each instance averaged over the seeds."""

    name: str
    searched: bool
    seeds: dict[str, Scores] = field(default_factory=dict)

    def pooled(self, budget: float) -> dict[str, float] | None:
        maps = [per_budget.get(budget) for per_budget in self.seeds.values()]
        if not maps or any(m is None for m in maps):
            return None
        uids = set(maps[0])
        for m in maps[1:]:
            if set(m) != uids:
                raise UserError(f"the seeds of {self.name} scored different held-out instances at c = {budget:g}",
                                field=self.name)
        return {uid: float(np.mean([m[uid] for m in maps])) for uid in uids}


def _source(spec: str) -> tuple[Path, str]:
    """``PATH[:METHOD]`` as ``(path, method)``; no method: ``evolved`` (a run's searched profile)."""
    path, sep, method = spec.rpartition(":")
    if not sep or not method or "/" in method:
        return Path(spec), "evolved"
    return Path(path), method


def _file(path: Path) -> Path:
    """The comparison file of a run folder, or ``path`` itself."""
    return path / COMPARISON_FILE if path.is_dir() else path


def _load(path: Path) -> dict[str, dict[str, Scores]]:
    file = _file(path)
    if not file.exists():
        raise UserError("no such comparison file (finish the run, or run `evolalloc compare` on it)", source=str(file))
    return load_instance_scores(file)


def _method_scores(path: Path, method: str, flag: str) -> dict[str, Scores]:
    """``{task: {budget: {uid: score}}}`` of ``method`` in the comparison at ``path``."""
    out = {}
    for task, per_method in _load(path).items():
        if method not in per_method:
            raise UserError(f"no method {method!r} in it (it has {', '.join(sorted(per_method))})",
                            source=str(_file(path)),
                            field=flag)
        out[task] = per_method[method]
    return out


def rows_from_scores(path: Path) -> dict[str, list[Row]]:
    """Rows per task from one file: ``NAME-sK`` methods are seed K of the searched row NAME."""
    out: dict[str, list[Row]] = {}
    for task, per_method in _load(path).items():
        rows: dict[str, Row] = {}
        for method, per_budget in per_method.items():
            match = SEED.match(method)
            name = match["name"] if match else method
            row = rows.setdefault(name, Row(name, searched=bool(match)))
            row.seeds[f"s{match['seed']}" if match else name] = per_budget
        out[task] = list(rows.values())
    return out


def rows_from_specs(fixed: list[str], searched: list[str]) -> dict[str, list[Row]]:
    """Rows per task from ``--fixed NAME=SRC`` and ``--searched NAME=SRC,SRC,...`` options."""
    out: dict[str, list[Row]] = {}
    for flag, specs, is_searched in (("--fixed", fixed, False), ("--searched", searched, True)):
        for spec in specs:
            name, sep, sources = spec.partition("=")
            if not sep or not name or not sources:
                raise UserError(f"expected NAME=PATH[:METHOD][,...], got {spec!r}", field=flag)
            parts = sources.split(",")
            if not is_searched and len(parts) != 1:
                raise UserError(f"an unsearched row has one source, got {len(parts)}", field=flag)
            for index, part in enumerate(parts):
                path, method = _source(part)
                for task, per_budget in _method_scores(path, method, flag).items():
                    rows = out.setdefault(task, [])
                    row = next((r for r in rows if r.name == name), None)
                    if row is None:
                        row = Row(name, searched=is_searched)
                        rows.append(row)
                    row.seeds[f"s{index}" if is_searched else name] = per_budget
    return out


@dataclass
class Cell:
    """A searched row (one seed or pooled) minus one unsearched row at one budget."""

    searched: str
    seed: str
    versus: str
    test: PairedTest

    def beats(self, margin: float, alpha: float) -> bool:
        return self.test.diff >= margin and self.test.p_value < alpha

    def worse(self, alpha: float) -> bool:
        """Significantly below the unsearched row: negative difference, one-sided p < ``alpha``.
        The table's p is two-sided and its null symmetric, so the one-sided p is half of it."""
        return self.test.diff < 0 and self.test.p_value / 2 < alpha


def budget_table(rows: list[Row], budget: float, *, seed: int = 0) -> tuple[dict[str, Interval], list[Cell]]:
    """Means (``"NAME"`` or ``"NAME s0"`` / ``"NAME pooled"``) and every searched-vs-unsearched test."""
    means: dict[str, Interval] = {}
    fixed = {r.name: r.pooled(budget) for r in rows if not r.searched}
    fixed = {name: s for name, s in fixed.items() if s is not None}
    for name, s in fixed.items():
        means[name] = bootstrap_mean(list(s.values()), seed=seed)
    cells = []
    for row in (r for r in rows if r.searched):
        variants = {key: per_budget.get(budget) for key, per_budget in row.seeds.items()}
        if any(v is None for v in variants.values()):
            continue
        variants["pooled"] = row.pooled(budget)
        for key, s in variants.items():
            means[f"{row.name} {key}"] = bootstrap_mean(list(s.values()), seed=seed)
            for other, theirs in fixed.items():
                try:
                    ours, them = align(s, theirs, (f"{row.name} {key}", other))
                except ValueError as err:
                    raise UserError(f"c = {budget:g}: {err}", field=row.name) from None
                cells.append(Cell(row.name, key, other, paired_test(ours, them, seed=seed)))
    return means, cells


def verdict(means: dict[str, Interval], cells: list[Cell], rows: list[Row], *, margin: float, alpha: float,
            versus: list[str] | None = None) -> str:
    """One plain line: who has the highest mean, and whether each searched row beats every
    compressed unsearched row (or only those named in ``versus``) in every seed (the goal)."""
    compressed = [r.name for r in rows if not r.searched and r.name != FULL and r.name in means
                  and (versus is None or r.name in versus)]
    contenders = {k: v.mean for k, v in means.items() if k != FULL and not PER_SEED.search(k)}
    best = max(contenders, key=contenders.get)
    parts = [f"highest compressed mean: {best} {contenders[best]:.3f}"]
    for row in (r for r in rows if r.searched):
        seeds = [k for k in row.seeds]
        won = [s for s in seeds
               if all(any(c.beats(margin, alpha) for c in cells
                          if c.searched == row.name and c.seed == s and c.versus == o)
                      for o in compressed)]
        worst = [c for c in cells if c.searched == row.name and c.seed != "pooled" and c.versus in compressed]
        weakest = min(worst, key=lambda c: c.test.diff) if worst else None
        what = "every unsearched row" if versus is None else ", ".join(compressed)
        line = f"{row.name} beats {what} (>= {margin * 100:g} pts, p < {alpha:g}) in {len(won)}/{len(seeds)} seeds"
        if weakest is not None:
            line += (f" (weakest: {weakest.seed} vs {weakest.versus} "
                     f"{weakest.test.diff:+.3f}, p {weakest.test.p_value:.3g})")
        line += ": goal met" if len(won) == len(seeds) >= 3 else ": goal not met"
        parts.append(line)
    return "; ".join(parts)


def not_worse_verdict(cells: list[Cell], rows: list[Row], *, alpha: float, versus: list[str] | None = None) -> str:
    """One plain line per searched row: in how many seeds it is significantly worse than no
    compressed unsearched row (or none of ``versus``), and its worst cell."""
    compressed = [r.name for r in rows if not r.searched and r.name != FULL and (versus is None or r.name in versus)]
    parts = []
    for row in (r for r in rows if r.searched):
        mine = [c for c in cells if c.searched == row.name and c.seed != "pooled" and c.versus in compressed]
        if not mine:
            continue
        seeds = list(row.seeds)
        held = [s for s in seeds if not any(c.worse(alpha) for c in mine if c.seed == s)]
        worst = min(mine, key=lambda c: c.test.diff)
        line = (f"{row.name} not significantly worse than {', '.join(compressed)} (one-sided p >= {alpha:g}) in "
                f"{len(held)}/{len(seeds)} seeds (lowest: {worst.seed} vs {worst.versus} {worst.test.diff:+.3f}, "
                f"one-sided p {worst.test.p_value / 2 if worst.test.diff < 0 else 1 - worst.test.p_value / 2:.3g})")
        parts.append(line + (": holds" if len(held) == len(seeds) >= 3 else ": fails"))
    return "; ".join(parts)


def render(tables: dict[str, list[Row]], *, margin: float, alpha: float, seed: int = 0,
           versus: list[str] | None = None, not_worse: list[float] | None = None) -> str:
    lines = []
    for task, rows in tables.items():
        budgets = sorted({b for r in rows for s in r.seeds.values() for b in s})
        for budget in budgets:
            means, cells = budget_table(rows, budget, seed=seed)
            n = next(iter(means.values())).n if means else 0
            lines.append(f"task {task}, c = {budget:g} (held-out n = {n})")
            for name, i in means.items():
                lines.append(f"  {name:<24} {i.mean:.3f} [{i.low:.2f}, {i.high:.2f}]")
            for c in cells:
                t = c.test
                lines.append(f"  {c.searched} {c.seed} - {c.versus}: {t.diff:+.3f} "
                             f"[{t.low:+.3f}, {t.high:+.3f}], p {t.p_value:.3g}"
                             + (" *" if c.beats(margin, alpha) else ""))
            lines.append(f"  verdict c = {budget:g}: " + verdict(means, cells, rows, margin=margin, alpha=alpha))
            if versus:
                lines.append(f"  verdict c = {budget:g} vs {', '.join(versus)}: "
                             + verdict(means, cells, rows, margin=margin, alpha=alpha, versus=versus))
            if not_worse and budget in not_worse:
                lines.append(f"  not worse c = {budget:g}: " + not_worse_verdict(cells, rows, alpha=alpha,
                                                                                 versus=versus))
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scores", type=Path, action="append", default=[],
                        help="a comparison file whose methods are the rows")
    parser.add_argument("--fixed", action="append", default=[], metavar="NAME=SRC", help="an unsearched row")
    parser.add_argument("--searched", action="append", default=[], metavar="NAME=SRC,SRC,...",
                        help="a searched row, one SRC per seed")
    parser.add_argument("--margin", type=float, default=0.03, help="points a searched row must win by (default 0.03)")
    parser.add_argument("--alpha", type=float, default=0.05, help="paired p below which a win counts (default 0.05)")
    parser.add_argument("--seed", type=int, default=0, help="bootstrap seed")
    parser.add_argument("--versus", default=None, metavar="ROW,ROW",
                        help="also a verdict against only these unsearched rows "
                             "(e.g. the issue's uniform,uniform-gates,gates)")
    parser.add_argument("--not-worse", default=None, metavar="C,C",
                        help="at these budgets (the expansions) also say whether each seed is significantly worse "
                             "than no unsearched row (one-sided p < --alpha; only the --versus rows if given)")
    args = parser.parse_args(argv)
    if not (args.scores or args.fixed or args.searched):
        parser.error("give --scores FILE or --fixed/--searched rows")
    try:
        tables: dict[str, list[Row]] = {}
        for path in args.scores:
            for task, rows in rows_from_scores(path).items():
                tables.setdefault(task, []).extend(rows)
        for task, rows in rows_from_specs(args.fixed, args.searched).items():
            tables.setdefault(task, []).extend(rows)
        versus = [v.strip() for v in args.versus.split(",") if v.strip()] if args.versus else None
        not_worse = parse_budgets(args.not_worse, "--not-worse") if args.not_worse else None
        print(render(tables, margin=args.margin, alpha=args.alpha, seed=args.seed, versus=versus, not_worse=not_worse))
    except UserError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
