import numpy as np

from searchspaces import get_search_space


def make(**overrides):
    options = dict(num_layers=5, num_kv_heads=3, target=20)
    options.update(overrides)
    return get_search_space("head_groups", **options)


def test_units_are_layer_head_pairs_in_layer_major_order():
    space = make()
    assert space.n_units == 15
    assert [space.unit_of(u) for u in (0, 1, 2, 3, 14)] == [(0, 0), (0, 1), (0, 2), (1, 0), (4, 2)]


def test_groups_are_contiguous_units_and_may_span_layers():
    groups = make().groups()
    assert [g.tolist() for g in groups] == [list(range(8)), list(range(8, 15))]


def test_decode_puts_each_ratio_at_its_own_layer_and_head():
    space = make(num_layers=2, num_kv_heads=3, target=10)
    budgets = space.decode(np.array([1.0, 2.0, 3.0, 0.5, 0.3, 0.1]))
    assert budgets.tolist() == [[10, 20, 30], [5, 3, 1]]


def test_encode_inverts_decode_per_head():
    space = make()
    rng = np.random.default_rng(0)
    budgets = rng.integers(1, 80, size=(5, 3))
    assert np.array_equal(space.decode(space.encode(budgets)), budgets)


def test_the_initial_ratios_decode_to_uniform():
    space = make()
    assert np.all(space.decode(space.initial_ratios()) == 20)


def test_group_size_one_gives_one_group_per_unit():
    assert len(make(group_size=1).groups()) == 15
