"""Every exporter: registered lazily, right shapes and totals, round-trips where the format allows,
and refuses (one clear line) what its target cannot express."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from evolalloc.core.allocation import Allocation
from evolalloc.core.allocation_file import load_allocation, save_allocation
from evolalloc.core.errors import UserError
from evolalloc.core.geometry import ModelGeometry
from evolalloc.export import export_allocation, export_text, exporter_for
from evolalloc.export.curve import profile_family
from evolalloc.export.headkv import allocation_from_headkv

GEOMETRY = ModelGeometry(num_layers=4, num_query_heads=4, num_kv_heads=2, head_dim=8, max_positions=4096)


def profile(scorer="snapkv", granularity="layer", params=None):
    budgets = np.array([[200, 100], [100, 60], [50, 150], [162, 202]]) if granularity == "head" else \
        np.repeat(np.array([[200], [100], [50], [162]]), 2, axis=1)
    return Allocation(model="m", geometry=GEOMETRY, target=128, budgets=budgets, scorer=scorer, granularity=granularity,
                      scorer_params=params or {}, provenance={"method": "evolved"})


def test_every_format_is_listed_without_importing_it():
    code = ("import sys; from evolalloc.export import exporters; print(exporters.names()); "
            "print('evolalloc.export.curve' in sys.modules, 'torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split("\n")
    assert out[0] == "['curve', 'headkv', 'json', 'kvpress', 'kvpress-decoding', 'lukv', 'trtllm']"
    assert out[1] == "False False"


def test_an_option_the_format_does_not_take_is_refused_by_name():
    with pytest.raises(UserError, match="'kvpress' has no parameter 'targets'"):
        exporter_for("kvpress", targets=[64.0])
    with pytest.raises(UserError, match="did you mean 'trtllm'"):
        exporter_for("trtlm")
    # A format without options (no __init__ of its own) used to crash with a TypeError here.
    with pytest.raises(UserError, match="'headkv' has no parameter 'context_length'; valid parameters: \\(none\\)"):
        exporter_for("headkv", context_length=512)


def test_the_curve_rows_are_the_profile_and_its_expansions(tmp_path):
    source = profile()
    path = export_allocation(source, "curve", tmp_path / "family.npy", targets=[128, 256, 64])
    array, meta = np.load(path), json.loads((tmp_path / "family.json").read_text())
    assert array.shape == (3, 4, 2) and array.dtype == np.int64 and meta["shape"] == [3, 4, 2]
    assert np.array_equal(array[0], source.budgets)
    assert np.array_equal(array[1], source.expand(256).budgets) and np.array_equal(array[2], source.rescale(64).budgets)
    assert [row.sum() for row in array] == [128 * 8, 256 * 8, 64 * 8]  # totals: c * layers * heads
    assert meta["targets"] == [128, 256, 64] and meta["values"] == "budgets" and meta["below_source_target"] == [64]
    rebuilt = Allocation(model=meta["model"], geometry=ModelGeometry(**meta["geometry"]), target=meta["targets"][1],
                         budgets=array[1], scorer=meta["scorer"], provenance={"method": meta["method"]})
    assert np.array_equal(rebuilt.budgets, source.expand(256).budgets)


def test_the_default_curve_is_the_target_then_twice_and_four_times():
    assert np.array_equal(profile_family(profile(), [128, 256, 512])[2], profile().expand(512).budgets)


def test_with_a_context_length_the_curve_is_the_lukv_grid_of_prune_ratios(tmp_path):
    path = export_allocation(profile(), "curve", tmp_path / "lukv.npy", context_length=1000)
    array, meta = np.load(path), json.loads((tmp_path / "lukv.json").read_text())
    assert array.shape == (99, 4, 2) and array.dtype == np.float32 and meta["values"] == "prune_ratios"
    assert meta["compression_ratios"][0] == 0.01 and meta["compression_ratios"][-1] == 0.99
    kept = (1 - array) * 1000
    for row, ratio in zip(kept, meta["compression_ratios"]):
        assert row.mean() == pytest.approx(1000 * (1 - ratio), abs=0.01) and row.max() <= 1000.001


def test_the_headkv_table_holds_every_head_and_round_trips():
    source = profile(granularity="head")
    table = json.loads(export_text(source, "headkv"))
    assert np.array(table["capacities"]).shape == (4, 2) and table["total"] == source.total == 1024
    rebuilt = allocation_from_headkv(table)
    assert np.array_equal(rebuilt.budgets, source.budgets) and rebuilt.granularity == "head"


def test_the_json_format_round_trips(tmp_path):
    source = profile(granularity="head")
    path = export_allocation(source, "json", tmp_path / "a.json")
    assert np.array_equal(load_allocation(path).budgets, source.budgets)


def test_trtllm_gets_one_window_per_layer_exactly_for_the_window_scorer():
    document = json.loads(export_text(profile(scorer="window"), "trtllm"))
    assert document["kv_cache_config"] == {"max_attention_window": [200, 100, 50, 162], "sink_token_length": None}
    assert document["exact"] is True


def test_trtllm_streaming_profiles_carry_their_sinks_and_say_they_are_approximate():
    document = json.loads(export_text(profile(scorer="streaming", params={"sinks": 4}), "trtllm"))
    assert document["kv_cache_config"]["sink_token_length"] == 4 and document["exact"] is False
    with pytest.raises(UserError, match="searched with 4 sink tokens, not 8"):
        export_text(profile(scorer="streaming", params={"sinks": 4}), "trtllm", sink_tokens=8)


@pytest.mark.parametrize("scorer, granularity, reason", [
    ("window", "head", "one window per layer"),
    ("snapkv", "layer", "keeps the tokens the queries attend to"),
    ("knorm", "layer", "ranks tokens by its own score"),
])
def test_trtllm_refuses_what_it_cannot_express_with_the_reason(scorer, granularity, reason):
    with pytest.raises(UserError, match=reason) as info:
        export_text(profile(scorer=scorer, granularity=granularity), "trtllm")
    assert str(info.value).startswith("format: cannot export to trtllm:") and "\n" not in str(info.value)


def test_multi_file_formats_need_an_output_path():
    with pytest.raises(UserError, match="give an output path"):
        export_text(profile(), "curve")


def test_the_cli_lists_the_registry_and_prints_one_line_errors(tmp_path):
    path = tmp_path / "a.json"
    save_allocation(profile(scorer="snapkv"), path)

    def run(*args):
        return subprocess.run([sys.executable, "-m", "evolalloc", "export", str(path), *args], capture_output=True,
                              text=True)

    help_text = run("--help").stdout
    assert "[curve|headkv|json|kvpress|kvpress-decoding|lukv|trtllm]" in help_text
    refused = run("--format", "trtllm")
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1 and "scorer 'snapkv'" in refused.stderr
    written = run("--format", "curve", "--targets", "128,256", "-o", str(tmp_path / "c.npy"))
    assert written.returncode == 0 and np.load(tmp_path / "c.npy").shape == (2, 4, 2)
    bad_targets = run("--format", "curve", "--targets", "128,-5", "-o", str(tmp_path / "d.npy"))
    assert bad_targets.returncode == 2 and bad_targets.stderr.count("\n") == 1 and "--targets" in bad_targets.stderr
    assert not (tmp_path / "d.npy").exists()


def sliding_profile(scorer: str) -> Allocation:
    geometry = ModelGeometry(num_layers=4, num_query_heads=4, num_kv_heads=2, head_dim=8, max_positions=4096,
                             windows=(64, None, 64, None))
    budgets = np.repeat(np.array([[200], [100], [50], [162]]), 2, axis=1)  # layer 0 asks for more than its window
    return Allocation(model="gemma", geometry=geometry, target=128, budgets=budgets, scorer=scorer,
                      provenance={"method": "evolved"})


def test_trtllm_keeps_the_models_own_window_where_it_is_smaller():
    document = json.loads(export_text(sliding_profile("window"), "trtllm"))
    assert document["kv_cache_config"]["max_attention_window"] == [64, 100, 50, 162]


def test_kvpress_ships_what_a_sliding_layer_can_hold_and_names_the_windows():
    document = json.loads(export_text(sliding_profile("snapkv"), "kvpress"))
    assert document["budgets"] == [63, 100, 50, 162]
    assert document["sliding_windows"] == [64, None, 64, None]
