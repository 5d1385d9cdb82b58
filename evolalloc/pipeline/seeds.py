"""Stability: one recipe searched with several optimizer seeds, and the spread of the results.

``search_seeds`` runs the recipe once per seed ``s`` in its own run folder ``<name>-s<s>`` with
``optimizer.seed = s``; everything else is the recipe's — in particular the task instances (their
seeds are resolved from the recipe before the optimizer seed changes), so the runs differ only in
the search. A seed whose folder already holds a finished run is read, not run again; one that was
killed is resumed; so the whole command is resumable by simply running it again.

``summarize`` reads each run's ``comparison.json`` and writes ``<name>-seeds/summary.json`` and
``summary.md``: every seed's held-out score per method and budget (and task), the evolved score's
mean ± sd over seeds, and per seed the evolved − baseline difference with its paired p.

``pick_by_search_fitness`` says which seed's profiles to ship: the one whose search reached the
highest fitness on the search split (each profile's provenance keeps it), copied to
``<name>-seeds/best/``. The seeds share their instances, so their fitnesses are comparable, and the
held-out scores take no part in the pick. Why: one search on a few long prompts can settle on a
profile that does not carry to fresh ones, and on the search-budget study's 8160-token setting the
seed that failed on held-out prompts had the lowest search-split fitness of its three.

``compare="pick"`` (``--compare pick``) is the cheap way to ship that pick: every seed is searched and
shipped (``pipeline.start.ship_run``, ``pipeline/ship_only.py``: no held-out prefill, no comparison), then
only the picked seed's run is compared (``resume_run``: its search replays from the trial store). Each
seed is still a run of its own (start-up, search-split prefill, search, shipping); on long prompts the
held-out prefill and comparison, made once instead of once per seed, are most of a run.
"""

from __future__ import annotations

import dataclasses
import json
import math
import statistics
from pathlib import Path
from typing import Callable, Sequence

from evolalloc.config.run_folder import (
    COMPARISON_FILE,
    allocation_filename,
    load_resolved,
    load_run_recipe,
    profile_files,
)
from evolalloc.core.errors import UserError
from evolalloc.core.fileio import write_atomic
from evolalloc.report.comparison import load_comparison

SUMMARY_JSON = "summary.json"
SUMMARY_MD = "summary.md"
SUMMARY_PLOT = "budgets-per-layer.png"
#: The picked seed's profiles (``allocation-c*.json``, copied unchanged) and why it was picked.
PICK_DIR, PICK_FILE = "best", "pick.json"
# The issue's bar for "the evolved profile beats a baseline" on one seed.
MARGIN, ALPHA = 0.05, 0.05
VERSUS = ("uniform", "pyramid")


#: From this prompt length on, one search per run is advised against (``pick_advice``).
LONG_PROMPTS = 4096


def pick_advice(recipe) -> str | None:
    """A line for a single-search run on long prompts, else ``None``. Why: at 4096 tokens on the 7-digit
    needle, 2 of 9 single searches shipped a profile that did not carry to fresh prompts while all three
    picks of three did (results/search-budget-pick, setting B); at 2048 tokens every single search carried
    (results/search-budget, settings A and E). The default stays one search: three would take the main
    job past its 10 minutes on two cores (issue 50's item 3)."""
    longest = max((entry.context_tokens or 0) for entry in recipe.task_entries)
    if longest < LONG_PROMPTS:
        return None
    return (f"note: on prompts of {longest} tokens one search can settle on a profile that does not carry to fresh "
            f"prompts; --seeds 0 1 2 --compare pick searches three times, ships the fittest on the search split "
            f"and compares only it (docs/recipes.md, 'Is it stable?')")


def seeded_recipe(recipe, seed: int, base: str):
    """``recipe`` with optimizer seed ``seed`` and run name ``<base>-s<seed>``; instances unchanged."""
    seeded = dataclasses.replace(recipe, name=f"{base}-s{seed}",
                                 optimizer=dataclasses.replace(recipe.optimizer, seed=seed))
    seeded.source = recipe.source
    return seeded


