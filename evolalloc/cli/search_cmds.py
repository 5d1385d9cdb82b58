"""``search``, ``resume``, ``evaluate``, ``compare``, ``expand``, ``export``, ``show``."""

from __future__ import annotations

from pathlib import Path

import click

from evolalloc.cli import main

set_option = click.option(
    "--set", "overrides", multiple=True, metavar="KEY=VALUE",
    help="Override a recipe value, e.g. --set optimizer.generations_per_group=1 (repeatable).",
)
progress_option = click.option("--progress/--no-progress", default=True, show_default=True, help="Show progress bars.")


@main.command()
@click.argument("recipe", type=click.Path(dir_okay=False, path_type=Path))
@click.argument("more_seeds", nargs=-1, type=int, metavar="")
@set_option
@click.option("--name", default=None, help="Run folder name (default: the recipe's name).")
@click.option("--runs-dir", default="runs", show_default=True, type=click.Path(file_okay=False, path_type=Path), help="Where run folders go.")
@click.option("--seeds", "first_seed", type=str, default=None, metavar="S [S ...]",
              help="Search once per optimizer seed (e.g. --seeds 0 1 2): runs NAME-s0, NAME-s1, ... on the same "
                   "instances, then NAME-seeds/summary.md with the spread. Run it again to resume.")
@progress_option
def search(recipe, more_seeds, overrides, name, runs_dir, first_seed, progress):
    """Search a budget profile as RECIPE says, then compare it with the baselines and write a report.

    Checks the recipe, model, datasets and trial store first, then creates runs/<name>/ (never
    overwrites one; a refused start writes nothing). If the run is killed, `evolalloc resume`
    continues it.
    """
    from evolalloc.config.recipe import load_recipe
    from evolalloc.pipeline.run import run_prepared
    from evolalloc.pipeline.start import prepare_run
    from evolalloc.report.summary import show_run

    seeds = _seeds(first_seed, more_seeds)
    loaded = load_recipe(recipe, overrides)
    if seeds is not None:
        from evolalloc.pipeline.seeds import SUMMARY_MD, search_seeds

        folder = search_seeds(loaded, seeds, runs_dir, name, progress=progress, echo=click.echo)
        click.echo((folder / SUMMARY_MD).read_text())
        click.echo(f"summary: {folder / SUMMARY_MD}")
        return
    prepared = prepare_run(loaded, runs_dir, name, progress=progress)  # writes nothing unless the run can start
    click.echo(f"run folder: {prepared.run_dir}")
    run_prepared(prepared, progress=progress)
    click.echo(show_run(prepared.run_dir))


def _seeds(first: str | None, more: tuple[int, ...]) -> list[int] | None:
    """``--seeds 0 1 2`` (click hands the 1 and 2 over as extra arguments) or ``--seeds 0,1,2``."""
    from evolalloc.core.errors import UserError

    if first is None:
        if more:
            raise click.UsageError(f"unexpected extra arguments {' '.join(map(str, more))} (seeds go after --seeds)")
        return None
    try:
        seeds = [int(part) for part in first.replace(",", " ").split()] + list(more)
    except ValueError:
        raise UserError(f"seeds must be whole numbers, got {first!r}", field="--seeds") from None
    if any(seed < 0 for seed in seeds):
        raise UserError(f"seeds must be >= 0, got {seeds}", field="--seeds")
    return seeds


@main.command()
@click.argument("run", type=click.Path(file_okay=False, exists=True, path_type=Path))
@progress_option
def resume(run, progress):
    """Continue a killed run at the generation it was in (finished evaluations are re-used)."""
    from evolalloc.pipeline.run import resume_run
    from evolalloc.report.summary import show_run

    resume_run(run, progress=progress)
    click.echo(show_run(run))


