"""``report.md``: what was searched, how the search went, and how the profile compares.

``render_report`` is a pure function of plain data (what the recipe resolved to, a
``ResolvedRun``; the trial records, the comparison rows, file names relative to the run folder);
``write_report`` writes it. It never reads the recipe itself: ``config/resolved.py`` decides.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Mapping, Sequence

from evolalloc.config.run_folder import REPORT_FILE
from evolalloc.core.fileio import write_atomic
from evolalloc.report.comparison import OVERALL, REFERENCE, ComparisonRow, tasks_of
from evolalloc.report.plots import best_so_far, group_name, group_progress
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


def _curate_words(split) -> str:
    if not split.curated:
        return ""
    words = ["full cache solves"] + ([f"{split.reference_unsolved} at c does not"] if split.reference_unsolved else [])
    return f", curated: {' and '.join(words)}, from up to {split.draw or 2 * split.n} drawn"


def _split_words(name: str, split) -> str:
    return "" if split is None else f"{name} {split.n} (seed {split.seed}{_curate_words(split)})"


def _task_rows(task, prefix: str = "", weighted: bool = False) -> list[tuple[str, str]]:
    """Rows of one task (a ``TaskFacts``); ``weighted``: one of several, with its weight."""
    weight = f" (weight {task.weight:g})" if weighted else ""
    return [
        (f"{prefix}task", f"{task.name} {task.params or ''}".strip() + weight
         + (f", ~{task.context_tokens} tokens" if task.context_tokens else "")),
        (f"{prefix}instances", ", ".join(filter(None, [_split_words("search", task.search),
                                                        _split_words("held-out", task.heldout)])) or "–"),
        (f"{prefix}question after compression", "yes" if task.question_after_compression else "no"),
    ]


def checkpoint_words(record: Mapping | None) -> str:
    """A scorer checkpoint's provenance (``scorer_checkpoint`` of a profile) in one phrase."""
    if not record:
        return ""
    trained = record.get("trained") or {}
    how = [f"{trained['steps']} steps" if trained.get("steps") is not None else None,
           f"seed {trained['seed']}" if trained.get("seed") is not None else None,
           f"{trained['traces']} traces" if trained.get("traces") is not None else None,
           ("of " + ", ".join(trained["tasks"])) if trained.get("tasks") else None,
           ("(" + "/".join(trained["splits"]) + " split)") if trained.get("splits") else None,
           f"on model {trained['model']}" if trained.get("model") else None,
           "in this run's own training step" if trained.get("in_run_key") else None]
    return (f"checkpoint {record.get('path')} (sha256 {str(record.get('sha256'))[:16]}), trained "
            + (" ".join(part for part in how if part) or "(no training record)"))


def _curve_words(run) -> str:
    """``budget.curve`` as the recipe put it (a run.json written before the range was recorded: its budgets)."""
    low, high = run.curve_range or (None, None)
    span = f"from {low:g}c to {high:g}c" if low is not None else f"from {run.curve_grid[0]} to {run.curve_grid[-1]}"
    named = list(run.curve_anchors_named) if run.curve_anchors_named is not None else None
    return f"{len(run.curve_grid)} budgets {span}, anchors {named or 'the ends and c'} searched (profile-curve.json)"


