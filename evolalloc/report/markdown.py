"""``report.md``: what was searched, how the search went, and how the profile compares.

``render_report`` is a pure function of plain data (the recipe as a dict, the trial records,
the comparison rows, file names relative to the run folder); ``write_report`` writes it.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from pathlib import Path
from typing import Any, Mapping, Sequence

from evolalloc.core.fileio import write_atomic
from evolalloc.config.run_folder import REPORT_FILE
from evolalloc.report.comparison import REFERENCE, ComparisonRow
from evolalloc.report.plots import best_so_far
from evolalloc.report.plots import record_field as _get


def fmt_p(p: float | None) -> str:
    if p is None or not math.isfinite(p):
        return "–"
    return "<0.001" if p < 0.001 else f"{p:.3f}"


def fmt_seconds(seconds: float) -> str:
    minutes, secs = divmod(int(round(seconds)), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min" if hours else f"{minutes} min {secs:02d} s"


def _table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(" --- " for _ in header) + "|"]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return lines


def _as_dict(recipe: Any) -> Mapping:
    return recipe.to_dict() if hasattr(recipe, "to_dict") else recipe


def searched_section(recipe: Mapping) -> list[str]:
    """A key/value table of the recipe, in words a reader of the report needs."""
    task, budget, space, opt = recipe["task"], recipe["budget"], recipe["search_space"], recipe["optimizer"]
    rows = [
        ("model", f"`{recipe['model']['spec']}` ({recipe['model']['dtype']})"),
        ("task", f"{task['name']} {task['params'] or ''}".strip()
         + (f", ~{task['context_tokens']} tokens" if task.get("context_tokens") else "")),
        ("instances", f"search {task['search']['n']} (seed {task['search']['seed']}), "
                      f"held-out {task['heldout']['n']} (seed {task['heldout']['seed']})"),
        ("question after compression", "yes" if task.get("question_after_compression") else "no"),
        ("scorer", f"{recipe['scorer']['name']} {recipe['scorer']['params'] or ''}".strip()),
        ("target budget c", f"{budget['target']} tokens per (layer, KV head)"),
        ("expansions", ", ".join(map(str, budget["expansions"])) or "none"),
        ("search space", f"{space['name']}, group size {space['group_size']}"
                         + (f", ratio bounds {space['ratio_bounds']}" if space.get("ratio_bounds") else "")),
        ("optimizer", f"{opt['name']}, sigma0 {opt['sigma0']}, population "
                      f"{opt['popsize'] if opt['popsize'] is not None else '4 + floor(3 ln n_g)'}, "
                      f"{opt['generations_per_group']} generations per group, seed {opt['seed']}"),
        ("objective", f"f(S) * (1 + {opt['lam']} * CacheScore), gamma {opt['gamma']}, "
                      f"CacheScore over the {opt.get('cache_scope', 'group')}"),
        ("engine", f"{recipe['engine']['kind']}, {recipe['engine']['workers']} worker(s)"),
        ("baselines", ", ".join(recipe["baselines"]) or "none"),
    ]
    return ["## What was searched", "", *_table(("setting", "value"), rows)]


def progress_section(history: Sequence[Any], best: Mapping | None = None) -> list[str]:
    """Evaluations, failures and the best fitness at the end of each layer group."""
    lines = ["## Best fitness over time", ""]
    if not history:
        return lines + ["No evaluations recorded."]
    failed = sum(1 for r in history if _get(r, "state") == "FAIL")
    running = best_so_far(history)
    per_group: OrderedDict = OrderedDict()
    for index, (record, best_now) in enumerate(zip(history, running)):
        group = _get(record, "group")
        entry = per_group.setdefault(group, {"evaluations": 0, "failed": 0, "group_best": None})
        entry["evaluations"] += 1
        entry["failed"] += _get(record, "state") == "FAIL"
        entry["after"] = (index + 1, best_now)
        fitness = _get(record, "fitness")
        if _get(record, "state") != "FAIL" and fitness is not None:
            entry["group_best"] = fitness if entry["group_best"] is None else max(entry["group_best"], fitness)
    rows = []
    for group, entry in per_group.items():
        total, best_now = entry["after"]
        rows.append((
            "–" if group is None else int(group) + 1, entry["evaluations"], entry["failed"],
            "–" if entry["group_best"] is None else f"{entry['group_best']:.4f}",
            total, "–" if best_now is None else f"{best_now:.4f}",
        ))
    lines.append(f"{len(history)} evaluations, {failed} failed.")
    if best:
        parts = [f"{key.replace('_', ' ')} {value:.4f}" if isinstance(value, float) else f"{key.replace('_', ' ')} {value}"
                 for key, value in best.items() if value is not None]
        lines.append("Best allocation: " + ", ".join(parts) + ".")
    lines.append("")
    header = ("group", "evaluations", "failed", "best in group", "evaluations so far", "best so far")
    return lines + _table(header, rows)


def comparison_section(rows: Sequence[ComparisonRow], meta: Mapping | None = None) -> list[str]:
    """Method x budget: mean, 95 % CI, and the paired test against the evolved profile."""
    lines = ["## Comparison on held-out instances", ""]
    if not rows:
        return lines + ["Not compared yet (run `evolalloc compare`)."]
    if meta:
        lines += [", ".join(f"{k}: {v}" for k, v in meta.items()), ""]
    table, fallback = [], False
    for row in rows:
        versus = row.versus
        if versus is None:
            delta, p = "—", "—"
        else:
            delta = f"{versus.diff:+.3f} [{versus.low:+.3f}, {versus.high:+.3f}]"
            mark = "" if versus.test == "wilcoxon" else " †"
            fallback |= bool(mark)
            p = fmt_p(versus.p_value) + mark + (" *" if versus.significant() else "")
        table.append((f"{row.budget:g}", row.method, row.score.n, f"{row.score.mean:.3f}",
                      f"[{row.score.low:.3f}, {row.score.high:.3f}]", delta, p))
    header = ("budget", "method", "n", "mean score", "95% CI", f"{REFERENCE} − method [95% CI]", f"p vs {REFERENCE}")
    lines += _table(header, table)
    lines += ["", "Intervals: percentile bootstrap over instances (10 000 resamples, seeded). "
              f"Difference: paired bootstrap of {REFERENCE} minus the method on the same instances. "
              "p: two-sided Wilcoxon signed-rank test on per-instance differences (zeros dropped); "
              "* p < 0.05."]
    if fallback:
        lines.append("† every difference is zero, so Wilcoxon is undefined: paired-bootstrap p shown.")
    return lines


def render_report(
    recipe: Any,
    *,
    history: Sequence[Any] = (),
    comparison: Sequence[ComparisonRow] = (),
    comparison_meta: Mapping | None = None,
    allocations: Mapping[float, str] | None = None,
    plots: Mapping[str, str] | None = None,
    best: Mapping | None = None,
    wall_seconds: float | None = None,
) -> str:
    """The whole report as Markdown.

    Args:
        recipe: the resolved recipe (``Recipe`` or its ``to_dict()``).
        history: trial records (dicts or ``TrialRecord``) in search order.
        comparison: rows from ``compare_scores``; ``comparison_meta`` a line of context.
        allocations: budget -> allocation file name, relative to the run folder.
        plots: caption -> PNG file name, relative to the run folder.
        best: facts about the best allocation (fitness, task_score, optimizer...).
        wall_seconds: wall time of the run.
    """
    recipe = _as_dict(recipe)
    lines = [f"# evolalloc run `{recipe['name']}`", ""]
    if wall_seconds is not None:
        lines += [f"Wall time: {fmt_seconds(wall_seconds)}.", ""]
    lines += searched_section(recipe) + [""]
    lines += progress_section(history, best) + [""]
    lines += comparison_section(comparison, comparison_meta) + [""]
    if allocations:
        lines += ["## Allocation files", ""]
        for budget, name in sorted(allocations.items()):
            kind = "target" if float(budget) == float(recipe["budget"]["target"]) else "expansion"
            lines.append(f"- c = {float(budget):g} ({kind}): [{name}]({name})")
        lines.append("")
    if plots:
        lines += ["## Plots", ""]
        for caption, name in plots.items():
            lines += [f"### {caption}", "", f"![{caption}]({name})", ""]
    return "\n".join(lines).rstrip() + "\n"


def write_report(run_dir: str | Path, recipe: Any, **parts: Any) -> Path:
    """Render the report (see ``render_report``) into ``run_dir/report.md``, atomically."""
    return write_atomic(Path(run_dir) / REPORT_FILE, render_report(recipe, **parts))
