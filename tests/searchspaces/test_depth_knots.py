import numpy as np
import pytest

from searchspaces import get_search_space


def make(**overrides):
    options = dict(num_layers=30, num_kv_heads=3, target=128)
    options.update(overrides)
    return get_search_space("depth_knots", **options)


def test_six_knots_are_searched_in_one_group_so_the_whole_vector_moves_at_once():
    space = make()
    assert space.n_units == 6 and space.granularity == "layer"
    assert [g.tolist() for g in space.groups()] == [list(range(6))]


def test_uniform_knots_decode_to_the_uniform_profile():
    budgets = make().decode(np.ones(6))
    assert budgets.shape == (30, 3) and budgets.dtype == np.int64 and np.all(budgets == 128)


def test_layers_between_two_knots_are_linearly_interpolated_and_knots_sit_on_their_layers():
    # 11 layers, 6 knots: a knot every 2 layers, so odd layers lie halfway between two knots.
    space = make(num_layers=11, num_kv_heads=1, target=100, ratio_bounds=(0.0, 4.0))
    layers = space.decode(np.array([0.5, 1.0, 2.0, 1.0, 0.5, 1.5]))[:, 0]
    assert layers.tolist() == [50, 75, 100, 150, 200, 150, 100, 75, 50, 100, 150]


def test_neighbouring_layers_never_jump_more_than_one_knot_step():
    rng = np.random.default_rng(0)
    space = make(ratio_bounds=(0.1, 4.0))
    for _ in range(20):
        knots = rng.uniform(0.1, 4.0, 6)
        layers = space.decode(knots)[:, 0]
        step = np.max(np.abs(np.diff(knots))) * 128 / 5.8 + 1  # 29 gaps over 5 knot intervals, +1 rounding
        assert np.max(np.abs(np.diff(layers))) <= step


def test_the_exact_rule_completes_the_layers_to_c_times_layers_with_the_floor_kept():
    space = make(min_budget=40, exact_total=True)
    budgets = space.decode(np.array([0.2, 3.0, 1.0, 0.5, 2.5, 0.4]))
    assert budgets[:, 0].sum() == 128 * 30 and budgets.min() >= 40
    assert np.all(budgets == budgets[:, :1])  # all KV heads of a layer alike


def test_encode_fits_the_knots_of_a_piecewise_linear_profile_exactly():
    space = make(num_layers=11, num_kv_heads=2, target=100, ratio_bounds=(0.0, 4.0))
    knots = np.array([0.5, 1.0, 2.0, 1.0, 0.5, 1.5])
    assert np.allclose(space.encode(space.decode(knots)), knots)


def test_decode_refuses_a_vector_of_the_wrong_length():
    with pytest.raises(ValueError, match=r"shape \(6,\)"):
        make().decode(np.ones(30))