def searched_section(run, scorer_checkpoint: Mapping | None = None) -> list[str]:
    """A key/value table of what the run (a ``ResolvedRun``) searched, in words a reader of the report
    needs; ``scorer_checkpoint``: the provenance of the trained scorer's checkpoint the profiles were
    searched with."""
    if run.multi_task:
        task_rows = [row for task in run.tasks
                     for row in _task_rows(task, f"{task.label or task.name}: ", weighted=True)]
    else:
        task_rows = _task_rows(run.tasks[0])
    mode = run.fitness_mode if run.fitness_mode_given else f"{run.fitness_mode} (each task’s default)"
    rows = [
        ("model", f"`{run.model}` ({run.dtype})"),
        *task_rows,
        ("fitness mode", f"{mode} (the search only; every reported result is greedy "
                         "generation scored by the task's metric)"),
        ("scorer", f"{run.scorer} {run.scorer_params or ''}".strip()
                   + ("; " + checkpoint_words(scorer_checkpoint) if scorer_checkpoint else "")),
        ("target budget c", f"{run.target} tokens per (layer, KV head)"),
        *([("held while decoding", f"every {run.decode_interval} generated tokens each (layer, KV head) is cut back "
                                   "to its budget (search, comparison and shipped profiles)")]
          if getattr(run, "decode_interval", None) else []),
        ("expansions", (", ".join(map(str, run.expansions)) or "none")
                       + f" ({run.expansion_rule} rule)") if not run.curve_grid else
        ("curve", _curve_words(run)),
        ("search space", f"{run.search_space}, group size {run.group_size}"
                         + (f", ratio bounds {list(run.ratio_bounds)}" if run.ratio_bounds else "")),
        ("optimizer", f"{run.optimizer}, sigma0 {run.sigma0}, population "
                      f"{run.popsize if run.popsize is not None else '4 + floor(3 ln n_g)'}, "
                      f"seed {run.optimizer_seed}; each group runs {run.stop_words}"),
        ("start", start_words(run.start)),
        ("objective", f"f(S) * (1 + {run.lam} * CacheScore), gamma {run.gamma}, CacheScore over the {run.cache_scope}"),
        ("engine", f"{run.engine}, {run.workers} worker(s)"),
        ("baselines", ", ".join(run.baselines) or "none"),
    ]
    return ["## What was searched", "", *_table(("setting", "value"), rows)]


def search_share(search_seconds: float | None, wall_seconds: float | None) -> str:
    """`` The search: 3 min 10 s (35 %).`` or ``""`` when either time is unknown."""
    if not search_seconds or not wall_seconds:
        return ""
    return f" The search: {fmt_seconds(search_seconds)} ({100 * search_seconds / wall_seconds:.0f} %)."


def time_by_phase(seconds: Mapping[str, float] | None, complete: bool = True) -> str:
    """``Where it went: starting 12 s, prefilling 3 min 56 s, ...`` (phases under a second left out), or
    ``""`` when nothing was recorded; ``complete=False`` says not every session is in it."""
    parts = [f"{phase} {fmt_seconds(s) if s >= 60 else f'{s:.0f} s'}" for phase, s in (seconds or {}).items()
             if s >= 1]
    if not parts:
        return ""
    tail = "." if complete else " (only the sessions that recorded it: not a killed one)."
    return "Where it went: " + ", ".join(parts) + tail


def start_words(start: Sequence[str]) -> str:
    """The search's start (``ResolvedRun.start``) in words."""
    if not start:
        return "uniform (EvolKV as published: every group's optimizer starts at c, nothing evaluated first)"
    return (f"the best on the search split of {', '.join(start)} at c (each evaluated and stored as a trial, as "
            "the search space holds it; every group's optimizer starts at it, and the best evaluated candidate, "
            "the shipped profile under budget_rule exact, is never below it)")


def stop_lines(groups: Sequence[Any] = (), start_scores: Mapping | None = None) -> list[str]:
    """How the start was chosen and how each group's search ended (``SearchResult.groups``)."""
    lines = []
    if start_scores:
        scores = ", ".join(f"{name} {'failed' if v is None else f'{v:.4f}'}" for name, v in start_scores.items())
        finished = {k: v for k, v in start_scores.items() if v is not None}
        chosen = max(finished, key=finished.get) if finished else None
        lines.append(f"Start: {chosen or 'none finished (uniform)'} (search-split fitness: {scores}).")
    revisits = [g for g in groups if getattr(g, "pass_number", 1) > 1]
    if revisits:  # optimizer.passes: say what the later groups are before listing them
        first = min(g.group for g in revisits)
        lines.append(f"Searched in {max(g.pass_number for g in revisits)} passes: groups {first + 1} and after search "
                     f"the first pass's groups again, bottom-up, each from the best profile found before it.")
    lines += [f"- {g.line()}" for g in groups]
    capped = [str(g.group + 1) for g in groups if not g.converged]
    if capped:  # a fitness curve that still climbs: say so where the profile is read
        lines.append(f"Not converged: group{'s' if len(capped) > 1 else ''} {', '.join(capped)} still gained "
                     "when the generation cap stopped them; a longer search may ship a fitter profile "
                     "(`--set optimizer.max_generations_per_group=N`, a new run).")
    return lines + [""] if lines else []


