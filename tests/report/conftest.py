"""Hand-made run data: a recipe, trial records, scores and profiles, no model needed."""

import numpy as np
import pytest

from evolalloc.config.recipe import recipe_from_dict
from evolalloc.core.allocation import Allocation
from evolalloc.core.baselines import make_baseline
from evolalloc.core.geometry import ModelGeometry
from evolalloc.report.comparison import compare_scores

GEOMETRY = ModelGeometry(num_layers=6, num_query_heads=4, num_kv_heads=2, head_dim=8, max_positions=4096)


@pytest.fixture
def recipe():
    return recipe_from_dict(
        {"name": "demo", "task": {"name": "passkey", "context_tokens": 1000}, "budget": {"target": 64},
         "optimizer": {"generations_per_group": 2}},
        check_names=False,
    )


@pytest.fixture
def history():
    """Two groups of 4 evaluations, one failure; fitness rises in group 2."""
    fitness = [0.5, 0.7, None, 0.6, 0.9, 0.8, 1.1, 1.0]
    return [
        {"group": i // 4, "generation": 0, "candidate": i % 4, "fitness": f,
         "state": "FAIL" if f is None else "COMPLETE", "task_score": None if f is None else f / 1.3}
        for i, f in enumerate(fitness)
    ]


@pytest.fixture
def scores():
    """Evolved clearly beats streaming, ties uniform exactly, at budgets 64 and 128."""
    uids = [f"u{i}" for i in range(20)]
    good = {u: 1.0 for u in uids[:18]} | {u: 0.0 for u in uids[18:]}
    bad = {u: 1.0 for u in uids[:3]} | {u: 0.0 for u in uids[3:]}
    return {
        "evolved": {64: good, 128: good},
        "uniform": {64: dict(good), 128: dict(good)},
        "streaming": {64: bad, 128: bad},
    }


@pytest.fixture
def rows(scores):
    return compare_scores(scores, n_resamples=2000)


@pytest.fixture
def profiles():
    evolved = Allocation(model="m", geometry=GEOMETRY, target=64,
                         budgets=np.repeat(np.array([[120], [90], [60], [40], [40], [34]]), 2, axis=1),
                         provenance={"method": "evolved", "fitness": 1.1, "task_score": 0.85, "evaluations": 8})
    return {"evolved": evolved, "uniform": make_baseline("uniform").allocation(GEOMETRY, 64),
            "pyramid": make_baseline("pyramid").allocation(GEOMETRY, 64)}
