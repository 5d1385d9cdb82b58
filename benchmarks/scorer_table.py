"""Uniform budgets ranked by each of several scorers, on one prefill of a recipe's split: per-instance scores.

    python benchmarks/scorer_table.py results/decode-time/recipes/decode_prose.yaml \\
        --scorers snapkv,h2o,tova,streaming,learned@/path/kvpolicy.pt,ppo-policy@/path/ppo-s0.pt \\
        --budgets 96,160 --split heldout --modes generate,fidelity --out scorers.json

The comparison of per-token scorers (issue 52 item 4: the PPO policy beside H2O, TOVA, SnapKV,
StreamingLLM and KV Policy): every scorer gets the same uniform budgets, the same prompts and the
recipe's ``budget.decode`` (budgets held while decoding, when the recipe sets it). ``NAME@PATH`` gives
a trained scorer its checkpoint. Each (scorer, budget) is one evaluation of the split per mode;
``--out`` keeps every per-instance score (``{"scores": {mode: {scorer: {budget: {uid: score}}}},
"metrics": ..., "greedy_prefix": ...}``, the last for a task judged against the full cache) so paired
tests can be computed from it. ``--split search`` is the search split (curated as the recipe says); the
held-out split is read only when asked for.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path


def parse_scorer(spec: str):
    """``name`` or ``name@checkpoint`` -> a built scorer."""
    from evolalloc.runtime.scorers import get_scorer

    name, _, checkpoint = spec.partition("@")
    return get_scorer(name.strip(), **({"checkpoint": checkpoint.strip()} if checkpoint else {}))


def scorer_labels(specs: list[str]) -> list[str]:
    """Each spec's row name: the scorer's name, or ``name (checkpoint stem)`` where several specs share
    a name (3 training seeds of one policy are 3 rows, not one); a spec given twice is an error."""
    names = [spec.partition("@")[0].strip() for spec in specs]
    labels = []
    for spec, name in zip(specs, names):
        checkpoint = spec.partition("@")[2].strip()
        labels.append(f"{name} ({Path(checkpoint).stem or checkpoint})" if checkpoint and names.count(name) > 1
                      else name)
    for label in labels:
        if labels.count(label) > 1:
            raise ValueError(f"--scorers gives {label!r} twice")
    return labels


def main(argv=None) -> int:
    from evolalloc.config.recipe import load_recipe
    from evolalloc.core.baselines import make_baseline
    from evolalloc.core.errors import UserError
    from evolalloc.pipeline.experiment import Experiment

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("recipe", type=Path)
    parser.add_argument("--scorers", required=True, help="comma-separated, NAME or NAME@CHECKPOINT")
    parser.add_argument("--budgets", required=True, help="uniform budgets c, comma-separated")
    parser.add_argument("--split", choices=("search", "heldout"), default="heldout")
    parser.add_argument("--modes", default="generate", help="comma-separated fitness modes, e.g. generate,fidelity")
    parser.add_argument("--set", dest="overrides", action="append", default=[])
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    try:
        recipe = load_recipe(args.recipe, args.overrides)
        specs = [spec for spec in args.scorers.split(",") if spec.strip()]
        scorers = dict(zip(scorer_labels(specs), map(parse_scorer, specs)))
        budgets = [int(b) for b in args.budgets.split(",")]
        modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    except (UserError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    recipe.baselines = []  # only the scorers asked for are ranked at prefill
    uniform = make_baseline("uniform")
    scores = {m: {} for m in modes}
    metrics = {m: {} for m in modes}
    prefixes = {}  # a task judged against the full cache: each greedy answer's greedy_prefix, per mode
    seconds = {}
    with Experiment(recipe, progress=False, bounded=False) as experiment:
        experiment.run.scorers.extra = list(scorers.values())  # before the first records are made
        geometry = experiment.geometry
        for label, scorer in scorers.items():
            allocations = [uniform.allocation(geometry, c, model=recipe.model.spec, scorer=scorer.name,
                                              scorer_params=scorer.params(), reserved=scorer.always_kept)
                           for c in budgets]
            for mode in modes:
                started = time.perf_counter()
                results = experiment.evaluator(args.split, scorer, mode=mode).evaluate([a.budgets for a in allocations])
                seconds[f"{label} ({mode})"] = round(time.perf_counter() - started, 1)
                for c, result in zip(budgets, results):
                    if not result.ok:
                        raise RuntimeError(f"{label} at c={c} ({mode}) failed: {result.error}")
                    scores[mode].setdefault(label, {})[str(float(c))] = {o.uid: o.score for o in result.instances}
                    metrics[mode].setdefault(label, {})[str(float(c))] = {o.uid: o.metric for o in result.instances}
                    if all(o.greedy_prefix is not None for o in result.instances):
                        prefixes.setdefault(mode, {}).setdefault(label, {})[str(float(c))] = {
                            o.uid: o.greedy_prefix for o in result.instances}
                print(f"{label} ({mode}): " + ", ".join(
                    f"c={c}: {sum(v.values()) / len(v):.3f}" for c, v in scores[mode][label].items()), flush=True)
    args.out.write_text(json.dumps({"recipe": str(args.recipe), "overrides": args.overrides, "split": args.split,
                                    "budgets": budgets, "scorers": args.scorers.split(","), "scores": scores,
                                    "metrics": metrics, "greedy_prefix": prefixes, "seconds": seconds},
                                   indent=1) + "\n")
    print(f"per-instance scores: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
