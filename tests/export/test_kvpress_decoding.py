"""A profile held while decoding: kvpress's DecodingPress holds a uniform one; every other case, and every
prompt-only format asked for a held profile, is one line."""

from __future__ import annotations

import json

import numpy as np
import pytest

from evolalloc.core.allocation import Allocation
from evolalloc.core.decode_eviction import DecodeEviction
from evolalloc.core.errors import UserError
from evolalloc.core.geometry import ModelGeometry
from evolalloc.export import export_text

GEOMETRY = ModelGeometry(num_layers=4, num_query_heads=4, num_kv_heads=2, head_dim=8, max_positions=4096)


def held(budgets=64, scorer="streaming", params=None, interval=8, granularity="layer"):
    budgets = np.full((4, 2), budgets) if np.isscalar(budgets) else np.asarray(budgets)
    return Allocation(model="m", geometry=GEOMETRY, target=float(budgets.mean()), budgets=budgets, scorer=scorer,
                      scorer_params=params or {}, granularity=granularity, provenance={"method": "uniform"},
                      decode=DecodeEviction(interval) if interval else None)


def test_a_uniform_held_profile_becomes_a_prefill_decoding_press_with_the_interval_and_target_size():
    doc = json.loads(export_text(held(), "kvpress-decoding", context_length=1000))
    press = doc["press"]
    assert (doc["budget"], doc["decode_interval"], doc["exact"]) == (64, 8, False)
    assert any("top-k order" in d for d in doc["differences"])  # kvpress's StreamingLLMPress after a compression
    assert press["decoding_press"] == {"class": "DecodingPress", "base_press": {"class": "StreamingLLMPress",
                                                                                "kwargs": {"n_sink": 4}},
                                       "kwargs": {"compression_interval": 8, "target_size": 64,
                                                  "hidden_states_buffer_size": 0}}
    ratio = press["prefilling_press"]["kwargs"]["compression_ratio"]
    assert press["prefilling_press"]["class"] == "StreamingLLMPress" and int(1000 * (1 - ratio)) == 64


def test_snapkv_is_exported_as_close_not_exact_and_needs_an_interval_above_its_window():
    doc = json.loads(export_text(held(scorer="snapkv", params={"window": 8, "pooling": "avg", "pool_window": False},
                                      interval=16), "kvpress-decoding"))
    assert not doc["exact"] and any("current step's position" in d for d in doc["differences"])
    assert doc["press"]["decoding_press"]["kwargs"]["hidden_states_buffer_size"] == 16
    with pytest.raises(UserError, match="must exceed the window"):
        export_text(held(scorer="snapkv", params={"window": 8}, interval=8), "kvpress-decoding")


@pytest.mark.parametrize("profile, words", [
    (held([[64, 64], [32, 32], [96, 96], [64, 64]]), "one target_size for every layer"),
    (held([[64, 60], [64, 64], [64, 64], [64, 64]], granularity="head"), "budgets from 60 to 64"),
    (held(interval=None), r"prompt only \(no decode section\)"),
    (held(scorer="h2o", params={"window": 4}), "no press for evolalloc's scorer 'h2o'"),
])
def test_what_kvpress_cannot_hold_while_decoding_is_refused_in_one_line(profile, words):
    with pytest.raises(UserError, match=words) as err:
        export_text(profile, "kvpress-decoding")
    assert str(err.value).startswith("format: cannot export to kvpress-decoding") and "\n" not in str(err.value)


@pytest.mark.parametrize("fmt", ["kvpress", "headkv", "trtllm"])
def test_a_prompt_only_format_refuses_a_held_profile_and_the_json_file_keeps_it(fmt):
    with pytest.raises(UserError, match=f"cannot export to {fmt}: this profile holds its budgets while decoding"):
        export_text(held(scorer="streaming"), fmt)
    assert json.loads(export_text(held(), "json"))["decode"] == {"interval": 8}