COMPARE_CHOICES = ("all", "pick")


def search_seeds(
    recipe, seeds: Sequence[int], runs_dir: str | Path = "runs", name: str | None = None, *, progress: bool = True,
    echo: Callable[[str], None] = print, compare: str = "all",
) -> Path:
    """Run (or resume, or re-use) one search per seed, then write the summary; returns its folder.

    ``compare="pick"``: every seed is searched and shipped, and only the picked one (the highest
    search-split fitness) is compared on the held-out split: the held-out prefill and comparison, most
    of a long-context run, are made once. The summary then holds the pick's held-out rows only."""
    from evolalloc.pipeline.run import resume_run, run_finished
    from evolalloc.pipeline.ship_only import profiles_shipped
    from evolalloc.pipeline.start import ship_run, start_run

    if not seeds:
        raise UserError("give at least one seed", field="--seeds")
    if len(set(seeds)) != len(seeds):
        raise UserError(f"a seed is listed twice: {list(seeds)}", field="--seeds")
    if compare not in COMPARE_CHOICES:
        raise UserError(f"--compare must be one of {', '.join(COMPARE_CHOICES)}, got {compare!r}", field="--compare")
    pick_only = compare == "pick"
    runs_dir, base = Path(runs_dir), name or recipe.name
    runs = {}
    for seed in seeds:
        seeded = seeded_recipe(recipe, seed, base)
        run_dir = runs_dir / seeded.name
        runs[seed] = run_dir
        if not run_dir.exists():
            echo(f"seed {seed}: new run {run_dir}")
            (ship_run if pick_only else start_run)(seeded, runs_dir, progress=progress)
            continue
        stored = load_run_recipe(run_dir)
        if stored.to_dict() != seeded.to_dict():
            raise UserError("this folder holds a run of another recipe; pass another --name or delete it",
                            source=str(run_dir))
        if run_finished(run_dir):
            echo(f"seed {seed}: finished run {run_dir}, re-used")
        elif pick_only and profiles_shipped(run_dir):
            echo(f"seed {seed}: searched and shipped {run_dir}, re-used")
        else:  # start_run creates folder, study and first checkpoint together: resume finds them
            echo(f"seed {seed}: resuming {run_dir}")
            resume_run(run_dir, progress=progress, ship_only=pick_only)
    if pick_only:
        pick = pick_by_search_fitness(runs)
        if pick is None:
            raise UserError("no seed's run shipped a profile at its target, so there is nothing to pick",
                            field="--compare")
        picked = runs[pick["seed"]]
        if run_finished(picked):
            echo(f"seed {pick['seed']}: picked, compared already")
        else:
            echo(f"seed {pick['seed']}: picked (search-split fitness {pick['fitness']:.4f}); comparing it on the "
                 f"held-out split")
            resume_run(picked, progress=progress)  # its search replays: 0 new evaluations
    return write_summary(runs_dir / f"{base}-seeds", runs)


def summarize(runs: dict[int, Path]) -> dict:
    """Per (task, budget, method): each seed's held-out mean, and per seed the test vs evolved."""
    table: dict[tuple, dict] = {}
    compared = {seed: run_dir for seed, run_dir in runs.items() if (Path(run_dir) / COMPARISON_FILE).is_file()}
    for seed, run_dir in compared.items():  # --compare pick: the picked seed's run only
        rows, meta = load_comparison(Path(run_dir) / COMPARISON_FILE)
        for row in rows:
            entry = table.setdefault((row.task, row.budget, row.method),
                                     {"task": row.task, "budget": row.budget, "method": row.method,
                                      "per_seed": {}, "versus_evolved": {}})
            entry["per_seed"][str(seed)] = row.score.mean
            if row.versus is not None:
                entry["versus_evolved"][str(seed)] = {"diff": row.versus.diff, "p": row.versus.p_value,
                                                      "low": row.versus.low, "high": row.versus.high}
    for entry in table.values():
        values = list(entry["per_seed"].values())
        entry["mean"] = statistics.fmean(values)
        entry["sd"] = statistics.stdev(values) if len(values) > 1 else 0.0
    verdicts = {}
    for (task, budget, method), entry in table.items():
        if method not in VERSUS:
            continue
        for seed, test in entry["versus_evolved"].items():
            ok = test["diff"] >= MARGIN and test["p"] < ALPHA
            key = f"{task or ''}|{budget:g}|{seed}"
            verdicts[key] = verdicts.get(key, True) and ok
    return {"format": "evolalloc.seeds", "version": 1, "seeds": [int(s) for s in runs],
            "runs": {str(s): str(p) for s, p in runs.items()}, "compared": [int(s) for s in compared],
            "rows": list(table.values()),
            "beats_uniform_and_pyramid": verdicts,
            "criterion": f"evolved - baseline >= {MARGIN} and paired p < {ALPHA}, for each of {', '.join(VERSUS)}"}


