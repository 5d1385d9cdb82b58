"""A whole run, as the ``search`` and ``resume`` commands drive it.

1. search: group-wise CMA-ES on the search split (every evaluation a stored trial);
2. ship: the best profile completed to the exact target total, expanded to each larger budget,
   saved as ``allocation-c{N}.json``;
3. compare: evolved vs the baselines at every budget on the held-out split, with bootstrap
   intervals and paired tests (``comparison.json``);
4. report: plots and ``report.md`` (its wall time: every session of the run, ``pipeline/wall_clock.py``);
5. tidy: the spilled prefill records (``records/``) removed unless ``engine.keep_records``.

Steps 1-3 need the experiment (model, engine, records: ``run_prepared``, ``ship_and_compare``);
4-5 are made from what they return (``Compared``) once the experiment is closed
(``report_and_tidy``), so the report's plotting holds no Ray worker and no held-out record.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from evolalloc.config.resolved import ResolvedRun
from evolalloc.config.run_folder import (
    COMPARISON_FILE,
    CURATION_FILE,
    REPORT_FILE,
    load_resolved,
    load_run_recipe,
    missing_outputs,
    profile_filenames,
    remove_records,
)
from evolalloc.core.allocation import Allocation
from evolalloc.core.allocation_file import load_allocation, save_allocation
from evolalloc.core.phases import announce
from evolalloc.pipeline.experiment import Experiment
from evolalloc.pipeline.run_scorers import scorer_for

# quiet_optuna is re-exported: code that drives a run imports it from here too.
from evolalloc.pipeline.search_settings import quiet_optuna
from evolalloc.pipeline.wall_clock import begin_session, end_session, phase_seconds
from evolalloc.search import SearchConfig, resume_search, run_search
from evolalloc.search.loop import SearchResult, open_search

HELDOUT = "heldout"


def evolved_allocation(experiment: Experiment, result, config: SearchConfig, target: float | None = None) -> Allocation:
    """The search's best profile as an Allocation, completed to the exact target total (the recipe's,
    or ``target``: a curve's anchor)."""
    space = config.build_space()
    run, scorers = experiment.resolved, experiment.run.scorers
    best = Allocation(
        model=run.model,
        geometry=experiment.run.model.geometry,
        scorer=scorers.scorer.name,
        scorer_params=scorers.scorer.params(),
        target=run.target if target is None else target,
        granularity=run.granularity,
        budgets=result.best_budgets,
        provenance={
            "method": "evolved",
            "task": run.task_names,
            "fitness_mode": run.fitness_mode,
            "fitness": result.best_fitness,
            "task_score": result.best_task_score,
            "lam": config.lam,
            "gamma": config.gamma,
            "group_size": config.group_size,
            # The recipe may leave popsize to EvolKV's formula: record the population really used.
            "population": config.popsize_for(config.group_size),
            "sigma0": config.sigma0,
            "seed": config.seed,
            "evaluations": len(result.history),
            **({"passes": config.passes} if config.passes > 1 else {}),  # optimizer.passes: visits of every group
            "optimizer": result.implementation[0],
            "optimizer_version": result.implementation[1],
            # The hybrid's budgets are a prior that an adapter reads per input (searchspaces.score_prior);
            # the adapter's settings are the space's (floors_under_global_topk's floor_fraction).
            **({"adapter": space.adapter} if space.adapter else {}),
            **({"adapter_params": space.adapter_params} if space.adapter_params else {}),
        },
        decode=run.decode,  # the budgets were searched held while decoding: the profile ships that way
    )
    return experiment.run.methods.with_scorer_provenance(best.complete(min_budget=scorers.min_budget))


