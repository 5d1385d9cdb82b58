"""A start refused for bad input writes nothing: every fault found by probing the command line
(issue 12) gives one line naming the file and field, exit status 2, and an unchanged runs dir."""

from __future__ import annotations

import json
import sys
import time

import pytest

from tests.clitools import assert_refused, populated_runs_dir, run_cli, snapshot
from tests.pipeline.test_pipeline import tiny_recipe


@pytest.fixture
def runs(tmp_path):
    return populated_runs_dir(tmp_path)


def refused_start(recipe, runs, *, field, phrase="", source=None):
    """``search`` on ``recipe`` is refused in one line and the runs dir is byte-for-byte unchanged."""
    before = snapshot(runs)
    line = assert_refused(run_cli("search", recipe, "--runs-dir", runs, "--no-progress"),
                          source=source or str(recipe), field=field, phrase=phrase)
    assert snapshot(runs) == before
    return line


def test_a_missing_model_path_is_refused_before_anything_is_written(tmp_path, runs):
    recipe = tiny_recipe(tmp_path, tmp_path / "no-such-model")
    refused_start(recipe, runs, field="model.spec", phrase="no such model path")


GSM8K_RECORDS = [{"question": f"What is {i} + 1?", "answer": f"{i} + 1 = {i + 1}\n#### {i + 1}"} for i in range(6)]


def gsm8k_recipe(tmp_path, model_dir, records, **params):
    """A small gsm8k run on its own JSONL lines (``records``: dicts, or raw strings for bad lines)."""
    data = tmp_path / "gsm8k.jsonl"
    data.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records))
    task = {"name": "gsm8k", "context_tokens": None,
            "params": {"data_file": str(data), "num_shots": 0, "max_new_tokens": 4, **params},
            "search": {"n": 1}, "heldout": {"n": 1}}
    recipe = tiny_recipe(tmp_path, model_dir, task=task, baselines=["uniform"],
                         optimizer={"name": "cma", "generations_per_group": 1, "popsize": 3},
                         budget={"target": 8, "expansions": []}, scorer={"name": "snapkv", "params": {"window": 4}})
    return recipe, data


def test_a_malformed_dataset_line_is_refused_and_the_corrected_recipe_then_starts(tmp_path, runs, tiny_model_dir):
    bad = list(GSM8K_RECORDS)
    bad[3] = {"question": "What is 2 + 2?", "answer": "four"}  # no "#### <number>"
    recipe, data = gsm8k_recipe(tmp_path, tiny_model_dir, bad)
    line = refused_start(recipe, runs, field="task", phrase=f"{data}:4: field 'answer'")
    assert "####" in line

    # The trap: the corrected recipe under the same name must not meet "already exists".
    recipe, _ = gsm8k_recipe(tmp_path, tiny_model_dir, GSM8K_RECORDS)
    started = run_cli("search", recipe, "--runs-dir", runs, "--no-progress")
    assert started.code == 0, started.stderr
    assert (runs / "tiny" / "report.md").exists()


def forbid(monkeypatch, attribute: str, what: str, *, method: bool = False) -> None:
    """Make the run's piece that owns ``attribute`` (a property, or a method) fail the test: a cheaper
    check must refuse the start before it is needed. The piece, not the experiment: every path to
    the weights, the instances or the training goes through it."""
    from evolalloc.pipeline.loaded_model import ModelHandle
    from evolalloc.pipeline.run_scorers import RunScorers
    from evolalloc.pipeline.task_splits import TaskSplits

    owner = {"loaded": ModelHandle, "instances": TaskSplits, "trained": RunScorers}[attribute]

    def used(self, *args):
        raise AssertionError(f"{what}: a cheaper check should have refused the start first")

    monkeypatch.setattr(owner, attribute, used if method else property(used))


def test_a_dataset_line_that_is_not_json_is_refused_before_anything_is_written(tmp_path, runs, tiny_model_dir,
                                                                               monkeypatch):
    forbid(monkeypatch, "loaded", "the model was loaded")  # the dataset is read with the tokenizer alone
    recipe, data = gsm8k_recipe(tmp_path, tiny_model_dir, [*GSM8K_RECORDS[:2], '{"question": "cut off'])
    refused_start(recipe, runs, field="task", phrase=f"{data}:3")


