"""Honest evaluation of the learned scorer against the heuristics (the SIP paper's standard).

1. **Held-out eviction cost.** For every held-out (trace, split ``n``) item, each scorer ranks the
   ``n``-token prefix through the real runtime (``prefill`` on the prefix, the same code path as a
   search), so query-aware scorers see the last prefix queries, exactly as at compression time.
   Per (layer, KV head) we compute, against the trace's future-attention importance:
   * ``normalised`` = sum_b cost_b(ranking) / sum_b cost_b(optimal) (1 = optimal; the training
     objective), averaged over heads -> one number per item, mean and 95 % bootstrap interval
     over items, and a paired test of learned vs each scorer on the same items;
   * ``evicted`` fraction at absolute budgets ``b`` = cost_b / total importance, averaged per
     head family (layer thirds) and over all heads -> the curves of the PNG.
2. **Downstream.** Held-out task instances for ``seeds`` seeds; every scorer at uniform budgets;
   mean task score with a bootstrap 95 % interval over all (seed, instance) scores, per-seed
   means, and a paired test against the learned scorer.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from tqdm.auto import tqdm

from evolalloc.learned.reward import cost_per_budget, optimal_cost, ranking_cost
from evolalloc.learned.traces import TraceSet
from evolalloc.report.stats import bootstrap_mean, paired_test
from evolalloc.runtime.prefill import prefill

CURVE_BUDGETS = (8, 16, 32, 64, 128, 256, 512)
FAMILIES = ("early layers", "middle layers", "late layers")


def _family_slices(num_layers: int) -> list[slice]:
    third = num_layers / 3
    return [slice(round(i * third), round((i + 1) * third)) for i in range(3)]


def heldout_costs(loaded, traces: TraceSet, scorers, progress: bool = True) -> dict:
    """Normalised eviction costs of ``scorers`` (plus ``optimal``) on every held-out item."""
    items = traces.items
    per_item = {s.name: [] for s in scorers}  # name -> [items] normalised cost (mean over heads)
    curves = {s.name: [] for s in [*scorers, _Optimal()]}  # name -> [items] [families + 1, budgets]
    families = _family_slices(loaded.geometry.num_layers)
    for t, s in tqdm(items, desc="held-out costs", unit="item", disable=not progress):
        trace = traces.traces[t]
        n = int(trace["splits"][s])
        importance = trace["importance"][s].float()  # [layers, Hkv, n]
        record = prefill(loaded.model, trace["ids"][:n].long(), scorers)
        best = optimal_cost(importance)
        valid = best > 0
        orders = {sc.name: record.rankings[sc.key] for sc in scorers}
        orders["optimal"] = torch.argsort(importance, dim=-1, descending=True)
        total = importance.sum(-1, keepdim=True).clamp_min(1e-12)
        for name, order in orders.items():
            if name != "optimal":
                ratio = ranking_cost(importance, order) / best.clamp_min(1e-12)
                per_item[name].append(float(ratio[valid].mean()))
            evicted = cost_per_budget(importance, order) / total  # [layers, Hkv, n + 1]
            at = [min(b, n) for b in CURVE_BUDGETS]
            frac = evicted[..., at]  # [layers, Hkv, budgets]
            rows = [frac[f].mean(dim=(0, 1)) for f in families] + [frac.mean(dim=(0, 1))]
            curves[name].append(torch.stack(rows).numpy())
    summary = {}
    for name, values in per_item.items():
        interval = bootstrap_mean(values)
        summary[name] = {"mean": interval.mean, "low": interval.low, "high": interval.high, "n": interval.n}
        if name != "learned" and "learned" in per_item:
            test = paired_test(per_item["learned"], values)
            summary[name]["learned_minus_this"] = {"diff": test.diff, "low": test.low, "high": test.high,
                                                   "p": test.p_value, "test": test.test}
    return {
        "items": len(items),
        "budgets": list(CURVE_BUDGETS),
        "families": [*FAMILIES, "all heads"],
        "normalised": summary,
        "per_item": per_item,
        "evicted": {name: np.mean(v, axis=0).tolist() for name, v in curves.items()},
    }


class _Optimal:
    name = "optimal"


def downstream(loaded, task_name: str, scorers, budgets, *, seeds: int, per_seed: int, context_tokens: int,
               progress: bool = True) -> dict:
    """Task scores at uniform ``budgets`` for every scorer, over ``seeds`` held-out instance sets."""
    from evolalloc.engine.local import LocalEvaluator, prefill_instances
    from fitness import get_task

    task = get_task(task_name)
    layers = loaded.geometry.num_layers
    scores = {(sc.name, b): [] for sc in scorers for b in budgets}
    seed_means = {(sc.name, b): [] for sc in scorers for b in budgets}
    for seed in range(seeds):
        instances = task.instances("heldout", per_seed, seed, context_tokens, loaded.tokenizer)
        records = prefill_instances(loaded, instances, scorers, progress=progress)
        for sc in scorers:
            usable = [b for b in budgets if b >= sc.min_budget]
            evaluator = LocalEvaluator(loaded, task, instances, sc, records=records)
            results = evaluator.evaluate([np.full(layers, b) for b in usable])
            for b, result in zip(usable, results):
                if result.error:
                    raise RuntimeError(f"{sc.name} at budget {b}: {result.error}")
                values = [o.score for o in result.instances]
                scores[(sc.name, b)] += values
                seed_means[(sc.name, b)].append(float(np.mean(values)))
    table = {}
    for (name, b), values in scores.items():
        if not values:
            continue
        interval = bootstrap_mean(values)
        row = {"mean": interval.mean, "low": interval.low, "high": interval.high, "n": interval.n,
               "seed_means": seed_means[(name, b)]}
        if name != "learned" and scores.get(("learned", b)):
            test = paired_test(scores[("learned", b)], values)
            row["learned_minus_this"] = {"diff": test.diff, "low": test.low, "high": test.high, "p": test.p_value}
        table[f"{name}@{b}"] = row
    return {"task": task_name, "budgets": list(budgets), "seeds": seeds, "per_seed": per_seed,
            "context_tokens": context_tokens, "scores": table}


def plot_costs(costs: dict, path: str | Path) -> Path:
    """Evicted future-attention fraction vs budget: one panel per head family and one for all heads."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    families = costs["families"]
    fig, axes = plt.subplots(1, len(families), figsize=(4 * len(families), 3.6), sharey=True)
    for f, ax in enumerate(axes):
        for name, curve in costs["evicted"].items():
            dashed = name in ("snapkv", "h2o", "tova")  # query-aware: privileged information
            style = ":" if name == "optimal" else ("--" if dashed else "-")
            ax.plot(costs["budgets"], curve[f], style, marker="o", ms=3, label=name,
                    lw=2.2 if name == "learned" else 1.2)
        ax.set_xscale("log", base=2)
        ax.set_title(families[f])
        ax.set_xlabel("budget (tokens kept)")
    axes[0].set_ylabel("future attention evicted (fraction)")
    axes[-1].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return Path(path)


