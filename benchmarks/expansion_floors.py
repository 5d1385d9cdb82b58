"""Searched gates profiles expanded with floors of several sizes, scored on a larger SEARCH sample.

``benchmarks/expansion_rules.py`` scores the rules on the run's own 16 curated search prompts, the
ones the profile was fitted on; the 7-digit prose needle's rule picked there (``topup``) lost on
held-out prompts. This scores, for each run's searched profile (``c``) and each ``c'``, the
proportional expansion ``b'`` read by ``gate_floors`` at floor fractions from 1 (``proportional``:
static) down to 0 (the gates' plain global top-k), on ``--search-n`` search-split prompts drawn
without curation (the run's first prompts and more from the same split; the held-out split is
never prefilled), by the search's fitness and greedy accuracy, next to the unsearched
``uniform`` (uniform budgets over the gates) and ``gates`` (global top-k) rows::

    python benchmarks/expansion_floors.py RUNS/design_number_hybrid-s0 RUNS/design_number_hybrid-s1 \\
        RUNS/design_number_hybrid-s2 --budgets 48,64 --search-n 48 --work DIR --set engine.record_memory=0B

The fractions, per ``c'``: ``prop`` 1; ``blend`` (c + (c'-c)/2) / c' (half the new tokens static);
``topup`` c / c' (floors = the searched budgets); ``topup-half`` c / (2 c') (floors = half of them);
``global`` 0. Prefill records spill to ``--work/records`` (re-used by a second call).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path

from evolalloc.config.recipe import load_recipe
from evolalloc.config.run_folder import RECIPE_FILE, load_run_recipe, searched_profile
from evolalloc.core.budget_list import parse_budgets
from evolalloc.core.errors import UserError

SEARCH = "search"


def fractions(c: float, budget: float) -> dict[str, float]:
    """The floor fractions scored at ``budget`` for a profile searched at ``c``."""
    return {"prop": 1.0, "blend": (c + 0.5 * (budget - c)) / budget, "topup": c / budget,
            "topup-half": c / (2 * budget), "global": 0.0}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", type=Path, help="finished run folders of one recipe (seeds)")
    parser.add_argument("--budgets", required=True, help="expansion budgets c', comma-separated")
    parser.add_argument("--search-n", type=int, default=48, help="search-split prompts, uncurated (default 48)")
    parser.add_argument("--work", type=Path, required=True, help="folder for spilled prefill records")
    parser.add_argument("--out", type=Path, default=None, help="JSON file of every score")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="recipe override (engine.*)")
    args = parser.parse_args(argv)
    if args.search_n < 1:
        print(f"error: --search-n: expected a positive count, got {args.search_n}", file=sys.stderr)
        return 2
    try:
        budgets = parse_budgets(args.budgets, "--budgets")
        scores = score(args.runs, budgets, args.search_n, args.work, args.set)
    except UserError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if args.out is not None:
        args.out.write_text(json.dumps(scores, indent=1) + "\n")
        print(f"wrote {args.out}")
    return 0


def score(runs: list[Path], budgets: list[float], search_n: int, work: Path, overrides: list[str]) -> dict:
    from evolalloc.pipeline.experiment import Experiment

    load_run_recipe(runs[0])  # a UserError for a folder that is not a run
    # More prompts of the same search split, uncurated: the held-out split stays untouched.
    overrides = [*overrides, f"task.search.n={search_n}", "task.search.curate.full_cache_solves=false",
                 "task.search.curate.draw=null"]
    recipe = load_recipe(runs[0] / RECIPE_FILE, overrides, check_names=False)
    profiles = {run.name: searched_profile(run) for run in runs}
    work.mkdir(parents=True, exist_ok=True)
    out: dict = {}
    with Experiment(recipe, progress=False, bounded=False, curation_file=work / "curation.json") as experiment:
        experiment.rank_also(list(profiles.values()))
        min_budget = experiment.run.scorers.min_budget

        def both(allocation) -> tuple[float, float]:
            """(the search's fitness, greedy accuracy) of ``allocation`` on the search sample."""
            scorer = experiment.scorer_for(allocation)
            values = []
            for mode in (None, "generate"):
                (result,) = experiment.evaluator(SEARCH, scorer, mode=mode).evaluate([allocation.budgets])
                if not result.ok:
                    raise RuntimeError(f"evaluation failed: {result.error}")
                values.append(float(result.task_score))
            return values[0], values[1]

        for budget in budgets:
            for row in ("uniform", "gates"):
                out[f"{row}@{budget:g}"] = both(experiment.baseline(row, budget))
                print(f"{row} c={budget:g}: fitness {out[f'{row}@{budget:g}'][0]:.4f} "
                      f"accuracy {out[f'{row}@{budget:g}'][1]:.3f}", flush=True)
        for name, evolved in profiles.items():
            for budget in budgets:
                for label, fraction in fractions(evolved.target, budget).items():
                    candidate = evolved.expand(budget, min_budget=min_budget, rule="proportional")
                    if fraction < 1.0:  # 1.0 is the static proportional profile itself
                        candidate = replace(candidate, provenance=dict(
                            candidate.provenance, adapter="gate_floors", adapter_params={"floor_fraction": fraction}))
                    key = f"{name}|{budget:g}|{label}"
                    out[key] = both(candidate)
                    print(f"{name} c={budget:g} {label} (floor fraction {fraction:.3f}): fitness {out[key][0]:.4f} "
                          f"accuracy {out[key][1]:.3f}", flush=True)
    return out


if __name__ == "__main__":
    sys.exit(main())
