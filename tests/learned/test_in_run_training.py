"""``scorer.train``: the run trains its gates (or learned policy) from its search split — never a
held-out instance — cached by content, deterministic for a seed, and resumed exactly after SIGKILL."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch

from evolalloc.config.recipe import load_recipe
from evolalloc.pipeline.experiment import Experiment
from tests.clitools import run_cli
from tests.pipeline.test_pipeline import REPO, tiny_recipe

TRAIN = {"steps": 40, "checkpoint_every": 5, "seed": 0}
SMALL = {"gates": {}, "learned": {"hidden": 8, "permutations": 4}}  # the policy's 2 x 256 MLPs are slow for a test


def recipe_with_training(tmp_path, model_dir, scorer="gates", baselines=("uniform",), **train):
    return tiny_recipe(tmp_path, model_dir, scorer={"name": scorer, "train": {**TRAIN, **SMALL[scorer], **train}},
                       baselines=list(baselines),
                       budget={"target": 24, "expansions": []},
                       optimizer={"name": "cma", "generations_per_group": 1, "popsize": 3})


def weights(path: Path) -> dict[str, bytes]:
    state = torch.load(path, map_location="cpu", weights_only=True)["state_dict"]
    return {name: tensor.numpy().tobytes() for name, tensor in state.items()}


def train(recipe_path, *, progress=False):
    from evolalloc.config.recipe import load_recipe
    from evolalloc.pipeline.experiment import Experiment

    with Experiment(load_recipe(recipe_path), progress=progress) as experiment:
        experiment.ensure_scorer_trained()
        return Path(experiment.scorer.checkpoint), experiment


def trained_twice_then_cached(recipe, tmp_path, monkeypatch):
    """Train ``recipe`` in two fresh caches (the same weights: deterministic), then once more in the
    second with training forbidden (the cached checkpoint). Returns ``(checkpoint, experiment)`` of the
    first; afterwards ``in_run.train_gates`` raises "trained again", so a caller can show another key."""
    from evolalloc.learned import in_run

    monkeypatch.setenv("EVOLALLOC_CACHE", str(tmp_path / "a"))
    first, experiment = train(recipe)
    monkeypatch.setenv("EVOLALLOC_CACHE", str(tmp_path / "b"))
    second, _ = train(recipe)
    assert first != second and weights(first) == weights(second)

    def no_training(*args, **kwargs):
        raise AssertionError("trained again")

    monkeypatch.setattr(in_run, "train_gates", no_training)
    assert train(recipe)[0] == second  # the same key: the cached checkpoint, nothing traced or trained
    return first, experiment


def test_training_reads_only_the_search_split_and_a_second_experiment_reuses_it(tmp_path, tiny_model_dir, monkeypatch):
    import json

    from evolalloc.config.recipe import load_recipe
    from evolalloc.learned import in_run
    from evolalloc.pipeline.task_splits import TaskSplits

    monkeypatch.setenv("EVOLALLOC_CACHE", str(tmp_path / "cache"))
    recipe = recipe_with_training(tmp_path, tiny_model_dir)
    generated = []
    real_generate = TaskSplits.generate
    monkeypatch.setattr(TaskSplits, "generate",
                        lambda self, split, n: generated.append(split) or real_generate(self, split, n))
    checkpoint, experiment = train(recipe)
    assert generated == ["search"]  # the held-out split was not even drawn before training ended
    assert checkpoint.is_file() and checkpoint.parent.parent == tmp_path / "cache" / "trained" / "gates"
    index = json.loads((checkpoint.parent / "traces" / "index.json").read_text())
    search = [inst.uid for inst in experiment.instances("search")]
    heldout = {inst.uid for inst in experiment.instances("heldout")}
    assert [entry["uid"] for entry in index["traces"]] == search and not heldout & set(search)
    assert not list((checkpoint.parent / "traces").glob("trace-*.pt"))  # tensors dropped once trained
    saved = torch.load(checkpoint, weights_only=True)["training"]
    assert saved["trace_uids"] == search and saved["splits"] == ["search"] and saved["steps"] == 40

    def no_training(*args, **kwargs):
        raise AssertionError("trained again: the cached checkpoint should have been re-used")

    monkeypatch.setattr(in_run, "train_gates", no_training)
    mtime = checkpoint.stat().st_mtime_ns
    again, _ = train(recipe)
    assert again == checkpoint and checkpoint.stat().st_mtime_ns == mtime
    with pytest.raises(AssertionError, match="trained again"):  # another seed is another key: it would train
        with Experiment(load_recipe(recipe_with_training(tmp_path, tiny_model_dir, seed=1)), progress=False) as other:
            assert other.scorer.checkpoint != str(checkpoint)
            other.ensure_scorer_trained()


MIXTURE = [{"name": "passkey", "weight": 1.0},  # the searched task itself: its search split only
           {"name": "niah_single", "params": {"needle_type": "word", "haystack": "prose"}, "weight": 2.0,
            "label": "word"}]


def test_a_training_mixture_draws_each_listed_task_from_its_search_split_only(tmp_path, tiny_model_dir, monkeypatch):
    import json

    from fitness.tasks.synthetic import SyntheticTask as Task  # passkey's and niah_single's generator

    monkeypatch.setenv("EVOLALLOC_CACHE", str(tmp_path / "cache"))
    drawn = []
    real = Task.instances
    monkeypatch.setattr(Task, "instances",
                        lambda self, split, *a, **k: drawn.append((self.name, split)) or real(self, split, *a, **k))
    recipe = recipe_with_training(tmp_path, tiny_model_dir, traces=3, tasks=MIXTURE)
    checkpoint, experiment = train(recipe)
    assert sorted(drawn) == [("niah_single", "search"), ("passkey", "search")]  # no task's held-out split was drawn
    index = json.loads((checkpoint.parent / "traces" / "index.json").read_text())
    assert [entry["task"] for entry in index["traces"]] == ["passkey", "word", "word"]  # 3 traces shared 1:2
    traced = {entry["uid"] for entry in index["traces"]}
    heldout = {inst.uid for inst in experiment.instances("heldout")}
    assert traced and not traced & heldout
    from fitness import get_task

    word_heldout = get_task("niah_single", needle_type="word", haystack="prose").instances(
        "heldout", 8, 0, 200, experiment.tokenizer)
    assert not traced & {inst.uid for inst in word_heldout}
    saved = torch.load(checkpoint, weights_only=True)["training"]
    assert saved["tasks"] == ["passkey", "word"] and saved["splits"] == ["search"]
    # Another mixture is another key (the traced texts differ): it trains into its own folder.
    other = recipe_with_training(tmp_path, tiny_model_dir, traces=3, tasks=MIXTURE[:1])
    with Experiment(load_recipe(other), progress=False) as again:
        assert again.scorer.checkpoint != str(checkpoint)


def test_a_training_mixture_without_traces_or_with_an_unknown_task_is_refused(tmp_path, tiny_model_dir):
    from evolalloc.core.errors import UserError

    with pytest.raises(UserError, match="required with scorer.train.tasks") as info:
        load_recipe(recipe_with_training(tmp_path, tiny_model_dir, tasks=MIXTURE))
    assert info.value.field == "scorer.train.traces"
    with pytest.raises(UserError) as info:
        load_recipe(recipe_with_training(tmp_path, tiny_model_dir, traces=3, tasks=[{"name": "passkee"}]))
    assert info.value.field == "scorer.train.tasks[0].name"
    with pytest.raises(UserError) as info:
        load_recipe(recipe_with_training(tmp_path, tiny_model_dir, traces=3,
                                         tasks=[{"name": "passkey", "params": {"nedle": 1}}]))
    assert info.value.field == "scorer.train.tasks[0].params.nedle"


@pytest.mark.parametrize("scorer", ["gates", "learned"])
def test_training_is_deterministic_for_a_seed(tmp_path, tiny_model_dir, monkeypatch, scorer):
    recipe = recipe_with_training(tmp_path, tiny_model_dir, scorer)
    monkeypatch.setenv("EVOLALLOC_CACHE", str(tmp_path / "a"))
    first, _ = train(recipe)
    monkeypatch.setenv("EVOLALLOC_CACHE", str(tmp_path / "b"))
    second, _ = train(recipe)
    assert first != second and weights(first) == weights(second)


KILLED = textwrap.dedent("""
    import sys, time
    import torch
    torch.set_num_threads(1)
    from evolalloc.learned import gates_train, train
    def slowed(real):  # slow each step down so the parent can kill mid-training
        def slow(*args, **kwargs):
            time.sleep(0.1)
            return real(*args, **kwargs)
        return slow
    gates_train.gates_loss = slowed(gates_train.gates_loss)
    gates_train.answer_loss = slowed(gates_train.answer_loss)
    train.normalised_reward = slowed(train.normalised_reward)
    from evolalloc.config.recipe import load_recipe
    from evolalloc.pipeline.experiment import Experiment
    with Experiment(load_recipe(sys.argv[1]), progress=False) as experiment:
        experiment.ensure_scorer_trained()
