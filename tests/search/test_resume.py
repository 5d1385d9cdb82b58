"""Kill a search mid-run, resume it: same result as never stopping, no trial evaluated twice."""

from __future__ import annotations

import dataclasses
import json
import os
import pickle

import numpy as np
import pytest

import evolalloc.core.fileio
import evolalloc.search.loop as loop
from evolalloc.core.errors import UserError
from evolalloc.search import resume_search, run_search
from evolalloc.search.checkpoint import checkpoint_path, load_checkpoint, save_checkpoint
from tests.search.fakes import ProfileEvaluator, SimulatedKill, small_config

# 2 groups x 3 generations = 6 evaluator calls of 8 candidates for an uninterrupted run.
CALLS = 6


def uninterrupted(tmp_path, **settings):
    evaluator = ProfileEvaluator()
    result = run_search(tmp_path / "straight", evaluator, small_config(tmp_path / "straight", **settings),
                        progress=False)
    return result, evaluator


def assert_same_search(resumed, straight):
    np.testing.assert_array_equal(resumed.best_budgets, straight.best_budgets)
    np.testing.assert_array_equal(resumed.best_ratios, straight.best_ratios)
    assert resumed.best_fitness == straight.best_fitness
    assert [(r.key, r.budgets, r.fitness) for r in resumed.history] == [
        (r.key, r.budgets, r.fitness) for r in straight.history
    ]


# Call 2: inside group 0; call 4: the first generation of group 1 (a fresh optimizer).
@pytest.mark.parametrize("optimizer", ["cma", "optuna-cma", "optuna-tpe"])
@pytest.mark.parametrize("kill_at", [2, 4])
def test_resume_after_a_kill_gives_the_same_final_allocation(tmp_path, optimizer, kill_at):
    straight, _ = uninterrupted(tmp_path, optimizer=optimizer)
    run_dir = tmp_path / "killed"
    killed = ProfileEvaluator(kill_at_call=kill_at)
    with pytest.raises(SimulatedKill):
        run_search(run_dir, killed, small_config(run_dir, optimizer=optimizer), progress=False)
    assert load_checkpoint(run_dir).generation == (kill_at - 1) % 3  # it was in that generation

    again = ProfileEvaluator()
    resumed = resume_search(run_dir, again, progress=False)
    assert_same_search(resumed, straight)
    # Nothing evaluated twice, nothing lost: the killed call never finished, so it is redone.
    assert killed.candidates + again.candidates == 8 * CALLS
    assert again.calls == CALLS - (kill_at - 1)
    assert resumed.evaluated == again.candidates


def test_resume_reuses_trials_stored_just_before_the_kill(tmp_path, monkeypatch):
    # Killed after generation 2's trials were stored but before its checkpoint was written;
    # on the default SQLite store.
    straight, _ = uninterrupted(tmp_path)
    saves = {"n": 0}
    real_save = loop.save_checkpoint

    def save_then_die(run_dir, checkpoint):
        saves["n"] += 1
        if saves["n"] == 3:  # the initial save, generation 1's, then generation 2's
            raise SimulatedKill("killed while checkpointing")
        return real_save(run_dir, checkpoint)

    monkeypatch.setattr(loop, "save_checkpoint", save_then_die)
    run_dir = tmp_path / "killed"
    first = ProfileEvaluator()
    with pytest.raises(SimulatedKill):
        run_search(run_dir, first, small_config(run_dir, storage=None), progress=False)
    monkeypatch.setattr(loop, "save_checkpoint", real_save)
    assert first.calls == 2 and load_checkpoint(run_dir).generation == 1

    again = ProfileEvaluator()
    resumed = resume_search(run_dir, again, progress=False)
    assert_same_search(resumed, straight)
    assert again.calls == CALLS - 2  # generation 2 came from the study, not the evaluator
    assert first.candidates + again.candidates == 8 * CALLS


def test_resuming_a_finished_search_evaluates_nothing(tmp_path):
    straight, _ = uninterrupted(tmp_path, generations=1)
    evaluator = ProfileEvaluator()
    resumed = resume_search(tmp_path / "straight", evaluator, progress=False)
    assert evaluator.calls == 0 and resumed.evaluated == 0
    assert_same_search(resumed, straight)


def test_resume_refuses_a_stored_trial_that_the_optimizer_would_not_ask(tmp_path):
    run_dir = tmp_path / "run"
    with pytest.raises(SimulatedKill):
        run_search(run_dir, ProfileEvaluator(kill_at_call=3), small_config(run_dir), progress=False)
    checkpoint = load_checkpoint(run_dir)
    # A checkpoint from another run (other seed) next to this study: its points differ.
    checkpoint.config = dataclasses.replace(checkpoint.config, seed=checkpoint.config.seed + 1)
    checkpoint.generation = 0
    save_checkpoint(run_dir, checkpoint)
    with pytest.raises(UserError, match="do not belong to the same run"):
        resume_search(run_dir, ProfileEvaluator(), progress=False)


def test_resume_without_a_checkpoint_is_a_user_error(tmp_path):
    with pytest.raises(UserError, match="nothing to resume"):
        resume_search(tmp_path, ProfileEvaluator(), progress=False)


