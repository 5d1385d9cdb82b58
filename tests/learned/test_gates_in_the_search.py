"""``scorer: gates`` through the whole search: refused starts for a bad checkpoint, the checkpoint's
fingerprint in every profile, `show` and the report, and the ship -> `evaluate FILE` round trip."""

from __future__ import annotations

import hashlib
import json
import re

import pytest

from tests.clitools import populated_runs_dir, run_cli, snapshot
from tests.pipeline.test_pipeline import tiny_recipe
from tests.pipeline.test_start_faults import refused_start

FAST = {"baselines": ["uniform"], "budget": {"target": 24, "expansions": []},
        "optimizer": {"name": "cma", "generations_per_group": 1, "popsize": 3}}


def save_tiny_gates(path, model_dir, *, layers=None, seed=0):
    import torch

    from evolalloc.runtime.gates import GatesConfig, RetentionGates, save_gates
    from evolalloc.runtime.model import load_model
    from evolalloc.runtime.policy import model_identity

    loaded = load_model(str(model_dir))
    torch.manual_seed(seed)
    geometry = loaded.geometry.to_dict()
    if layers is not None:
        geometry["num_layers"] = layers
    gates = RetentionGates(GatesConfig(geometry["num_layers"], 2, 16, hidden=4))
    return save_gates(path, gates, model=model_identity(str(model_dir), loaded.model), geometry=geometry,
                      training={"steps": 7, "seed": seed,
                                "traces_settings": {"tasks": ["passkey"], "split": "search", "count": 2}})


@pytest.fixture
def runs(tmp_path, monkeypatch):
    monkeypatch.setenv("EVOLALLOC_CACHE", str(tmp_path / "cache"))
    return populated_runs_dir(tmp_path)


@pytest.mark.parametrize("scorer, fault", [("gates", "missing"), ("gates", "unreadable"), ("gates", "other model"),
                                           ("learned", "missing")])
def test_a_bad_checkpoint_is_a_refused_start_naming_the_recipe_field(tmp_path, runs, tiny_model_dir, scorer, fault):
    checkpoint = tmp_path / "scorer.pt"
    if fault == "unreadable":
        checkpoint.write_bytes(b"not a checkpoint")
    elif fault == "other model":
        save_tiny_gates(checkpoint, tiny_model_dir, layers=3)
    recipe = tiny_recipe(tmp_path, tiny_model_dir, scorer={"name": scorer, "params": {"checkpoint": str(checkpoint)}},
                         **FAST)
    cache = snapshot(tmp_path / "cache")
    what = "policy" if scorer == "learned" else "gates"
    phrase = {"missing": f"no {what} checkpoint", "unreadable": f"not a readable {what} checkpoint",
              "other model": "num_layers: checkpoint 3 vs model 4"}[fault]
    refused_start(recipe, runs, field="scorer.params.checkpoint", phrase=phrase)
    assert snapshot(tmp_path / "cache") == cache


def _mean(text: str, name: str) -> float:
    return float(re.search(rf"^{re.escape(name)} .*: mean ([0-9.]+),", text, re.M).group(1))


def test_a_profile_searched_over_gates_records_its_checkpoint_and_reproduces_from_the_file_alone(tmp_path, runs,
                                                                                                 tiny_model_dir):
    from evolalloc.core.allocation_file import load_allocation
    from evolalloc.report.comparison import load_comparison

    checkpoint = save_tiny_gates(tmp_path / "gates.pt", tiny_model_dir)
    digest = hashlib.sha256(checkpoint.read_bytes()).hexdigest()
    # The global gates method reads the run's checkpoint too (there is none at the default path).
    recipe = tiny_recipe(tmp_path, tiny_model_dir, scorer={"name": "gates", "params": {"checkpoint": str(checkpoint)}},
                         task={"name": "passkey", "context_tokens": 200, "search": {"n": 2}, "heldout": {"n": 4}},
                         **{**FAST, "baselines": ["uniform", "gates"]})
    searched = run_cli("search", recipe, "--runs-dir", runs, "--no-progress")
    assert searched.code == 0, searched.stderr
    run = runs / "tiny"
    shipped = load_allocation(run / "allocation-c24.json")
    assert shipped.scorer == "gates" and shipped.scorer_params["checkpoint"] == str(checkpoint)
    record = shipped.provenance["scorer_checkpoint"]
    assert record["sha256"] == digest
    assert record["trained"] == {"steps": 7, "seed": 0, "tasks": ["passkey"], "splits": ["search"], "traces": 2,
                                 "model": str(tiny_model_dir)}
    shown = run_cli("show", run).stdout
    assert (f"scorer gates: checkpoint {checkpoint} (sha256 {digest[:16]}), "
            "trained 7 steps seed 0 2 traces of passkey") in shown
    assert f"sha256 {digest[:16]}" in (run / "report.md").read_text()
    exported = json.loads(run_cli("export", run / "allocation-c24.json", "--format", "headkv").stdout)
    assert exported["scorer_checkpoint"]["sha256"] == digest

    # The file alone: another recipe (SnapKV, another scorer) gives the model and task; the file's gates rank.
    (tmp_path / "other").mkdir()
    other = tiny_recipe(tmp_path / "other", tiny_model_dir, scorer={"name": "snapkv", "params": {"window": 8}},
                        task={"name": "passkey", "context_tokens": 200, "search": {"n": 2}, "heldout": {"n": 4}},
                        **FAST)
    from_file = run_cli("evaluate", run / "allocation-c24.json", "--recipe", other, "--no-progress")
    assert from_file.code == 0, from_file.stderr
    from_run = run_cli("evaluate", run / "allocation-c24.json", "--run", run, "--no-progress")
    assert from_file.stdout == from_run.stdout  # every instance's prediction, not only the mean
    rows, _ = load_comparison(run / "comparison.json")
    assert {row.method for row in rows} == {"evolved", "uniform", "gates"}
    evolved = next(row for row in rows if row.method == "evolved" and row.budget == 24)
    assert _mean(from_file.stdout, str(run / "allocation-c24.json")) == pytest.approx(evolved.score.mean, abs=5e-4)

    # Other weights at the same path would not reproduce it: refused in one line, exit 2.
    save_tiny_gates(checkpoint, tiny_model_dir, seed=1)
    changed = run_cli("evaluate", run / "allocation-c24.json", "--recipe", other, "--no-progress", "--quiet")
    assert changed.code == 2 and len(changed.error_lines) == 1 and digest[:12] in changed.stderr, changed.stderr
