"""The ppo-policy scorer (paper 003): its network's shapes and checkpoint, and that it plugs into the runtime —
exact when the budgets hold everything, its budgets held while decoding, the prefill's sums carried on."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from evolalloc.core.decode_eviction import DecodeEviction
from evolalloc.runtime.decode import DecodeSettings, generate
from evolalloc.runtime.decode_eviction import prefill_sums
from evolalloc.runtime.model import geometry_of
from evolalloc.runtime.policy import model_identity
from evolalloc.runtime.ppo_network import (
    FEATURES,
    cached_features,
    fresh_network,
    load_ppo_policy,
    prefill_features,
    save_ppo_policy,
)
from evolalloc.runtime.prefill import prefill
from evolalloc.runtime.scorers import get_scorer
from evolalloc.runtime.scorers.base import CachedStats, LayerStats
from tests.runtime.conftest import LOGITS_CLOSE, random_prompt, tiny_model
from tests.runtime.test_decode_eviction import held_counts
from tests.runtime.test_equivalence import reference_generation


@pytest.fixture(scope="module")
def saved_network(llama):
    network = fresh_network(geometry_of(llama.config).to_dict(), hidden=8, depth=2, seed=3)
    with torch.no_grad():
        network.mlp[-1].weight.normal_()  # scores that differ from token to token (and from a fresh network's)
    return network


@pytest.fixture(scope="module")
def checkpoint(llama, saved_network, tmp_path_factory):
    network = saved_network
    path = tmp_path_factory.mktemp("ppo") / "policy.pt"
    return save_ppo_policy(path, network, model=model_identity("tiny", llama),
                           geometry=geometry_of(llama.config).to_dict(), training={"steps": 7, "seed": 3})


def test_the_network_scores_every_token_of_every_head_from_its_features(llama, checkpoint):
    network = load_ppo_policy(checkpoint).network
    stats = LayerStats(layer_idx=1, keys=torch.randn(2, 30, 16), values=torch.randn(2, 30, 16),
                       window_attention=torch.softmax(torch.randn(4, 8, 30), -1),
                       attention_sum=torch.rand(4, 30) * 5)
    features = prefill_features(stats, num_layers=3)
    assert features.shape == (2, 30, len(FEATURES)) and torch.isfinite(features).all()
    assert network(features, network.layer_heads(1)).shape == (2, 30)
    valid = torch.ones(5, 2, 12, dtype=torch.bool)
    valid[0, :, 9:] = False  # a row holding fewer tokens: its spare slots read as zeros
    cached = CachedStats(layer_idx=2, keys=torch.randn(5, 2, 12, 16), values=torch.randn(5, 2, 12, 16),
                         positions=torch.arange(12).expand(5, 2, 12) * 3, valid=valid, length=torch.full((5,), 40),
                         recent_attention=torch.softmax(torch.randn(5, 4, 8, 12), -1),
                         attention_sum=torch.rand(5, 2, 12))
    features = cached_features(cached, num_layers=3)
    assert features.shape == (5, 2, 12, len(FEATURES)) and torch.equal(features[0, :, 9:], torch.zeros(2, 3, 9))
    assert network(features, network.layer_heads(2)).shape == (5, 2, 12)
    with pytest.raises(ValueError, match="takes 9 features per token, got 4"):
        network(features[..., :4], network.layer_heads(2))


def test_a_checkpoint_reads_back_the_same_network_and_records_its_training(llama, saved_network, checkpoint):
    # read from the file, not the scorers' in-memory cache of it: every weight as it was saved
    loaded = load_ppo_policy(checkpoint).network.state_dict()
    saved = saved_network.state_dict()
    assert loaded.keys() == saved.keys() and all(torch.equal(loaded[k], saved[k]) for k in saved)
    from evolalloc.runtime.scorers.ppo_policy import PPOPolicy

    class Saved(PPOPolicy):  # scores with the network in memory, as it was before it was saved
        def network(self):
            return saved_network

    scorer = get_scorer("ppo-policy", checkpoint=str(checkpoint))
    assert scorer.network() is not saved_network  # read from the file
    prompt = random_prompt(50, seed=2)
    assert torch.equal(prefill(llama, prompt, [scorer]).rankings[scorer.key],
                       prefill(llama, prompt, [Saved(checkpoint=str(checkpoint))]).rankings[scorer.key])
    trained = scorer.checkpoint_provenance()["trained"]
    assert trained["steps"] == 7 and trained["seed"] == 3
    scorer.check_checkpoint(geometry_of(llama.config).to_dict(), model_identity("tiny", llama))


def test_a_missing_checkpoint_or_one_for_another_model_is_one_line(llama, checkpoint, tmp_path):
    with pytest.raises(ValueError, match="no ppo policy checkpoint at .*evolalloc ppo train"):
        get_scorer("ppo-policy", checkpoint=str(tmp_path / "none.pt")).check_checkpoint({})
    other = tiny_model("llama", num_key_value_heads=4)
    with pytest.raises(ValueError, match="trained for another model geometry .*num_kv_heads: checkpoint 2 vs model 4"):
        get_scorer("ppo-policy", checkpoint=str(checkpoint)).check_checkpoint(geometry_of(other.config).to_dict())
    with pytest.raises(ValueError, match="was trained for 3 layers x 2 KV heads x head_dim 16; got layer 0 with 4"):
        prefill(other, random_prompt(30), [get_scorer("ppo-policy", checkpoint=str(checkpoint))])


def test_budgets_that_hold_everything_give_the_stock_models_tokens(checkpoint):
    model, stock = tiny_model("llama"), tiny_model("llama", attn="sdpa")
    ids = random_prompt(60, seed=5)
    tokens, logits = reference_generation(stock, ids, steps=20)
    scorer = get_scorer("ppo-policy", checkpoint=str(checkpoint))
    record = prefill(model, ids, [scorer])
    for interval in (1, 4):
        (gen,) = generate(model, [(record, np.full(3, 80))], scorer,
                          DecodeSettings(max_new_tokens=20, keep_logits=True), decode=DecodeEviction(interval))
        assert gen.token_ids == tokens
        for ours, theirs in zip(gen.logits, logits):
            torch.testing.assert_close(ours, theirs.float().cpu(), **LOGITS_CLOSE)


@pytest.mark.parametrize("interval", [1, 3])
def test_its_budgets_hold_while_a_long_answer_is_written(llama, checkpoint, interval):
    scorer = get_scorer("ppo-policy", checkpoint=str(checkpoint))
    record = prefill(llama, random_prompt(90, seed=6), [scorer])
    budgets = np.array([[24, 30], [40, 22], [21, 33]])
    counts, _, _ = held_counts(llama, [(record, budgets)], scorer, steps=70, interval=interval)
    for k, stored in enumerate(counts):
        assert torch.equal(stored[0], torch.as_tensor(budgets) + k % interval), k


def test_decoding_starts_from_the_prefills_accumulated_attention_not_from_the_policys_scores(llama, checkpoint):
    ppo, h2o = get_scorer("ppo-policy", checkpoint=str(checkpoint)), get_scorer("h2o", window=0)
    record = prefill(llama, random_prompt(70, seed=7), [ppo, h2o])
    assert ppo.sums_key in record.scores and h2o.sums_key == h2o.key
    positions = [torch.arange(70).expand(1, 2, 70)] * 3  # every prompt token, in position order
    ours, heavy = (prefill_sums([(record, None)], scorer, positions) for scorer in (ppo, h2o))
    for a, b in zip(ours, heavy):
        torch.testing.assert_close(a, b)
