"""Issue 23's fair control: random search and TPE in the depth-knots space, with the evaluations
CMA-ES spends there (one group of 6 knots, population 8 x 4 generations = 32)."""

from __future__ import annotations

import numpy as np
import pytest

from evolalloc.search import run_search
from searchspaces import get_search_space
from tests.search.fakes import HEADS, LAYERS, TARGET, ProfileEvaluator, profile_error, small_config


def knots_config(run_dir, optimizer):
    return small_config(run_dir, optimizer=optimizer, search_space="depth_knots", group_size=8,
                        popsize=8, generations=4, budget_rule="exact")


@pytest.mark.parametrize("optimizer", ["cma", "random", "optuna-tpe"])
def test_every_optimizer_searches_the_six_knots_with_the_same_32_evaluations(tmp_path, optimizer):
    evaluator = ProfileEvaluator()
    result = run_search(tmp_path, evaluator, knots_config(tmp_path, optimizer), progress=False)
    assert len(result.history) == 32 and evaluator.candidates == 32
    assert evaluator.batch_sizes == [8, 8, 8, 8]  # one group: the whole knot vector moves every generation
    space = get_search_space("depth_knots", num_layers=LAYERS, num_kv_heads=HEADS, target=TARGET)
    shapes = set()
    for record in result.history:
        budgets = np.asarray(record.budgets)
        assert budgets.shape == (LAYERS, HEADS) and int(budgets.sum()) == int(TARGET * LAYERS * HEADS)
        assert np.all(budgets == budgets[:, :1])  # all KV heads of a layer alike: a layer profile
        shapes.add(budgets[:, 0].tobytes())
    assert len(shapes) > 16  # the controls explore the space, they do not repeat the start point
    # The candidates are knot profiles: refitting 6 knots to a candidate's layers reproduces it
    # (up to the integer rounding and the exact-total completion), which 8 free layers would not.
    fitted = space.decode(space.encode(np.asarray(result.best_budgets)))
    assert np.abs(fitted - np.asarray(result.best_budgets)).max() <= 2
    uniform = np.full((LAYERS, HEADS), int(TARGET))
    assert profile_error(result.best_budgets) < profile_error(uniform)