def test_an_unreachable_trial_store_is_refused_in_seconds_before_any_instance_or_model(tmp_path, runs, tiny_model_dir,
                                                                                       monkeypatch):
    """Issue 24: the store used to be reached only after minutes of model loading and prefill."""
    forbid(monkeypatch, "loaded", "the model was loaded")
    forbid(monkeypatch, "instances", "instances were drawn", method=True)
    recipe = tiny_recipe(tmp_path, tiny_model_dir, storage="postgresql://127.0.0.1:1/none")
    started = time.perf_counter()
    # Without psycopg installed the refusal names the missing driver; with it, the refused connection.
    refused_start(recipe, runs, field="storage", phrase="postgresql://127.0.0.1:1/none")
    assert time.perf_counter() - started < 5


def test_a_context_beyond_the_models_positions_is_refused_without_loading_it(tmp_path, runs, tiny_model_dir,
                                                                             monkeypatch):
    from evolalloc.pipeline.loaded_model import ModelHandle

    def no_model(self):
        raise AssertionError("the model was loaded: the check should read its config only")

    monkeypatch.setattr(ModelHandle, "loaded", property(no_model))
    task = {"name": "passkey", "context_tokens": 100000}
    recipe = tiny_recipe(tmp_path, tiny_model_dir, task=task)
    refused_start(recipe, runs, field="task.context_tokens",
                  phrase="100000 tokens do not fit the model's 2048 positions")


@pytest.mark.real_model
def test_a_context_beyond_the_bundled_models_positions_is_one_line_from_its_config_alone(tmp_path, runs, monkeypatch):
    from evolalloc.pipeline.loaded_model import ModelHandle

    def no_model(self):
        raise AssertionError("the model was loaded: the check should read its config only")

    monkeypatch.setattr(ModelHandle, "loaded", property(no_model))
    recipe = tmp_path / "long.yaml"
    recipe.write_text("name: long\ntask: {name: passkey, context_tokens: 100000}\nbudget: {target: 128}\n")
    refused_start(recipe, runs, field="task.context_tokens",
                  phrase="100000 tokens do not fit the model's 8192 positions")


def test_an_instance_that_overflows_the_positions_with_its_answer_is_refused(tmp_path, runs, tiny_model_dir):
    # No context_tokens to check up front: the prompt fits the tiny model's 2048 positions, the
    # 1900 answer tokens on top of it do not.
    recipe, _ = gsm8k_recipe(tmp_path, tiny_model_dir, GSM8K_RECORDS, num_shots=8, max_new_tokens=1900)
    refused_start(recipe, runs, field="task.context_tokens", phrase="beyond the model's 2048")


@pytest.mark.parametrize(
    "storage, phrase",
    [
        ("sqlite:////no/such/folder/study.db", "cannot open the database sqlite:////no/such/folder/study.db"),
        ("postgresql://evolalloc:secret@127.0.0.1:1/nothing",
         "cannot open the database postgresql://evolalloc:***@127.0.0.1:1/nothing"),
        ("mysqll://user@host/db", "not a usable database URL"),
    ],
)
def test_a_storage_that_cannot_be_opened_is_one_line_before_anything_is_written(tmp_path, runs, tiny_model_dir, storage,
                                                                                phrase):
    if storage.startswith("postgresql"):
        pytest.importorskip("psycopg",
                            reason="the PostgreSQL driver (evolalloc[postgres]) is needed to reach the server")
    recipe = tiny_recipe(tmp_path, tiny_model_dir, storage=storage)
    line = refused_start(recipe, runs, field="storage", phrase=phrase)
    assert "secret" not in line


def test_a_postgresql_url_without_its_driver_names_the_extra_to_install(tmp_path, runs, tiny_model_dir, monkeypatch):
    monkeypatch.setitem(sys.modules, "psycopg", None)  # as if psycopg were not installed
    recipe = tiny_recipe(tmp_path, tiny_model_dir, storage="postgresql://someone@db.example/studies")
    refused_start(recipe, runs, field="storage", phrase="pip install 'evolalloc[postgres]'")


def test_a_study_name_taken_in_the_storage_is_refused_before_anything_is_written(tmp_path, runs, tiny_model_dir):
    import optuna

    from evolalloc.search.store import open_storage

    shared = f"sqlite:///{tmp_path / 'shared.db'}"
    optuna.create_study(storage=open_storage(shared), study_name="tiny")  # the recipe's name
    recipe = tiny_recipe(tmp_path, tiny_model_dir, storage=shared)
    refused_start(recipe, runs, field="study_name", phrase="already exists")


