"""``core/curve.py``: the grid, bounded completion, and a profile curve through nested anchors."""

from __future__ import annotations

import numpy as np
import pytest

from evolalloc.core.allocation import Allocation
from evolalloc.core.curve import ANCHOR, DERIVED, ProfileCurve, bounded_completion, curve_grid
from evolalloc.core.errors import UserError
from evolalloc.core.geometry import ModelGeometry

GEOMETRY = ModelGeometry(num_layers=6, num_query_heads=4, num_kv_heads=2, head_dim=8, max_positions=4096)


def test_the_grid_runs_geometrically_from_low_to_high_times_c_and_holds_c():
    assert curve_grid(128, 0.25, 4.0, 5) == [32, 64, 128, 256, 512]
    assert curve_grid(100, 0.25, 4.0, 4) == [25, 63, 100, 159, 400]  # c is added when the points miss it


def test_bounded_completion_hits_the_total_inside_the_bounds():
    rng = np.random.default_rng(0)
    for _ in range(300):
        n = int(rng.integers(1, 15))
        lo = rng.integers(0, 6, n)
        hi = lo + rng.integers(0, 30, n)
        total = int(rng.integers(lo.sum(), hi.sum() + 1))
        out = bounded_completion(rng.random(n) * 9, total, lo, hi)
        assert out.sum() == total and np.all(out >= lo) and np.all(out <= hi)


def test_bounded_completion_is_proportional_where_no_bound_binds():
    assert bounded_completion([1, 2, 3, 4], 20, [0] * 4, [100] * 4).tolist() == [2, 4, 6, 8]
    # the first unit is held at its floor; the others share the rest in their ratios
    assert bounded_completion([1, 2, 3, 4], 20, [5, 0, 0, 0], [100] * 4).tolist() == [5, 3, 5, 7]


def test_bounded_completion_refuses_a_total_the_bounds_cannot_hold():
    with pytest.raises(ValueError, match="sum to 12"):
        bounded_completion([1, 1], 12, [0, 0], [5, 5])


def _alloc(budgets, target, granularity="head") -> Allocation:
    return Allocation(model="m", geometry=GEOMETRY, target=target, granularity=granularity,
                      budgets=np.asarray(budgets), provenance={"method": "evolved"})


def _nested_anchors(granularity="head"):
    rng = np.random.default_rng(3)
    shape = (6, 2) if granularity == "head" else (6, 1)
    out, prev = {}, None  # anchors at 16, 64, 256 per unit on average, each nesting the one below
    for target in (16.0, 64.0, 256.0):
        units = shape[0] * shape[1]
        base = np.zeros(shape, dtype=np.int64) if prev is None else prev
        grow = rng.random(shape) + 0.1
        extra = target * units - base.sum()
        row = base + np.floor(grow / grow.sum() * extra).astype(np.int64)
        row.flat[0] += int(target * units - row.sum())
        budgets = np.repeat(row, 2, axis=1) if granularity == "layer" else row
        out[target] = _alloc(budgets, target, granularity)
        prev = row
    return out


@pytest.mark.parametrize("granularity", ["head", "layer"])
def test_a_curve_through_nested_anchors_is_monotone_exact_and_keeps_the_anchors(granularity):
    anchors = _nested_anchors(granularity)
    grid = curve_grid(64, 0.25, 4.0, 9)
    curve = ProfileCurve.from_anchors(anchors, grid)
    assert curve.budgets == [float(b) for b in grid]
    assert [role == ANCHOR for role in curve.roles] == [b in (16, 64, 256) for b in grid]
    assert DERIVED in curve.roles
    assert np.all(np.diff(curve.rows, axis=0) >= 0)  # no unit loses tokens as the budget grows
    for budget, row in zip(curve.budgets, curve.rows):
        assert row.sum() == round(budget * 12) if granularity == "head" else row[:, 0].sum() == round(budget * 6)
        if budget in anchors:
            assert np.array_equal(row, anchors[budget].budgets)


def test_anchors_that_do_not_nest_are_refused():
    anchors = _nested_anchors()
    swapped = anchors[64.0].budgets.copy()
    swapped[0, 0], swapped[5, 1] = (
        anchors[16.0].budgets[0, 0] - 1,
        swapped[5, 1] + swapped[0, 0] - anchors[16.0].budgets[0, 0] + 1,
    )
    anchors[64.0] = _alloc(swapped, 64.0)
    with pytest.raises(ValueError, match="not nested"):
        ProfileCurve.from_anchors(anchors, [16, 64, 256])


def test_a_family_at_any_targets_is_monotone_exact_and_equals_the_grid_rows():
    curve = ProfileCurve.from_anchors(_nested_anchors(), [16, 32, 64, 128, 256])
    targets = [8, 16, 20, 32, 50, 64, 100, 256, 300, 700]
    family = curve.family(targets)
    assert np.all(np.diff(family, axis=0) >= 0)
    assert [int(row.sum()) for row in family] == [round(t * 12) for t in targets]
    for t, row in zip(targets, family):
        if t in curve.budgets:
            assert np.array_equal(row, curve.row(t))
    assert curve.outside(targets) == [8.0, 300.0, 700.0]


@pytest.mark.parametrize("floor", [1, 8])
def test_a_capped_family_keeps_no_unit_above_the_cap_and_stays_monotone(floor):
    curve = ProfileCurve.from_anchors(_nested_anchors(), [16, 64, 256], min_budget=floor)
    n = 200
    targets = [n * (1 - (i + 1) / 100) for i in range(99)][::-1]  # LU-KV's rows, ascending budgets
    family = curve.family(targets, cap=n)
    assert family.max() <= n and np.all(np.diff(family, axis=0) >= 0)
    assert [int(row.sum()) for row in family] == [min(round(t * 12), 12 * n) for t in targets]


def test_a_curve_file_round_trips_and_a_broken_one_names_its_field(tmp_path):
    curve = ProfileCurve.from_anchors(_nested_anchors(), [16, 32, 64, 128, 256])
    path = curve.save(tmp_path / "profile-curve.json")
    loaded = ProfileCurve.load(path)
    assert np.array_equal(loaded.rows, curve.rows) and loaded.roles == curve.roles and loaded.anchors == [16.0, 64.0,
                                                                                                          256.0]
    text = path.read_text().replace('"format": "evolalloc.profile_curve"', '"format": "other"')
    (tmp_path / "bad.json").write_text(text)
    with pytest.raises(UserError, match="bad.json: format"):
        ProfileCurve.load(tmp_path / "bad.json")
