"""LU-KV's hull greedy (core/baselines/lukv.py) against brute force on toys with known curves."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from evolalloc.core.baselines import make_baseline
from evolalloc.core.baselines.lukv import UtilityCurves, greedy_budgets, upper_hull
from evolalloc.core.errors import UserError
from evolalloc.core.geometry import ModelGeometry


def brute_force(values: np.ndarray, total: int, floor: int) -> float:
    """The best ``sum_u values[u, b_u]`` over every split of ``total`` with ``floor <= b_u <= B``."""
    units, top = values.shape[0], values.shape[1] - 1
    best = -np.inf
    for split in itertools.product(range(floor, top + 1), repeat=units):
        if sum(split) == total:
            best = max(best, sum(values[u, b] for u, b in enumerate(split)))
    return best


def hull_values(curve: np.ndarray, start: int) -> np.ndarray:
    """The upper concave envelope of ``curve[start:]`` evaluated at every budget (nan below start)."""
    vertices = upper_hull(curve, start)
    out = np.full(len(curve), np.nan)
    out[start:] = np.interp(np.arange(start, len(curve)), vertices, curve[vertices])
    return out


def concave_curves(rng, units: int, top: int) -> np.ndarray:
    """Random non-decreasing concave curves ``[units, top + 1]``: cumulative sums of falling gains."""
    gains = -np.sort(-rng.random((units, top)), axis=1)
    return np.concatenate([np.zeros((units, 1)), np.cumsum(gains, axis=1)], axis=1)


@pytest.mark.parametrize("seed", range(6))
def test_greedy_reaches_the_brute_force_optimum_on_concave_curves(seed):
    rng = np.random.default_rng(seed)
    curves = concave_curves(rng, units=4, top=6)
    floor = seed % 2
    for total in range(4 * floor, 4 * 6 + 1):
        budgets = greedy_budgets(curves, total, floor)
        assert budgets.sum() == total and budgets.min() >= floor and budgets.max() <= 6
        got = curves[np.arange(4), budgets].sum()
        assert got == pytest.approx(brute_force(curves, total, floor)), (total, budgets)


@pytest.mark.parametrize("seed", range(6))
def test_greedy_reaches_the_optimum_of_the_hull_relaxation_on_any_curves(seed):
    """Non-concave curves (a step: a unit that needs many tokens before it helps at all): the
    greedy is optimal for the hulls, and never worse than the real curves' optimum it bounds."""
    rng = np.random.default_rng(100 + seed)
    curves = np.cumsum(rng.random((3, 7)) * (rng.random((3, 7)) < 0.4), axis=1)
    curves[:, 0] = 0
    curves = np.maximum.accumulate(curves, axis=1)
    floor = 1
    hulls = np.stack([hull_values(c, floor) for c in curves])
    for total in range(3 * floor, 3 * 6 + 1):
        budgets = greedy_budgets(curves, total, floor)
        assert budgets.sum() == total
        relaxed = hulls[np.arange(3), budgets].sum()
        best_hull = brute_force(np.nan_to_num(hulls, nan=-np.inf), total, floor)
        assert relaxed == pytest.approx(best_hull)
        assert relaxed >= brute_force(curves, total, floor) - 1e-12


def test_a_step_curve_is_relaxed_to_its_chord():
    """A unit worth nothing until 4 tokens, then 1: its hull is the chord 0 -> 4, slope 1/4, so it
    wins tokens over a unit whose every token is worth 0.2, and loses them to one worth 0.3."""
    step = np.array([0, 0, 0, 0, 1, 1, 1], dtype=float)
    assert upper_hull(step).tolist() == [0, 4, 6]
    flat = lambda gain: np.arange(7) * gain  # noqa: E731
    assert greedy_budgets(np.stack([step, flat(0.2)]), 4).tolist() == [4, 0]
    assert greedy_budgets(np.stack([step, flat(0.3)]), 4).tolist() == [0, 4]


def test_the_greedy_is_monotone_in_the_total():
    """One set of curves, every total: no unit loses tokens when the total grows (segments are taken in one order)."""
    curves = concave_curves(np.random.default_rng(7), units=6, top=20)
    previous = greedy_budgets(curves, 6)
    for total in range(7, 6 * 20 + 1):
        budgets = greedy_budgets(curves, total)
        assert np.all(budgets >= previous)
        previous = budgets


def test_an_impossible_total_is_refused():
    curves = np.zeros((2, 5))
    with pytest.raises(ValueError, match="needs 2 <= total <= 8"):
        greedy_budgets(curves, 9, floor=1)


def test_the_baseline_allocates_the_exact_total_from_its_curves():
    geometry = ModelGeometry(num_layers=2, num_query_heads=4, num_kv_heads=2, head_dim=8, max_positions=64)
    # Unit (0, 0) gains 1 per token, the others 0.1: at c = 3 (12 tokens) it takes all it can.
    utility = np.stack([np.arange(11) * g for g in (1, 0.1, 0.1, 0.1)]).reshape(2, 2, 11)
    baseline = make_baseline("lukv", curves=UtilityCurves(utility, floor=1, meta={"utility": "toy"}))
    allocation = baseline.allocation(geometry, 3)
    assert allocation.granularity == "head"
    assert allocation.budgets.tolist() == [[9, 1], [1, 1]]
    assert allocation.provenance["method"] == "lukv" and allocation.provenance["utility"] == "toy"


def test_the_baseline_without_curves_says_what_it_needs():
    geometry = ModelGeometry(num_layers=2, num_query_heads=4, num_kv_heads=2, head_dim=8, max_positions=64)
    with pytest.raises(ValueError, match="needs utility curves profiled on the search split"):
        make_baseline("lukv").allocation(geometry, 3)


def test_curves_survive_a_round_trip_and_a_bad_file_names_itself(tmp_path):
    curves = UtilityCurves(np.random.default_rng(0).random((2, 3, 5)).cumsum(axis=2), floor=2, meta={"split": "search"})
    loaded = UtilityCurves.load(curves.save(tmp_path / "c.npz"))
    assert np.array_equal(loaded.utility, curves.utility) and loaded.floor == 2 and loaded.meta == {"split": "search"}
    bad = tmp_path / "bad.npz"
    bad.write_text("not numpy")
    with pytest.raises(UserError, match="bad.npz"):
        UtilityCurves.load(bad)
    np.savez(tmp_path / "partial.npz", utility=np.zeros((1, 1, 3)))
    with pytest.raises(UserError, match="partial.npz: floor"):
        UtilityCurves.load(tmp_path / "partial.npz")
