"""Score every searched run of ``search_versus.py`` and every unsearched row ONCE on the shared held-out prefill.

``search_versus.py --compare-once OUT.json`` calls ``compare_once`` instead of one full comparison per run:
with 6 runs (2 starts x 3 seeds) and 8 unsearched rows at 3 budgets, a comparison per run would score
the unsearched rows 6 times over on the same prompts. Here each distinct allocation is scored once,
and ``OUT.json`` keeps every per-instance score: ``{"scores": {row: {budget: {uid: score}}}, "runs":
{run: {...how its search went}}, ...}``, from which every paired test of a study's page is computed
(``results/search-budget/tables.py``). The runs' folders keep their searches and shipped profiles;
they are not compared one by one (no ``comparison.json``, no report).

A row's name is the run folder's name for a searched profile (``<prefix>-<variant>-s<seed>``), the method
for an unsearched one (``uniform``, ``lukv``, ``cake`` ...), and ``full`` for the uncompressed cache.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from evolalloc.core.fileio import write_atomic


def _commit() -> str | None:
    """The commit of the tree this runs from (``None`` outside a git checkout)."""
    import subprocess

    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=True,
                              cwd=Path(__file__).resolve().parent).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None


def compare_once(experiment, base_resolved, shipped, out: Path, *, seconds: dict[str, float],
                 modes: tuple[str, ...] = ("generate",), budgets: tuple[float, ...] | None = None) -> dict:
    """Score ``shipped`` (``[(run_dir, recipe, result, config, seconds, {budget: Allocation})]``) and the
    shared recipe's baselines at each budget on the held-out split; write and return ``out``'s data.

    ``modes``: the first is the table's (``scores``: greedy answers, the task's metric); each further one
    (``fidelity``: the likelihood the full cache's continuation keeps) is scored too, under
    ``scores_by_mode[mode]``; every mode's per-instance ``metric`` (fidelity's: the uncapped value; agreement's:
    the task's own score of the answer) goes under ``metrics_by_mode``. A task judged against the full cache,
    and the agreement mode, also keep each answer's ``greedy_prefix`` (the share of the full cache's
    continuation matched before the first divergence) under ``greedy_prefix_by_mode``. ``budgets``: the
    budgets compared (default: every budget of the run, the target and its expansions)."""
    from evolalloc.core.baselines import make_baseline
    from evolalloc.core.methods import EVOLVED
    from evolalloc.pipeline.run import HELDOUT, comparison_meta, evaluate_distinct, scorer_groups

    every = sorted(float(b) for b in base_resolved.budgets)
    budgets = every if budgets is None else [b for b in every if b in set(map(float, budgets))]
    # Rows that adapt a searched profile (evolved+adakv) belong to one run each: not in a shared table.
    names = [n for n in base_resolved.baselines if make_baseline(n).adapts != EVOLVED]
    methods = {run_dir.name: {b: profiles[b] for b in budgets} for run_dir, _, _, _, _, profiles in shipped}
    template = {b: next(iter(methods.values()))[b] for b in budgets}
    experiment.run.methods.profile_for(names)  # LU-KV's curves on the search records, before they are released
    experiment.release("search")
    methods.update(experiment.run.methods.baselines_at(names, template))
    experiment.bound_split(HELDOUT, [a for per_budget in methods.values() for a in per_budget.values()])
    evaluators, by_mode, metrics, timed, prefixes = {}, {m: {} for m in modes}, {m: {} for m in modes}, {}, {}
    for mode in modes:
        scores = by_mode[mode]
        for name, per_budget in methods.items():
            started = time.perf_counter()
            scores[name], metrics[mode][name] = {}, {}
            for key, (scorer, group) in scorer_groups(per_budget).items():
                if (key, mode) not in evaluators:
                    evaluators[key, mode] = experiment.evaluator(HELDOUT, scorer, mode=mode)
                for budget, result in zip(group, evaluate_distinct(evaluators[key, mode], list(group.values()))):
                    if not result.ok:
                        raise RuntimeError(f"held-out {mode} evaluation of {name} at c={budget:g} failed: "
                                           f"{result.error}")
                    scores[name][str(float(budget))] = {o.uid: o.score for o in result.instances}
                    metrics[mode][name][str(float(budget))] = {o.uid: o.metric for o in result.instances}
                    if all(o.greedy_prefix is not None for o in result.instances):
                        prefixes.setdefault(mode, {}).setdefault(name, {})[str(float(budget))] = {
                            o.uid: o.greedy_prefix for o in result.instances}
            timed[f"{name} ({mode})"] = round(time.perf_counter() - started, 1)
            print(f"compared {name} ({mode}): " + ", ".join(f"c={b}: {sum(s.values()) / len(s):.3f}"
                                                           for b, s in scores[name].items()), flush=True)
    scores = by_mode[modes[0]]
    runs = {}
    for run_dir, recipe, result, config, _, profiles in shipped:
        runs[run_dir.name] = {
            "start": list(config.start) or "uniform", "seed": config.seed, "evaluations": len(result.history),
            "search_fitness": result.best_fitness, "start_scores": result.start_scores,
            "shipped_start": result.shipped_start,
            "groups": [g.to_dict() for g in result.groups], "stop_rule": result.stop_rule,
            "search_seconds": round(result.seconds, 1), "search_and_ship_seconds": round(seconds[run_dir.name], 1),
            "expansions": {str(b): {k: a.provenance.get(k) for k in ("expansion_rule", "start_method",
                                                                     "expansion_search_scores")}
                           for b, a in profiles.items() if b != float(config.target)},
        }
    data = {"meta": comparison_meta(experiment), "budgets": budgets, "scores": scores, "runs": runs,
            "row_seconds": timed, "commit": _commit()}
    if len(modes) > 1:
        data["modes"] = list(modes)
        data["scores_by_mode"] = {m: by_mode[m] for m in modes[1:]}
        data["metrics_by_mode"] = {m: metrics[m] for m in modes}  # the first's too: agreement's is the task's own
    if prefixes:
        data["greedy_prefix_by_mode"] = prefixes
    write_atomic(out, json.dumps(data, indent=1) + "\n")
    print(f"every row's per-instance scores: {out}")
    return data
