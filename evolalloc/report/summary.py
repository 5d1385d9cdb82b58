"""``show RUN``: a short text summary of a run folder.

What the run resolved to (``config/resolved.py``: given by the caller that holds it, else read once
from the folder's ``run.json``) says what it searched and at which budgets; each profile those
budgets name (``run_folder.profile_filenames``) is read once, and ``comparison.json`` once. It imports
neither the search loop nor torch, so it is instant, and it works on a run that is still going
(some files are simply not there yet).
"""

from __future__ import annotations

from pathlib import Path

from evolalloc.config.run_folder import (
    CHECKPOINT_FILE,
    COMPARISON_FILE,
    LEGACY_CHECKPOINT_FILE,
    REPORT_FILE,
    STUDY_FILE,
    load_resolved,
    profile_filenames,
)
from evolalloc.core.allocation_file import load_allocation
from evolalloc.core.errors import UserError
from evolalloc.report.comparison import REFERENCE, load_comparison, tasks_of
from evolalloc.report.markdown import checkpoint_words, fmt_p


def run_profiles(run_dir: Path, resolved) -> dict[int, tuple[Path, object]]:
    """``{budget: (path, Allocation or the UserError reading it)}`` for each budget of the run
    whose profile is written, smallest first: every file read once, here."""
    found = {}
    names = profile_filenames(resolved.budgets)
    for budget in sorted(resolved.budgets):
        path = run_dir / names[budget]
        if path.is_file():
            try:
                found[budget] = (path, load_allocation(path))
            except UserError as err:
                found[budget] = (path, err)
    return found


def _searched_provenance(profiles: dict, resolved) -> dict:
    """The searched profile's provenance (at the target), ``{}`` when it is missing or unreadable."""
    _, alloc = profiles.get(resolved.target, (None, None))
    return alloc.provenance if alloc is not None and not isinstance(alloc, UserError) else {}


def _mode_words(resolved) -> str:
    return resolved.fitness_mode if resolved.fitness_mode_given else f"{resolved.fitness_mode} (the task's default)"


def _profile_line(budget: float, path: Path, alloc) -> str:
    if isinstance(alloc, UserError):
        return f"  c = {budget:g}: unreadable ({alloc})"
    per_layer = alloc.budgets.mean(axis=1)
    facts = [f"layers {per_layer.min():.4g}–{per_layer.max():.4g} tokens", f"mean {alloc.mean_budget:.1f}"]
    prov = alloc.provenance
    if prov.get("expansion_rule") == "start":
        facts.append(f"{prov.get('start_method')} at this budget: it beat carrying the c = "
                     f"{prov.get('expanded_from_target', 0):g} profile on the search split")
    elif "expanded_from_target" in prov:
        rule = prov.get("expansion_rule", "proportional")  # files written before the rule was recorded
        facts.append(f"expanded from c = {prov['expanded_from_target']:g} by the {rule} rule")
        scores = prov.get("expansion_search_scores")
        if isinstance(scores, dict) and scores:
            facts.append("search-split fitness " + ", ".join(f"{r} {v:.4f}" for r, v in scores.items()))
    curve = prov.get("curve") if isinstance(prov.get("curve"), dict) else {}
    if curve.get("role") == "anchor":
        where = curve.get("search")
        facts.append("curve anchor: the run's own search" if where == "." else f"curve anchor searched in {where}")
    elif curve.get("role") == "derived" and isinstance(curve.get("between"), list):
        facts.append("curve: interpolated between the anchors at " + " and ".join(f"{b:g}" for b in curve["between"]))
    for key in ("fitness", "task_score"):
        if isinstance(prov.get(key), (int, float)):
            facts.append(f"{key.replace('_', ' ')} {prov[key]:.4f}")
    if prov.get("evaluations") is not None:
        facts.append(f"{prov['evaluations']} evaluations")
    return f"  c = {budget:g} ({path.name}): " + ", ".join(facts)


def _comparison_lines(path: Path) -> list[str]:
    try:
        rows, _ = load_comparison(path)
    except UserError as err:
        return [f"  unreadable ({err})"]
    lines = []
    for task in tasks_of(rows):
        mine = [r for r in rows if r.task == task]
        if task is not None:
            lines.append(f"  {task}:")
        for budget in sorted({row.budget for row in mine}):
            cells = []
            for row in (r for r in mine if r.budget == budget):
                cell = f"{row.method} {row.score.mean:.3f} [{row.score.low:.2f}, {row.score.high:.2f}]"
                if row.versus is not None:
                    cell += f" (p {fmt_p(row.versus.p_value)})"
                cells.append(cell)
            lines.append(f"{'    ' if task is not None else '  '}c = {budget:g}: " + "; ".join(cells))
    return lines