def ship(run_dir: Path, experiment: Experiment, evolved: Allocation, config: SearchConfig | None = None,
         progress: bool = True) -> dict[float, Allocation]:
    """Save the profile at the target and each expansion (``budget.expansion_rule``), or, with
    ``budget.curve``, at every grid budget (``pipeline/curve.py``: more anchors searched); return them by budget."""
    from evolalloc.pipeline.expansion import expand_profile

    run = experiment.resolved
    announce("shipping")
    if run.curve_grid:
        from evolalloc.pipeline.curve import ship_curve

        def allocate(result, anchor_config, target):
            return evolved_allocation(experiment, result, anchor_config, target=target)

        return ship_curve(run_dir, experiment, evolved, config, allocate, progress=progress)

    rule = run.expansion_rule
    # needs the search records: ship before release
    evaluator = experiment.search_evaluator() if rule == "search" else None
    announce("shipping")  # again: the evaluator may have prefilled the search split (a resumed run)

    def evaluator_for(candidate):  # a topup candidate selects with its own adapter (floors_under_global_topk)
        return experiment.evaluator("search", scorer_for(candidate), mode=None)

    def starts_at(budget: float) -> dict:  # the search's start methods at c', as its space holds them there
        space = dataclasses.replace(config, target=float(budget)).build_space()
        budgets = experiment.run.methods.start_budgets(config.start, budget)
        return {name: space.held(b) for name, b in zip(config.start, budgets)}

    profiles = {float(run.target): evolved}
    profiles.update(expand_profile(evolved, list(run.expansions), rule, experiment.run.scorers.min_budget, evaluator,
                                   evaluator_for=evaluator_for,
                                   starts_at=starts_at if config is not None and config.start else None))
    names = profile_filenames(profiles)
    for budget, allocation in profiles.items():
        save_allocation(allocation, run_dir / names[budget])
    return profiles


def compare(run_dir: Path, experiment: Experiment, profiles: dict[float, Allocation]):
    """Evolved vs baselines at every budget on the held-out split; writes comparison.json.

    Always greedy generation scored by each task's real metric, whatever the search climbed.
    Several tasks: each task's rows and the weighted overall (``compare_tasks``).
    """
    from evolalloc.report.comparison import compare_scores, compare_tasks, save_comparison

    run = experiment.resolved
    methods: dict[str, dict[float, Allocation]] = {"evolved": profiles,
                                                   **experiment.run.methods.baselines_at(run.baselines, profiles)}
    # The held-out records need keep only what these allocations read (issue 22: memory).
    experiment.bound_split(HELDOUT, [a for per_budget in methods.values() for a in per_budget.values()])
    parts = experiment.parts
    per_task: dict[str, dict[str, dict[float, dict[str, float]]]] = {}
    done, steps = 0, len(parts) * len(methods)
    for label, _, part in parts:
        scores = per_task[label] = {}
        evaluators = {}  # one per way of selecting tokens (as a Ray worker keeps them), made on first need
        for method, per_budget in methods.items():
            announce("comparing", done, steps)
            done += 1
            scores[method] = {}
            # One evaluation per scorer: a topup expansion selects with another adapter than its c profile.
            for key, (scorer, group) in scorer_groups(per_budget).items():
                if key not in evaluators:
                    evaluators[key] = part.evaluator(HELDOUT, scorer, mode="generate")
                    announce("comparing", done - 1, steps)  # after the held-out prefill a first evaluator makes
                results = evaluate_distinct(evaluators[key], list(group.values()))
                for budget, result in zip(group, results):
                    if not result.ok:
                        raise RuntimeError(f"held-out evaluation of {method} at "
                                           f"c={budget:g} on {label} failed: {result.error}")
                    scores[method][budget] = {o.uid: o.score for o in result.instances}
            scores[method] = dict(sorted(scores[method].items()))
    if run.multi_task:
        weights = {label: weight for label, weight, _ in parts}
        rows = compare_tasks(per_task, weights, reference="evolved", seed=run.seed)
    else:
        rows = compare_scores(per_task[experiment.label], reference="evolved", seed=run.seed)
    save_comparison(rows, run_dir / COMPARISON_FILE, meta=comparison_meta(experiment), scores=per_task)
    return rows, methods


