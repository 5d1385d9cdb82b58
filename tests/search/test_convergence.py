"""The search runs each group until it converges, and starts from the best evaluated profile.

Issue 50: a starved search (2 generations per group) shipped a profile worse than one it could
have started from. These tests hold the two rules that fix that: the stopping rule (stop early on
a flat objective, keep going on a climbing one, never past the cap) and the start (the shipped
profile is never below the start on the search split; a kill mid-group resumes to the same profile).
"""

from __future__ import annotations

import numpy as np
import pytest

from evolalloc.engine.base import EvalResult
from evolalloc.search import run_search
from evolalloc.search.groupwise import START_GROUP, GroupwiseAlgorithm
from evolalloc.search.loop import resume_search
from evolalloc.search.optimizers.pycma import PycmaOptimizer
from evolalloc.search.stopping import CAP, FIXED, NO_GAIN, StopRule
from tests.search.fakes import HEADS, LAYERS, TARGET, ProfileEvaluator, SimulatedKill, profile_error, small_config


def drive(config, score, starts=None) -> GroupwiseAlgorithm:
    algorithm = GroupwiseAlgorithm(config)
    while not algorithm.done:
        if algorithm.starting:
            algorithm.set_start(algorithm.start_budgets(starts))
        candidates = algorithm.ask()
        algorithm.tell([algorithm.score(c, score(c)) for c in candidates])
    return algorithm


def converging(tmp_path, **overrides):
    return small_config(tmp_path, **{"generations": None, "max_generations": 12, "patience": 3,
                                     "tolerance": 1e-3, **overrides})


# -- the rule on its own ---------------------------------------------------------------------------
def test_the_fixed_rule_runs_exactly_m_generations():
    rule = StopRule(generations=4)
    assert [rule.reason([0.0] * (n + 1), ["tolfun"]) for n in range(1, 5)] == [None, None, None, FIXED]


def test_no_gain_over_patience_generations_stops_a_group_and_a_gain_keeps_it_going():
    rule = StopRule(patience=3, tolerance=0.01)
    assert rule.reason([0.5, 0.5, 0.5, 0.5], []) == NO_GAIN
    assert rule.reason([0.5, 0.5, 0.5, 0.52], []) is None  # gained 0.02 > 0.01 in the last 3
    assert rule.reason([0.5, 0.5, 0.5], []) is None  # only 2 generations ran: not yet patience


def test_a_group_that_has_found_nothing_yet_is_not_stopped_for_lack_of_gain():
    rule = StopRule(patience=2, max_generations=5)
    assert rule.reason([-np.inf, -np.inf, -np.inf], []) is None
    assert rule.reason([-np.inf] * 6, []) == CAP


def test_the_cap_is_named_only_for_a_group_still_gaining_when_it_stops():
    rule = StopRule(patience=2, max_generations=4, tolerance=0.01)
    assert rule.reason([0.1, 0.2, 0.3, 0.4, 0.5], []) == CAP  # gained in its last 2: not converged
    assert rule.reason([0.1, 0.2, 0.5, 0.5, 0.5], []) == NO_GAIN  # flat at the cap: converged as it stopped


def test_the_optimizers_own_criteria_stop_a_converging_group():
    assert StopRule().reason([0.1, 0.5], ["tolflatfitness"]) == "optimizer: tolflatfitness"


# -- the rule in the algorithm --------------------------------------------------------------------
def test_a_converging_search_stops_early_on_a_flat_objective(tmp_path):
    config = converging(tmp_path)
    algorithm = drive(config, lambda c: EvalResult(task_score=0.5))
    assert len(algorithm.summaries) == len(algorithm.groups)
    for summary in algorithm.summaries:
        assert summary.generations <= config.patience + 1 < config.max_generations
        assert summary.reason == NO_GAIN or summary.reason.startswith("optimizer")
        assert summary.gain in (None, 0.0)


def test_a_converging_search_keeps_going_on_a_climbing_objective(tmp_path):
    config = converging(tmp_path, patience=2, budget_rule="exact")  # exact: CacheScore is 1, the score alone counts
    # A smooth objective whose optimum (every searched ratio at 3.5) lies far from the uniform start
    # (1.0, step 0.3): generation after generation gains.
    algorithm = drive(config, lambda c: EvalResult(task_score=1.0 / (1.0 + float(np.sum((c.x - 3.5) ** 2)))))
    first = algorithm.summaries[0]
    assert first.generations > config.patience + 3
    assert first.best_fitness > 0.5


