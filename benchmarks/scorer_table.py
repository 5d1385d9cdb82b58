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
tests can be computed from it. It is written after each scorer; run again with the same setting, the call
reads back the scorers already there and scores only the rest (a killed call loses one scorer's work).
``--split search`` is the search split (curated as the recipe says); the held-out split is read only when
asked for.
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


def earlier_rows(out: Path, setting: dict) -> dict:
    """The rows a killed call with the same setting left in ``out`` (resumed, not scored again);
    empty rows when there is no such file. A file made with another setting is an error, not overwritten."""
    empty = {"scores": {}, "metrics": {}, "greedy_prefix": {}, "seconds": {}, "scorers": []}
    if not out.exists():
        return empty
    from evolalloc.core.errors import UserError

    try:
        data = json.loads(out.read_text())
    except (OSError, ValueError) as err:
        raise UserError(f"cannot read it to resume: {err}", source=str(out)) from None
    differs = [k for k, v in setting.items() if data.get(k) != v]
    if differs:
        raise UserError(f"holds another table ({', '.join(differs)} differ); remove it or choose another --out",
                        source=str(out))
    return {k: data.get(k, default) for k, default in empty.items()}


def write_atomically(path: Path, data: dict) -> None:
    """``data`` as JSON at ``path``, never half-written (a temporary file renamed over it)."""
    part = path.with_name(path.name + ".part")
    part.write_text(json.dumps(data, indent=1) + "\n")
    part.replace(path)


def main(argv=None) -> int:
    from evolalloc.config.recipe import load_recipe
    from evolalloc.core.errors import UserError

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
    setting = {"recipe": str(args.recipe), "overrides": args.overrides, "split": args.split, "budgets": budgets,
               "modes": modes}
    try:
        data = earlier_rows(args.out, setting)
    except UserError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    earlier = dict(zip(scorer_labels(data["scorers"]), data["scorers"]))
    changed = [label for label, spec in zip(scorers, specs) if earlier.get(label, spec) != spec]
    if changed:
        print(f"error: {args.out}: its row {changed[0]!r} was made by {earlier[changed[0]]!r}, not by the "
              f"--scorers given; remove the file or choose another --out", file=sys.stderr)
        return 2
    data["scorers"] = [spec for spec in data["scorers"] if spec not in specs] + specs
    for field in ("scores", "metrics"):
        for mode in modes:
            data[field].setdefault(mode, {})
    todo = {label: scorer for label, scorer in scorers.items() if label not in data["scores"][modes[-1]]}
    if len(todo) < len(scorers):
        print(f"{len(scorers) - len(todo)} scorer(s) read back from {args.out}: " +
              ", ".join(label for label in scorers if label not in todo), flush=True)

    def save() -> None:
        write_atomically(args.out, {**setting, **data})

    if todo:
        score_rows(recipe, args.split, todo, budgets, modes, data, save)
    save()
    print(f"per-instance scores: {args.out}")
    return 0


def score_rows(recipe, split: str, todo: dict, budgets: list[int], modes: list[str], data: dict, save) -> None:
    """Each scorer in ``todo`` at every budget and mode on one prefill of the split, into ``data``;
    ``save()`` after each scorer, so a killed call loses only the scorer it was on."""
    from evolalloc.core.baselines import make_baseline
    from evolalloc.pipeline.experiment import Experiment

    uniform = make_baseline("uniform")
    with Experiment(recipe, progress=False, bounded=False) as experiment:
        experiment.run.scorers.extra = list(todo.values())  # before the first records are made
        geometry = experiment.geometry
        for label, scorer in todo.items():
            allocations = [uniform.allocation(geometry, c, model=recipe.model.spec, scorer=scorer.name,
                                              scorer_params=scorer.params(), reserved=scorer.always_kept)
                           for c in budgets]
            for mode in modes:
                started = time.perf_counter()
                results = experiment.evaluator(split, scorer, mode=mode).evaluate([a.budgets for a in allocations])
                data["seconds"][f"{label} ({mode})"] = round(time.perf_counter() - started, 1)
                for c, result in zip(budgets, results):
                    if not result.ok:
                        raise RuntimeError(f"{label} at c={c} ({mode}) failed: {result.error}")
                    data["scores"][mode].setdefault(label, {})[str(float(c))] = {
                        o.uid: o.score for o in result.instances}
                    data["metrics"][mode].setdefault(label, {})[str(float(c))] = {
                        o.uid: o.metric for o in result.instances}
                    if all(o.greedy_prefix is not None for o in result.instances):
                        data["greedy_prefix"].setdefault(mode, {}).setdefault(label, {})[str(float(c))] = {
                            o.uid: o.greedy_prefix for o in result.instances}
                print(f"{label} ({mode}): " + ", ".join(
                    f"c={c}: {sum(v.values()) / len(v):.3f}" for c, v in data["scores"][mode][label].items()),
                    flush=True)
            save()


if __name__ == "__main__":
    sys.exit(main())
