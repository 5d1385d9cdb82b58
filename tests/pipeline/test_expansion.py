"""Carrying a profile to larger budgets: the proportional and additive rules, and rule ``search``."""

import numpy as np
import pytest

from evolalloc.core.allocation import Allocation
from evolalloc.core.geometry import ModelGeometry
from evolalloc.engine.base import EvalResult
from evolalloc.pipeline.expansion import expand_profile

GEOMETRY = ModelGeometry(num_layers=4, num_query_heads=4, num_kv_heads=2, head_dim=8, max_positions=4096)


def profile(per_layer=(10, 20, 30, 20), target=20.0, granularity="layer"):
    budgets = np.repeat(np.asarray(per_layer)[:, None], 2, axis=1)
    return Allocation(model="m", geometry=GEOMETRY, target=target, granularity=granularity, budgets=budgets,
                      provenance={"method": "evolved"})


def test_additive_keeps_the_differences_and_proportional_the_ratios():
    source = profile()
    assert source.expand(80, rule="additive").budgets[:, 0].tolist() == [70, 80, 90, 80]
    assert source.expand(80, rule="proportional").budgets[:, 0].tolist() == [40, 80, 120, 80]


@pytest.mark.parametrize("rule", ["additive", "proportional"])
@pytest.mark.parametrize("granularity", ["layer", "head"])
def test_both_rules_hit_the_exact_total_and_never_lower_a_budget(rule, granularity):
    rng = np.random.default_rng(0)
    budgets = rng.integers(1, 60, size=(4, 2))
    if granularity == "layer":
        budgets[:, 1] = budgets[:, 0]
    source = Allocation(model="m", geometry=GEOMETRY, target=float(budgets.mean()), granularity=granularity,
                        budgets=budgets, provenance={"method": "evolved"}).complete()
    for target in (source.target + 0.5, 2 * source.target, 97.0):
        expanded = source.expand(target, rule=rule)
        assert expanded.total == expanded.target_total
        assert (expanded.budgets >= source.budgets).all()
        assert expanded.provenance["expansion_rule"] == rule


def test_an_unknown_rule_names_the_known_ones():
    with pytest.raises(ValueError, match="proportional, additive"):
        profile().expand(40, rule="cubic")


class FixedScores:
    """A search-split evaluator whose score is a function of the budgets it is handed."""

    def __init__(self, score):
        self.score, self.calls = score, 0

    def evaluate(self, budgets):
        self.calls += 1
        return [EvalResult(task_score=self.score(b)) for b in budgets]


def test_rule_search_ships_the_expansion_the_search_split_scores_higher():
    # Scores favour a flat profile (small spread): the additive expansion is flatter.
    spread = FixedScores(lambda b: 1.0 / (1.0 + float(b.max() - b.min())))
    shipped = expand_profile(profile(), [40, 80], "search", min_budget=1, search_evaluator=spread, echo=lambda _: None)
    assert spread.calls == 2  # one call per budget, both rules in one batch
    for budget, allocation in shipped.items():
        assert allocation.provenance["expansion_rule"] == "additive"
        scores = allocation.provenance["expansion_search_scores"]
        assert scores["additive"] > scores["proportional"]
        assert allocation.target == budget and allocation.total == allocation.target_total


def test_rule_search_prefers_the_papers_rule_on_a_tie():
    shipped = expand_profile(profile(), [40], "search", 1, FixedScores(lambda b: 0.5), echo=lambda _: None)
    assert shipped[40.0].provenance["expansion_rule"] == "proportional"


def test_rule_search_never_picks_from_a_failed_evaluation():
    class Failing:
        def evaluate(self, budgets):
            return [EvalResult(task_score=None, error="worker died") for _ in budgets]

    with pytest.raises(RuntimeError, match="worker died"):
        expand_profile(profile(), [40], "search", 1, Failing(), echo=lambda _: None)


def test_a_fixed_rule_needs_no_evaluator():
    shipped = expand_profile(profile(), [40, 80], "additive", 1)
    assert [a.budgets[0, 0] for a in shipped.values()] == [30, 70]


def test_a_run_with_rule_search_ships_the_rule_its_search_split_preferred(tmp_path, tiny_model_dir):
    """End to end on the tiny model: the expansion is scored on the search split (likelihood
    fitness), the winner shipped, and both scores kept in the allocation file."""
    import json

    import yaml

    from evolalloc.config.recipe import load_recipe
    from evolalloc.config.run_folder import create_run_folder
    from evolalloc.pipeline.run import search_run

    recipe_file = tmp_path / "recipe.yaml"
    recipe_file.write_text(yaml.safe_dump({
        "name": "tiny", "model": {"spec": str(tiny_model_dir)},
        "task": {"name": "passkey", "context_tokens": 160, "search": {"n": 2}, "heldout": {"n": 2}},
        "scorer": {"name": "snapkv", "params": {"window": 8}},
        "budget": {"target": 24, "expansions": [48, 96], "expansion_rule": "search"},
        "search_space": {"name": "layer_groups", "group_size": 4},
        "optimizer": {"name": "cma", "generations_per_group": 1, "popsize": 3},
        "engine": {"kind": "local", "threads": 1}, "baselines": ["uniform"], "seed": 0,
    }))
    recipe = load_recipe(recipe_file)
    run = create_run_folder(recipe, tmp_path / "runs")
    search_run(run, recipe, progress=False)
    from evolalloc.report.comparison import load_instance_scores

    kept = load_instance_scores(run / "comparison.json")["passkey"]  # every held-out score, for other paired tests
    assert set(kept) == {"evolved", "uniform"} and set(kept["evolved"]) == {24.0, 48.0, 96.0}
    assert all(len(per_uid) == 2 for per_uid in kept["uniform"].values())
    source = json.loads((run / "allocation-c24.json").read_text())
    for budget in (48, 96):
        shipped = json.loads((run / f"allocation-c{budget}.json").read_text())
        scores = shipped["provenance"]["expansion_search_scores"]
        # the two rules, and the search's start methods at that budget (optimizer.start: best)
        assert set(scores) == {"proportional", "additive", "start:uniform", "start:pyramid", "start:lukv"}
        assert all(0.0 <= s <= 1.0 for s in scores.values())
        order = list(scores)  # a tie goes to the earlier candidate (proportional first)
        picked = max(order, key=lambda r: (scores[r], -order.index(r)))
        rule = shipped["provenance"]["expansion_rule"]
        assert (rule if rule != "start" else f"start:{shipped['provenance']['start_method']}") == picked
        assert shipped["provenance"]["expanded_from_target"] == source["target"] == 24


