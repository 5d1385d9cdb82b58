"""The policy checkpoint (versioned, checked on load) and the ``learned`` scorer in the runtime."""

from __future__ import annotations

import pytest
import torch

from evolalloc.runtime.policy import HeadPolicies, PolicyConfig, load_policy, save_policy
from evolalloc.runtime.prefill import prefill
from evolalloc.runtime.scorers import get_scorer
from tests.runtime.conftest import random_prompt, tiny_model

GEOMETRY = {"num_layers": 3, "num_query_heads": 4, "num_kv_heads": 2, "head_dim": 16, "max_positions": 512,
            "dtype_bytes": 4}
MODEL = {"spec": "tiny", "model_type": "llama", "fingerprint": "abc"}


@pytest.fixture
def checkpoint(tmp_path):
    torch.manual_seed(0)
    policy = HeadPolicies(PolicyConfig(3, 2, 16, hidden=8, depth=2))
    return save_policy(tmp_path / "policy.pt", policy, model=MODEL, geometry=GEOMETRY, training={"steps": 0}), policy


def test_a_checkpoint_loads_back_the_same_policy(checkpoint):
    path, policy = checkpoint
    loaded = load_policy(path, geometry=GEOMETRY, model=MODEL)
    assert loaded.training == {"steps": 0} and loaded.network.config == policy.config
    features = torch.randn(2, 5, 33)
    assert torch.equal(loaded.network(features, slice(2, 4)), policy(features, slice(2, 4)))


def test_loading_for_another_geometry_or_model_or_version_raises(checkpoint, tmp_path):
    path, _ = checkpoint
    with pytest.raises(ValueError, match="num_kv_heads: checkpoint 2 vs model 3"):
        load_policy(path, geometry={**GEOMETRY, "num_kv_heads": 3})
    with pytest.raises(ValueError, match="fingerprint"):
        load_policy(path, model={**MODEL, "fingerprint": "other"})
    payload = torch.load(path, weights_only=True)
    payload["version"] = 99
    torch.save(payload, tmp_path / "future.pt")
    with pytest.raises(ValueError, match="version 99"):
        load_policy(tmp_path / "future.pt")
    with pytest.raises(ValueError, match="no policy checkpoint"):
        load_policy(tmp_path / "missing.pt")


def test_the_learned_scorer_without_a_checkpoint_reads_the_default_one_and_says_how_to_train_it(tmp_path, monkeypatch):
    monkeypatch.setenv("EVOLALLOC_CACHE", str(tmp_path))
    scorer = get_scorer("learned")
    assert scorer.checkpoint == str(tmp_path / "learned" / "policy.pt")
    with pytest.raises(ValueError, match="evolalloc scorer train"):
        load_policy(scorer.checkpoint)


def test_the_learned_scorer_ranks_by_its_mlp_with_sinks_and_window_first(checkpoint):
    path, policy = checkpoint
    model = tiny_model("llama")
    scorer = get_scorer("learned", checkpoint=str(path), sinks=2, window=3)
    record = prefill(model, random_prompt(40), [scorer])
    ranking = record.rankings[scorer.key]  # [layers, Hkv, L]
    assert ranking.shape == (3, 2, 40)
    assert set(ranking[1, 0, :5].tolist()) == {0, 1, 37, 38, 39}
    scores = policy(HeadPolicies.features(record.keys[1], record.values[1]), slice(2, 4))  # layer 1's heads
    rest = ranking[1, :, 5:]
    ranked_scores = torch.gather(scores, 1, rest)
    assert (ranked_scores[:, :-1] >= ranked_scores[:, 1:]).all()  # descending by the MLP's score
    assert "checkpoint=" in scorer.key


def test_the_learned_scorer_refuses_a_model_of_another_shape(tmp_path):
    geometry = {**GEOMETRY, "head_dim": 8}
    path = save_policy(tmp_path / "p.pt", HeadPolicies(PolicyConfig(3, 2, 8, hidden=4)), model=MODEL, geometry=geometry,
                       training={})
    with pytest.raises(ValueError, match="head_dim 8"):
        prefill(tiny_model("llama"), random_prompt(10), [get_scorer("learned", checkpoint=str(path))])
