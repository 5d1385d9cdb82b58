"""``benchmarks/recipe_path.py`` counts room entries on a walk: its counting, on a made-up walk."""

from __future__ import annotations

import sys
from pathlib import Path

from tests.benchscripts import load_benchmark

ROOT = Path(__file__).resolve().parents[1]


tool = load_benchmark("recipe_path")
Call = tool.Call
RUN = "evolalloc.pipeline.run"

# search -> load_recipe (config) -> run_prepared -> resume_search, which calls back into run.py
# -> ship_and_compare -> ship -> expand (another room) and a run.py helper -> compare -> two engine calls in a
# row, and one call below the depth the tests cut at.
WALK = [
    Call(0, "evolalloc.cli.search_cmds", "search", None),
    Call(1, "evolalloc.config.recipe", "load_recipe", "evolalloc.cli.search_cmds"),
    Call(2, "evolalloc.config.recipe_reading", "read_yaml_file", "evolalloc.config.recipe"),
    Call(2, "evolalloc.config.recipe", "recipe_from_dict", "evolalloc.config.recipe"),
    Call(1, RUN, "run_prepared", "evolalloc.cli.search_cmds"),
    Call(2, "evolalloc.search.loop", "resume_search", RUN),
    Call(3, RUN, "allocate", "evolalloc.search.loop"),
    Call(2, RUN, "ship_and_compare", RUN),
    Call(3, RUN, "ship", RUN),
    Call(4, "evolalloc.pipeline.expansion", "expand_profile", RUN),
    Call(4, RUN, "allocation_name", RUN),
    Call(3, RUN, "compare", RUN),
    Call(4, "evolalloc.engine.local", "evaluate", RUN),
    Call(4, "evolalloc.engine.local", "evaluate", RUN),
    Call(5, "evolalloc.runtime.decode", "decode_batch", "evolalloc.engine.local"),
]


def test_a_room_is_entered_by_calls_from_another_module_and_consecutive_entries_are_one_stay():
    counts = tool.stays_per_module(WALK, depth=4)
    # run.py: entered by search, and again by the search's call back; calls within it are no entry
    assert counts[RUN] == 2
    assert counts["evolalloc.engine.local"] == 1  # two entries in a row: one stay
    assert counts["evolalloc.config.recipe"] == 1  # recipe_from_dict is called from recipe.py itself
    assert "evolalloc.runtime.decode" not in counts  # below the depth
    assert set(counts) == {m.module for m in WALK if m.depth <= 4}


def test_the_depth_cuts_the_walk_before_it_is_counted():
    assert tool.stays_per_module(WALK, depth=5)["evolalloc.runtime.decode"] == 1
    assert tool.stays_per_module(WALK, depth=2)[RUN] == 1  # the call back is at depth 3


def test_each_step_enters_run_py_once_plus_each_call_back_into_it():
    assert tool.step_entries(WALK, depth=4) == [("search", 2), ("ship", 1), ("compare", 1)]
    assert tool.step_entries(WALK, depth=2) == [("search", 1)]


def test_the_tree_marks_the_calls_that_enter_a_room_and_counts_repeats():
    lines = tool.tree_lines(WALK, depth=4)
    assert lines[0] == "> cli/search_cmds.py: search"
    assert lines[3] == "      config/recipe.py: recipe_from_dict"
    assert lines[-1] == "        > engine/local.py: evaluate  (x2)"


def probe(self, value, *args, **kwargs):
    """A call's frame, for ``handed_recipe`` to read its arguments."""
    return sys._getframe()


class Holder:
    def __init__(self, held):
        self.held = held


def test_the_recipes_path_is_the_calls_handed_the_recipe_or_what_holds_it_two_levels_deep():
    from evolalloc.config.recipe import load_recipe

    recipe = load_recipe(ROOT / "runs" / "quickstart.yaml", check_names=False)
    assert tool.carries_recipe(recipe) and tool.carries_recipe(recipe.resolved)
    # as the experiment holds it, and an object holding the experiment
    assert tool.carries_recipe(Holder(recipe)) and tool.carries_recipe(Holder(Holder(recipe)))
    assert not tool.carries_recipe(Holder(Holder(Holder(recipe))))
    assert not tool.carries_recipe(recipe.task) and not tool.carries_recipe(Holder(recipe.engine))  # a piece handed on
    assert not tool.carries_recipe(Holder)  # a class is not an object holding the recipe

    assert tool.handed_recipe(probe(None, recipe))
    assert tool.handed_recipe(probe(None, Holder(recipe)))
    assert tool.handed_recipe(probe(None, 1, 2, recipe)) and tool.handed_recipe(probe(None, 1, key=recipe))
    assert not tool.handed_recipe(probe(None, recipe.task, recipe.budget))
    # The recipe's own methods and properties read it where it is: ``self`` alone does not make a call the path's.
    assert not tool.handed_recipe(probe(recipe, 1)) and not tool.handed_recipe(probe(recipe.resolved, 1))
    assert tool.handed_recipe(probe(recipe, Holder(recipe)))


def test_a_tiny_search_enters_each_room_at_most_twice_and_run_py_once_per_step(tmp_path):
    """The real walk (``evolalloc search`` on the tool's tiny recipe, in this process): issue 37's
    criterion, kept so. Fails if a change sends the recipe back into a module a third time."""
    walk = tool.record_search(tool.tiny_run(tmp_path), tmp_path / "runs", sys.maxsize)
    stays = tool.stays_per_module(walk, sys.maxsize)
    assert "evolalloc.pipeline.experiment" in stays and "evolalloc.pipeline.run" in stays  # the walk saw the run
    assert {module: n for module, n in stays.items() if n > tool.MOST_STAYS} == {}
    steps = tool.step_entries(walk, sys.maxsize)
    assert [step for step, _ in steps] == ["ship", "compare", "report"] and all(n == 1 for _, n in steps)


def test_with_callables_followed_a_callback_holds_what_its_self_or_closure_holds(monkeypatch):
    from evolalloc.config.recipe import load_recipe

    recipe = load_recipe(ROOT / "runs" / "quickstart.yaml", check_names=False)
    holder = Holder(recipe)
    callbacks = [lambda: holder.held, Holder.__init__.__get__(holder), probe.__get__(holder)]
    assert not any(tool.carries_recipe(c) for c in callbacks)  # by default a callback is not looked into
    monkeypatch.setattr(tool, "FOLLOW_CALLABLES", True)
    assert all(tool.carries_recipe(c) for c in callbacks)
    task = recipe.task
    assert not tool.carries_recipe(lambda: task) and not tool.carries_recipe(len)  # a piece; a builtin
    assert tool.handed_recipe(probe(None, lambda: holder))
