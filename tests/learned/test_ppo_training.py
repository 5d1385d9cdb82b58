"""PPO training of the eviction policy on tiny random models: it learns where the best eviction is obvious,
it is deterministic given its seed, and what it cannot train on is refused in one line."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch

from evolalloc.core.errors import UserError
from evolalloc.learned.ppo_episodes import build_episodes
from evolalloc.learned.ppo_sampler import TrainingPolicy
from evolalloc.learned.ppo_settings import PPOSettings
from evolalloc.learned.ppo_train import greedy_reward, train_ppo
from evolalloc.runtime.model import LoadedModel, geometry_of
from evolalloc.runtime.ppo_network import fresh_network
from tests.runtime.conftest import random_prompt, tiny_model

KEY = 5  # the one token whose value carries anything


def key_token_model():
    """A tiny Llama in which only one token matters: in layer 0 every other token's value is exactly zero
    (embeddings with a zero first coordinate, values read from that coordinate alone), and the later layers
    write nothing back (``o_proj`` zero). Releasing the key token erases layer 0's attention output, so
    the best eviction keeps it; which other tokens go hardly matters."""
    model = tiny_model("llama")
    with torch.no_grad():
        embed = model.model.embed_tokens.weight
        embed[:, 0] = 0.0
        embed[KEY] = 0.0
        embed[KEY, 0] = 1.0
        attention = model.model.layers[0].self_attn
        direction = torch.randn(attention.v_proj.weight.shape[0], generator=torch.Generator().manual_seed(0))
        attention.v_proj.weight.zero_()
        attention.v_proj.weight[:, 0] = 20.0 * direction / direction.norm()
        for layer in model.model.layers[1:]:
            layer.self_attn.o_proj.weight.zero_()
    return LoadedModel("tiny-key", model, None, geometry_of(model.config))


def key_prompt(seed: int) -> list[int]:
    """40 random tokens with the key at position 12: neither a sink nor among the 16 most recent."""
    ids = random_prompt(40, seed=seed)
    ids[ids == KEY] = 7
    ids[12] = KEY
    return ids.tolist()


SETTINGS = dict(prompts=6, prompt_tokens=40, continuation=12, budgets=(30,), prompts_per_update=2, rollouts=4)


def test_training_learns_to_keep_the_one_token_that_matters():
    loaded = key_token_model()
    network, summary = train_ppo(loaded, PPOSettings(**SETTINGS, updates=15, seed=0),
                                 prompts=[key_prompt(s) for s in range(6)], progress=False)
    untrained = fresh_network(loaded.geometry.to_dict(), 32, 2, seed=0)
    untrained.load_state_dict({**untrained.state_dict(), "feature_mean": network.feature_mean,
                               "feature_std": network.feature_std})
    held_out = build_episodes(loaded.model, [key_prompt(100 + s) for s in range(4)],
                              TrainingPolicy().attach(untrained, None), continuation=12)
    before = greedy_reward(loaded.model, untrained, held_out, budget=30)
    after = greedy_reward(loaded.model, network, held_out, budget=30)
    assert before < -0.2  # the untrained policy releases the key token ...
    assert after > -0.02  # ... the trained one keeps it: about as good as the full cache
    assert summary["final_reward"] > summary["first_reward"] + 0.1  # and its own episodes got better


def test_the_same_seed_trains_the_same_network_and_curve():
    loaded = key_token_model()
    prompts = [key_prompt(s) for s in range(6)]
    runs = [train_ppo(loaded, PPOSettings(**SETTINGS, updates=2, seed=4), prompts=prompts, progress=False)
            for _ in range(2)]
    (first, a), (second, b) = runs
    assert all(torch.equal(x, y) for x, y in zip(first.state_dict().values(), second.state_dict().values()))
    assert a["first_reward"] == b["first_reward"] and a["final_reward"] == b["final_reward"]


def test_budgets_below_the_always_kept_tokens_and_sliding_models_are_refused_in_one_line():
    loaded = key_token_model()
    with pytest.raises(UserError, match="budget 12 is below the 20 tokens ppo-policy always keeps"):
        train_ppo(loaded, PPOSettings(**{**SETTINGS, "budgets": (12, 30)}), prompts=[key_prompt(0)] * 6)
    sliding = tiny_model("mistral-sliding")
    with pytest.raises(UserError, match="full-attention models only"):
        train_ppo(LoadedModel("s", sliding, None, geometry_of(sliding.config)), PPOSettings(**SETTINGS),
                  prompts=[key_prompt(0)] * 6)


def evolalloc(*args: str, status: int = 0) -> subprocess.CompletedProcess:
    result = subprocess.run([sys.executable, "-m", "evolalloc", "ppo", *args], capture_output=True, text=True,
                            timeout=600)
    assert result.returncode == status, result.stderr[-2000:]
    return result


def test_ppo_train_and_eval_on_prose_write_a_checkpoint_a_curve_and_the_comparison(tmp_path, tiny_model_dir):
    model = ["--model", str(tiny_model_dir)]
    checkpoint = tmp_path / "ppo.pt"
    out = evolalloc("train", "--out", str(checkpoint), *model, "--prompts", "2", "--prompt-tokens", "64",
                    "--continuation", "9", "--budgets", "24,32", "--updates", "3", "--prompts-per-update", "1",
                    "--rollouts", "2")
    assert "trained the ppo policy" in out.stdout
    curve = [json.loads(line) for line in (tmp_path / "ppo.log.jsonl").read_text().splitlines()]
    assert [row["update"] for row in curve] == [0, 1, 2] and all(row["reward"] <= 1 for row in curve)
    out = evolalloc("eval", str(checkpoint), *model, "--prompts", "2", "--prompt-tokens", "64", "--continuation", "9",
                    "--budget", "40", "--baselines", "h2o,streaming", "--json", str(tmp_path / "eval.json"))
    result = json.loads((tmp_path / "eval.json").read_text())
    assert [key.split("(")[0] for key in result["rows"]] == ["ppo-policy", "h2o", "streaming"]
    assert all(len(row["per_prompt_gap"]) == 2 for row in result["rows"].values()) and "| h2o |" in out.stdout


def test_ppo_eval_refuses_a_missing_checkpoint_and_train_bad_settings_in_one_line(tmp_path,
                                                                                                 tiny_model_dir):
    missing = evolalloc("eval", str(tmp_path / "none.pt"), status=2)
    assert "no ppo policy checkpoint" in missing.stderr and "Traceback" not in missing.stderr
    bad = evolalloc("train", "--rollouts", "1", status=2)
    assert "ppo rollouts: 1 must be >= 2" in bad.stderr and "Traceback" not in bad.stderr
