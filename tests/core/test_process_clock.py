"""The console entry marks when the command began, and a run takes that moment once as its start:
so a run's wall time counts the imports before it, and a later run in the same process does not."""

from __future__ import annotations

import sys
import time

from evolalloc.core import process_clock


def test_the_console_entry_marks_the_start_and_a_run_takes_it_once(monkeypatch, capsys):
    from evolalloc.cli import run

    process_clock.take_command_start()  # nothing left over from another test
    monkeypatch.setattr(sys, "argv", ["evolalloc", "--version"])
    before = time.time()
    run()
    assert "version" in capsys.readouterr().out
    started = process_clock.take_command_start()
    assert started is not None and before <= started <= time.time()
    assert process_clock.take_command_start() is None  # taken: the next run in this process starts its own clock


def test_prepare_run_starts_the_sessions_clock_at_the_given_start(tmp_path, tiny_model_dir):
    from evolalloc.config.recipe import load_recipe
    from evolalloc.pipeline.start import prepare_run
    from tests.pipeline.test_pipeline import tiny_recipe

    recipe = load_recipe(tiny_recipe(tmp_path, tiny_model_dir, engine={},
                                     optimizer={"name": "cma", "generations_per_group": 1, "popsize": 3}))
    command_began = time.time() - 7.5  # as if torch's import had taken 7.5 s before the run was prepared
    prepared = prepare_run(recipe, tmp_path / "runs", progress=False, started=command_began)
    prepared.experiment.close()
    assert prepared.started == command_began