def test_every_group_stops_at_the_cap_at_the_latest(tmp_path):
    config = converging(tmp_path, max_generations=4, patience=3, tolerance=0.0)
    algorithm = drive(config, lambda c: EvalResult(task_score=1.0 - profile_error(c.budgets) / 2))
    assert all(s.generations <= 4 for s in algorithm.summaries)
    assert algorithm.evaluations_done <= config.planned_evaluations()


def test_the_total_shrinks_to_what_ran_when_groups_converge_early(tmp_path):
    config = converging(tmp_path)
    algorithm = drive(config, lambda c: EvalResult(task_score=0.5))
    assert algorithm.total_evaluations() == algorithm.evaluations_done < config.planned_evaluations()


def test_a_generation_of_ties_does_not_end_a_group_before_its_patience(tmp_path):
    """Review: pycma's tolfun fired after one generation whose candidates all tied (a discrete score), ending
    the group at once. Only the distribution's criteria stop a group now; the ties are the no-gain rule's."""
    config = converging(tmp_path, patience=3, budget_rule="exact")
    calls = {"n": 0}

    def score(c):  # generation 1 all tie at 0; from generation 2 on, more cache at the bottom scores higher
        calls["n"] += 1
        return EvalResult(task_score=0.0 if calls["n"] <= 8 else float(np.round(c.x[0], 1)))

    algorithm = drive(config, score)
    assert algorithm.summaries[0].generations > 1
    assert not algorithm.summaries[0].reason.startswith("optimizer")


def test_pycma_passes_on_its_distribution_criteria_only():
    optimizer = PycmaOptimizer(np.ones(4), 0.3, (0.0, 4.0), 6, seed=1)
    xs = optimizer.ask()
    optimizer.tell(xs, [0.0] * len(xs))  # a flat generation: pycma's tolfun fires, which is not a reason
    assert "tolfun" in optimizer.es.stop() and optimizer.stop_reasons() == []


# -- the start ------------------------------------------------------------------------------------
def start_profiles():
    """uniform, and a profile close to the fakes' hidden optimum (the better start)."""
    uniform = np.full((LAYERS, HEADS), int(TARGET))
    good = np.repeat(np.round(np.linspace(1.5, 0.5, LAYERS) * TARGET).astype(int)[:, None], HEADS, axis=1)
    return [uniform, good]


def test_the_start_is_evaluated_first_and_the_best_one_seeds_every_group(tmp_path):
    config = converging(tmp_path, start=("uniform", "good"))
    algorithm = GroupwiseAlgorithm(config)
    assert algorithm.starting and algorithm.position == (START_GROUP, 0)
    algorithm.set_start(algorithm.start_budgets(start_profiles()))
    start = algorithm.ask()
    assert [c.group for c in start] == [START_GROUP, START_GROUP]
    algorithm.tell([algorithm.score(c, EvalResult(task_score=1.0 - profile_error(c.budgets) / 2)) for c in start])
    assert algorithm.best_key == (START_GROUP, 0, 1) and set(algorithm.start_scores) == {"uniform", "good"}
    assert algorithm.start_scores["good"] > algorithm.start_scores["uniform"]
    first = algorithm.ask()  # group 0's generation 0 samples around the good start, not around 1.0
    units = algorithm.groups[0]
    centre = np.mean([c.x for c in first], axis=0)
    assert np.abs(centre - algorithm.space.encode(start_profiles()[1])[units]).mean() < \
        np.abs(centre - 1.0).mean()


def test_the_shipped_profile_is_never_below_the_start_on_the_search_split(tmp_path):
    """Every searched candidate scores worse than the start: the search ships the start itself."""
    config = converging(tmp_path, start=("uniform", "good"))
    good = start_profiles()[1]

    def score(c):
        return EvalResult(task_score=0.9 if np.array_equal(c.budgets, good) else 0.2)

    algorithm = drive(config, score, starts=start_profiles())
    np.testing.assert_array_equal(algorithm.best_budgets, good)
    assert algorithm.best_fitness == max(v for v in algorithm.start_scores.values())