def pick_by_search_fitness(runs: dict[int, Path]) -> dict | None:
    """``{"seed", "fitness", "search_fitness": {seed: F_best or None}, "files"}``: the seed whose search
    reached the highest fitness on the search split (ties: the first listed), with its profile files;
    ``None`` when no run shipped a profile. A run without a profile (failed) is never picked."""
    from evolalloc.core.allocation_file import load_allocation

    fitness, files = {}, {}
    for seed, run_dir in runs.items():
        # The profile at the run's target is the one its search found (a budget.curve run's smallest
        # profile is a lower anchor, or one derived from the anchors, with a fitness of its own or none).
        target = Path(run_dir) / allocation_filename(load_resolved(run_dir).target)
        value = load_allocation(target).provenance.get("fitness") if target.is_file() else None  # None: failed
        fitness[str(seed)] = float(value) if value is not None and math.isfinite(value) else None
        files[str(seed)] = [path.name for path in profile_files(run_dir)]
    best = highest_fitness(fitness)
    if best is None:
        return None
    return {"seed": int(best), "fitness": fitness[best], "search_fitness": fitness, "files": files[best],
            "criterion": "the highest search-split fitness (the search's own F_best); held-out scores take no part"}


def highest_fitness(fitness: dict[str, float | None]) -> str | None:
    """The key of the highest fitness (ties: the first listed; ``None`` values never win); ``None`` if all are."""
    ranked = [key for key, value in fitness.items() if value is not None]
    return max(ranked, key=lambda key: (fitness[key], -ranked.index(key))) if ranked else None


def render_summary(summary: dict) -> str:
    """The summary as Markdown: one table per task (several tasks: the weighted overall first)."""
    every = [str(s) for s in summary["seeds"]]
    seeds = [str(s) for s in summary.get("compared", summary["seeds"])]  # the seeds with a held-out comparison
    if seeds == every:
        lines = [f"# Stability over search seeds {', '.join(every)}", "",
                 "Held-out mean score of each seed's run (instances identical across seeds; only the optimizer seed "
                 "differs). Evolved: mean ± sd over seeds. Baselines: per seed, evolved − baseline and the paired p.",
                 ""]
    else:
        lines = [f"# Search seeds {', '.join(every)}: held-out scores of seed{'s' if len(seeds) > 1 else ''} "
                 f"{', '.join(seeds) or 'none'}", "",
                 "Every seed was searched and shipped; a seed without a column was not compared on the held-out "
                 "split (--compare pick compares the picked one). Baselines: evolved − baseline and the paired p.",
                 ""]
    lines += [f"- seed {s}: `{path}`{'' if s in seeds else ' (searched and shipped, not compared: --compare pick)'}"
              for s, path in summary["runs"].items()] + [""]
    tasks = list(dict.fromkeys(row["task"] for row in summary["rows"]))
    for task in tasks:
        if task is not None:
            lines += [f"## {task}", ""]
        header = ["c", "method", *[f"seed {s}" for s in seeds], "mean ± sd"]
        lines += ["| " + " | ".join(header) + " |", "|" + "|".join(" --- " for _ in header) + "|"]
        for row in (r for r in summary["rows"] if r["task"] == task):
            cells = []
            for s in seeds:
                value = row["per_seed"].get(s)
                cell = "–" if value is None else f"{value:.3f}"
                test = row["versus_evolved"].get(s)
                if test is not None:
                    cell += f" ({test['diff']:+.3f}, p {_p(test['p'])})"
                cells.append(cell)
            lines.append("| " + " | ".join([f"{row['budget']:g}", row["method"], *cells,
                                               f"{row['mean']:.3f} ± {row['sd']:.3f}"]) + " |")
        lines.append("")
    lines += [f"Evolved beats both uniform and pyramid ({summary['criterion']}):", ""]
    for key, ok in summary["beats_uniform_and_pyramid"].items():
        task, budget, seed = key.split("|")
        lines.append(f"- {task + ', ' if task else ''}c = {budget}, seed {seed}: {'yes' if ok else 'no'}")
    pick = summary.get("pick")
    if pick is not None:
        fitness = ", ".join(f"seed {s} {'–' if f is None else f'{f:.4f}'}" for s, f in pick["search_fitness"].items())
        lines += ["", "## The profile to ship", "",
                  f"Seed {pick['seed']}: the highest search-split fitness ({fitness}). Its profiles are copied to "
                  f"`{PICK_DIR}/` ({', '.join(pick['files'])}); the held-out scores above took no part in the pick."]
    return "\n".join(lines).rstrip() + "\n"


