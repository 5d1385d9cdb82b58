"""``GroupwiseAlgorithm`` on its own: the state machine both the loop and the service drive."""

from __future__ import annotations

import numpy as np
import pytest

from evolalloc.engine.base import EvalResult
from evolalloc.search import run_search
from evolalloc.search.groupwise import GroupwiseAlgorithm
from tests.search.fakes import ProfileEvaluator, profile_error, small_config


def drive(config, score) -> GroupwiseAlgorithm:
    algorithm = GroupwiseAlgorithm(config)
    while not algorithm.done:
        candidates = algorithm.ask()
        algorithm.tell([algorithm.score(c, score(c)) for c in candidates])
    return algorithm


def test_driving_the_algorithm_by_hand_gives_the_loops_result(tmp_path):
    config = small_config(tmp_path)
    loop = run_search(tmp_path / "run", ProfileEvaluator(), config, progress=False)
    algorithm = drive(config, lambda c: EvalResult(task_score=1.0 - profile_error(c.budgets) / 2))
    np.testing.assert_array_equal(algorithm.best_budgets, loop.best_budgets)
    assert algorithm.best_fitness == loop.best_fitness
    assert algorithm.position == (len(algorithm.groups), 0)


def test_ask_gives_the_same_generation_until_it_is_told(tmp_path):
    algorithm = GroupwiseAlgorithm(small_config(tmp_path))
    first, again = algorithm.ask(), algorithm.ask()
    assert [c.key for c in first] == [c.key for c in again]
    assert all(np.array_equal(a.x, b.x) for a, b in zip(first, again))


def test_tell_refuses_records_out_of_candidate_order(tmp_path):
    algorithm = GroupwiseAlgorithm(small_config(tmp_path))
    candidates = algorithm.ask()
    records = [algorithm.score(c, EvalResult(task_score=0.5)) for c in candidates]
    with pytest.raises(ValueError, match="candidate order"):
        algorithm.tell(records[::-1])
    assert algorithm.position == (0, 0)


def test_a_failed_candidate_is_a_fail_record_without_a_score_and_never_the_best(tmp_path):
    algorithm = GroupwiseAlgorithm(small_config(tmp_path))
    candidates = algorithm.ask()
    records = [algorithm.score(c, EvalResult(task_score=None, error="boom") if c.index == 0
                               else EvalResult(task_score=0.5)) for c in candidates]
    assert (records[0].state, records[0].fitness, records[0].error) == ("FAIL", None, "boom")
    algorithm.tell(records)
    assert algorithm.best_key is not None and algorithm.best_key[2] != 0
