"""The group-wise search (Algorithm 1) on fake evaluators with a known optimum."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import optuna
import pytest

from evolalloc.core.errors import UserError
from evolalloc.core.objective import cache_score, fitness_value
from evolalloc.search import default_popsize, run_search
from evolalloc.search.optimizers.pycma import PycmaOptimizer
from tests.search.fakes import HEADS, LAYERS, TARGET, MoreCacheIsBetter, ProfileEvaluator, profile_error, small_config


def test_the_population_follows_the_evolkv_formula():
    assert default_popsize(8) == 10  # 4 + floor(3 ln 8)
    assert default_popsize(4) == 8
    assert default_popsize(1) == 4


def test_the_search_moves_budgets_toward_the_hidden_optimum(tmp_path):
    evaluator = ProfileEvaluator()
    result = run_search(tmp_path, evaluator, small_config(tmp_path, generations=6), progress=False)
    uniform = np.full((LAYERS, HEADS), int(TARGET))
    assert profile_error(result.best_budgets) < 0.5 * profile_error(uniform)
    # bottom layers got more than the top ones, as the hidden profile wants
    assert result.best_budgets[:2].mean() > TARGET > result.best_budgets[-2:].mean()
    assert result.best_fitness == max(r.fitness for r in result.history)


def test_a_whole_generation_is_one_evaluator_call(tmp_path):
    evaluator = ProfileEvaluator()
    result = run_search(tmp_path, evaluator, small_config(tmp_path), progress=False)
    assert evaluator.batch_sizes == [8] * (2 * 3)  # 2 groups x 3 generations, population 8
    assert len(result.history) == 48 and result.evaluated == 48


def test_only_the_searched_group_differs_from_the_best_so_far(tmp_path):
    result = run_search(tmp_path, ProfileEvaluator(), small_config(tmp_path), progress=False)
    group0 = [r for r in result.history if r.group == 0]
    for r in group0:  # while group 0 is searched, layers 4-7 stay at c
        assert np.all(np.asarray(r.budgets)[4:] == TARGET)
    best0 = max(group0, key=lambda r: r.fitness)
    for r in (r for r in result.history if r.group == 1):  # then layers 0-3 stay at group 0's best
        np.testing.assert_array_equal(np.asarray(r.budgets)[:4], np.asarray(best0.budgets)[:4])


def test_fitness_is_the_task_score_times_the_cache_bonus_of_the_group(tmp_path):
    result = run_search(tmp_path, ProfileEvaluator(), small_config(tmp_path, generations=1), progress=False)
    for r in result.history:
        group_mean = np.asarray(r.budgets)[r.units].mean()
        assert r.group_mean_budget == pytest.approx(group_mean)
        assert r.cache_score == pytest.approx(cache_score(group_mean, TARGET))
        assert r.fitness == pytest.approx(fitness_value(r.task_score, group_mean, TARGET))
        if group_mean > TARGET:
            assert r.cache_score < 1.0


def test_cache_score_keeps_a_greedy_task_near_the_target_budget(tmp_path):
    # More cache always helps this task a little; only the CacheScore penalty stops it.
    with_penalty = run_search(tmp_path / "a", MoreCacheIsBetter(), small_config(tmp_path / "a", generations=6),
                              progress=False)
    without = run_search(tmp_path / "b", MoreCacheIsBetter(), small_config(tmp_path / "b", generations=6, lam=0.0),
                         progress=False)
    assert with_penalty.best_budgets.mean() < 1.15 * TARGET
    assert without.best_budgets.mean() > 1.3 * TARGET


def test_failed_and_nan_evaluations_are_fail_trials_and_the_search_goes_on(tmp_path, monkeypatch):
    def fail(budgets):  # crash on big bottom layers, NaN on small top layers
        if budgets[0, 0] > 1.3 * TARGET:
            return "out of memory"
        if budgets[-1, 0] < 0.8 * TARGET:
            return "nan"
        return None

    told = []
    original_tell = PycmaOptimizer.tell
    monkeypatch.setattr(PycmaOptimizer, "tell",
                        lambda self, xs, losses: told.append(list(losses)) or original_tell(self, xs, losses))
    result = run_search(tmp_path, ProfileEvaluator(fail=fail), small_config(tmp_path, generations=4), progress=False)

    failed = [r for r in result.history if not r.ok]
    assert {r.error for r in failed} == {"out of memory", "non-finite task score nan"}
    assert all(r.fitness is None and r.cache_score is None for r in failed)
    assert len(failed) < len(result.history)  # some finished
    assert result.best_fitness is not None and np.isfinite(result.best_fitness)
    # The optimizer was told None exactly for the failures, minus-fitness for the rest.
    flat = [loss for generation in told for loss in generation]
    assert len(flat) == len(result.history)
    for loss, r in zip(flat, result.history):
        assert loss is None if not r.ok else loss == pytest.approx(-r.fitness)


def test_the_study_is_an_ordinary_sqlite_optuna_study(tmp_path):
    result = run_search(tmp_path, ProfileEvaluator(fail=lambda b: "boom" if b[0, 0] > 1.3 * TARGET else None),
                        small_config(tmp_path, storage=None, generations=1), progress=False)
    assert (tmp_path / "study.db").exists()
    study = optuna.load_study(study_name="evolalloc", storage=f"sqlite:///{tmp_path / 'study.db'}")
    assert study.direction == optuna.study.StudyDirection.MAXIMIZE
    trials = study.get_trials()
    assert len(trials) == len(result.history) == 16
    completed = [t for t in trials if t.state == optuna.trial.TrialState.COMPLETE]
    assert study.best_value == pytest.approx(result.best_fitness)
    first = completed[0]
    assert set(first.params) <= {f"u{u:04d}" for u in range(LAYERS)}
    for key in ("group", "generation", "candidate", "task_score", "cache_score", "mean_budget", "budgets"):
        assert key in first.user_attrs
    for t in trials:
        if t.state == optuna.trial.TrialState.FAIL:
            assert t.value is None and t.user_attrs["error"] == "boom"
    assert study.user_attrs["optimizer_implementation"][0] == "cma"


@pytest.mark.parametrize("optimizer", ["optuna-cma", "optuna-tpe"])
def test_optuna_backends_improve_on_the_fake_objective(tmp_path, optimizer):
    result = run_search(tmp_path, ProfileEvaluator(), small_config(tmp_path, optimizer=optimizer, generations=5),
                        progress=False)
    uniform = np.full((LAYERS, HEADS), int(TARGET))
    # TPE's first 10 trials are uniform over the whole box, so ask less than of CMA-ES.
    assert profile_error(result.best_budgets) < 0.9 * profile_error(uniform)
    assert result.best_fitness > fitness_value(1.0 - profile_error(uniform) / 2, TARGET, TARGET)
    assert result.implementation[0] == ("cmaes" if optimizer == "optuna-cma" else "optuna")


def test_a_run_folder_holding_a_search_is_not_overwritten(tmp_path):
    run_search(tmp_path, ProfileEvaluator(), small_config(tmp_path, generations=1), progress=False)
    with pytest.raises(UserError, match="already holds a search"):
        run_search(tmp_path, ProfileEvaluator(), small_config(tmp_path, generations=1), progress=False)


def test_bad_settings_are_user_errors_naming_the_field():
    with pytest.raises(UserError, match="generations"):
        small_config("run", generations=0)
    with pytest.raises(UserError, match="cache_scope"):
        small_config("run", cache_scope="layer")
    with pytest.raises(UserError, match="did you mean"):
        small_config("run", optimizer="cmaa")


def test_the_search_loop_does_not_import_torch():
    code = ("import sys, evolalloc.search, evolalloc.search.optimizers as o; "
            "o.optimizer_names(); print('torch' in sys.modules, 'transformers' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]


def test_under_the_exact_rule_every_stored_candidate_costs_the_target_total(tmp_path):
    result = run_search(tmp_path, ProfileEvaluator(), small_config(tmp_path, budget_rule="exact"), progress=False)
    totals = {int(np.sum(r.budgets)) for r in result.history}
    assert totals == {int(TARGET * LAYERS * HEADS)}
    assert all(r.cache_score == pytest.approx(1.0) for r in result.history if r.ok)
    assert int(result.best_budgets.sum()) == int(TARGET * LAYERS * HEADS)


def test_an_unknown_budget_rule_is_refused(tmp_path):
    with pytest.raises(UserError, match="budget_rule.*cachescore, exact"):
        small_config(tmp_path, budget_rule="strict")


def test_a_search_whose_whole_first_generation_fails_stops_there_and_keeps_the_failures(tmp_path):
    evaluator = ProfileEvaluator(fail=lambda budgets: "Expected all tensors to be on the same device")
    with pytest.raises(RuntimeError, match="the first generation of the search's groups failed whole "
                                           r"\(8 of 8 evaluations; the first: Expected all tensors"):
        run_search(tmp_path, evaluator, small_config(tmp_path, storage=None, generations=3), progress=False)
    assert evaluator.batch_sizes == [8]  # one generation evaluated, not the whole search
    study = optuna.load_study(study_name="evolalloc", storage=f"sqlite:///{tmp_path / 'study.db'}")
    assert [t.state for t in study.get_trials()] == [optuna.trial.TrialState.FAIL] * 8


def test_a_first_generation_with_one_success_searches_on(tmp_path):
    calls = []

    def fail(budgets):  # all but the very first evaluation fail in the first generation
        calls.append(1)
        return None if len(calls) == 1 or len(calls) > 8 else "boom"

    result = run_search(tmp_path, ProfileEvaluator(fail=fail), small_config(tmp_path, generations=2), progress=False)
    assert result.evaluated == 32 and result.best_fitness is not None


def test_the_command_line_says_a_stopped_search_in_one_line_with_status_1(monkeypatch):
    import evolalloc.cli as cli
    from evolalloc.search.loop import EveryEvaluationFailed
    from evolalloc.search.store import TrialRecord
    from tests.clitools import run_cli

    failed = TrialRecord(group=0, generation=0, candidate=0, units=[0], ratios=[1.0], budgets=[[8]], mean_budget=8.0,
                         group_mean_budget=8.0, state="FAIL",
                         error="RuntimeError on x/0: CUDA error: out of memory\nCUDA kernel errors might be reported")

    def stopped(*args, **kwargs):
        raise EveryEvaluationFailed([failed])

    monkeypatch.setattr(cli, "main", stopped)
    result = run_cli("search", "anything.yaml")
    assert result.code == 1
    assert result.error_lines == [
        "error: the first generation of the search's groups failed whole (1 of 1 evaluations; the first: RuntimeError "
        "on x/0: CUDA error: out of memory) and nothing had scored before it: the search stopped rather than record "
        "the whole search as failures. Once the cause is fixed, search again under another --name (this run's trial "
        "store keeps the failures, and a resume would replay them)"]