def evaluate_distinct(evaluator, allocations: list[Allocation]) -> list:
    """``evaluator``'s results for ``allocations``, in their order, each distinct budget array evaluated once:
    the full cache's budgets are the same at every ``c`` (at 8192 tokens its rows cost more than any other's)."""
    first: dict[tuple, int] = {}
    arrays = [np.asarray(a.budgets) for a in allocations]
    index = [first.setdefault((b.shape, b.dtype.str, b.tobytes()), len(first)) for b in arrays]
    distinct = list({i: a.budgets for i, a in zip(index, allocations)}.values())
    results = evaluator.evaluate(distinct)
    return [results[i] for i in index]


def by_scorer(per_budget: dict[float, Allocation]) -> list[tuple[object, dict[float, Allocation]]]:
    """``per_budget`` split into ``(scorer, {budget: allocation})`` groups that select tokens the same way
    (same ranking and adapter), in budget order; most rows are one group."""
    return list(scorer_groups(per_budget).values())


def scorer_groups(per_budget: dict[float, Allocation]) -> dict[str, tuple[object, dict[float, Allocation]]]:
    """The groups of ``by_scorer``, by the key of how they select tokens (``selection_key``, else ``key``)."""
    groups: dict[str, tuple[object, dict[float, Allocation]]] = {}
    for budget, allocation in per_budget.items():
        scorer = scorer_for(allocation)
        key = getattr(scorer, "selection_key", scorer.key)
        groups.setdefault(key, (scorer, {}))[1][budget] = allocation
    return groups


def comparison_meta(experiment: Experiment) -> dict:
    """The context line of the comparison: split, instances really used (after any curation), task(s)."""
    run = experiment.resolved
    counts = {label: len(part.instances(HELDOUT)) for label, _, part in experiment.parts}
    meta = {"split": HELDOUT, "instances": counts[experiment.label] if not run.multi_task else counts,
            "task": run.task_names, "scored by": "greedy generation, each task's metric"}
    if run.multi_task:
        meta["weights"] = {label: weight for label, weight, _ in experiment.parts}
    filtered = [part.curations[HELDOUT].line() for _, _, part in experiment.parts if HELDOUT in part.curations]
    if filtered:
        meta["held-out filter"] = "; ".join(filtered)
    return meta


@dataclass(frozen=True)
class Compared:
    """What the report is written from, once the experiment's work is done (``ship_and_compare``):
    the report needs no model, engine or records, so the experiment can be closed before it."""

    run_dir: Path
    resolved: ResolvedRun
    result: SearchResult  # the best profile, the history, the optimizer
    rows: list  # comparison.json's rows
    methods: dict[str, dict[float, Allocation]]  # every compared profile, by method and budget
    meta: dict  # comparison.json's context line (``comparison_meta``)


