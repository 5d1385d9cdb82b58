"""The report's plots, as PNG files. Pure functions of plain data; matplotlib's Agg backend only.

- ``plot_layer_budgets``: budget per layer, evolved profile against uniform and pyramid;
- ``plot_head_budgets``: a (layer x KV head) heat-map, for head-granularity profiles;
- ``plot_fitness_history``: every evaluation's fitness, the best so far overall and within each
  layer group, and which groups were flat;
- ``plot_score_vs_budget``: held-out score (95 % interval) against budget for every method, one
  panel per task (and the weighted overall) when there are several.

Each returns the path it wrote. Figures are closed after saving so a long run leaks nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import matplotlib

matplotlib.use("Agg")  # headless: no display on servers, and no GUI event loop in a batch job
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from evolalloc.core.allocation import Allocation  # noqa: E402
from evolalloc.core.methods import EVOLVED  # noqa: E402
from evolalloc.report.comparison import OVERALL, ComparisonRow, tasks_of  # noqa: E402
from evolalloc.report.method_style import method_color  # noqa: E402

# One colour per method in every plot, so a reader learns them once (report/method_style.py).
EVOLVED_COLOR = method_color(EVOLVED)
DPI = 120
#: Methods a score panel's legend holds inside the axes; more go beside them.
LEGEND_INSIDE = 6


def _save(fig, path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=DPI, bbox_inches="tight")  # a legend beside the axes is kept in the picture
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
    # Searched profiles (evolved, or other names such as "seed 1") solid with markers; baselines dashed.
    searched = [name for name in profiles if name == EVOLVED or method_color(name) is None]
    shades = plt.cm.autumn(np.linspace(0.0, 0.7, max(len(searched), 1)))
    for name, alloc in profiles.items():
        per_layer = alloc.budgets.mean(axis=1)
        if name in searched:
            color = method_color(name) if name == EVOLVED else shades[searched.index(name)]
            style = {"marker": "o", "linewidth": 2, "markersize": 4 if len(searched) > 1 else 6}
        else:
            color, style = method_color(name), {"linestyle": "--", "linewidth": 1.5}
        ax.plot(np.arange(per_layer.size), per_layer, label=name, color=color, **style)
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


@dataclass(frozen=True)
class GroupProgress:
    """How one layer group's search went, from its trial records (evaluation numbers are 1-based).

    ``within_gain``: the group's best fitness minus the best of its *first generation* — what the
    optimizer's later generations added inside the group (0 when they added nothing).
    ``task_scores``: distinct task scores seen in the group; ``flat`` when there was only one, so
    the fitness could only move through the CacheScore term.
    """

    group: int | None
    first: int
    last: int
    evaluations: int
    failed: int
    best: float | None
    best_at: int | None
    first_generation_best: float | None
    within_gain: float | None
    task_scores: int
    generations: int = 1

    @property
    def flat(self) -> bool:
        return self.task_scores <= 1


def group_name(group) -> str:
    """A group as a reader counts them (1-based); ``start`` for the start's candidates (group -1)."""
    if group is None:
        return "–"
    return "start" if int(group) < 0 else str(int(group) + 1)


def _ok(record: Any) -> bool:
    return record_field(record, "state") in (None, "COMPLETE") and record_field(record, "fitness") is not None


def group_progress(records: Sequence[Any]) -> list[GroupProgress]:
    """One ``GroupProgress`` per layer group, in search order."""
    spans: dict[Any, list[int]] = {}
    for index, record in enumerate(records):
        spans.setdefault(record_field(record, "group"), []).append(index)
    out = []
    for group, indices in spans.items():
        ok = [i for i in indices if _ok(records[i])]
        best_at = max(ok, key=lambda i: (record_field(records[i], "fitness"), -i)) if ok else None
        generations = [record_field(records[i], "generation") for i in ok]
        first_gen = min((g for g in generations if g is not None), default=None)
        opening = [record_field(records[i], "fitness") for i in ok
                   if first_gen is None or record_field(records[i], "generation") == first_gen]
        best = record_field(records[best_at], "fitness") if best_at is not None else None
        first_best = max(opening) if opening else None
        scores = {round(float(record_field(records[i], "task_score")), 9) for i in ok
                  if record_field(records[i], "task_score") is not None}
        out.append(GroupProgress(
            group=group, first=indices[0] + 1, last=indices[-1] + 1, evaluations=len(indices),
            failed=len(indices) - len(ok), best=best, best_at=None if best_at is None else best_at + 1,
            first_generation_best=first_best, within_gain=None if best is None else best - first_best,
            task_scores=len(scores),
            generations=len({record_field(records[i], "generation") for i in indices}),
        ))
    return out


