"""The comparison table: every method at every budget on held-out instances, with statistics.

Input is plain data, what ``compare`` collects from its evaluations::

    scores = {"evolved": {128: {"uid-1": 1.0, "uid-2": 0.0, ...}, 256: {...}},
              "uniform": {128: {...}, 256: {...}}, ...}

(method -> budget -> instance uid -> score in [0, 1]). ``compare_scores`` turns it into one
``ComparisonRow`` per (method, budget): mean, 95 % bootstrap interval, and for every method but
the reference a paired test against the reference at the same budget. ``save_comparison`` /
``load_comparison`` keep it as ``comparison.json`` in the run folder for the report and ``show``.

Several tasks: ``compare_tasks`` makes every task's rows (``row.task`` = the task's label) and the
weighted overall rows (``row.task`` = ``OVERALL``). A single task's rows have ``task`` None.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Mapping, Sequence

from evolalloc.core.errors import UserError
from evolalloc.core.fileio import write_atomic
from evolalloc.core.methods import EVOLVED
from evolalloc.report.method_style import ordered
from evolalloc.report.stats import RESAMPLES, Interval, PairedTest, align, bootstrap_mean, paired_test

REFERENCE = EVOLVED
OVERALL = "overall"


@dataclass(frozen=True)
class ComparisonRow:
    """One method at one budget. ``versus`` is the paired test of the *reference* minus this
    method (positive diff: the reference did better); ``None`` for the reference itself."""

    method: str
    budget: float
    score: Interval
    versus: PairedTest | None = None
    task: str | None = None  # None: the run's only task; else a task's label, or OVERALL

    def to_dict(self) -> dict:
        return {"method": self.method, "budget": self.budget, "task": self.task, "score": asdict(self.score),
                "versus": None if self.versus is None else self.versus.to_dict()}

    @classmethod
    def from_dict(cls, data: Mapping) -> ComparisonRow:
        versus = data.get("versus")
        return cls(method=data["method"], budget=data["budget"], score=Interval(**data["score"]),
                   versus=None if versus is None else PairedTest(**versus), task=data.get("task"))


def compare_scores(
    scores: Mapping[str, Mapping[float, Mapping[str, float]]], *, reference: str = REFERENCE, seed: int = 0,
    n_resamples: int = RESAMPLES,
) -> list[ComparisonRow]:
    """Rows sorted by budget, then method (reference first). See the module docstring for input.

    A method missing at some budget simply has no row there; a reference missing at a budget
    leaves the other methods there without a paired test.
    """
    rows = []
    budgets = sorted({float(b) for per_budget in scores.values() for b in per_budget})
    for budget in budgets:
        ref = _at(scores.get(reference, {}), budget)
        for method in ordered(scores):  # evolved, then the baselines in report order
            mine = _at(scores[method], budget)
            if mine is None:
                continue
            interval = bootstrap_mean(list(mine.values()), seed=seed, n_resamples=n_resamples)
            versus = None
            if method != reference and ref is not None:
                ours, theirs = align(ref, mine, (reference, method))
                versus = paired_test(ours, theirs, seed=seed, n_resamples=n_resamples)
            rows.append(ComparisonRow(method=method, budget=budget, score=interval, versus=versus))
    return rows


def compare_tasks(
    scores: Mapping[str, Mapping[str, Mapping[float, Mapping[str, float]]]], weights: Mapping[str, float], *,
    reference: str = REFERENCE, seed: int = 0, n_resamples: int = RESAMPLES,
) -> list[ComparisonRow]:
    """Rows of every task (``scores``: task label -> the ``compare_scores`` input) and the weighted
    overall rows, which come first.

    The overall score of a method is ``sum_t w_t * mean_t / sum_t w_t``, the fitness's weighting.
    Its interval and paired test are computed on per-instance values ``score * (w_t / W) * (N / n_t)``
    (``W`` = total weight, ``N`` = all instances, ``n_t`` = task t's): their plain mean is exactly
    that weighted mean, so the bootstrap resamples instances as usual and the paired tests pair
    each instance with itself. These values can exceed 1; the means cannot.
    """
    total = float(sum(weights[label] for label in scores))
    sizes = {label: _instances_of(per_method) for label, per_method in scores.items()}
    count = sum(sizes.values())
    overall: dict[str, dict[float, dict[str, float]]] = {}
    for label, per_method in scores.items():
        factor = weights[label] / total * count / sizes[label]
        for method, per_budget in per_method.items():
            for budget, per_uid in per_budget.items():
                target = overall.setdefault(method, {}).setdefault(float(budget), {})
                target.update({f"{label}/{uid}": value * factor for uid, value in per_uid.items()})
    # Methods must cover every task at a budget to have an overall score there.
    for method in list(overall):
        for budget in list(overall[method]):
            if any(_at(scores[label].get(method, {}), budget) is None for label in scores):
                del overall[method][budget]
    rows = [dataclasses.replace(row, task=OVERALL)
            for row in compare_scores(overall, reference=reference, seed=seed, n_resamples=n_resamples)]
    for label, per_method in scores.items():
        rows += [dataclasses.replace(row, task=label)
                 for row in compare_scores(per_method, reference=reference, seed=seed, n_resamples=n_resamples)]
    return rows


def _instances_of(per_method: Mapping[str, Mapping[float, Mapping[str, float]]]) -> int:
    sizes = {len(per_uid) for per_budget in per_method.values() for per_uid in per_budget.values()}
    if len(sizes) != 1:
        raise ValueError("every method and budget of a task must be scored "
                         f"on the same instances, got sizes {sorted(sizes)}")
    return sizes.pop()


def tasks_of(rows: Sequence[ComparisonRow]) -> list[str | None]:
    """The tasks the rows cover, in row order (``[None]`` for a single-task comparison)."""
    return list(dict.fromkeys(row.task for row in rows))


def _at(per_budget: Mapping[float, Mapping[str, float]], budget: float) -> Mapping[str, float] | None:
    for key, values in per_budget.items():
        if float(key) == budget:
            return values
    return None


def save_comparison(rows: list[ComparisonRow], path: str | Path, *, meta: Mapping | None = None,
                    scores: Mapping | None = None) -> Path:
    """Write ``comparison.json`` atomically; ``meta`` (split, task, n, seed...) is kept alongside.

    ``scores``: ``{task label: {method: {budget: {instance uid: score}}}}``, every instance's
    held-out score, kept under ``"instances"`` so other paired tests (two runs' profiles on the
    same instances: ``benchmarks/versus.py``) need no new evaluation.
    """
    document = {"format": "evolalloc.comparison", "version": 1, "reference": REFERENCE,
                "meta": dict(meta or {}), "rows": [row.to_dict() for row in rows]}
    if scores is not None:
        document["instances"] = {str(task): {method: {f"{float(budget):g}": dict(per_uid)
                                                      for budget, per_uid in per_budget.items()}
                                             for method, per_budget in per_method.items()}
                                 for task, per_method in scores.items()}
    return write_atomic(path, json.dumps(document, indent=2, allow_nan=False) + "\n")


def load_instance_scores(path: str | Path) -> dict[str, dict[str, dict[float, dict[str, float]]]]:
    """The per-instance scores ``save_comparison`` kept, ``{task: {method: {budget: {uid: score}}}}``;
    ``UserError`` naming the file when it has none (written before they were kept: run
    ``evolalloc compare RUN`` again)."""
    source = str(path)
    try:
        document = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise UserError(f"cannot read the comparison: {err}", source=source) from None
    if "instances" not in document:
        raise UserError("no per-instance scores in this comparison; run `evolalloc compare` on the run again",
                        source=source, field="$.instances")
    return {task: {method: {float(budget): per_uid for budget, per_uid in per_budget.items()}
                   for method, per_budget in per_method.items()}
            for task, per_method in document["instances"].items()}


def load_comparison(path: str | Path) -> tuple[list[ComparisonRow], dict]:
    """``(rows, meta)`` from a ``comparison.json``; ``UserError`` naming the file if it is bad."""
    source = str(path)
    try:
        document = json.loads(Path(path).read_text(encoding="utf-8"))
        if document.get("format") != "evolalloc.comparison":
            raise UserError("not an evolalloc comparison file", source=source, field="$.format")
        return [ComparisonRow.from_dict(row) for row in document["rows"]], dict(document.get("meta", {}))
    except FileNotFoundError:
        raise UserError("no such file", source=source) from None
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as err:
        raise UserError(f"cannot read the comparison: {err}", source=source) from None