def report(compared: Compared, wall_seconds: float) -> Path:
    """The plots and ``report.md`` of a compared run; returns the report's path."""
    from evolalloc.config.run_folder import PLOT_FITNESS, PLOT_HEAD_BUDGETS, PLOT_LAYER_BUDGETS, PLOT_SCORE_VS_BUDGET
    from evolalloc.pipeline.curation import read_curations
    from evolalloc.report.markdown import write_report
    from evolalloc.report.method_style import in_budget_plot
    from evolalloc.report.plots import plot_fitness_history, plot_head_budgets, plot_layer_budgets, plot_score_vs_budget

    run_dir, resolved, result, rows, methods = (compared.run_dir, compared.resolved, compared.result, compared.rows,
                                                compared.methods)
    by_phase, phases_complete = phase_seconds(run_dir)
    target = float(resolved.target)
    profiles = {name: per_budget[target] for name, per_budget in methods.items() if in_budget_plot(name)}
    plots = {
        "Budgets per layer at the target": plot_layer_budgets(profiles, run_dir / PLOT_LAYER_BUDGETS).name,
        "Best fitness over evaluations": plot_fitness_history(result.history, run_dir / PLOT_FITNESS,
                                                              stops=result.groups).name,
        "Held-out score vs budget": plot_score_vs_budget(rows, run_dir / PLOT_SCORE_VS_BUDGET, anchors=[
            budget for budget, a in methods["evolved"].items() if a.provenance.get("curve",
                                                                                   {}).get("role") == "anchor"]).name,
    }
    if resolved.granularity == "head":
        plots["Budgets per KV head at the target"] = plot_head_budgets(methods["evolved"][target],
                                                                       run_dir / PLOT_HEAD_BUDGETS).name
    best = {"fitness": result.best_fitness, "task_score": result.best_task_score,
            "optimizer": "/".join(result.implementation), "evaluations": len(result.history)}
    allocations = profile_filenames(methods["evolved"])
    return write_report(run_dir, resolved, history=result.history, comparison=rows, allocations=allocations,
                        plots=plots, best=best, wall_seconds=wall_seconds, comparison_meta=compared.meta,
                        curation=[c.line() for c in read_curations(run_dir / CURATION_FILE)],
                        groups=result.groups, start_scores=result.start_scores, search_seconds=result.seconds,
                        phase_seconds=by_phase, phases_complete=phases_complete,
                        scorer_checkpoint=methods["evolved"][target].provenance.get("scorer_checkpoint"))


def ship_and_compare(run_dir: Path, experiment: Experiment, result, config: SearchConfig,
                     profiles: dict[float, Allocation] | None = None, progress: bool = True) -> Compared:
    """Ship (unless ``profiles``, already shipped, are given) and compare: the steps that need the
    experiment. ``report_and_tidy`` finishes the run from what this returns."""
    if profiles is None:
        profiles = ship(run_dir, experiment, evolved_allocation(experiment, result, config), config, progress)
    run = experiment.run
    run.run_dir = run.run_dir or Path(run_dir)  # where LU-KV's curves are saved
    run.methods.profile_for(experiment.resolved.baselines)  # on the search records, so before they are released
    experiment.release("search")  # its prefill records are not needed for the held-out comparison
    rows, methods = compare(run_dir, experiment, profiles)
    return Compared(Path(run_dir), experiment.resolved, result, rows, methods, comparison_meta(experiment))


def report_and_tidy(compared: Compared) -> Path:
    """Report, and remove the spilled records (a finished run never reads them; ``engine.keep_records``
    keeps them); returns the report's path."""
    path = report(compared, end_session(compared.run_dir))
    if not compared.resolved.keep_records:
        remove_records(compared.run_dir)  # after the report: a run killed before it still resumes from them
    return path


def search_run(run_dir: Path, recipe, *, progress: bool = True) -> Path:
    """Search, ship, compare and report in a fresh run folder; returns the report's path.

    The folder comes from ``create_run_folder``; ``pipeline.start.start_run`` is the path that
    checks everything before writing anything.
    """
    begin_session(run_dir, time.time())
    quiet_optuna()
    with Experiment(recipe, progress=progress, curation_file=run_dir / CURATION_FILE) as experiment:
        config = experiment.search_config
        experiment.run.run_dir = Path(run_dir)  # where LU-KV's curves are saved, if the start profiles them
        result = run_search(run_dir, experiment.search_evaluator(), config, progress=progress,
                            starts=experiment.run.methods.starts(config))
        compared = ship_and_compare(run_dir, experiment, result, config, progress=progress)
    return report_and_tidy(compared)


def run_prepared(prepared, *, progress: bool = True) -> Compared:
    """Search, ship and compare a run made by ``pipeline.start.prepare_run``; ``report_and_tidy``
    finishes it. The experiment stays open: its owner closes it (``pipeline.start.start_run``)."""
    result = search_prepared(prepared, progress)
    return ship_and_compare(prepared.run_dir, prepared.experiment, result, prepared.config, progress=progress)


