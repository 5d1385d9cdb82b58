"""Traces with SnapKV votes and the query-aware gates trained on them (``votes > 0``), in the run too."""

from __future__ import annotations

import json

import pytest
import torch

from evolalloc.learned.gates_train import GatesTrainConfig, train_gates
from evolalloc.learned.traces import FORMAT, load_traces, trace_ids, votes_window
from tests.learned.test_in_run_training import recipe_with_training, train, trained_twice_then_cached
from tests.runtime.conftest import random_prompt, tiny_model

GEOMETRY = {"num_layers": 3, "num_query_heads": 4, "num_kv_heads": 2, "head_dim": 16}


def test_votes_are_the_last_window_queries_attention_before_each_split_averaged_over_the_group():
    model, eager = tiny_model("llama"), tiny_model("llama", attn="eager")
    ids = random_prompt(200, seed=5).tolist()
    splits, w = [60, 150], 16
    record = trace_ids(model, ids, splits, 32, votes=w)
    with torch.no_grad():
        attentions = eager(input_ids=torch.tensor([ids]), output_attentions=True, use_cache=False).attentions
    assert record["votes_window"] == w and [v.shape for v in record["votes"]] == [(3, 2, 60), (3, 2, 150)]
    for s, n in enumerate(splits):
        for layer in range(3):
            rows = attentions[layer][0, :, n - w : n, :n]  # [Hq, w, n]: causal, so as if the prompt ended at n
            expected = rows.sum(dim=1).view(2, 2, n).mean(dim=1)
            assert torch.allclose(record["votes"][s][layer], expected, atol=1e-4)
    assert "votes" not in trace_ids(model, ids, splits, 32)  # votes = 0: none recorded


def write_folder(folder, records, version=2):
    folder.mkdir()
    entries = []
    for i, record in enumerate(records):
        name = f"trace-{i:05d}.pt"
        torch.save({**record, "format": FORMAT, "version": version, "uid": f"u{i}", "task": "t", "prompt_len": 180},
                   folder / name)
        entries.append({"file": name, "uid": f"u{i}", "task": "t"})
    index = {"format": FORMAT, "version": version, "model": {}, "geometry": GEOMETRY, "settings": {}, "traces": entries}
    (folder / "index.json").write_text(json.dumps(index))
    return folder


@pytest.fixture(scope="module")
def records():
    model = tiny_model("llama")
    return [trace_ids(model, random_prompt(200, seed=s).tolist(), [120, 180], 16, votes=16) for s in (1, 2)]


def test_a_trace_folder_with_votes_round_trips_and_old_traces_still_load(records, tmp_path):
    loaded = load_traces(write_folder(tmp_path / "v2", records), geometry=GEOMETRY)
    assert votes_window(loaded) == 16
    for original, back in zip(records, loaded.traces):
        assert all(torch.equal(a, b) for a, b in zip(original["votes"], back["votes"]))
    old = [{k: v for k, v in r.items() if k not in ("votes", "votes_window")} for r in records]
    v1 = load_traces(write_folder(tmp_path / "v1", old, version=1), geometry=GEOMETRY)
    assert votes_window(v1) == 0


def test_query_free_training_ignores_recorded_votes_and_query_aware_training_refuses_traces_without(records, tmp_path):
    config = GatesTrainConfig(steps=12, hidden=4, capacities=(40,), sinks=4, window=8, log_every=100)
    with_votes = load_traces(write_folder(tmp_path / "a", records))
    stripped = load_traces(write_folder(tmp_path / "b",
                                        [{k: v for k, v in r.items() if k not in ("votes", "votes_window")}
                                                         for r in records], version=1))
    plain_a, _ = train_gates(with_votes, config, progress=False)
    plain_b, _ = train_gates(stripped, config, progress=False)
    assert plain_a.config.votes == 0 and all(torch.equal(plain_a.state_dict()[k], v)
                                             for k, v in plain_b.state_dict().items())
    aware, summary = train_gates(with_votes, GatesTrainConfig(**{**config.__dict__, "votes": 16}), progress=False)
    assert aware.config.features == 2 * 16 + 2 and summary["votes"] == 16
    with pytest.raises(ValueError, match="votes=16.* need traces with votes of window 16; these have none"):
        train_gates(stripped, GatesTrainConfig(**{**config.__dict__, "votes": 16}), progress=False)
    with pytest.raises(ValueError, match="these have 16"):
        train_gates(with_votes, GatesTrainConfig(**{**config.__dict__, "votes": 8}), progress=False)


def test_in_run_query_aware_training_is_cached_and_deterministic(tmp_path, tiny_model_dir, monkeypatch):
    recipe = recipe_with_training(tmp_path, tiny_model_dir, votes=8, steps=20)
    first, experiment = trained_twice_then_cached(recipe, tmp_path, monkeypatch)
    assert torch.load(first, weights_only=True)["config"]["votes"] == 8
    assert experiment.scorer.capture.window_queries == 8  # the run's records carry the window its gates read
    plain = recipe_with_training(tmp_path, tiny_model_dir, steps=20)  # votes = 0 is another key
    with pytest.raises(AssertionError, match="trained again"):
        train(plain)


def test_query_free_settings_keep_their_cache_key():
    from evolalloc.learned.in_run import InRunSettings

    base = dict(scorer="gates", steps=1, seed=0, future=32, splits_per_trace=3, min_split=128, hidden=32, horizon=32,
                capacities=(64,), checkpoint_every=50, sinks=4, window=16)
    assert "votes" not in InRunSettings(**base).key_fields()  # the keys of gates cached before votes existed
    assert InRunSettings(**base, votes=32).key_fields()["votes"] == 32


def test_query_aware_training_with_the_question_after_compression_is_refused(tmp_path, tiny_model_dir):
    from evolalloc.config.recipe import load_recipe
    from evolalloc.core.errors import UserError
    from tests.pipeline.test_pipeline import tiny_recipe

    path = tiny_recipe(tmp_path, tiny_model_dir, scorer={"name": "gates", "train": {"votes": 8}},
                       task={"name": "passkey", "context_tokens": 200, "search": {"n": 2}, "heldout": {"n": 3},
                             "question_after_compression": True})
    with pytest.raises(UserError, match="no question at compression") as info:
        load_recipe(path)
    assert info.value.field == "scorer.train.votes"


def test_gates_train_with_votes_on_traces_without_is_one_line_and_exit_2(records, tmp_path):
    from tests.clitools import run_cli

    folder = write_folder(tmp_path / "v1", [{k: v for k, v in r.items() if k not in ("votes", "votes_window")}
                                            for r in records], version=1)
    result = run_cli("gates", "train", folder, "--votes", "16", "--steps", "2", "--capacities", "40", "--window", "8",
                     "--out", tmp_path / "g.pt")
    assert result.code == 2 and len(result.error_lines) == 1
    assert "--votes" in result.stderr and ("needs traces recorded with `evolalloc scorer trace "
                                           "--votes 16`; these have no votes") in result.stderr
    assert not (tmp_path / "g.pt").exists()