def test_a_start_outside_the_spaces_bounds_is_evaluated_as_the_space_holds_it(tmp_path):
    config = converging(tmp_path, start=("lopsided",))
    lopsided = np.full((LAYERS, HEADS), int(TARGET))
    lopsided[0] = 10 * int(TARGET)  # ten times c, beyond the space's upper ratio bound of 4
    algorithm = GroupwiseAlgorithm(config)
    (held,) = algorithm.start_budgets([lopsided])
    assert held.max() <= np.ceil(algorithm.space.ratio_bounds[1] * TARGET)
    algorithm.set_start([held])
    assert np.array_equal(algorithm.ask()[0].budgets, held)


def test_a_start_the_space_changed_says_so_in_its_label(tmp_path):
    config = converging(tmp_path, start=("uniform", "per-head"))
    per_head = np.full((LAYERS, HEADS), int(TARGET))
    per_head[:, 0] += 8  # heads of one layer differ: a per-layer space holds their mean
    per_head[:, 1] -= 8
    result = run_search(tmp_path, ProfileEvaluator(), config, progress=False,
                        starts=lambda: [np.full((LAYERS, HEADS), int(TARGET)), per_head])
    labels = [r.label for r in result.history if r.group == START_GROUP]
    assert labels == ["uniform", "per-head (as the search space holds it)"]


def test_set_start_needs_one_profile_per_start_method(tmp_path):
    algorithm = GroupwiseAlgorithm(converging(tmp_path, start=("uniform", "good")))
    with pytest.raises(ValueError, match="2 start methods"):
        algorithm.set_start(start_profiles()[:1])


# -- through the loop: stored, resumed ----------------------------------------------------------
@pytest.mark.parametrize("kill_at", [1, 2, 4])
def test_a_kill_mid_search_resumes_to_the_profile_of_an_uninterrupted_run(tmp_path, kill_at):
    """Call 1 is the start's evaluation, later calls are generations of group 0 and after."""
    config = converging(tmp_path / "a", start=("uniform", "good"))
    straight = run_search(tmp_path / "a", ProfileEvaluator(), config, progress=False, starts=start_profiles)

    killed = converging(tmp_path / "b", start=("uniform", "good"))
    with pytest.raises(SimulatedKill):
        run_search(tmp_path / "b", ProfileEvaluator(kill_at_call=kill_at), killed, progress=False,
                   starts=start_profiles)
    asked = []
    resumed = resume_search(tmp_path / "b", ProfileEvaluator(), progress=False,
                            starts=lambda: asked.append(1) or start_profiles())
    np.testing.assert_array_equal(resumed.best_budgets, straight.best_budgets)
    assert [r.key for r in resumed.history] == [r.key for r in straight.history]
    assert [s.to_dict() for s in resumed.groups] == [s.to_dict() for s in straight.groups]
    assert resumed.start_scores == straight.start_scores
    assert len(asked) == (1 if kill_at == 1 else 0)  # the start's budgets come from the store once stored


def test_the_start_trials_are_stored_with_the_method_they_are(tmp_path):
    config = converging(tmp_path, start=("uniform", "good"))
    result = run_search(tmp_path, ProfileEvaluator(), config, progress=False, starts=start_profiles)
    start = [r for r in result.history if r.group == START_GROUP]
    assert [r.label for r in start] == ["uniform", "good"]
    assert max(result.start_scores, key=result.start_scores.get) == "good"
    # shipped_start names the start exactly when no searched candidate beat it
    assert (result.shipped_start == "good") == np.array_equal(result.best_budgets, start_profiles()[1])
    assert result.stop_rule.startswith("until converged")


def test_a_start_that_fails_alone_does_not_stop_the_search_but_a_broken_evaluator_does(tmp_path):
    from evolalloc.search.loop import EveryEvaluationFailed

    calls = []

    def start_only(budgets):  # the start's two profiles fail (its first call), every group's candidate scores
        calls.append(1)
        return "out of memory" if len(calls) <= 2 else None

    config = converging(tmp_path / "a", start=("uniform", "good"))
    result = run_search(tmp_path / "a", ProfileEvaluator(fail=start_only), config, progress=False,
                        starts=start_profiles)
    assert result.best_fitness is not None and not any(r.ok for r in result.history if r.group == -1)

    broken = ProfileEvaluator(fail=lambda budgets: "CUDA error")
    with pytest.raises(EveryEvaluationFailed, match="failed whole"):
        run_search(tmp_path / "b", broken, converging(tmp_path / "b", start=("uniform", "good")), progress=False,
                   starts=start_profiles)
    assert broken.batch_sizes == [2, 8]  # the start, then group 0's first generation: stopped there
