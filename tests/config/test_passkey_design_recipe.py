"""The passkey row set of issue 21's design table (runs/design_passkey_evolved.yaml) re-uses the
number prose needle's query-aware gates and searches with the loop that won there."""

from __future__ import annotations

from pathlib import Path

from evolalloc.config.recipe import load_recipe

RUNS = Path(__file__).resolve().parents[2] / "runs"


def test_the_passkey_design_recipe_reuses_the_number_needles_gates_and_searches_them_6x4_in_one_group():
    passkey, number = load_recipe(RUNS / "design_passkey_evolved.yaml"), load_recipe(RUNS / "design_number_hybrid.yaml")
    # The same scorer section is the same trained-gates cache entry: no retraining for this table.
    assert passkey.scorer == number.scorer and passkey.scorer.name == "gates"
    ((task,),) = [[entry.name for entry in passkey.task_entries]]
    assert task == "passkey"  # the synthetic filler task; the gates' mixture is real text only
    assert "passkey" not in {t.name for t in passkey.scorer.train.tasks}
    assert passkey.task.heldout.n == 100 and passkey.task.search.n == 16
    assert (passkey.search_space.name, passkey.search_space.group_size) == ("layer_groups", 30)
    assert (passkey.optimizer.name, passkey.optimizer.popsize, passkey.optimizer.generations_per_group) == ("cma", 6, 4)
    assert passkey.budget.expansion_rule == "search" and len(passkey.budget.expansions) == 2
    assert all(c > passkey.budget.target for c in passkey.budget.expansions)
