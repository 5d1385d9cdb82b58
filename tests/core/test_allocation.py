import numpy as np
import pytest

from evolalloc.core.allocation import Allocation, complete_budgets
from evolalloc.core.baselines import make_baseline
from evolalloc.core.baselines.pyramid import pyramid_layer_budgets
from evolalloc.core.geometry import ModelGeometry

SMOLLM = ModelGeometry(num_layers=30, num_query_heads=9, num_kv_heads=3, head_dim=64, max_positions=8192)


def evolved(budgets, geometry=SMOLLM, target=128, granularity="layer"):
    return Allocation(
        model="smollm2-135m", geometry=geometry, target=target, granularity=granularity,
        budgets=np.asarray(budgets), provenance={"method": "evolved"},
    )


# -- completion ------------------------------------------------------------------------------


def test_completion_matches_a_hand_computed_case():
    # A = 10, T = 16: exact shares 4.8, 8, 3.2 -> ceilings 5, 8, 4 (17); the excess token comes
    # off the largest budget among those rounded up (the 5).
    assert complete_budgets(np.array([3, 5, 2]), 16).tolist() == [4, 8, 4]


def test_completion_keeps_a_profile_that_already_hits_the_total():
    assert complete_budgets(np.array([7, 1, 12]), 20).tolist() == [7, 1, 12]


def test_completion_shrinks_as_well_as_grows():
    assert complete_budgets(np.array([40, 20, 20]), 40).tolist() == [20, 10, 10]


def test_completion_raises_units_to_the_floor_and_takes_the_cost_from_the_largest():
    # shares 39.9, 0.04, 0.04, 0.04: three units rise to 8, the 40 pays for them
    assert complete_budgets(np.array([1000, 1, 1, 1]), 40, floor=8).tolist() == [16, 8, 8, 8]


def test_completion_of_all_zeros_is_uniform():
    assert complete_budgets(np.zeros(4, dtype=np.int64), 12, floor=0).tolist() == [3, 3, 3, 3]


def test_completion_refuses_a_total_below_the_floor():
    with pytest.raises(ValueError, match="at least 8"):
        complete_budgets(np.array([5, 5, 5]), 20, floor=8)


def test_completion_reaches_the_exact_total_in_many_random_cases():
    rng = np.random.default_rng(1234)
    for _ in range(2000):
        n = int(rng.integers(1, 40))
        budgets = rng.integers(0, int(rng.choice([3, 50, 2000])), size=n)
        floor = int(rng.integers(0, 10))
        total = int(rng.integers(floor * n, floor * n + 5000))
        out = complete_budgets(budgets, total, floor)
        assert out.dtype == np.int64 and out.shape == (n,)
        assert out.sum() == total
        assert out.min() >= floor
        if budgets.sum() > 0:
            exact_lower = budgets * total // budgets.sum()
            if exact_lower.min() >= floor:  # floor not binding: each unit is its share, rounded
                assert np.all((out == exact_lower) | (out == exact_lower + 1))


def test_completion_is_deterministic_for_ties():
    first = complete_budgets(np.array([5, 5, 5, 5]), 22)
    assert first.tolist() == complete_budgets(np.array([5, 5, 5, 5]), 22).tolist()
    assert sorted(first.tolist()) == [5, 5, 6, 6]


def test_completing_a_layer_profile_keeps_heads_equal_and_hits_c_times_layers_times_heads():
    rng = np.random.default_rng(7)
    per_layer = rng.integers(20, 400, size=30)
    alloc = evolved(np.repeat(per_layer[:, None], 3, axis=1)).complete()
    assert alloc.total == 128 * 30 * 3 == alloc.target_total
    assert np.all(alloc.budgets == alloc.budgets[:, :1])
    assert alloc.provenance["completed_from_total"] == per_layer.sum() * 3


def test_completing_a_head_profile_hits_the_exact_total():
    rng = np.random.default_rng(8)
    alloc = evolved(rng.integers(1, 500, size=(30, 3)), granularity="head").complete(min_budget=16)
    assert alloc.total == 128 * 90
    assert alloc.budgets.min() >= 16


def test_completion_does_not_touch_the_original():
    budgets = np.full((30, 3), 100)
    alloc = evolved(budgets)
    alloc.complete()
    assert np.all(alloc.budgets == 100)


# -- expansion -------------------------------------------------------------------------------


def test_expansion_never_lowers_a_budget_keeps_the_order_and_hits_the_new_total():
    rng = np.random.default_rng(99)
    for _ in range(300):
        per_layer = rng.integers(1, 300, size=30)
        base = evolved(np.repeat(per_layer[:, None], 3, axis=1)).complete()
        new_target = float(rng.integers(129, 4096))
        bigger = base.expand(new_target)
        assert bigger.total == round(new_target * 30) * 3
        assert np.all(bigger.budgets >= base.budgets)
        old, new = base.budgets[:, 0], bigger.budgets[:, 0]
        strictly_larger = old[:, None] > old[None, :]
        assert np.all(new[:, None] >= new[None, :], where=strictly_larger)


def test_expansion_is_proportional():
    alloc = evolved(np.repeat(np.array([64, 192] * 15)[:, None], 3, axis=1)).expand(256)
    assert alloc.budgets[:2, 0].tolist() == [128, 384]
    assert alloc.target == 256.0
    assert alloc.provenance["expanded_from_target"] == 128.0