def test_expand_only_carries_a_profile_upwards_and_refuses_totals_past_exact_integers():
    source = profile()
    with pytest.raises(ValueError, match="not above the searched target"):
        source.expand(source.target - 1)
    with pytest.raises(ValueError, match="tokens in all"):
        source.expand(1e17)  # once wrapped around int64 to budgets of 1
    with pytest.raises(ValueError, match="every unit must keep"):
        profile().expand(source.target, min_budget=int(source.target) + 1)
    smaller = source.rescale(source.target / 2)  # a curve's rows may go down; shipping never does
    assert smaller.total == smaller.target_total


def gates_profile(**provenance):
    source = profile()
    return Allocation(model="m", geometry=GEOMETRY, scorer="gates", target=source.target, budgets=source.budgets,
                      provenance={"method": "evolved", **provenance})


def test_topup_is_the_proportional_budgets_read_as_floors_of_the_searched_share():
    source = gates_profile()
    same = source.expand(source.target, rule="topup")
    assert (same.budgets == source.budgets).all()
    assert same.provenance["adapter_params"] == {"floor_fraction": 1.0}
    topped = source.expand(80, rule="topup")
    assert (topped.budgets == source.expand(80, rule="proportional").budgets).all()
    assert topped.provenance["adapter"] == "gate_floors" and topped.provenance["adapter_params"] == {
        "floor_fraction": 0.25
    }
    # Searched floors (gate_floors at fraction 0.5) stay the same tokens: 0.5 * 20/80.
    floors = gates_profile(adapter="gate_floors", adapter_params={"floor_fraction": 0.5}).expand(80, rule="topup")
    assert floors.provenance["adapter_params"] == {"floor_fraction": 0.125}


@pytest.mark.parametrize("source", [profile(), gates_profile(adapter="gate_prior")], ids=["snapkv", "gate_prior"])
def test_topup_refuses_profiles_without_the_gates_own_budgets(source):
    with pytest.raises(ValueError, match="topup"):
        source.expand(40, rule="topup")


def test_rule_search_scores_topup_for_gates_with_its_own_evaluator():
    static, own = FixedScores(lambda b: 0.5), FixedScores(lambda b: 0.75)
    seen = []

    def evaluator_for(candidate):
        seen.append(candidate.provenance["adapter"])
        return own

    shipped = expand_profile(gates_profile(), [40], "search", 1, static, echo=lambda _: None,
                             evaluator_for=evaluator_for)
    assert seen == ["gate_floors"] and static.calls == own.calls == 1
    assert shipped[40.0].provenance["expansion_rule"] == "topup"
    assert set(shipped[40.0].provenance["expansion_search_scores"]) == {"proportional", "additive", "topup"}
    # SnapKV's scores are not on one scale across layers: no topup candidate, whatever the evaluators.
    plain = expand_profile(profile(), [40], "search", 1, static, echo=lambda _: None, evaluator_for=evaluator_for)
    assert set(plain[40.0].provenance["expansion_search_scores"]) == {"proportional", "additive"} and len(seen) == 1


def test_rule_search_ships_a_start_method_at_the_larger_budget_when_it_beats_every_carried_profile():
    """issue 50: a converged profile carried by a rule can fall behind LU-KV profiled at c'; the run
    then ships that method's budgets at c' (as the space holds them), saying so in the provenance."""
    lukv = np.repeat(np.asarray([100, 60, 30, 10])[:, None], 2, axis=1)  # 50 per unit, bottom-heavy
    scores = FixedScores(lambda b: 1.0 if np.array_equal(b, lukv) else 0.5)
    out = expand_profile(profile(), [50], "search", 1, scores, echo=lambda line: None,
                         starts_at=lambda budget: {"uniform": np.full((4, 2), int(budget)), "lukv": lukv})
    shipped = out[50.0]
    assert np.array_equal(shipped.budgets, lukv) and shipped.total == shipped.target_total
    assert shipped.provenance["expansion_rule"] == "start" and shipped.provenance["start_method"] == "lukv"
    assert set(shipped.provenance["expansion_search_scores"]) == {"proportional", "additive", "start:uniform",
                                                                  "start:lukv"}
    assert scores.calls == 1  # every candidate at a budget in one evaluation


def test_rule_search_keeps_the_carried_profile_when_no_start_method_beats_it():
    carried = FixedScores(lambda b: 0.9 if b[0, 0] < b[2, 0] else 0.4)  # the searched shape, bottom light
    out = expand_profile(profile(), [40], "search", 1, carried, echo=lambda line: None,
                         starts_at=lambda budget: {"uniform": np.full((4, 2), int(budget))})
    assert out[40.0].provenance["expansion_rule"] in ("proportional", "additive")
