"""Every row of the design table scored on one prefill of a recipe's held-out split.

The table (``benchmarks/design_table.py``) pairs methods on the same held-out prompts. A search
run's own ``compare`` scores its profile and the baselines *of its scorer*; the table needs rows
of two scorers (SnapKV and the run's trained gates), the full cache, and several seeds' profiles.
Prefilling the held-out split once for all of them is the cheap way on a shared 2-core machine::

    python benchmarks/design_scores.py results/design-word-hybrid/recipes/design_word_hybrid.yaml \\
        --run hybrid-s0=RUNS/design_word_hybrid-s0 --run hybrid-s1=RUNS/design_word_hybrid-s1 ... \\
        --gates-from RUNS/design_word_hybrid-s0 --out RUNS/word-scores.json [--floors 0.5]

Rows written (``comparison.json`` format, per-instance scores under ``"instances"``), at every
budget of the runs' profiles:

- ``full``: the uncompressed cache (the same scores repeated at each budget, for pairing);
- ``uniform``, ``pyramid``: SnapKV's rankings (kernel 7, window 32), EvolKV's baselines (pyramid
  only at budgets above the 32-token window it builds on);
- ``uniform-gates``: uniform budgets over the trained gates' per-head rankings;
- ``gates``: the gates' one global top-k (the same checkpoint);
- ``uniform-floors`` (with ``--floors F``): the floors blend over uniform budgets, unsearched: every
  head keeps ``F`` of ``c`` (adapter ``floors_under_global_topk``, once ``gate_floors``), the rest by
  the same global top-k;
- each ``--run LABEL=RUN``: that run's ``allocation-c*.json`` files, each with its own scorer (and
  adapter: a ``topup`` expansion is scored with ``gate_floors``, its c profile statically).

The gates checkpoint is the one the ``--gates-from`` run's profiles recorded (trained in that run
from its search split, or loaded), so the unsearched gates rows use exactly the searched rows'
weights. Held-out prompts only; nothing here is tuned.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path

from evolalloc.config.recipe import load_recipe
from evolalloc.config.run_folder import profile_files
from evolalloc.core.allocation_file import load_allocation
from evolalloc.core.baselines import make_baseline
from evolalloc.core.errors import UserError
from evolalloc.core.scorer_names import RETENTION_GATES, canonical_scorer
from evolalloc.pipeline.run import by_scorer
from evolalloc.report.comparison import compare_scores, save_comparison
from evolalloc.runtime.scorers import get_scorer

HELDOUT = "heldout"
SNAPKV = "snapkv"


def labelled(values: list[str], flag: str) -> dict[str, Path]:
    """``LABEL=PATH`` options as a dict; ``UserError`` naming the option for a malformed one."""
    out = {}
    for value in values:
        label, sep, path = value.partition("=")
        if not sep or not label or not path:
            raise UserError(f"expected LABEL=RUN_FOLDER, got {value!r}", field=flag)
        out[label] = Path(path)
    return out


def run_profiles(runs: dict[str, Path]) -> dict[str, dict[float, Path]]:
    """``{label: {budget: allocation file}}``; ``UserError`` for a run without profiles."""
    out = {}
    for label, run in runs.items():
        # each at the budget the file records, not the one its name suggests
        files = dict(sorted((float(load_allocation(p).target), p) for p in profile_files(run))) if run.is_dir() else {}
        if not files:
            raise UserError("no allocation-c*.json: not a finished run folder", source=str(run), field="--run")
        out[label] = files
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("recipe", type=Path, help="recipe giving model, task and held-out split (the runs' recipe)")
    parser.add_argument("--run", action="append", default=[], metavar="LABEL=RUN",
                        help="a searched run's profiles (repeatable)")
    parser.add_argument("--gates-from", type=Path, default=None, help="run whose gates checkpoint the gates rows use")
    parser.add_argument("--floors", type=float, default=None, metavar="F",
                        help="with --gates-from: add the uniform-floors row (gate_floors at floor_fraction F)")
    parser.add_argument("--out", type=Path, required=True, help="comparison.json-format file to write")
    parser.add_argument("--work", type=Path, default=None,
                        help="folder for spilled prefill records (re-used by a later call on the same prompts)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="recipe override (e.g. task.heldout.n=20)")
    args = parser.parse_args(argv)
    try:
        rows, meta, scores = score(args)
    except UserError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    save_comparison(rows, args.out, meta=meta, scores=scores)
    print(f"wrote {args.out}")
    return 0


def score(args):
    from evolalloc.pipeline.experiment import Experiment

    recipe = load_recipe(args.recipe, overrides=args.set)
    if args.floors is not None and (args.gates_from is None or not 0 <= args.floors <= 1):
        raise UserError(f"needs --gates-from and a fraction in [0, 1], got {args.floors}", field="--floors")
    profiles = run_profiles(labelled(args.run, "--run"))
    budgets = sorted({budget for files in profiles.values() for budget in files}) or [recipe.budget.target]
    allocations = {label: {budget: load_allocation(path) for budget, path in files.items()}
                   for label, files in profiles.items()}
    gates_params = None
    if args.gates_from is not None:
        source = next(iter(run_profiles({"gates": args.gates_from})["gates"].values()))
        gates = load_allocation(source)
        if canonical_scorer(gates.scorer) != RETENTION_GATES:
            raise UserError(f"its profiles rank with {gates.scorer}, not {RETENTION_GATES}", source=str(source),
                            field="scorer")
        gates_params = {k: v for k, v in gates.scorer_params.items()}
        # The experiment's own scorer becomes those gates (no training step: the checkpoint exists), spelled
        # as the profiles spell it (retention-gates, or gates), so both rank once.
        recipe.scorer.name, recipe.scorer.params, recipe.scorer.train = gates.scorer, dict(gates_params), None
        recipe.baselines = ["uniform", "gates"]
    else:
        recipe.scorer.name, recipe.scorer.params, recipe.scorer.train = SNAPKV, {}, None
        recipe.baselines = ["uniform"]
    snapkv = get_scorer(SNAPKV)

    # Whole records (the full cache is a row); beyond engine.record_memory they spill to --work/records,
    # where a second call (a crash, one more run) finds them instead of prefilling again.
    curation = args.work / "curation.json" if args.work is not None else None
    with Experiment(recipe, progress=False, bounded=False, curation_file=curation) as experiment:
        geometry = experiment.geometry

        def snapkv_row(method: str, budget: float):
            made = make_baseline(method).allocation(geometry, budget, model=recipe.model.spec, scorer=SNAPKV,
                                                    scorer_params={}, reserved=snapkv.always_kept)
            return made

        rows: dict[str, dict[float, object]] = {
            "uniform": {b: snapkv_row("uniform", b) for b in budgets},
            # The pyramid spreads what lies above SnapKV's always-kept window: at c <= that window it
            # does not exist (a missing cell in the table, not a zero).
            "pyramid": {b: snapkv_row("pyramid", b) for b in budgets if b > snapkv.always_kept},
        }
        skipped = [b for b in budgets if b <= snapkv.always_kept]
        if skipped:
            print(f"pyramid: not scored at c = {', '.join(f'{b:g}' for b in skipped)} (SnapKV always keeps "
                  f"{snapkv.always_kept} tokens per head)", flush=True)
        if not rows["pyramid"]:
            del rows["pyramid"]
        if gates_params is not None:
            rows["uniform-gates"] = {b: experiment.baseline("uniform", b) for b in budgets}
            rows["gates"] = {b: experiment.baseline("gates", b) for b in budgets}
        if args.floors is not None:  # uniform budgets read as floors + the rest by the global top-k
            blend = {"adapter": "gate_floors", "adapter_params": {"floor_fraction": args.floors}}
            rows["uniform-floors"] = {b: replace(a, provenance={**a.provenance, **blend})
                                      for b, a in rows["uniform-gates"].items()}
        rows.update(allocations)
        # Rank every record with each row's own scorer (SnapKV, the gates) in the one prefill.
        experiment.rank_also([next(iter(per_budget.values())) for per_budget in rows.values()])
        full = experiment.baseline("uniform", geometry.max_positions)
        scores: dict[str, dict[float, dict[str, float]]] = {}
        (result,) = experiment.evaluator(HELDOUT, experiment.scorer_for(full)).evaluate([full.budgets])
        full_scores = _per_uid(result, "full")
        scores["full"] = {b: dict(full_scores) for b in budgets}
        for method, per_budget in rows.items():
            scores[method] = {}
            # One evaluation per scorer: a topup expansion selects with another adapter than its c profile.
            for scorer, group in by_scorer(per_budget):
                results = experiment.evaluator(HELDOUT, scorer).evaluate([a.budgets for a in group.values()])
                scores[method].update({b: _per_uid(r, method) for b, r in zip(group, results)})
            scores[method] = dict(sorted(scores[method].items()))
            print(f"scored {method}: " + ", ".join(f"c={b:g} {sum(s.values()) / len(s):.3f}"
                                                 for b, s in scores[method].items()), flush=True)
        label = experiment.label
        meta = {"split": HELDOUT, "instances": len(full_scores), "task": label,
                "scored by": "greedy generation, each task's metric", "gates": gates_params}
    return compare_scores(scores, reference="full"), meta, {label: scores}


def _per_uid(result, method: str) -> dict[str, float]:
    if not result.ok:
        raise RuntimeError(f"held-out evaluation of {method} failed: {result.error}")
    return {o.uid: o.score for o in result.instances}


if __name__ == "__main__":
    sys.exit(main())