def progress_section(history: Sequence[Any], best: Mapping | None = None, groups: Sequence[Any] = (),
                     start_scores: Mapping | None = None) -> list[str]:
    """Evaluations, failures and the best fitness of each layer group, and whether it climbed.

    "gain within group": the group's best minus the best of its first generation; "task scores":
    how many distinct task scores the group saw — 1 means the group was flat (only CacheScore
    moved the fitness), which the report says rather than hides. ``groups``/``start_scores``: how
    each group stopped and how the start was chosen (``SearchResult``), listed above the table.
    """
    lines = ["## Best fitness over time", ""]
    if not history:
        return lines + ["No evaluations recorded."]
    failed = sum(1 for r in history if _get(r, "state") == "FAIL")
    running = best_so_far(history)
    rows, flat = [], []
    passes = {int(g.group): g.pass_words() for g in groups if hasattr(g, "pass_words")}  # optimizer.passes > 1
    for info in group_progress(history):
        name = group_name(info.group)
        if info.flat and info.best is not None:
            flat.append(str(name))
        rows.append((
            f"{name}{passes.get(int(info.group), '') if info.group is not None else ''}", info.evaluations, info.failed,
            "–" if info.best is None else f"{info.best:.4f}",
            "–" if info.within_gain is None else f"{info.within_gain:+.4f}",
            info.task_scores,
            info.last, "–" if running[info.last - 1] is None else f"{running[info.last - 1]:.4f}",
        ))
    lines.append(f"{len(history)} evaluations, {failed} failed.")
    if best:
        parts = [f"{key.replace('_', ' ')} {value:.4f}" if isinstance(value, float)
                 else f"{key.replace('_', ' ')} {value}"
                 for key, value in best.items() if value is not None]
        lines.append("Best allocation: " + ", ".join(parts) + ".")
    if flat:
        lines.append(f"Flat group(s) {', '.join(flat)}: every evaluation had the same task score, so only the "
                     "CacheScore term moved the fitness there.")
    lines.append("")
    lines += stop_lines(groups, start_scores)
    header = ("group", "evaluations", "failed", "best in group", "gain within group", "task scores",
              "evaluations so far", "best so far")
    return lines + _table(header, rows)


def curation_section(lines_in: Sequence[str]) -> list[str]:
    """How many instances each curated split drew and kept (``curation.json``)."""
    if not lines_in:
        return []
    return ["## Instances", "", *[f"- {line}" for line in lines_in], ""]


def comparison_section(rows: Sequence[ComparisonRow], meta: Mapping | None = None) -> list[str]:
    """Method x budget: mean, 95 % CI, and the paired test against the evolved profile.

    Several tasks: the weighted overall table first, then one table per task."""
    lines = ["## Comparison on held-out instances", ""]
    if not rows:
        return lines + ["Not compared yet (run `evolalloc compare`)."]
    if meta:
        lines += [", ".join(f"{k}: {v}" for k, v in meta.items()), ""]
    tasks = tasks_of(rows)
    fallback = False
    for task in tasks:
        if task is not None:
            title = ("Weighted overall (the fitness's weights; per-instance values rescaled by weight, so they can "
                     "exceed 1)" if task == OVERALL else f"Task {task}")
            lines += [f"### {title}", ""]
        table, used = _comparison_table([row for row in rows if row.task == task])
        fallback |= used
        lines += table + [""]
    lines.pop()
    lines += ["", "Intervals: percentile bootstrap over instances (10 000 resamples, seeded). "
              f"Difference: paired bootstrap of {REFERENCE} minus the method on the same instances. "
              "p: two-sided Wilcoxon signed-rank test on per-instance differences (zeros dropped); "
              "* p < 0.05."]
    if fallback:
        lines.append("† every difference is zero, so Wilcoxon is undefined: paired-bootstrap p shown.")
    return lines


