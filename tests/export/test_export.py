"""Exports: our JSON round-trips; the kvpress table holds budgets, ratios and head budgets."""

import json

import numpy as np
import pytest

from evolalloc.core.allocation import Allocation
from evolalloc.core.allocation_file import allocation_to_json, load_allocation
from evolalloc.core.errors import UserError
from evolalloc.core.geometry import ModelGeometry
from evolalloc.export import export_allocation, export_text
from evolalloc.export.kvpress import compression_ratios, export_kvpress

GEOMETRY = ModelGeometry(num_layers=4, num_query_heads=4, num_kv_heads=2, head_dim=8, max_positions=4096)


def layer_profile():
    budgets = np.repeat(np.array([[200], [100], [50], [162]]), 2, axis=1)
    return Allocation(model="m", geometry=GEOMETRY, target=128, budgets=budgets, provenance={"method": "evolved"})


def head_profile():
    budgets = np.array([[200, 100], [100, 60], [50, 150], [162, 202]])
    return Allocation(model="m", geometry=GEOMETRY, target=128, granularity="head", budgets=budgets,
                      provenance={"method": "evolved"})


def test_compression_ratios_are_the_fraction_of_the_prompt_removed():
    assert compression_ratios([250, 1000, 0], 1000) == pytest.approx([0.75, 0.0, 1.0], abs=1e-12)


def kvpress_kept(n: int, ratio: float) -> int:
    """kvpress 0.5.5's ``compute_n_kept``, restated: what a ratio really keeps of n tokens."""
    return 0 if ratio >= 1.0 else max(1, int(n * (1 - ratio)))


@pytest.mark.parametrize("n", [1000, 1024, 977, 4096, 8191])
def test_kvpress_keeps_exactly_the_budget_despite_float_rounding(n):
    budgets = list(range(1, n + 1, 7)) + [200, 100, n - 1]
    ratios = compression_ratios(budgets, n)
    assert [kvpress_kept(n, r) for r in ratios] == budgets  # 1 - 200/1000 alone would keep 199


def test_the_docstring_formula_for_other_lengths_keeps_exactly_the_budget_too():
    for n in (999, 1000, 1024, 3001):
        for b in range(1, n):
            assert kvpress_kept(n, 1 - (b + 0.5) / n) == b


def test_a_budget_beyond_the_prompt_removes_nothing_rather_than_a_negative_ratio():
    assert compression_ratios([2000], 1000) == [0.0]


def test_the_kvpress_export_has_one_budget_and_ratio_per_layer():
    document = export_kvpress(layer_profile(), context_length=1000)
    assert document["budgets"] == [200, 100, 50, 162]
    assert document["compression_ratios"] == pytest.approx([0.8, 0.9, 0.95, 0.838], abs=1e-12)
    assert document["num_layers"] == 4 and len(document["compression_ratios"]) == 4
    assert "head_budgets" not in document
    json.dumps(document)  # JSON-ready


def test_the_mean_kept_fraction_matches_the_target():
    document = export_kvpress(layer_profile(), context_length=1024)
    kept = 1024 * (1 - np.array(document["compression_ratios"]))
    assert kept.mean() == pytest.approx(128, abs=0.01)


def test_without_a_context_length_there_are_budgets_but_no_ratios():
    document = export_kvpress(layer_profile())
    assert document["compression_ratios"] is None and document["budgets"] == [200, 100, 50, 162]


def test_head_granularity_exports_the_head_table_and_layer_means():
    document = export_kvpress(head_profile(), context_length=1000)
    assert document["head_budgets"] == [[200, 100], [100, 60], [50, 150], [162, 202]]
    assert document["budgets"] == [150, 80, 100, 182]
    assert document["granularity"] == "head"


def test_the_json_export_loads_back_as_the_same_allocation(tmp_path):
    original = head_profile()
    path = tmp_path / "out.json"
    path.write_text(allocation_to_json(original))
    assert np.array_equal(load_allocation(path).budgets, original.budgets)


def test_export_allocation_writes_the_file_it_names(tmp_path):
    path = export_allocation(layer_profile(), "kvpress", tmp_path / "sub" / "p.json", context_length=1000)
    assert json.loads(path.read_text())["compression_ratios"][0] == pytest.approx(0.8)


def test_an_unknown_format_or_a_bad_length_is_a_user_error():
    with pytest.raises(UserError, match="did you mean 'kvpress'"):
        export_text(layer_profile(), "kvpres")
    with pytest.raises(UserError) as info:
        export_text(layer_profile(), "kvpress", context_length=0)
    assert info.value.field == "context_length"
