"""Fake evaluators with a known optimum, and small search settings that keep tests fast."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from evolalloc.engine.base import EvalResult
from evolalloc.search import SearchConfig

LAYERS, HEADS, TARGET = 8, 2, 32.0
# The hidden optimum: more cache at the bottom, less at the top, mean exactly 1.0 (= c).
OPTIMUM = np.linspace(1.6, 0.4, LAYERS)


class SimulatedKill(RuntimeError):
    """Raised from inside the evaluator to stand for the process being killed."""


def profile_error(budgets: np.ndarray, target: float = TARGET) -> float:
    """Mean |layer ratio - optimum ratio| of a ``[L, H]`` budget array."""
    return float(np.abs(np.asarray(budgets).mean(axis=1) / target - OPTIMUM).mean())


@dataclass
class ProfileEvaluator:
    """Task score = 1 - mean |layer ratio - OPTIMUM| / 2: best (1.0) at the hidden profile.

    Counts calls and candidates; ``kill_at_call=k`` raises ``SimulatedKill`` on the k-th call
    (1-based) before evaluating anything; ``fail`` decides per budget which ones fail
    (returning an error string, or "nan" for a non-finite score).
    """

    kill_at_call: int | None = None
    fail: object = None  # callable(budgets) -> None | "nan" | error message
    calls: int = 0
    candidates: int = 0
    batch_sizes: list[int] = field(default_factory=list)
    seen: list[bytes] = field(default_factory=list)

    def evaluate(self, budgets):
        self.calls += 1
        if self.kill_at_call is not None and self.calls == self.kill_at_call:
            raise SimulatedKill(f"killed at call {self.calls}")
        self.batch_sizes.append(len(budgets))
        self.candidates += len(budgets)
        results = []
        for b in budgets:
            assert b.shape == (LAYERS, HEADS) and b.dtype.kind == "i"
            self.seen.append(b.tobytes())
            verdict = self.fail(b) if self.fail else None
            if verdict == "nan":
                results.append(EvalResult(task_score=math.nan))
            elif verdict:
                results.append(EvalResult(task_score=None, error=verdict))
            else:
                results.append(EvalResult(task_score=1.0 - profile_error(b) / 2, seconds=0.01))
        return results


@dataclass
class MoreCacheIsBetter:
    """A task that always gains a little from more cache: score = 0.9 + 0.05 * min(mean ratio, 2)."""

    def evaluate(self, budgets):
        return [EvalResult(task_score=0.9 + 0.05 * min(float(b.mean()) / TARGET, 2.0)) for b in budgets]


def small_config(run_dir, **overrides) -> SearchConfig:
    """8 layers x 2 KV heads, groups of 4 layers (population 8), 3 generations.

    Trials go to a journal file in ``run_dir`` (SQLite costs ~30 ms a trial; ``storage=None``
    selects the default SQLite where a test is about it).
    """
    settings = dict(
        num_layers=LAYERS,
        num_kv_heads=HEADS,
        target=TARGET,
        group_size=4,
        generations=3,
        seed=7,
        storage=f"journal:{run_dir}/journal.log",
    )
    settings.update(overrides)
    return SearchConfig(**settings)