def _comparison_table(rows: Sequence[ComparisonRow]) -> tuple[list[str], bool]:
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
    return _table(header, table), fallback


def render_report(
    resolved,
    *,
    history: Sequence[Any] = (),
    comparison: Sequence[ComparisonRow] = (),
    comparison_meta: Mapping | None = None,
    allocations: Mapping[float, str] | None = None,
    plots: Mapping[str, str] | None = None,
    best: Mapping | None = None,
    wall_seconds: float | None = None,
    curation: Sequence[str] = (),
    scorer_checkpoint: Mapping | None = None,
    groups: Sequence[Any] = (),
    start_scores: Mapping | None = None,
    search_seconds: float | None = None,
    phase_seconds: Mapping[str, float] | None = None,
    phases_complete: bool = True,
) -> str:
    """The whole report as Markdown.

    Args:
        resolved: what the run's recipe resolved to (``config/resolved.py: ResolvedRun``): every
            setting and budget the report names comes from it.
        history: trial records (dicts or ``TrialRecord``) in search order.
        comparison: rows from ``compare_scores``; ``comparison_meta`` a line of context.
        allocations: budget -> allocation file name, relative to the run folder.
        plots: caption -> PNG file name, relative to the run folder.
        best: facts about the best allocation (fitness, task_score, optimizer...).
        wall_seconds: wall time of the run.
        curation: one line per curated split (``Curation.line()``).
        scorer_checkpoint: the searched profile's ``scorer_checkpoint`` provenance, if any.
        groups / start_scores: how each group's search stopped, and the start's candidates with their
            fitness (``SearchResult.groups`` / ``start_scores``).
        search_seconds: the search's wall time (``SearchResult.seconds``), said as its share of the run's.
        phase_seconds / phases_complete: the run's seconds by phase and whether every session's are in them
            (``pipeline.wall_clock.phase_seconds``).
    """
    lines = [f"# evolalloc run `{resolved.name}`", ""]
    if wall_seconds is not None:
        lines += [f"Wall time: {fmt_seconds(wall_seconds)}." + search_share(search_seconds, wall_seconds), ""]
        went = time_by_phase(phase_seconds, phases_complete)
        lines += [went, ""] if went else []
    lines += searched_section(resolved, scorer_checkpoint) + [""]
    lines += curation_section(curation)
    lines += progress_section(history, best, groups, start_scores) + [""]
    lines += comparison_section(comparison, comparison_meta) + [""]
    if allocations:
        lines += ["## Allocation files", ""]
        for budget, name in sorted(allocations.items()):
            rule = resolved.expansion_rule
            how = ("rule picked on the search split, see `evolalloc show`" if rule == "search" else f"{rule} rule")
            kind = "target" if budget == resolved.target else f"expansion, {how}"
            lines.append(f"- c = {float(budget):g} ({kind}): [{name}]({name})")
        lines.append("")
    if plots:
        lines += ["## Plots", ""]
        for caption, name in plots.items():
            lines += [f"### {caption}", "", f"![{caption}]({name})", ""]
    return "\n".join(lines).rstrip() + "\n"


def write_report(run_dir: str | Path, resolved, **parts: Any) -> Path:
    """Render the report (see ``render_report``) into ``run_dir/report.md``, atomically."""
    return write_atomic(Path(run_dir) / REPORT_FILE, render_report(resolved, **parts))
