"""Every expansion rule of finished runs' searched profiles, scored on their SEARCH split.

``budget.expansion_rule: search`` picks a rule per budget inside a run; this does the same for runs
that already shipped (one rule, chosen before the rule existed), so the choice between
``proportional``, ``additive`` and ``topup`` is made on the search split only, for every seed::

    python benchmarks/expansion_rules.py RUNS/design_number_hybrid-s0 RUNS/design_number_hybrid-s1 \\
        RUNS/design_number_hybrid-s2 --budgets 48,64 --ship RUNS/reshipped --out RUNS/rules.json

For each run and budget it prints, per rule, the search's own fitness (what rule ``search``
ranks by: the task's default fitness mode, the likelihood of the value on the needle tasks) and
greedy exact-match accuracy, both on the run's curated search prompts. The pick is
``pipeline.expansion.expand_profile``'s (rule ``search``: the best fitness, ties to the first
rule). ``--ship DIR`` writes ``DIR/<run name>/`` with the searched profile and the picked
expansions: a run folder ``benchmarks/design_scores.py --run`` reads. The runs must share one
recipe and search split (seeds of one ``--seeds`` call); their folders are only read. The
held-out split is never prefilled.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from evolalloc.config.recipe import load_recipe
from evolalloc.config.run_folder import (
    CURATION_FILE,
    RECIPE_FILE,
    allocation_filename,
    load_run_recipe,
    searched_profile,
)
from evolalloc.core.allocation_file import save_allocation
from evolalloc.core.budget_list import parse_budgets
from evolalloc.core.errors import UserError
from evolalloc.pipeline.expansion import candidate_rules, expand_profile

SEARCH = "search"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", type=Path, help="finished run folders of one recipe (seeds)")
    parser.add_argument("--budgets", required=True, help="expansion budgets c', comma-separated (e.g. 48,64)")
    parser.add_argument("--ship", type=Path, default=None, help="write each run's profile and picked expansions here")
    parser.add_argument("--out", type=Path, default=None, help="JSON file of every score")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="recipe override (engine.* only)")
    args = parser.parse_args(argv)
    try:
        budgets = parse_budgets(args.budgets, "--budgets")
        scores = score(args.runs, budgets, args.set, args.ship)
    except UserError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if args.out is not None:
        args.out.write_text(json.dumps(scores, indent=2) + "\n")
        print(f"wrote {args.out}")
    return 0


def score(runs: list[Path], budgets: list[float], overrides: list[str], ship: Path | None) -> dict:
    from evolalloc.pipeline.experiment import Experiment

    load_run_recipe(runs[0])  # a UserError for a folder that is not a run
    recipe = load_recipe(runs[0] / RECIPE_FILE, overrides, check_names=False)
    profiles = {run.name: searched_profile(run) for run in runs}
    out: dict = {}
    # The first run's curated search split is every seed's (one --seeds call draws it once).
    with Experiment(recipe, progress=False, bounded=False, curation_file=runs[0] / CURATION_FILE) as experiment:
        experiment.rank_also(list(profiles.values()))

        def evaluator_for(allocation, mode=None):
            return experiment.evaluator(SEARCH, experiment.scorer_for(allocation), mode=mode)

        for name, evolved in profiles.items():
            lines: list[str] = []
            picked = expand_profile(evolved, budgets, SEARCH, experiment.run.scorers.min_budget, evaluator_for(evolved),
                                    echo=lines.append, evaluator_for=evaluator_for)
            out[name] = {}
            for budget, chosen in picked.items():
                fitness = chosen.provenance["expansion_search_scores"]
                accuracy = {}
                for rule in candidate_rules(evolved):
                    candidate = evolved.expand(budget, min_budget=experiment.run.scorers.min_budget, rule=rule)
                    (result,) = evaluator_for(candidate, mode="generate").evaluate([candidate.budgets])
                    if not result.ok:
                        raise RuntimeError(f"{name}: generating with the {rule} expansion "
                                           f"to c={budget:g} failed: {result.error}")
                    accuracy[rule] = float(result.task_score)
                out[name][f"{budget:g}"] = {"fitness": fitness, "accuracy": accuracy,
                                            "picked": chosen.provenance["expansion_rule"]}
                print(f"{name} c={budget:g}: " + ", ".join(f"{r} fitness {fitness[r]:.4f} accuracy {accuracy[r]:.3f}"
                                                           for r in fitness)
                      + f" -> {chosen.provenance['expansion_rule']}", flush=True)
            if ship is not None:
                folder = ship / name
                folder.mkdir(parents=True, exist_ok=True)
                for allocation in [evolved, *picked.values()]:
                    save_allocation(allocation, folder / allocation_filename(allocation.target))
    return out


if __name__ == "__main__":
    sys.exit(main())
