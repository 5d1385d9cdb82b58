"""A whole run on a tiny random model (real tokenizer, real files): search, ship, compare, report,
and the CLI around it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from evolalloc.core.allocation_file import load_allocation


def tiny_recipe(tmp_path: Path, model_dir: Path, **changes) -> Path:
    recipe = {
        "name": "tiny",
        "model": {"spec": str(model_dir)},
        "task": {"name": "passkey", "context_tokens": 200, "search": {"n": 2}, "heldout": {"n": 3}},
        "scorer": {"name": "snapkv", "params": {"window": 8}},
        "budget": {"target": 24, "expansions": [48]},
        "search_space": {"name": "layer_groups", "group_size": 2},
        "optimizer": {"name": "cma", "generations_per_group": 2},  # popsize: EvolKV's 4 + floor(3 ln 2) = 6
        "engine": {"kind": "local", "threads": 1, "batch_size": 8},
        "seed": 0,
    }
    for key, value in changes.items():
        recipe[key] = value
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(recipe))
    return path


REPO = Path(__file__).resolve().parents[2]


def evolalloc(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    # PYTHONPATH: this checkout's code, not whichever one the venv has installed in editable mode.
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    return subprocess.run([sys.executable, "-m", "evolalloc", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=600, env=env)


def test_a_run_leaves_a_complete_run_folder(tmp_path, tiny_model_dir):
    from evolalloc.config.recipe import load_recipe
    from evolalloc.config.run_folder import create_run_folder
    from evolalloc.pipeline.run import search_run

    recipe = load_recipe(tiny_recipe(tmp_path, tiny_model_dir))
    run = create_run_folder(recipe, tmp_path / "runs")
    search_run(run, recipe, progress=False)
    names = {p.name for p in run.iterdir()}
    for expected in ("recipe.yaml", "study.db", "search_checkpoint.json", "allocation-c24.json", "allocation-c48.json",
                     "comparison.json", "report.md", "budgets-per-layer.png", "fitness-over-evaluations.png",
                     "score-vs-budget.png"):
        assert expected in names, expected
    profile = load_allocation(run / "allocation-c24.json")
    assert profile.total == 24 * 4 * 2  # completed to the exact target total
    # the start's three profiles (uniform, pyramid, LU-KV), then 2 groups x 2 generations x 6 candidates
    assert profile.provenance["method"] == "evolved" and profile.provenance["evaluations"] == 3 + 2 * 2 * 6
    assert profile.provenance["population"] == 6
    assert load_allocation(run / "allocation-c48.json").total == 48 * 4 * 2
    comparison = json.loads((run / "comparison.json").read_text())
    assert {row["method"] for row in comparison["rows"]} == {"evolved", "uniform", "pyramid", "streaming"}
    assert "| evolved" in (run / "report.md").read_text()


def test_the_cli_refuses_an_existing_run_folder_without_touching_it(tmp_path, tiny_model_dir):
    recipe = tiny_recipe(tmp_path, tiny_model_dir)
    (tmp_path / "runs" / "tiny").mkdir(parents=True)
    (tmp_path / "runs" / "tiny" / "keep.txt").write_text("mine")
    done = evolalloc("search", str(recipe), "--runs-dir", str(tmp_path / "runs"), cwd=tmp_path)
    assert done.returncode == 2
    assert "already exists" in done.stderr and "Traceback" not in done.stderr
    assert [p.name for p in (tmp_path / "runs" / "tiny").iterdir()] == ["keep.txt"]


@pytest.mark.parametrize(
    "changes, field",
    [
        ({"budget": {"target": "lots"}}, "budget.target"),
        ({"scorer": {"name": "snapkvv"}}, "scorer"),
        ({"optimizer": {"name": "cma", "sigma": 0.3}}, "optimizer.sigma"),
    ],
)
def test_a_bad_recipe_gives_one_line_naming_file_and_field_and_writes_nothing(tmp_path, tiny_model_dir, changes, field):
    recipe = tiny_recipe(tmp_path, tiny_model_dir, **changes)
    done = evolalloc("search", str(recipe), "--runs-dir", str(tmp_path / "runs"), cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert str(recipe) in done.stderr and field in done.stderr
    assert not (tmp_path / "runs" / "tiny").exists()


def test_a_bad_allocation_file_gives_one_line_and_a_non_zero_exit(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "evolalloc.allocation", "version": 1, "budgets": [[1, -2]]')
    done = evolalloc("export", str(bad), cwd=tmp_path)
    assert done.returncode == 2
    assert "Traceback" not in done.stderr and str(bad) in done.stderr


def test_a_run_killed_mid_search_resumes_and_finishes_with_every_evaluation_once(tmp_path, tiny_model_dir, monkeypatch):
    import optuna

    from evolalloc.config.recipe import load_recipe
    from evolalloc.config.run_folder import create_run_folder
    from evolalloc.engine.local import LocalEvaluator
    from evolalloc.pipeline.run import resume_run, search_run

    recipe = load_recipe(tiny_recipe(tmp_path, tiny_model_dir))
    run = create_run_folder(recipe, tmp_path / "runs")
    real_evaluate, calls = LocalEvaluator.evaluate, {"n": 0}

    def killed_at_third_generation(self, budgets):
        calls["n"] += 1
        if calls["n"] == 3:
            raise KeyboardInterrupt  # what Ctrl-C or a kill does in the middle of a generation
        return real_evaluate(self, budgets)

    monkeypatch.setattr(LocalEvaluator, "evaluate", killed_at_third_generation)
    with pytest.raises(KeyboardInterrupt):
        search_run(run, recipe, progress=False)
    assert not (run / "allocation-c24.json").exists()
    monkeypatch.setattr(LocalEvaluator, "evaluate", real_evaluate)
    resume_run(run, progress=False)
    study = optuna.load_study(study_name="tiny", storage=f"sqlite:///{run / 'study.db'}")
    keys = [(t.user_attrs["group"], t.user_attrs["generation"], t.user_attrs["candidate"]) for t in study.trials]
    assert len(keys) == len(set(keys)) == 3 + 2 * 2 * 6  # every evaluation stored exactly once, the start's too
    assert load_allocation(run / "allocation-c24.json").total == 24 * 4 * 2
    assert (run / "report.md").exists()


def test_the_commands_around_a_finished_run(tmp_path, tiny_model_dir):
    """show, export, expand, evaluate and compare, as a user runs them on a run folder."""
    runs = tmp_path / "runs"
    # baselines without streaming: `evaluate streaming` below must capture its ranking itself
    recipe = tiny_recipe(tmp_path, tiny_model_dir, baselines=["uniform", "pyramid"])
    done = evolalloc("search", str(recipe), "--runs-dir", str(runs), "--no-progress", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    run = runs / "tiny"

    shown = evolalloc("show", str(run), cwd=tmp_path)
    assert shown.returncode == 0 and "c = 24" in shown.stdout and "held-out comparison" in shown.stdout

    exported = evolalloc("export", str(run / "allocation-c24.json"), "--format", "kvpress", "--context-length", "200",
                         cwd=tmp_path)
    table = json.loads(exported.stdout)
    assert len(table["budgets"]) == 4 and len(table["compression_ratios"]) == 4

    expanded = evolalloc("expand", str(run / "allocation-c24.json"), "--to", "96", cwd=tmp_path)
    assert expanded.returncode == 0, expanded.stderr
    assert load_allocation(run / "allocation-c96.json").total == 96 * 4 * 2
    again = evolalloc("expand", str(run / "allocation-c24.json"), "--to", "96", cwd=tmp_path)
    assert again.returncode != 0 and "not overwriting" in again.stderr

    scored = evolalloc("evaluate", "uniform", "--run", str(run), "--split", "heldout", "--no-progress", cwd=tmp_path)
    assert scored.returncode == 0, scored.stderr
    assert "uniform (c = 24, scorer snapkv) on passkey/heldout: mean" in scored.stdout
    assert len([line for line in scored.stdout.splitlines() if line.startswith("passkey/heldout/")]) == 3
    # streaming ranks with its own scorer, which this run's records were not built for: prefilled anew
    several = evolalloc("evaluate", "full", "uniform", "streaming", "--run", str(run), "--budget", "24", "--quiet",
                        "--no-progress", cwd=tmp_path)
    assert several.returncode == 0, several.stderr
    lines = several.stdout.strip().splitlines()  # one summary line each, in the order asked
    assert [line.split(" (")[0] for line in lines] == ["full", "uniform", "streaming"]
    assert "the full cache" in lines[0] and "c = 24" in lines[1] and "n = 3" in lines[2]

    compared = evolalloc("compare", str(run), "--no-progress", cwd=tmp_path)
    assert compared.returncode == 0, compared.stderr
    assert "c = 96" in compared.stdout  # the expansion made above is compared too
