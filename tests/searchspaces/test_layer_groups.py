import numpy as np
import pytest

from searchspaces import get_search_space


def make(**overrides):
    options = dict(num_layers=30, num_kv_heads=3, target=128)
    options.update(overrides)
    return get_search_space("layer_groups", **options)


def test_units_are_layers_and_groups_of_eight_run_bottom_up_with_a_short_last_group():
    space = make()
    assert space.n_units == 30
    groups = space.groups()
    assert [len(g) for g in groups] == [8, 8, 8, 6]
    assert np.array_equal(np.concatenate(groups), np.arange(30))
    assert groups[0][0] == 0 and groups[-1][-1] == 29


def test_the_initial_ratios_decode_to_the_uniform_target():
    space = make()
    assert np.array_equal(space.initial_ratios(), np.ones(30))
    budgets = space.decode(space.initial_ratios())
    assert budgets.shape == (30, 3) and budgets.dtype == np.int64
    assert np.all(budgets == 128)


def test_a_layer_budget_applies_to_all_of_its_kv_heads():
    space = make(num_layers=3, num_kv_heads=4, target=10)
    budgets = space.decode(np.array([0.5, 1.04, 2.25]))
    assert budgets.tolist() == [[5] * 4, [10] * 4, [23] * 4]  # 22.5 rounds up, 10.4 down


def test_decode_clips_budgets_to_min_and_max():
    space = make(num_layers=3, num_kv_heads=1, target=100, min_budget=32, max_budget=150, ratio_bounds=(0.0, 4.0))
    assert space.decode(np.array([0.01, 1.0, 3.0]))[:, 0].tolist() == [32, 100, 150]


def test_decode_clips_ratios_to_the_bounds():
    space = make(num_layers=2, num_kv_heads=1, target=100, ratio_bounds=(0.5, 2.0))
    assert space.decode(np.array([-3.0, 9.0]))[:, 0].tolist() == [50, 200]


def test_default_bounds_start_at_the_min_budget_and_stop_at_four_or_max_budget():
    assert make(min_budget=32).ratio_bounds == (0.25, 4.0)
    assert make(min_budget=1, max_budget=256).ratio_bounds == (1 / 128, 2.0)
    assert make(max_budget=10_000).ratio_bounds[1] == 4.0


def test_encode_inverts_decode_on_whole_budgets():
    space = make(num_layers=4, num_kv_heads=2, target=64)
    budgets = np.array([[10, 10], [64, 64], [100, 100], [200, 200]])
    assert np.array_equal(space.decode(space.encode(budgets)), budgets)


def test_encode_takes_the_mean_over_heads():
    space = make(num_layers=2, num_kv_heads=2, target=10)
    assert np.allclose(space.encode(np.array([[5, 15], [20, 20]])), [1.0, 2.0])


def test_wrong_shapes_and_nan_ratios_raise():
    space = make()
    with pytest.raises(ValueError, match=r"\(30,\)"):
        space.decode(np.ones(29))
    with pytest.raises(ValueError, match="finite"):
        space.decode(np.full(30, np.nan))
    with pytest.raises(ValueError, match=r"\(30, 3\)"):
        space.encode(np.ones((3, 30)))


@pytest.mark.parametrize(
    "overrides, message",
    [
        (dict(target=0), "positive"),
        (dict(group_size=0), "group_size"),
        (dict(min_budget=200), "above the target"),
        (dict(max_budget=100), "below the target"),
        (dict(ratio_bounds=(1.5, 3.0)), "contain 1.0"),
        (dict(ratio_bounds=(2.0, 1.0)), "lower < upper"),
    ],
)
def test_impossible_settings_raise(overrides, message):
    with pytest.raises(ValueError, match=message):
        make(**overrides)
