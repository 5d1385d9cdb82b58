"""Query-aware gates (``votes > 0``): they read SnapKV's window votes besides keys and values;
``votes = 0`` gates are today's query-free gates, file and scores."""

from __future__ import annotations

import pytest
import torch

from evolalloc.runtime.capture import CaptureSpec
from evolalloc.runtime.gates import GatesConfig, RetentionGates, save_gates
from evolalloc.runtime.model import geometry_of
from evolalloc.runtime.policy import model_identity
from evolalloc.runtime.prefill import prefill
from evolalloc.runtime.scorers import get_scorer
from evolalloc.runtime.scorers.base import LayerStats
from tests.runtime.conftest import random_prompt


def gates_file(llama, folder, votes: int):
    torch.manual_seed(3)
    gates = RetentionGates(GatesConfig(num_layers=3, num_kv_heads=2, head_dim=16, hidden=8, votes=votes))
    with torch.no_grad():  # a spread of retentions, and a strong say for the vote features
        gates.shared.weight.normal_(0, 3.0)
        if votes:
            gates.weight[:, -2:, :].mul_(20.0)
    return save_gates(folder / f"g{votes}.pt", gates, model=model_identity("tiny", llama),
                      geometry=geometry_of(llama.config).to_dict(), training={})


@pytest.fixture(scope="module")
def files(llama, tmp_path_factory):
    folder = tmp_path_factory.mktemp("qgates")
    return {votes: gates_file(llama, folder, votes) for votes in (0, 8)}


def stats_with_window(layer: int, length: int, seed: int, rows: int = 8) -> LayerStats:
    """Fixed keys/values; a window attention ``[Hq=4, rows, L]`` (rows summing to 1) drawn from ``seed``."""
    generator = torch.Generator().manual_seed(100)
    keys, values = torch.randn(2, length, 16, generator=generator), torch.randn(2, length, 16, generator=generator)
    logits = torch.randn(4, rows, length, generator=torch.Generator().manual_seed(seed)) * 4
    return LayerStats(layer_idx=layer, keys=keys, values=values, window_attention=torch.softmax(logits, dim=-1))


def test_query_free_gates_write_the_old_checkpoint_and_ignore_window_attention(files):
    payload = torch.load(files[0], weights_only=True)
    assert payload["config"] == {"hidden": 8, "horizon": 32}  # no "votes" key: the file as before
    scorer = get_scorer("gates", checkpoint=str(files[0]))
    assert scorer.capture == CaptureSpec() and scorer.query_free
    with_window = stats_with_window(1, 60, seed=1)
    without = LayerStats(layer_idx=1, keys=with_window.keys, values=with_window.values)
    assert torch.equal(scorer.score(with_window), scorer.score(without))


def test_query_aware_gates_ask_for_the_window_and_rank_by_it(files):
    scorer = get_scorer("gates", checkpoint=str(files[8]))
    assert torch.load(files[8], weights_only=True)["config"]["votes"] == 8
    assert scorer.capture == CaptureSpec(window_queries=8) and not scorer.query_free
    # The same keys and values, only the window queries' attention differs: another ranking.
    first, second = stats_with_window(1, 60, seed=1), stats_with_window(1, 60, seed=2)
    assert not torch.equal(scorer.score(first).argsort(dim=-1), scorer.score(second).argsort(dim=-1))
    assert torch.equal(scorer.score(first), scorer.score(stats_with_window(1, 60, seed=1)))  # and only by it


def test_the_prefill_records_the_window_the_query_aware_gates_read(llama, files):
    scorer = get_scorer("gates", checkpoint=str(files[8]))
    record = prefill(llama, random_prompt(90, seed=4), [scorer])
    scores = record.scores[scorer.key]  # in ranking order: the 4 sinks and 16 window tokens first (+inf)
    assert scores.shape == (3, 2,
                            90) and torch.isinf(scores[:, :, :20]).all() and torch.isfinite(scores[:, :, 20:]).all()


def test_a_path_without_window_attention_refuses_query_aware_gates_in_one_line(files):
    scorer = get_scorer("gates", checkpoint=str(files[8]))
    stats = stats_with_window(0, 40, seed=1)
    with pytest.raises(ValueError, match=r"query-aware \(votes=8.*records none; use query-free gates here") as info:
        scorer.score(LayerStats(layer_idx=0, keys=stats.keys, values=stats.values))
    assert "\n" not in str(info.value)
