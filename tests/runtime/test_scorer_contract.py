"""The scorer contract: each scorer declares what the prefill must capture, and ``key`` names its
ranking from its declared defaults (no default instance is built)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from evolalloc.runtime.capture import CaptureSpec, PrefillCapture
from evolalloc.runtime.scorers import get_scorer
from evolalloc.runtime.scorers.base import Scorer


def test_the_capture_of_several_scorers_serves_each_of_them():
    specs = [get_scorer("snapkv", window=8).capture, get_scorer("tova").capture, get_scorer("h2o").capture,
             get_scorer("knorm").capture]
    assert CaptureSpec.union(specs) == CaptureSpec(window_queries=8, attention_sum=True)
    assert CaptureSpec.union([get_scorer("knorm").capture, get_scorer("streaming").capture]) == CaptureSpec()


def test_a_keys_only_capture_records_no_attention():
    import torch

    capture = PrefillCapture(CaptureSpec())
    query, key = torch.randn(1, 4, 6, 8), torch.randn(1, 2, 6, 8)
    capture.record(0, query, key, key, 0.35)
    assert capture.keys[0].shape == (2, 6, 8) and not capture.window_attention and not capture.attention_sums


def test_key_is_the_name_at_the_defaults_and_names_each_changed_or_required_parameter():
    assert get_scorer("snapkv").key == "snapkv"
    assert get_scorer("snapkv", window=8, kernel=5).key == "snapkv(kernel=5,window=8)"
    assert get_scorer("learned", checkpoint="p.pt").key == "learned(checkpoint=p.pt)"
    assert get_scorer("learned", checkpoint="p.pt", window=3).key == "learned(checkpoint=p.pt,window=3)"

    @dataclass(kw_only=True)
    class NeedsPath(Scorer):  # a required parameter: no default instance could be built
        name = "needs_path"
        path: str

    assert NeedsPath(path="x").key == "needs_path(path=x)"


@pytest.mark.parametrize("name", ["snapkv", "tova", "h2o"])
def test_query_aware_scorers_say_so(name):
    assert not get_scorer(name).query_free