def _search_lines(run_dir: Path) -> list[str]:
    """How the start was chosen and each finished group stopped, from the search checkpoint (``[]``
    when there is none or it cannot be read: ``resume`` says why), and the search's share of the run's time."""
    import json

    from evolalloc.config.run_folder import SESSIONS_FILE
    from evolalloc.report.markdown import fmt_seconds, stop_lines
    from evolalloc.search.checkpoint import load_checkpoint
    from evolalloc.search.stopping import GroupSummary

    if not (run_dir / CHECKPOINT_FILE).exists():
        return []
    try:
        checkpoint = load_checkpoint(run_dir)
        groups = [GroupSummary.from_dict(g) for g in checkpoint.groups]
    except (UserError, KeyError, TypeError):
        return []
    found = [line for line in stop_lines(groups, checkpoint.start_scores) if line]
    try:  # the run's wall time: every finished session (pipeline/wall_clock.py writes them)
        wall = sum(float(s["ended"]) - float(s["started"]) for s in json.loads((run_dir / SESSIONS_FILE).read_text())
                   if s.get("ended") is not None)
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        wall = 0.0
    if checkpoint.seconds:
        share = f" of the run's {fmt_seconds(wall)} ({100 * checkpoint.seconds / wall:.0f} %)" \
            if wall >= checkpoint.seconds else ""
        found.append(f"took {fmt_seconds(checkpoint.seconds)}{share}")
    return ["search:"] + [f"  {line.removeprefix('- ')}" for line in found] if found else []


def _status(run_dir: Path, profiles: dict) -> str:
    if profiles and not (run_dir / COMPARISON_FILE).exists():  # --compare pick's unpicked seeds, or a kill
        return "search finished, not compared on the held-out split (evolalloc resume compares it)"
    if profiles:
        return "search finished"
    if (run_dir / CHECKPOINT_FILE).exists() or (run_dir / LEGACY_CHECKPOINT_FILE).exists():
        return "search started, not finished (resume it)"
    return "created, not searched yet"


def show_run(run_dir: str | Path, resolved=None) -> str:
    """A few lines on what the run searched, what it found and how it compared.

    ``resolved``: what the run resolved to (``ResolvedRun``) when the caller holds it (the command
    that just ran the search); ``None`` reads the run folder's ``run.json`` (``load_resolved``)."""
    run_dir = Path(run_dir)
    run = resolved if resolved is not None else load_resolved(run_dir)
    profiles = run_profiles(run_dir, run)
    lines = [
        f"run {run.name} ({run_dir})",
        f"  status: {_status(run_dir, profiles)}",
        f"  model {run.model}, "
        + ", ".join(f"task {t.name}" + (f" as {t.label} (weight {t.weight:g})" if run.multi_task else "")
                    + f" (~{t.context_tokens} tokens)" for t in run.tasks)
        + f", scorer {run.scorer}, fitness mode {_mode_words(run)}",
        f"  budgets {', '.join(map(str, run.budgets))} (target {run.target}), "
        f"{run.search_space} group size {run.group_size}, optimizer {run.optimizer}, each group {run.stop_words}",
        f"  trial store: {run.storage or (run_dir / STUDY_FILE)}",
    ]
    checkpoint = _searched_provenance(profiles, run).get("scorer_checkpoint")
    if checkpoint:
        lines.insert(3, f"  scorer {run.scorer}: {checkpoint_words(checkpoint)}")
    elif run.scorer_training is not None:
        steps, seed = run.scorer_training
        lines.insert(3, f"  scorer {run.scorer}: trained in the run ({steps} steps, seed {seed}, search split); "
                        "no profile yet")
    lines += _search_lines(run_dir)
    if profiles:
        lines.append("profiles:")
        lines += [_profile_line(budget, path, alloc) for budget, (path, alloc) in profiles.items()]
    comparison = run_dir / COMPARISON_FILE
    if comparison.exists():
        lines.append(f"held-out comparison (mean [95% CI], p vs {REFERENCE}):")
        lines += _comparison_lines(comparison)
    report = run_dir / REPORT_FILE
    plots = sorted(p.name for p in run_dir.glob("*.png"))
    if report.exists():
        lines.append(f"report: {report}")
    if plots:
        lines.append(f"plots: {', '.join(plots)}")
    return "\n".join(lines) + "\n"