def plot_fitness_history(records: Sequence[Any], path: str | Path, *, title: str | None = None,
                         stops: Sequence[Any] = ()) -> Path:
    """Whether the search climbed, within each layer group and overall.

    Top: the fitness of every evaluation (dots, one colour per group), the best so far (solid),
    the best so far *within* each group (dashed), each group's best (star), group boundaries
    (dotted) and, per group, its within-group gain — or "flat" when every evaluation of the group
    had the same task score (then only CacheScore moved the fitness). Bottom: the task score of
    every evaluation, so ties are visible. ``records``: dicts or ``TrialRecord``s with
    ``fitness``, ``task_score``, ``state``, ``group`` and ``generation``, in search order. Failed
    evaluations are red x marks on the axis, never plotted as a score. ``stops``: how each group's
    search ended (``stopping.GroupSummary``, ``SearchResult.groups``): its generations and why it
    stopped are written under its label; the start's candidates (group -1) are labelled "start".
    """
    stopped = {int(g.group): g for g in stops}
    fig, (ax, low) = plt.subplots(2, 1, figsize=(9, 6), sharex=True, gridspec_kw={"height_ratios": [3, 1.4]})
    steps = np.arange(1, len(records) + 1)
    groups = group_progress(records)
    palette = plt.get_cmap("tab10")
    ok_values = [record_field(r, "fitness") for r in records if _ok(r)]
    floor = min(ok_values, default=0.0)
    for k, info in enumerate(groups):
        color = palette(k % 10)
        span = range(info.first - 1, info.last)
        points = [(i + 1, record_field(records[i], "fitness")) for i in span if _ok(records[i])]
        if points:
            xs, ys = zip(*points)
            ax.scatter(xs, ys, s=14, alpha=0.55, color=color)
            ax.step(xs, np.maximum.accumulate(ys), where="post", color=color, linestyle="--", linewidth=1.2)
            scores = [(i + 1, record_field(records[i], "task_score")) for i in span if _ok(records[i])]
            low.scatter(*zip(*scores), s=10, alpha=0.6, color=color)
        if info.best_at is not None:
            ax.scatter([info.best_at], [info.best], marker="*", s=140, color=color, edgecolor="black", zorder=5)
        if info.group is not None and int(info.group) < 0:
            label = "evaluated first"
        elif info.flat:
            label = "flat (one task score)"
        elif info.generations < 2:
            label = "one generation"
        else:
            label = "no gain after gen. 1" if not info.within_gain else f"+{info.within_gain:.3g} after gen. 1"
        stop = stopped.get(int(info.group)) if info.group is not None else None
        if stop is not None:
            # A capped group was still gaining when it stopped: say so, as the report and ``show`` do.
            why = stop.reason.split(':')[0] if stop.converged else "cap, not converged"
            label += f"\n{stop.generations} gen., {why}"
        name = group_name(info.group)
        if name == "start":  # a few evaluations wide: labelled at the foot of the axes, not over group 1's label
            ax.annotate("start", xy=(info.first, 0.02), xycoords=("data", "axes fraction"), ha="left", va="bottom",
                        fontsize=7)
        else:
            again = stop.pass_words().strip() if stop is not None else ""  # "(pass 2, group 1 again)"
            heading = f"group {name}\n{again}" if again else f"group {name}"
            ax.annotate(f"{heading}\n{label}", xy=((info.first + info.last) / 2, 1.0),
                        xycoords=("data", "axes fraction"),
                        ha="center", va="top", fontsize=7, color="black" if not info.flat else "grey")
        if k:
            for axis in (ax, low):
                axis.axvline(info.first - 0.5, color="grey", linewidth=0.8, linestyle=":")
    best = best_so_far(records)
    ax.step(steps, [np.nan if b is None else b for b in best], where="post", color=EVOLVED_COLOR, linewidth=2,
            label="best so far")
    failed = [i for i, r in zip(steps, records) if record_field(r, "state") == "FAIL"]
    if failed:
        ax.scatter(failed, [floor] * len(failed), marker="x", color="red", label=f"failed ({len(failed)})")
    if records:
        ax.plot([], [], color="grey", linestyle="--", label="best within the group")
        ax.scatter([], [], marker="*", s=80, color="grey", edgecolor="black", label="group's best")
        ax.legend(loc="lower right", fontsize=8)
        top = max(ok_values, default=1.0)
        room = (0.26 if stopped else 0.18) + (0.08 if any(s.pass_words() for s in stopped.values()) else 0.0)
        ax.set_ylim(top=top + room * max(top - floor, 1e-3))  # room for the group labels (a pass's: a line more)
    ax.set_ylabel("fitness")
    ax.set_title(title or "Fitness over evaluations: overall and within each layer group")
    ax.grid(alpha=0.3)
    low.set_xlabel("evaluation")
    low.set_ylabel("task score")
    low.grid(alpha=0.3)
    return _save(fig, path)