def search_prepared(prepared, progress: bool) -> SearchResult:
    """The search of a run made by ``pipeline.start.prepare_run`` (its session begun, its curation recorded)."""
    begin_session(prepared.run_dir, prepared.started)  # its checks, model load and curation count too
    # Optuna is quiet already: prepare_run, which made ``prepared`` in this process, quieted it.
    config, experiment = prepared.config, prepared.experiment
    experiment.record_curations(prepared.run_dir / CURATION_FILE)  # made before the folder existed
    experiment.run.run_dir = Path(prepared.run_dir)  # where LU-KV's curves are saved, if the start profiles them
    return resume_search(prepared.run_dir, experiment.search_evaluator(), config=config, progress=progress,
                         starts=experiment.run.methods.starts(config))


def run_finished(run_dir: Path) -> bool:
    """Whether ``run_dir`` holds every output of its recipe (profiles, comparison, report)."""
    return not missing_outputs(run_dir, load_resolved(run_dir))


class _OnFirstUse:
    """An evaluator made only when a candidate must really be evaluated: resuming a finished
    search replays stored trials and needs no prefill of its split."""

    def __init__(self, make):
        self._make, self._evaluator = make, None

    def made(self):
        if self._evaluator is None:
            self._evaluator = self._make()
        return self._evaluator

    def evaluate(self, budgets):
        return self.made().evaluate(budgets)


def resume_run(run_dir: Path, *, progress: bool = True, started: float | None = None,
               ship_only: bool = False) -> Path | None:
    """Continue a killed run where it stopped, then finish it; returns the report's path.

    Only what is missing is done again: a finished run (``run_finished``) is returned at once,
    without loading the model; the search evaluates only the candidates its trial store lacks
    (the search split is prefilled only if there is one); profiles already shipped are re-used.
    ``ship_only``: an unfinished run stops once its profiles are shipped and tidied (``pipeline.start.ship_run``'s
    run, killed; or one killed in its comparison) and ``None`` is returned.
    """
    run_dir = Path(run_dir)
    missing = missing_outputs(run_dir, load_resolved(run_dir))
    if not missing:
        return run_dir / REPORT_FILE
    if ship_only:
        from evolalloc.pipeline.ship_only import profiles_shipped, tidy_shipped

        if profiles_shipped(run_dir):
            return None
    started = time.time() if started is None else started  # the command's start, if given
    quiet_optuna()
    recipe = load_run_recipe(run_dir)
    with Experiment(recipe, progress=progress, curation_file=run_dir / CURATION_FILE) as experiment:
        config = experiment.search_config  # the geometry from the model's config: no weights yet
        opened = open_search(run_dir, config)  # checkpoint and trial store checked before the costly prefill
        begin_session(run_dir, started)  # only now: a refused resume changes nothing in the folder
        evaluator = _OnFirstUse(experiment.search_evaluator)

        def starts() -> list:  # only when the start must be evaluated (a replay reads it from the trial store)
            evaluator.made()  # first: a run that trains its scorer has no checkpoint before its evaluator
            experiment.run.run_dir = run_dir  # where LU-KV's curves are (or are saved), if the start profiles them
            return experiment.run.methods.start_budgets(config.start, config.target)

        result = opened.run(evaluator, progress=progress, starts=starts)
        experiment.run.run_dir = run_dir
        profiles = None
        names = profile_filenames(experiment.resolved.budgets)
        if not any(name in missing for name in names.values()):
            geometry = experiment.run.model.geometry
            profiles = {budget: load_allocation(run_dir / name, expect_geometry=geometry)
                        for budget, name in names.items()}
        if ship_only:  # shipped now if it was not, then tidied as ship_run does
            if profiles is None:
                ship(run_dir, experiment, evolved_allocation(experiment, result, config), config, progress)
            tidy_shipped(run_dir, experiment)
            return None
        compared = ship_and_compare(run_dir, experiment, result, config, profiles, progress=progress)
    return report_and_tidy(compared)  # the experiment closed: the report needs none of it