""")


# Anchored gates trained on the answer (learned.answer_train): the same checkpointing, through the model.
ANSWER = {"votes": 8, "anchored": True, "residual": False, "objective": "answer", "splits_per_trace": 1}


@pytest.mark.parametrize("scorer", ["gates", "learned", "gates-answer"])
def test_training_killed_with_sigkill_resumes_to_the_uninterrupted_weights(tmp_path, tiny_model_dir, monkeypatch,
                                                                           scorer):
    scorer, extra = ("gates", ANSWER) if scorer == "gates-answer" else (scorer, {})
    recipe = recipe_with_training(tmp_path, tiny_model_dir, scorer, steps=60, **extra)
    env = {**os.environ, "EVOLALLOC_CACHE": str(tmp_path / "killed"), "OMP_NUM_THREADS": "1",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    script = tmp_path / "train.py"
    script.write_text(KILLED)
    child = subprocess.Popen([sys.executable, str(script), str(recipe)], env=env, stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE)
    deadline = time.monotonic() + 300
    states = []
    while not states and time.monotonic() < deadline and child.poll() is None:
        time.sleep(0.2)
        states = list((tmp_path / "killed").glob(f"trained/{scorer}/*/train-state.pt"))
    assert states, child.stderr.read().decode() if child.poll() is not None else "no training state within 300 s"
    child.send_signal(signal.SIGKILL)
    child.wait()
    folder = states[0].parent
    assert not list(folder.glob("*.pt")) or [p.name for p in folder.glob("*.pt")] == ["train-state.pt"]  # mid-training

    monkeypatch.setenv("EVOLALLOC_CACHE", str(tmp_path / "killed"))
    resumed, _ = train(recipe)
    assert resumed.parent == folder
    assert torch.load(resumed, weights_only=True)["training"]["resumed_at_step"] > 0  # it continued, not restarted
    monkeypatch.setenv("EVOLALLOC_CACHE", str(tmp_path / "whole"))
    whole, _ = train(recipe)
    assert weights(resumed) == weights(whole)


def test_search_trains_its_scorer_once_and_names_it_in_the_report(tmp_path, tiny_model_dir, monkeypatch):
    from evolalloc.core.allocation_file import load_allocation
    from evolalloc.learned import in_run

    monkeypatch.setenv("EVOLALLOC_CACHE", str(tmp_path / "cache"))
    # The global gates method ranks with the run's freshly trained gates (there is no default checkpoint).
    recipe = recipe_with_training(tmp_path, tiny_model_dir, baselines=("uniform", "gates"))
    first = run_cli("search", recipe, "--runs-dir", tmp_path / "runs", "--no-progress")
    assert first.code == 0, first.stderr
    record = load_allocation(tmp_path / "runs" / "tiny" / "allocation-c24.json").provenance["scorer_checkpoint"]
    assert record["trained"]["in_run_key"] and record["trained"]["splits"] == ["search"]
    assert "in this run's own training step" in (tmp_path / "runs" / "tiny" / "report.md").read_text()
    assert '"gates"' in (tmp_path / "runs" / "tiny" / "comparison.json").read_text()
    assert f"sha256 {record['sha256'][:16]}" in run_cli("show", tmp_path / "runs" / "tiny").stdout

    monkeypatch.setattr(in_run, "train_gates", lambda *a, **k: (_ for _ in ()).throw(AssertionError("trained again")))
    second = run_cli("search", recipe, "--runs-dir", tmp_path / "runs", "--name", "again", "--no-progress")
    assert second.code == 0, second.stderr
    assert (
        load_allocation(tmp_path / "runs" / "again" / "allocation-c24.json").provenance["scorer_checkpoint"] == record
    )


def test_search_seeds_share_one_trained_scorer(tmp_path, tiny_model_dir, monkeypatch):
    from evolalloc.core.allocation_file import load_allocation

    monkeypatch.setenv("EVOLALLOC_CACHE", str(tmp_path / "cache"))
    recipe = recipe_with_training(tmp_path, tiny_model_dir)
    result = run_cli("search", recipe, "--seeds", "0", "1", "--runs-dir", tmp_path / "runs", "--no-progress")
    assert result.code == 0, result.stderr
    records = [
        load_allocation(tmp_path / "runs" / f"tiny-s{seed}" / "allocation-c24.json").provenance["scorer_checkpoint"]
        for seed in (0, 1)
    ]
    assert records[0] == records[1]  # the training seed is scorer.train.seed, not the search seed
    assert len(list((tmp_path / "cache" / "trained" / "gates").iterdir())) == 1


def test_a_search_killed_while_training_is_finished_by_resume(tmp_path, tiny_model_dir, monkeypatch):
    recipe = recipe_with_training(tmp_path, tiny_model_dir, steps=60)
    env = {**os.environ, "EVOLALLOC_CACHE": str(tmp_path / "cache"), "OMP_NUM_THREADS": "1",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    script = tmp_path / "search.py"
    script.write_text(KILLED.split("from evolalloc.config.recipe")[0]
                      + "from evolalloc.cli import run\nsys.argv = ['evolalloc', *sys.argv[1:]]\nrun()\n")
    child = subprocess.Popen([sys.executable, str(script), "search", str(recipe), "--runs-dir", str(tmp_path / "runs"),
                              "--no-progress"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 300
    states = []
    while not states and time.monotonic() < deadline and child.poll() is None:
        time.sleep(0.2)
        states = list((tmp_path / "cache").glob("trained/gates/*/train-state.pt"))
    assert states, child.stderr.read().decode() if child.poll() is not None else "no training state within 300 s"
    child.send_signal(signal.SIGKILL)
    child.wait()
    assert (tmp_path / "runs" / "tiny").is_dir() and not (tmp_path / "runs" / "tiny" / "report.md").exists()

    monkeypatch.setenv("EVOLALLOC_CACHE", str(tmp_path / "cache"))
    resumed = run_cli("resume", tmp_path / "runs" / "tiny", "--no-progress")
    assert resumed.code == 0, resumed.stderr
    checkpoint = states[0].parent / "gates.pt"
    assert torch.load(checkpoint, weights_only=True)["training"]["resumed_at_step"] > 0
    assert (tmp_path / "runs" / "tiny" / "report.md").exists()