def plot_score_vs_budget(rows: Sequence[ComparisonRow], path: str | Path, *, title: str | None = None,
                         anchors: Sequence[float] = ()) -> Path:
    """Held-out mean score against budget, one line per method, 95 % intervals as error bars.

    Rows of several tasks (``row.task``) get one panel each, the weighted overall first.
    ``anchors``: the budgets a ``budget.curve`` run searched (ringed on the evolved line; the
    others were interpolated between them)."""
    tasks = tasks_of(rows) or [None]
    fig, axes = plt.subplots(1, len(tasks), figsize=(7 if len(tasks) == 1 else 4.6 * len(tasks), 4), squeeze=False)
    for ax, task in zip(axes[0], tasks):
        _score_panel(ax, [row for row in rows if row.task == task], anchors)
        if task is not None:
            ax.set_title("weighted overall" if task == OVERALL else f"task {task}")
    if len(tasks) == 1:
        axes[0][0].set_title(title or "Held-out score vs budget (95 % bootstrap intervals)")
    else:
        fig.suptitle(title or "Held-out score vs budget (95 % bootstrap intervals)")
    return _save(fig, path)


def _score_panel(ax, rows: Sequence[ComparisonRow], anchors: Sequence[float] = ()) -> None:
    methods = list(dict.fromkeys(row.method for row in rows))
    for offset, method in enumerate(methods):
        mine = sorted((r for r in rows if r.method == method), key=lambda r: r.budget)
        budgets = np.array([r.budget for r in mine])
        # A small horizontal shift per method keeps overlapping error bars readable (log x axis).
        shifted = budgets * (1 + 0.02 * (offset - (len(methods) - 1) / 2))
        means = np.array([r.score.mean for r in mine])
        errors = np.array([[r.score.mean - r.score.low for r in mine], [r.score.high - r.score.mean for r in mine]])
        ax.errorbar(shifted, means, yerr=errors, marker="o", capsize=3, label=method, color=method_color(method))
        ringed = [i for i, r in enumerate(mine) if method == "evolved" and r.budget in anchors]
        if ringed:
            ax.scatter(shifted[ringed], means[ringed], s=140, facecolors="none", edgecolors=method_color(method),
                       linewidths=1.5, label="evolved: searched anchors", zorder=3)
    budgets = sorted({row.budget for row in rows})
    if budgets:
        ax.set_xscale("log", base=2)
        ax.set_xticks(budgets, [f"{b:g}" for b in budgets])
        ax.minorticks_off()
    ax.set_xlabel("budget c (tokens per KV head)")
    ax.set_ylabel("held-out score")
    ax.set_ylim(-0.05, 1.05)
    if len(methods) > LEGEND_INSIDE:  # beside the axes: inside, it hides the points in its corner
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0, fontsize=8)
    elif methods:
        ax.legend()
    ax.grid(alpha=0.3)
