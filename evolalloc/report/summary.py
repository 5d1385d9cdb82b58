"""``show RUN``: a short text summary of a run folder.

The run's resolved recipe says what it searched and at which budgets (given by a caller that holds
it, else read once from ``recipe.yaml``); each profile the recipe's budgets name
(``run_folder.allocation_filename``) is read once, and ``comparison.json`` once. It imports
neither the search loop nor torch, so it is instant, and it works on a run that is still going
(some files are simply not there yet).
"""

from __future__ import annotations

import re
from pathlib import Path

from evolalloc.core.allocation_file import load_allocation
from evolalloc.core.errors import UserError
from evolalloc.config.run_folder import (
    CHECKPOINT_FILE, COMPARISON_FILE, LEGACY_CHECKPOINT_FILE, REPORT_FILE, STUDY_FILE, allocation_filename, load_run_recipe,
)
from evolalloc.report.comparison import REFERENCE, load_comparison, tasks_of
from evolalloc.report.markdown import checkpoint_words, fmt_p

_ALLOCATION = re.compile(r"^allocation-c(\d+(?:\.\d+)?)\.json$")


def allocation_files(run_dir: str | Path) -> dict[float, Path]:
    """The evolved profiles in a run folder, by budget, smallest first."""
    found = {}
    for path in Path(run_dir).iterdir():
        match = _ALLOCATION.match(path.name)
        if match:
            found[float(match.group(1))] = path
    return dict(sorted(found.items()))


def run_profiles(run_dir: Path, recipe) -> dict[float, tuple[Path, object]]:
    """``{budget: (path, Allocation or the UserError reading it)}`` for each budget of the recipe
    whose profile is written, smallest first: every file read once, here."""
    found = {}
    for budget in sorted(float(b) for b in recipe.budgets):
        path = run_dir / allocation_filename(budget)
        if path.is_file():
            try:
                found[budget] = (path, load_allocation(path))
            except UserError as err:
                found[budget] = (path, err)
    return found


def _searched_provenance(profiles: dict, recipe) -> dict:
    """The searched profile's provenance (at the target), ``{}`` when it is missing or unreadable."""
    _, alloc = profiles.get(float(recipe.budget.target), (None, None))
    return alloc.provenance if alloc is not None and not isinstance(alloc, UserError) else {}


def _default_mode(profiles: dict, recipe) -> str:
    """The mode a task default resolved to, as the searched profile recorded it."""
    mode = _searched_provenance(profiles, recipe).get("fitness_mode")
    return f"{mode} (the task's default)" if mode else "the task's default"


def _profile_line(budget: float, path: Path, alloc) -> str:
    if isinstance(alloc, UserError):
        return f"  c = {budget:g}: unreadable ({alloc})"
    per_layer = alloc.budgets.mean(axis=1)
    facts = [f"layers {per_layer.min():.4g}–{per_layer.max():.4g} tokens", f"mean {alloc.mean_budget:.1f}"]
    prov = alloc.provenance
    if "expanded_from_target" in prov:
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


def _status(run_dir: Path, profiles: dict) -> str:
    if profiles:
        return "search finished"
    if (run_dir / CHECKPOINT_FILE).exists() or (run_dir / LEGACY_CHECKPOINT_FILE).exists():
        return "search started, not finished (resume it)"
    return "created, not searched yet"


def show_run(run_dir: str | Path, recipe=None) -> str:
    """A few lines on what the run searched, what it found and how it compared.

    ``recipe``: the run's resolved recipe when the caller holds it (the command that just ran the
    search); ``None`` reads the run folder's ``recipe.yaml``."""
    run_dir = Path(run_dir)
    recipe = recipe if recipe is not None else load_run_recipe(run_dir)
    profiles = run_profiles(run_dir, recipe)
    lines = [
        f"run {recipe.name} ({run_dir})",
        f"  status: {_status(run_dir, profiles)}",
        f"  model {recipe.model.spec}, "
        + ", ".join(f"task {t.name}" + (f" as {t.label} (weight {t.weight:g})" if recipe.multi_task else "")
                    + f" (~{t.context_tokens} tokens)" for t in recipe.task_entries)
        + f", scorer {recipe.scorer.name}, fitness mode {recipe.fitness.mode or _default_mode(profiles, recipe)}",
        f"  budgets {', '.join(map(str, recipe.budgets))} (target {recipe.budget.target}), "
        f"{recipe.search_space.name} group size {recipe.search_space.group_size}, optimizer {recipe.optimizer.name} "
        f"x {recipe.optimizer.generations_per_group} generations per group",
        f"  trial store: {recipe.storage or (run_dir / STUDY_FILE)}",
    ]
    checkpoint = _searched_provenance(profiles, recipe).get("scorer_checkpoint")
    if checkpoint:
        lines.insert(3, f"  scorer {recipe.scorer.name}: {checkpoint_words(checkpoint)}")
    elif recipe.scorer.train is not None:
        lines.insert(3, f"  scorer {recipe.scorer.name}: trained in the run ({recipe.scorer.train.steps} steps, seed "
                        f"{recipe.scorer.train.seed}, search split); no profile yet")
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