@main.command()
@click.argument("allocations", nargs=-1, required=True, metavar="ALLOCATION...")
@click.option("--recipe", "recipe_path", type=click.Path(dir_okay=False, exists=True, path_type=Path), help="Recipe giving model and task.")
@click.option("--run", "run_dir", type=click.Path(file_okay=False, exists=True, path_type=Path), help="Run folder whose recipe gives model and task.")
@set_option
@click.option("--split", type=click.Choice(["search", "heldout"]), default="heldout", show_default=True)
@click.option("--budget", type=float, default=None, help="Target c for a baseline (default: the recipe's).")
@click.option("--quiet", is_flag=True, help="Only the summary line of each, not every instance's prediction.")
@progress_option
def evaluate(allocations, recipe_path, run_dir, overrides, split, budget, quiet, progress):
    """Score each ALLOCATION on a task split: a JSON file, a registered method at --budget (e.g.
    uniform, pyramid+adakv, cake), or `full` (the uncompressed cache).

    The split is prefilled once for all of them. Prints each instance's prediction (unless
    --quiet) and, per allocation, the mean score with a 95% bootstrap interval.
    """
    from evolalloc.core.allocation_file import load_allocation
    from evolalloc.core.baselines import BASELINES
    from evolalloc.pipeline.experiment import Experiment
    from evolalloc.report.stats import bootstrap_mean

    from evolalloc.config.run_folder import CURATION_FILE

    recipe = _recipe(recipe_path, run_dir, overrides)
    methods = BASELINES.load_all()
    # The split is prefilled once with every ranking the named methods need (gates, streaming...).
    recipe.baselines = list(dict.fromkeys([*recipe.baselines, *(name for name in allocations if name in methods)]))
    curation = run_dir / CURATION_FILE if run_dir else None  # a run's curated splits, as it used them
    summaries = []
    # Files are read (and refused) before anything is evaluated; their geometry is checked below.
    for name in allocations:
        if name != FULL_CACHE and name not in methods:
            load_allocation(name)
    with Experiment(recipe, progress=progress, curation_file=curation, run_dir=run_dir) as experiment:
        for name in allocations:
            if name == FULL_CACHE:  # every unit may keep every position: nothing is evicted
                chosen = experiment.baseline("uniform", experiment.geometry.max_positions)
            elif name in methods:
                chosen = experiment.baseline(name, budget or recipe.budget.target)
            else:
                chosen = load_allocation(name, expect_geometry=experiment.geometry)
            (result,) = experiment.evaluator(split, experiment.scorer_for(chosen)).evaluate([chosen.budgets])
            if not result.ok:
                raise click.ClickException(f"evaluation of {name} failed: {result.error}")
            if not quiet:
                for outcome in result.instances:
                    click.echo(f"{outcome.uid:40s} score {outcome.score:.2f}  {outcome.prediction!r}")
            interval = bootstrap_mean([o.score for o in result.instances], seed=recipe.seed)
            what = "the full cache" if name == FULL_CACHE else f"c = {chosen.target:g}"
            summaries.append(f"{name} ({what}, scorer {chosen.scorer}) on {recipe.task_names}/{split}: "
                             f"mean {interval.mean:.3f}, 95% CI [{interval.low:.3f}, {interval.high:.3f}], n = {interval.n}")
            click.echo(summaries[-1])  # as soon as it is known: a later failure loses nothing printed
    if not quiet and len(summaries) > 1:
        click.echo("\n".join(summaries))


FULL_CACHE = "full"


@main.command()
@click.argument("run", type=click.Path(file_okay=False, exists=True, path_type=Path))
@click.option("--baselines", "baselines", default=None,
              help="Comma-separated methods to compare with instead of the recipe's, e.g. "
                   "uniform,pyramid,streaming,uniform+adakv,pyramid+adakv,evolved+adakv,cake,gates")
@progress_option
def compare(run, baselines, progress):
    """Re-run the held-out comparison of RUN's profiles vs the baselines and rewrite its report."""


    from evolalloc.core.allocation_file import load_allocation
    from evolalloc.pipeline.experiment import Experiment
    from evolalloc.pipeline.run import compare as compare_profiles
    from evolalloc.config.run_folder import CURATION_FILE, load_run_recipe
    from evolalloc.report.summary import allocation_files, show_run

    recipe = load_run_recipe(run)
    if baselines is not None:
        recipe.baselines = _baseline_list(baselines)
    files = allocation_files(run)
    if not files:
        raise click.ClickException(f"{run} has no allocation-c*.json yet: finish the search first (evolalloc resume {run})")
    with Experiment(recipe, progress=progress, curation_file=run / CURATION_FILE, run_dir=run) as experiment:
        profiles = {budget: load_allocation(path, expect_geometry=experiment.geometry) for budget, path in files.items()}
        compare_profiles(run, recipe, experiment, profiles)
    click.echo(show_run(run))


@main.command()
@click.argument("allocation", type=click.Path(dir_okay=False, exists=True, path_type=Path))
@click.option("--to", "targets", type=float, multiple=True, required=True, help="New target average budget (repeatable).")
@click.option("--min-budget", default=1, show_default=True, help="No budget goes below this (nor below the tokens the scorer always keeps).")
@click.option("--rule", type=click.Choice(["proportional", "additive"]), default="proportional", show_default=True,
              help="proportional: every budget times c'/c (EvolKV); additive: every unit gains c'-c tokens.")
@click.option("-o", "--out-dir", type=click.Path(file_okay=False, path_type=Path), default=None, help="Default: beside ALLOCATION.")
def expand(allocation, targets, min_budget, rule, out_dir):
    """Carry a profile to larger budgets by EvolKV's proportional rule or the additive one (no new search).

    Only larger budgets: a profile searched at c says nothing about where a smaller cache
    should go (the always-kept tokens take a larger share of it); search at that budget instead.
    Every target is checked before any file is written.
    """
    from evolalloc.core.allocation_file import load_allocation, save_allocation
    from evolalloc.config.run_folder import allocation_filename

    source = load_allocation(allocation)
    floor = max(min_budget, expansion_floor(source, str(allocation)))
    paths = []
    for target in targets:
        check_expansion(target, source.target, floor, source.scorer, where=str(allocation), field="--to")
        path = (out_dir or allocation.parent) / allocation_filename(target)
        if path.exists():
            raise click.ClickException(f"{path} exists; not overwriting it (use --out-dir)")
        paths.append(path)
    for target, path in zip(targets, paths):
        save_allocation(source.expand(target, min_budget=floor, rule=rule), path)
        click.echo(f"wrote {path}")


