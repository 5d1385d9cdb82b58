"""Held-out evaluation of the retention gates: what the global budget buys, and where it goes.

For every held-out (trace, split ``n``) item, the ``n``-token prefix is prefilled through the
real runtime (as ``learned.evaluate`` does), and at each average budget ``c``:

* ``global-topk``: one top-``c*L*H`` over every (layer, head, token) by the gates' scores (the
  method's adapter, ``runtime.adaptive.global_topk``; every head keeps its always-kept tokens);
* every other scorer (``retention-gates`` itself included) at the uniform budget ``c`` per head;
* ``optimal (global)`` / ``optimal (uniform)``: the top by the trace's own future importance,
  globally / per head — the best any ranking could do with and without moving budget.

The cost of an item is the fraction of *all* heads' future attention that falls on evicted
tokens (one number over the whole model, so heads that attend more weigh more). Reported: mean
with a 95 % bootstrap interval over items, and a paired test of ``global-topk`` minus each
other method on the same items (lower is better). The global top-k's budgets per (layer, head),
averaged over items, are kept for the plot of the allocation it implies.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from tqdm.auto import tqdm

from evolalloc.learned.reward import cost_per_budget
from evolalloc.learned.traces import TraceSet
from evolalloc.report.stats import bootstrap_mean, paired_test
from evolalloc.runtime.adaptive import get_adapter, top_with_floor
from evolalloc.runtime.prefill import prefill

GLOBAL = "global-topk"  # the method's name (core/baselines/global_topk.py)


def _evicted(importance: torch.Tensor, order: torch.Tensor, counts: np.ndarray) -> float:
    """Fraction of the total importance ``[L, H, n]`` outside each head's top-``counts[l, h]`` of ``order``."""
    costs = cost_per_budget(importance, order)  # [L, H, n + 1]
    index = torch.as_tensor(np.minimum(counts, importance.shape[-1]), dtype=torch.long)[..., None]
    return float(costs.gather(-1, index).sum() / importance.sum().clamp_min(1e-12))


def global_costs(loaded, traces: TraceSet, gates_scorer, scorers, budgets=(64, 128, 256),
                 progress: bool = True) -> dict:
    """Costs per item of every method at every budget, plus the global top-k's mean budgets."""
    everyone = [gates_scorer, *[s for s in scorers if s.key != gates_scorer.key]]
    per = {}  # (method, c) -> [items]
    implied = {c: [] for c in budgets}
    adapter = get_adapter("global")
    for t, s in tqdm(traces.items, desc="held-out global costs", unit="item", disable=not progress):
        trace = traces.traces[t]
        n = int(trace["splits"][s])
        importance = trace["importance"][s].float()  # [L, H, n]
        layers, heads = importance.shape[:2]
        record = prefill(loaded.model, trace["ids"][:n].long(), everyone)
        oracle = torch.argsort(importance, dim=-1, descending=True)
        for c in budgets:
            uniform = np.full((layers, heads), c, dtype=np.int64)
            counts = adapter.adapt(record, uniform, gates_scorer)
            implied[c].append(counts)
            per.setdefault((GLOBAL, c), []).append(_evicted(importance, record.rankings[gates_scorer.key], counts))
            for sc in everyone:
                per.setdefault((sc.name, c), []).append(_evicted(importance, record.rankings[sc.key], uniform))
            ranked = torch.gather(importance, -1, oracle).reshape(layers * heads, n)
            best = top_with_floor(ranked, 0, c * layers * heads).reshape(layers, heads)
            per.setdefault(("optimal (global)", c), []).append(_evicted(importance, oracle, best))
            per.setdefault(("optimal (uniform)", c), []).append(_evicted(importance, oracle, uniform))
    rows = []
    for (method, c), values in per.items():
        interval = bootstrap_mean(values)
        row = {"method": method, "budget": c, "mean": interval.mean, "low": interval.low, "high": interval.high,
               "n": interval.n}
        if method != GLOBAL:
            test = paired_test(per[(GLOBAL, c)], values)
            row["global_minus_this"] = {"diff": test.diff, "low": test.low, "high": test.high, "p": test.p_value}
        rows.append(row)
    return {"items": len(traces.items), "budgets": list(budgets), "rows": rows,
            "per_item": {f"{m}@{c}": v for (m, c), v in per.items()},
            "implied_budgets": {str(c): np.mean(v, axis=0).tolist() for c, v in implied.items()}}


def render_global(result: dict) -> str:
    lines = [f"Held-out fraction of all heads' future attention evicted, {result['items']} items, mean [95% CI]; "
             f"paired: {GLOBAL} − method (negative: global-topk evicts less):", ""]
    for c in result["budgets"]:
        lines += [f"c = {c}:", "", "| method | evicted | global − method [95% CI], p |", "|---|---|---|"]
        for row in sorted((r for r in result["rows"] if r["budget"] == c), key=lambda r: r["mean"]):
            diff = row.get("global_minus_this")
            cmp = f"{diff['diff']:+.4f} [{diff['low']:+.4f}, {diff['high']:+.4f}], p={diff['p']:.2g}" if diff else ""
            lines.append(f"| {row['method']} | {row['mean']:.4f} [{row['low']:.4f}, {row['high']:.4f}] | {cmp} |")
        lines.append("")
    return "\n".join(lines)


def plot_implied_budgets(result: dict, path: str | Path, profiles: dict | None = None) -> Path:
    """Mean budget per layer (and per KV head, thin) the global top-k implies at each ``c``, with
    ``profiles`` (label -> per-layer budgets ``[L]``, e.g. an evolved allocation) for comparison."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    budgets = result["budgets"]
    fig, axes = plt.subplots(1, len(budgets), figsize=(4.2 * len(budgets), 3.6), squeeze=False)
    for ax, c in zip(axes[0], budgets):
        implied = np.asarray(result["implied_budgets"][str(c)])  # [L, H]
        layers = np.arange(implied.shape[0])
        for h in range(implied.shape[1]):
            ax.plot(layers, implied[:, h], color="#7f7f7f", lw=0.7, alpha=0.6)
        ax.plot(layers, implied.mean(axis=1), color="#7f7f7f", lw=2.2, label=f"{GLOBAL}, mean over heads")
        drawn = (profiles or {}).get(c, {})
        for colour, (label, profile) in zip(("#d62728", "#ff7f0e", "#2ca02c", "#9467bd"), drawn.items()):
            ax.plot(layers, profile, lw=1.8, color=colour, marker="o", markersize=3, label=label)
        ax.axhline(c, color="#1f77b4", ls=":", lw=1, label="uniform")
        ax.set_title(f"c = {c}")
        ax.set_xlabel("layer")
        if drawn:  # a panel with a searched profile names it where it is drawn
            ax.legend(fontsize=7)
    axes[0][0].set_ylabel("tokens kept per KV head (held-out mean)")
    if not (profiles or {}).get(budgets[-1]):  # else that panel has its legend already
        axes[0][-1].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return Path(path)
