"""Which label-free fitness tracks greedy agreement: every fidelity mode and the greedy answer, on one set of
profiles, on a recipe's SEARCH split (never the held-out one).

    python benchmarks/fidelity_proxies.py results/decode-time/recipes/decode_prose.yaml \\
        --runs results/decode-time/runs/dt-best-s0 results/decode-time/runs/dt-best-s1 ... \\
        --shard 0/2 --out results/decode-fidelity/proxies-0.json
    python benchmarks/fidelity_proxies.py --report results/decode-fidelity/proxies-*.json

The profiles, all at the recipe's ``budget.target`` c (``profiles()``): uniform and PyramidKV; ``--per-run``
of each run's evaluated candidates at c, evenly spaced by their rank in its search's fitness (what a
search has to rank; the last is its best, the profile it shipped at c); ``--random``
profiles whose per-layer budgets are c times log-normal ratios (sigma ``--sigma``, seed ``--seed``), for
a spread the searches did not make. Each profile is scored per instance in every fitness mode of
``fitness.task.FIDELITY_MODES`` (one teacher-forced forward each) and by its greedy answer in the
recipe's task metric, with the recipe's ``budget.decode``. ``--shard K/N`` scores every N-th profile
from the K-th (two processes, one core each); the output is written after every ``--chunk`` profiles and
a call with the same setting resumes from it.

``--report`` reads the shards: per mode, Spearman's rank correlation over the profiles of its mean score
with the mean greedy agreement (what a search's ranking needs), Pearson's over (profile, instance) pairs,
and the agreement of the profile the mode ranks first.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from evolalloc.core.errors import UserError

sys.path.insert(0, str(Path(__file__).parent))
from json_input import read_json_object  # noqa: E402 - sibling scripts, not a package
from scorer_table import write_atomically  # noqa: E402

GENERATE = "generate"
ORIGIN = "benchmarks/fidelity_proxies.py"


def trial_profiles(run: Path, target: float, count: int) -> dict[str, np.ndarray]:
    """``count`` of ``run``'s completed candidates at ``target``, evenly spaced by fitness rank (best and worst
    included), named ``RUN#trial``; the start methods' own trials (labelled) are left to the named rows."""
    import shutil
    import tempfile

    import optuna

    copy = Path(tempfile.mkdtemp()) / "study.db"  # read from a copy: the run's store is left as it was
    shutil.copyfile(run / "study.db", copy)
    storage = f"sqlite:///{copy}"
    trials = []
    for name in optuna.get_all_study_names(storage):
        for trial in optuna.load_study(study_name=name, storage=storage).get_trials(deepcopy=False):
            attrs = trial.user_attrs
            if (trial.state.name == "COMPLETE" and "budgets" in attrs and "label" not in attrs
                    and abs(float(attrs.get("mean_budget", target)) - target) < 1e-6):
                trials.append((trial.value, trial.number, np.array(attrs["budgets"], dtype=np.int64)))
    trials.sort(key=lambda t: (t[0], t[1]))
    picks = sorted({round(i) for i in np.linspace(0, len(trials) - 1, count)}) if trials and count else []
    return {f"{run.name}#{trials[i][1]}": trials[i][2] for i in picks}


def random_profiles(shape: tuple[int, int], target: float, count: int, sigma: float, seed: int,
                    floor: int = 1) -> dict:
    """Per-layer budgets ``target * r_l / mean(r)`` with ``log r_l ~ N(0, sigma)``, every head of a layer alike,
    raised to ``floor`` (the scorer's always-kept tokens: no cache holds fewer) and rounded so that the mean is
    ``target`` exactly where it can be (what the floor and the rounding add is taken from the largest layer)."""
    rng = np.random.default_rng(seed)
    layers, heads = shape
    out = {}
    for k in range(count):
        ratios = np.exp(rng.normal(0.0, sigma, size=layers))
        budgets = np.maximum(floor, np.round(target * ratios / ratios.mean())).astype(np.int64)
        budgets[np.argmax(budgets)] += int(round(target * layers)) - int(budgets.sum())
        out[f"random-{k}"] = np.repeat(budgets[:, None], heads, axis=1)
    return out