def render_tables(result: dict) -> str:
    """Markdown: held-out normalised cost per scorer, evicted fraction per budget, downstream scores."""
    costs = result["costs"]
    lines = ["Held-out normalised eviction cost (sum over budgets / optimal; "
             f"1 = optimal), {costs['items']} items, mean [95% CI]:", "",
             "| scorer | normalised cost | learned − scorer [95% CI], p |", "|---|---|---|"]
    for name, row in sorted(costs["normalised"].items(), key=lambda kv: kv[1]["mean"]):
        diff = row.get("learned_minus_this")
        cmp = f"{diff['diff']:+.3f} [{diff['low']:+.3f}, {diff['high']:+.3f}], p={diff['p']:.2g}" if diff else ""
        lines.append(f"| {name} | {row['mean']:.3f} [{row['low']:.3f}, {row['high']:.3f}] | {cmp} |")
    lines += ["", "Fraction of future attention evicted, all heads, at budget:", "",
              "| scorer | " + " | ".join(str(b) for b in costs["budgets"]) + " |",
              "|---" * (len(costs["budgets"]) + 1) + "|"]
    for name, curve in costs["evicted"].items():
        lines.append(f"| {name} | " + " | ".join(f"{v:.3f}" for v in curve[-1]) + " |")
    down = result.get("downstream")
    if down:
        lines += ["",
                  f"Downstream {down['task']} at ~{down['context_tokens']} "
                  f"tokens, {down['seeds']} seeds x {down['per_seed']} "
                  "held-out instances, mean [95% CI]:", "",
                  "| scorer | " + " | ".join(f"b={b}" for b in down["budgets"]) + " |",
                  "|---" * (len(down["budgets"]) + 1) + "|"]
        names = sorted({k.split("@")[0] for k in down["scores"]})
        for name in names:
            cells = []
            for b in down["budgets"]:
                row = down["scores"].get(f"{name}@{b}")
                cells.append(f"{row['mean']:.2f} [{row['low']:.2f}, {row['high']:.2f}]" if row else "—")
            lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
