"""``search``, ``resume``, ``evaluate``, ``compare``, ``expand``, ``export``, ``show``."""

from __future__ import annotations

from pathlib import Path

import click

from evolalloc.cli import main
from evolalloc.cli.options import progress_option, set_option

COMPARE_CHOICES = ("all", "pick")  # pipeline.seeds.search_seeds(compare=...): a literal, so --help loads no pipeline


@main.command()
@click.argument("recipe", type=click.Path(dir_okay=False, path_type=Path))
@click.argument("more_seeds", nargs=-1, type=int, metavar="")
@set_option
@click.option("--name", default=None, help="Run folder name (default: the recipe's name).")
@click.option("--runs-dir", default="runs", show_default=True, type=click.Path(file_okay=False, path_type=Path),
              help="Where run folders go.")
@click.option("--seeds", "first_seed", type=str, default=None, metavar="S [S ...]",
              help="Search once per optimizer seed (e.g. --seeds 0 1 2): runs NAME-s0, NAME-s1, ... on the same "
                   "instances, then NAME-seeds/summary.md with the spread, and in NAME-seeds/best/ the profiles of "
                   "the seed whose search reached the highest search-split fitness: the ones to ship (advised "
                   "from 4096-token prompts on). Run it again to resume.")
@click.option("--compare", "compare", type=click.Choice(COMPARE_CHOICES), default="all", show_default=True,
              help="With --seeds: compare every seed's profile on the held-out split (the spread), or only the "
                   "picked one (each seed searched and shipped; the held-out prefill and comparison made once).")
@click.option("--plan", "plan_only", is_flag=True,
              help="Print what the run will cost (prefills, evaluations, "
                   "record memory and disk, a time estimate from a "
                   "short calibration on batches of a few search prompts) and stop; nothing is written.")
@progress_option
def search(recipe, more_seeds, overrides, name, runs_dir, first_seed, compare, plan_only, progress):
    """Search a budget profile as RECIPE says, then compare it with the baselines and write a report.

    Checks the recipe, model, datasets and trial store first, then creates runs/<name>/ (never
    overwrites one; a refused start writes nothing). If the run is killed, `evolalloc resume`
    continues it.
    """
    from evolalloc.config.recipe import load_recipe
    from evolalloc.core.errors import UserError
    from evolalloc.core.process_clock import take_command_start
    from evolalloc.pipeline.seeds import pick_advice
    from evolalloc.pipeline.start import start_run
    from evolalloc.report.summary import show_run

    seeds = _seeds(first_seed, more_seeds)
    if compare != "all" and seeds is None:
        raise UserError("--compare pick chooses among the seeds' runs: give --seeds too", field="--compare")
    loaded = load_recipe(recipe, overrides)
    if plan_only:
        from evolalloc.pipeline.plan import plan_run

        for line in plan_run(loaded).lines():
            click.echo(line)
        if seeds is not None:
            click.echo(f"--seeds: {len(seeds)} runs like this one (the prefills and records are made once per run)"
                       if compare == "all" else
                       f"--seeds --compare pick: {len(seeds)} searches like this one (the search split prefilled "
                       f"once per run), the held-out prefill and comparison once, for the pick")
        elif advice := pick_advice(loaded):
            click.echo(advice)
        return
    if seeds is not None:
        from evolalloc.pipeline.seeds import SUMMARY_MD, search_seeds

        folder = search_seeds(loaded, seeds, runs_dir, name, progress=progress, echo=click.echo, compare=compare)
        click.echo((folder / SUMMARY_MD).read_text())
        click.echo(f"summary: {folder / SUMMARY_MD}")
        return
    if advice := pick_advice(loaded):
        click.echo(advice)
    # The session's clock starts when the command did (imports included), not when the run is prepared.
    finished = start_run(loaded, runs_dir, name, progress=progress, started=take_command_start(),
                         on_folder=lambda run_dir: click.echo(f"run folder: {run_dir}"))
    click.echo(show_run(finished.run_dir, finished.experiment.resolved))


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
    from evolalloc.core.process_clock import take_command_start
    from evolalloc.pipeline.run import resume_run, run_finished
    from evolalloc.report.summary import show_run

    if run_finished(run):  # said at once: nothing is loaded
        click.echo(f"{run} is finished (profiles, comparison and report are all there): nothing to resume")
    else:
        resume_run(run, progress=progress, started=take_command_start())
    click.echo(show_run(run))


