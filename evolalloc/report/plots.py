"""The report's plots, as PNG files. Pure functions of plain data; matplotlib's Agg backend only.

- ``plot_layer_budgets``: budget per layer, evolved profile against uniform and pyramid;
- ``plot_head_budgets``: a (layer x KV head) heat-map, for head-granularity profiles;
- ``plot_fitness_history``: every evaluation's fitness and the best so far;
- ``plot_score_vs_budget``: held-out score (95 % interval) against budget for every method.

Each returns the path it wrote. Figures are closed after saving so a long run leaks nothing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import matplotlib

matplotlib.use("Agg")  # headless: no display on servers, and no GUI event loop in a batch job
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from evolalloc.core.allocation import Allocation  # noqa: E402
from evolalloc.core.baselines import BASELINES, EVOLVED  # noqa: E402
from evolalloc.report.comparison import ComparisonRow  # noqa: E402

# One colour per method in every plot, so a reader learns them once: evolved's here, each
# baseline's as it declares it (None: matplotlib's next colour).
EVOLVED_COLOR = "#d62728"
EVALUATION_COLOR = "#1f77b4"  # the cloud of single evaluations in the fitness history
DPI = 120


def method_color(method: str) -> str | None:
    if method == EVOLVED:
        return EVOLVED_COLOR
    return BASELINES.get(method).color if method in BASELINES else None


def _save(fig, path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    return path


def record_field(record: Any, key: str) -> Any:
    """A field of a trial record given as a dict or as an object (``TrialRecord``)."""
    return record.get(key) if isinstance(record, Mapping) else getattr(record, key, None)


def plot_layer_budgets(profiles: Mapping[str, Allocation], path: str | Path, *, title: str | None = None) -> Path:
    """Tokens kept per layer (mean over KV heads) for each named profile, e.g.
    ``{"evolved": evolved, "uniform": uniform, "pyramid": pyramid}``."""
    if not profiles:
        raise ValueError("nothing to plot: no profiles")
    fig, ax = plt.subplots(figsize=(8, 4))
    for name, alloc in profiles.items():
        per_layer = alloc.budgets.mean(axis=1)
        style = {"marker": "o", "linewidth": 2} if name == EVOLVED else {"linestyle": "--", "linewidth": 1.5}
        ax.plot(np.arange(per_layer.size), per_layer, label=name, color=method_color(name), **style)
    target = next(iter(profiles.values())).target
    ax.axhline(target, color="grey", linewidth=0.8, linestyle=":")
    ax.set_xlabel("layer")
    ax.set_ylabel("budget (tokens kept per KV head)")
    ax.set_title(title or f"Budget per layer at c = {target:g}")
    ax.legend()
    ax.grid(alpha=0.3)
    return _save(fig, path)


def plot_head_budgets(allocation: Allocation, path: str | Path, *, title: str | None = None) -> Path:
    """Heat-map of budgets ``[num_layers, num_kv_heads]``: layers on the y axis, bottom layer low."""
    budgets = allocation.budgets
    fig, ax = plt.subplots(figsize=(2.5 + 0.6 * budgets.shape[1], 1.5 + 0.22 * budgets.shape[0]))
    image = ax.imshow(budgets, aspect="auto", origin="lower", cmap="viridis")
    fig.colorbar(image, ax=ax, label="budget (tokens)")
    ax.set_xlabel("KV head")
    ax.set_ylabel("layer")
    ax.set_xticks(range(budgets.shape[1]))
    ax.set_title(title or f"Budget per (layer, KV head) at c = {allocation.target:g}")
    return _save(fig, path)


def best_so_far(records: Iterable[Any]) -> list[float | None]:
    """Running maximum of fitness over evaluations in order; ``None`` until one succeeded."""
    best, out = None, []
    for record in records:
        fitness = record_field(record, "fitness")
        if record_field(record, "state") in (None, "COMPLETE") and fitness is not None:
            best = fitness if best is None else max(best, fitness)
        out.append(best)
    return out


def plot_fitness_history(records: Sequence[Any], path: str | Path, *, title: str | None = None) -> Path:
    """Fitness of each evaluation (dots), best so far (line), group boundaries (dotted lines).

    ``records``: dicts or ``TrialRecord``s with ``fitness``, ``state`` and ``group``, in search
    order. Failed evaluations are marked with a red x on the axis, never plotted as a score.
    """
    fig, ax = plt.subplots(figsize=(8, 4))
    steps = np.arange(1, len(records) + 1)
    ok = [(i, record_field(r, "fitness")) for i, r in zip(steps, records)
          if record_field(r, "state") in (None, "COMPLETE") and record_field(r, "fitness") is not None]
    failed = [i for i, r in zip(steps, records) if record_field(r, "state") == "FAIL"]
    if ok:
        xs, ys = zip(*ok)
        ax.scatter(xs, ys, s=12, alpha=0.5, color=EVALUATION_COLOR, label="evaluation")
    best = best_so_far(records)
    ax.plot(steps, [np.nan if b is None else b for b in best], color=EVOLVED_COLOR, linewidth=2, label="best so far")
    if failed:
        floor = min((y for _, y in ok), default=0.0)
        ax.scatter(failed, [floor] * len(failed), marker="x", color="red", label=f"failed ({len(failed)})")
    groups = [record_field(r, "group") for r in records]
    for i in range(1, len(groups)):
        if groups[i] != groups[i - 1]:
            ax.axvline(i + 0.5, color="grey", linewidth=0.8, linestyle=":")
    ax.set_xlabel("evaluation")
    ax.set_ylabel("fitness")
    ax.set_title(title or "Best fitness over evaluations (dotted lines: next layer group)")
    if records:
        ax.legend(loc="best")
    ax.grid(alpha=0.3)
    return _save(fig, path)


def plot_score_vs_budget(rows: Sequence[ComparisonRow], path: str | Path, *, title: str | None = None) -> Path:
    """Held-out mean score against budget, one line per method, 95 % intervals as error bars."""
    fig, ax = plt.subplots(figsize=(7, 4))
    methods = list(dict.fromkeys(row.method for row in rows))
    for offset, method in enumerate(methods):
        mine = sorted((r for r in rows if r.method == method), key=lambda r: r.budget)
        budgets = np.array([r.budget for r in mine])
        # A small horizontal shift per method keeps overlapping error bars readable (log x axis).
        shifted = budgets * (1 + 0.02 * (offset - (len(methods) - 1) / 2))
        means = np.array([r.score.mean for r in mine])
        errors = np.array([[r.score.mean - r.score.low for r in mine], [r.score.high - r.score.mean for r in mine]])
        ax.errorbar(shifted, means, yerr=errors, marker="o", capsize=3, label=method, color=method_color(method))
    budgets = sorted({row.budget for row in rows})
    if budgets:
        ax.set_xscale("log", base=2)
        ax.set_xticks(budgets, [f"{b:g}" for b in budgets])
        ax.minorticks_off()
    ax.set_xlabel("budget c (tokens per KV head)")
    ax.set_ylabel("held-out score")
    ax.set_ylim(-0.05, 1.05)
    ax.set_title(title or "Held-out score vs budget (95 % bootstrap intervals)")
    if methods:
        ax.legend()
    ax.grid(alpha=0.3)
    return _save(fig, path)
