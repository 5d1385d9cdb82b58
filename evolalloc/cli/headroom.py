"""``evolalloc bench headroom``: uniform-with-a-scorer against the full cache over a grid of
budgets, on a recipe's search split only (``pipeline/headroom.py``)."""

from __future__ import annotations

from pathlib import Path

import click

from evolalloc.cli.bench import bench
from evolalloc.cli.search_cmds import progress_option, set_option


@bench.command("headroom")
@click.argument("recipe", type=click.Path(dir_okay=False, exists=True, path_type=Path))
@click.option("--scorers", default=None,
              help="Scorers, comma-separated (default: the recipe's), e.g. snapkv,retention-gates.")
@click.option("--budgets", default="8,16,32,64,128,256", show_default=True, help="Uniform budgets c, comma-separated.")
@click.option("--floors", default="",
              help="With the retention-gates scorer: also the floors blend (floors_under_global_topk) over uniform "
                   "budgets at these floor fractions, comma-separated, e.g. 0.25,0.5,0.75.")
@click.option("--json", "json_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Also write the grid as JSON (its scores, the full cache's, the recipe, the prompt length).")
@set_option
@progress_option
def bench_headroom_cmd(recipe, scorers, budgets, floors, json_path, overrides, progress):
    """Where a search has room: on the recipe's SEARCH split only (the held-out split is never
    read), the score of uniform budgets with each scorer at every c, next to the full cache."""
    from evolalloc.config.recipe import load_recipe
    from evolalloc.core.budget_list import parse_budgets
    from evolalloc.core.errors import UserError
    from evolalloc.pipeline.headroom import measure_headroom

    grid = sorted(set(parse_budgets(budgets, "--budgets", whole=True)))
    try:
        fractions = [float(f) for f in floors.split(",") if f.strip()]
    except ValueError:
        raise UserError(f"must be numbers separated by commas; got {floors!r}", field="--floors") from None
    if any(not 0 <= f <= 1 for f in fractions):
        raise UserError(f"floor fractions must be in [0, 1]; got {floors!r}", field="--floors")
    loaded = load_recipe(recipe, overrides)
    names = [s.strip() for s in (scorers or loaded.scorer.name).split(",") if s.strip()]
    result = measure_headroom(loaded, names, grid, progress=progress, floors=fractions)
    for line in result.lines():
        click.echo(line)
    if json_path is not None:
        import dataclasses
        import json

        from evolalloc.core.fileio import write_atomic

        data = {**dataclasses.asdict(result), "recipe": str(recipe), "overrides": list(overrides),
                "context_tokens": loaded.task.context_tokens if not loaded.multi_task else None,
                "model": loaded.model.spec}
        write_atomic(json_path, json.dumps(data, indent=1) + "\n")
        click.echo(f"grid: {json_path}")