@main.command()
@click.argument("allocations", nargs=-1, required=True, metavar="ALLOCATION...")
@click.option("--recipe", "recipe_path", type=click.Path(dir_okay=False, exists=True, path_type=Path),
              help="Recipe giving model and task.")
@click.option("--run", "run_dir", type=click.Path(file_okay=False, exists=True, path_type=Path),
              help="Run folder whose recipe gives model and task.")
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
    from evolalloc.pipeline.evaluate import WorkflowError, evaluate_allocations

    recipe = _recipe(recipe_path, run_dir, overrides)
    summaries = []
    try:
        for evaluated in evaluate_allocations(recipe, allocations, split=split, budget=budget, run_dir=run_dir,
                                              progress=progress):
            if not quiet:
                for outcome in evaluated.result.instances:
                    click.echo(f"{outcome.uid:40s} score {outcome.score:.2f}  {outcome.prediction!r}")
            summaries.append(evaluated.summary(recipe.task_names, split))
            click.echo(summaries[-1])  # as soon as it is known: a later failure loses nothing printed
    except WorkflowError as err:
        raise click.ClickException(str(err)) from None
    if not quiet and len(summaries) > 1:
        click.echo("\n".join(summaries))


@main.command()
@click.argument("run", type=click.Path(file_okay=False, exists=True, path_type=Path))
@click.option("--baselines", "baselines", default=None,
              help="Comma-separated methods to compare with instead of the recipe's, e.g. "
                   "uniform,pyramid,streaming,uniform+adakv,pyramid+adakv,evolved+adakv,cake,global-topk")
@progress_option
def compare(run, baselines, progress):
    """Re-run the held-out comparison of RUN's profiles vs the baselines and rewrite its report."""
    from evolalloc.pipeline.evaluate import WorkflowError, compare_run
    from evolalloc.report.summary import show_run

    try:
        compare_run(run, baselines=_baseline_list(baselines) if baselines is not None else None, progress=progress)
    except WorkflowError as err:
        raise click.ClickException(str(err)) from None
    click.echo(show_run(run))


@main.command()
@click.argument("allocation", type=click.Path(dir_okay=False, exists=True, path_type=Path))
@click.option("--to", "targets", type=float, multiple=True, required=True,
              help="New target average budget (repeatable).")
@click.option("--min-budget", default=1, show_default=True,
              help="No budget goes below this (nor below the tokens the scorer always keeps).")
@click.option("--rule", type=click.Choice(["proportional", "additive", "topup", "topup-half"]), default="proportional",
              show_default=True,
              help="proportional: every budget times c'/c (EvolKV); additive: every unit gains c'-c tokens; topup "
                   "(retention-gates only): the profile as per-head floors, the "
                   "c'-c extra tokens per unit to the global top-k; "
                   "topup-half: the same with floors at half the profile.")
@click.option("-o", "--out-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Default: beside ALLOCATION.")
def expand(allocation, targets, min_budget, rule, out_dir):
    """Carry a profile to larger budgets by EvolKV's proportional rule, the additive one or topup (no new search).

    Only larger budgets: a profile searched at c says nothing about where a smaller cache
    should go (the always-kept tokens take a larger share of it); search at that budget instead.
    Every target is checked before any file is written.
    """
    from evolalloc.config.run_folder import allocation_filename
    from evolalloc.core.allocation_file import load_allocation, save_allocation
    from evolalloc.core.errors import UserError
    from evolalloc.core.topup import TOPUP_RULES, topup_problem

    source = load_allocation(allocation)
    floor = max(min_budget, expansion_floor(source, str(allocation)))
    problem = topup_problem(source.scorer, source.provenance.get("adapter"), rule) if rule in TOPUP_RULES else None
    if problem:
        raise UserError(problem, source=str(allocation), field="--rule")
    paths = []
    for target in targets:
        check_expansion(source, target, floor, where=str(allocation), field="--to")
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
    from evolalloc.core.budget_list import parse_budgets

    return None if value is None else parse_budgets(value, "--targets")


