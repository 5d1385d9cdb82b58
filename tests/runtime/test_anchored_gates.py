"""Anchored gates (``anchored``): SnapKV's smoothed vote through a learned per-head scale and
offset plus a residual. Untrained, they rank every head exactly as SnapKV does."""

from __future__ import annotations

import pytest
import torch

from evolalloc.runtime.gates import GatesConfig, RetentionGates, load_gates, save_gates
from evolalloc.runtime.model import geometry_of
from evolalloc.runtime.policy import model_identity
from evolalloc.runtime.prefill import prefill
from evolalloc.runtime.scorers import get_scorer
from tests.runtime.conftest import random_prompt

VOTES = 8


def anchored(seed: int = 3) -> RetentionGates:
    """Fresh anchored gates for the tiny Llama (3 layers x 2 KV heads x 16), with random
    per-head networks and a fitted-looking standardisation: only the zero readout keeps the residual 0."""
    torch.manual_seed(seed)
    gates = RetentionGates(GatesConfig(num_layers=3, num_kv_heads=2, head_dim=16, hidden=8, votes=VOTES, anchored=True))
    with torch.no_grad():
        gates.weight.normal_(0, 1.0)
        gates.feature_mean.normal_(0, 0.5)
    return gates


def write(llama, path, gates):
    return save_gates(path, gates, model=model_identity("tiny", llama), geometry=geometry_of(llama.config).to_dict(),
                      training={})


def rankings(llama, checkpoint, prompt):
    """Per-head rankings ``[layers, Hkv, L]`` of the anchored gates and of SnapKV with the same window."""
    gates = get_scorer("gates", checkpoint=str(checkpoint), sinks=0, window=VOTES)
    snapkv = get_scorer("snapkv", window=VOTES)
    record = prefill(llama, prompt, [gates, snapkv])
    return record.rankings[gates.key], record.rankings[snapkv.key], record.scores[gates.key]


def test_untrained_anchored_gates_rank_every_head_exactly_as_snapkv(llama, tmp_path):
    path = write(llama, tmp_path / "a.pt", anchored())
    for seed in (1, 2):
        ours, snapkv, _ = rankings(llama, path, random_prompt(120, seed=seed))
        assert ours.shape == snapkv.shape == (3, 2, 120) and torch.equal(ours, snapkv)


def test_per_head_scale_and_offset_keep_each_heads_ranking_but_move_heads_against_each_other(llama, tmp_path):
    gates = anchored()
    prompt = random_prompt(120, seed=1)
    _, _, before = rankings(llama, write(llama, tmp_path / "a.pt", gates), prompt)
    with torch.no_grad():
        gates.log_scale.normal_(0, 1.0)
        gates.offset.normal_(0, 5.0)
    ours, snapkv, after = rankings(llama, write(llama, tmp_path / "b.pt", gates), prompt)
    assert torch.equal(ours, snapkv)
    finite = torch.isfinite(before)
    # Cross-head comparison (what a global top-k reads) changed: the calibration is learnable.
    assert not torch.allclose(before[finite], after[finite])


def test_a_nonzero_residual_changes_the_ranking(llama, tmp_path):
    gates = anchored()
    with torch.no_grad():
        gates.shared.weight.normal_(0, 5.0)
    ours, snapkv, _ = rankings(llama, write(llama, tmp_path / "r.pt", gates), random_prompt(120, seed=1))
    assert not torch.equal(ours, snapkv)


def test_the_anchored_setting_round_trips_and_older_files_load_as_before(llama, tmp_path):
    gates = anchored()
    with torch.no_grad():
        gates.shared.weight.normal_(0, 1.0)
        gates.offset.normal_(0, 1.0)
    path = write(llama, tmp_path / "a.pt", gates)
    assert torch.load(path, weights_only=True)["config"] == {"hidden": 8, "horizon": 32, "votes": VOTES,
                                                             "anchored": True}
    back = load_gates(path).network
    assert back.config.anchored and all(torch.equal(v, back.state_dict()[k]) for k, v in gates.state_dict().items())
    prompt = random_prompt(100, seed=7)
    assert torch.equal(rankings(llama, path, prompt)[2],
                       rankings(llama, write(llama, tmp_path / "b.pt", back), prompt)[2])
    plain = RetentionGates(GatesConfig(num_layers=3, num_kv_heads=2, head_dim=16, hidden=8, votes=VOTES))
    old = write(llama, tmp_path / "old.pt", plain)  # query-aware, not anchored: the file as before
    assert torch.load(old, weights_only=True)["config"] == {"hidden": 8, "horizon": 32, "votes": VOTES}
    assert not load_gates(old).network.config.anchored


def test_anchored_gates_without_votes_are_refused():
    with pytest.raises(ValueError, match="need votes > 0"):
        RetentionGates(GatesConfig(num_layers=1, num_kv_heads=1, head_dim=4, anchored=True))