def profiles(experiment, recipe, runs: list[Path], per_run: int, random: int, sigma: float, seed: int) -> dict:
    """Name -> budgets ``[layers, kv_heads]``, in a fixed order (the module docstring's list)."""
    target = float(recipe.budget.target)
    out = {name: np.asarray(experiment.baseline(name, target).budgets) for name in ("uniform", "pyramid")}
    shape = out["uniform"].shape
    for run in runs:
        out.update(trial_profiles(run, target, per_run))
    out.update(random_profiles(shape, target, random, sigma, seed, floor=experiment.scorer.min_budget))
    return {name: np.broadcast_to(b.reshape(b.shape[0], -1), shape).copy() for name, b in out.items()}


def score(args) -> int:
    from evolalloc.config.recipe import load_recipe
    from evolalloc.pipeline.experiment import Experiment
    from fitness.task import FIDELITY_MODES

    recipe = load_recipe(args.recipe, args.set)
    recipe.baselines = []
    shard, _, shards = args.shard.partition("/")
    if not (shard.isdigit() and shards.isdigit() and int(shard) < int(shards)):
        raise UserError(f"{args.shard!r}: expected K/N with 0 <= K < N", field="--shard")
    shard, shards = int(shard), int(shards)
    setting = {"recipe": str(args.recipe), "overrides": args.set, "runs": [str(r) for r in args.runs],
               "per_run": args.per_run, "random": args.random, "sigma": args.sigma, "seed": args.seed,
               "shard": args.shard}
    data = {"profiles": {}}
    if args.out.exists():
        data = read_json_object(args.out, "profiles", ORIGIN)
        if any(data.get(k) != v for k, v in setting.items()):
            print(f"error: {args.out}: made with another setting; remove it or choose another --out", file=sys.stderr)
            return 2
    modes = [*FIDELITY_MODES, GENERATE]
    with Experiment(recipe, progress=False, bounded=False) as experiment:
        named = profiles(experiment, recipe, args.runs, args.per_run, args.random, args.sigma, args.seed)
        mine = [name for i, name in enumerate(named) if i % shards == shard and name not in data["profiles"]]
        print(f"{len(named)} profiles; this shard scores {len(mine)}", flush=True)
        for start in range(0, len(mine), args.chunk):
            chunk = mine[start : start + args.chunk]
            rows = {name: {"budgets": named[name].tolist()} for name in chunk}
            for mode in modes:
                began = time.perf_counter()
                results = experiment.evaluator("search", experiment.scorer, mode=mode).evaluate(
                    [named[name] for name in chunk])
                for name, result in zip(chunk, results):
                    if not result.ok:
                        raise RuntimeError(f"{name} ({mode}) failed: {result.error}")
                    rows[name][mode] = {o.uid: o.score for o in result.instances}
                    if mode == FIDELITY_MODES[0]:
                        rows[name]["likelihood_kept"] = {o.uid: o.metric for o in result.instances}
                print(f"  {mode}: {len(chunk)} profiles in {time.perf_counter() - began:.0f} s", flush=True)
            data["profiles"].update(rows)
            write_atomically(args.out, {**setting, **data})
            for name in chunk:
                print(f"{name}: " + ", ".join(f"{m} {np.mean(list(rows[name][m].values())):.3f}" for m in modes),
                      flush=True)
    write_atomically(args.out, {**setting, **data})
    return 0


def report(paths: list[Path]) -> dict:
    """Per mode: ``spearman`` (over profiles, of mean score against mean agreement), ``pearson_pairs`` (over
    (profile, instance) pairs), ``top_pick`` (the profile it ranks first, and that profile's agreement)."""
    from scipy.stats import pearsonr, spearmanr

    from fitness.task import FIDELITY_MODES

    rows = {}
    for path in paths:
        rows.update(read_json_object(path, "profiles", ORIGIN)["profiles"])
    names = sorted(rows)
    agreement = np.array([np.mean(list(rows[n][GENERATE].values())) for n in names])
    out = {"profiles": len(names), "agreement": {n: float(a) for n, a in zip(names, agreement)}, "modes": {}}
    for mode in FIDELITY_MODES:
        means = np.array([np.mean(list(rows[n][mode].values())) for n in names])
        pairs = [(rows[n][mode][uid], rows[n][GENERATE][uid]) for n in names for uid in rows[n][GENERATE]]
        top = names[int(np.argmax(means))]
        out["modes"][mode] = {"spearman": float(spearmanr(means, agreement).statistic),
                              "pearson_pairs": float(pearsonr(*zip(*pairs)).statistic),
                              "top_pick": top, "top_pick_agreement": float(agreement[names.index(top)]),
                              "means": {n: float(m) for n, m in zip(names, means)}}
    return out