def test_expansion_refuses_a_non_positive_target():
    with pytest.raises(ValueError):
        evolved(np.full((30, 3), 128)).expand(0)


# -- pyramid ---------------------------------------------------------------------------------


def test_pyramid_matches_a_hand_computed_case():
    # c = 100, beta = 20: top 100/20 = 5, bottom 2*100 - 5 = 195, step 190/3:
    # 195, 131.67, 68.33, 5 -> floors sum to 399, the missing token goes to the largest fraction.
    assert pyramid_layer_budgets(4, 100, beta=20).tolist() == [195, 132, 68, 5]


def test_pyramid_shapes_only_the_budget_above_the_reserved_window():
    assert pyramid_layer_budgets(4, 132, beta=20, reserved=32).tolist() == [227, 164, 100, 37]


def test_pyramid_is_non_increasing_and_exact_in_many_cases():
    rng = np.random.default_rng(5)
    for _ in range(500):
        layers = int(rng.integers(1, 80))
        target = float(rng.integers(8, 4096))
        beta = float(rng.choice([1, 2, 5, 20, 50]))
        out = pyramid_layer_budgets(layers, target, beta)
        assert out.sum() == round(target * layers)
        assert np.all(np.diff(out) <= 0)
        if layers > 1:
            assert abs(out[-1] - target / beta) < 1 and abs(out[0] - (2 * target - target / beta)) < 1


def test_pyramid_with_beta_one_is_uniform():
    assert pyramid_layer_budgets(6, 50, beta=1).tolist() == [50] * 6


def test_pyramid_allocation_is_layer_granular_with_the_exact_total():
    alloc = make_baseline("pyramid", beta=20).allocation(SMOLLM, 128, model="smollm2-135m")
    assert alloc.granularity == "layer" and alloc.total == 128 * 90
    assert alloc.budgets[0, 0] > alloc.budgets[-1, 0]
    assert alloc.provenance["method"] == "pyramid" and alloc.provenance["beta"] == 20


def test_pyramid_refuses_a_target_inside_the_reserved_window():
    with pytest.raises(ValueError, match="reserved"):
        pyramid_layer_budgets(4, 32, reserved=32)


# -- uniform, streaming and sizes ------------------------------------------------------------


def test_uniform_puts_every_head_at_the_target():
    alloc = make_baseline("uniform").allocation(SMOLLM, 128)
    assert np.all(alloc.budgets == 128) and alloc.mean_budget == 128.0
    assert alloc.provenance["method"] == "uniform"


def test_uniform_with_a_fractional_target_still_hits_the_total():
    geometry = ModelGeometry(num_layers=4, num_query_heads=2, num_kv_heads=2, head_dim=8, max_positions=64)
    alloc = make_baseline("uniform").allocation(geometry, 10.5, granularity="head")
    assert alloc.total == 84 and alloc.budgets.max() - alloc.budgets.min() == 1


def test_streaming_is_uniform_with_the_streaming_scorer_and_its_sinks():
    alloc = make_baseline("streaming").allocation(SMOLLM, 64)
    assert np.all(alloc.budgets == 64)
    assert alloc.scorer == "streaming" and alloc.scorer_params == {"sinks": 4}
    assert alloc.provenance["method"] == "streaming"
    with pytest.raises(ValueError, match="'streaming' needs a target >= 4"):
        make_baseline("streaming").allocation(SMOLLM, 2)


def test_bytes_count_keys_and_values_of_every_kept_token():
    alloc = make_baseline("uniform").allocation(SMOLLM, 128)
    assert alloc.bytes == 128 * 90 * (2 * 64 * 4)
    assert alloc.padded_bytes == alloc.bytes  # equal heads: padding costs nothing


def test_padded_bytes_charge_every_head_the_largest_head_budget_of_its_layer():
    geometry = ModelGeometry(num_layers=2, num_query_heads=2, num_kv_heads=2, head_dim=4, max_positions=64,
                             dtype_bytes=2)
    alloc = evolved([[1, 3], [2, 2]], geometry=geometry, target=2, granularity="head")
    per_token = 2 * 4 * 2
    assert alloc.total == 8 and alloc.bytes == 8 * per_token
    assert alloc.padded_bytes == (3 * 2 + 2 * 2) * per_token


# -- construction ----------------------------------------------------------------------------


def test_budgets_of_the_wrong_shape_are_refused():
    with pytest.raises(ValueError, match=r"\(30, 3\)"):
        evolved(np.full((3, 30), 128))


def test_layer_granularity_refuses_unequal_heads():
    budgets = np.full((30, 3), 128)
    budgets[4, 1] = 7
    with pytest.raises(ValueError, match="same budget"):
        evolved(budgets)


def test_non_integer_or_negative_budgets_are_refused():
    with pytest.raises(ValueError, match="non-negative integers"):
        evolved(np.full((30, 3), 12.5))
    with pytest.raises(ValueError, match="non-negative integers"):
        evolved(np.full((30, 3), -1))


def test_provenance_needs_a_known_method_and_gets_version_and_time():
    with pytest.raises(ValueError, match="method"):
        Allocation(model="m", geometry=SMOLLM, target=128, budgets=np.full((30, 3), 128))
    alloc = evolved(np.full((30, 3), 128))
    assert alloc.provenance["evolalloc_version"] and alloc.provenance["created_at"].endswith("+00:00")