def test_another_run_name_is_another_study_in_a_shared_storage(tmp_path, tiny_model_dir):
    """--name renames the study too: a second run of the same recipe on a shared store starts."""
    import optuna

    from evolalloc.config.recipe import load_recipe
    from evolalloc.config.run_folder import load_run_recipe
    from evolalloc.pipeline.start import prepare_run
    from evolalloc.search.store import open_storage

    shared = f"sqlite:///{tmp_path / 'shared.db'}"
    optuna.create_study(storage=open_storage(shared), study_name="tiny")  # the recipe's own name is taken
    recipe = load_recipe(tiny_recipe(tmp_path, tiny_model_dir, storage=shared))
    prepared = prepare_run(recipe, tmp_path / "runs", "tiny-again", progress=False)
    prepared.experiment.close()  # a prepared run's holder closes it
    run_dir = prepared.run_dir
    assert load_run_recipe(run_dir).name == "tiny-again"  # resume finds the same study by this name
    names = {s.study_name for s in optuna.get_all_study_summaries(storage=open_storage(shared))}
    assert names == {"tiny", "tiny-again"}


@pytest.fixture
def started_run(tmp_path, tiny_model_dir):
    """A run folder as ``search`` leaves it before its first evaluation (folder, study, checkpoint)."""
    from evolalloc.config.recipe import load_recipe
    from evolalloc.pipeline.start import prepare_run

    recipe, _ = gsm8k_recipe(tmp_path, tiny_model_dir, GSM8K_RECORDS)
    prepared = prepare_run(load_recipe(recipe), tmp_path / "runs", progress=False)
    prepared.experiment.close()
    return prepared.run_dir


def test_resume_on_a_truncated_checkpoint_names_the_file_and_the_way_to_recover(started_run):
    checkpoint = started_run / "search_checkpoint.json"
    checkpoint.write_bytes(checkpoint.read_bytes()[:25])
    before = snapshot(started_run)
    line = assert_refused(run_cli("resume", started_run, "--no-progress"), source=str(checkpoint),
                          field="corrupt or truncated search checkpoint", phrase="delete this file")
    assert snapshot(started_run) == before
    assert f"evolalloc resume {started_run}" in line

    checkpoint.unlink()  # the way out the message names: the search is rebuilt from the study
    resumed = run_cli("resume", started_run, "--no-progress")
    assert resumed.code == 0, resumed.stderr
    assert (started_run / "allocation-c8.json").exists()


@pytest.mark.parametrize("name", ["search_checkpoint.pkl", "search_checkpoint.json"])
def test_resume_refuses_a_crafted_pickle_checkpoint_without_running_it(tmp_path, started_run, name):
    import pickle

    marker = tmp_path / "pwned"

    class Payload:
        def __reduce__(self):  # unpickling this would create the marker file
            return (open, (str(marker), "w"))

    (started_run / "search_checkpoint.json").unlink()
    (started_run / name).write_bytes(pickle.dumps(Payload()))
    before = snapshot(started_run)
    line = assert_refused(run_cli("resume", started_run, "--no-progress"), source=str(started_run / name), field="")
    assert ("can run arbitrary code" in line) if name.endswith(".pkl") else ("not JSON" in line)
    assert not marker.exists()
    assert snapshot(started_run) == before


def test_a_bad_search_setting_with_scorer_train_is_refused_before_any_weight_is_loaded(tmp_path, runs, tiny_model_dir,
                                                                                       monkeypatch):
    """Issue 21: ``scorer.train`` keys its checkpoint by the model's weights, so building the scorer
    used to load them (and draw the search split) before the search settings were checked."""
    forbid(monkeypatch, "loaded", "the model was loaded")
    forbid(monkeypatch, "instances", "instances were drawn", method=True)
    forbid(monkeypatch, "trained", "the in-run training was set up")
    monkeypatch.setenv("EVOLALLOC_CACHE", str(tmp_path / "cache"))
    recipe = tiny_recipe(tmp_path, tiny_model_dir, scorer={"name": "gates", "train": {"steps": 2}},
                         optimizer={"name": "cma", "generations_per_group": 1, "options": {"no_such_option": 1}})
    refused_start(recipe, runs, field="optimizer.options", phrase="no_such_option")
    assert not (tmp_path / "cache").exists()  # nothing trained, nothing written to the cache either