def test_a_checkpoint_write_that_fails_leaves_the_previous_one_intact(tmp_path, monkeypatch):
    run_dir = tmp_path / "run"
    run_search(run_dir, ProfileEvaluator(), small_config(run_dir, generations=1), progress=False)
    before = checkpoint_path(run_dir).read_bytes()
    checkpoint = load_checkpoint(run_dir)
    checkpoint.generation = 99

    def broken_fsync(fd):
        raise OSError("disk full")  # the temp file is written, then the disk fails

    monkeypatch.setattr(evolalloc.core.fileio.os, "fsync", broken_fsync)
    with pytest.raises(OSError, match="disk full"):
        save_checkpoint(run_dir, checkpoint)
    assert checkpoint_path(run_dir).read_bytes() == before
    assert sorted(os.listdir(run_dir)) == ["journal.log", "search_checkpoint.json"]  # no temp file left


def killed_run(tmp_path, kill_at=3, **settings):
    run_dir = tmp_path / "killed"
    with pytest.raises(SimulatedKill):
        run_search(run_dir, ProfileEvaluator(kill_at_call=kill_at), small_config(run_dir, **settings), progress=False)
    return run_dir


def test_the_checkpoint_is_small_json_without_optimizer_state(tmp_path):
    run_dir = killed_run(tmp_path)
    data = json.loads(checkpoint_path(run_dir).read_text())
    # how far it got, and a record of how the finished groups ended (none yet) and the start (none: uniform)
    assert set(data) == {"format", "version", "config", "group", "generation", "groups", "start_scores", "seconds"}
    assert (data["group"], data["generation"]) == (0, 2) and data["groups"] == [] and data["start_scores"] == {}


def test_a_truncated_checkpoint_is_refused_naming_the_file_and_the_way_to_recover(tmp_path):
    straight, _ = uninterrupted(tmp_path)
    run_dir = killed_run(tmp_path)
    path = checkpoint_path(run_dir)
    path.write_bytes(path.read_bytes()[:40])
    with pytest.raises(UserError) as info:
        resume_search(run_dir, ProfileEvaluator(), progress=False)
    message = str(info.value)
    assert message.startswith(f"{path}: corrupt or truncated search checkpoint")
    assert "delete this file" in message and f"evolalloc resume {run_dir}" in message and "\n" not in message
    # The way out it names: without the file, the search is rebuilt from the study and the config.
    path.unlink()
    again = ProfileEvaluator()
    resumed = resume_search(run_dir, again, config=small_config(run_dir), progress=False)
    assert_same_search(resumed, straight)
    assert again.calls == CALLS - 2


@pytest.mark.parametrize("name", ["search_checkpoint.pkl", "search_checkpoint.json"])
def test_a_crafted_pickle_checkpoint_is_refused_and_runs_nothing(tmp_path, name):
    run_dir = killed_run(tmp_path)
    marker = tmp_path / "pwned"

    class Payload:
        def __reduce__(self):  # unpickling this would create the marker file
            return (open, (str(marker), "w"))

    checkpoint_path(run_dir).unlink()
    (run_dir / name).write_bytes(pickle.dumps(Payload()))
    with pytest.raises(UserError) as info:
        resume_search(run_dir, ProfileEvaluator(), config=small_config(run_dir), progress=False)
    assert str(info.value).startswith(f"{run_dir / name}: ")
    if name.endswith(".pkl"):
        assert "can run arbitrary code" in str(info.value)
    assert not marker.exists()


def test_resume_refuses_a_study_that_lost_trials_the_checkpoint_says_were_finished(tmp_path):
    run_dir = killed_run(tmp_path, kill_at=4)
    checkpoint = load_checkpoint(run_dir)
    assert (checkpoint.group, checkpoint.generation) == (1, 0)
    checkpoint.group = 2  # claims more progress than the study holds
    save_checkpoint(run_dir, checkpoint)
    with pytest.raises(UserError, match="lacks 8 evaluations of group 1, generation 0"):
        resume_search(run_dir, ProfileEvaluator(), progress=False)


def test_resume_refuses_settings_that_differ_from_the_checkpoint(tmp_path):
    run_dir = killed_run(tmp_path)
    other = dataclasses.replace(small_config(run_dir), sigma0=0.5)
    with pytest.raises(UserError, match="sigma0: 0.3 vs 0.5"):
        resume_search(run_dir, ProfileEvaluator(), config=other, progress=False)


def test_replaying_a_finished_search_rewrites_no_checkpoint(tmp_path):
    uninterrupted(tmp_path, generations=1)
    path = checkpoint_path(tmp_path / "straight")
    before = (path.read_bytes(), path.stat().st_mtime_ns)
    resume_search(tmp_path / "straight", ProfileEvaluator(), progress=False)
    assert (path.read_bytes(), path.stat().st_mtime_ns) == before


def test_a_checkpoint_gives_back_exactly_the_config_it_was_written_with(tmp_path):
    from evolalloc.search.checkpoint import Checkpoint

    config = small_config(tmp_path, ratio_bounds=(0.1, 4), popsize=5, sigma0=0.25, max_budget=90)
    save_checkpoint(tmp_path, Checkpoint(config=config, group=1, generation=2))
    loaded = load_checkpoint(tmp_path)
    assert loaded.config == config and (loaded.group, loaded.generation) == (1, 2)
