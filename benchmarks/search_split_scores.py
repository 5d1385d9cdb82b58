"""Every profile of several runs scored on OTHER prompts of the SEARCH split, never the held-out one.

Choosing how a profile should reach larger budgets — expanding the one searched at ``c``,
searching each budget, or a searched curve — is a choice, so it must not read the held-out split
(results/long-context-4k, item 2). ``search_versus.py --held-in`` scores only each run's profile at
its searched ``c``; this scores every ``allocation-c*.json`` of every run, with its own scorer and
adapter, on ``--n`` prompts of the recipe's search split drawn with instance seed ``--seed``
(uncurated: the full cache's misses count against every row alike; a seed other than the
search's own gives prompts the searches did not fit), next to the full cache and uniform SnapKV::

    python benchmarks/search_split_scores.py results/long-context-4k/recipes/long_context_4k_number.yaml \\
        --run E-s0=RUNS/lc4k-number-cma-s0 --run K-s0=RUNS/lc4k-number-curve-cma-s0 ... \\
        --seed 77 --n 48 --out RUNS/lc4k-number-item2.json

The output has ``design_scores.py``'s format (``comparison.json``'s, per-instance scores under
``"instances"``, ``meta.split`` = ``"search"``), so ``design_table.py --scores`` pairs its rows.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path

from evolalloc.config.recipe import load_recipe
from evolalloc.core.allocation_file import load_allocation
from evolalloc.core.baselines import make_baseline
from evolalloc.core.errors import UserError
from evolalloc.pipeline.run import by_scorer
from evolalloc.report.comparison import compare_scores, save_comparison
from evolalloc.runtime.scorers import get_scorer

SEARCH = "search"  # the only split this reads
SNAPKV = "snapkv"


def _design_scores():
    """``benchmarks/design_scores.py``, for its run-folder helpers (the folder is not a package)."""
    spec = importlib.util.spec_from_file_location("design_scores", Path(__file__).with_name("design_scores.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def other_search_prompts(recipe_path: Path, seed: int, n: int, overrides: list[str]):
    """The recipe with its search split replaced by ``n`` uncurated prompts of instance seed ``seed``."""
    return load_recipe(recipe_path, overrides=[*overrides, f"task.search.seed={seed}", f"task.search.n={n}",
                                                "task.search.curate.full_cache_solves=false",
                                               "task.search.curate.draw=null"])


def score(args):
    from evolalloc.pipeline.experiment import Experiment

    helpers = _design_scores()
    recipe = other_search_prompts(args.recipe, args.seed, args.n, args.set)
    recipe.scorer.name, recipe.scorer.params, recipe.scorer.train = SNAPKV, {}, None
    recipe.baselines = []  # nothing but the rows below is ranked
    profiles = helpers.run_profiles(helpers.labelled(args.run, "--run"))
    budgets = sorted({budget for files in profiles.values() for budget in files})
    rows = {label: {budget: load_allocation(path) for budget, path in files.items()}
            for label, files in profiles.items()}
    curation = args.work / "curation.json" if args.work is not None else None
    with Experiment(recipe, progress=False, bounded=False, curation_file=curation) as experiment:
        reserved = get_scorer(SNAPKV).always_kept
        rows = {"uniform": {b: make_baseline("uniform").allocation(experiment.geometry, b, model=recipe.model.spec,
                                                                   scorer=SNAPKV,
                                                                   scorer_params={}, reserved=reserved)
                            for b in budgets}, **rows}
        experiment.rank_also([next(iter(per_budget.values())) for per_budget in rows.values()])
        full = experiment.baseline("uniform", experiment.geometry.max_positions)
        (result,) = experiment.evaluator(SEARCH, experiment.scorer_for(full)).evaluate([full.budgets])
        full_scores = helpers._per_uid(result, "full")
        scores = {"full": {b: dict(full_scores) for b in budgets}}
        for method, per_budget in rows.items():
            scores[method] = {}
            for scorer, group in by_scorer(per_budget):
                results = experiment.evaluator(SEARCH, scorer).evaluate([a.budgets for a in group.values()])
                scores[method].update({b: helpers._per_uid(r, method) for b, r in zip(group, results)})
            scores[method] = dict(sorted(scores[method].items()))
            print(f"scored {method}: " + ", ".join(f"c={b:g} {sum(s.values()) / len(s):.3f}"
                                                   for b, s in scores[method].items()),
                  flush=True)
        label = experiment.label
        meta = {"split": SEARCH, "instance seed": args.seed, "instances": len(full_scores), "task": label,
                "scored by": "greedy generation, each task's metric"}
    return compare_scores(scores, reference="full"), meta, {label: scores}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("recipe", type=Path, help="the runs' recipe (model, task, context length)")
    parser.add_argument("--run", action="append", required=True, metavar="LABEL=RUN",
                        help="a run's profiles (repeatable)")
    parser.add_argument("--seed", type=int, required=True,
                        help="instance seed of the search-split prompts (not the search's own)")
    parser.add_argument("--n", type=int, required=True, help="search-split prompts scored")
    parser.add_argument("--out", type=Path, required=True, help="comparison.json-format file to write")
    parser.add_argument("--work", type=Path, default=None,
                        help="folder for spilled prefill records (re-used by a later call)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="recipe override")
    args = parser.parse_args(argv)
    try:
        if args.n < 1:
            raise UserError(f"must be at least 1, got {args.n}", field="--n")
        rows, meta, scores = score(args)
    except UserError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    save_comparison(rows, args.out, meta=meta, scores=scores)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
