"""Kill a search mid-run, resume it: same result as never stopping, no trial evaluated twice."""

from __future__ import annotations

import dataclasses
import os
import evolalloc.core.fileio

import numpy as np
import pytest

import evolalloc.search.loop as loop
from evolalloc.core.errors import UserError
from evolalloc.search import resume_search, run_search
from evolalloc.search.checkpoint import checkpoint_path, load_checkpoint, save_checkpoint
from tests.search.fakes import ProfileEvaluator, SimulatedKill, small_config

# 2 groups x 3 generations = 6 evaluator calls of 8 candidates for an uninterrupted run.
CALLS = 6


def uninterrupted(tmp_path, **settings):
    evaluator = ProfileEvaluator()
    result = run_search(tmp_path / "straight", evaluator, small_config(tmp_path / "straight", **settings), progress=False)
    return result, evaluator


def assert_same_search(resumed, straight):
    np.testing.assert_array_equal(resumed.best_budgets, straight.best_budgets)
    np.testing.assert_array_equal(resumed.best_ratios, straight.best_ratios)
    assert resumed.best_fitness == straight.best_fitness
    assert [(r.key, r.budgets, r.fitness) for r in resumed.history] == [
        (r.key, r.budgets, r.fitness) for r in straight.history
    ]


# Call 2: inside group 0; call 4: the first generation of group 1 (a fresh optimizer).
@pytest.mark.parametrize("optimizer", ["cma", "optuna-tpe"])
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
    checkpoint.optimizer_state = None
    save_checkpoint(run_dir, checkpoint)
    with pytest.raises(RuntimeError, match="do not belong to the same run"):
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
    assert sorted(os.listdir(run_dir)) == ["journal.log", "search_checkpoint.pkl"]  # no temp file left