def _export_formats() -> list[str]:
    from evolalloc.export import exporters  # lazy registry: lists names without importing the formats

    return exporters.names()


def _targets(_ctx, _param, value):
    if value is None:
        return None
    try:
        return [float(v) for v in value.split(",") if v.strip()]
    except ValueError:
        raise click.BadParameter(f"expected comma-separated numbers, got {value!r}") from None


def expansion_floor(source, where: str) -> int:
    """The smallest budget the profile's scorer can honour: the tokens it always keeps (at least 1)."""
    from evolalloc.core.errors import UserError
    from evolalloc.runtime.scorers import get_scorer

    try:
        scorer = get_scorer(source.scorer, **source.scorer_params)
    except ValueError as err:
        raise UserError(str(err), source=where, field="scorer") from None
    return max(1, scorer.always_kept)


def check_expansion(target: float, searched: float, floor: int, scorer: str, *, where: str, field: str) -> None:
    """Refuse an expansion target that is not larger than the searched one, or below ``floor``."""
    from evolalloc.core.errors import UserError

    if not target > searched:
        raise UserError(f"{target:g} is not above the searched target {searched:g}: a profile is only carried to "
                        f"larger budgets; search at {target:g} instead", source=where, field=field)
    if target < floor:
        raise UserError(f"{target:g} is below the {floor} tokens every unit must keep (scorer {scorer} always "
                        f"keeps {floor}, or --min-budget)", source=where, field=field)


@main.command()
@click.argument("allocation", type=click.Path(dir_okay=False, exists=True, path_type=Path))
@click.option("--format", "fmt", type=click.Choice(_export_formats()), default="kvpress", show_default=True)
@click.option("--context-length", type=int, default=None, help="kvpress / curve: express budgets as ratios of a prompt of this length.")
@click.option("--targets", callback=_targets, default=None, metavar="C1,C2,...", help="curve: the average budgets of the family (default: the target and 2x, 4x).")
@click.option("--sink-tokens", type=int, default=None, help="trtllm: sink_token_length (default: what the profile was searched with).")
@click.option("--curves", type=click.Path(dir_okay=False, exists=True, path_type=Path), default=None,
              help="lukv: a run's lukv-curves.npz; each row is then LU-KV's own greedy, not the profile rescaled.")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), default=None, help="Default: print to stdout.")
def export(allocation, fmt, context_length, targets, sink_tokens, curves, output):
    """Export a profile for a serving stack, in that stack's own terms (see docs/shipping.md)."""
    from evolalloc.core.allocation_file import load_allocation
    from evolalloc.export import export_allocation, export_text

    source = load_allocation(allocation)
    options = dict(context_length=context_length, targets=targets, sink_tokens=sink_tokens, curves=curves)
    if output is None:
        click.echo(export_text(source, fmt, **options), nl=False)
    else:
        click.echo(f"wrote {export_allocation(source, fmt, output, **options)}")


@main.command()
@click.argument("run", type=click.Path(file_okay=False, exists=True, path_type=Path))
def show(run):
    """Summarise a run folder: what was searched, the profiles, the comparison."""
    from evolalloc.report.summary import show_run

    click.echo(show_run(run))


def _recipe(recipe_path, run_dir, overrides):
    from evolalloc.config.recipe import load_recipe
    from evolalloc.config.run_folder import load_run_recipe

    if bool(recipe_path) == bool(run_dir):
        raise click.UsageError("give exactly one of --recipe or --run")
    if recipe_path:
        return load_recipe(recipe_path, overrides)
    if overrides:
        raise click.UsageError("--set goes with --recipe, not --run")
    return load_run_recipe(run_dir)


def _baseline_list(text: str) -> list[str]:
    """``--baselines`` as a list of registered methods (``UserError`` with did-you-mean otherwise)."""
    from named_registry import UnknownNameError

    from evolalloc.core.baselines import BASELINES
    from evolalloc.core.errors import UserError

    names = [name.strip() for name in text.split(",") if name.strip()]
    for name in names:
        try:
            BASELINES.check_name(name)
        except UnknownNameError as err:
            raise UserError(str(err), field="--baselines") from None
        problem = BASELINES.create(name).problem()
        if problem:
            raise UserError(problem, field="--baselines")
    if len(set(names)) != len(names):
        raise UserError("a method is listed twice", field="--baselines")
    return names