def _p(p: float) -> str:
    if p is None or not math.isfinite(p):
        return "–"
    return "<0.001" if p < 0.001 else f"{p:.3f}"


def write_summary(folder: Path, runs: dict[int, Path]) -> Path:
    summary = summarize(runs)
    summary["pick"] = pick_by_search_fitness(runs)
    folder.mkdir(parents=True, exist_ok=True)  # the summary is derived data: rewritten on every call
    _copy_pick(folder / PICK_DIR, runs, summary["pick"])
    write_atomic(folder / SUMMARY_JSON, json.dumps(summary, indent=2) + "\n")
    write_atomic(folder / SUMMARY_MD, render_summary(summary))
    plot_seed_profiles(runs, folder / SUMMARY_PLOT)
    return folder


def _copy_pick(best: Path, runs: dict[int, Path], pick: dict | None) -> None:
    """``best/`` holds the picked seed's profile files and ``pick.json``, nothing left from an earlier pick."""
    import shutil

    if best.exists():
        shutil.rmtree(best)
    if pick is None:
        return
    best.mkdir(parents=True)
    for name in pick["files"]:
        shutil.copyfile(Path(runs[pick["seed"]]) / name, best / name)
    write_atomic(best / PICK_FILE, json.dumps(pick, indent=2) + "\n")


def plot_seed_profiles(runs: dict[int, Path], path: Path) -> Path | None:
    """Each seed's profile at the target, per layer, next to uniform and pyramid at the same c:
    do the seeds agree on *where* the budget goes? ``None`` when no run has a profile."""
    from evolalloc.core.allocation_file import load_allocation
    from evolalloc.core.baselines import make_baseline
    from evolalloc.report.plots import plot_layer_budgets
    from evolalloc.runtime.scorers import get_scorer

    profiles = {}
    for seed, run_dir in runs.items():
        target = load_resolved(run_dir).target
        file = Path(run_dir) / allocation_filename(target)
        if file.is_file():
            profiles[f"seed {seed}"] = load_allocation(file)
    if not profiles:
        return None
    first = next(iter(profiles.values()))
    reserved = get_scorer(first.scorer, **first.scorer_params).always_kept  # as the runs' own baselines
    for name in VERSUS:  # the baselines the bar is set against, drawn dashed in their own colours
        profiles[name] = make_baseline(name).allocation(first.geometry, first.target, model=first.model,
                                                        scorer=first.scorer, scorer_params=first.scorer_params,
                                                        reserved=reserved)
    return plot_layer_budgets(profiles, path,
                              title=f"Evolved profiles of {len(runs)} search seeds at c = {first.target:g}")
