"""``evolalloc search`` end to end on a user's own model folder: a tiny random Qwen3 (q/k norms)
and a tiny random Gemma 3 (sliding and full layers), saved as HF folders with the bundled
tokenizer. The Gemma profile keeps its sliding layers within their windows, spends the target
total exactly, records the windows in the file, and exports to kvpress."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
import yaml

from evolalloc.core.allocation_file import load_allocation
from tests.clitools import run_cli

WINDOW = 48  # below the prompt length, above SnapKV's 8-token window of the recipe


def save_tiny(folder, architecture: str):
    import transformers as T

    from evolalloc.runtime.model import load_tokenizer

    tokenizer = load_tokenizer()
    common = dict(vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=4,
                  num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=2048,
                  eos_token_id=tokenizer.eos_token_id, bos_token_id=tokenizer.bos_token_id, pad_token_id=0)
    if architecture == "qwen3":
        config, cls = T.Qwen3Config(**common), T.Qwen3ForCausalLM
    else:
        config = T.Gemma3TextConfig(**common, sliding_window=WINDOW, query_pre_attn_scalar=16,
                                    layer_types=["sliding_attention", "full_attention"] * 2)
        cls = T.Gemma3ForCausalLM
    torch.manual_seed(0)
    cls(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def recipe(model_dir) -> dict:
    return {
        "name": "yours",
        "model": {"spec": str(model_dir)},
        "task": {"name": "passkey", "context_tokens": 160, "search": {"n": 2}, "heldout": {"n": 2}},
        "scorer": {"name": "snapkv", "params": {"window": 8}},
        "budget": {"target": 64, "expansions": [96]},
        "search_space": {"name": "layer_groups", "group_size": 2},
        "optimizer": {"name": "cma", "generations_per_group": 1, "popsize": 3, "budget_rule": "exact"},
        "engine": {"kind": "local", "threads": 1, "batch_size": 8},
        "baselines": ["uniform", "pyramid"],
        "seed": 0,
    }


@pytest.mark.parametrize("architecture", ["qwen3", "gemma3"])
def test_search_runs_end_to_end_on_your_own_model_folder(tmp_path, architecture):
    model_dir = save_tiny(tmp_path / architecture, architecture)
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump(recipe(model_dir)))
    result = run_cli("search", path, "--runs-dir", tmp_path / "runs", "--no-progress")
    assert result.code == 0, result.stderr
    run = tmp_path / "runs" / "yours"
    profile = load_allocation(run / "allocation-c64.json")
    assert profile.total == 64 * 4 * 2
    assert json.loads((run / "comparison.json").read_text())
    exported = run_cli("export", run / "allocation-c64.json", "--format", "kvpress")
    assert exported.code == 0, exported.stderr
    assert json.loads(exported.stdout)["budgets"] == profile.budgets[:, 0].tolist()
    if architecture == "gemma3":
        assert profile.geometry.windows == (WINDOW, None, WINDOW, None)
        assert json.loads((run / "allocation-c64.json").read_text())["version"] == 2
        sliding = profile.budgets[[0, 2]]
        assert np.all(sliding <= WINDOW - 1)
        assert np.all(profile.budgets[[1, 3]] > 64)  # what the windows cannot hold goes to the full layers