def expansion_floor(source, where: str) -> int:
    """The smallest budget the profile's scorer can honour: the tokens it always keeps (at least 1)."""
    from evolalloc.core.errors import UserError
    from evolalloc.runtime.scorers import get_scorer

    try:
        scorer = get_scorer(source.scorer, **source.scorer_params)
    except ValueError as err:
        raise UserError(str(err), source=where, field="scorer") from None
    return scorer.min_budget


def check_expansion(source, target: float, floor: int, *, where: str, field: str) -> None:
    """Refuse an expansion target ``Allocation.expand`` refuses (below the searched one, below
    ``floor``, too large), or the searched target itself (there is nothing to carry)."""
    from evolalloc.core.errors import UserError

    if target == source.target:
        raise UserError(f"{target:g} is not above the searched target {source.target:g}: a profile is only carried "
                        f"to larger budgets; search at {target:g} instead", source=where, field=field)
    try:
        source.check_expansion_target(target, floor)
    except ValueError as err:
        raise UserError(f"{err} (scorer {source.scorer} always keeps {floor}, or --min-budget)"
                        if target < floor and target >= source.target else str(err), source=where,
                        field=field) from None


@main.command()
@click.argument("allocation", type=click.Path(dir_okay=False, exists=True, path_type=Path))
@click.option("--format", "fmt", type=click.Choice(_export_formats()), default="kvpress", show_default=True)
@click.option("--context-length", type=int, default=None,
              help="kvpress / curve: express budgets as ratios of a prompt of this length.")
@click.option("--targets", callback=_targets, default=None, metavar="C1,C2,...",
              help="curve: the average budgets of the family (default: the target and 2x, 4x).")
@click.option("--sink-tokens", type=int, default=None,
              help="trtllm: sink_token_length (default: what the profile was searched with).")
@click.option("--curves", type=click.Path(dir_okay=False, exists=True, path_type=Path), default=None,
              help="lukv: a run's lukv-curves.npz; each row is then LU-KV's own greedy, not the profile rescaled.")
@click.option("--family", type=click.Path(dir_okay=False, exists=True, path_type=Path), default=None,
              help="curve / lukv: a budget.curve run's profile-curve.json; rows then come from its searched curve.")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Default: print to stdout.")
def export(allocation, fmt, context_length, targets, sink_tokens, curves, family, output):
    """Export a profile for a serving stack, in that stack's own terms (see docs/shipping.md)."""
    from evolalloc.core.allocation_file import load_allocation
    from evolalloc.export import export_allocation, export_text

    source = load_allocation(allocation)
    options = dict(context_length=context_length, targets=targets, sink_tokens=sink_tokens, curves=curves,
                   family=family)
    if output is None:
        click.echo(export_text(source, fmt, source=str(allocation), **options), nl=False)
    else:
        click.echo(f"wrote {export_allocation(source, fmt, output, source=str(allocation), **options)}")


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
    """``--baselines`` as a list of method labels: names or compositions' labels (``pyramid+cake``);
    ``UserError`` with did-you-mean otherwise."""
    from evolalloc.core.baselines import make_baseline
    from evolalloc.core.errors import UserError
    from evolalloc.core.scorer_names import reads_checkpoint
    from evolalloc.runtime.adaptive import ADAPTERS

    names, labels = [name.strip() for name in text.split(",") if name.strip()], []
    for name in names:
        try:
            method = make_baseline(name)
        except ValueError as err:  # an unknown method, with did-you-mean
            raise UserError(str(err), field="--baselines") from None
        if method.adapter is not None and method.adapter[0] not in ADAPTERS.load_all():
            raise UserError(f"{name}: unknown adapter {method.adapter[0]!r}; known: "
                            f"{', '.join(sorted(ADAPTERS.load_all()))}", field="--baselines")
        # One ranking with a trained scorer reads the run's checkpoints: checked with its recipe (compare_run).
        problem = method.problem() if method.scorer is None or not reads_checkpoint(method.scorer[0]) else None
        if problem:
            raise UserError(problem, field="--baselines")
        labels.append(method.name)  # its one label: uniform+cake is cake
    if len(set(labels)) != len(labels):
        raise UserError("a method is listed twice", field="--baselines")
    return labels
