"""Anchored gates in training: traces carry SnapKV's smoothed votes, the soft global top-k trains
them, and a run's ``scorer.train.anchored`` is cached by content and deterministic."""

from __future__ import annotations

import pytest
import torch

from evolalloc.learned.gates_train import GatesTrainConfig, anchored_loss, item_anchor, item_tensors, train_gates
from evolalloc.learned.traces import load_traces, trace_ids
from evolalloc.runtime.scorers import get_scorer
from evolalloc.runtime.scorers.base import LayerStats
from tests.learned.test_in_run_training import train, trained_twice_then_cached
from tests.learned.test_query_aware_training import write_folder
from tests.pipeline.test_pipeline import tiny_recipe
from tests.runtime.conftest import random_prompt, tiny_model

W = 16


@pytest.fixture(scope="module")
def records():
    model = tiny_model("llama")
    return [trace_ids(model, random_prompt(200, seed=s).tolist(), [120, 180], 16, votes=W) for s in (1, 2)]


def test_traces_hold_snapkvs_smoothed_votes_at_each_split():
    model, eager = tiny_model("llama"), tiny_model("llama", attn="eager")
    ids = random_prompt(200, seed=5).tolist()
    record = trace_ids(model, ids, [60, 150], 32, votes=W)
    with torch.no_grad():
        attentions = eager(input_ids=torch.tensor([ids]), output_attentions=True, use_cache=False).attentions
    snapkv = get_scorer("snapkv", window=W)
    for s, n in enumerate([60, 150]):
        for layer in range(3):
            window = attentions[layer][0, :, n - W : n, :n]  # [Hq, w, n]: as if the prompt ended at n
            keys = torch.zeros(2, n, 16)
            expected = snapkv.score(LayerStats(layer_idx=layer, keys=keys, values=keys, window_attention=window))
            assert torch.allclose(record["snap_votes"][s][layer], expected, atol=1e-4)


def config(**changes) -> GatesTrainConfig:
    return GatesTrainConfig(**{**dict(steps=30, hidden=4, capacities=(40, 60), sinks=0, window=16, log_every=100,
                                      votes=W, anchored=True), **changes})


def test_anchored_training_is_deterministic_moves_the_calibration_and_lowers_the_lost_attention(records, tmp_path):
    traces = load_traces(write_folder(tmp_path / "t", records))
    first, summary = train_gates(traces, config(), progress=False)
    second, _ = train_gates(traces, config(), progress=False)
    assert first.config.anchored and summary["anchored"]
    assert all(torch.equal(v, second.state_dict()[k]) for k, v in first.state_dict().items())
    assert first.log_scale.abs().max() > 0 and first.offset.abs().max() > 0 and first.shared.weight.abs().max() > 0
    # The loss it trains, over every item at both capacities: lower than at the start (SnapKV's votes).
    untrained, _ = train_gates(traces, config(steps=1), progress=False)  # 1 warm-up step: lr ~0
    assert total_loss(traces, first) < total_loss(traces, untrained)


def test_calibration_only_training_moves_scale_and_offset_and_leaves_the_residual_exactly_zero(records, tmp_path):
    traces = load_traces(write_folder(tmp_path / "t", records))
    gates, summary = train_gates(traces, config(residual=False), progress=False)
    assert summary["residual"] is False
    assert torch.equal(gates.shared.weight,
                       torch.zeros_like(gates.shared.weight)) and float(gates.shared.bias.detach()) == 0.0
    assert gates.log_scale.abs().max() > 0 and gates.offset.abs().max() > 0
    assert total_loss(traces, gates) < total_loss(traces, train_gates(traces, config(steps=1), progress=False)[0])
    with pytest.raises(ValueError, match="residual = False is a setting of anchored gates"):
        train_gates(traces, config(residual=False, anchored=False), progress=False)


def total_loss(traces, gates) -> float:
    c = config()
    with torch.no_grad():
        return sum(float(anchored_loss(gates, features, item_anchor(traces, item, c.sinks, c.window), importance,
                                       capacity,
                                       c.sinks, c.window, c.penalty)[0])
                   for item in traces.items for capacity in c.capacities
                   for features, importance, _ in [item_tensors(traces, item, c.sinks, c.window, True)])


def test_anchored_training_refuses_traces_without_smoothed_votes(records, tmp_path):
    older = load_traces(write_folder(tmp_path / "o",
                                     [{k: v for k, v in r.items() if k != "snap_votes"} for r in records]))
    with pytest.raises(ValueError, match="anchored gates need traces with SnapKV's smoothed votes"):
        train_gates(older, config(), progress=False)


def anchored_recipe(tmp_path, model_dir, **train_changes):
    train = {"steps": 20, "checkpoint_every": 5, "seed": 0, "votes": 8, "anchored": True, **train_changes}
    return tiny_recipe(tmp_path, model_dir,
                       scorer={"name": "gates", "params": {"sinks": 0, "window": 8}, "train": train},
                       baselines=["uniform", "gates"], budget={"target": 24, "expansions": []},
                       optimizer={"name": "cma", "generations_per_group": 1, "popsize": 3})


def test_in_run_anchored_training_is_cached_deterministic_and_its_own_key(tmp_path, tiny_model_dir, monkeypatch):
    recipe = anchored_recipe(tmp_path, tiny_model_dir)
    first, experiment = trained_twice_then_cached(recipe, tmp_path, monkeypatch)
    assert torch.load(first, weights_only=True)["config"]["anchored"] is True
    baseline = experiment.make_baseline("gates")  # the global method ranks with the run's always-kept tokens
    assert baseline.scorer[1]["sinks"] == 0 and baseline.scorer[1]["window"] == 8 and baseline.min_target == 8
    with pytest.raises(AssertionError, match="trained again"):  # anchored: false is another key
        train(anchored_recipe(tmp_path, tiny_model_dir, anchored=False))
    with pytest.raises(AssertionError, match="trained again"):  # and so is residual: false
        train(anchored_recipe(tmp_path, tiny_model_dir, residual=False))


def test_anchored_without_votes_is_one_recipe_error(tmp_path, tiny_model_dir):
    from evolalloc.config.recipe import load_recipe
    from evolalloc.core.errors import UserError

    with pytest.raises(UserError, match="set scorer.train.votes") as info:
        load_recipe(anchored_recipe(tmp_path, tiny_model_dir, votes=0))
    assert info.value.field == "scorer.train.anchored" and "\n" not in str(info.value)
    with pytest.raises(UserError, match="false is a setting of anchored gates") as info:
        load_recipe(anchored_recipe(tmp_path, tiny_model_dir, anchored=False, residual=False))
    assert info.value.field == "scorer.train.residual"
