"""``resume`` re-does only what a run folder lacks: a finished run is said to be finished at once,
without loading the model; a finished search is not evaluated (nor its split prefilled) again."""

from __future__ import annotations

import pytest

from tests.clitools import run_cli, snapshot
from tests.pipeline.test_pipeline import tiny_recipe


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory, tiny_model_dir):
    from evolalloc.config.recipe import load_recipe
    from evolalloc.pipeline.start import start_run

    folder = tmp_path_factory.mktemp("finished")
    recipe = load_recipe(tiny_recipe(folder, tiny_model_dir,
                                     optimizer={"name": "cma", "generations_per_group": 1, "popsize": 3},
                                     budget={"target": 24, "expansions": [48], "expansion_rule": "search"}))
    start_run(recipe, folder / "runs", progress=False)
    return folder / "runs" / "tiny"


def forbid_model(monkeypatch):
    from evolalloc.pipeline.loaded_model import ModelHandle

    def loaded(self):
        raise AssertionError("the model was loaded for a finished run")

    monkeypatch.setattr(ModelHandle, "loaded", property(loaded))


def test_resume_on_a_finished_run_says_so_at_once_and_changes_nothing(finished_run, monkeypatch):
    forbid_model(monkeypatch)
    before = snapshot(finished_run)
    resumed = run_cli("resume", finished_run, "--no-progress")
    assert resumed.code == 0, resumed.stderr
    assert f"{finished_run} is finished" in resumed.stdout and "nothing to resume" in resumed.stdout
    assert "c = 24" in resumed.stdout  # then the run is shown, as after any resume
    assert snapshot(finished_run) == before


def test_resume_after_a_lost_report_redoes_compare_and_report_but_not_the_search(finished_run, monkeypatch):
    from evolalloc.pipeline.run import resume_run, run_finished
    from evolalloc.pipeline.task_splits import TaskSplits

    profiles = {p.name: p.read_bytes() for p in finished_run.glob("allocation-c*.json")}
    assert sorted(profiles) == ["allocation-c24.json", "allocation-c48.json"]
    (finished_run / "report.md").unlink()
    (finished_run / "comparison.json").unlink()
    assert not run_finished(finished_run)

    prefilled = []
    records = TaskSplits.records

    def spy(self, split):
        prefilled.append(split)
        return records(self, split)

    monkeypatch.setattr(TaskSplits, "records", spy)
    resume_run(finished_run, progress=False)
    assert run_finished(finished_run)
    assert "search" not in prefilled and "heldout" in prefilled  # the expansion by search is not re-done
    assert {p.name: p.read_bytes() for p in finished_run.glob("allocation-c*.json")} == profiles