def page_tables(summary: dict, shipped: list[str]) -> dict:
    """The results page's tables from ``report()``'s summary: ``fp-choice`` (each mode's correlations and top
    pick, the chosen mode marked) and ``fp-named`` (uniform, PyramidKV and the ``shipped`` profiles, every mode)."""
    modes = summary["modes"]
    chosen = max(modes, key=lambda m: modes[m]["spearman"])  # ties: the earlier mode (max keeps the first)
    choice = {"columns": ["mode", "Spearman, profile means", "Pearson, (profile, prompt) pairs", "ranked first",
                          "its agreement", "chosen"],
              "rows": [[f"`{m}`", f"{r['spearman']:+.3f}", f"{r['pearson_pairs']:+.3f}", r["top_pick"],
                        f"{r['top_pick_agreement']:.3f}", "**yes**" if m == chosen else ""] for m, r in modes.items()],
              "data_kept": True,
              "note": f"{summary['profiles']} profiles at c = 160, 16 search prompts; agreement: greedy "
                      "token_agreement with the full cache's continuation. From choice.json (proxies-*.json).",
              "chosen": chosen}
    names = ["uniform", "pyramid", *shipped]
    named = {"columns": ["profile", "greedy agreement", *(f"`{m}`" for m in modes)],
             "rows": [[n, f"{summary['agreement'][n]:.3f}", *(f"{modes[m]['means'][n]:.3f}" for m in modes)]
                      for n in names],
             "data_kept": True, "note": "Means over the 16 search prompts, from choice.json."}
    return {"fp-choice": choice, "fp-named": named}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("recipe", type=Path, nargs="?")
    parser.add_argument("--runs", type=Path, nargs="*", default=[], help="run folders whose candidates are scored")
    parser.add_argument("--per-run", type=int, default=10)
    parser.add_argument("--random", type=int, default=12)
    parser.add_argument("--sigma", type=float, default=0.5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--shard", default="0/1", help="K/N: score every N-th profile from the K-th")
    parser.add_argument("--chunk", type=int, default=4, help="profiles scored per write")
    parser.add_argument("--set", action="append", default=[])
    parser.add_argument("--out", type=Path)
    parser.add_argument("--report", type=Path, nargs="+", help="shards to summarise (nothing is scored)")
    parser.add_argument("--tables", type=Path, help="with --report: a results page whose data.json gets the tables")
    parser.add_argument("--shipped", nargs="*", default=[], help="with --tables: profiles shown by name")
    args = parser.parse_args(argv)
    try:
        return run(args)
    except UserError as err:  # bad input: one line naming the file or option, exit 2
        print(f"error: {err}", file=sys.stderr)
        return 2


def run(args) -> int:
    if args.report:
        summary = report(args.report)
        for mode, row in summary["modes"].items():
            print(f"{mode:<16} spearman {row['spearman']:+.3f}  pearson (pairs) {row['pearson_pairs']:+.3f}  "
                  f"top pick {row['top_pick']} (agreement {row['top_pick_agreement']:.3f})")
        if args.out:
            write_atomically(args.out, summary)
        if args.tables:
            data_file = args.tables / "data.json"
            data = json.loads(data_file.read_text()) if data_file.exists() else {"tables": {}}
            data.setdefault("tables", {}).update(page_tables(summary, args.shipped))
            write_atomically(data_file, data)
        return 0
    if args.recipe is None or args.out is None:
        raise UserError("a recipe and --out are needed to score (or --report FILES)")
    return score(args)


if __name__ == "__main__":
    sys.exit(main())