def test_a_start_refused_after_its_experiment_exists_closes_it(tmp_path, tiny_model_dir, monkeypatch):
    """A check that fails once the experiment is made (here: the folder cannot be claimed, after the
    model is loaded) closes it — engine, Ray workers, temporary record folder — before the error
    goes up; nothing else would (the caller never gets the experiment)."""
    from evolalloc.config import run_folder
    from evolalloc.config.recipe import load_recipe
    from evolalloc.core.errors import UserError
    from evolalloc.pipeline.experiment import Experiment
    from evolalloc.pipeline.start import prepare_run

    closed = []
    close = Experiment.close
    monkeypatch.setattr(Experiment, "close", lambda self: closed.append(self) or close(self))

    def no_room(*args, **kwargs):
        raise UserError("no space left on device", field="runs_dir")

    monkeypatch.setattr(run_folder, "create_run_folder", no_room)
    recipe = load_recipe(tiny_recipe(tmp_path, tiny_model_dir))
    with pytest.raises(UserError, match="no space left"):
        prepare_run(recipe, tmp_path / "runs", progress=False)
    assert len(closed) == 1 and closed[0].recipe.name == "tiny"
    assert not (tmp_path / "runs" / "tiny").exists()


def test_start_run_closes_the_experiment_it_ran_before_the_report_and_returns_the_finished_run(
        tmp_path, tiny_model_dir, monkeypatch):
    from evolalloc.config.recipe import load_recipe
    from evolalloc.config.run_folder import REPORT_FILE
    from evolalloc.pipeline.experiment import Experiment
    from evolalloc.pipeline.start import start_run

    closed, folders = [], []
    close = Experiment.close
    # each close, with whether the report existed by then (the report needs no engine or record)
    monkeypatch.setattr(Experiment, "close",
                        lambda self: closed.append((self, (folders[0] / REPORT_FILE).exists())) or close(self))
    recipe = load_recipe(tiny_recipe(tmp_path, tiny_model_dir,
                                     optimizer={"name": "cma", "generations_per_group": 1, "popsize": 3}))
    finished = start_run(recipe, tmp_path / "runs", progress=False, on_folder=folders.append)
    assert folders == [finished.run_dir] and (finished.run_dir / REPORT_FILE).exists()
    assert closed == [(finished.experiment, False)]


def test_the_search_settings_are_made_once_per_experiment_and_a_variant_makes_its_own(tmp_path, tiny_model_dir):
    import dataclasses

    from evolalloc.config.recipe import load_recipe
    from evolalloc.pipeline.experiment import Experiment

    recipe = load_recipe(tiny_recipe(tmp_path, tiny_model_dir,
                                     optimizer={"name": "cma", "generations_per_group": 1, "popsize": 3}))
    with Experiment(recipe, progress=False) as experiment:
        config = experiment.search_config
        assert experiment.search_config is config and config.popsize_for(2) == 3
        other = dataclasses.replace(recipe, optimizer=dataclasses.replace(recipe.optimizer, popsize=5))
        variant = experiment.variant(other)
        assert variant.search_config.popsize_for(2) == 5 and experiment.search_config is config


def test_a_close_that_fails_after_the_comparison_still_leaves_the_report(tmp_path, tiny_model_dir, monkeypatch):
    from evolalloc.config.recipe import load_recipe
    from evolalloc.config.run_folder import REPORT_FILE
    from evolalloc.pipeline.experiment import Experiment
    from evolalloc.pipeline.start import start_run

    close = Experiment.close

    def failing_close(self):
        close(self)
        raise RuntimeError("ray shutdown failed")

    monkeypatch.setattr(Experiment, "close", failing_close)
    recipe = load_recipe(tiny_recipe(tmp_path, tiny_model_dir,
                                     optimizer={"name": "cma", "generations_per_group": 1, "popsize": 3}))
    with pytest.raises(RuntimeError, match="ray shutdown failed"):
        start_run(recipe, tmp_path / "runs", progress=False)
    assert (tmp_path / "runs" / "tiny" / REPORT_FILE).exists()  # the finished comparison was reported
