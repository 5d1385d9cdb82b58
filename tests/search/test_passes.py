"""``optimizer.passes``: the search visits every group again, from the profile the earlier passes found.

Issue 52 (results/decode-second-sweep): a decode-time search that stopped low gained when it was
searched a second time from its own shipped profile. These tests hold what a user gets from
``passes: 2`` in one run: the first pass is exactly the one-pass search, the second revisits the
groups bottom-up with fresh optimizers at G*, never ships below the first, is counted by the plan,
said in the report, and resumes after a kill to the profile of an uninterrupted run.
"""

from __future__ import annotations

import numpy as np
import pytest

from evolalloc.core.errors import UserError
from evolalloc.search import SearchConfig, run_search
from evolalloc.search.groupwise import GroupwiseAlgorithm
from evolalloc.search.loop import resume_search
from evolalloc.search.stopping import GroupSummary
from tests.search.fakes import HEADS, LAYERS, TARGET, ProfileEvaluator, SimulatedKill, small_config


def test_a_second_pass_visits_every_group_again_bottom_up(tmp_path):
    config = small_config(tmp_path, passes=2)
    result = run_search(tmp_path, ProfileEvaluator(), config, progress=False)
    space_groups = config.build_space().groups()
    assert [s.group for s in result.groups] == [0, 1, 2, 3]
    assert result.stop_rule == "3 generations per group (fixed, EvolKV's M); 2 passes over the groups"
    assert [(s.pass_number, s.space_group) for s in result.groups] == [(1, 0), (1, 1), (2, 0), (2, 1)]
    algorithm = GroupwiseAlgorithm(config)
    assert [list(u) for u in algorithm.groups] == [list(u) for u in space_groups] * 2
    assert len(result.history) == config.planned_evaluations() == 2 * SearchConfig(
        **{**config.to_dict(), "passes": 1}).planned_evaluations()


def test_the_first_pass_is_exactly_the_one_pass_search(tmp_path):
    one = run_search(tmp_path / "one", ProfileEvaluator(), small_config(tmp_path / "one"), progress=False)
    two = run_search(tmp_path / "two", ProfileEvaluator(), small_config(tmp_path / "two", passes=2), progress=False)
    first = [r for r in two.history if r.group < 2]
    assert [(r.key, r.ratios, r.fitness) for r in first] == [(r.key, r.ratios, r.fitness) for r in one.history]
    assert [s.to_dict()["best_fitness"] for s in two.groups[:2]] == [s.best_fitness for s in one.groups]


def test_the_second_pass_starts_at_the_first_passs_best_with_its_own_seed(tmp_path):
    config = small_config(tmp_path, passes=2)
    algorithm = GroupwiseAlgorithm(config)
    first_of = {}
    while not algorithm.done:
        group = algorithm.group
        candidates = algorithm.ask()
        if algorithm.generation == 0:
            first_of[group] = (algorithm.best_ratios.copy(), candidates)
        algorithm.tell([algorithm.score(c, ProfileEvaluator().evaluate([c.budgets])[0]) for c in candidates])
    best_then, second = first_of[2]  # pass 2's group 0: sampled around G* after pass 1, not around 1.0
    units = algorithm.groups[2]
    centre = np.mean([c.x for c in second], axis=0)
    assert np.abs(centre - best_then[units]).mean() < np.abs(centre - 1.0).mean()
    assert not np.allclose(best_then[units], 1.0)  # the first pass moved the group, so the test can tell
    # the other group's ratios in a pass-2 candidate are the first pass's best, not the start's
    other = algorithm.groups[1]
    np.testing.assert_allclose(second[0].ratios[other], best_then[other])
    # a fresh optimizer with its own seed: not pass 1's draws again
    pass_one = first_of[0][1]
    assert not np.allclose(pass_one[0].x - 1.0, second[0].x - centre)


def test_two_passes_never_ship_below_one_and_gain_on_a_profile_the_first_missed(tmp_path):
    one = run_search(tmp_path / "one", ProfileEvaluator(), small_config(tmp_path / "one"), progress=False)
    two = run_search(tmp_path / "two", ProfileEvaluator(), small_config(tmp_path / "two", passes=2), progress=False)
    assert two.groups[1].best_fitness == one.best_fitness  # where the first pass ended
    assert two.best_fitness > one.best_fitness  # the fake's optimum was not reached in one pass of 3 generations


@pytest.mark.parametrize("kill_at", [4, 6])  # 2 groups x 3 generations per pass: call 7 is pass 2's first
def test_a_kill_in_either_pass_resumes_to_the_profile_of_an_uninterrupted_run(tmp_path, kill_at):
    straight = run_search(tmp_path / "a", ProfileEvaluator(), small_config(tmp_path / "a", passes=2), progress=False)
    with pytest.raises(SimulatedKill):
        run_search(tmp_path / "b", ProfileEvaluator(kill_at_call=kill_at + 3), small_config(tmp_path / "b", passes=2),
                   progress=False)
    resumed = resume_search(tmp_path / "b", ProfileEvaluator(), progress=False)
    np.testing.assert_array_equal(resumed.best_budgets, straight.best_budgets)
    assert [r.key for r in resumed.history] == [r.key for r in straight.history]
    assert [s.to_dict() for s in resumed.groups] == [s.to_dict() for s in straight.groups]


def test_the_report_line_names_the_pass_and_the_group_revisited():
    later = GroupSummary(group=5, generations=4, evaluations=36, reason="no gain", start_fitness=1.0,
                         best_fitness=1.01, pass_number=2, space_group=1)
    assert later.line().startswith("group 6 (pass 2, group 2 again): 4 generations")
    assert GroupSummary.from_dict(later.to_dict()) == later
    one_pass = {"group": 1, "generations": 3, "evaluations": 27, "reason": "no gain", "start_fitness": 1.0,
                "best_fitness": 1.0}  # a checkpoint written before passes existed
    assert GroupSummary.from_dict(one_pass).line().startswith("group 2: 3 generations")


def test_passes_out_of_range_is_refused_naming_the_field():
    for bad in (0, 11):
        with pytest.raises(UserError, match="passes"):
            SearchConfig(num_layers=LAYERS, num_kv_heads=HEADS, target=TARGET, passes=bad)


def test_the_recipe_key_reaches_the_search(tmp_path):
    from evolalloc.config.recipe import load_recipe

    path = tmp_path / "r.yaml"
    path.write_text("task: {name: passkey}\nbudget: {target: 64}\noptimizer: {passes: 2}\n")
    recipe = load_recipe(path, check_names=False)
    config = SearchConfig.from_sections(target=64, search_space=recipe.search_space, optimizer=recipe.optimizer,
                                        num_layers=LAYERS, num_kv_heads=HEADS)
    assert config.passes == 2
    assert recipe.resolved.stop_words.endswith("; 2 passes over the groups")  # the report's settings line
    path.write_text("task: {name: passkey}\nbudget: {target: 64}\noptimizer: {passes: 11}\n")
    with pytest.raises(UserError) as err:
        load_recipe(path, check_names=False)
    assert err.value.field == "optimizer.passes" and err.value.source == str(path)
