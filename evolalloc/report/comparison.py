"""The comparison table: every method at every budget on held-out instances, with statistics.

Input is plain data, what ``compare`` collects from its evaluations::

    scores = {"evolved": {128: {"uid-1": 1.0, "uid-2": 0.0, ...}, 256: {...}},
              "uniform": {128: {...}, 256: {...}}, ...}

(method -> budget -> instance uid -> score in [0, 1]). ``compare_scores`` turns it into one
``ComparisonRow`` per (method, budget): mean, 95 % bootstrap interval, and for every method but
the reference a paired test against the reference at the same budget. ``save_comparison`` /
``load_comparison`` keep it as ``comparison.json`` in the run folder for the report and ``show``.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Mapping

from evolalloc.core.baselines import EVOLVED, ordered
from evolalloc.core.errors import UserError
from evolalloc.core.fileio import write_atomic
from evolalloc.report.stats import RESAMPLES, Interval, PairedTest, align, bootstrap_mean, paired_test

REFERENCE = EVOLVED


@dataclass(frozen=True)
class ComparisonRow:
    """One method at one budget. ``versus`` is the paired test of the *reference* minus this
    method (positive diff: the reference did better); ``None`` for the reference itself."""

    method: str
    budget: float
    score: Interval
    versus: PairedTest | None = None

    def to_dict(self) -> dict:
        return {"method": self.method, "budget": self.budget, "score": asdict(self.score),
                "versus": None if self.versus is None else self.versus.to_dict()}

    @classmethod
    def from_dict(cls, data: Mapping) -> ComparisonRow:
        versus = data.get("versus")
        return cls(method=data["method"], budget=data["budget"], score=Interval(**data["score"]),
                   versus=None if versus is None else PairedTest(**versus))


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
        for method in ordered(scores):  # evolved, then the baselines in the order they declare
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


def _at(per_budget: Mapping[float, Mapping[str, float]], budget: float) -> Mapping[str, float] | None:
    for key, values in per_budget.items():
        if float(key) == budget:
            return values
    return None


def save_comparison(rows: list[ComparisonRow], path: str | Path, *, meta: Mapping | None = None) -> Path:
    """Write ``comparison.json`` atomically; ``meta`` (split, task, n, seed...) is kept alongside."""
    document = {"format": "evolalloc.comparison", "version": 1, "reference": REFERENCE,
                "meta": dict(meta or {}), "rows": [row.to_dict() for row in rows]}
    return write_atomic(path, json.dumps(document, indent=2, allow_nan=False) + "\n")


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
