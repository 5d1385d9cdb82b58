"""``evolalloc search`` end to end on real Gemma 3 weights (``bundled:gemma3-270m``): the quickstart's
recipe (``base:``) shrunk to minutes — prompts of 640 tokens, longer than the 512-token window,
two search prompts, one generation. The profile spends the target total exactly, keeps every
sliding layer within its window, records the windows and exports to kvpress."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from evolalloc.core.allocation_file import load_allocation
from tests.clitools import run_cli

pytestmark = pytest.mark.real_model

QUICKSTART = Path(__file__).resolve().parents[2] / "runs" / "quickstart.yaml"
TARGET, LAYERS, WINDOW = 128, 18, 512
GLOBAL = [5, 11, 17]


def small_recipe(folder: Path) -> Path:
    recipe = {
        "base": str(QUICKSTART),
        "name": "gemma3-small",
        "model": {"spec": "bundled:gemma3-270m"},
        "task": {"context_tokens": 640, "search": {"n": 2, "curate": {"draw": 3}}, "heldout": {"n": 2}},
        "budget": {"target": TARGET, "expansions": [256], "expansion_rule": "proportional"},
        "search_space": {"group_size": 6},
        "optimizer": {"generations_per_group": 1, "popsize": 3},
        "engine": {"threads": 1},
        "baselines": ["uniform"],
    }
    path = folder / "gemma3-small.yaml"
    path.write_text(yaml.safe_dump(recipe))
    return path


def test_a_small_search_runs_end_to_end_on_gemma3_and_its_profile_fits_the_windows(tmp_path):
    result = run_cli("search", small_recipe(tmp_path), "--runs-dir", tmp_path / "runs", "--no-progress")
    assert result.code == 0, result.stderr
    run = tmp_path / "runs" / "gemma3-small"
    profile = load_allocation(run / f"allocation-c{TARGET}.json")
    assert profile.total == TARGET * LAYERS
    assert profile.geometry.windows == tuple(None if layer in GLOBAL else WINDOW for layer in range(LAYERS))
    sliding = np.delete(profile.budgets, GLOBAL, axis=0)
    assert np.all(sliding <= WINDOW - 1)
    rows = json.loads((run / "comparison.json").read_text())["rows"]
    assert {row["method"] for row in rows} >= {"evolved", "uniform"}
    assert {row["budget"] for row in rows} >= {TARGET, 256}
    exported = run_cli("export", run / f"allocation-c{TARGET}.json", "--format", "kvpress")
    assert exported.code == 0, exported.stderr
    assert json.loads(exported.stdout)["budgets"] == profile.budgets[:, 0].tolist()
